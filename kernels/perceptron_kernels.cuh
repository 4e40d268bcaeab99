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

/// A decoded span as the difference kernels read it: per span row its token (gold label
/// gold[row_tok[r]]) and predicted label pred[r]; first[r] is 1 at a sentence's first row.
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
/// With `dense` (a batch, sentence by sentence): the sums go on from dense[weight] and are left
/// there (out unused), and the rows with ŷ ≠ y are added to *wrong.
void launch_feature_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const DecodedRows& d,
                               double scale, double* out, std::uint32_t* wrong, cudaStream_t s,
                               double* dense = nullptr);

/// For every weight k of the `count` groups of a sentence's plan: where *gate ≠ 0, w[k] += 1·G[k]
/// and (u non-null) u[k] += a·G[k] (SparseAxpyOp's arithmetic); then G[k] = 0. A weight of several
/// sentences of a batch gets its whole sum at its first sentence and zeros after (x + 0 = x: no sum
/// of the perceptron's is −0).
void launch_apply_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, double* G, double* w,
                             double* u, double a, const std::uint32_t* gate, cudaStream_t s);

/// Most sentences of a chunk plan written from launch parameters (launch_chunk_from_ids).
inline constexpr std::size_t kChunkIds = 256;
/// A chunk plan of n ≤ kChunkIds sentences — sent = ids, order = the launch order, slots the
/// cumulative lengths from sent_off — written on the device from launch parameters: nothing
/// copied, no host buffer to keep alive for a queued copy.
void launch_chunk_from_ids(const std::uint32_t* ids, const std::uint32_t* launch_order, std::size_t n,
                           const std::size_t* sent_off, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                           cudaStream_t s);

}  // namespace crfx::cuda::detail
