// crfx — the perceptron's feature difference on the device (declared in perceptron_kernels.cuh):
// add_feature_difference's sums (host/backend/span_groups.cpp) over a sentence's plan made once,
// entry by entry in its order, with explicit round-to-nearest arithmetic (bitwise the host's).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "crfx/errors.hpp"
#include "decode_kernels.cuh"
#include "device_buffer.cuh"
#include "launch.cuh"
#include "perceptron_kernels.cuh"

namespace crfx::cuda::detail {
namespace {

/// Whether rows r − 1 and r carry the same label pair in gold and prediction (r ≥ 1).
__device__ bool same_pair(const DecodedRows& d, std::size_t r) {
  return d.gold[d.row_tok[r - 1]] == d.pred[r - 1] && d.gold[d.row_tok[r]] == d.pred[r];
}

/// Weight slot j's sum over one sentence's rows for its group gid (oofs: the group's entry in
/// the sentence's plan, [oofs[0], oofs[1]) its occurrences), going on from acc: the gold slot
/// gets +x, the predicted one −x, at every position whose labels differ — a state group at its
/// occurrences' rows (slot: the label), the transitions at every row r ≥ 1 (slot: y_{r−1}·L +
/// y_r, x = 1), an edge group at its occurrences' rows (r ≥ 1 only: the plan has no others).
/// The one sum of both kernels below: the same additions in the same order.
__device__ double sentence_sum(const WeightGroups& gl, std::uint32_t gid, std::size_t j, const DecodedRows& d,
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

constexpr unsigned kRunThreads = 256, kRunWarps = kRunThreads / 32;

/// One block takes the run's steps in turn, each as perceptron_step's launches take it: τ at w
/// (dense_row_entry), the emissions (a warp a row), the edge rows' τ_t (edge_entry), Viterbi (its
/// last two rows in shared memory),
/// the mistakes, and where there is one, per weight of the sentence's plan (a warp a group) its Δ
/// (sentence_sum) added to w and, times t0 + i, to u. The barrier that ends a step makes the next
/// read the weights it left.
__global__ void __launch_bounds__(kRunThreads) perceptron_run_kernel(PerceptronRun p) {
  const unsigned L = unsigned(p.gl.L), tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const std::size_t LL = std::size_t(L) * L;
  CRFX_DYNAMIC_SHARED(double, smem);
  double* M = smem;            // [L][L] τ at w
  double* rows = M + LL;       // [2][L] Viterbi's rows t − 1 and t
  double* acc = rows + 2 * L;  // [kRunWarps][L] a sparse layout's emission sums
  __shared__ int wrong;
  const BatchPlans& t = p.t;
  for (std::size_t i = 0; i < p.steps; ++i) {
    const std::uint32_t sid = p.ids[i];
    const std::size_t tok0 = t.sent_off[sid], T = t.sent_off[sid + 1] - tok0;
    for (std::size_t j = tid; j < LL; j += kRunThreads) M[j] = dense_row_entry(p.gl, p.gl.A, j, p.w);
    for (std::size_t r0 = 0; r0 < T; r0 += kRunWarps) {  // (every warp the same number of rounds)
      const std::size_t r = r0 + warp;
      const bool live = r < T;
      const std::size_t k0 = live ? p.state_off[tok0 + r] : 0, k1 = live ? p.state_off[tok0 + r + 1] : 0;
      emission_row<32>(L, live, k0, k1, lane, p.state_ids, p.state_vals, p.w, p.gl, acc + warp * L, p.S + r * L);
    }
    if (tid == 0) wrong = 0;
    __syncthreads();
    if (T == 0) continue;  // (block-uniform) no path, no mistake
    for (std::size_t r = 1; p.edge_off && r < T; ++r)  // τ_t at the rows with edge items
      if (row_has_edge(p.edge_off, tok0 + r, r))
        for (std::size_t j = tid; j < LL; j += kRunThreads)
          p.edge[r * LL + j] = edge_entry(p.gl, M[j], j, p.edge_off[tok0 + r], p.edge_off[tok0 + r + 1], p.edge_ids,
                                          p.edge_vals, p.w);
    for (unsigned y = tid; y < L; y += kRunThreads) rows[y] = p.S[y];
    __syncthreads();
    for (std::size_t r = 1; r < T; ++r) {
      const double* dp = rows + ((r - 1) & 1) * L;
      for (unsigned yc = tid; yc < L; yc += kRunThreads) {
        double best;
        std::uint32_t arg;
        best_predecessor(dp, row_has_edge(p.edge_off, tok0 + r, r) ? p.edge + r * LL : M, int(L), int(yc), best, arg);
        rows[(r & 1) * L + yc] = best + p.S[r * L + yc];
        p.back[r * L + yc] = arg;
      }
      __syncthreads();
    }
    if (tid == 0) backtrack(rows + ((T - 1) & 1) * L, p.back, int(L), T, p.path);
    __syncthreads();
    for (std::size_t r = tid; r < T; r += kRunThreads)
      if (t.gold[tok0 + r] != t.pred[r]) wrong = 1;  // (every writer writes 1)
    __syncthreads();
    if (wrong) {
      const DecodedRows d{t.tokens + tok0, t.gold, t.pred, T};
      const std::size_t g0 = t.gbase[sid], ng = t.gbase[sid + 1] - g0, o0 = t.obase[sid];
      const double a = p.t0 + double(i);
      for (std::size_t q = warp; q < ng; q += kRunWarps) {
        const std::uint32_t gid = t.groups[g0 + q];
        const std::size_t b = p.gl.begin(gid), size = p.gl.size(gid);
        for (std::size_t c = lane; c < size; c += 32) {
          const double delta = sentence_sum(p.gl, gid, p.gl.slot(b + c, gid), d, t.oofs + g0 + sid + q,
                                            t.onew + o0, t.oval + o0, 1.0, 0.0);
          p.w[b + c] += 1.0 * delta;  // (gated_axpy's expressions: w's a = 1, u's a = t − 1)
          if (p.u && a != 0) p.u[b + c] += a * delta;
        }
      }
    }
    __syncthreads();
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

void launch_perceptron_run(const PerceptronRun& p, cudaStream_t s) {
  const std::size_t L = p.gl.L;
  if (p.steps == 0) return;
  if (p.steps > kRunIds || L > kRunMaxL) throw Error("internal: a perceptron run beyond its launch's bounds");
  const std::size_t smem = (L * L + (2 + kRunWarps) * L) * sizeof(double);
  CRFX_LAUNCH(perceptron_run_kernel, 1, int(kRunThreads), smem, s, p);
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
