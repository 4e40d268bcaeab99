// crfx — the perceptron's step on the device (kernels/perceptron_kernels.cu; issue 37): the
// feature difference Δ = scale·(f(x, y) − f(x, ŷ)) of a decoded span over its plan (SagSpanView,
// sag_kernels.cuh), its mislabeled tokens, and the update w += a·Δ gated by them — so that ap's
// step reads nothing back (CudaBackend::perceptron_step, backend_perceptron.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "crfx/internal/corpus.hpp"  // WeightGroups
#include "sag_kernels.cuh"           // SagSpanView

namespace crfx::cuda::detail {

/// A decoded sentence as the difference kernels read it: per row its token (gold label
/// gold[row_tok[r]]) and predicted label pred[r].
struct DecodedRows {
  const std::uint32_t* row_tok;  // [rows]
  const std::uint32_t* gold;     // [corpus tokens]
  const std::uint32_t* pred;     // [rows]
  std::size_t rows;
};

/// Whether rows r − 1 and r carry the same label pair in gold and prediction (r ≥ 1).
__device__ inline bool same_pair(const DecodedRows& d, std::size_t r) {
  return d.gold[d.row_tok[r - 1]] == d.pred[r - 1] && d.gold[d.row_tok[r]] == d.pred[r];
}

/// Weight slot j's sum over one sentence's rows for its group gid (oofs: the group's entry in
/// the sentence's plan, [oofs[0], oofs[1]) its occurrences), going on from acc: the gold slot
/// gets +x, the predicted one −x, at every position whose labels differ — a state group at its
/// occurrences' rows (slot: the label), the transitions at every row r ≥ 1 (slot: y_{r−1}·L +
/// y_r, x = 1), an edge group at its occurrences' rows (r ≥ 1 only: the plan has no others).
/// The one sum of the difference kernels (perceptron_kernels.cu) and the runs (run_kernels.cu):
/// the same additions in the same order.
__device__ inline double sentence_sum(const WeightGroups& gl, std::uint32_t gid, std::size_t j, const DecodedRows& d,
                               const std::uint32_t* oofs, const std::uint32_t* onew, const double* oval,
                               double scale, double acc) {
  const std::size_t L = gl.L;
  auto add = [&](std::size_t gold, std::size_t pred, double x) {
    if (gold == j) acc = __dadd_rn(acc, x);
    if (pred == j) acc = __dadd_rn(acc, -x);
  };
  if (gid == gl.A) {
    for (std::size_t r = 1; r < d.rows; ++r)
      if (!same_pair(d, r))
        add(d.gold[d.row_tok[r - 1]] * L + d.gold[d.row_tok[r]], d.pred[r - 1] * L + d.pred[r], scale);
  } else {
    for (std::uint32_t o = oofs[0]; o < oofs[1]; ++o) {
      const std::size_t r = onew[o];
      const double x = __dmul_rn(scale, oval[o]);
      const std::uint32_t y = d.gold[d.row_tok[r]], p = d.pred[r];
      if (gid < gl.A) {
        if (y != p) add(y, p, x);
      } else if (!same_pair(d, r)) {
        add(d.gold[d.row_tok[r - 1]] * L + y, d.pred[r - 1] * L + p, x);
      }
    }
  }
  return acc;
}

/// out (compact, per planned group) = scale · Σ over the span's positions whose labels differ:
/// +x at the gold slot, −x at the predicted one, in (sentence, token, item) order — exactly
/// add_feature_difference's sums (host/backend/span_groups.cpp) — for the `count` groups of a
/// plan of one sentence (its rows are the sentence's tokens); *wrong ← the rows with ŷ ≠ y.
void launch_feature_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const DecodedRows& d,
                               double scale, double* out, std::uint32_t* wrong, cudaStream_t s);

/// Most sentences of a chunk plan written from launch parameters (launch_chunk_from_ids), and of
/// a batch the merged kernels take (BatchRows).
inline constexpr std::size_t kChunkIds = 256;

/// A decoded batch as the merged difference kernels take it, by value (2 KiB): span position
/// i's sentence and its first row in the chunk (its predicted labels at pred + slot[i]).
struct BatchRows {
  std::uint32_t sid[kChunkIds];
  std::uint32_t slot[kChunkIds];
};

/// Where the merged kernels read a batch's sentences: the plans made once (SentencePlans'
/// device arrays from their starts, cuda_sag.cuh), the corpus's sentence offsets and gold
/// labels, the chunk's predicted labels.
struct BatchPlans {
  const std::uint32_t* groups;  // sentence s's groups at [gbase[s], gbase[s + 1]), ascending
  const std::size_t* gbase;     // [S + 1]
  const std::uint32_t* oofs;    // sentence s's at gbase[s] + s
  const std::size_t* obase;     // [S + 1]
  const std::uint32_t* onew;    // sentence s's occurrences at obase[s]
  const double* oval;
  const std::uint32_t* tokens;  // [N] t at t
  const std::size_t* sent_off;  // [S + 1]
  const std::uint32_t* gold;    // [corpus tokens]
  const std::uint32_t* pred;    // [chunk rows]
  // SAG's batch steps (sag_kernels' batch launchers): stored rows, zero sentence indices, edge slots.
  const std::uint32_t* oold;    // sentence s's occurrences at obase[s]
  const std::uint32_t* osent;   // [longest sentence's occurrences] zeros
  const std::uint32_t* slots;   // [N] the edge slot of token t, or kNone
};

/// A batch's Δ in one launch (issue 37): dense[weight] (all zero) ← per weight of each of the
/// `count` groups of S(batch) (ascending, on the device), the sentences' sums of
/// launch_feature_difference in batch order, each going on from the last — the chain of additions
/// that one launch a sentence into `dense` made, so the same bits; *wrong ← the batch's rows with
/// ŷ ≠ y (a second launch).
void launch_batch_difference(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                             const std::uint32_t* groups, std::size_t count, double* dense, std::uint32_t* wrong,
                             cudaStream_t s);

/// For every weight k of the `count` groups listed (a batch's S(batch)): where *gate ≠ 0,
/// w[k] += 1·G[k] and (u non-null) u[k] += a·G[k] (SparseAxpyOp's arithmetic); then G[k] = 0.
/// Each weight once, as the launch a sentence did before: a weight of several sentences took its
/// whole sum at its first and zeros after, which left w and u as they were (no sum is −0).
void launch_apply_difference(const WeightGroups& gl, const std::uint32_t* groups, std::size_t count, double* G,
                             double* w, double* u, double a, const std::uint32_t* gate, cudaStream_t s);

/// A chunk plan of n ≤ kChunkIds sentences — sent = ids, order = the launch order, slots the
/// cumulative lengths from sent_off — written on the device from launch parameters: nothing
/// copied, no host buffer to keep alive for a queued copy.
void launch_chunk_from_ids(const std::uint32_t* ids, const std::uint32_t* launch_order, std::size_t n,
                           const std::size_t* sent_off, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                           cudaStream_t s);

}  // namespace crfx::cuda::detail
