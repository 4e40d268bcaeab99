// crfx — the recursions of a long sentence as a scan over its segments (L ≤ 32; declared in
// chain_kernels.cuh): the split forward-backward's (fb_split_kernels.cu) for the sentences of
// kFbScanLength positions or more, whose T serial steps would otherwise be the pass's critical
// path (CoNLL-2002's 1,238-token sentence: the whole pass waits for its two recursions).
//
// The forward recursion is a product of matrices, α_b = α_{a−1} · P with P = M_a ⋯ M_b over the
// positions [a, b] of a segment (M_t(y', y) = exp(τ_t(y', y) + s_t(y))), and the backward one
// uses the same product, β_{a−1} = P · β_b. Row y' of P is the forward recursion started at
// position a from the unit vector of y' (â_{a−1} = log e_{y'}), so the segments' products are
// independent forward recursions of at most kFbSegment steps — the same forward_step, the same
// arithmetic — and only the combine of the segments' products is serial (one step a segment):
//   1. fb_scan_transfer_kernel: a warp per (segment k ≥ 1, start label y'): row y' of R_k =
//      log P_k less the row's shift c(y') (the sum of its recursion's shifts, kept exact), into
//      the b̂ rows of segment k − 1 (its first rows; the recursion's own rows in shared memory);
//      segment 0's warp runs the real forward from s_0, writing â rows 0 … b_0 and A_0 = â_{b_0}
//      with its shift;
//   2. fb_scan_combine_kernel: two warps a sentence — forward, A_k = log Σ_y' exp(A_{k−1}(y') +
//      c(y') + R_k(y', ·)) for k = 1 … K − 1, A_{k−1} into â row a_k (segment k's first), then
//      log Z and the gold score as fb_forward gets them; backward, B_{K−1} = 0 and B_{k−1}(y') =
//      c(y') + log Σ_y exp(R_k(y', y) + B_k(y)), B_k into b̂ row b_k (segment k's last). Each A_k,
//      B_k is kept with its maximum at 0 (the rows of phase 3 then stay near 0 as the serial
//      recursion's do), A's shifts summed exactly for log Z;
//   3. fb_scan_rows_kernel: two warps a segment — the forward recursion from A_{k−1} over
//      positions a_k … b_k (k ≥ 1; segment 0's rows are phase 1's), the backward one from B_k
//      down to a_k: every row â_t, b̂_t that the marginals read, each with its own shift.
// The stored rows are what the marginals need (fb_split_kernels.cu), with one exception: b̂ at
// a segment's last row b_k comes from the combine, not from backward_step(b_k + 1), so the
// pairwise marginals at position a_{k+1} (a segment's first, k + 1 ≥ 1) cannot take their
// normaliser from it; segment_marginals recomputes backward_step there without storing it.
// A sentence's critical path: kFbSegment steps, K combines, kFbSegment steps, not T.
// The bits differ from the serial recursions' (the sums associate per segment); two runs give
// the same bits, and which sentences are scanned depends on their length only.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "fb_device.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

using namespace fb;  // NOLINT: the forward-backward device functions (fb_device.cuh)

constexpr unsigned kFull = 0xffffffffu;
static_assert(kFbSegment > 32 + 4, "R_k's rows and shifts, A_0's, fit in a segment's first rows, before its last");

/// A sum kept as hi + lo (Knuth's TwoSum: exact). The shifts a transfer row's recursion took add
/// up to ~100 over a segment, and their differences weight R_k's rows against each other: a plain
/// sum would put its rounding (~1e-14) into every marginal after the segment, where the serial
/// recursion's per-position shifts never reach them. Likewise the combine's boundary vectors are
/// kept with their maximum at 0 and their shifts summed here (into log Z only).
struct ExactSum {
  double hi = 0, lo = 0;
  __device__ void add(double x) {
    const double s = hi + x, bb = s - hi;
    lo += (hi - (s - bb)) + (x - bb);
    hi = s;
  }
};

/// The rows of the b̂ region of the segment before segment k (k ≥ 1) that phase 1 fills: R_k's L
/// rows, then its rows' shifts c(y') = hi + lo (two rows); segment 0's also A_0 (its real
/// forward's last row) and that row's shift (hi, lo in the next row's first two entries).
constexpr int kShiftHi = 0, kShiftLo = 1, kA0 = 2, kA0Shift = 3;  // rows L + these

/// Per warp of the scan's kernels: vec [L], rowa [L] (forward_step's scratch) and two rows [L].
std::size_t scan_smem(const FbParams& p) {
  const std::size_t LL = std::size_t(p.L) * p.L;
  return ((p.shared_E ? 2 * LL : 0) + std::size_t(kFbWarps) * 4 * p.L) * sizeof(double);
}

/// The warp's view of the chunk (fb_device.cuh's warp_sentence) and its scratch rows; the rest
/// of FbSentence is set by fb_locate.
__device__ double* scan_warp(FbSentence<WarpGroup>& f, const FbParams& p, double* smem) {
  double* rest = warp_sentence(f, p, smem);
  f.vec = rest + std::size_t(threadIdx.x / 32) * 4 * p.L;
  f.rowa = f.vec + p.L;
  f.tmax = *p.tmax;
  return f.rowa + p.L;  // two rows [L]
}

/// Last position of the segment that starts at a.
__device__ std::size_t segment_end(const FbSentence<WarpGroup>& f, std::size_t a) {
  return (a + kFbSegment < f.T ? a + kFbSegment : f.T) - 1;
}

/// Phase 1 (see the top of the file): warp w is (scanned segment w / L, start label w mod L).
__global__ void __launch_bounds__(kFbWarps * 32) fb_scan_transfer_kernel(FbParams p, FbScan sc, const FbSegment* seg) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  double* rows = scan_warp(f, p, smem);
  const std::size_t w = std::size_t(blockIdx.x) * kFbWarps + threadIdx.x / 32;
  if (w >= std::size_t(sc.segments) * p.L) return;  // warp-uniform, after the block's only barrier
  const FbSegment s = seg[w / p.L];
  const int y0 = int(w % p.L), L = p.L, lane = f.g.tid();
  fb_locate(f, s.i);
  const std::size_t a = s.t0, b = segment_end(f, a);
  double own = 0;
  ExactSum c;
  if (a == 0) {  // segment 0: the real forward, its rows stored
    if (y0 != 0) return;
    if (lane < L) f.la[lane] = own = f.S[lane];
    f.g.sync();
    for (std::size_t t = 1; t <= b; ++t) c.add(forward_step(f, t, own));
    double* rest = f.lb + std::size_t(L) * L;
    if (lane < L) rest[kA0 * L + lane] = own;
    if (lane == 0) rest[kA0Shift * L] = c.hi, rest[kA0Shift * L + 1] = c.lo;
    count_chain(p, b + 1, (threadIdx.x & 31) == 0);
    return;
  }
  double* r[2] = {rows, rows + L};
  own = lane == y0 ? 0.0 : -CUDART_INF;
  if (lane < L) r[(a - 1) & 1][lane] = own;
  f.g.sync();
  for (std::size_t t = a; t <= b; ++t) c.add(forward_step_rows(f, t, own, r[(t - 1) & 1], r[t & 1]));
  double* R = f.lb + (a - kFbSegment) * L;  // segment k − 1's rows
  if (lane < L) R[std::size_t(y0) * L + lane] = own;
  if (lane == 0) R[std::size_t(L + kShiftHi) * L + y0] = c.hi, R[std::size_t(L + kShiftLo) * L + y0] = c.lo;
  count_chain(p, b - a + 1, (threadIdx.x & 31) == 0);
}

/// Lane y' of R_k's region: its row's shift less the largest row's (hi parts), d(y'); `top` gets
/// that largest hi part.
__device__ double row_shift(const FbSentence<WarpGroup>& f, const double* R, double& top) {
  const int L = f.L, lane = f.g.tid();
  const double hi = lane < L ? R[std::size_t(L + kShiftHi) * L + lane] : -CUDART_INF;
  top = f.g.max(hi);
  return lane < L ? (hi - top) + R[std::size_t(L + kShiftLo) * L + lane] : 0.0;
}

/// v less its maximum over the labels (0 where none is finite); the maximum goes into `shift`.
__device__ double normalised(const FbSentence<WarpGroup>& f, double v, ExactSum* shift) {
  const bool mine = f.g.tid() < f.L;
  double m = f.g.max(mine ? v : -CUDART_INF);
  if (!isfinite(m)) m = 0;
  if (shift) shift->add(m);
  return mine ? v - m : -CUDART_INF;
}

/// The combine's sum for the lane's label `me`: forward, log Σ_y' exp(v(y') + R(y', me)); backward,
/// log Σ_y exp(R(me, y) + v(y)) (v: lane k holds v(k), shuffled; log_sum_exp_seq's one pass with
/// the shuffles outside its branches).
__device__ double combine(int L, double v, const double* R, int me, bool forward) {
  double mx = -CUDART_INF, sum = 0;
  for (int k = 0; k < L; ++k) {
    const double x = __shfl_sync(kFull, v, k) + R[forward ? std::size_t(k) * L + me : std::size_t(me) * L + k];
    if (x == -CUDART_INF) continue;
    if (x > mx) {
      sum = sum * exp(mx - x) + 1.0;
      mx = x;
    } else {
      sum += exp(x - mx);
    }
  }
  return mx == -CUDART_INF ? mx : mx + log(sum);
}

/// Phase 2's forward warp: the boundaries A_k, log Z and the gold score (p.result[i]).
__device__ void scan_forward_combine(FbSentence<WarpGroup>& f, unsigned i, const FbParams& p) {
  const int L = f.L, lane = f.g.tid(), y = lane < L ? lane : 0;
  const std::size_t K = (f.T + kFbSegment - 1) / kFbSegment;
  const double* rest = f.lb + std::size_t(L) * L;
  double A = lane < L ? rest[kA0 * L + lane] : -CUDART_INF;  // A_0 less its shift
  ExactSum z{rest[kA0Shift * L], rest[kA0Shift * L + 1]};    // log α_{b_k} = A_k + z
  for (std::size_t k = 1; k < K; ++k) {
    if (lane < L) f.la[k * kFbSegment * L + lane] = A;  // A_{k−1}: segment k's start
    const double* R = f.lb + (k - 1) * kFbSegment * L;
    double top;
    const double d = row_shift(f, R, top);
    z.add(top);
    A = normalised(f, combine(L, lane < L ? A + d : -CUDART_INF, R, y, true), &z);
  }
  const double log_z = z.hi + (z.lo + group_log_sum_exp(f.g, L, [&](int) { return A; }));
  double gold = 0, gs = 0, gt = 0;  // fb_forward's sum, in its order
  if (p.gold && lane == 0) {
    gold_terms(f, 0, gs, gt);
    gold += gs;
    for (std::size_t t = 1; t < f.T; ++t) {
      gold_terms(f, t, gs, gt);
      gold += gs;
      gold += gt;
    }
  }
  if (lane == 0) p.result[i] = log_z - gold;
  count_chain(p, K, (threadIdx.x & 31) == 0);
}

/// Phase 2's backward warp: the boundaries B_k into b̂ rows b_k.
__device__ void scan_backward_combine(FbSentence<WarpGroup>& f) {
  const int L = f.L, lane = f.g.tid(), yp = lane < L ? lane : 0;
  const std::size_t K = (f.T + kFbSegment - 1) / kFbSegment;
  double B = lane < L ? 0.0 : -CUDART_INF;  // B_{K−1}
  if (lane < L) f.lb[(f.T - 1) * L + lane] = B;
  for (std::size_t k = K - 1; k >= 1; --k) {
    const double* R = f.lb + (k - 1) * kFbSegment * L;
    double top;
    const double d = row_shift(f, R, top);
    B = normalised(f, combine(L, B, R, yp, false) + d, nullptr);
    if (lane < L) f.lb[(k * kFbSegment - 1) * L + lane] = B;
  }
  count_chain(*f.p, K, (threadIdx.x & 31) == 0);
}

/// Phase 2: warp 2j + d of the grid combines scanned sentence j forward (d = 0) or backward.
__global__ void __launch_bounds__(kFbWarps * 32) fb_scan_combine_kernel(FbParams p, FbScan sc) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  scan_warp(f, p, smem);
  const std::size_t w = std::size_t(blockIdx.x) * kFbWarps + threadIdx.x / 32;
  if (w >= 2 * std::size_t(sc.sentences)) return;  // warp-uniform, after the block's only barrier
  const unsigned i = p.ch.order[w / 2];
  fb_locate(f, i);
  if ((w & 1) == 0)
    scan_forward_combine(f, i, p);
  else
    scan_backward_combine(f);
}

/// Phase 3: warp 2k + d of the grid recomputes scanned segment k's â rows (d = 0; segment 0's
/// are phase 1's) or b̂ rows (d = 1) from the combine's boundary.
__global__ void __launch_bounds__(kFbWarps * 32) fb_scan_rows_kernel(FbParams p, FbScan sc, const FbSegment* seg) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  double* start = scan_warp(f, p, smem);
  const std::size_t w = std::size_t(blockIdx.x) * kFbWarps + threadIdx.x / 32;
  if (w >= 2 * std::size_t(sc.segments)) return;  // warp-uniform, after the block's only barrier
  const FbSegment s = seg[w / 2];
  fb_locate(f, s.i);
  const int L = f.L, lane = f.g.tid();
  const std::size_t a = s.t0, b = segment_end(f, a);
  double own = 0;
  if ((w & 1) == 0) {
    if (a == 0) return;
    if (lane < L) start[lane] = own = f.la[a * L + lane];  // A_{k−1}, before row a is overwritten
    f.g.sync();
    for (std::size_t t = a; t <= b; ++t) forward_step_rows(f, t, own, t == a ? start : f.la + (t - 1) * L, f.la + t * L);
  } else {
    if (lane < L) own = f.lb[b * L + lane];  // B_k
    for (std::size_t t = b; t > a; --t) backward_step(f, t, own);
  }
  count_chain(p, b - a + 1, (threadIdx.x & 31) == 0);
}

}  // namespace

void launch_fb_scan(const FbParams& p, const FbScan& sc, const FbSegment* seg, cudaStream_t s) {
  if (sc.sentences == 0) return;
  const std::size_t smem = scan_smem(p);
  const auto blocks = [](std::size_t warps) { return unsigned((warps + kFbWarps - 1) / kFbWarps); };
  CRFX_LAUNCH(fb_scan_transfer_kernel, blocks(std::size_t(sc.segments) * p.L), kFbWarps * 32, smem, s, p, sc, seg);
  CRFX_LAUNCH(fb_scan_combine_kernel, blocks(2 * std::size_t(sc.sentences)), kFbWarps * 32, smem, s, p, sc);
  CRFX_LAUNCH(fb_scan_rows_kernel, blocks(2 * std::size_t(sc.segments)), kFbWarps * 32, smem, s, p, sc, seg);
}

}  // namespace crfx::cuda::detail
