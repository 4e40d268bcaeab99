// crfx — the elastic-net penalty of one weight, shared by the optimizers' rules and the backends'
// sparse_penalty (one expression, so a trial penalty and a recomputed one agree bit for bit).
#pragma once

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// c1·|w| + c2·w².
CRFX_HOST_DEVICE inline double penalty_term(double w, double c1, double c2) { return c1 * fabs(w) + c2 * w * w; }

}  // namespace crfx
