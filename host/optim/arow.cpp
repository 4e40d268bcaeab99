// crfx — arow: CRFsuite's AROW trainer (adaptive regularization of weight vectors: Crammer,
// Kulesza & Dredze 2009; for structured prediction Mejer & Crammer 2010), as CRFsuite's
// lib/crf/src/train_arow.c computes it: a Gaussian over the weights, mean μ (the model) and a
// diagonal covariance Σ (every Σ_jj starts at --variance).
//
// Per batch (batch_size = 1: per sentence, CRFsuite's algorithm): decode with μ; if
// d = #{t : ŷ_t ≠ y_t} > 0, with Δ = f(x, y) − f(x, ŷ) (Backend::feature_difference),
//     ℓ = −μ·Δ + d                           (the Hamming cost, not its root as in pa)
//     α = ℓ / (γ + Σ_j Δ_j²·Σ_jj)            γ = --gamma
//     μ_j ← μ_j + α·Σ_jj·Δ_j,   Σ_jj ← 1 / (1/Σ_jj + Δ_j²/γ)     for every j with Δ_j ≠ 0
// No averaging: the model is μ. An epoch's loss is Σ ℓ; training stops after an epoch whose mean
// loss is at most --epsilon (CRFsuite's test) or after --epochs epochs. The sums and the update
// are element rules over Δ's support (host/rules/peer_update.hpp): both backends run it.
#include "rules/rule_set.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class ArowTrainer final : public MistakeDrivenTrainer {
 public:
  ArowTrainer() : MistakeDrivenTrainer("arow") {}

 protected:
  bool averaged(const TrainOptions&) const override { return false; }
  bool has_loss() const override { return true; }
  bool converged(double mean, double epsilon) const override { return mean <= epsilon; }
  bool device_step(const TrainOptions& opt, PeerStep& step) const override {
    step.arow = true;
    step.gamma = opt.arow_gamma;
    step.variance = variance_.get();
    return true;
  }
  void prepare(Backend& b, std::size_t num_weights, std::size_t, const TrainOptions& opt) override {
    variance_ = b.vector(num_weights);
    b.fill(*variance_, opt.arow_variance);
  }
  double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t wrong, const TrainOptions& opt,
                double& tau) override {
    tau = 0;  // not w += τ·Δ (and arow does not average)
    const double loss = arow_loss(map_reduce(b, SparseDotRule{}, {w}, &delta), wrong);
    ArowUpdateRule rule;
    rule.alpha = arow_alpha(loss, opt.arow_gamma, map_reduce(b, ArowVarianceRule{}, {*variance_}, &delta));
    rule.gamma = opt.arow_gamma;
    map(b, rule, {w, *variance_}, &delta);
    return loss;
  }
  void own_state(StateArchive& ar, Backend& b) override { ar.vector("variance", b, *variance_); }

 private:
  VectorPtr variance_;
};

}  // namespace

std::unique_ptr<Trainer> make_arow_trainer() { return std::make_unique<ArowTrainer>(); }

}  // namespace crfx
