// crfx — CudaBackend (cuda_backend.cuh): element rules (Backend::apply_rule), the generic layer the
// vector algebra (host/backend/vector_rules.hpp) and the optimizers' per-weight updates
// (host/rules) run on. dispatch_rule instantiates, for every
// rule of AllRules, one map kernel and one reduction (vector_ops.cuh) whose element is the rule's
// own host-device function — the same source the CPU backend runs (cpu_rules.cpp), so a rule is
// written once and no backend file changes when a trainer adds one.
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "rules/rule_set.hpp"
#include "rule_term.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

template <class R>
struct RuleMapOp {
  RuleTerm<R> term;
  __device__ void operator()(std::size_t j) const { term(j); }
};

}  // namespace

double CudaBackend::apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over,
                               bool sum) {
  const CudaSparse* x = over ? &X(*over) : nullptr;
  return dispatch_rule(rule, [&](const auto& r) {
    using R = std::decay_t<decltype(r)>;
    const std::size_t n = rule_operand_size<R>(operands);
    if (x) check_index(*x, n);
    RuleTerm<R> term{r, x ? x->index.get() : nullptr, x ? x->value.get() : nullptr, {}};
    for (int k = 0; k < R::kOperands; ++k)
      if (operands.v[k]) term.base[k] = P(*operands.v[k]);
    const std::size_t count = x ? x->n : n;
    if (sum) {
      if constexpr (rule_folds_max<R>) return reduce(count, term, MaxOp{}, 0.0, red_.get(), stream_);
      else return reduce(count, term, SumOp{}, 0.0, red_.get(), stream_);
    }
    launch_map(count, RuleMapOp<R>{term}, stream_);
    return 0.0;
  });
}

}  // namespace crfx::cuda::detail
