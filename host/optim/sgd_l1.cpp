// crfx — sgd-l1: mini-batch SGD with the cumulative L1 penalty (Tsuruoka et al. 2009; seed 000
// §3.3) and, optionally, the heuristic per-batch line search of Zhou et al. 2011 (Algorithm 1).
//
// Scaling. Seed 000 minimises L(λ) + C·Σ|λ_k| with L = Σ_i −log p (Eq. 3, 7, 8), and the
// per-sample objective is −log p + (C/N)·Σ|λ_k| (Eq. 14): C is exactly crfx's c1 (both sum the
// NLL over sentences, CRFsuite's convention). A step on a batch B of m sentences follows the
// gradient of the batch objective
//     (1/m)·Σ_{i∈B} NLL_i + (c1/N)·‖w‖₁ + (c2/N)·‖w‖²        (expectation f(w)/N)
// with η_k = η₀·α^(k/N) (Eq. 12; k = sentences processed before the batch, N = corpus size), so
// batch_size = 1 is exactly Tsuruoka's online algorithm. L1: the total penalty per weight grows by
// u += η_k·c1/N per step (Eq. 10) and the touched weights are clipped by SgdL1Rule
// (host/rules/sgd_l1_update.hpp).
//
// L2 (c2 > 0) without O(#weights) per step: per-weight last-update stamps with a cumulative
// log-decay. Every step multiplies all weights by d_k = 1 − 2·η_k·c2/N; instead the trainer keeps
// Λ = Σ_k log d_k and a stamp per weight (the Λ it was last brought up to), catches up the batch's
// support (w_i ·= exp(Λ − stamp_i)) before evaluating the batch, and flushes every weight at the
// end of each epoch (then Λ and the stamps restart at 0). The decay of step k is applied after its
// gradient/L1 step (w ← d_k·clip(w − η_k·g)), the order a lazy scheme gives naturally.
//
// Heuristic line search (Algorithm 1, Eq. 14): r(0) = η_k; the batch objective
//     l(w) = (1/m)·Σ_{i∈B} NLL_i + (c1/N)·Σ_{i∈S(B)} |w_i| + (c2/N)·Σ_{i∈S(B)} w_i²
// (active weights only) is evaluated at the current weights (from the forward-backward pass that
// gave the gradient) and after each of at most 3 trial updates (forward-only on the batch); the
// rate doubles while the trials are not worse than the initial value, and restarts from r(0)·0.5
// then halves once one is; the best trial rate is applied. Between trials the weights and the
// per-weight penalties q of the support are restored exactly from gathered copies. The search is
// SgdL1Search (host/rules/sgd_l1_search.hpp); at batch size 1 a backend may decide it on its
// device (SparseGradients::sgd_l1_search_step: the CUDA backend), u and Λ then a vector of two
// there, read back at an epoch's end or a stop. At batch size 1 the host decides each step's η
// (without the search also u and Λ) as below and queues the step (GradientRunQueue): the backend
// takes the queue at an epoch's end or a stop (SparseGradients::gradient_steps; CUDA: a few hundred
// steps a launch, the search's too; issue 37), bitwise the steps one at a time.
//
// Effective passes: (m forward-backward + m per forward-only trial) / N per step.
#include "optim/sgd_l1.hpp"

#include <cmath>
#include <limits>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_search.hpp"
#include "optim/trainers.hpp"

namespace crfx {

// ---- shared by the stochastic trainers ------------------------------------------------------

EpochShuffler::EpochShuffler(std::size_t n, std::uint64_t seed) : rng_(seed), perm_(n) {
  for (std::size_t i = 0; i < n; ++i) perm_[i] = std::uint32_t(i);
}

const std::vector<std::uint32_t>& EpochShuffler::next() {
  for (std::size_t i = perm_.size(); i > 1; --i) {
    const std::size_t j = std::size_t(rng_() % std::uint64_t(i));  // uniform in [0, i − 1]
    std::swap(perm_[i - 1], perm_[j]);
  }
  return perm_;
}

void EpochShuffler::state(StateArchive& ar) {
  ar.engine("shuffler.rng", rng_);
  const std::size_t n = perm_.size();
  ar.values("shuffler.permutation", perm_);
  if (perm_.size() != n) throw Error("checkpoint: the saved permutation is not of this corpus");
}

GradientRunQueue::GradientRunQueue(Objective& obj, Vector& w, const GradientSteps& shape, bool wanted)
    : obj_(obj), w_(w), shape_(shape) {
  on_ = wanted && sparse_gradients(obj.backend()).gradient_steps(obj.corpus(), {}, w, shape);
}

void GradientRunQueue::push(std::uint32_t sentence, double clock, double eta, double u) {
  ids_.push_back(sentence);
  clock_.push_back(clock);
  eta_.push_back(eta);
  u_.push_back(u);
}

void GradientRunQueue::push(std::uint32_t sentence, const SgdL1StepParams& search) {
  ids_.push_back(sentence);
  search_.push_back(search);
}

void GradientRunQueue::take(Vector* scalars) {
  if (ids_.empty()) return;
  GradientSteps s = shape_;
  if (s.line_search) {
    s.search = search_.data();
    s.scalars = scalars;
  } else {
    s.clock = clock_.data();
    s.eta = eta_.data();
    s.u = u_.data();
  }
  if (!sparse_gradients(obj_.backend()).gradient_steps(obj_.corpus(), {ids_.data(), ids_.size()}, w_, s))
    throw Error("internal: the backend refused a run of gradient steps it had accepted");
  ids_.clear();
  clock_.clear();
  eta_.clear();
  u_.clear();
  search_.clear();
}

double monitor_objective(Objective& obj, const Vector& w) {
  Backend& b = obj.backend();
  double f = b.evaluate(obj.corpus(), w, all_sentences(obj.corpus()), nullptr, 1.0, obj.loss());
  if (obj.c2() > 0) f += obj.c2() * b.norm2sq(w);
  if (obj.c1() > 0) f += obj.c1() * b.norm1(w);
  return f;
}

Progress progress_within(int epoch, std::size_t done, std::size_t total, Objective& obj, const Vector& w,
                         double step, const Stopwatch& clock) {
  Progress pr = progress_at(epoch, obj, w, std::numeric_limits<double>::quiet_NaN(), kNoGradientNorm, step, clock);
  pr.sentences = done;
  pr.epoch_sentences = total;
  return pr;
}

void validate_stochastic_options(const TrainOptions& opt, int epochs) {
  if (epochs < 1) throw Error("the number of epochs must be ≥ 1 (got " + std::to_string(epochs) + ")");
  if (opt.batch_size < 1) throw Error("the batch size must be ≥ 1");
}

// ---- sgd-l1 ----------------------------------------------------------------------------------

namespace {

void validate_sgd(const TrainOptions& opt, double eta0, int epochs, bool heuristic, double N, double c2) {
  validate_stochastic_options(opt, epochs);
  if (!(eta0 > 0) || !std::isfinite(eta0))
    throw Error("sgd: eta0 must be a finite number > 0 (got " + std::to_string(eta0) + ")");
  if (!(opt.alpha > 0 && opt.alpha <= 1))
    throw Error("sgd: alpha must be in (0, 1] (got " + std::to_string(opt.alpha) + ")");
  // The largest rate ever tried: η₀, or η₀/decay² with the line search.
  const double eta_max = heuristic ? eta0 / (SgdL1Search::kDecay * SgdL1Search::kDecay) : eta0;
  if (c2 > 0 && !(2 * eta_max * c2 / N < 1))
    throw Error("sgd: the L2 decay 1 − 2·eta·c2/N is not positive (eta0 = " +
                std::to_string(eta0) + ", c2 = " + std::to_string(c2) +
                ", N = " + std::to_string(N) + "): lower eta0");
}

/// The batch's gradient, scaled by 1/m, into g; with L2 (stamps) the batch's weights are brought
/// up to date first, and g's indices are then its support. Returns the batch's summed NLL where
/// `need_nll` (the line search's; without it the backend need not bring it back), else 0.
double batch_gradient(Objective& obj, Vector& w, Vector* stamp, double Lambda, SparseVector& g, SentenceSpan span,
                      bool need_nll) {
  Backend& b = obj.backend();
  const double M = double(span.count);
  if (stamp) {
    sparse_gradients(b).support(obj.corpus(), span, g);
    map(b, LazyDecayRule{Lambda, 0.0}, {w, *stamp, nullptr}, &g);
  }
  double nll = 0;
  if (need_nll)
    nll = sparse_gradients(b).evaluate_sparse(obj.corpus(), w, span, g, 1.0 / M, stamp != nullptr, obj.loss());
  else
    sparse_gradients(b).evaluate_sparse_gradient(obj.corpus(), w, span, g, 1.0 / M, stamp != nullptr, obj.loss());
  obj.add_passes(M / double(obj.corpus().num_sentences()));
  return nll;
}

/// The heuristic line search's rate for one batch (sgd_l1_search_on_host): `g` holds the batch's
/// gradient and `nll` its summed NLL at w; `u` is the L1 penalty per weight so far; `saved_w` is
/// scratch.
double search_rate(Objective& obj, Vector& w, const Vector* q, const SparseVector& g, SparseVector& saved_w,
                   SentenceSpan span, double nll, double eta, double u) {
  const double N = double(obj.corpus().num_sentences()), M = double(span.count);
  const SgdL1StepParams p = sgd_l1_step_params(eta, obj.c1(), obj.c2(), N, obj.loss());
  const SgdL1Search s = sgd_l1_search_on_host(obj.backend(), obj.corpus(), span, p, w, q, g, saved_w, nll, u);
  for (int trial = 0; trial < SgdL1Search::kTrials; ++trial) obj.add_passes(M / N);
  return p.rate[s.chosen_index()];
}

/// u and Λ where the heuristic line search's device steps keep them (SparseGradients::
/// sgd_l1_search_step): a backend vector of the two, written before such a step where the host
/// changed them and read back before the host reads them (an epoch's end, a stop) or steps itself
/// (the device's step refused).
struct DeviceScalars {
  DeviceScalars(double& u_, double& Lambda_) : u(u_), Lambda(Lambda_) {}
  double &u, &Lambda;
  VectorPtr v;
  bool on_device = false;  // v holds them, the host's copies are stale
  bool refused = false;    // the backend has no such step for this run: the host's path
  void to_device(Backend& b) {
    if (on_device) return;
    if (!v) v = b.vector(2);
    const double h[2] = {u, Lambda};
    b.write(*v, h);
    on_device = true;
  }
  void to_host(Backend& b) {
    if (!on_device) return;
    double h[2];
    b.read(*v, h);
    u = h[0];
    Lambda = h[1];
    on_device = false;
  }
};

/// The step of a one-sentence batch with the heuristic line search on the backend's device
/// (batch_gradient, the search and the update there); false where the backend has none.
bool step_on_device(Objective& obj, Vector& w, Vector* q, Vector* stamp, SparseVector& g, SparseVector& saved,
                    SentenceSpan span, double eta, DeviceScalars& ds) {
  Backend& b = obj.backend();
  const double N = double(obj.corpus().num_sentences());
  if (ds.refused || span.count != 1) return false;
  const SgdL1StepParams p = sgd_l1_step_params(eta, obj.c1(), obj.c2(), N, obj.loss());
  ds.to_device(b);
  if (!sparse_gradients(b).sgd_l1_search_step(obj.corpus(), span, p, w, q, stamp, *ds.v, g, saved)) {
    ds.refused = true;
    ds.to_host(b);
    return false;
  }
  for (int pass = 0; pass <= SgdL1Search::kTrials; ++pass) obj.add_passes(1.0 / N);
  return true;
}

/// The shape of sgd-l1's steps in runs (batch size 1).
GradientSteps sgd_steps(const Objective& obj, Vector* q, Vector* stamp, bool heuristic) {
  GradientSteps s;
  s.loss = obj.loss();
  s.q = q;
  s.stamp = stamp;
  s.line_search = heuristic;
  s.c1 = obj.c1();
  s.N = double(obj.corpus().num_sentences());
  return s;
}

/// A step at batch size 1 queued (runs): u and Λ advanced as the primitives' path below advances
/// them, or (the line search) step_on_device's step, u and Λ on the device.
void queue_step(Objective& obj, GradientRunQueue& runs, std::uint32_t sentence, double eta, bool heuristic, double& u,
                double& Lambda) {
  const double N = double(obj.corpus().num_sentences()), c1 = obj.c1(), c2 = obj.c2();
  if (heuristic) {
    for (int pass = 0; pass <= SgdL1Search::kTrials; ++pass) obj.add_passes(1.0 / N);
    runs.push(sentence, sgd_l1_step_params(eta, c1, c2, N, obj.loss()));
    return;
  }
  obj.add_passes(1.0 / N);
  const double clock = Lambda;
  u += eta * c1 / N;
  runs.push(sentence, clock, eta, u);
  if (c2 > 0) Lambda += std::log1p(-2.0 * eta * c2 / N);
}

/// The queued steps to the backend; the line search's with u and Λ on the device (ds).
void take_run(Backend& b, GradientRunQueue& runs, DeviceScalars& ds, bool heuristic) {
  if (heuristic) ds.to_device(b);
  runs.take(heuristic ? ds.v.get() : nullptr);
}

}  // namespace

double run_sgd_l1(Objective& obj, Vector& w, const TrainOptions& opt, int epochs, bool heuristic,
                  const ProgressFn& progress, bool* stopped, StateArchive* resume, const StopPoll* poll) {
  Backend& b = obj.backend();
  const std::size_t n = obj.corpus().num_sentences();
  const double N = double(n);
  const double c1 = obj.c1(), c2 = obj.c2();
  const double eta0 = opt.eta0.value_or(heuristic ? kDefaultEta0Heuristic : kDefaultEta0);
  validate_sgd(opt, eta0, epochs, heuristic, N, c2);
  if (stopped) *stopped = false;

  const std::size_t nw = w.size();
  VectorPtr q = c1 > 0 ? b.vector(nw) : nullptr;      // penalty each weight has received
  VectorPtr stamp = c2 > 0 ? b.vector(nw) : nullptr;  // Λ at each weight's last catch-up
  SparseVectorPtr g = sparse_gradients(b).sparse_vector();
  SparseVectorPtr saved_w = heuristic ? sparse_gradients(b).sparse_vector() : nullptr;  // line search: w restored
  double u = 0;       // total L1 penalty per weight so far (Eq. 10)
  double Lambda = 0;  // cumulative log L2 decay since the last flush
  DeviceScalars ds{u, Lambda};
  GradientRunQueue runs(obj, w, sgd_steps(obj, q.get(), stamp.get(), heuristic), opt.batch_size == 1);
  std::size_t k = 0;  // sentences processed
  EpochShuffler shuffler(n, opt.seed);
  Stopwatch clock;
  double f = std::numeric_limits<double>::quiet_NaN(), eta = eta0;
  int epoch = 0;
  std::size_t done = 0;  // sentences of epoch `epoch` processed: 0 after an epoch's end
  // The state after an epoch's report (`done` = 0; the lazy L2 decay is flushed there: Λ and the
  // stamps are 0), or inside epoch `epoch` after `done` sentences (a stop requested by the poll):
  // then Λ and the stamps too, and the epoch's permutation (the shuffler's).
  const StateFn state = [&](StateArchive& ar) {
    common_state(ar, epoch, obj, clock);
    ar.value("epoch.sentences_done", done);
    ar.value("f", f);
    ar.value("eta", eta);
    ar.value("u", u);
    ar.value("sentences", k);
    shuffler.state(ar);
    ar.vector("w", b, w);
    if (q) ar.vector("q", b, *q);
    if (done > 0 && stamp) {
      ar.value("Lambda", Lambda);
      ar.vector("stamp", b, *stamp);
    }
    if (ar.restoring() && done >= n) throw Error("checkpoint: sgd's position in the epoch is beyond the corpus");
  };
  if (resume) state(*resume);

  for (epoch += done > 0 ? 0 : 1; epoch <= epochs; ++epoch) {
    if (done == 0) shuffler.next();  // (resumed inside the epoch: its permutation is restored)
    const std::vector<std::uint32_t>& perm = shuffler.permutation();
    for (std::size_t start = done; start < n; start += opt.batch_size) {
      const std::size_t m = std::min(opt.batch_size, n - start);
      const SentenceSpan span{perm.data() + start, m};
      eta = eta0 * std::pow(opt.alpha, double(k) / N);  // Eq. 12
      if (runs.on()) {
        queue_step(obj, runs, span[0], eta, heuristic, u, Lambda);
      } else if (!(heuristic && step_on_device(obj, w, q.get(), stamp.get(), *g, *saved_w, span, eta, ds))) {
        const double nll = batch_gradient(obj, w, stamp.get(), Lambda, *g, span, heuristic);
        const double rate = heuristic ? search_rate(obj, w, q.get(), *g, *saved_w, span, nll, eta, u) : eta;
        u += rate * c1 / N;
        map(b, SgdL1Rule{rate, u, 0.0, 0.0, false}, {w, q.get()}, g.get());
        if (c2 > 0) Lambda += std::log1p(-2.0 * rate * c2 / N);
      }
      k += m;
      done = start + m;
      if (done < n && poll && *poll && (*poll)()) {  // stop inside the epoch
        take_run(b, runs, ds, heuristic);
        ds.to_host(b);
        Progress pr = progress_within(epoch, done, n, obj, w, eta, clock);
        pr.state = &state;
        if (progress) progress(pr, w);
        if (c2 > 0) map(b, LazyDecayRule{Lambda, 0.0}, {w, *stamp, nullptr});  // the model: decay applied
        if (stopped) *stopped = true;
        return std::numeric_limits<double>::quiet_NaN();
      }
    }
    done = 0;
    take_run(b, runs, ds, heuristic);
    ds.to_host(b);
    if (c2 > 0) {  // flush the lazy decay; restart Λ and the stamps at 0
      map(b, LazyDecayRule{Lambda, 0.0}, {w, *stamp, nullptr});
      b.fill(*stamp, 0.0);
      Lambda = 0;
    }
    f = monitor_objective(obj, w);
    require_finite(heuristic ? "sgd (heuristic line search)" : "sgd-l1", "epoch", epoch, f, obj.loss());
    Progress pr = progress_at(epoch, obj, w, f, kNoGradientNorm, eta, clock);
    pr.state = &state;
    if (progress && !progress(pr, w)) {
      if (stopped) *stopped = true;
      break;
    }
  }
  return f;
}

namespace {

class SgdL1Trainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    bool stopped = false;
    StateArchive* resume = resume_;
    resume_ = nullptr;
    const double f =
        run_sgd_l1(obj, w, opt, opt.epochs, opt.line_search == LineSearch::heuristic, progress, &stopped, resume,
                   &stop_poll_);
    stop_reason_ = stopped ? stop_by_caller() : stop_at_limit("epochs", opt.epochs);
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_sgd_l1_trainer() { return std::make_unique<SgdL1Trainer>(); }

}  // namespace crfx
