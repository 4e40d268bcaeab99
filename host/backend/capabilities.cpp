// crfx — the optional capabilities of a Backend, asked for by the trainers that need them.
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {

IncrementalGradients& incremental_gradients(Backend& b) {
  if (IncrementalGradients* p = b.incremental()) return *p;
  throw Error("the backend " + b.name() + " has no incremental gradients (SAG, SAGA)");
}

SparseGradients& sparse_gradients(Backend& b) {
  if (SparseGradients* p = b.sparse()) return *p;
  throw Error("the backend " + b.name() + " has no sparse gradients (the stochastic trainers)");
}

}  // namespace crfx
