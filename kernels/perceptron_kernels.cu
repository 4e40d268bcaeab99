// crfx — the perceptron's feature difference on the device (declared in perceptron_kernels.cuh):
// add_feature_difference's sums (host/backend/span_groups.cpp) over a sentence's plan made once,
// entry by entry in its order, with explicit round-to-nearest arithmetic (bitwise the host's).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common.cuh"
#include "crfx/errors.hpp"
#include "device_buffer.cuh"
#include "launch.cuh"
#include "perceptron_kernels.cuh"

namespace crfx::cuda::detail {
namespace {

/// out (compact) ← each weight's sum over one sentence (block per planned group, threads over
/// its weights).
__global__ void __launch_bounds__(256) feature_difference_kernel(WeightGroups gl, SagSpanView v, std::size_t count,
                                                                 DecodedRows d, double scale, double* out) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x)
      out[v.gofs[q] + c] = sentence_sum(gl, gid, gl.slot(b + c, gid), d, v.oofs + q, v.onew, v.oval, scale, 0.0);
  }
}

/// *wrong ← the rows whose predicted label is not the gold one (one thread: a sentence's rows).
__global__ void mistakes_kernel(DecodedRows d, std::uint32_t* wrong) {
  std::uint32_t n = 0;
  for (std::size_t r = 0; r < d.rows; ++r) n += d.gold[d.row_tok[r]] != d.pred[r];
  *wrong = n;
}

/// Sentence i of a batch as the one-sentence kernels read it (select_sentence's pointers).
__device__ DecodedRows rows_of(const BatchRows& br, std::size_t i, const BatchPlans& t) {
  const std::uint32_t sid = br.sid[i];
  return {t.tokens + t.sent_off[sid], t.gold, t.pred + br.slot[i], t.sent_off[sid + 1] - t.sent_off[sid]};
}

/// dense[weight] ← the batch's Δ (block per group of S(batch), threads over its weights): for
/// each sentence in batch order whose plan lists the group (binary search of its ascending list),
/// its sum going on from the last — the chain a launch a sentence made, read and written back in
/// dense between the sentences as then.
__global__ void __launch_bounds__(256) batch_difference_kernel(WeightGroups gl, BatchRows br, std::size_t n,
                                                               BatchPlans t, const std::uint32_t* groups,
                                                               std::size_t count, double* dense) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t sid = br.sid[i];
      const std::uint32_t *first = t.groups + t.gbase[sid], *last = t.groups + t.gbase[sid + 1];
      const std::uint32_t* at = lower_id(first, last, gid);
      if (at == last || *at != gid) continue;
      const DecodedRows d = rows_of(br, i, t);
      const std::uint32_t* oofs = t.oofs + t.gbase[sid] + sid + (at - first);
      const std::size_t o0 = t.obase[sid];
      for (std::size_t c = threadIdx.x; c < size; c += blockDim.x)
        dense[b + c] = sentence_sum(gl, gid, gl.slot(b + c, gid), d, oofs, t.onew + o0, t.oval + o0, 1.0, dense[b + c]);
    }
  }
}

/// *wrong ← the batch's rows whose predicted label is not the gold one (one block: a thread a
/// sentence, then their counts added by thread 0).
__global__ void __launch_bounds__(kChunkIds) batch_mistakes_kernel(BatchRows br, std::size_t n, BatchPlans t,
                                                                   std::uint32_t* wrong) {
  __shared__ std::uint32_t part[kChunkIds];
  std::uint32_t m = 0;
  if (threadIdx.x < n) {
    const DecodedRows d = rows_of(br, threadIdx.x, t);
    for (std::size_t r = 0; r < d.rows; ++r) m += d.gold[d.row_tok[r]] != d.pred[r];
  }
  part[threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (std::size_t i = 1; i < n; ++i) m += part[i];
  *wrong = m;
}

__global__ void __launch_bounds__(256) apply_difference_kernel(WeightGroups gl, const std::uint32_t* groups,
                                                               std::size_t count, double* G, double* w, double* u,
                                                               double a, const std::uint32_t* gate) {
  const bool update = *gate != 0;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = groups[q];
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
                               double scale, double* out, std::uint32_t* wrong, cudaStream_t s) {
  CRFX_LAUNCH(mistakes_kernel, 1, 1, 0, s, d, wrong);
  if (count == 0) return;
  CRFX_LAUNCH(feature_difference_kernel, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, v, count, d,
              scale, out);
}

void launch_batch_difference(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                             const std::uint32_t* groups, std::size_t count, double* dense, std::uint32_t* wrong,
                             cudaStream_t s) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch difference of " + std::to_string(n) + " sentences");
  CRFX_LAUNCH(batch_mistakes_kernel, 1, int(kChunkIds), 0, s, r, n, t, wrong);
  if (count == 0) return;
  CRFX_LAUNCH(batch_difference_kernel, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, r, n, t, groups,
              count, dense);
}

void launch_apply_difference(const WeightGroups& gl, const std::uint32_t* groups, std::size_t count, double* G,
                             double* w, double* u, double a, const std::uint32_t* gate, cudaStream_t s) {
  if (count == 0) return;
  CRFX_LAUNCH(apply_difference_kernel, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, groups, count, G,
              w, u, a, gate);
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
