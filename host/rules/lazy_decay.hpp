// crfx — the lazy L2 decay shared by sgd-l1 (a global per-step factor, Tsuruoka et al. 2009) and
// adf (per-weight factors, Sun et al. 2012): a weight is scaled only when a step touches it (or at
// a flush), by the product of the factors of the steps it missed since its stamp.
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// The decay of a weight last brought up to date `steps` clock ticks ago: Π of the per-step
/// factors 1 − coef·rate (per-weight rates, ADF), or exp(steps) where the clock counts
/// log-factors directly (SGD-L1, whose clock is the cumulative log decay).
CRFX_HOST_DEVICE inline double lazy_decay_factor(double steps, const double* rate, double coef) {
  return rate ? pow(1.0 - coef * *rate, steps) : exp(steps);
}

/// The catch-up of one weight to `clock`. Operands: 0 the weights w, 1 their stamps, 2 the
/// per-weight rates (absent: the clock is a cumulative log factor). Unchanged (bitwise) where the
/// stamp is the clock already. Term 0.
///
/// Memo: the L weights of a state row (and an edge block's L²) share stamp and rate, since
/// supports are whole groups, so a one-entry memo of the last factor saves almost every pow/exp.
/// It returns the very value it would recompute; the CPU keeps one per block of elements, the GPU
/// one per element (no saving there: a thread's elements are a grid stride apart).
struct LazyDecayRule {
  static constexpr int kOperands = 3;
  static constexpr unsigned kOptional = 1u << 2;  // rate
  struct Memo {
    bool valid = false;
    double steps = 0, rate = 0, factor = 1;
  };
  double clock = 0, coef = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v, Memo& m) const {
    double& stamp = *v[1];
    if (stamp == clock) return 0.0;
    const double steps = clock - stamp, r = v[2] ? *v[2] : 0.0;
    if (!(m.valid && steps == m.steps && r == m.rate)) {
      m.factor = lazy_decay_factor(steps, v[2] ? &r : nullptr, coef);
      m.steps = steps;
      m.rate = r;
      m.valid = true;
    }
    *v[0] *= m.factor;
    stamp = clock;
    return 0.0;
  }
};

}  // namespace crfx
