// crfx — RPROP (Riedmiller & Braun 1993; the iRprop− variant of Igel & Hüsken 2000) on
// f(w) = NLL + c1·‖w‖₁ + c2·‖w‖², as Wapiti's `-a rprop`: a full-batch gradient each iteration,
// each weight moved by its own step against the sign of its gradient (the OWL-QN pseudo-gradient
// when c1 > 0, with moves across zero stopped at zero). Steps start at 0.1 and stay in
// [1e-8, 50], ×1.2 while a weight's gradient keeps its sign, ×0.5 when it flips (then the
// weight rests one iteration). No line search and no memory of pairs: an iteration costs one
// forward-backward pass and a few vector passes. Stops like L-BFGS: max_iterations, the
// period/delta improvement test, or ‖g‖ / max(1, ‖w‖) ≤ epsilon.
// seq-exp with c1 > 0: RPROP runs from L-BFGS's fit of log(H + c2‖w‖²) (with_seq_exp_start,
// optim/exp_loss.hpp).
#include <algorithm>
#include <cmath>

#include "crfx/errors.hpp"
#include "optim/exp_loss.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

constexpr double kFirstStep = 0.1;

class RpropTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    Backend& b = obj.backend();
    const double c1 = obj.c1();
    const std::size_t n = w.size();
    VectorPtr g = b.vector(n), last = b.vector(n), step = b.vector(n);
    VectorPtr pg = c1 > 0 ? b.vector(n) : nullptr;
    Vector& dir = c1 > 0 ? *pg : *g;  // what the steps follow
    b.fill(*step, kFirstStep);
    RpropRule rule;
    rule.l1 = c1 > 0;
    ImprovementTest improvement(opt.period, opt.delta);
    Stopwatch clock;

    // ‖dir‖ at w, the (pseudo-)gradient recomputed first with L1; and whether it is small enough.
    auto direction_norm = [&] {
      if (c1 > 0) map(b, OwlqnPseudoGradientRule{c1}, {w, *g, *pg});
      return std::sqrt(b.norm2sq(dir));
    };

    int k = 0;
    double f = 0, gnorm = 0, xnorm = 0;
    // The state after iteration k's report, before its stopping tests.
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, k, obj, clock);
      ar.value("f", f);
      ar.value("gnorm", gnorm);
      ar.value("xnorm", xnorm);
      ar.vector("w", b, w);
      ar.vector("g", b, *g);
      ar.vector("last", b, *last);
      ar.vector("step", b, *step);
      if (pg) ar.vector("pg", b, *pg);
      improvement.state(ar);
    };

    const bool resumed = restore(state);
    if (!resumed) {
      f = obj.full(obj.value_and_gradient(w, *g), w);
      if (!std::isfinite(f)) throw Error("the objective is not finite at the starting point");
      if (gradient_small(kGradientRatio, direction_norm(), std::sqrt(b.norm2sq(w)), opt.epsilon, stop_reason_))
        return f;
      k = 1;
    }
    stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations);
    for (bool reported = resumed; opt.max_iterations <= 0 || k <= opt.max_iterations; ++k, reported = false) {
      if (!reported) {
        map(b, rule, {w, dir, *last, *step});
        f = obj.full(obj.value_and_gradient(w, *g), w);
        require_finite("rprop", "iteration", k, f, obj.loss());
        gnorm = direction_norm();
        xnorm = std::sqrt(b.norm2sq(w));
        Progress pr = progress_at(k, obj, w, f, gnorm, 0.0, clock);
        pr.state = &state;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (stop_tests(kGradientRatio, gnorm, xnorm, opt.epsilon, f, improvement, stop_reason_)) break;
    }
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_rprop_trainer() {
  return with_seq_exp_start("RPROP", [] { return std::make_unique<RpropTrainer>(); });
}

}  // namespace crfx
