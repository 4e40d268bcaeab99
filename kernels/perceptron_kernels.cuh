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

/// Sentences a run of perceptron steps takes in one launch (their ids are its launch parameters:
/// 2 KiB), and the label counts it takes (τ, Viterbi's last two rows and a sparse layout's emission
/// sums in shared memory: ≤ 38 KB at L = 64).
inline constexpr std::size_t kRunIds = 512;
inline constexpr std::size_t kRunMaxL = 64;

/// ap's steps at batch size 1 over `steps` sentences in a row (launch_perceptron_run, by value):
/// each the step perceptron_step takes on one sentence — Viterbi at w, and where the path has a
/// mistake w += Δ and u += (t0 + i)·Δ for the run's i-th (nothing to u where t0 + i is 0).
struct PerceptronRun {
  std::uint32_t ids[kRunIds];  // the sentences, in step order
  std::size_t steps;
  double t0;                   // the trainer's steps before the run's first
  WeightGroups gl;             // device groups (the transitions' row: group gl.A)
  const std::size_t* state_off;
  const std::uint32_t* state_ids;
  const double* state_vals;    // or null (binary attributes)
  const std::size_t* edge_off;  // null: no edge attributes
  const std::uint32_t* edge_ids;
  const double* edge_vals;
  double* edge;                // [longest sentence][L][L] τ_t at its rows with edge items
  BatchPlans t;                // the plans made once, sent_off and gold; t.pred: the path, read
  std::uint32_t* path;         // [longest sentence] the path written (t.pred)
  double* w;
  double* u;                   // null: no averaging
  double* S;                   // [longest sentence][L] its emissions
  std::uint32_t* back;         // [longest sentence][L] Viterbi's predecessors
};

/// The run in one launch of one block (issue 37: at batch size 1 a step was ~11 launches).
/// Bitwise the steps of perceptron_step one sentence at a time: the same sums in the same order
/// (emission_row, best_predecessor, backtrack, the difference's sentence sums, the updates'
/// expressions, edge_entry). The layout's transitions must be on, L ≤ kRunMaxL.
void launch_perceptron_run(const PerceptronRun& p, cudaStream_t s);

/// A chunk plan of n ≤ kChunkIds sentences — sent = ids, order = the launch order, slots the
/// cumulative lengths from sent_off — written on the device from launch parameters: nothing
/// copied, no host buffer to keep alive for a queued copy.
void launch_chunk_from_ids(const std::uint32_t* ids, const std::uint32_t* launch_order, std::size_t n,
                           const std::size_t* sent_off, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                           cudaStream_t s);

}  // namespace crfx::cuda::detail
