// crfx — CPU backend: its vectors (CpuVector, cpu_vector.hpp): their storage (HostArray),
// allocation, host copies and swap.
// Their algebra (fill, axpy, dot, the fused forms …) is Backend's, element rules run by apply_rule
// (host/backend/vector_rules.hpp, cpu_rules.cpp).
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "cpu/cpu_vector.hpp"
#include "util/huge_pages.hpp"

namespace crfx {

using cpu_detail::check_same;
using cpu_detail::CpuVector;
using cpu_detail::V;

namespace {
constexpr std::size_t kHugePage = std::size_t(2) << 20;
}  // namespace

HostArray::HostArray(std::size_t n) : n_(n) {
  if (n == 0) return;
  if (n > (std::size_t(-1) - kHugePage) / (2 * sizeof(double))) throw std::bad_alloc();
  const std::size_t bytes = n * sizeof(double);
  if (bytes < kHugePageAdviceFrom) {
    p_ = static_cast<double*>(std::calloc(n, sizeof(double)));
    if (!p_) throw std::bad_alloc();
    return;
  }
  // Map one huge page more than needed, then trim to a 2 MiB-aligned range.
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage, len = rounded + kHugePage;
  void* raw = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(raw) + kHugePage - 1) & ~(kHugePage - 1);
  const std::size_t head = at - reinterpret_cast<std::uintptr_t>(raw), tail = len - head - rounded;
  if (head) ::munmap(raw, head);
  if (tail) ::munmap(reinterpret_cast<char*>(at) + rounded, tail);
  advise_huge_pages(reinterpret_cast<void*>(at), rounded);  // a hint; ordinary pages without THP
  p_ = reinterpret_cast<double*>(at);
  mapped_ = rounded;
}

HostArray::~HostArray() {
  if (mapped_)
    ::munmap(p_, mapped_);
  else
    std::free(p_);
}

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
