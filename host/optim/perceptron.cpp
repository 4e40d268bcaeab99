// crfx — ap: the averaged structured perceptron (Collins 2002; seed 002 Algorithm 1) on Viterbi
// decoding (Backend::viterbi, ties → smallest label).
//
// Per batch (batch_size = 1: per sentence, the classic algorithm): decode with the current w, then
//     Δ = Σ_{i∈B} f(x_i, y_i) − f(x_i, ŷ_i)      (Backend::feature_difference)
//     w ← w + Δ
// Averaging with the lazy trick (Daumé 2006): with t = 1, 2, … the update steps and
//     u ← u + (t − 1)·Δ   at step t,
// after T steps the average of the T weight vectors w_1 … w_T (w_t after step t) is
//     w_avg = w − u / T
// (w_t = w_0 + Σ_{j≤t} Δ_j, so Σ_t w_t / T = w_0 + Σ_j Δ_j·(T − j + 1)/T). Only the batch's
// support is touched per step; steps with Δ = 0 (no mistake) skip the updates. The final model is
// w_avg; the objective reported per epoch (and returned) is the full f of w_avg with the
// Objective's c1 and c2 (the perceptron does not use them). Passes: a Viterbi decode is counted as
// a forward-only evaluation (m/N per batch).
#include <cmath>
#include <limits>

#include "crfx/error.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class PerceptronTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    check_loss("ap", obj.loss());  // the perceptron minimises no loss
    Backend& b = obj.backend();
    const BackendCorpus& corpus = obj.corpus();
    const std::size_t n = corpus.num_sentences();
    const double N = double(n);
    validate_stochastic_options(opt, opt.epochs);
    const std::size_t nw = w.size();
    VectorPtr u = b.vector(nw), avg = b.vector(nw);
    SparseVectorPtr delta = sparse_gradients(b).sparse_vector();
    std::vector<std::uint32_t> labels(corpus.num_tokens());  // ≥ the tokens of any span
    EpochShuffler shuffler(n, opt.seed);
    Stopwatch clock;
    double t = 0;  // update steps so far
    double f = std::numeric_limits<double>::quiet_NaN();
    bool have_avg = false;

    int epoch = 0;
    auto average = [&] {  // w_avg = w − u/T
      b.copy(w, *avg);
      b.axpy(-1.0 / t, *u, *avg);
      have_avg = true;
    };
    std::size_t done = 0;  // sentences of epoch `epoch` processed: 0 after an epoch's end
    // The state after an epoch's report (which shows the averaged weights; w and u go on), or
    // inside epoch `epoch` after `done` sentences (a stop requested by the poll; the shuffler holds
    // the epoch's permutation). The average is derived: restoring recomputes it.
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, epoch, obj, clock);
      ar.value("epoch.sentences_done", done);
      if (ar.restoring() && done >= n) throw Error("checkpoint: ap's position in the epoch is beyond the corpus");
      ar.value("f", f);
      ar.value("t", t);
      shuffler.state(ar);
      ar.vector("w", b, w);
      ar.vector("u", b, *u);
      if (ar.restoring()) average();
    };
    restore(state);

    stop_reason_ = stop_at_limit("epochs", opt.epochs);
    for (epoch += done > 0 ? 0 : 1; epoch <= opt.epochs; ++epoch) {
      if (done == 0) shuffler.next();  // (resumed inside the epoch: its permutation is restored)
      const std::vector<std::uint32_t>& perm = shuffler.permutation();
      for (std::size_t start = done; start < n; start += opt.batch_size) {
        const std::size_t m = std::min(opt.batch_size, n - start);
        const SentenceSpan span{perm.data() + start, m};
        b.viterbi(corpus, w, span, labels.data(), nullptr);
        obj.add_passes(double(m) / N);
        t += 1;
        if (sparse_gradients(b).feature_difference(corpus, span, labels.data(), *delta, 1.0) != 0) {
          sparse_gradients(b).sparse_axpy(1.0, *delta, w);
          if (t > 1) sparse_gradients(b).sparse_axpy(t - 1, *delta, *u);
        }
        done = start + m;
        if (done < n && stop_requested()) {  // stop inside the epoch: the model is the average so far
          average();
          Progress pr = progress_within(epoch, done, n, obj, *avg, 0.0, clock);
          pr.state = &state;
          if (progress) progress(pr, *avg);
          b.copy(*avg, w);
          stop_reason_ = stop_by_caller();
          return std::numeric_limits<double>::quiet_NaN();
        }
      }
      done = 0;
      average();
      f = monitor_objective(obj, *avg);
      require_finite("ap", "epoch", epoch, f);
      Progress pr = progress_at(epoch, obj, *avg, f, kNoGradientNorm, 0.0, clock);
      pr.state = &state;
      if (progress && !progress(pr, *avg)) {
        stop_reason_ = stop_by_caller();
        break;
      }
    }
    if (have_avg) b.copy(*avg, w);
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_perceptron_trainer() { return std::make_unique<PerceptronTrainer>(); }

}  // namespace crfx
