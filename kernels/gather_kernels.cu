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

/// Lanes of a warp over (occurrence group, column) for a row block of `cols` ≤ 32 weights: a
/// group of w lanes (w = cols rounded up to a power of two) per occurrence, 32 / w occurrences at
/// a time, so that short rows (L = 5, 8) keep the lanes busy.
struct LaneSplit {
  int w, groups, g, c;  // group width, groups per warp, this lane's group and column
  __device__ explicit LaneSplit(std::size_t cols) {
    w = 1;
    while (std::size_t(w) < cols) w <<= 1;
    groups = 32 / w;
    const int lane = threadIdx.x & 31;
    g = lane / w;
    c = lane - g * w;
  }
  /// The sum of v over the warp's groups, in every lane of column c (a fixed butterfly).
  __device__ double sum_groups(double v) const {
    for (int o = w; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
};

/// Warp per (segment, block of 32 weights of the attribute's row): the lanes of column c handle
/// weight k = begin(gid0 + a) + c0 + c, the groups walk the segment's occurrences k ≡ g (mod
/// groups) in token order, then the groups are summed by a fixed butterfly. An attribute of one
/// segment adds scale · sum to G[k] (where any occurrence was in the chunk); a segment of a
/// longer list writes its partial row, and whether it had occurrences, for the combine. A chunk
/// of consecutive tokens [t_lo, t_hi) (ch.token_slot null) is one run of the segment, found by
/// binary search. CPU twin: the per-part reduction of CpuBackend::evaluate
/// (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(kGatherWarps * 32)
    gather_kernel(std::size_t segments, const std::size_t* seg_off, const std::uint32_t* seg_attr,
                  const std::size_t* seg_part, std::uint8_t* seg_touched, double* partial, std::size_t width,
                  std::size_t max_row, WeightGroups gl, std::uint32_t gid0, const std::uint32_t* occ_tok,
                  const double* occ_val, GatherChunk ch, const double* delta, double scale, double* G,
                  GatherCountersDevice* counters) {
  const std::size_t col_blocks = (max_row + 31) / 32;
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  if (warp >= segments * col_blocks) return;  // warp-uniform
  const std::size_t sg = warp / col_blocks, c0 = (warp - sg * col_blocks) * 32;
  const std::size_t j = ch.seg_id ? ch.seg_id[sg] : sg;  // the plan's segment (a streamed chunk's own list)
  const std::uint32_t a = seg_attr[j], gid = gid0 + a;
  const std::size_t row = gl.size(gid);
  if (c0 >= row) return;  // warp-uniform: a sparse row shorter than max_row has no weight here
  const LaneSplit ls(row - c0 < 32 ? row - c0 : 32);
  const std::size_t c = c0 + ls.c;
  const bool mine = c < row;
  const std::size_t kw = gl.begin(gid) + c;  // this lane's weight (when mine)
  const std::size_t col = mine ? gl.slot(kw, gid) : 0;
  std::size_t b = seg_off[sg], e = seg_off[sg + 1];
  if (!ch.token_slot && !ch.seg_id && b < e) {  // warp-uniform; a segment inside the range (a whole-corpus
                                  // chunk's every segment) needs no search
    const bool inside = occ_tok[b] >= ch.t_lo && occ_tok[e - 1] < ch.t_hi;
    if (!inside) {
      b = lower_bound_token(occ_tok, b, e, ch.t_lo);
      e = lower_bound_token(occ_tok, b, e, ch.t_hi);
    }
  }
  if (counters && threadIdx.x % 32 == 0) {
    atomicAdd(&counters->visits, static_cast<unsigned long long>(c0 == 0 ? e - b : 0));
    atomicMax(&counters->longest_walk, static_cast<unsigned long long>((e - b + ls.groups - 1) / ls.groups));
  }
  double acc = 0;
  bool touched = false;
  CRFX_UNROLL(4)
  for (std::size_t k = b + ls.g; k < e; k += ls.groups) {
    const int s = ch.token_slot ? ch.token_slot[occ_tok[k]] : int(occ_tok[k] - ch.t_lo);
    if (s < 0) continue;
    touched = true;
    if (mine) acc += (occ_val ? occ_val[k] : 1.0) * delta[std::size_t(s) * width + col];
  }
  acc = ls.sum_groups(acc);
  touched = __any_sync(0xffffffffu, touched);
  const std::size_t part = seg_part[j];
  if (part == kNoPartial) {
    if (touched && mine && ls.g == 0) G[kw] += scale * acc;
  } else {
    if (mine && ls.g == 0) partial[part + c] = acc;
    if (c0 == 0 && (threadIdx.x & 31) == 0) seg_touched[j] = touched ? 1 : 0;
  }
}

/// Block per (attribute of several segments, block of 32 weights of its row): G[k] += scale · the
/// sum of its segments' partial rows, where any segment had occurrences in the chunk. Thread
/// (warp v, group g, column c) adds the partials of segments j ≡ v·groups + g (mod 8·groups) in
/// order; then the groups by a fixed butterfly and the warps in order.
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(std::size_t multi, const std::uint32_t* multi_attr, const std::size_t* multi_seg, const std::size_t* seg_part,
                   const std::uint8_t* seg_touched, const double* partial, std::size_t max_row, WeightGroups gl,
                   std::uint32_t gid0, double scale, double* G, GatherCountersDevice* counters) {
  constexpr int kWarps = kCombineThreads / 32;
  __shared__ double warp_sum[kWarps][32];
  __shared__ int any;
  const std::size_t col_blocks = (max_row + 31) / 32;
  const std::size_t m = blockIdx.x / col_blocks, c0 = (blockIdx.x - m * col_blocks) * 32;
  if (m >= multi) return;  // block-uniform: the one empty block of a plan without such attributes
  const std::uint32_t gid = gid0 + multi_attr[m];
  const std::size_t row = gl.size(gid);
  if (c0 >= row) return;  // block-uniform
  const LaneSplit ls(row - c0 < 32 ? row - c0 : 32);
  const int v = threadIdx.x / 32, lane = threadIdx.x & 31;
  const std::size_t c = c0 + ls.c;
  const bool mine = c < row;
  const std::size_t j0 = multi_seg[2 * m], j1 = multi_seg[2 * m + 1], stride = std::size_t(kWarps) * ls.groups;
  if (threadIdx.x == 0) {
    any = 0;
    if (counters) atomicMax(&counters->longest_combine, static_cast<unsigned long long>((j1 - j0 + stride - 1) / stride));
  }
  __syncthreads();
  double acc = 0;
  bool touched = false;
  for (std::size_t j = j0 + std::size_t(v) * ls.groups + ls.g; j < j1; j += stride) {
    touched |= seg_touched[j] != 0;
    if (mine) acc += partial[seg_part[j] + c];
  }
  acc = ls.sum_groups(acc);
  if (__any_sync(0xffffffffu, touched) && lane == 0) any = 1;  // every writer writes 1
  if (ls.g == 0) warp_sum[v][ls.c] = acc;
  __syncthreads();
  if (v == 0 && ls.g == 0 && mine && any) {
    double total = warp_sum[0][ls.c];
    for (int u = 1; u < kWarps; ++u) total += warp_sum[u][ls.c];
    G[gl.begin(gid) + c] += scale * total;
  }
}

/// Transition tree, level 1: partial[g][j] = Σ_{i in group g, in order} pair[i][j].
__global__ void __launch_bounds__(256) trans_partial_kernel(std::size_t LL, unsigned n, const double* pair, double* partial) {
  const std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (j >= LL) return;
  const unsigned groups = (n + kTransGroup - 1) / kTransGroup;
  for (unsigned g = blockIdx.y; g < groups; g += gridDim.y) {
    const unsigned b = g * kTransGroup, e = min(n, b + kTransGroup);
    double s = 0;
    CRFX_UNROLL(8)
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
  CRFX_UNROLL(8)
  for (unsigned g = 0; g < groups; ++g) s += partial[std::size_t(g) * LL + j];
  G[k] += scale * s;
}

}  // namespace

void launch_gather(const GatherSegments& plan, std::size_t width, std::size_t max_row, const WeightGroups& gl,
                   std::uint32_t gid0, const std::uint32_t* occ_tok, const double* occ_val, const GatherChunk& ch,
                   const double* delta, double scale, double* G, GatherCountersDevice* counters, cudaStream_t s) {
  if (max_row == 0 || plan.segments == 0) return;  // no attribute has a weight, or none occurs
  const int per_block = kGatherWarps * 32;
  const std::size_t col_blocks = (max_row + 31) / 32;
  // A streamed chunk walks its own segments only: the others' partial rows and marks are zeroed
  // first, as the resident gather writes them for a segment without occurrences in the chunk.
  const bool own = ch.seg_id != nullptr;
  const std::size_t segments = own ? ch.segments : plan.segments;
  if (own && plan.multi) {
    CRFX_CUDA_CHECK(cudaMemsetAsync(plan.touched.get(), 0, plan.segments, s));
    CRFX_CUDA_CHECK(cudaMemsetAsync(plan.partial.get(), 0, plan.partials * sizeof(double), s));
  }
  const std::size_t warps = segments * col_blocks;
  CRFX_LAUNCH(gather_kernel, grid_for(warps * 32, per_block, (std::size_t(1) << 31) - 1), per_block, 0, s,
              segments, own ? ch.seg_off : plan.seg_off.get(), plan.seg_attr.get(), plan.seg_part.get(), plan.touched.get(),
              plan.partial.get(), width, max_row, gl, gid0, occ_tok, occ_val, ch, delta, scale, G, counters);
  // Launched also when no attribute has several segments (one empty block): a pass's launches
  // do not depend on the data.
  CRFX_LAUNCH(combine_kernel, unsigned(std::max<std::size_t>(1, plan.multi * col_blocks)), kCombineThreads, 0, s,
              plan.multi, plan.multi_attr.get(), plan.multi_seg.get(), plan.seg_part.get(), plan.touched.get(),
              plan.partial.get(), max_row, gl, gid0, scale, G, counters);
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
