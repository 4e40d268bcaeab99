// crfx — the optimizers' per-weight update rules, written once for both backends (the CPU loops
// and the CUDA kernels call these; host/optim decides when). Each is the arithmetic of one weight,
// in the order both backends have always used, so the CPU's results are unchanged bit for bit.
#pragma once

#include "crfx/host_device.hpp"

namespace crfx {

/// SGD with the cumulative L1 penalty (Tsuruoka et al. 2009, as Zhou et al. 2011 use it): the
/// step w − η·g, then, with the penalty record q (null without L1), the clip towards zero by the
/// penalty u accumulated so far less what this weight already received, q recording it (unless
/// `keep_q`: a line-search trial reads q, leaves it).
CRFX_HOST_DEVICE inline double sgd_l1_update(double w, double g, double eta, double u, double* q, bool keep_q) {
  double wi = w - eta * g;
  if (q) {
    const double z = wi;
    if (wi > 0) {
      const double v = wi - (u + *q);
      wi = 0.0 < v ? v : 0.0;
    } else if (wi < 0) {
      const double v = wi + (u - *q);
      wi = v < 0.0 ? v : 0.0;
    }
    if (!keep_q) *q += wi - z;
  }
  return wi;
}

/// The elastic-net penalty of one weight, c1·|w| + c2·w².
CRFX_HOST_DEVICE inline double penalty_term(double w, double c1, double c2) { return c1 * fabs(w) + c2 * w * w; }

/// The lazy L2 decay of a weight last brought up to date `steps` clock ticks ago: Π of the
/// per-step factors 1 − coef·rate (per-weight rates, ADF), or exp(steps) where the clock counts
/// log-factors directly (SGD-L1, whose clock is the cumulative log decay).
CRFX_HOST_DEVICE inline double lazy_decay_factor(double steps, const double* rate, double coef) {
  return rate ? pow(1.0 - coef * *rate, steps) : exp(steps);
}

/// ADF (Sun et al. 2012): a weight's rate after a window in which it occurred `count` times out
/// of `window` samples — decayed by α when rare, by β when frequent, linearly between.
CRFX_HOST_DEVICE inline double adf_rate_update(double rate, double count, double window, double alpha, double beta) {
  const double u = count / window;
  return rate * (alpha - u * (alpha - beta));
}

/// SAG's lazy catch-up (backend.hpp, sag_step): steps stamp+1 … k applied at once to a weight
/// whose gradient memory is d — the composite of w ← a·w − b·d and the L1 prox — from the
/// cumulative products and sums P, S, R of the history.
struct SagCatchUp {
  double ratio, sd, r;  // P_k / P_k0, P_k0·(S_k − S_k0), P_k0·(R_k − R_k0)
  CRFX_HOST_DEVICE SagCatchUp(const double* P, const double* S, const double* R, unsigned long long k0,
                              unsigned long long k)
      : ratio(P[k] / P[k0]), sd(mul_rn(P[k0], sub_rn(S[k], S[k0]))), r(mul_rn(P[k0], sub_rn(R[k], R[k0]))) {}
  CRFX_HOST_DEVICE double operator()(double w, double d) const {
    const double x = sub_rn(w, mul_rn(d, sd));
    if (r > 0) {
      const double m = fabs(x) - r;
      return m > 0 ? mul_rn(ratio, copysign(m, x)) : 0.0;
    }
    return mul_rn(ratio, x);
  }
};

}  // namespace crfx
