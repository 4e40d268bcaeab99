// crfx — the sequential exp-loss in log space, and the two-phase start of the L1 trainers on it
// (declared and explained in optim/exp_loss.hpp).
#include "optim/exp_loss.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/trainers.hpp"

namespace crfx {

LogExpLoss log_seq_exp(Backend& b, const BackendCorpus& corpus, const Vector& w, Vector* r, double& passes,
                       bool per_sentence) {
  const std::size_t n = corpus.num_sentences();
  LogExpLoss out;
  if (!per_sentence) {
    if (r) b.fill(*r, 0.0);
    const double h = b.evaluate(corpus, w, all_sentences(corpus), r, 1.0, SequenceLoss::seq_exp);
    passes += 1;
    if (std::isfinite(h) && h > 0 && (!r || std::isfinite(b.norm_inf(*r)))) {
      if (r) b.scale(1.0 / h, *r);
      out.log_h = std::log(h);
      return out;
    }
    out.overflowed = true;
  }
  // In log space: −log p_i per sentence (forward passes), log H, then r = Σ_i D(i)·∇NLL_i.
  std::vector<double> nll(n);
  double top = -std::numeric_limits<double>::infinity();
  for (std::uint32_t i = 0; i < n; ++i) {
    nll[i] = b.evaluate(corpus, w, SentenceSpan{&i, 1}, nullptr, 1.0, SequenceLoss::seq_log);
    if (!std::isfinite(nll[i]))
      throw Error("seq-exp: −log p of sentence " + std::to_string(i + 1) + " is not finite");
    top = std::max(top, nll[i]);
  }
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::exp(nll[i] - top);
  out.log_h = n ? top + std::log(sum) : 0.0;
  passes += 1;
  if (!r) return out;
  b.fill(*r, 0.0);
  std::size_t evaluated = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const double d = std::exp(nll[i] - out.log_h);
    if (d == 0) continue;  // below the smallest double: nothing to add
    b.evaluate(corpus, w, SentenceSpan{&i, 1}, r, d, SequenceLoss::seq_log);
    ++evaluated;
  }
  passes += double(evaluated) / double(std::max<std::size_t>(n, 1));
  return out;
}

namespace {

class SeqExpStart final : public Trainer {
 public:
  SeqExpStart(const char* name, std::function<std::unique_ptr<Trainer>()> make) : name_(name), make_(std::move(make)) {}

  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    const auto inner = make_();
    Trainer& trainer = *inner;
    if (obj.loss() != SequenceLoss::seq_exp || obj.c1() == 0) {
      trainer.resume_from(resume_);
      resume_ = nullptr;
      trainer.stop_when(stop_poll_);
      const double f = trainer.train(obj, w, opt, progress);
      stop_reason_ = trainer.stop_reason();
      return f;
    }
    int phase = 1, k1 = 0;
    double t1 = 0;
    StateArchive* resume = resume_;
    resume_ = nullptr;
    if (resume) {
      resume->value("exp-start.phase", phase);
      if (phase != 1 && phase != 2)
        throw Error("checkpoint: " + std::string(name_) + " on seq-exp has no phase " + std::to_string(phase));
      resume->value("exp-start.k1", k1);  // phase 1's last report so far (its end, in phase 2)
      resume->value("exp-start.t1", t1);
    }
    // Each phase's reports, with the phase (and phase 2's offsets) in front of its state.
    auto phased = [&](int which, const Progress& p, const Vector& x) {
      Progress q = p;
      if (which == 1) {
        k1 = p.iteration;
        t1 = p.seconds;
      } else {
        q.iteration += k1;
        q.seconds += t1;
      }
      StateFn state;
      if (p.state)
        state = [&, which, inner = p.state](StateArchive& ar) {
          int ph = which;
          ar.value("exp-start.phase", ph);
          ar.value("exp-start.k1", k1);
          ar.value("exp-start.t1", t1);
          (*inner)(ar);
        };
      q.state = p.state ? &state : nullptr;
      return !progress || progress(q, x);
    };
    double f1 = 0;  // phase 1's objective at its end: log(H + c2‖w‖²)
    if (phase == 1) {
      Objective fit(obj.backend(), obj.corpus(), 0.0, obj.c2(), SequenceLoss::seq_exp);  // log(H + c2‖w‖²)
      fit.set_passes(obj.passes());
      const auto lbfgs = make_lbfgs_trainer();
      lbfgs->resume_from(resume);
      f1 = lbfgs->train(fit, w, opt, [&](const Progress& p, const Vector& x) { return phased(1, p, x); });
      obj.set_passes(fit.passes());
      if (lbfgs->stop_reason() == stop_by_caller()) {
        stop_reason_ = stop_by_caller();
        return f1;
      }
      resume = nullptr;
    }
    TrainOptions rest = opt;
    if (opt.max_iterations > 0 && (rest.max_iterations = opt.max_iterations - k1) <= 0) {
      if (phase == 1) {
        stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations) + " in phase 1 (L-BFGS on log(H + c2‖w‖²))";
        return f1;
      }
      rest.max_iterations = 1;  // resumed in phase 2 past a lowered limit: its state restored, no step more
    }
    trainer.resume_from(resume);
    const double f = trainer.train(obj, w, rest, [&](const Progress& p, const Vector& x) { return phased(2, p, x); });
    std::string why = trainer.stop_reason();
    if (opt.max_iterations > 0 && why == stop_at_limit("max-iterations", rest.max_iterations))
      why = stop_at_limit("max-iterations", opt.max_iterations);  // the run's limit, not phase 2's share
    stop_reason_ = std::string(name_) + " on H + c2‖w‖² + c1‖w‖₁ from iteration " + std::to_string(k1 + 1) +
                   " (iterations 1–" + std::to_string(k1) + ": L-BFGS on log(H + c2‖w‖²)): " + why;
    return f;
  }

 private:
  const char* name_;
  std::function<std::unique_ptr<Trainer>()> make_;
};

}  // namespace

std::unique_ptr<Trainer> with_seq_exp_start(const char* name, std::function<std::unique_ptr<Trainer>()> make) {
  return std::make_unique<SeqExpStart>(name, std::move(make));
}

}  // namespace crfx
