// crfx — CPU backend: element rules (Backend::apply_rule), the generic layer the vector algebra
// (host/backend/vector_rules.hpp) and the optimizers' per-weight updates (host/rules) run on.
// Each rule is decoded to its own type and run in cpu_sparse.hpp's blocks — one inlined call per
// element, so a rule costs what the hand-written loop it replaced cost — over a dense range or
// over the entries of a sparse vector.
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "crfx/errors.hpp"
#include "rules/rule_set.hpp"

namespace crfx {
namespace {

using Bases = double* [MapOperands::kMax];

/// A dense block's sum runs in kLanes interleaved partial sums added in order at its end: GCC
/// vectorises that loop (one running sum is a serial dependency chain), and the sum still depends
/// only on the block. It is the order the CPU's dot() had before it became a rule
/// (host/backend/vector_rules.hpp), so the vector algebra gives the bits it gave.
constexpr std::size_t kLanes = 8;

/// The maximum of f(begin, end) over kReduceBlock blocks of [0, n), from 0 (a rule with
/// kFoldMax: each block's f folds its own terms by maximum).
template <class F>
double reduce_max(ThreadPool& pool, std::size_t n, F&& f) {
  const std::size_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  if (nb <= 1) return n ? f(std::size_t(0), n) : 0.0;
  std::vector<double> partial(nb, 0.0);
  pool.run(nb, [&](std::size_t b, unsigned) {
    partial[b] = f(b * kReduceBlock, std::min(n, (b + 1) * kReduceBlock));
  });
  double m = 0;
  for (double p : partial) m = std::max(m, p);
  return m;
}

/// The fold (or nothing) of rule(x_j, elements i_j) over the n elements: i_j = idx[j] and x_j =
/// val[j] for a sparse vector (kSparse), i_j = j and x_j = 0 for a dense range. The fold is the
/// sum — in entry order over a sparse block, in kLanes lanes over a dense one — or, for a rule
/// with kFoldMax, the maximum from 0. Instantiated per rule, operand count and density, so the
/// loop is what a hand-written one would be.
template <bool kSparse, unsigned kPresent, class R>
double run(ThreadPool& pool, const R& rule, const Bases& base, std::size_t n, const std::size_t* idx,
           const double* val, bool fold) {
  constexpr int K = R::kOperands;
  auto range = [&](std::size_t b, std::size_t e) {
    // A copy of the rule, whose address no element pointer can hold: GCC may keep its parameters
    // in registers across the element's stores (through `rule`, a double the stores might alias,
    // it reloaded them per element and left the lanes loop unvectorised).
    const R r = rule;
    RuleMemo<R> memo{};
    double* p[MapOperands::kMax] = {};
    auto term = [&](std::size_t j) {
      const std::size_t i = kSparse ? idx[j] : j;
      for (int k = 0; k < K; ++k)
        if (kPresent >> k & 1u) p[k] = base[k] + i;
      return apply_element(r, kSparse ? val[j] : 0.0, p, memo);
    };
    if constexpr (rule_folds_max<R>) {
      double m = 0;
      for (std::size_t j = b; j < e; ++j) m = std::max(m, term(j));
      return m;
    } else if (kSparse || !fold) {
      double s = 0;
      for (std::size_t j = b; j < e; ++j) {
        const double t = term(j);
        if (fold) s += t;
      }
      return s;
    } else {
      double acc[kLanes] = {};
      std::size_t j = b;
      for (; j + kLanes <= e; j += kLanes)
        for (std::size_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
      for (; j < e; ++j) acc[0] += term(j);
      double s = 0;
      for (double a : acc) s += a;
      return s;
    }
  };
  if (!fold) {
    blocks(pool, n, range);
    return 0.0;
  }
  if constexpr (rule_folds_max<R>) {
    return reduce_max(pool, n, range);
  } else {
    return reduce(pool, n, range);
  }
}

/// run() instantiated for the operands present (bit k of kPresent: operand k), decided per call,
/// so no element tests a pointer for null: such a test per element and operand kept GCC from
/// vectorising the dense maps (adf with L2 on the 300-sentence CoNLL-2000 slice, paired runs
/// against the hand-written loops this layer replaced: 1.13× their time with it, 0.97× without).
template <class R, unsigned kPresent = 0, int k = 0>
double run_present(ThreadPool& pool, const R& rule, const Bases& base, std::size_t n, const CpuSparse* x,
                   bool fold) {
  if constexpr (k == R::kOperands) {
    if (x) return run<true, kPresent>(pool, rule, base, x->index.size(), x->index.data(), x->value.data(), fold);
    return run<false, kPresent>(pool, rule, base, n, nullptr, nullptr, fold);
  } else if constexpr (rule_optional<R> >> k & 1u) {
    return base[k] ? run_present<R, kPresent | (1u << k), k + 1>(pool, rule, base, n, x, fold)
                   : run_present<R, kPresent, k + 1>(pool, rule, base, n, x, fold);
  } else {
    return run_present<R, kPresent | (1u << k), k + 1>(pool, rule, base, n, x, fold);
  }
}

}  // namespace

double CpuBackend::apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over,
                              bool sum) {
  const CpuSparse* x = over ? &cpu_sparse(*over) : nullptr;
  return dispatch_rule(rule, [&](const auto& r) {
    using R = std::decay_t<decltype(r)>;
    const std::size_t n = rule_operand_size<R>(operands);
    if (x) check_index(*x, n);
    Bases base{};
    for (int k = 0; k < R::kOperands; ++k)
      if (operands.v[k]) base[k] = data(*operands.v[k]).data();
    return run_present(pool_, r, base, n, x, sum);
  });
}

}  // namespace crfx
