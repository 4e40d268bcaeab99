// crfx — OWL-QN (Andrew & Gao 2007) for f(w) = h(w) + c1·‖w‖₁, h = NLL + c2·‖w‖².
//
// The three changes to L-BFGS (seed 000 §3.2): the pseudo-gradient ◇f replaces the gradient;
// the direction d = −H·◇f is constrained to the sign pattern of −◇f; every trial point of the
// backtracking line search is projected onto the orthant of the current point (ξ_i = sign(w_i),
// or sign(−◇f_i) where w_i = 0). The memory pairs use ∇h only. Acceptance (Andrew & Gao eq. 4):
// f(w_new) ≤ f(w) + γ·◇f(w)ᵀ(w_new − w), γ = 1e-4, halving the step.
//
// seq-exp with c1 > 0 (SeqExpOwlqn below). H = Σ_i 1/p_i is L^T per sentence at w = 0 (1e104 on
// CoNLL-2000, beyond the doubles on Spanish NER); the Objective minimises log(H + c2‖w‖²) where it
// can (crfx/trainer.hpp), but the L1 term cannot go inside the log — OWL-QN's orthant steps need
// h + c1‖w‖₁ — and a quasi-Newton model of H itself from w = 0 fails at once (its first step
// moves H from 3.7e104 to 3.7e86, the next finds no decrease a double can show). So OWL-QN on
// seq-exp runs in two phases: (1) L-BFGS on log(H + c2‖w‖²), without c1, to its own stopping
// test; (2) OWL-QN on H + c2‖w‖² + c1‖w‖₁ itself from there, where H is a few thousand. The
// objective is convex, so the start does not change the optimum, only the path. One progress
// stream: phase 2's iterations continue phase 1's numbering, --max-iterations bounds both
// together, and the objective reported switches from the log to H + c2‖w‖² + c1‖w‖₁ at the phase
// change. A checkpoint holds the phase and phase 1's last report (its end, in phase 2) before the
// phase's trainer's state.
#include <cmath>

#include "crfx/error.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/rules/rule_set.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class OwlqnTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    Backend& b = obj.backend();
    const double c1 = obj.c1();
    const std::size_t n = w.size();
    VectorPtr g = b.vector(n), x0 = b.vector(n), g0 = b.vector(n), pg = b.vector(n),
              d = b.vector(n), diff = b.vector(n);
    LbfgsHistory history(b, n, opt.memory);
    ImprovementTest improvement(opt.period, opt.delta);
    Stopwatch clock;
    int k = 0;
    double f = 0, f0 = 0, pgnorm = 0, xnorm = 0, step = 0;
    // The state after iteration k's report, before its stopping tests and memory update.
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, k, obj, clock);
      ar.value("f", f);
      ar.value("f0", f0);
      ar.value("pgnorm", pgnorm);
      ar.value("xnorm", xnorm);
      ar.vector("w", b, w);
      ar.vector("g", b, *g);
      ar.vector("x0", b, *x0);
      ar.vector("g0", b, *g0);
      ar.vector("pg", b, *pg);
      improvement.state(ar);
      history.state(ar);
    };

    const bool resumed = restore(state);
    if (!resumed) {
      f = obj.full(obj.value_and_gradient(w, *g), w);
      if (!std::isfinite(f)) throw Error("the objective is not finite at the starting point");
      map(b, OwlqnPseudoGradientRule{c1}, {w, *g, *pg});
      pgnorm = std::sqrt(b.norm2sq(*pg));
      if (gradient_small(kPseudoGradientRatio, pgnorm, std::sqrt(b.norm2sq(w)), opt.epsilon, stop_reason_))
        return f;
      b.scaled_copy(-1.0, *pg, *d);
      step = 1.0 / pgnorm;
      k = 1;
    }
    stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations);

    for (bool reported = resumed; opt.max_iterations <= 0 || k <= opt.max_iterations; ++k, reported = false) {
      if (!reported) {
        // x0, g0 take the current point over (swapped, not copied: every trial writes all of w
        // and g before reading them).
        b.swap(w, *x0);
        b.swap(*g, *g0);
        f0 = f;
        bool accepted = false;
        double a = step;
        for (int ls = 0; ls < opt.max_linesearch; ++ls, a *= 0.5) {
          b.add_scaled(*x0, a, *d, w);
          map(b, OwlqnProjectRule{}, {*x0, *pg, w});
          f = obj.full(obj.value_and_gradient(w, *g), w);
          const double decrease = b.sub_dot(w, *x0, *diff, *pg);  // ◇fᵀ(w − x0) < 0 along a descent direction
          if (std::isfinite(f) && decrease < 0 && f <= f0 + 1e-4 * decrease) {
            accepted = true;
            break;
          }
        }
        if (!accepted) {  // no decrease found: keep the last point and stop
          b.swap(*x0, w);
          b.swap(*g0, *g);
          f = f0;
          stop_reason_ = stop_at_line_search(opt.max_linesearch);
          break;
        }
        map(b, OwlqnPseudoGradientRule{c1}, {w, *g, *pg});
        pgnorm = std::sqrt(b.norm2sq(*pg));
        xnorm = std::sqrt(b.norm2sq(w));
        Progress pr = progress_at(k, obj, w, f, pgnorm, a, clock);
        pr.state = &state;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (stop_tests(kPseudoGradientRatio, pgnorm, xnorm, opt.epsilon, f, improvement, stop_reason_)) break;
      if (f0 - f <= kNoProgress * std::fabs(f0)) {  // at the limit of double precision
        stop_reason_ = "the objective no longer decreases in double precision";
        break;
      }
      history.push(w, *x0, *g, *g0);
      history.direction(*pg, *d);
      map(b, OwlqnConstrainRule{}, {*pg, *d});
      if (!(b.dot(*d, *pg) < 0)) {  // constrained direction vanished: steepest descent
        history.clear();
        b.scaled_copy(-1.0, *pg, *d);
        step = 1.0 / std::max(pgnorm, 1e-300);
      } else {
        step = 1.0;
      }
    }
    return f;
  }
};

/// OWL-QN with the seq-exp two-phase start where the loss is seq-exp and c1 > 0 (top), plain
/// OWL-QN otherwise.
class SeqExpOwlqn final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    OwlqnTrainer owlqn;
    if (obj.loss() != SequenceLoss::seq_exp || obj.c1() == 0) {
      owlqn.resume_from(resume_);
      resume_ = nullptr;
      owlqn.stop_when(stop_poll_);
      const double f = owlqn.train(obj, w, opt, progress);
      stop_reason_ = owlqn.stop_reason();
      return f;
    }
    int phase = 1, k1 = 0;
    double t1 = 0;
    StateArchive* resume = resume_;
    resume_ = nullptr;
    if (resume) {
      resume->value("owlqn.phase", phase);
      if (phase != 1 && phase != 2) throw Error("checkpoint: OWL-QN on seq-exp has no phase " + std::to_string(phase));
      resume->value("owlqn.k1", k1);  // phase 1's last report so far (its end, in phase 2)
      resume->value("owlqn.t1", t1);
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
          ar.value("owlqn.phase", ph);
          ar.value("owlqn.k1", k1);
          ar.value("owlqn.t1", t1);
          (*inner)(ar);
        };
      q.state = p.state ? &state : nullptr;
      return !progress || progress(q, x);
    };
    if (phase == 1) {
      Objective fit(obj.backend(), obj.corpus(), 0.0, obj.c2(), SequenceLoss::seq_exp);  // log(H + c2‖w‖²)
      fit.set_passes(obj.passes());
      const auto lbfgs = make_lbfgs_trainer();
      lbfgs->resume_from(resume);
      lbfgs->train(fit, w, opt, [&](const Progress& p, const Vector& x) { return phased(1, p, x); });
      obj.set_passes(fit.passes());
      if (lbfgs->stop_reason() == stop_by_caller()) {
        stop_reason_ = stop_by_caller();
        return obj.full(obj.value(w), w);
      }
      resume = nullptr;
    }
    TrainOptions rest = opt;
    if (opt.max_iterations > 0 && (rest.max_iterations = opt.max_iterations - k1) <= 0) {
      stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations) + " in phase 1 (L-BFGS on log(H + c2‖w‖²))";
      return obj.full(obj.value(w), w);
    }
    owlqn.resume_from(resume);
    const double f = owlqn.train(obj, w, rest, [&](const Progress& p, const Vector& x) { return phased(2, p, x); });
    stop_reason_ = "OWL-QN on H + c2‖w‖² + c1‖w‖₁ from iteration " + std::to_string(k1 + 1) + " (iterations 1–" +
                   std::to_string(k1) + ": L-BFGS on log(H + c2‖w‖²)): " + owlqn.stop_reason();
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_owlqn_trainer() { return std::make_unique<SeqExpOwlqn>(); }

}  // namespace crfx
