// crfx — l2sgd: CRFsuite's SGD for the L2-regularised log-likelihood (CRFsuite 0.12,
// lib/crf/src/train_l2sgd.c): online steps at the rate of Pegasos (Shalev-Shwartz, Singer &
// Srebro 2007, "Pegasos: Primal Estimated sub-GrAdient SOlver for SVM", ICML, without its
// projection step, which CRFsuite omits), an offset t0 of that rate picked by a calibration on a
// sample (CRFsuite's, after Léon Bottou's sgd, http://leon.bottou.org/projects/sgd), and
// CRFsuite's stopping test and choice of the model.
//
// Scaling. CRFsuite minimises (train_l2sgd.c, its header comment)
//     f(w)/N = (λ/2)·‖w‖² + (1/N)·Σ_i NLL_i,   λ = 2·c2/N,
// which is crfx's objective Σ_i NLL_i + c2·‖w‖² divided by N: the same c2, as for lbfgs. The step
// on a sentence i, the t-th step of the run (t = 0, 1, … counted over all epochs):
//     η_t = 1/(λ·(t0 + t));   w ← (1 − η_t·λ)·w;   w ← w − η_t·∇NLL_i(w)
// with the gradient taken at the decayed weights, as CRFsuite orders it: "decay *= (1.0 - eta *
// lambda); gain = eta / decay;" then set_weights(w, decay) and the gradient added with that gain.
//
// The decay without O(#weights) per step. CRFsuite keeps w = decay·v and folds decay into v at
// each epoch's end. crfx uses sgd-l1's lazy L2 decay (sgd_l1.cpp, LazyDecayRule): Λ = Σ log(1 − η·λ)
// since the last flush and a stamp per weight; a step brings its sentence's support up to Λ (its
// own factor included) before the evaluation, and every weight is flushed at each epoch's end,
// where CRFsuite rescales. 1 − η·λ = 1 − 1/(t0 + t) ≤ 0 only at t = 0 with t0 ≤ 1 (a rate of
// N/(2·c2) or more): that factor is applied to every weight at once.
//
// An epoch visits the sentences in a new order (EpochShuffler, seeded, in place of CRFsuite's
// rand()). Its loss is CRFsuite's "Loss":
//     Σ_i NLL_i (each at the weights its step saw)  +  c2·‖w‖² (at the epoch's end)
// (CRFsuite: "sum_loss += 0.5 * lambda * norm2 * N") — not the objective at the epoch's final
// weights, which would cost a pass. It is the objective crfx reports (plus c1·‖w‖₁ when c1 > 0: c1
// takes no part in the steps), what the stopping test reads — CRFsuite's (f_{k−period} − f_k)/f_k <
// delta from epoch period + 1 on (ImprovementTest) — and what picks the model: the weights of the
// epoch with the least loss (CRFsuite's best_w), however the run ends.
//
// Calibration (l2sgd_calibration). The first S = min(N, calibration_samples) sentences of the first
// shuffle; their loss at the starting weights L0 = Σ_{i<S} NLL_i + (λ/2)·‖w‖²·S. A trial at rate η
// runs the steps above once over those S sentences, in order, from the starting weights, with
// t = 0 and t0 = 1/(λ·η), and scores Σ NLL_i + (λ/2)·‖w‖²·S. The trials: η = calibration_eta,
// multiplied by calibration_rate while a trial scores below L0 and fewer than
// calibration_candidates have; then from calibration_eta/calibration_rate, divided by it until
// calibration_candidates more have; at most calibration_max_trials − 1 trials (at least one), as
// CRFsuite counts them. The least finite score wins (below L0 or not) and t0 = 1/(λ·η_best). A trial
// whose loss stops being finite ends there (its score could only be non-finite). Then the run
// starts from the starting weights with t = 0, and its first epoch shuffles again, as CRFsuite's
// (dataset_shuffle in the calibration and in every epoch). CRFsuite starts from w = 0, where its
// L0's (λ/2)·‖w‖²·N is 0; crfx starts from the w it is given, and scores L0 as the trials are.
//
// Where the backend takes steps in runs (SparseGradients::gradient_steps; CUDA: a few hundred a
// launch, issue 37) the steps are queued with their η and Λ and the NLLs summed on the backend, in
// step order: settled (the run taken, the sum read back) before anything reads w or the sum — a
// flush, a stop, a trial's score — so a step waits for nothing. A trial in runs does all its S
// steps (the host's path stops at the first non-finite sum: either way the score is not finite).
//
// Effective passes: one sentence evaluated per step (1/N), L0's S/N, and each trial's steps.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void validate_l2sgd(const TrainOptions& opt, double c2, std::size_t n) {
  if (!(c2 > 0) || !std::isfinite(c2))
    throw Error("l2sgd: c2 must be a finite number > 0: its rate 1/(λ·(t0 + t)) needs λ = 2·c2/N > 0 (got " +
                number(c2) + ")");
  if (n == 0) throw Error("l2sgd: no training sentences");
  if (opt.epochs < 1) throw Error("l2sgd: the number of epochs must be ≥ 1 (got " + std::to_string(opt.epochs) + ")");
  if (!(opt.calibration_eta > 0) || !std::isfinite(opt.calibration_eta))
    throw Error("l2sgd: calibration_eta must be a finite number > 0 (got " + number(opt.calibration_eta) + ")");
  if (!(opt.calibration_rate > 0) || !std::isfinite(opt.calibration_rate))
    throw Error("l2sgd: calibration_rate must be a finite number > 0 (got " + number(opt.calibration_rate) + ")");
  if (opt.calibration_samples < 1)
    throw Error("l2sgd: calibration_samples must be ≥ 1 (got " + std::to_string(opt.calibration_samples) + ")");
  if (opt.calibration_candidates < 1)
    throw Error("l2sgd: calibration_candidates must be ≥ 1 (got " + std::to_string(opt.calibration_candidates) + ")");
  if (opt.calibration_max_trials < 1)
    throw Error("l2sgd: calibration_max_trials must be ≥ 1 (got " + std::to_string(opt.calibration_max_trials) + ")");
}

/// One run: its state and the steps of train_l2sgd.c — the lazy decay's flush, a step, the
/// calibration, the epoch's end — and the state a checkpoint keeps.
struct L2sgdRun {
  L2sgdRun(Objective& obj_, Vector& w_, const TrainOptions& opt_)
      : obj(obj_), b(obj_.backend()), corpus(obj_.corpus()), w(w_), opt(opt_), n(corpus.num_sentences()),
        N(double(n)), c1(obj_.c1()), c2(obj_.c2()), lambda(2.0 * c2 / N),  // CRFsuite: opt.lambda = 2. * opt.c2 / N
        stamp(b.vector(w_.size())), best(b.vector(w_.size())), g(sparse_gradients(b).sparse_vector()),
        device_sum(b.vector(1)), runs(obj_, w_, run_shape(obj_, *stamp, *device_sum), true), shuffler(n, opt_.seed),
        improvement(opt_.period, opt_.delta) {}

  /// l2sgd's steps in runs (GradientRunQueue, sgd_l1.hpp): the catch-up to Λ, w −= η·g, the NLLs
  /// summed on the backend.
  static GradientSteps run_shape(const Objective& obj, Vector& stamp, Vector& sum) {
    GradientSteps s;
    s.axpy = true;
    s.loss = obj.loss();
    s.stamp = &stamp;
    s.loss_sum = &sum;
    return s;
  }

  /// Every weight brought up to Λ; Λ and the stamps restart at 0.
  void flush() {
    settle();
    map(b, LazyDecayRule{Lambda, 0.0}, {w, *stamp, nullptr});
    b.fill(*stamp, 0.0);
    Lambda = 0;
  }

  /// The step on the sentence *id, the k-th of a run with offset `offset`; its NLL added to `sum`
  /// (in runs: the step queued, the sum continued on the backend until settle()).
  void step(const std::uint32_t* id, double offset, double k, double& sum) {
    const SentenceSpan span{id, 1};
    eta = 1 / (lambda * (offset + k));
    const double factor = 1.0 - eta * lambda;
    if (factor > 0) {
      Lambda += std::log1p(-eta * lambda);
    } else {  // t0 + k ≤ 1: a factor no log takes (CRFsuite's decay turns negative, or 0)
      flush();
      b.scale(factor, w);
    }
    obj.add_passes(1.0 / N);
    if (runs.on()) {
      if (!sum_at) b.write(*device_sum, &sum);
      sum_at = &sum;
      runs.push(*id, Lambda, eta, 0.0);
      return;
    }
    sparse_gradients(b).support(corpus, span, *g);
    map(b, LazyDecayRule{Lambda, 0.0}, {w, *stamp, nullptr}, g.get());
    sum += sparse_gradients(b).evaluate_sparse(corpus, w, span, *g, 1.0, true, obj.loss());
    sparse_gradients(b).sparse_axpy(-eta, *g, w);
  }

  /// The queued steps taken, their NLLs' sum brought back (before anything reads w or the sum).
  void settle() {
    if (!sum_at) return;
    runs.take();
    b.read(*device_sum, sum_at);
    sum_at = nullptr;
  }

  /// A calibration trial at `rate` over the first S sentences of `perm`, from the starting
  /// weights (kept in `best`): its score.
  double trial(const std::vector<std::uint32_t>& perm, std::size_t S, double rate) {
    b.copy(*best, w);
    b.fill(*stamp, 0.0);
    Lambda = 0;
    const double offset = 1.0 / (lambda * rate);
    double sum = 0;
    for (std::size_t i = 0; i < S; ++i) {
      step(perm.data() + i, offset, double(i), sum);
      if (!std::isfinite(sum)) return sum;  // overflowed: the trial is worse, however it would go on
    }
    flush();  // (runs: the sum settled; one that overflowed stays so)
    return sum + 0.5 * lambda * b.norm2sq(w) * double(S);
  }

  /// CRFsuite's l2sgd_calibration: the offset t0 of the best trial rate. Leaves w at the
  /// starting weights (kept in `best`), Λ and the stamps at 0.
  double calibrate() {
    const std::vector<std::uint32_t>& perm = shuffler.next();
    const std::size_t S = std::min(n, std::size_t(opt.calibration_samples));
    b.copy(w, *best);
    const double init = b.evaluate(corpus, w, {perm.data(), S}, nullptr, 1.0, obj.loss()) +
                        0.5 * lambda * b.norm2sq(w) * double(S);
    obj.add_passes(double(S) / N);
    int num = opt.calibration_candidates, trials = 1;
    bool dec = false;
    double rate = opt.calibration_eta, best_rate = opt.calibration_eta, best_loss = DBL_MAX;
    while (num > 0 || !dec) {
      const double value = trial(perm, S, rate);
      const bool ok = std::isfinite(value) && value < init;  // the rate lowers the loss
      if (ok) --num;
      if (std::isfinite(value) && value < best_loss) {
        best_loss = value;
        best_rate = rate;
      }
      if (!dec) {
        if (ok && num > 0) {
          rate *= opt.calibration_rate;
        } else {  // from below the first rate, downwards
          dec = true;
          num = opt.calibration_candidates;
          rate = opt.calibration_eta / opt.calibration_rate;
        }
      } else {
        rate /= opt.calibration_rate;
      }
      if (opt.calibration_max_trials <= ++trials) break;
    }
    b.copy(*best, w);
    b.fill(*stamp, 0.0);
    Lambda = 0;
    return 1.0 / (lambda * best_rate);
  }

  /// The epoch's end: the decay flushed, its loss f (CRFsuite's) and, when the least so far, its
  /// weights kept as the best.
  void end_epoch() {
    done = 0;
    flush();
    loss += 0.5 * lambda * b.norm2sq(w) * N;  // c2·‖w‖², as CRFsuite writes it
    if (c1 > 0) loss += c1 * b.norm1(w);
    f = loss;
    require_finite("l2sgd", "epoch", epoch, f, obj.loss());
    if (f < best_f) {
      best_f = f;
      best_epoch = epoch;
      b.copy(w, *best);
    }
  }

  /// The state after an epoch's report, before its stopping test (every weight's decay flushed:
  /// Λ and the stamps 0), or inside epoch `epoch` after `done` sentences (a stop requested by the
  /// poll): then Λ, the stamps and the epoch's loss so far too, the shuffler holding the epoch's
  /// permutation. The best epoch's weights are not saved where they are w's (at its own report).
  void state(StateArchive& ar) {
    common_state(ar, epoch, obj, clock);
    ar.value("epoch.sentences_done", done);
    if (ar.restoring() && done >= n) throw Error("checkpoint: l2sgd's position in the epoch is beyond the corpus");
    ar.value("t0", t0);
    ar.value("t", t);
    ar.value("eta", eta);
    ar.value("f", f);
    ar.value("epoch.loss", loss);
    ar.value("best.f", best_f);
    ar.value("best.epoch", best_epoch);
    improvement.state(ar);
    shuffler.state(ar);
    ar.vector("w", b, w);
    if (best_epoch > 0 && !(done == 0 && best_epoch == epoch)) ar.vector("best.w", b, *best);
    else if (ar.restoring() && best_epoch > 0) b.copy(w, *best);
    if (done > 0) {
      ar.value("Lambda", Lambda);
      ar.vector("stamp", b, *stamp);
    }
  }

  Objective& obj;
  Backend& b;
  const BackendCorpus& corpus;
  Vector& w;
  const TrainOptions& opt;
  const std::size_t n;
  const double N, c1, c2, lambda;
  VectorPtr stamp;  // Λ at each weight's last catch-up
  VectorPtr best;   // the best epoch's weights; during the calibration, the starting ones
  SparseVectorPtr g;
  VectorPtr device_sum;        // runs: the NLLs' sum on the backend
  GradientRunQueue runs;
  double* sum_at = nullptr;    // runs: the host's sum the device's continues (settle()), or none
  EpochShuffler shuffler;
  ImprovementTest improvement;
  Stopwatch clock;
  double Lambda = 0;  // Σ log(1 − η·λ) since the last flush
  double t0 = 0;      // the rate's offset, from the calibration
  double t = 0;       // steps of the run so far (CRFsuite's t)
  double eta = 0;     // the last step's rate
  double f = std::numeric_limits<double>::quiet_NaN();  // the last epoch's loss
  double loss = 0;    // the epoch's loss so far
  double best_f = std::numeric_limits<double>::infinity();
  int best_epoch = 0;    // 0: no epoch ended yet
  int epoch = 0;
  std::size_t done = 0;  // sentences of epoch `epoch` processed: 0 after an epoch's end
};

class L2sgdTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    check_loss("l2sgd", obj.loss());
    validate_l2sgd(opt, obj.c2(), obj.corpus().num_sentences());
    L2sgdRun r(obj, w, opt);
    const std::size_t n = r.n;
    const StateFn state = [&](StateArchive& ar) { r.state(ar); };
    if (!restore(state)) r.t0 = r.calibrate();
    const std::string calibrated = "; the rate calibrated to eta " + number(1.0 / (r.lambda * r.t0)) + " (t0 " +
                                   number(r.t0) + ")";

    for (;;) {
      if (r.done == 0) {  // (resumed inside an epoch: its permutation, loss and stamps are restored)
        // The stopping test of the last epoch's loss, here so that a resume from its report stops too.
        if (r.epoch > 0 && r.improvement.converged(r.f)) {
          stop_reason_ = r.improvement.reason() + calibrated;
          break;
        }
        if (r.epoch >= opt.epochs) {
          stop_reason_ = stop_at_limit("epochs", opt.epochs) + calibrated;
          break;
        }
        ++r.epoch;
        r.shuffler.next();
        r.loss = 0;
      }
      const std::vector<std::uint32_t>& perm = r.shuffler.permutation();
      for (std::size_t i = r.done; i < n; ++i) {
        r.step(perm.data() + i, r.t0, r.t, r.loss);
        r.t += 1;
        r.done = i + 1;
        if (r.done < n && stop_requested()) {  // stop inside the epoch
          r.settle();
          Progress pr = progress_within(r.epoch, r.done, n, obj, w, r.eta, r.clock);
          pr.state = &state;
          if (progress) progress(pr, w);
          if (r.best_epoch > 0) r.b.copy(*r.best, w);  // the model: the best epoch's weights
          else r.flush();                               // (none has ended: the decay applied)
          stop_reason_ = stop_by_caller();
          return std::numeric_limits<double>::quiet_NaN();
        }
      }
      r.end_epoch();
      Progress pr = progress_at(r.epoch, obj, w, r.f, kNoGradientNorm, r.eta, r.clock);
      pr.state = &state;
      if (progress && !progress(pr, w)) {
        stop_reason_ = stop_by_caller();
        break;
      }
    }
    if (r.best_epoch != r.epoch) r.b.copy(*r.best, w);  // CRFsuite: "Restore the best weights"
    return r.best_f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_l2sgd_trainer() { return std::make_unique<L2sgdTrainer>(); }

}  // namespace crfx
