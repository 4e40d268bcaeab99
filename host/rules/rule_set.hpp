// crfx — the element rules as one set (the Backend's vector algebra, host/backend/vector_rules.hpp,
// and the optimizers'), and how an optimizer runs one.
//
// A rule is a small trivially copyable struct with the parameters of one per-weight update and a
// host-device element function
//     double operator()(double x, double* const* v) const            (or, with a Memo type,
//     double operator()(double x, double* const* v, Memo& m) const)
// where v[k] points at the element of operand k (null for an absent operand: only those the
// rule names in its kOptional bit mask may be absent) and x is the value
// of the sparse entry being visited (0 in a dense map); it may write the elements and returns a
// term that map_reduce sums (or, for a rule with kFoldMax, of which it takes the largest).
// Backend::apply_rule runs it over a dense range or a sparse support,
// on every backend: the CPU in its blocks, the CUDA backend in a kernel instantiated for every
// rule listed in AllRules below. So adding a trainer means: its rule header here, one entry in
// OptimizerRules, its loop in host/optim and its line in the registry — no backend changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/vector_rules.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "rules/adf_update.hpp"
#include "rules/lazy_decay.hpp"
#include "rules/owlqn_update.hpp"
#include "rules/peer_update.hpp"
#include "rules/rprop_update.hpp"
#include "rules/sgd_l1_update.hpp"

namespace crfx {

/// The optimizers' rules.
using OptimizerRules = RuleList<SgdL1Rule, LazyDecayRule, AdfStepRule, AdfRateRule, OwlqnPseudoGradientRule,
                                OwlqnConstrainRule, OwlqnProjectRule, RpropRule, SparseDotRule, ArowVarianceRule,
                                ArowUpdateRule>;

namespace rule_detail {
template <class A, class B>
struct Concat;
template <class... A, class... B>
struct Concat<RuleList<A...>, RuleList<B...>> {
  using type = RuleList<A..., B...>;
};

struct NoMemo {};
template <class R, class = void>
struct MemoOf {
  using type = NoMemo;
};
template <class R>
struct MemoOf<R, std::void_t<typename R::Memo>> {
  using type = typename R::Memo;
};
}  // namespace rule_detail

/// Every rule Backend::apply_rule can run (its id is its position here): the vector algebra's
/// (host/backend/vector_rules.hpp, which Backend's vector members encode by their position in
/// VectorRules), then the optimizers'.
using AllRules = rule_detail::Concat<VectorRules, OptimizerRules>::type;

template <class R>
inline constexpr std::uint32_t rule_id = rule_index<R>(AllRules{});
static_assert(rule_id<SubDotRule> == rule_index<SubDotRule>(VectorRules{}) &&
                  rule_id<SgdL1Rule> == rule_index<void>(VectorRules{}),
              "AllRules starts with VectorRules, so that vector_rule() gives a rule its AllRules id");

namespace rule_detail {
template <class R, class = void>
struct FoldMaxOf : std::false_type {};
template <class R>
struct FoldMaxOf<R, std::void_t<decltype(R::kFoldMax)>> : std::bool_constant<R::kFoldMax> {};
}  // namespace rule_detail

/// Whether a backend folds rule R's terms by maximum (from 0) rather than by sum (R::kFoldMax).
template <class R>
inline constexpr bool rule_folds_max = rule_detail::FoldMaxOf<R>::value;

namespace rule_detail {
template <class R, class = void>
struct OptionalOf : std::integral_constant<unsigned, 0> {};
template <class R>
struct OptionalOf<R, std::void_t<decltype(R::kOptional)>> : std::integral_constant<unsigned, R::kOptional> {};
}  // namespace rule_detail

/// The operands rule R may be given as null (bit k: operand k); the others are required.
template <class R>
inline constexpr unsigned rule_optional = rule_detail::OptionalOf<R>::value;

/// For backends: the common size of the operands rule R is given (operand 0 sets it); Error unless
/// every operand R requires is given and every one given has that size.
template <class R>
std::size_t rule_operand_size(const MapOperands& ops) {
  static_assert(!(rule_optional<R> & 1u), "operand 0 sets the size: it cannot be optional");
  for (int k = 0; k < R::kOperands; ++k)
    if (!ops.v[k] && !(rule_optional<R> >> k & 1u))
      throw Error("internal: element rule " + std::to_string(rule_id<R>) + " needs operand " + std::to_string(k));
  const std::size_t n = ops.v[0]->size();
  for (int k = 1; k < R::kOperands; ++k)
    if (ops.v[k] && ops.v[k]->size() != n) throw Error("internal: element rule operands of different sizes");
  return n;
}

/// The scratch a rule keeps between elements (rule_detail::NoMemo when it declares none).
template <class R>
using RuleMemo = typename rule_detail::MemoOf<R>::type;

/// For backends: one element of rule r, with its memo when it has one.
template <class R>
CRFX_HOST_DEVICE inline double apply_element(const R& r, double x, double* const* v, RuleMemo<R>& memo) {
  if constexpr (std::is_same_v<RuleMemo<R>, rule_detail::NoMemo>) {
    (void)memo;
    return r(x, v);
  } else {
    return r(x, v, memo);
  }
}

/// The rule as Backend::apply_rule takes it (its id and bytes).
template <class R>
MapRule make_map_rule(const R& r) {
  static_assert(rule_id<R> < rule_index<void>(AllRules{}), "not a rule of AllRules");
  return encode_rule(r, rule_id<R>);
}

namespace rule_detail {
template <class F, class... Rs>
double dispatch(const MapRule& m, F&& f, RuleList<Rs...>) {
  double result = 0;
  bool found = false;
  auto one = [&](auto* tag) {
    using R = std::remove_pointer_t<decltype(tag)>;
    if (found || m.id != rule_id<R>) return;
    R r;
    std::memcpy(static_cast<void*>(&r), m.params, sizeof r);
    result = f(r);
    found = true;
  };
  (one(static_cast<Rs*>(nullptr)), ...);
  if (!found) throw Error("internal: unknown element rule " + std::to_string(m.id));
  return result;
}
}  // namespace rule_detail

/// For backends: f(rule) with the rule `m` carries, decoded to its type; returns what f returns.
template <class F>
double dispatch_rule(const MapRule& m, F&& f) {
  return rule_detail::dispatch(m, f, AllRules{});
}

/// One operand slot of map / map_reduce: a vector (read or written, as the rule says) or nullptr.
struct Operand {
  Vector* v;
  Operand(Vector& x) : v(&x) {}
  Operand(const Vector& x) : v(const_cast<Vector*>(&x)) {}
  Operand(Vector* x) : v(x) {}
  Operand(const Vector* x) : v(const_cast<Vector*>(x)) {}
  Operand(std::nullptr_t) : v(nullptr) {}
};

namespace rule_detail {
template <class R>
MapOperands operands(std::initializer_list<Operand> ops) {
  if (ops.size() != std::size_t(R::kOperands))
    throw Error("internal: a rule of " + std::to_string(R::kOperands) + " operands given " +
                std::to_string(ops.size()));
  MapOperands o;
  int k = 0;
  for (const Operand& op : ops) o.v[k++] = op.v;
  return o;
}
}  // namespace rule_detail

/// Runs `rule` on every element: every index of the operands (over == nullptr) or every entry of
/// the sparse vector `over` (the rule's x is the entry's value).
template <class R>
void map(Backend& b, const R& rule, std::initializer_list<Operand> ops, const SparseVector* over = nullptr) {
  b.apply_rule(make_map_rule(rule), rule_detail::operands<R>(ops), over, false);
}

/// map, returning the sum of the rule's terms (deterministic: the backend's fixed blocked order),
/// or their maximum (from 0) for a rule with kFoldMax.
template <class R>
double map_reduce(Backend& b, const R& rule, std::initializer_list<Operand> ops,
                  const SparseVector* over = nullptr) {
  return b.apply_rule(make_map_rule(rule), rule_detail::operands<R>(ops), over, true);
}

}  // namespace crfx
