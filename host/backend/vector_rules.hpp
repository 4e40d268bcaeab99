// crfx — the Backend's dense vector algebra as element rules: fill, copy, scale, axpy …, the
// reductions and the fused quasi-Newton forms, each a small rule that Backend's non-virtual
// members (host/backend/vector_algebra.cpp) hand to Backend::apply_rule. So the algebra is written
// once, here, and runs on every backend through the one rule layer (the CPU's blocked loops in
// host/cpu/cpu_rules.cpp, CUDA's map kernel and reduction in kernels/backend_rules.cu) instead of
// a hand-written twin per backend.
//
// Each rule's element is the expression the backends' own loops used before it (the same
// operations in the same order), and the backends sum a dense rule's terms as they summed dot():
// so every vector result, and every model, is bit for bit what it was.
//
// Also here, because this part must name the rules without the optimizers' rule set above it: the
// rule list (RuleList), a rule's id in a list and its encoding as a MapRule. The set every backend
// decodes (AllRules, host/rules/rule_set.hpp) starts with VectorRules, so a vector rule's id
// in VectorRules is its id in AllRules (checked there).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/host_device.hpp"

namespace crfx {

template <class... R>
struct RuleList {};

/// The position of rule R in `list` (its id when the list is AllRules); the list's length when
/// R is not in it.
template <class R, class... Rs>
constexpr std::uint32_t rule_index(RuleList<Rs...>) {
  std::uint32_t i = 0;
  bool found = false;
  ((found = found || std::is_same_v<R, Rs>, i += found ? 0u : 1u), ...);
  return i;
}

/// Rule r with id `id`, as Backend::apply_rule takes it.
template <class R>
MapRule encode_rule(const R& r, std::uint32_t id) {
  static_assert(std::is_trivially_copyable_v<R>, "a rule crosses the Backend seam as bytes");
  static_assert(sizeof(R) <= MapRule::kMaxBytes && alignof(R) <= alignof(double), "rule too large");
  static_assert(R::kOperands >= 1 && R::kOperands <= MapOperands::kMax, "operand count");
  MapRule m;
  m.id = id;
  std::memcpy(m.params, &r, sizeof r);
  return m;
}

// ---- the rules (operands in the order of the Backend member's arguments) -----------------------

/// x = value.
struct FillRule {
  static constexpr int kOperands = 1;
  double value = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[0] = value;
    return 0.0;
  }
};

/// dst = src. Operands: 0 src, 1 dst.
struct CopyRule {
  static constexpr int kOperands = 2;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[1] = *v[0];
    return 0.0;
  }
};

/// x = a·x.
struct ScaleRule {
  static constexpr int kOperands = 1;
  double a = 1;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[0] *= a;
    return 0.0;
  }
};

/// y += a·x. Operands: 0 x, 1 y.
struct AxpyRule {
  static constexpr int kOperands = 2;
  double a = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[1] += a * *v[0];
    return 0.0;
  }
};

/// y = a·x + b·y. Operands: 0 x, 1 y.
struct AxpbyRule {
  static constexpr int kOperands = 2;
  double a = 0, b = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[1] = a * *v[0] + b * *v[1];
    return 0.0;
  }
};

/// out = x − y. Operands: 0 x, 1 y, 2 out.
struct SubRule {
  static constexpr int kOperands = 3;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[2] = *v[0] - *v[1];
    return 0.0;
  }
};

/// Term x·y; writes nothing. Operands: 0 x, 1 y.
struct DotRule {
  static constexpr int kOperands = 2;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const { return *v[0] * *v[1]; }
};

/// Term |x| (norm1).
struct AbsRule {
  static constexpr int kOperands = 1;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const { return fabs(*v[0]); }
};

/// Term |x|, folded by maximum (kFoldMax: the backends take the largest term, from 0, instead of
/// the sum): norm_inf.
struct AbsMaxRule {
  static constexpr int kOperands = 1;
  static constexpr bool kFoldMax = true;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const { return fabs(*v[0]); }
};

/// Term 1 where x ≠ 0, else 0 (count_nonzero: sums of ones are exact below 2^53).
struct NonzeroRule {
  static constexpr int kOperands = 1;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const { return *v[0] != 0.0 ? 1.0 : 0.0; }
};

/// y = a·x (as copy, then scale). Operands: 0 x, 1 y.
struct ScaledCopyRule {
  static constexpr int kOperands = 2;
  double a = 1;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[1] = *v[0] * a;
    return 0.0;
  }
};

/// out = x + a·d (as copy, then axpy). Operands: 0 x, 1 d, 2 out.
struct AddScaledRule {
  static constexpr int kOperands = 3;
  double a = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[2] = *v[0] + a * *v[1];
    return 0.0;
  }
};

/// y += a·x, term z·y (the new y). Operands: 0 x, 1 y, 2 z.
struct AxpyDotRule {
  static constexpr int kOperands = 3;
  double a = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double y = *v[1] + a * *v[0];
    *v[1] = y;
    return *v[2] * y;
  }
};

/// x = a·x, term z·x (the new x). Operands: 0 x, 1 z.
struct ScaleDotRule {
  static constexpr int kOperands = 2;
  double a = 1;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double x = *v[0] * a;
    *v[0] = x;
    return *v[1] * x;
  }
};

/// y += a·x, term x·x. Operands: 0 x, 1 y.
struct AxpyNorm2sqRule {
  static constexpr int kOperands = 2;
  double a = 0;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    *v[1] += a * *v[0];
    return *v[0] * *v[0];
  }
};

/// out = x − y, term out·z. Operands: 0 x, 1 y, 2 out, 3 z.
struct SubDotRule {
  static constexpr int kOperands = 4;
  CRFX_HOST_DEVICE double operator()(double, double* const* v) const {
    const double d = *v[0] - *v[1];
    *v[2] = d;
    return d * *v[3];
  }
};

/// The vector algebra's rules: the first ids of AllRules.
using VectorRules = RuleList<FillRule, CopyRule, ScaleRule, AxpyRule, AxpbyRule, SubRule, DotRule, AbsRule,
                             AbsMaxRule, NonzeroRule, ScaledCopyRule, AddScaledRule, AxpyDotRule, ScaleDotRule,
                             AxpyNorm2sqRule, SubDotRule>;

/// A vector rule as Backend::apply_rule takes it.
template <class R>
MapRule vector_rule(const R& r) {
  constexpr std::uint32_t id = rule_index<R>(VectorRules{});
  static_assert(id < rule_index<void>(VectorRules{}), "not a rule of VectorRules");
  return encode_rule(r, id);
}

}  // namespace crfx
