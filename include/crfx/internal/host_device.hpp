// crfx — code that both the host compiler and CUDA device code compile: the qualifier macro,
// arithmetic that is never fused (nvcc contracts a·b + c into one FMA in device code unless told
// not to; host code is built with -ffp-contract=off), so that the two backends round alike, and
// the numerics' constants and per-position formulas both backends use: defined here once
// (tests/test_numerics.cpp fails on a second definition in host/cpu or kernels/).
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define CRFX_HOST_DEVICE __host__ __device__
#else
#define CRFX_HOST_DEVICE
#endif

namespace crfx {

CRFX_HOST_DEVICE inline double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
CRFX_HOST_DEVICE inline double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// ---- the numerics both backends share -----------------------------------------------------------

/// An exp-space sum of the forward-backward recursions below this is not trusted: the CPU redoes
/// the sentence in log space (a normaliser n_t, m_t, z_t or q_t below it, host/cpu/chain.cpp),
/// the GPU the entry (a max-shifted product below it, kernels/chain_kernels.cu). A sum this
/// small is still a normal double; its terms' underflow costs L²·1e-308 / kTinySum, nothing.
constexpr double kTinySum = 1e-250;
/// The pointwise losses' scaled sweeps take a gold marginal down to kGoldFloor and Σ_t of the
/// per-position weights up to kMaxLossWeight: beyond, the CPU computes the sentence in log space
/// (host/cpu/chain_loss.cpp) and the GPU refuses it, naming it.
constexpr double kGoldFloor = 1e-50;
constexpr double kMaxLossWeight = 1e300;

/// exp(lf)·d where f = exp(lf) was computed already: f·d, or in log space where f overflows
/// (0 stays 0, never inf·0). The seq-exp loss's scaling of the deltas by 1/p(y | x).
CRFX_HOST_DEVICE inline double exp_scaled(double lf, double f, double d) {
  if (isfinite(f)) return f * d;
  if (d == 0) return 0.0;
  return copysign(exp(lf + log(fabs(d))), d);
}

}  // namespace crfx
