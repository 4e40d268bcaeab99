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
void launch_feature_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const DecodedRows& d,
                               double scale, double* out, std::uint32_t* wrong, cudaStream_t s);

}  // namespace crfx::cuda::detail
