// crfx — one element of an element rule's run on the CUDA backend (RuleTerm): the term that
// apply_rule's map and reduction kernels (backend_rules.cu) evaluate, shared with the steps that
// reduce a rule without reading the sum back (backend_peer.cu), so that both instantiate the very
// same reduction kernel and sum alike.
#pragma once

#include <cstddef>

#include "rules/rule_set.hpp"

namespace crfx::cuda::detail {

/// Element j of a rule's run: index idx[j] and value val[j] of a sparse vector, or j and 0 of a
/// dense range. The memo lives for one element (a thread's elements are a grid stride apart).
template <class R>
struct RuleTerm {
  R rule;
  const std::size_t* idx;  // null: dense
  const double* val;
  double* base[MapOperands::kMax];
  __device__ double operator()(std::size_t j) const {
    const std::size_t i = idx ? idx[j] : j;
    double* p[MapOperands::kMax];
    for (int k = 0; k < MapOperands::kMax; ++k) p[k] = base[k] ? base[k] + i : nullptr;
    RuleMemo<R> memo{};
    return apply_element(rule, val ? val[j] : 0.0, p, memo);
  }
};

}  // namespace crfx::cuda::detail
