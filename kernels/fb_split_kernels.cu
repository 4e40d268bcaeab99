// crfx — the split forward-backward (L ≤ 32; declared in chain_kernels.cuh): the same numbers as
// the fused kernel (chain_kernels.cu), computed in two kernels so that a long sentence's serial
// chain holds only the recursions.
//
// Why. The fused kernel runs a sentence on one warp: forward, then backward with each position's
// marginals inside the backward loop. A pass then waits for its longest sentence's T positions
// of forward step + backward step + z + pairwise (L² entries) + node marginals, in series
// (CoNLL-2002's 1,238-token sentence: ~5 µs a position on an H200, the pass's critical path). Yet
// only the recursions are serial: the backward needs no α, and every position's marginals need
// only â_{t−1}, â_t, b̂_{t−1}, b̂_t and s_t, all stored. So:
//   1. fb_recursions_kernel: two warps a sentence, the forward recursion (log Z, the gold score)
//      on one and the backward recursion on the other, concurrently;
//   2. fb_marginals_kernel: a warp per segment of at most kFbSegment positions of a sentence
//      (the work list planned with the chunk: FbSegments), the positions of a segment walked in
//      descending t as the fused loop does: z_t, node marginals, pairwise marginals (the edge
//      deltas, pair_at) and the segment's pair sums;
//   3. fb_pair_segments_kernel: the pair sums of a sentence of several segments, its segments'
//      sums added from the last segment to the first (a sentence of one segment writes its row
//      directly).
// Every per-position value is computed with the fused kernel's arithmetic: the shift m_t and
// v(y) = exp(s_t(y) + b̂_t(y) − m_t) of backward_step(t) are recomputed from the stored b̂_t, and
// whether row y' factors (backward_step summed it in exp space above kTinySum) is read back from
// b̂_{t−1}(y') itself: b̂_{t−1}(y') = τ_max + log(sum), so sum > kTinySum ⟺ b̂_{t−1}(y') − τ_max >
// log kTinySum up to the last bit, where both ways are exact enough (see pairwise). A sentence of
// one segment thus gets the fused kernel's bits; one of several differs by the pair sums' order.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "device_buffer.cuh"
#include "fb_device.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

using namespace fb;  // NOLINT: the forward-backward device functions (fb_device.cuh)

/// Two warps a sentence (kFbWarps / 2 sentences a block), the longest first: the even warp runs
/// the forward recursion (â, p.result), the odd one the backward recursion (b̂). Dynamic shared
/// memory: E, Eᵀ when shared_E, then per warp vec [L], rowa [L].
__global__ void __launch_bounds__(kFbWarps * 32) fb_recursions_kernel(FbParams p, unsigned first, unsigned n) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  double* rest = warp_sentence(f, p, smem);
  const unsigned v = threadIdx.x / 32, k = first + blockIdx.x * (kFbWarps / 2) + v / 2;
  if (k >= n) return;  // warp-uniform, after the block's only barrier
  f.vec = rest + std::size_t(v) * 2 * p.L;
  f.rowa = f.vec + p.L;
  f.tmax = *p.tmax;
  const unsigned i = p.ch.order[k];
  fb_locate(f, i);
  const bool forward = (v & 1) == 0;
  if (f.T == 0) {
    if (forward && f.g.tid() == 0) p.result[i] = 0;
    return;
  }
  if (forward) {
    double a_own;
    fb_forward(f, i, a_own);
  } else {
    fb_backward(f);
  }
  count_chain(p, f.T, f.g.tid() == 0);
}

/// The pairwise marginals at the first position t0 > 0 of a scanned sentence's segment
/// (fb_scan_kernels.cu), whose b̂_{t0−1} the scan's combine wrote: backward_step(t0) again without
/// storing it (its shift m, v(y) and rows' factors as the recursion would have them), and
/// z_{t0−1} from it.
__device__ void scan_boundary_pairwise(FbSentence<WarpGroup>& f, std::size_t t, double b_t, double a_prev, double* acc) {
  double b_prev = b_t;
  const double m = backward_step_to(f, t, b_prev, nullptr);
  const bool mine = f.g.tid() < f.L;
  const double z_prev = group_log_sum_exp(f.g, f.L, [&](int) { return mine ? a_prev + b_prev : 0.0; });
  pairwise(f, t, z_prev, m, a_prev, acc);
}

/// The marginals of segment `sg` (positions [t0, t1) of chunk sentence sg.i), walked from t1 − 1
/// down to t0 as the fused backward loop walks them; the pair sums into `acc` (zeroed here).
__device__ void segment_marginals(FbSentence<WarpGroup>& f, std::size_t t0, std::size_t t1, double* acc) {
  const int L = f.L, lane = f.g.tid();
  const bool mine = lane < L;
  const double log_tiny = log(kTinySum);
  auto z_at = [&](std::size_t t) {  // z_t = log Σ_y exp(â_t(y) + b̂_t(y)), the fused kernel's sum
    const double a = mine ? f.la[t * L + lane] : 0.0, b = mine ? f.lb[t * L + lane] : 0.0;
    return group_log_sum_exp(f.g, L, [&](int) { return a + b; });
  };
  double z = z_at(t1 - 1);
  for (std::size_t t = t1 - 1;; --t) {
    const double a_t = mine ? f.la[t * L + lane] : 0.0, b_t = mine ? f.lb[t * L + lane] : 0.0;
    const double z_prev = t > 0 ? z_at(t - 1) : 0.0;
    if (t > 0 && acc && t == t0 && f.T >= f.p->scan_length) {
      scan_boundary_pairwise(f, t, b_t, mine ? f.la[(t - 1) * L + lane] : 0.0, acc);
    } else if (t > 0 && acc) {
      const double a_prev = mine ? f.la[(t - 1) * L + lane] : 0.0;
      // backward_step(t)'s shift m and v(y), and whether it summed row y' in exp space.
      const double next = mine ? f.S[t * L + lane] + b_t : -CUDART_INF;
      double m = f.g.max(next);
      const bool finite = isfinite(m);
      if (!finite) m = 0;
      if (!f.edge_at(t) && mine) {
        f.vec[lane] = exp(next - m);
        f.rowa[lane] = finite && f.lb[(t - 1) * L + lane] - f.tmax > log_tiny ? 1.0 : -1.0;
      }
      pairwise(f, t, z_prev, m, a_prev, acc);  // syncs before it reads vec and rowa
    }
    node_marginals(f, t, z, a_t, b_t);
    f.g.sync();  // vec and rowa are read by every lane before the next position writes them
    if (t == t0) break;
    z = z_prev;
  }
}

/// A warp per segment (kFbWarps a block), in the order of the work list (the longest sentences'
/// first). Dynamic shared memory: E, Eᵀ when shared_E, then per warp vec [L], rowa [L] and, when
/// shared_pair, the segment's pair sums [L][L].
__global__ void __launch_bounds__(kFbWarps * 32) fb_marginals_kernel(FbParams p, FbSegments sg, unsigned n) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  double* rest = warp_sentence(f, p, smem);
  const unsigned v = threadIdx.x / 32;
  const std::size_t k = std::size_t(blockIdx.x) * kFbWarps + v;
  if (k >= sg.count) return;  // warp-uniform, after the block's only barrier
  const std::size_t per_warp = 2 * std::size_t(p.L) + (p.shared_pair ? f.LL : 0);
  f.vec = rest + v * per_warp;
  f.rowa = f.vec + p.L;
  f.tmax = *p.tmax;
  const FbSegment s = sg.seg[k];
  fb_locate(f, s.i);
  double* out = !p.pair ? nullptr : s.out < n ? p.pair + std::size_t(s.out) * f.LL : sg.partial + std::size_t(s.out - n) * f.LL;
  double* acc = out && p.shared_pair ? f.rowa + p.L : out;
  const int lane = f.g.tid();
  if (acc)
    for (std::size_t j = lane; j < f.LL; j += 32) acc[j] = 0;
  f.g.sync();
  const std::size_t t1 = std::size_t(s.t0) + kFbSegment;
  if (f.T > 0) segment_marginals(f, s.t0, t1 < f.T ? t1 : f.T, acc);
  if (acc != out)
    for (std::size_t j = lane; j < f.LL; j += 32) out[j] = acc[j];
}

/// Block per sentence of several segments: its pair sums, the segments' added last to first.
__global__ void __launch_bounds__(256) fb_pair_segments_kernel(FbParams p, FbSegments sg) {
  const FbMulti m = sg.multi[blockIdx.x];
  const std::size_t LL = std::size_t(p.L) * p.L;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    double s = 0;
    for (std::uint32_t c = m.count; c-- > 0;) s += sg.partial[(std::size_t(m.first) + c) * LL + j];
    p.pair[std::size_t(m.i) * LL + j] = s;
  }
}

}  // namespace

void launch_forward_backward_split(const FbParams& p, std::size_t n, const FbSegments& sg, const FbScan& sc,
                                   cudaStream_t s) {
  if (n == 0) return;
  const std::size_t smem = forward_backward_smem(p.L, p.shared_E, p.shared_pair);
  const unsigned per_block = kFbWarps / 2;
  if (const std::size_t rest = n - sc.sentences)
    CRFX_LAUNCH(fb_recursions_kernel, unsigned((rest + per_block - 1) / per_block), kFbWarps * 32, smem, s, p,
                sc.sentences, unsigned(n));
  launch_fb_scan(p, sc, sg.seg, s);
  if (!p.backward || sg.count == 0) return;
  CRFX_LAUNCH(fb_marginals_kernel, unsigned((sg.count + kFbWarps - 1) / kFbWarps), kFbWarps * 32, smem, s, p, sg,
              unsigned(n));
  if (p.pair && sg.multis) CRFX_LAUNCH(fb_pair_segments_kernel, unsigned(sg.multis), 256, 0, s, p, sg);
}

}  // namespace crfx::cuda::detail
