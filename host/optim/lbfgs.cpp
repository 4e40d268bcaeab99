// crfx — L-BFGS (Liu & Nocedal 1989) for the smooth objective h(w) = NLL + c2·‖w‖².
//
// Direction: the two-loop recursion (quasi_newton.hpp). Step: a line search satisfying the strong
// Wolfe conditions (Nocedal & Wright 2006, Algorithms 3.5 and 3.6, cubic interpolation in zoom),
// c_armijo = 1e-4, c_curvature = 0.9; the first step is 1/‖g‖, later ones start at 1.
// Stopping as CRFsuite: ‖g‖ / max(1, ‖w‖) < epsilon, or the relative improvement over `period`
// iterations below `delta`, or max_iterations.
#include <cmath>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

struct Point {
  double a, f, dphi;
};

class LineSearch {
 public:
  LineSearch(Objective& obj, const Vector& x0, const Vector& d, Vector& x, Vector& g)
      : obj_(obj), b_(obj.backend()), x0_(x0), d_(d), x_(x), g_(g) {}

  /// Searches along d from x0 (value f0, slope dphi0 < 0). On success x, g hold the accepted
  /// point and its gradient, and the point is returned; on failure returns a = 0.
  Point search(double f0, double dphi0, double a_init, int max_evals) {
    f0_ = f0;
    dphi0_ = dphi0;
    evals_left_ = max_evals;
    Point prev{0, f0, dphi0};
    double a = a_init;
    for (int i = 0; evals_left_ > 0; ++i) {
      Point cur = eval(a);
      if (!std::isfinite(cur.f) || !std::isfinite(cur.dphi)) {  // overflow far out: too long a step
        return zoom(prev, cur);
      }
      if (cur.f > f0_ + kArmijo * a * dphi0_ || (i > 0 && cur.f >= prev.f)) return zoom(prev, cur);
      if (std::fabs(cur.dphi) <= -kCurvature * dphi0_) return cur;
      if (cur.dphi >= 0) return zoom(cur, prev);
      prev = cur;
      a *= 2.0;
    }
    return settle(prev);
  }

 private:
  static constexpr double kArmijo = 1e-4, kCurvature = 0.9;

  Point eval(double a) {
    --evals_left_;
    b_.add_scaled(x0_, a, d_, x_);
    const double f = obj_.value_and_gradient(x_, g_);
    at_ = a;
    return {a, f, b_.dot(g_, d_)};
  }

  /// The bracket [lo, hi] holds a point satisfying the strong Wolfe conditions.
  Point zoom(Point lo, Point hi) {
    while (evals_left_ > 0) {
      const double a = interpolate(lo, hi);
      Point cur = eval(a);
      if (!std::isfinite(cur.f) || !std::isfinite(cur.dphi) || cur.f > f0_ + kArmijo * a * dphi0_ ||
          cur.f >= lo.f) {
        hi = cur;
      } else {
        if (std::fabs(cur.dphi) <= -kCurvature * dphi0_) return cur;
        if (cur.dphi * (hi.a - lo.a) >= 0) hi = lo;
        lo = cur;
      }
      if (std::fabs(hi.a - lo.a) <= 1e-16 * std::max(1.0, lo.a)) break;
    }
    return settle(lo);
  }

  /// Out of evaluations: accept `p` if it decreased f (re-evaluating x, g there if needed).
  Point settle(const Point& p) {
    if (p.a <= 0 || !(p.f < f0_)) return {0, f0_, dphi0_};
    if (at_ != p.a) {
      b_.add_scaled(x0_, p.a, d_, x_);
      obj_.value_and_gradient(x_, g_);
      at_ = p.a;
    }
    return p;
  }

  /// Minimiser of the cubic through (lo, hi) with their slopes, kept inside the bracket;
  /// bisection when the cubic is unusable.
  static double interpolate(const Point& lo, const Point& hi) {
    const double mid = 0.5 * (lo.a + hi.a);
    if (!std::isfinite(hi.f)) return lo.a + 0.1 * (hi.a - lo.a);
    const double d1 = lo.dphi + hi.dphi - 3.0 * (lo.f - hi.f) / (lo.a - hi.a);
    const double disc = d1 * d1 - lo.dphi * hi.dphi;
    if (!(disc >= 0)) return mid;
    const double d2 = std::copysign(std::sqrt(disc), hi.a - lo.a);
    const double a = hi.a - (hi.a - lo.a) * (hi.dphi + d2 - d1) / (hi.dphi - lo.dphi + 2.0 * d2);
    const double lo_b = std::min(lo.a, hi.a), hi_b = std::max(lo.a, hi.a), w = hi_b - lo_b;
    if (!std::isfinite(a) || a < lo_b + 0.1 * w || a > hi_b - 0.1 * w) return mid;
    return a;
  }

  Objective& obj_;
  Backend& b_;
  const Vector& x0_;
  const Vector& d_;
  Vector& x_;
  Vector& g_;
  double f0_ = 0, dphi0_ = 0, at_ = -1;
  int evals_left_ = 0;
};

class LbfgsTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    if (obj.c1() > 0) {  // L1: OWL-QN (as CRFsuite's lbfgs with c1 > 0), and its reason for stopping
      const auto owlqn = make_owlqn_trainer();
      owlqn->resume_from(resume_);
      resume_ = nullptr;
      const double f = owlqn->train(obj, w, opt, progress);
      stop_reason_ = owlqn->stop_reason();
      return f;
    }
    Backend& b = obj.backend();
    const std::size_t n = w.size();
    VectorPtr g = b.vector(n), x0 = b.vector(n), g0 = b.vector(n), d = b.vector(n);
    LbfgsHistory history(b, n, opt.memory);
    ImprovementTest improvement(opt.period, opt.delta);
    Stopwatch clock;
    int k = 0;
    double f = 0, gnorm = 0, xnorm = 0, step = 0;
    // The state after iteration k's report, before its stopping tests and memory update.
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, k, obj, clock);
      ar.value("f", f);
      ar.value("gnorm", gnorm);
      ar.value("xnorm", xnorm);
      ar.vector("w", b, w);
      ar.vector("g", b, *g);
      ar.vector("x0", b, *x0);
      ar.vector("g0", b, *g0);
      improvement.state(ar);
      history.state(ar);
    };

    const bool resumed = restore(state);
    if (!resumed) {
      f = obj.value_and_gradient(w, *g);
      if (!std::isfinite(f)) throw Error("the objective is not finite at the starting point");
      gnorm = std::sqrt(b.norm2sq(*g));
      if (gradient_small(kGradientRatio, gnorm, std::sqrt(b.norm2sq(w)), opt.epsilon, stop_reason_)) return f;
      b.scaled_copy(-1.0, *g, *d);
      step = 1.0 / gnorm;
      k = 1;
    }
    stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations);

    for (bool reported = resumed; opt.max_iterations <= 0 || k <= opt.max_iterations; ++k, reported = false) {
      if (!reported) {
        // x0, g0 take the current point over (swapped, not copied: the line search writes every
        // entry of w and g before reading them).
        b.swap(w, *x0);
        b.swap(*g, *g0);
        double dphi0 = b.dot(*g0, *d);
        if (!(dphi0 < 0)) {  // not a descent direction (numerical trouble): restart from −g
          history.clear();
          b.scaled_copy(-1.0, *g0, *d);
          dphi0 = b.dot(*g0, *d);
          step = 1.0 / std::sqrt(-dphi0);
        }
        LineSearch ls(obj, *x0, *d, w, *g);
        const Point p = ls.search(f, dphi0, step, opt.max_linesearch);
        if (p.a <= 0) {  // no decrease found: keep the last point and stop
          b.swap(*x0, w);
          b.swap(*g0, *g);
          stop_reason_ = stop_at_line_search(opt.max_linesearch);
          break;
        }
        f = p.f;
        gnorm = std::sqrt(b.norm2sq(*g));
        xnorm = std::sqrt(b.norm2sq(w));
        Progress pr = progress_at(k, obj, w, f, gnorm, p.a, clock);
        pr.state = &state;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (stop_tests(kGradientRatio, gnorm, xnorm, opt.epsilon, f, improvement, stop_reason_)) break;
      history.push(w, *x0, *g, *g0);
      history.direction(*g, *d);
      step = 1.0;
    }
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_lbfgs_trainer() { return std::make_unique<LbfgsTrainer>(); }

}  // namespace crfx
