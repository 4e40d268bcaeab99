// crfx — the element rules of CRFsuite's mistake-driven trainers pa and arow (host/optim/
// passive_aggressive.cpp, arow.cpp), run over the support of the feature difference Δ = f(x, y) −
// f(x, ŷ) (Backend::feature_difference): x is Δ's entry; and their step's scalars from the sums (and
// CRF++'s mira's, mira.cpp), which the host and the device's step (SparseGradients::peer_step,
// kernels/backend_peer.cu) share.
#pragma once

#include <math.h>

#include <cstddef>

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// pa's loss of a decoded batch with margin w·Δ and `wrong` mislabeled tokens: ℓ = −w·Δ + √d
/// (error-sensitive) or −w·Δ + 1.
CRFX_HOST_DEVICE inline double passive_aggressive_loss(double margin, std::size_t wrong, bool error_sensitive) {
  return -margin + (error_sensitive ? sqrt(double(wrong)) : 1.0);
}

/// PA's step size τ for the loss ℓ and ‖Δ‖² (type 0 PA, 1 PA-I, 2 PA-II; c the aggressiveness);
/// 0 where ‖Δ‖² is not > 0.
CRFX_HOST_DEVICE inline double passive_aggressive_tau(int type, double loss, double norm2, double c) {
  if (!(norm2 > 0)) return 0.0;
  if (type == 0) return loss / norm2;
  const double q = loss / norm2;
  if (type == 1) return q < c ? q : c;  // std::min(c, q)
  return loss / (norm2 + 0.5 / c);
}

/// AROW's loss ℓ = −μ·Δ + d (the Hamming cost) and step α = ℓ / (γ + Σ_j Δ_j²·Σ_jj).
CRFX_HOST_DEVICE inline double arow_loss(double margin, std::size_t wrong) { return -margin + double(wrong); }
CRFX_HOST_DEVICE inline double arow_alpha(double loss, double gamma, double variance_sum) {
  return loss / (gamma + variance_sum);
}

/// mira's step (CRF++'s runMIRA, lines 146–162; host/optim/mira.cpp) from the errors d, cost_diff =
/// −w·Δ and ‖Δ‖², in CRF++'s types: μ = max(0, (d − cost_diff)/‖Δ‖²), clipped to C − B_i where
/// B_i + μ > C, else K = max(K, d − cost_diff); where μ > 1e-10, B_i ← min(C, B_i + μ). Returns μ
/// (w += μ·Δ where μ > 1e-10). std::max's and std::min's comparisons written out (NaN alike).
CRFX_HOST_DEVICE inline double mira_step(double errors, double cost_diff, double norm2, float c, float& bound,
                                         double& kkt) {
  const double q = (errors - cost_diff) / norm2;
  double mu = 0.0 < q ? q : 0.0;  // std::max(0.0, q): NaN gives 0
  if (bound + mu > c) {
    mu = c - bound;  // a float difference
  } else {
    const double v = errors - cost_diff;
    kkt = v < kkt ? kkt : v;  // std::max(v, kkt)
  }
  if (mu > 1e-10) {
    bound += mu;                    // a double sum rounded to float
    bound = bound < c ? bound : c;  // std::min(c, bound)
  }
  return mu;
}

/// The sparse dot product w·Δ (the margin of the gold path over the Viterbi path). Operand 0 the
/// weights w; term w_j·Δ_j; writes nothing.
struct SparseDotRule {
  static constexpr int kOperands = 1;
  CRFX_HOST_DEVICE double operator()(double x, double* const* v) const { return *v[0] * x; }
};

/// AROW's confidence of Δ under the diagonal covariance Σ (Mejer & Crammer 2010; CRFsuite's
/// train_arow.c): term Δ_j²·Σ_jj. Operand 0 Σ's diagonal; writes nothing.
struct ArowVarianceRule {
  static constexpr int kOperands = 1;
  CRFX_HOST_DEVICE double operator()(double x, double* const* v) const { return x * x * *v[0]; }
};

/// AROW's update of one weight: μ_j += α·Σ_jj·Δ_j, then Σ_jj ← 1 / (1/Σ_jj + Δ_j²/γ). Operands
/// 0 the mean μ (the weights), 1 Σ's diagonal. Entries with Δ_j = 0 (in the support, where gold
/// and prediction agree) are left untouched bitwise (the update is the identity there). Term 0.
struct ArowUpdateRule {
  static constexpr int kOperands = 2;
  double alpha = 0, gamma = 1;
  CRFX_HOST_DEVICE double operator()(double x, double* const* v) const {
    if (x == 0) return 0.0;
    double& s = *v[1];
    *v[0] += alpha * s * x;
    s = 1.0 / (1.0 / s + x * x / gamma);
    return 0.0;
  }
};

}  // namespace crfx
