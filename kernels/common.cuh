// crfx — what the CUDA backend's kernel files share: the constants (block sizes, limits, the
// log-space threshold), the block-wide max and sum, the exact log-sum-exp, the view of a chunk's
// sentences, the edge-position test and the binary search of a plan's group list.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "crfx/internal/host_device.hpp"  // kTinySum, kGoldFloor, kMaxLossWeight, exp_scaled

// Unrolls the next loop by n under nvcc (several independent loads in flight before the first
// use); nothing under the emulation's g++.
#if defined(__CUDACC__)
#define CRFX_PRAGMA(x) _Pragma(#x)
#define CRFX_UNROLL(n) CRFX_PRAGMA(unroll n)
#else
#define CRFX_UNROLL(n)
#endif

namespace crfx::cuda::detail {

constexpr std::uint32_t kMaxLabels = 4096;  // the forward-backward block keeps [L] in shared memory
constexpr int kMapThreads = 256;
constexpr int kRedThreads = 256;
constexpr int kRedBlocks = 512;             // fixed reduction grid (fewer for short vectors)
constexpr int kGatherWarps = 8;             // warps per block in the gathers
constexpr int kFbWarps = 4;                 // sentences (warps) per block of forward-backward at L ≤ 32
constexpr unsigned kFbSegment = 64;         // positions a warp of the split forward-backward's marginals walks
constexpr std::size_t kFbSplitLength = 128; // the split forward-backward from a chunk's longest sentence this long
constexpr std::size_t kFbScanLength = 256;  // a sentence this long gets its recursions as a scan (fb_scan_kernels.cu)
constexpr unsigned kTransGroup = 32;        // sentences per leaf of the transition tree
constexpr std::size_t kSharedLimit = 48 * 1024;
constexpr int kFbGroupBlock = 512;                  // threads a block of the grouped forward-backward (L > 32)
constexpr std::size_t kFbGroupShared = 200 * 1024;  // its shared memory at most (sm_90: 227 KB a block)
constexpr int kEmissionRowsMaxL = 512;     // emission by row groups up to here (emission_rows_kernel)
constexpr std::uint32_t kNone = 0xffffffffu;  // SAG: a position without an edge slot

// ---- block helpers (blockDim.x a multiple of 32, ≤ 1024) -------------------------------------

inline __device__ double block_max(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // `red` may still be read from the previous call
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) r = fmax(r, red[w]);
  return r;
}

/// bar.sync id, count: the `count` threads (whole warps) of one group of the block wait for one
/// another (ids 1–15; __syncthreads is barrier 0), with __syncthreads' memory ordering among them.
inline __device__ void group_barrier(unsigned id, unsigned count) {
#if defined(__CUDACC__)
  asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(count) : "memory");
#else
  ::crfx::emu::detail::named_barrier(id, count, __FILE__, __LINE__);
#endif
}

/// Fixed-shape sum (lane 0 of each warp after the butterfly, then warps in order).
inline __device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) r += red[w];
  return r;
}

/// One-pass log Σ exp over a strided sequence v(k), k < n (exact, L exps).
template <class F>
__device__ double log_sum_exp_seq(int n, F v) {
  const double ninf = -CUDART_INF;
  double mx = ninf, s = 0;
  for (int k = 0; k < n; ++k) {
    const double x = v(k);
    if (x == ninf) continue;
    if (x > mx) {
      s = s * exp(mx - x) + 1.0;
      mx = x;
    } else {
      s += exp(x - mx);
    }
  }
  return mx == ninf ? ninf : mx + log(s);
}

// ---- corpus and chunk views ----------------------------------------------------------------

struct ChunkView {
  const std::uint32_t* sent;   // [n] sentence ids, span order
  const std::size_t* slots;    // [n+1] first row of each sentence
  const std::uint32_t* order;  // [n] block → chunk sentence (longest first: the length buckets)
};

inline __device__ bool row_has_edge(const std::size_t* edge_off, std::size_t tok, std::size_t t) {
  return edge_off != nullptr && t > 0 && edge_off[tok + 1] > edge_off[tok];
}

/// The first position in the ascending list [first, last) not below x (a sentence's group list of
/// the plans made once: batch_kernels.cu's union, perceptron_kernels.cu's merged difference).
inline __device__ const std::uint32_t* lower_id(const std::uint32_t* first, const std::uint32_t* last,
                                                std::uint32_t x) {
  std::size_t len = std::size_t(last - first);
  while (len > 0) {
    const std::size_t half = len / 2;
    if (first[half] < x) {
      first += half + 1;
      len -= half + 1;
    } else {
      len = half;
    }
  }
  return first;
}

}  // namespace crfx::cuda::detail
