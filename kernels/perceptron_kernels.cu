// crfx — the perceptron's feature difference on the device (declared in perceptron_kernels.cuh):
// add_feature_difference's sums (host/backend/span_groups.cpp) over a sentence's plan made once,
// entry by entry in its order, with explicit round-to-nearest arithmetic (bitwise the host's).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "crfx/errors.hpp"
#include "device_buffer.cuh"
#include "launch.cuh"
#include "perceptron_kernels.cuh"

namespace crfx::cuda::detail {
namespace {

/// Whether rows r − 1 and r carry the same label pair in gold and prediction (r ≥ 1).
__device__ bool same_pair(const DecodedRows& d, std::size_t r) {
  return d.gold[d.row_tok[r - 1]] == d.pred[r - 1] && d.gold[d.row_tok[r]] == d.pred[r];
}

/// Per weight of each planned group (block per group, threads over its weights): the gold slot
/// gets +x, the predicted one −x, at every position whose labels differ — a state group at its
/// occurrences' rows (slot: the label), the transitions at every row r ≥ 1 (slot: y_{r−1}·L +
/// y_r, x = 1), an edge group at its occurrences' rows (r ≥ 1 only: the plan has no others).
__global__ void __launch_bounds__(256) feature_difference_kernel(WeightGroups gl, SagSpanView v, std::size_t count,
                                                                 DecodedRows d, double scale, double* out,
                                                                 double* dense) {
  const std::size_t L = gl.L;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      const std::size_t j = gl.slot(b + c, gid);
      double acc = dense ? dense[b + c] : 0.0;
      auto add = [&](std::size_t gold, std::size_t pred, double x) {
        if (gold == j) acc = __dadd_rn(acc, x);
        if (pred == j) acc = __dadd_rn(acc, -x);
      };
      if (gid == gl.A) {
        for (std::size_t r = 1; r < d.rows; ++r)
          if (!same_pair(d, r))
            add(d.gold[d.row_tok[r - 1]] * L + d.gold[d.row_tok[r]], d.pred[r - 1] * L + d.pred[r], scale);
      } else {
        for (std::uint32_t o = v.oofs[q]; o < v.oofs[q + 1]; ++o) {
          const std::size_t r = v.onew[o];
          const double x = __dmul_rn(scale, v.oval[o]);
          const std::uint32_t y = d.gold[d.row_tok[r]], p = d.pred[r];
          if (gid < gl.A) {
            if (y != p) add(y, p, x);
          } else if (!same_pair(d, r)) {
            add(d.gold[d.row_tok[r - 1]] * L + y, d.pred[r - 1] * L + p, x);
          }
        }
      }
      if (dense)
        dense[b + c] = acc;
      else
        out[v.gofs[q] + c] = acc;
    }
  }
}

/// *wrong ← (add: += ) the rows whose predicted label is not the gold one (one thread: a
/// sentence's rows).
__global__ void mistakes_kernel(DecodedRows d, std::uint32_t* wrong, bool add) {
  std::uint32_t n = add ? *wrong : 0u;
  for (std::size_t r = 0; r < d.rows; ++r) n += d.gold[d.row_tok[r]] != d.pred[r];
  *wrong = n;
}

__global__ void __launch_bounds__(256) apply_difference_kernel(WeightGroups gl, SagSpanView v, std::size_t count,
                                                               double* G, double* w, double* u, double a,
                                                               const std::uint32_t* gate) {
  const bool update = *gate != 0;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t k = b + threadIdx.x; k < b + size; k += blockDim.x) {
      if (update) {
        w[k] += 1.0 * G[k];
        if (u) u[k] += a * G[k];
      }
      G[k] = 0;
    }
  }
}

/// The launch parameters of a chunk plan (launch_chunk_from_ids): 2 KiB.
struct ChunkIds {
  std::uint32_t sent[kChunkIds], order[kChunkIds];
};

__global__ void chunk_from_ids_kernel(ChunkIds ids, std::size_t n, const std::size_t* sent_off, std::uint32_t* sent,
                                      std::uint32_t* order, std::size_t* slots) {
  std::size_t rows = 0;
  slots[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t s = ids.sent[i];
    sent[i] = s;
    order[i] = ids.order[i];
    rows += sent_off[s + 1] - sent_off[s];
    slots[i + 1] = rows;
  }
}

int group_threads(std::size_t L) { return int(std::min<std::size_t>(256, (L + 31) / 32 * 32)); }

}  // namespace

void launch_feature_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const DecodedRows& d,
                               double scale, double* out, std::uint32_t* wrong, cudaStream_t s, double* dense) {
  CRFX_LAUNCH(mistakes_kernel, 1, 1, 0, s, d, wrong, dense != nullptr);
  if (count == 0) return;
  CRFX_LAUNCH(feature_difference_kernel, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, v, count, d,
              scale, out, dense);
}

void launch_apply_difference(const WeightGroups& gl, const SagSpanView& v, std::size_t count, double* G, double* w,
                             double* u, double a, const std::uint32_t* gate, cudaStream_t s) {
  if (count == 0) return;
  CRFX_LAUNCH(apply_difference_kernel, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, v, count, G, w, u,
              a, gate);
}

void launch_chunk_from_ids(const std::uint32_t* ids, const std::uint32_t* launch_order, std::size_t n,
                           const std::size_t* sent_off, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                           cudaStream_t s) {
  if (n > kChunkIds) throw Error("internal: a chunk plan of more sentences than its launch parameters hold");
  ChunkIds p{};
  std::copy(ids, ids + n, p.sent);
  std::copy(launch_order, launch_order + n, p.order);
  CRFX_LAUNCH(chunk_from_ids_kernel, 1, 1, 0, s, p, n, sent_off, sent, order, slots);
}

}  // namespace crfx::cuda::detail
