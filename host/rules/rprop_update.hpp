// crfx — RPROP (Riedmiller & Braun 1993), in the iRprop− variant (Igel & Hüsken 2000), as Wapiti
// offers it (`-a rprop`): every weight keeps its own step, grown while its gradient keeps its sign
// and shrunk when the sign flips; only the sign of the gradient moves the weight. The per-weight
// rule of host/optim/rprop.cpp, run by Backend::apply_rule.
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// One iteration on one weight. Operands: 0 w, 1 the gradient g (the pseudo-gradient with L1),
/// 2 the gradient of the last step (0 after a sign flip), 3 the weight's step. With `l1` a weight
/// that would cross zero stops at zero (the orthant of its sign, as OWL-QN projects). Term 0.
struct RpropRule {
  static constexpr int kOperands = 4;
  double inc = 1.2, dec = 0.5, step_min = 1e-8, step_max = 50.0;
  bool l1 = false;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double g = *v[1], turn = g * *v[2];
    double step = *v[3];
    if (turn < 0) {  // the sign flipped: a smaller step, no move, and no memory of the gradient
      const double s = step * dec;
      *v[3] = s > step_min ? s : step_min;
      *v[2] = 0.0;
      return 0.0;
    }
    if (turn > 0) {
      const double s = step * inc;
      step = s < step_max ? s : step_max;
    }
    if (g != 0) {
      const double w = *v[0];
      double x = g > 0 ? w - step : w + step;
      if (l1 && x * w < 0) x = 0.0;
      *v[0] = x;
    }
    *v[2] = g;
    *v[3] = step;
    return 0.0;
  }
};

}  // namespace crfx
