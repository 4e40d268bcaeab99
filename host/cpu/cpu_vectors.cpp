// crfx — CPU backend: its vectors (CpuVector, cpu_vector.hpp): allocation, host copies and swap.
// Their algebra (fill, axpy, dot, the fused forms …) is Backend's, element rules run by apply_rule
// (host/backend/vector_rules.hpp, cpu_rules.cpp).
#include <algorithm>
#include <memory>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "cpu/cpu_vector.hpp"

namespace crfx {

using cpu_detail::check_same;
using cpu_detail::CpuVector;
using cpu_detail::V;

VectorPtr CpuBackend::vector(std::size_t n) { return std::make_unique<CpuVector>(n); }

// On every thread, in blocks: a fresh vector's pages are faulted in (and zeroed by the kernel)
// by the thread that first writes them, and for a model's weights that is most of the copy.
void CpuBackend::write(Vector& dst, const double* src) {
  auto& d = V(dst);
  blocks(pool_, d.size(), [&](std::size_t b, std::size_t e) { std::copy(src + b, src + e, &d[0] + b); });
}

void CpuBackend::read(const Vector& src, double* dst) {
  const auto& s = V(src);
  blocks(pool_, s.size(), [&](std::size_t b, std::size_t e) { std::copy(&s[0] + b, &s[0] + e, dst + b); });
}

void CpuBackend::swap(Vector& x, Vector& y) {
  check_same(x, y);
  V(x).swap(V(y));
}

}  // namespace crfx
