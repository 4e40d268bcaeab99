// crfx — the kernels of one chunk of evaluate() / marginals() / viterbi() up to the marginals
// (kernels/chain_kernels.cu): rows of the chunk (fill_rows, reset_slots), emissions, per-position
// edge matrices, the transition factors of a weight vector (prepare) and forward-backward, with
// the host launchers the backend calls. Their CPU twins: CpuBackend::prepare and
// CpuBackend::scores (host/cpu/cpu_backend.cpp), forward_backward (host/cpu/chain.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "crfx/internal/corpus.hpp"  // WeightGroups

namespace crfx::cuda::detail {

/// What forward_backward reads and writes for one chunk (filled by CudaBackend::fb_params).
struct FbParams {
  int L;
  const std::size_t* sent_off;  // corpus [S+1]
  const std::size_t* edge_off;  // corpus [N+1], null when E == 0
  const std::uint32_t* labels;  // corpus [N] gold labels
  ChunkView ch;
  const double* S;      // [rows][L] emissions
  const double* trans;  // [L][L] τ (zeros when transitions are off)
  const double* E;      // [L][L] exp(τ − τ_max)
  const double* Et;     // [L][L] Eᵀ
  const double* tmax;   // τ_max (device scalar)
  double* edge;         // [rows][L][L]: in τ_t at rows with edge items; out p_t − 1(gold) (pair mode); or null
  double* la;           // [rows][L] â_t = log α_t − c_t (shifted per position; see the kernel)
  double* lb;           // [rows][L] b̂_t = log β_t − d_t (shifted per position)
  double* node;         // [rows][L] out: p_t(y) (− 1(gold) in gold mode), or null
  double* pair;         // [n][L][L] out: Σ_{t≥1} p_t(y', y) − gold counts, or null
  double* result;       // [n] out: log Z − score(gold) in gold mode, else log Z
  bool gold;            // labels known: loss and deltas
  bool backward;        // run the backward pass (node/pair outputs)
  bool shared_E;        // copy E, Eᵀ into shared memory (when 2·L² doubles fit)
  bool shared_pair = false;  // a sentence's pair sums in shared memory (L ≤ 32, when they fit)
  double* pair_at = nullptr;  // [rows][L][L] out: p_t(y', y) at every row t ≥ 1 (pair mode; the
                              // pointwise losses), or null; may be `edge` (written after its last read)
  /// Independent positions — no transitions and no edge attributes (a Maxent model, or a CRF
  /// without transitions): p(y | x) = Π_t softmax(s_t), so a sentence costs O(T·L), not O(T·L²)
  /// (the pointwise losses take the general path). CPU twin: independent() in host/cpu/chain.cpp.
  bool independent = false;
  /// Tests (CudaBackendConfig::gather_counters): the most positions one warp's recursion walked
  /// in turn, or null.
  unsigned long long* longest_chain = nullptr;
  /// A split forward-backward's sentences this long were scanned (launch_fb_scan; see FbScan).
  std::size_t scan_length = ~std::size_t(0);
  /// Where *skip is true the fused kernels do nothing (a queued line search's pass after it is
  /// done: SAG's batch steps); null: always run.
  const bool* skip = nullptr;
};

/// The split forward-backward's work list (fb_split_kernels.cu), planned with the chunk: a
/// segment is positions [t0, t0 + kFbSegment) of chunk sentence i (clipped to its length; one
/// empty segment for an empty sentence), its pair sums written to pair row `out` when out < n
/// (the sentence's only segment), else to partial row out − n; a sentence of several segments
/// has an FbMulti naming its partial rows [first, first + count).
struct FbSegment {
  std::uint32_t i, t0, out;
};
struct FbMulti {
  std::uint32_t i, first, count;
};
struct FbSegments {
  const FbSegment* seg;
  std::size_t count;
  const FbMulti* multi;
  std::size_t multis;
  double* partial;  // [Σ count of the multis][L][L]
};

/// The sentences of a split forward-backward whose recursions run as a scan over their segments
/// (fb_scan_kernels.cu: those of kFbScanLength positions or more): the chunk's first `sentences`
/// in launch order (p.ch.order, the longest first) and their segments, the split work list's
/// first `segments` entries.
struct FbScan {
  unsigned sentences = 0, segments = 0;
};

/// Block per chunk sentence (n blocks): row → token, row has edge items, and token → row
/// (token_slot null: not written).
void launch_fill_rows(std::size_t n, ChunkView ch, const std::size_t* sent_off, const std::size_t* edge_off,
                      std::size_t* row_token, std::uint8_t* row_edge, int* token_slot, cudaStream_t s);
/// token_slot[row_token[r]] = −1 for the chunk's rows.
void launch_reset_slots(std::size_t rows, const std::size_t* row_token, int* token_slot, cudaStream_t s);
/// S [rows][L] = X·W (thread per (row, y)); W in the layout of `gl` (device pointers).
void launch_emission(int L, std::size_t rows, const std::size_t* row_token, const std::size_t* state_off,
                     const std::uint32_t* ids, const double* vals, const double* W, const WeightGroups& gl,
                     double* S, cudaStream_t s, const bool* skip = nullptr);
/// τ_t [rows][L][L] = τ + Σ x_e·W_e at the rows with edge items (block per row); W the whole
/// weight vector in the layout of `gl` (device pointers). Both: nothing where *skip (FbParams::skip).
void launch_edge_matrix(int L, std::size_t rows, const std::size_t* row_token, const std::uint8_t* row_edge,
                        const std::size_t* edge_off, const std::uint32_t* ids, const double* vals,
                        const double* trans, const double* W, const WeightGroups& gl, double* M, cudaStream_t s,
                        const bool* skip = nullptr);
// ---- device functions the kernels share (chain_kernels.cu, perceptron_kernels.cu) ----------------

/// Slot j of group gid's row of W: its weight, or 0 where the row lists none (a sparse layout's
/// transitions as the dense τ: dense_row's entry).
__device__ inline double dense_row_entry(const WeightGroups& gl, std::uint32_t gid, std::size_t j, const double* W) {
  const std::size_t q = gl.find(gid, std::uint32_t(j));
  return q != WeightGroups::kNoWeight ? W[q] : 0.0;
}

/// Entry j of an edge row's matrix τ_t = τ + Σ_k x_k · W_e[k] (tau_j: τ's entry j) over the token's
/// edge items [k0, k1) in order, without FMA contraction (the CPU's order); a sparse layout adds
/// x_k · W[find(edge(e_k), j)] where the row lists pair j.
__device__ inline double edge_entry(const WeightGroups& gl, double tau_j, std::size_t j, std::size_t k0,
                                    std::size_t k1, const std::uint32_t* ids, const double* vals, const double* W) {
  double acc = tau_j;
  if (gl.dense()) {
    const double* WE = W + gl.begin(gl.edge(0));  // the edge blocks
    const std::size_t LL = gl.L * gl.L;
    for (std::size_t k = k0; k < k1; ++k) acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, WE[std::size_t(ids[k]) * LL + j]));
  } else {
    for (std::size_t k = k0; k < k1; ++k) {
      const std::size_t q = gl.find(gl.edge(ids[k]), std::uint32_t(j));
      if (q != WeightGroups::kNoWeight) acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[q]));
    }
  }
  return acc;
}

/// One row's emissions S_row[y] = Σ_k x_k · W[weight of (a_k, y)] over its items [k0, k1) in CSR
/// order, without FMA contraction (bitwise emission_kernel's and the CPU's sums), by a group of G
/// lanes (8, 16 or 32; `lane` its lane, the warp's groups calling together, `live` false for a
/// group without a row). Dense layout: lane y sums labels y, y + G, … in a register over the items,
/// each item's row read coalesced. Sparse layout: per item the group walks the attribute's row (no
/// search) and lane q adds x · W[q] to its slot's sum in `acc` (the group's [L] doubles of shared
/// memory); a row's slots are distinct, and the warp steps through items together (its groups'
/// longest item list, a __syncwarp after each), so each slot's sum is taken in item order.
template <int G>
__device__ void emission_row(unsigned L, bool live, std::size_t k0, std::size_t k1, unsigned lane,
                             const std::uint32_t* ids, const double* vals, const double* W, const WeightGroups& gl,
                             double* acc, double* S_row) {
  if (gl.dense()) {
    if (!live) return;
    for (unsigned y0 = 0; y0 < L; y0 += G) {
      const unsigned y = y0 + lane;
      if (y >= L) break;
      double sum = 0;
      for (std::size_t k = k0; k < k1; ++k)
        sum = __dadd_rn(sum, __dmul_rn(vals ? vals[k] : 1.0, W[std::size_t(ids[k]) * L + y]));
      S_row[y] = sum;
    }
    return;
  }
  for (unsigned y = lane; y < L; y += G) acc[y] = 0;
  unsigned most = unsigned(k1 - k0);  // the warp's longest item list
  for (int o = 16; o > 0; o >>= 1) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
  __syncwarp(0xffffffffu);
  for (unsigned i = 0; i < most; ++i) {
    if (k0 + i < k1) {
      const std::size_t k = k0 + i;
      const double x = vals ? vals[k] : 1.0;
      const std::size_t b = gl.begin(ids[k]), e = b + gl.size(ids[k]);
      for (std::size_t q = b + lane; q < e; q += G) acc[gl.slots[q]] = __dadd_rn(acc[gl.slots[q]], __dmul_rn(x, W[q]));
    }
    __syncwarp(0xffffffffu);
  }
  if (live)
    for (unsigned y = lane; y < L; y += G) S_row[y] = acc[y];
}

/// out [width] = group gid's row of W spread over its slots, zero where the row lists none (a
/// sparse layout's transitions as the dense [L][L] τ).
void launch_dense_row(const WeightGroups& gl, std::uint32_t gid, std::size_t width, const double* W, double* out,
                      cudaStream_t s);
/// τ_max, E = exp(τ − τ_max) and Eᵀ of the transitions `trans` [L][L] (one block).
void launch_prepare(int L, const double* trans, double* E, double* Et, double* tmax_out, cudaStream_t s);
/// Forward-backward on the chunk's n sentences, longest first: a warp per sentence (kFbWarps a
/// block) when L ≤ 32, else a block of `threads` per sentence; with
/// forward_backward_smem(L, p.shared_E, p.shared_pair) bytes of dynamic shared memory.
/// With `groups_ok`, L > 32 and fb_groups(L, threads) ≥ 2: that many sentences a block
/// (forward_backward_groups_kernel: one copy of E for them all; the same bits).
void launch_forward_backward(const FbParams& p, std::size_t n, int threads, bool groups_ok, cudaStream_t s);
/// Sentences a block of the grouped forward-backward at L > 32 with `threads` threads a sentence
/// (up to kFbGroupBlock threads, 15 named barriers, kFbGroupShared bytes), or 0: a block each.
unsigned fb_groups(int L, int threads);
std::size_t forward_backward_groups_smem(int L, unsigned groups);
/// The same outputs as launch_forward_backward (L ≤ 32 only; the pair sums of a sentence of
/// several segments in another order), in three kernels: the forward and backward recursions
/// on two warps a sentence, the marginals a warp per segment of `sg`, the segments' pair sums
/// (fb_split_kernels.cu). The same dynamic shared memory as launch_forward_backward.
/// The recursions of `sc`'s sentences run by launch_fb_scan, the others' on two warps a sentence.
void launch_forward_backward_split(const FbParams& p, std::size_t n, const FbSegments& sg, const FbScan& sc,
                                   cudaStream_t s);
/// The forward and backward recursions (â, b̂, p.result) of `sc`'s sentences, L ≤ 32, in three
/// kernels: the segments' transfer matrices, their combine, the segments' rows
/// (fb_scan_kernels.cu; `seg` the split work list).
void launch_fb_scan(const FbParams& p, const FbScan& sc, const FbSegment* seg, cudaStream_t s);
/// The dynamic shared memory of launch_forward_backward: E, Eᵀ when shared_E, and per sentence
/// of a block vec [L] and rowa [L] (and red [32] at L > 32; the pair sums [L][L] at L ≤ 32 when
/// shared_pair).
std::size_t forward_backward_smem(int L, bool shared_E, bool shared_pair);
/// The sequential exponential loss (seed 002's seq-exp, crfx/internal/loss.hpp) from a gold-mode
/// forward-backward's output: per chunk sentence i, with ℓ = p.result[i] = log Z − score(gold),
/// result[i] = exp(ℓ) and — where p.node / p.pair / p.edge are given — its deltas (node rows,
/// pair sums, the edge rows that have edge items) times exp(ℓ), the seq-exp gradient. A factor
/// beyond the double range multiplies in log space (0 stays 0, never inf·0). Block per sentence.
/// CPU twin: sequence_level in host/cpu/chain_loss.cpp.
void launch_seq_exp(const FbParams& p, std::size_t n, cudaStream_t s);
/// The pointwise losses (seed 002's point-log, point-exp; `exp_loss` for point-exp) from a
/// forward-backward without gold (p.gold false: p.node holds the marginals μ_t, p.pair_at the
/// pairwise marginals P_t of every row t ≥ 1): per chunk sentence i, p.result[i] = the loss and,
/// with `gradient`, node [rows][L] = ∂loss/∂s_t, pair_at [rows][L][L] = ∂loss/∂τ_t (t ≥ 1), pair
/// [n][L][L] = Σ_t ∂loss/∂τ_t (when p.pair) — the forward (A, ρ) and backward (B, κ) sweeps of
/// host/cpu/chain_loss.cpp's scaled path, using p.la, p.lb and p.S as scratch. A sentence whose
/// gold marginal is below 1e-50 (or whose weights would overflow), which the CPU computes on its
/// exact log-space path, gets result NaN (the backend refuses it). Block per sentence.
void launch_pointwise_loss(const FbParams& p, std::size_t n, bool exp_loss, bool gradient, cudaStream_t s);

}  // namespace crfx::cuda::detail
