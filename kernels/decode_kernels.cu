// crfx — the decoding kernels: viterbi (best path) and viterbi_nbest (n best paths, with its
// list merge nbest_merge), and their launchers (declared in decode_kernels.cuh). Both read the
// emissions and edge matrices the chunk kernels (chain_kernels.cu) computed.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "decode_kernels.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

// ---- Viterbi -------------------------------------------------------------------------------

/// Block per sentence, threads over labels; the CPU's loop order and strict comparisons, so ties
/// go to the smallest label id at every step and at the end. CPU twin: viterbi() in
/// host/cpu/chain.cpp.
__global__ void __launch_bounds__(512) viterbi_kernel(ViterbiParams p) {
  const int L = p.L;
  const std::size_t LL = std::size_t(L) * L;
  const int tid = threadIdx.x, nth = blockDim.x;
  const unsigned i = p.ch.order[blockIdx.x];
  const std::uint32_t sid = p.ch.sent[i];
  const std::size_t tok0 = p.sent_off[sid], T = p.sent_off[sid + 1] - tok0;
  if (T == 0) {
    if (p.score && tid == 0) p.score[i] = 0.0;
    return;
  }
  const std::size_t r0 = p.ch.slots[i];
  const double* S = p.S + r0 * L;
  double* d = p.d + r0 * L;
  if (p.independent) {  // the arg-max per position (ties → the smallest label id), thread per position
    for (std::size_t t = tid; t < T; t += nth) {
      const double* s = S + t * L;
      std::uint32_t arg = 0;
      for (int y = 1; y < L; ++y)
        if (s[y] > s[arg]) arg = std::uint32_t(y);
      p.out[r0 + t] = arg;
      d[t * L] = s[arg];
    }
    __syncthreads();
    if (p.score && tid == 0) {  // the CPU's sum, in t order
      double score = 0;
      for (std::size_t t = 0; t < T; ++t) score += d[t * L];
      p.score[i] = score;
    }
    return;
  }
  std::uint32_t* back = p.back + r0 * L;
  for (int y = tid; y < L; y += nth) d[y] = S[y];
  __syncthreads();
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = p.edge && row_has_edge(p.edge_off, tok0 + t, t) ? p.edge + (r0 + t) * LL : p.trans;
    const double* dp = d + (t - 1) * L;
    for (int yc = tid; yc < L; yc += nth) {
      double best;
      std::uint32_t arg;
      best_predecessor(dp, M, L, yc, best, arg);
      d[t * L + yc] = best + S[t * L + yc];
      back[t * L + yc] = arg;
    }
    __syncthreads();
  }
  if (tid == 0) {
    const double best = backtrack(d + (T - 1) * L, back, L, T, p.out + r0);
    if (p.score) p.score[i] = best;
  }
}

// ---- n-best Viterbi -------------------------------------------------------------------------

/// The n-best order of host/cpu/chain.hpp: higher score first, ties to the smaller index.
__device__ __forceinline__ bool nbest_before(double sa, std::uint32_t ia, double sb, std::uint32_t ib) {
  return sa > sb || (sa == sb && ia < ib);
}

/// Merges L sorted lists, list yp being value(yp·n + k) for k = 0 … n − 1 (−∞ at its end), into
/// the sorted buffer (s, ix) of the first n in the n-best order; returns how many. The
/// list-at-a-time merge of merge_best in host/cpu/chain.cpp: a list whose head does not beat a
/// full buffer's last entry is skipped, otherwise a forward count of how many of each run make
/// the first n and a backward in-place merge. O(L·n) at worst, for any n.
template <class Value>
__device__ unsigned nbest_merge(int L, unsigned n, Value value, double* s, std::uint32_t* ix) {
  unsigned m = 0;
  for (int yp = 0; yp < L; ++yp) {
    const std::uint32_t base = std::uint32_t(yp) * n;
    const double head = value(base);
    if (head == -CUDART_INF || (m == n && !nbest_before(head, base, s[n - 1], ix[n - 1]))) continue;
    unsigned a = 0, b = 0;  // how many of the buffer and of the list are among the first n
    while (a + b < n) {
      if (b < n) {
        const double c = value(base + b);
        if (c != -CUDART_INF && (a == m || nbest_before(c, base + b, s[a], ix[a]))) {
          ++b;
          continue;
        }
      }
      if (a == m) break;
      ++a;
    }
    const unsigned total = a + b;
    for (unsigned out = total; b > 0;) {  // backward, in place
      const double c = value(base + b - 1);
      --out;
      if (a > 0 && nbest_before(c, base + b - 1, s[a - 1], ix[a - 1])) {
        --a;
        s[out] = s[a];
        ix[out] = ix[a];
      } else {
        --b;
        s[out] = c;
        ix[out] = base + b;
      }
    }
    m = total;
  }
  return m;
}

/// Block per sentence, threads over labels. Each (t, y) merges the L sorted predecessor lists
/// into its n best partial paths with nbest_merge, the output row itself as the buffer: the same
/// lists as the CPU's under the same strict order, and the same additions (d + τ, then + s), so
/// the same scores bit for bit. CPU twin: viterbi_nbest() in host/cpu/chain.cpp.
__global__ void __launch_bounds__(512) viterbi_nbest_kernel(NbestParams p) {
  const int L = p.L;
  const unsigned n = p.n;
  const std::size_t LL = std::size_t(L) * L, LK = std::size_t(L) * n;
  const int tid = threadIdx.x, nth = blockDim.x;
  const unsigned i = p.ch.order[blockIdx.x];
  const std::uint32_t sid = p.ch.sent[i];
  const std::size_t tok0 = p.sent_off[sid], T = p.sent_off[sid + 1] - tok0;
  double* score = p.score + std::size_t(i) * n;
  if (T == 0) {
    for (unsigned r = tid; r < n; r += nth) score[r] = -CUDART_INF;
    return;
  }
  const std::size_t r0 = p.ch.slots[i];
  const double* S = p.S + r0 * L;
  double* d = p.d + r0 * LK;
  std::uint32_t* back = p.back + r0 * LK;
  for (std::size_t j = tid; j < LK; j += nth) {
    d[j] = j % n == 0 ? S[j / n] : -CUDART_INF;
    back[j] = 0;
  }
  __syncthreads();
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = p.edge && row_has_edge(p.edge_off, tok0 + t, t) ? p.edge + (r0 + t) * LL : p.trans;
    const double* dp = d + (t - 1) * LK;
    for (int yc = tid; yc < L; yc += nth) {
      double* dc = d + t * LK + std::size_t(yc) * n;
      std::uint32_t* bc = back + t * LK + std::size_t(yc) * n;
      const unsigned m = nbest_merge(
          L, n, [&](std::uint32_t j) { return dp[j] + M[std::size_t(j / n) * L + yc]; }, dc, bc);
      for (unsigned r = 0; r < m; ++r) dc[r] = dc[r] + S[t * L + yc];
      for (unsigned r = m; r < n; ++r) {
        dc[r] = -CUDART_INF;
        bc[r] = 0;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    // The ends: the same merge over the last position's lists, into score[] and, for the
    // indices, back's row 0 (never read by the backtrack).
    const double* dl = d + (T - 1) * LK;
    std::uint32_t* ends = back;
    const unsigned m = nbest_merge(L, n, [&](std::uint32_t j) { return dl[j]; }, score, ends);
    std::uint32_t* out = p.out + n * r0;
    for (unsigned r = 0; r < m; ++r) {
      std::uint32_t* path = out + std::size_t(r) * T;
      std::uint32_t j = ends[r];
      for (std::size_t t = T; t-- > 0;) {
        path[t] = j / n;
        if (t > 0) j = back[t * LK + j];
      }
    }
    for (unsigned r = m; r < n; ++r) {
      score[r] = -CUDART_INF;
      for (std::size_t t = 0; t < T; ++t) out[std::size_t(r) * T + t] = 0;
    }
  }
}

}  // namespace

void launch_viterbi(const ViterbiParams& p, std::size_t n, int threads, cudaStream_t s) {
  CRFX_LAUNCH(viterbi_kernel, unsigned(n), threads, 0, s, p);
}

void launch_viterbi_nbest(const NbestParams& p, std::size_t m, int threads, cudaStream_t s) {
  CRFX_LAUNCH(viterbi_nbest_kernel, unsigned(m), threads, 0, s, p);
}

}  // namespace crfx::cuda::detail
