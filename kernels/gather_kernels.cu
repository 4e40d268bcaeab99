// crfx — the marginal reduction's kernels: gather (state and edge attributes), trans_partial and
// trans_final (the transition tree), and their launchers (declared in gather_kernels.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "device_buffer.cuh"
#include "gather_kernels.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

/// First k in [lo, hi) with tok[k] ≥ t (tok ascending there), else hi.
__device__ std::size_t lower_bound_token(const std::uint32_t* tok, std::size_t lo, std::size_t hi, std::uint32_t t) {
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (tok[mid] < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Warp per (attribute, block of 32 weights of its row): lane c of the block handles the row's
/// weight k = begin(gid0 + a) + c (c < the row's size), g[k] += scale · Σ x · delta[row][slot(k)]
/// over the attribute's occurrences (token order) whose token is in the chunk — dense rows: k =
/// a·width + c of the block, slot c; a sparse layout's rows list their slots. Occurrences are read
/// 32 at a time and the active ones processed in lane order, so the sum order is fixed. A chunk of
/// consecutive tokens [t_lo, t_hi) (ch.token_slot null) is one run of each attribute's
/// occurrences, found by binary search: its work is its own occurrences, not the corpus's. CPU
/// twin: the per-part reduction of CpuBackend::evaluate (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(kGatherWarps * 32)
    gather_kernel(std::size_t num_attrs, std::size_t width, std::size_t max_row, WeightGroups gl,
                  std::uint32_t gid0, const std::size_t* occ_off, const std::uint32_t* occ_tok,
                  const double* occ_val, GatherChunk ch, const double* delta, double scale, double* G) {
  const std::size_t col_blocks = (max_row + 31) / 32;
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  if (warp >= num_attrs * col_blocks) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const std::size_t a = warp / col_blocks, c0 = (warp - a * col_blocks) * 32, c = c0 + lane;
  const std::uint32_t gid = gid0 + std::uint32_t(a);
  const std::size_t row = gl.size(gid);
  if (c0 >= row) return;  // warp-uniform: a sparse row shorter than max_row has no weight here
  const std::size_t kw = gl.begin(gid) + c;  // this lane's weight (when c < row)
  const std::size_t col = c < row ? gl.slot(kw, gid) : 0;
  std::size_t b = occ_off[a], e = occ_off[a + 1];
  if (!ch.token_slot) {  // warp-uniform
    b = lower_bound_token(occ_tok, b, e, ch.t_lo);
    e = lower_bound_token(occ_tok, b, e, ch.t_hi);
  }
  if (ch.visits && lane == 0) atomicAdd(ch.visits, static_cast<unsigned long long>(e - b));
  double acc = 0;
  bool touched = false;
  for (std::size_t k0 = b; k0 < e; k0 += 32) {
    const std::size_t k = k0 + lane;
    int slot = -1;
    double v = 0;
    if (k < e) {
      slot = ch.token_slot ? ch.token_slot[occ_tok[k]] : int(occ_tok[k] - ch.t_lo);
      v = occ_val ? occ_val[k] : 1.0;
    }
    unsigned mask = __ballot_sync(0xffffffffu, slot >= 0);
    touched |= mask != 0;
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const int s = __shfl_sync(0xffffffffu, slot, src);
      const double x = __shfl_sync(0xffffffffu, v, src);
      if (c < row) acc += x * delta[std::size_t(s) * width + col];
    }
  }
  if (touched && c < row) G[kw] += scale * acc;
}

/// Transition tree, level 1: partial[g][j] = Σ_{i in group g, in order} pair[i][j].
__global__ void __launch_bounds__(256) trans_partial_kernel(std::size_t LL, unsigned n, const double* pair, double* partial) {
  const std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (j >= LL) return;
  const unsigned groups = (n + kTransGroup - 1) / kTransGroup;
  for (unsigned g = blockIdx.y; g < groups; g += gridDim.y) {
    const unsigned b = g * kTransGroup, e = min(n, b + kTransGroup);
    double s = 0;
    for (unsigned i = b; i < e; ++i) s += pair[std::size_t(i) * LL + j];
    partial[std::size_t(g) * LL + j] = s;
  }
}

/// Level 2: G[k] += scale · Σ_g partial[g][j], groups in order, for the transition weight k < count
/// of slot j (slots null: j = k, the dense block).
__global__ void __launch_bounds__(256) trans_final_kernel(std::size_t LL, unsigned groups, const double* partial, double scale,
                                   std::size_t count, const std::uint32_t* slots, double* G) {
  const std::size_t k = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  const std::size_t j = slots ? slots[k] : k;
  double s = 0;
  for (unsigned g = 0; g < groups; ++g) s += partial[std::size_t(g) * LL + j];
  G[k] += scale * s;
}

}  // namespace

void launch_gather(std::size_t num_attrs, std::size_t width, std::size_t max_row, const WeightGroups& gl,
                   std::uint32_t gid0, const std::size_t* occ_off, const std::uint32_t* occ_tok,
                   const double* occ_val, const GatherChunk& ch, const double* delta, double scale, double* G,
                   cudaStream_t s) {
  if (max_row == 0) return;  // no attribute has a weight
  const int per_block = kGatherWarps * 32;
  const std::size_t warps = num_attrs * ((max_row + 31) / 32);
  CRFX_LAUNCH(gather_kernel, grid_for(warps * 32, per_block, (std::size_t(1) << 31) - 1), per_block, 0, s,
              num_attrs, width, max_row, gl, gid0, occ_off, occ_tok, occ_val, ch, delta, scale, G);
}

void launch_transition_tree(std::size_t LL, std::size_t n, const double* pair, double* partial, double scale,
                            std::size_t count, const std::uint32_t* slots, double* G, cudaStream_t s) {
  if (count == 0) return;  // an empty transition row
  const unsigned groups = unsigned((n + kTransGroup - 1) / kTransGroup);
  CRFX_LAUNCH(trans_partial_kernel, dim3(grid_for(LL, 256), std::min(groups, 65535u)), 256, 0, s, LL,
              unsigned(n), pair, partial);
  CRFX_LAUNCH(trans_final_kernel, grid_for(count, 256), 256, 0, s, LL, groups, partial, scale, count, slots, G);
}

}  // namespace crfx::cuda::detail
