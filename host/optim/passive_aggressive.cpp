// crfx — pa: CRFsuite's passive-aggressive trainer (Crammer, Dekel, Keshet, Shalev-Shwartz & Singer
// 2006, "Online Passive-Aggressive Algorithms", JMLR 7, §8 structured outputs with the cost-sensitive
// loss), as CRFsuite's lib/crf/src/train_passive_aggressive.c computes it.
//
// Per batch (batch_size = 1: per sentence, CRFsuite's algorithm): decode with the current w; if
// d = #{t : ŷ_t ≠ y_t} > 0, with Δ = f(x, y) − f(x, ŷ) (Backend::feature_difference),
//     ℓ = w·f(x, ŷ) − w·f(x, y) + √d   = −w·Δ + √d   (--error-sensitive 1, CRFsuite's default)
//       = −w·Δ + 1                                   (--error-sensitive 0)
//     τ = ℓ / ‖Δ‖²                       (--pa-type 0, PA)
//     τ = min(C, ℓ / ‖Δ‖²)               (--pa-type 1, PA-I, CRFsuite's default)
//     τ = ℓ / (‖Δ‖² + 1/(2C))            (--pa-type 2, PA-II)          C = --pa-c (CRFsuite's c)
//     w ← w + τ·Δ
// (‖Δ‖² = 0, possible only when the mislabeled tokens fire no feature: no update). With
// --averaging 1 (the default) the model is the average of the weights after every sentence, the
// perceptron's lazy averaging (MistakeDrivenTrainer): CRFsuite's average also counts the initial
// w = 0, which scales it by T/(T + 1) — the same decodes. An epoch's loss is Σ ℓ; training stops
// after an epoch whose mean loss Σ ℓ / n is below --epsilon (CRFsuite's epsilon; with crfx's default
// 1e-5: an epoch without mistakes) or after --epochs epochs. w·Δ is SparseDotRule over Δ's support
// (host/rules/peer_update.hpp), ‖Δ‖² Backend::sparse_penalty: both backends run it.
#include <algorithm>
#include <cmath>

#include "rules/rule_set.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class PassiveAggressiveTrainer final : public MistakeDrivenTrainer {
 public:
  PassiveAggressiveTrainer() : MistakeDrivenTrainer("pa") {}

 protected:
  bool averaged(const TrainOptions& opt) const override { return opt.averaging; }
  bool has_loss() const override { return true; }
  bool converged(double mean, double epsilon) const override { return mean < epsilon; }
  bool device_step(const TrainOptions& opt, PeerStep& step) const override {
    step.pa_type = opt.pa_type;
    step.c = opt.pa_c;
    step.error_sensitive = opt.error_sensitive;
    return true;
  }
  double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t wrong, const TrainOptions& opt,
                double& tau) override {
    const double margin = map_reduce(b, SparseDotRule{}, {w}, &delta);  // w·Δ ≤ 0: ŷ is the best path
    const double loss = passive_aggressive_loss(margin, wrong, opt.error_sensitive);
    tau = passive_aggressive_tau(opt.pa_type, loss, sparse_gradients(b).sparse_penalty(delta, 0.0, 1.0), opt.pa_c);
    if (tau != 0) sparse_gradients(b).sparse_axpy(tau, delta, w);
    return loss;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_passive_aggressive_trainer() { return std::make_unique<PassiveAggressiveTrainer>(); }

}  // namespace crfx
