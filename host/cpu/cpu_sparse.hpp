// crfx — CPU backend: the sparse vector behind SparseVector, and the blocked loops every
// element-wise loop and reduction of the backend runs in (vectors, sparse primitives, rules).
//
// Loops over n elements run sequentially up to kReduceBlock of them and in kReduceBlock blocks on
// the pool above that; sums combine the per-block partials in block order, so no result depends on
// the number of threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "util/thread_pool.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {

struct CpuSparse final : SparseVector {
  std::vector<std::size_t> index;  // strictly increasing
  std::vector<double> value;
  std::size_t nnz() const override { return index.size(); }
};

inline CpuSparse& cpu_sparse(SparseVector& x) {
  auto* p = dynamic_cast<CpuSparse*>(&x);
  if (!p) throw Error("internal: sparse vector does not belong to the CPU backend");
  return *p;
}
inline const CpuSparse& cpu_sparse(const SparseVector& x) { return cpu_sparse(const_cast<SparseVector&>(x)); }

inline void check_index(const CpuSparse& x, std::size_t n) {
  if (!x.index.empty() && x.index.back() >= n)
    throw Error("internal: sparse index beyond the vector (" + std::to_string(x.index.back()) +
                " ≥ " + std::to_string(n) + ")");
}

/// f(begin, end) over [0, n): one call when n ≤ kReduceBlock, else blocks on the pool.
template <class F>
void blocks(ThreadPool& pool, std::size_t n, F&& f) {
  run_blocks(&pool, n, kReduceBlock, [&](std::size_t begin, std::size_t end, unsigned) { f(begin, end); });
}

/// Σ of f(begin, end) over kReduceBlock blocks of [0, n), combined in block order from 0.0 (so
/// one block's −0 sums to +0, as any number of blocks would).
template <class F>
double reduce(ThreadPool& pool, std::size_t n, F&& f) {
  const std::size_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  if (nb <= 1) return n ? 0.0 + f(std::size_t(0), n) : 0.0;
  std::vector<double> partial(nb, 0.0);
  pool.run(nb, [&](std::size_t b, unsigned) {
    partial[b] = f(b * kReduceBlock, std::min(n, (b + 1) * kReduceBlock));
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

}  // namespace crfx
