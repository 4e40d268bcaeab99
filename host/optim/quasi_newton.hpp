// crfx — pieces shared by the quasi-Newton trainers (L-BFGS, OWL-QN).
#pragma once

#include <chrono>
#include <vector>

#include "crfx/backend.hpp"

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

}  // namespace crfx
