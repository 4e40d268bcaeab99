// crfx — Backend's vector algebra (include/crfx/internal/backend.hpp), written once for every backend: each
// member hands its rule (host/backend/vector_rules.hpp) and operands to the backend's apply_rule.
// Why: fill, copy, axpy, dot … and the fused quasi-Newton forms were a CPU loop and a CUDA functor
// each; as rules they are one expression, run by the one rule layer both backends have.
#include "backend/vector_rules.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {
namespace {

/// apply_rule(rule) over the operands `v` (dense); with `fold` the terms' sum (or maximum).
template <class R, class... V>
double run(Backend& b, const R& rule, bool fold, const V&... v) {
  static_assert(sizeof...(V) == std::size_t(R::kOperands), "a vector rule's operands, in order");
  MapOperands ops;
  int k = 0;
  ((ops.v[k++] = const_cast<Vector*>(static_cast<const Vector*>(&v))), ...);
  return b.apply_rule(vector_rule(rule), ops, nullptr, fold);
}

}  // namespace

void Backend::fill(Vector& x, double value) { run(*this, FillRule{value}, false, x); }
void Backend::copy(const Vector& src, Vector& dst) { run(*this, CopyRule{}, false, src, dst); }
void Backend::scale(double a, Vector& x) { run(*this, ScaleRule{a}, false, x); }
void Backend::axpy(double a, const Vector& x, Vector& y) { run(*this, AxpyRule{a}, false, x, y); }
void Backend::axpby(double a, const Vector& x, double b, Vector& y) { run(*this, AxpbyRule{a, b}, false, x, y); }
void Backend::sub(const Vector& x, const Vector& y, Vector& out) { run(*this, SubRule{}, false, x, y, out); }
double Backend::dot(const Vector& x, const Vector& y) { return run(*this, DotRule{}, true, x, y); }
double Backend::norm1(const Vector& x) { return run(*this, AbsRule{}, true, x); }
double Backend::norm2sq(const Vector& x) { return dot(x, x); }
double Backend::norm_inf(const Vector& x) { return run(*this, AbsMaxRule{}, true, x); }
std::size_t Backend::count_nonzero(const Vector& x) {
  return static_cast<std::size_t>(run(*this, NonzeroRule{}, true, x));  // exact below 2^53
}

void Backend::scaled_copy(double a, const Vector& x, Vector& y) { run(*this, ScaledCopyRule{a}, false, x, y); }

void Backend::add_scaled(const Vector& x, double a, const Vector& d, Vector& out) {
  if (&out == &d) throw Error("internal: add_scaled with out = d");
  run(*this, AddScaledRule{a}, false, x, d, out);
}

double Backend::axpy_dot(double a, const Vector& x, Vector& y, const Vector& z) {
  return run(*this, AxpyDotRule{a}, true, x, y, z);
}

double Backend::scale_dot(double a, Vector& x, const Vector& z) { return run(*this, ScaleDotRule{a}, true, x, z); }

double Backend::axpy_norm2sq(double a, const Vector& x, Vector& y) {
  return run(*this, AxpyNorm2sqRule{a}, true, x, y);
}

double Backend::sub_dot(const Vector& x, const Vector& y, Vector& out, const Vector& z) {
  return run(*this, SubDotRule{}, true, x, y, out, z);
}

}  // namespace crfx
