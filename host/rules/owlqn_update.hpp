// crfx — OWL-QN (Andrew & Gao 2007, §3.1–3.2): the per-weight rules of host/optim/owlqn.cpp (and
// SAG's optimality check), dense maps run by Backend::apply_rule. Each term is 0.
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// The pseudo-gradient of h + c1‖w‖₁ (g = ∇h). Operands: 0 w, 1 g, 2 the result pg.
struct OwlqnPseudoGradientRule {
  static constexpr int kOperands = 3;
  double c1 = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double w = *v[0], g = *v[1];
    double p;
    if (w < 0) p = g - c1;
    else if (w > 0) p = g + c1;
    else if (g + c1 < 0) p = g + c1;  // right derivative negative
    else if (g - c1 > 0) p = g - c1;  // left derivative positive
    else p = 0;
    *v[2] = p;
    return 0.0;
  }
};

/// Keeps only the components of a direction d that descend along −pg: d_i = 0 where d_i·pg_i ≥ 0.
/// Operands: 0 pg, 1 d.
struct OwlqnConstrainRule {
  static constexpr int kOperands = 2;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    if (*v[1] * *v[0] >= 0) *v[1] = 0;
    return 0.0;
  }
};

/// The projection onto the orthant ξ_i = sign(w0_i) (−sign(pg_i) where w0_i = 0): w_i = 0 where
/// w_i has left it. Operands: 0 w0, 1 pg, 2 w.
struct OwlqnProjectRule {
  static constexpr int kOperands = 3;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double orthant = *v[0] != 0 ? *v[0] : -*v[1];
    if (*v[2] * orthant <= 0) *v[2] = 0;
    return 0.0;
  }
};

}  // namespace crfx
