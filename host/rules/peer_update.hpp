// crfx — the element rules of CRFsuite's mistake-driven trainers pa and arow (host/optim/
// passive_aggressive.cpp, arow.cpp), run over the support of the feature difference Δ = f(x, y) − f(x, ŷ)
// (Backend::feature_difference): x is Δ's entry.
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

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
