// crfx — SGD with the cumulative L1 penalty (Tsuruoka, Tsujii & Ananiadou 2009, §3.3, as Zhou et
// al. 2011 use it): the per-weight rule of sgd-l1 and two-stage, run by Backend::apply_rule on
// the entries of a sparse mini-batch gradient (host/optim/sgd_l1.cpp decides when).
#pragma once

#include "crfx/internal/host_device.hpp"
#include "rules/elastic_net.hpp"

namespace crfx {

/// The step w − η·g, then, with the penalty record q (null without L1), the clip towards zero by
/// the penalty u accumulated so far less what this weight already received, q recording it
/// (unless `keep_q`: a line-search trial reads q, leaves it).
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

/// One SGD-L1 step on the entries (i, g_i) of a gradient. Operands: 0 the weights w, 1 the
/// penalty record q (absent: no L1, only w − η·g). The term of an entry is c1·|w_i| + c2·w_i² at
/// the new weight (the heuristic line search's trial penalty); 0 when c1 = c2 = 0, not 0·|w| (NaN
/// for an infinite weight).
struct SgdL1Rule {
  static constexpr int kOperands = 2;
  static constexpr unsigned kOptional = 1u << 1;  // q
  double eta = 0, u = 0, c1 = 0, c2 = 0;
  bool keep_q = false;
  CRFX_HOST_DEVICE double operator()(double g, double* const* v) const {
    const double wi = sgd_l1_update(*v[0], g, eta, u, v[1], keep_q);
    *v[0] = wi;
    return c1 != 0 || c2 != 0 ? penalty_term(wi, c1, c2) : 0.0;
  }
};

}  // namespace crfx
