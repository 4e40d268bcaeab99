// crfx — what pa's and arow's step on the device take from its sums (issue 37), shared by the step
// a sentence or batch at a time (backend_peer.cu) and the steps in runs (perceptron_kernels.cu):
// its parameters, the scalars of the host's update() (host/rules/peer_update.hpp) and arow's
// update of a weight.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "crfx/internal/host_device.hpp"  // mul_rn
#include "rules/peer_update.hpp"

namespace crfx::cuda::detail {

/// PeerStep's numbers (no vector) and u's scale, as launch parameters; mira's sentence and state.
struct PeerParams {
  bool arow;
  int pa_type;
  double c, gamma, u_scale;
  bool error_sensitive;
  bool mira;
  float mira_c;
  std::uint32_t sid;
  float* bounds;          // [sentences] mira's B_i
  std::uint32_t* shrink;  // [sentences] mira's epochs decoded right running
};

/// pa's or arow's step from its d ≥ 1 mistakes and the sums w·Δ and ‖Δ‖² (arow: Σ Δ_j²·Σ_jj), as
/// the host's update() takes them: ℓ, τ (arow: α), and whether w moves (pa: τ ≠ 0; arow: always).
struct PeerScalars {
  double loss, tau;
  bool gate;
};
__device__ inline PeerScalars peer_scalars(const PeerParams& p, std::uint32_t d, double dot, double second) {
  if (p.arow) {
    const double loss = arow_loss(dot, d);
    return {loss, arow_alpha(loss, p.gamma, second), true};
  }
  const double loss = passive_aggressive_loss(dot, d, p.error_sensitive);
  const double tau = passive_aggressive_tau(p.pa_type, loss, second, p.c);
  return {loss, tau, tau != 0};
}

/// ArowUpdateRule (α = *alpha) over the support where *gate ≠ 0, as apply_rule's map runs it.
struct PeerArowOp {
  const std::size_t* idx;
  const double* val;
  double* w;
  double* variance;
  const double* alpha;
  double gamma;
  const double* gate;
  __device__ void operator()(std::size_t j) const {
    if (*gate == 0) return;
    ArowUpdateRule rule;
    rule.alpha = *alpha;
    rule.gamma = gamma;
    double* p[2] = {w + idx[j], variance + idx[j]};
    rule(val[j], p);
  }
};

}  // namespace crfx::cuda::detail
