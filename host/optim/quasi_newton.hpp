// crfx — pieces shared by the quasi-Newton trainers (L-BFGS, OWL-QN).
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "crfx/backend.hpp"
#include "crfx/trainer.hpp"

namespace crfx {

/// Relative decrease of the objective below which an OWL-QN iteration made no progress that
/// double precision can resolve (the orthant constraints can pin it there while ‖◇f‖ stays
/// above a tight epsilon): it stops whatever its tolerances ask.
inline constexpr double kNoProgress = 1e-15;

/// The L-BFGS memory: the last m pairs s = x_{k+1} − x_k, y = ∇h_{k+1} − ∇h_k, and the two-loop
/// recursion (Nocedal & Wright, Algorithm 7.4) with the initial scaling γ = sᵀy / yᵀy.
class LbfgsHistory {
 public:
  LbfgsHistory(Backend& backend, std::size_t n, int m);
  /// Stores (x − x_prev, g − g_prev); a pair with sᵀy ≤ 0 is not kept (curvature condition) and,
  /// as it was computed in the oldest pair's slot when the memory is full, that pair is dropped.
  void push(const Vector& x, const Vector& x_prev, const Vector& g, const Vector& g_prev);
  /// d = −H·q.
  void direction(const Vector& q, Vector& d);
  void clear() { count_ = 0; }
  int size() const { return count_; }

 private:
  Backend& b_;
  std::vector<VectorPtr> s_, y_;
  std::vector<double> rho_, alpha_;
  double gamma_ = 1.0;
  int m_, head_ = 0, count_ = 0;  // ring buffer: newest at head_ − 1
};

/// Wall-clock seconds since construction.
class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Progress::gradient_norm of a trainer that computes none.
inline constexpr double kNoGradientNorm = std::numeric_limits<double>::quiet_NaN();

/// A trainer's report of iteration (or epoch) k at w: the objective f, the gradient norm (NaN
/// where the trainer computes none) and the step, with the passes, active features and seconds so
/// far.
inline Progress progress_at(int k, Objective& obj, const Vector& w, double f, double gradient_norm, double step,
                            const Stopwatch& clock) {
  Progress pr;
  pr.iteration = k;
  pr.passes = obj.passes();
  pr.objective = f;
  pr.gradient_norm = gradient_norm;
  pr.active_features = obj.backend().count_nonzero(w);
  pr.seconds = clock.seconds();
  pr.step = step;
  return pr;
}

/// The ratios the gradient test measures, as stop reasons name them.
inline constexpr const char* kGradientRatio = "‖g‖ / max(1, ‖w‖)";
inline constexpr const char* kPseudoGradientRatio = "‖pseudo-gradient‖ / max(1, ‖w‖)";

/// The gradient test of the full-batch trainers: gnorm / max(1, xnorm) ≤ epsilon. True when it
/// holds, with `reason` in Trainer::stop_reason's words (`what` names the ratio).
inline bool gradient_small(const char* what, double gnorm, double xnorm, double epsilon, std::string& reason) {
  const double ratio = gnorm / std::max(1.0, xnorm);
  if (!(ratio <= epsilon)) return false;
  reason = stop_at_gradient(what, ratio, epsilon);
  return true;
}

/// The tests after an iteration, in CRFsuite's order: the caller (progress returns false), the
/// gradient test, the improvement test on pr.objective. True when one fires, with `reason` set.
inline bool stop_after_iteration(const ProgressFn& progress, const Progress& pr, const Vector& w, const char* what,
                                 double gnorm, double xnorm, double epsilon, ImprovementTest& improvement,
                                 std::string& reason) {
  if (progress && !progress(pr, w)) {
    reason = stop_by_caller();
    return true;
  }
  if (gradient_small(what, gnorm, xnorm, epsilon, reason)) return true;
  if (!improvement.converged(pr.objective)) return false;
  reason = improvement.reason();
  return true;
}

}  // namespace crfx
