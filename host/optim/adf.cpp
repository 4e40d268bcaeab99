// crfx — adf: online gradient descent with frequency-adaptive per-feature learning rates (Sun,
// Wang & Li 2012, seed 003).
//
// Rates are per weight (γ_i, initial eta0); "feature k" of the paper is a weight of crfx's flat
// layout (attribute × label, transition, edge attribute × label pair). A weight counts as occurring
// in a step when it lies in the support of the step's batch (backend.hpp: the state row of every
// attribute that fires, all transitions, the blocks of the edge attributes that fire), so the L
// weights of an attribute always share one count and one rate: this is the same as per-attribute
// rates for state and edge features, and one shared rate for the transition block (touched by every
// sample: u = 1, it decays by adf_beta per window). Every q = max(1, N / adf_windows) sentences:
//     u_i = (steps of the window whose batch touched weight i) / (steps in the window)
//     γ_i ← (adf_alpha − u_i·(adf_alpha − adf_beta))·γ_i,   counts reset
// so frequent features slow down towards adf_beta, rare ones keep adf_alpha. With batch_size = 1
// a step is a sample, exactly the paper's rule.
//
// Objective and L2 prior: a step on batch B (m sentences) follows (1/m)·Σ_{i∈B} ∇NLL_i +
// (2·c2/N)·w (f(w)/N in expectation, as sgd-l1) with the per-weight rate: w_i ← w_i − γ_i·g_i on
// the support, and the decay w_i ← (1 − 2·c2·γ_i/N)·w_i of every weight applied lazily: the step
// count is the clock, each weight's stamp the step it was last brought up to, caught up (power of
// its own per-step factor — exact, since γ_i is constant within a window) before its batch is
// evaluated, and every weight is flushed before each rate update and at the end of each epoch.
// c1 is not used by the update (ADF is an L2 method) but is part of the reported objective.
// At batch size 1 the steps are queued and handed to the backend at a window's end, a stop or an
// epoch's end (GradientRunQueue, sgd_l1.hpp; CUDA: a few hundred steps a launch, issue 37).
#include <cmath>
#include <limits>
#include <tuple>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

void validate_adf(const TrainOptions& opt, double eta0, double coef) {
  validate_stochastic_options(opt, opt.epochs);
  if (!(eta0 > 0) || !std::isfinite(eta0))
    throw Error("adf: eta0 (the initial rate) must be a finite number > 0 (got " + std::to_string(eta0) + ")");
  if (!(opt.adf_alpha > 0 && opt.adf_alpha <= 1))
    throw Error("adf: adf_alpha must be in (0, 1] (got " + std::to_string(opt.adf_alpha) + ")");
  if (!(opt.adf_beta > 0 && opt.adf_beta <= 1))
    throw Error("adf: adf_beta must be in (0, 1] (got " + std::to_string(opt.adf_beta) + ")");
  if (opt.adf_windows < 1)
    throw Error("adf: adf_windows must be ≥ 1 (got " + std::to_string(opt.adf_windows) + ")");
  if (!(coef * eta0 < 1)) throw Error("adf: the L2 decay 1 − 2·eta0·c2/N is not positive: lower eta0");
}

class AdfTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    Backend& b = obj.backend();
    const BackendCorpus& corpus = obj.corpus();
    const std::size_t n = corpus.num_sentences();
    const double N = double(n), c2 = obj.c2();
    const double eta0 = opt.eta0.value_or(kDefaultEta0);
    const double coef = 2.0 * c2 / N;  // per-step L2 decay: 1 − coef·γ_i (γ_i ≤ eta0)
    validate_adf(opt, eta0, c2 > 0 ? coef : 0.0);

    const std::size_t nw = w.size();
    VectorPtr rate = b.vector(nw), count = b.vector(nw);
    VectorPtr stamp = c2 > 0 ? b.vector(nw) : nullptr;
    b.fill(*rate, eta0);
    SparseVectorPtr g = sparse_gradients(b).sparse_vector();
    const std::size_t window = std::max<std::size_t>(1, n / std::size_t(opt.adf_windows));
    std::size_t in_window = 0, steps_in_window = 0;
    GradientSteps shape;  // batch size 1: the steps in runs where the backend takes them
    shape.adf = true;
    shape.loss = obj.loss();
    shape.coef = coef;
    std::tie(shape.rate, shape.count, shape.stamp) = std::tuple(rate.get(), count.get(), stamp.get());
    GradientRunQueue runs(obj, w, shape, opt.batch_size == 1);
    double steps = 0;  // the lazy-decay clock
    EpochShuffler shuffler(n, opt.seed);
    Stopwatch clock;
    double f = std::numeric_limits<double>::quiet_NaN();

    int epoch = 0;
    std::size_t done = 0;  // sentences of epoch `epoch` processed: 0 after an epoch's end
    // The state after an epoch's report (every weight's decay brought up to `steps`), or inside
    // epoch `epoch` after `done` sentences (a stop requested by the poll; the stamps say how far
    // each weight's decay is, the shuffler holds the epoch's permutation).
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, epoch, obj, clock);
      ar.value("epoch.sentences_done", done);
      if (ar.restoring() && done >= n) throw Error("checkpoint: adf's position in the epoch is beyond the corpus");
      ar.value("f", f);
      ar.value("steps", steps);
      ar.value("in_window", in_window);
      ar.value("steps_in_window", steps_in_window);
      shuffler.state(ar);
      ar.vector("w", b, w);
      ar.vector("rate", b, *rate);
      ar.vector("count", b, *count);
      if (stamp) ar.vector("stamp", b, *stamp);
    };
    restore(state);

    stop_reason_ = stop_at_limit("epochs", opt.epochs);
    for (epoch += done > 0 ? 0 : 1; epoch <= opt.epochs; ++epoch) {
      if (done == 0) shuffler.next();  // (resumed inside the epoch: its permutation is restored)
      const std::vector<std::uint32_t>& perm = shuffler.permutation();
      for (std::size_t start = done; start < n; start += opt.batch_size) {
        const std::size_t m = std::min(opt.batch_size, n - start);
        const SentenceSpan span{perm.data() + start, m};
        if (runs.on()) {
          runs.push(span[0], steps, 0.0, 0.0);
        } else {
          if (c2 > 0) {  // the span's weights brought up to date first: g's indices are its support
            sparse_gradients(b).support(corpus, span, *g);
            map(b, LazyDecayRule{steps, coef}, {w, *stamp, *rate}, g.get());
          }
          sparse_gradients(b).evaluate_sparse_gradient(corpus, w, span, *g, 1.0 / double(m), c2 > 0, obj.loss());
          map(b, AdfStepRule{}, {w, *rate, *count}, g.get());
        }
        obj.add_passes(double(m) / N);
        steps += 1;
        ++steps_in_window;
        in_window += m;
        if (in_window >= window) {
          runs.take();
          if (c2 > 0) map(b, LazyDecayRule{steps, coef}, {w, *stamp, *rate});
          map(b, AdfRateRule{double(steps_in_window), opt.adf_alpha, opt.adf_beta}, {*rate, *count});
          in_window = steps_in_window = 0;
        }
        done = start + m;
        if (done < n && stop_requested()) {  // stop inside the epoch
          runs.take();
          Progress pr = progress_within(epoch, done, n, obj, w, eta0, clock);
          pr.state = &state;
          if (progress) progress(pr, w);
          if (c2 > 0) map(b, LazyDecayRule{steps, coef}, {w, *stamp, *rate});  // the model: decay applied
          stop_reason_ = stop_by_caller();
          return std::numeric_limits<double>::quiet_NaN();
        }
      }
      done = 0;
      runs.take();
      if (c2 > 0) map(b, LazyDecayRule{steps, coef}, {w, *stamp, *rate});
      f = monitor_objective(obj, w);
      require_finite("adf", "epoch", epoch, f, obj.loss());
      Progress pr = progress_at(epoch, obj, w, f, kNoGradientNorm, eta0, clock);
      pr.state = &state;
      if (progress && !progress(pr, w)) {
        stop_reason_ = stop_by_caller();
        break;
      }
    }
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_adf_trainer() { return std::make_unique<AdfTrainer>(); }

}  // namespace crfx
