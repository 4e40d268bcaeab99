// crfx — ADF, SGD with feature-frequency-adaptive rates (Sun, Wang & Li 2012): the per-weight
// rules of host/optim/adf.cpp, run by Backend::apply_rule.
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// A weight's rate after a window in which it occurred `count` times out of `window` samples —
/// decayed by α when rare, by β when frequent, linearly between.
CRFX_HOST_DEVICE inline double adf_rate_update(double rate, double count, double window, double alpha, double beta) {
  const double u = count / window;
  return rate * (alpha - u * (alpha - beta));
}

/// The step on the entries (i, g_i) of a gradient: w_i ← w_i − rate_i·g_i, count_i += 1.
/// Operands: 0 w, 1 rate, 2 count. Term 0.
struct AdfStepRule {
  static constexpr int kOperands = 3;
  CRFX_HOST_DEVICE double operator()(double g, double* const* v) const {
    *v[0] -= *v[1] * g;
    *v[2] += 1.0;
    return 0.0;
  }
};

/// The end of a window, dense over every weight: rate ← adf_rate_update(rate, count), count ← 0.
/// Operands: 0 rate, 1 count. Term 0.
struct AdfRateRule {
  static constexpr int kOperands = 2;
  double window = 1, alpha = 0, beta = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[0] = adf_rate_update(*v[0], *v[1], window, alpha, beta);
    *v[1] = 0.0;
    return 0.0;
  }
};

}  // namespace crfx
