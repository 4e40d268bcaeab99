// crfx — pieces shared by the quasi-Newton trainers (L-BFGS, OWL-QN).
#pragma once

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/trainer.hpp"

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
  /// Saves or restores the pairs (checkpoints).
  void state(StateArchive& ar);

 private:
  Backend& b_;
  std::vector<VectorPtr> s_, y_;
  std::vector<double> rho_, alpha_;
  double gamma_ = 1.0;
  int m_, head_ = 0, count_ = 0;  // ring buffer: newest at head_ − 1
};

/// Wall-clock seconds since construction, plus those of the run a checkpoint continues.
class Stopwatch {
 public:
  double seconds() const {
    return before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  /// Saves the seconds so far, or restores them: the reported times go on from there.
  void state(StateArchive& ar) {
    double s = seconds();
    ar.value("seconds", s);
    if (ar.restoring()) {
      before_ = s;
      start_ = std::chrono::steady_clock::now();
    }
  }

 private:
  double before_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// What every trainer's state starts with: the iteration (or epoch) it was saved at, the passes
/// and the seconds so far.
inline void common_state(StateArchive& ar, int& iteration, Objective& obj, Stopwatch& clock) {
  ar.value("iteration", iteration);
  double passes = obj.passes();
  ar.value("passes", passes);
  if (ar.restoring()) obj.set_passes(passes);
  clock.state(ar);
}

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

/// Throws Error when the objective a trainer is about to report for iteration (or epoch) k is not
/// finite: the weights have overflowed (attribute values too large for the step sizes). Nothing of
/// that iteration is reported, so no checkpoint or model is made of it.
/// With an exponential `loss` the message says why that loss overflows where the log-losses do not.
inline void require_finite(const char* algo, const char* unit, int k, double f,
                           SequenceLoss loss = SequenceLoss::seq_log) {
  if (std::isfinite(f)) return;
  std::string why = "attribute values too large, or too large a learning rate";
  if (loss == SequenceLoss::seq_exp)
    why = "--loss seq-exp weighs a sentence by 1/p, L^T at w = 0, and a step on it overflows: lbfgs and owlqn "
          "minimise it in log space; a stochastic trainer needs sentences short enough, or a far smaller --eta0";
  else if (loss == SequenceLoss::point_exp)
    why = "--loss point-exp weighs a token by 1/p(y_t|x): a poorly fitted token's step overflows; lower --eta0";
  throw Error(std::string(algo) + ": the objective is " + (std::isnan(f) ? "NaN" : "infinite") + " after " + unit +
              " " + std::to_string(k) + ": the weights overflowed (" + why + ")");
}

/// The ratios the gradient test measures, as stop reasons name them.
inline constexpr const char* kGradientRatio = "‖g‖ / max(1, ‖w‖)";
inline constexpr const char* kPseudoGradientRatio = "‖pseudo-gradient‖ / max(1, ‖w‖)";

/// The gradient test of the full-batch trainers: gnorm / max(1, xnorm) ≤ epsilon. True when it
/// holds, with `reason` in Trainer::stop_reason's words (`what` names the ratio).
inline bool gradient_small(const char* what, double gnorm, double xnorm, double epsilon, std::string& reason) {
  const double ratio = gnorm / (xnorm > 1.0 ? xnorm : 1.0);
  if (!(ratio <= epsilon)) return false;
  reason = stop_at_gradient(what, ratio, epsilon);
  return true;
}

/// The tests after an iteration's report, in CRFsuite's order: the gradient test, the improvement
/// test on the objective f. True when one fires, with `reason` set.
inline bool stop_tests(const char* what, double gnorm, double xnorm, double epsilon, double f,
                       ImprovementTest& improvement, std::string& reason) {
  if (gradient_small(what, gnorm, xnorm, epsilon, reason)) return true;
  if (!improvement.converged(f)) return false;
  reason = improvement.reason();
  return true;
}

}  // namespace crfx
