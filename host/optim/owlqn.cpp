// crfx — OWL-QN (Andrew & Gao 2007) for f(w) = h(w) + c1·‖w‖₁, h = NLL + c2·‖w‖².
//
// The three changes to L-BFGS (seed 000 §3.2): the pseudo-gradient ◇f replaces the gradient;
// the direction d = −H·◇f is constrained to the sign pattern of −◇f; every trial point of the
// backtracking line search is projected onto the orthant of the current point (ξ_i = sign(w_i),
// or sign(−◇f_i) where w_i = 0). The memory pairs use ∇h only. Acceptance (Andrew & Gao eq. 4):
// f(w_new) ≤ f(w) + γ·◇f(w)ᵀ(w_new − w), γ = 1e-4, halving the step.
//
// seq-exp with c1 > 0: OWL-QN runs from L-BFGS's fit of log(H + c2‖w‖²) (with_seq_exp_start,
// optim/exp_loss.hpp).
#include <cmath>

#include "crfx/errors.hpp"
#include "optim/exp_loss.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
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

}  // namespace

std::unique_ptr<Trainer> make_owlqn_trainer() {
  return with_seq_exp_start("OWL-QN", [] { return std::make_unique<OwlqnTrainer>(); });
}

}  // namespace crfx
