// crfx — SAG / SAGA (Schmidt et al. 2015; Defazio et al. 2014): the lazy catch-up of a weight
// through the steps it missed, from the step history the backends keep (LazyStepHistory, backend.hpp).
#pragma once

#include "crfx/host_device.hpp"

namespace crfx {

/// Steps stamp+1 … k applied at once to a weight whose gradient memory is d — the composite of
/// w ← a·w − b·d and the L1 prox — from the cumulative products and sums P, S, R of the history.
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
