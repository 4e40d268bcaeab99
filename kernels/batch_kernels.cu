// crfx — sgd-l1's and adf's batch gradient on the device (declared in batch_kernels.cuh): S(batch)
// from the sentences' plans made once, and the gradient's sums in sag_gradient's order, with
// explicit round-to-nearest arithmetic (bitwise the span plan's sums, backend_plans.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "batch_kernels.cuh"
#include "common.cuh"
#include "crfx/errors.hpp"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

/// Sentence i's group list (the plans made once).
struct GroupList {
  const std::uint32_t* begin;
  const std::uint32_t* end;
};
__device__ GroupList list_of(const BatchIds& ids, std::size_t i, const std::uint32_t* groups,
                              const std::size_t* gbase) {
  return {groups + gbase[ids.sid[i]], groups + gbase[ids.sid[i] + 1]};
}
/// The union kernels' batch: by value (the host's ids, launch parameters) or on the device (a
/// batch the device drew: SagBatch::ids).
__device__ const BatchIds& ids_of(const BatchIds& ids) { return ids; }
__device__ const BatchIds& ids_of(const BatchIds* ids) { return *ids; }

/// flag[entry] = 1 where no earlier sentence of the batch lists the entry's group (block per sentence).
template <class Ids>
__global__ void __launch_bounds__(256) union_flag_kernel(Ids batch, std::size_t n, const std::uint32_t* groups,
                                                         const std::size_t* gbase, std::uint32_t* flag) {
  const BatchIds& ids = ids_of(batch);
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    const GroupList li = list_of(ids, i, groups, gbase);
    for (std::size_t q = threadIdx.x; q < std::size_t(li.end - li.begin); q += blockDim.x) {
      const std::uint32_t x = li.begin[q];
      std::uint32_t first = 1;
      for (std::size_t j = 0; j < i && first; ++j) {
        const GroupList lj = list_of(ids, j, groups, gbase);
        const std::uint32_t* p = lower_id(lj.begin, lj.end, x);
        if (p != lj.end && *p == x) first = 0;
      }
      flag[ids.off[i] + q] = first;
    }
  }
}

/// Per sentence (a thread each): the flagged entries before each of its entries and their
/// groups' sizes (exclusive prefix sums, ng_i + 1 of each, from off[i] + i).
template <class Ids>
__global__ void union_prefix_kernel(WeightGroups gl, Ids batch, std::size_t n, const std::uint32_t* groups,
                                    const std::size_t* gbase, const std::uint32_t* flag, std::size_t* count,
                                    std::size_t* size) {
  const BatchIds& ids = ids_of(batch);
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const GroupList li = list_of(ids, i, groups, gbase);
  const std::size_t ng = std::size_t(li.end - li.begin), at = ids.off[i] + i;
  std::size_t c = 0, z = 0;
  for (std::size_t q = 0; q < ng; ++q) {
    count[at + q] = c;
    size[at + q] = z;
    if (flag[ids.off[i] + q]) {
      ++c;
      z += gl.size(li.begin[q]);
    }
  }
  count[at + ng] = c;
  size[at + ng] = z;
}

/// Each flagged entry's group at its rank in the union, with its offset (block per sentence);
/// gofs[ng] = compact.
template <class Ids>
__global__ void __launch_bounds__(256) union_place_kernel(Ids batch, std::size_t n, const std::uint32_t* groups,
                                                          const std::size_t* gbase, const std::uint32_t* flag,
                                                          const std::size_t* count, const std::size_t* size,
                                                          std::size_t ng, std::size_t compact, std::uint32_t* out,
                                                          std::size_t* gofs) {
  const BatchIds& ids = ids_of(batch);
  if (blockIdx.x == 0 && threadIdx.x == 0 && ng != kNoCount) gofs[ng] = compact;
  for (std::size_t i = blockIdx.x; i < n; i += gridDim.x) {
    const GroupList li = list_of(ids, i, groups, gbase);
    for (std::size_t q = threadIdx.x; q < std::size_t(li.end - li.begin); q += blockDim.x) {
      if (!flag[ids.off[i] + q]) continue;
      const std::uint32_t x = li.begin[q];
      std::size_t rank = 0, ofs = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const GroupList lj = list_of(ids, j, groups, gbase);
        const std::size_t p = ids.off[j] + j + std::size_t(lower_id(lj.begin, lj.end, x) - lj.begin);
        rank += count[p];
        ofs += size[p];
      }
      out[rank] = x;
      gofs[rank] = ofs;
    }
  }
}

/// A batch's sentences and chunk slots, and its S(batch) group count: the host's (BatchRows,
/// launch parameters; n and count given) or a SagBatch on the device (n and ng its own).
struct RowsOf {
  const BatchRows* r = nullptr;
  const SagBatch* b = nullptr;
  std::size_t n, count;
  __device__ RowsOf(const BatchRows& rows, std::size_t n_, std::size_t count_) : r(&rows), n(n_), count(count_) {}
  __device__ RowsOf(const SagBatch* bt, std::size_t, std::size_t) : b(bt), n(bt->n), count(bt->ng) {}
  __device__ std::uint32_t sid(std::size_t i) const { return r ? r->sid[i] : b->ids.sid[i]; }
  __device__ std::uint32_t slot(std::size_t i) const { return r ? r->slot[i] : b->slot[i]; }
};

/// Sentence `sid`'s plan made once as select_sentence points at it, where it lists group gid
/// (binary search of its ascending list): its view (one sentence: its rows sentence-local, its
/// stored rows absolute, its sentence index 0) and the group's index ql in it; false: not listed.
__device__ bool batch_sentence(const BatchPlans& t, std::uint32_t sid, std::uint32_t gid, SagSpanView& v,
                               std::size_t& ql) {
  const std::uint32_t *first = t.groups + t.gbase[sid], *last = t.groups + t.gbase[sid + 1];
  const std::uint32_t* at = lower_id(first, last, gid);
  if (at == last || *at != gid) return false;
  v = SagSpanView{};
  v.oofs = t.oofs + t.gbase[sid] + sid;
  v.onew = t.onew + t.obase[sid];
  v.oold = t.oold ? t.oold + t.obase[sid] : nullptr;
  v.osent = t.osent;
  v.oval = t.oval + t.obase[sid];
  v.n = 1;
  ql = std::size_t(at - first);
  return true;
}

/// dense[weight] ← the batch's gradient, unscaled (block per group of S(batch), threads over its
/// weights): for each sentence in batch order whose plan lists the group, sag_gradient_kernel's
/// sum over the sentence's rows (span_group_sum, sag_kernels.cuh; its rows at its chunk slot)
/// going on from the last — the chain that a launch a sentence into `dense` made, so the same
/// bits. With `g` (SAG's batch step): g[gofs[q] + c] ← scale · that chain from 0 instead.
template <class Rows>
__global__ void __launch_bounds__(256) batch_gradient_kernel(WeightGroups gl, Rows rows, std::size_t n,
                                                             BatchPlans t, const std::uint32_t* groups,
                                                             const std::size_t* gofs, std::size_t count,
                                                             const double* node, const double* pair,
                                                             const double* edge, double* dense, double scale,
                                                             double* g) {
  const std::size_t L = gl.L, LL = L * L;
  const RowsOf br(rows, n, count);
  n = br.n;
  count = br.count;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid), width = gid < gl.A ? L : LL;
    double* out = g ? g + gofs[q] : dense + b;
    if (g)
      for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) out[c] = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      SagSpanView v;
      std::size_t ql;
      if (!batch_sentence(t, br.sid(i), gid, v, ql)) continue;
      const std::size_t row0 = br.slot(i);
      const double* nd = node + row0 * L;
      const double* pr = pair ? pair + i * LL : nullptr;
      const double* ed = edge ? edge + row0 * LL : nullptr;
      for (std::size_t c = threadIdx.x; c < size; c += blockDim.x)
        out[c] = span_group_sum(gl, v, ql, gid, gl.slot(b + c, gid), width, nd, pr, ed, out[c]);
    }
    if (g)
      for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) out[c] = __dmul_rn(scale, out[c]);
  }
}

/// SAG's commit on S(batch) (block per group, threads over its weights): per sentence in batch
/// order whose plan lists the group, sag_commit_weight on its plan (its rows at its chunk slot,
/// its pairwise row at i, its SAGA coefficient coef[i]) — the chain of a span plan's commit, whose
/// occurrences run in (sentence, token, item) order. The halted step and those after commit nothing.
__global__ void __launch_bounds__(256) sag_batch_commit_kernel(WeightGroups gl, const SagBatch* bt, BatchPlans t,
                                                               const std::uint32_t* groups, SagBatchMarginals m,
                                                               const double* coef, double* d, double* w,
                                                               SagGate gate) {
  if (gate.halted_before(gate.at + 1)) return;  // grid-uniform
  const std::size_t L = gl.L, LL = L * L, n = bt->n;
  for (std::size_t q = blockIdx.x; q < bt->ng; q += gridDim.x) {
    const std::uint32_t gid = groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t i = 0; i < n; ++i) {
      SagSpanView v;
      std::size_t ql;
      if (!batch_sentence(t, bt->ids.sid[i], gid, v, ql)) continue;
      v.sid = &bt->ids.sid[i];
      const std::size_t row0 = bt->slot[i];
      const double* ne = m.new_edge ? m.new_edge + row0 * LL : nullptr;
      const double* np = m.new_pair ? m.new_pair + i * LL : nullptr;
      for (std::size_t c = threadIdx.x; c < size; c += blockDim.x)
        sag_commit_weight(gl, v, ql, gid, b + c, m.new_node + row0 * L, m.old_node, np, m.old_pair, ne, m.old_edge,
                          coef ? coef + i : nullptr, d, w);
    }
  }
}

/// SAG's store of a batch's marginals (block per sentence): its rows' node marginals (and edge
/// rows where the token has an edge slot) from its chunk slot to its tokens' stored rows, its
/// summed pairwise marginals to its stored row — sag_store_kernel's copies, placed by the chunk.
__global__ void __launch_bounds__(256) sag_batch_store_kernel(std::size_t L, const SagBatch* bt,
                                                              const std::size_t* sent_off, const std::uint32_t* slots,
                                                              SagBatchMarginals m, SagGate gate) {
  if (gate.halted_before(gate.at + 1)) return;  // grid-uniform
  const std::size_t LL = L * L;
  for (std::size_t i = blockIdx.x; i < bt->n; i += gridDim.x) {
    const std::uint32_t sid = bt->ids.sid[i];
    const std::size_t tok0 = sent_off[sid], T = sent_off[sid + 1] - tok0, row0 = bt->slot[i];
    for (std::size_t e = threadIdx.x; e < T * L; e += blockDim.x) m.old_node[tok0 * L + e] = m.new_node[row0 * L + e];
    if (m.old_edge)
      for (std::size_t t = 0; t < T; ++t)
        if (slots[tok0 + t] != kNone)
          for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
            m.old_edge[std::size_t(slots[tok0 + t]) * LL + j] = m.new_edge[(row0 + t) * LL + j];
    if (m.old_pair)
      for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
        m.old_pair[std::size_t(sid) * LL + j] = m.new_pair[i * LL + j];
  }
}

/// S(batch)'s size once the union kernels ran on a batch the device drew: its group count and
/// compact size into the batch, gofs[ng] = compact (one thread; union_prefix_kernel's counts).
__global__ void union_totals_kernel(SagBatch* b, const std::size_t* count, const std::size_t* size, std::size_t* gofs) {
  std::size_t ng = 0, compact = 0;
  for (std::size_t i = 0; i < b->n; ++i) {
    const std::size_t at = b->ids.off[i + 1] + i;  // sentence i's totals (ids.off[i] + i + its group count)
    ng += count[at];
    compact += size[at];
  }
  b->ng = ng;
  b->compact = compact;
  gofs[ng] = compact;
}

/// A batch the host chose, into the device's SagBatch (one thread: nothing copied).
__global__ void sag_batch_set_kernel(SagBatch* b, BatchIds ids, BatchRows rows, std::uint32_t n, std::size_t ng,
                                     std::size_t compact) {
  b->ids = ids;
  for (std::uint32_t i = 0; i < n; ++i) b->slot[i] = rows.slot[i];
  b->n = n;
  b->ng = ng;
  b->compact = compact;
}

/// A batch of SAG-NUS drawn on the device (block of 256): thread 0 draws B distinct sentences
/// with the sampler (draw_span: the host's draws and visits), their group-list offsets, the chunk
/// plan — sentences in span order, launch order longest first (ties in span order, plan()'s
/// stable sort), slots — and the span's mean L_i; then every thread writes the chunk's rows'
/// tokens and edge flags, rows past the batch's up to `rows` on token 0 (scored, never read). A
/// draw after a halted step draws nothing (the halted step's batch stays, its work unchanged).
__global__ void __launch_bounds__(256) sag_draw_batch_kernel(SagSamplerRef r, SagBatch* b, std::uint32_t B,
                                                             const std::size_t* gbase, const std::size_t* sent_off,
                                                             const std::size_t* edge_off, std::size_t rows,
                                                             std::uint32_t* sent, std::uint32_t* order,
                                                             std::size_t* slots, std::size_t* row_token,
                                                             std::uint8_t* row_edge, SagGate gate) {
  if (gate.halted_before(gate.at)) return;  // block-uniform
  if (threadIdx.x == 0) {
    r.draw_span(b->ids.sid, b->prob, B);
    b->n = B;
    b->ids.off[0] = 0;
    slots[0] = 0;
    for (std::uint32_t i = 0; i < B; ++i) {
      const std::uint32_t s = b->ids.sid[i];
      b->ids.off[i + 1] = std::uint32_t(b->ids.off[i] + (gbase[s + 1] - gbase[s]));
      b->slot[i] = std::uint32_t(slots[i]);
      sent[i] = s;
      slots[i + 1] = slots[i] + (sent_off[s + 1] - sent_off[s]);
      std::uint32_t k = i;  // insertion: longer first, ties in span order
      while (k > 0 && slots[order[k - 1] + 1] - slots[order[k - 1]] < slots[i + 1] - slots[i]) {
        order[k] = order[k - 1];
        --k;
      }
      order[k] = i;
    }
    b->L0 = r.span_lipschitz(b->ids.sid, B);
  }
  __syncthreads();
  const std::size_t total = slots[B];
  for (std::size_t row = threadIdx.x; row < rows; row += blockDim.x) {
    std::size_t tok = 0, t = 0;
    if (row < total) {  // the sentence whose rows hold `row`: the last slot ≤ row
      std::uint32_t lo = 0, hi = B;
      while (hi - lo > 1) {
        const std::uint32_t mid = (lo + hi) / 2;
        if (b->slot[mid] <= row) lo = mid; else hi = mid;
      }
      const std::uint32_t i = lo;
      t = row - b->slot[i];
      tok = sent_off[b->ids.sid[i]] + t;
    }
    row_token[row] = tok;
    row_edge[row] = row < total && row_has_edge(edge_off, tok, t) ? 1 : 0;
  }
}

/// A queued drawn batch's end (one thread; sag_drawn_step_end's for a span, finish_drawn_span's
/// arithmetic): the span's L_i scaled to the L found from their mean, α the sampler's, SagStepScalars
/// with the sentences seen, each member's SAGA coefficient from its own probability; or the halt
/// (its search not done; P_k below 1e-150: the L_i restored, the host ends it again).
__global__ void sag_drawn_batch_end_kernel(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                           SagSamplerRef r, const SagBatch* b, SagStepParams p, std::size_t k,
                                           double* P, double* S, double* R, double* coef) {
  if (q->halt < at) return;
  if (!search->done) {
    q->halt = at;
    return;
  }
  const std::uint32_t n = b->n;
  double Li[kChunkIds];
  for (std::uint32_t i = 0; i < n; ++i) Li[i] = r.get(b->ids.sid[i]);
  r.found(b->ids.sid, n, b->L0, search->L);
  p.seen = double(r.s->m);
  const SagStepSize step{r.step_size(p.lip_mult, p.lambda)};
  const SagStepScalars x(p, step);
  const double Pk = __dmul_rn(P[k - 1], x.a);
  if (Pk < 1e-150) {
    for (std::uint32_t i = 0; i < n; ++i) r.set(b->ids.sid[i], Li[i]);  // the tree as before found()
    q->halt = at;
    return;
  }
  if (coef)
    for (std::uint32_t i = 0; i < n; ++i) {
      p.prob = b->prob[i];
      coef[i] = SagStepScalars(p, step).coef;
    }
  q->s.trials += search->trials;
  q->s.alpha = x.alpha;
  S[k] = __dadd_rn(S[k - 1], __ddiv_rn(x.b, Pk));
  R[k] = __dadd_rn(R[k - 1], __ddiv_rn(x.tau, Pk));
  P[k] = Pk;
}

/// *out = Σ losses[i], i < n, left to right from 0 (the host's sum of a span's losses; one thread).
__global__ void span_loss_kernel(const double* losses, std::size_t n, double* out) {
  double acc = 0.0;
  for (std::size_t i = 0; i < n; ++i) acc = __dadd_rn(acc, losses[i]);
  *out = acc;
}

__global__ void batch_gather_kernel(std::size_t n, const std::size_t* index, double scale, double* dense,
                                    double* value) {
  for (std::size_t p = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; p < n;
       p += std::size_t(gridDim.x) * blockDim.x) {
    value[p] = __dmul_rn(scale, dense[index[p]]);
    dense[index[p]] = 0;
  }
}

int group_threads(std::size_t L) { return int(std::min<std::size_t>(256, (L + 31) / 32 * 32)); }
/// Blocks for a loop over S(batch)'s groups whose count the device holds (at most `most`): the
/// loops stride, each group one block's whatever the grid.
unsigned batch_grid(std::size_t most) { return grid_for(most, 1, 4096); }

}  // namespace

namespace {
/// The union kernels on a batch's ids (by value, or on the device), their scratch sized for
/// `entries` list entries and `ng` groups; ng = kNoCount: gofs[ng] is left to the caller.
template <class Ids>
void union_launches(const WeightGroups& gl, Ids ids, std::size_t n, std::size_t entries, std::size_t ng,
                    std::size_t compact, const std::uint32_t* sentence_groups, const std::size_t* gbase,
                    BatchUnion& u, cudaStream_t s, std::size_t place_ng) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch union of " + std::to_string(n) + " sentences");
  reserve_device(u.flag, std::max<std::size_t>(entries, 1));
  reserve_device(u.count, entries + n);
  reserve_device(u.size, entries + n);
  reserve_device(u.groups, std::max<std::size_t>(ng, 1));
  reserve_device(u.gofs, ng + 1);
  const unsigned blocks = grid_for(n, 1, 1u << 20);
  CRFX_LAUNCH(union_flag_kernel<Ids>, blocks, 128, 0, s, ids, n, sentence_groups, gbase, u.flag.get());
  CRFX_LAUNCH(union_prefix_kernel<Ids>, grid_for(n, 64), 64, 0, s, gl, ids, n, sentence_groups, gbase, u.flag.get(),
              u.count.get(), u.size.get());
  CRFX_LAUNCH(union_place_kernel<Ids>, blocks, 128, 0, s, ids, n, sentence_groups, gbase, u.flag.get(),
              u.count.get(), u.size.get(), place_ng, compact, u.groups.get(), u.gofs.get());
}
}  // namespace

void launch_batch_union(const WeightGroups& gl, const BatchIds& ids, std::size_t n,
                        const std::uint32_t* sentence_groups, const std::size_t* gbase, std::size_t compact,
                        BatchUnion& u, cudaStream_t s) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch union of " + std::to_string(n) + " sentences");
  const std::size_t ng = u.h_groups.size();
  union_launches(gl, ids, n, ids.off[n], ng, compact, sentence_groups, gbase, u, s, ng);
}

void launch_batch_union(const WeightGroups& gl, SagBatch* b, std::size_t n, std::size_t entries, std::size_t ng,
                        const std::uint32_t* sentence_groups, const std::size_t* gbase, BatchUnion& u,
                        cudaStream_t s) {
  const BatchIds* ids = &b->ids;
  union_launches(gl, ids, n, entries, ng, 0, sentence_groups, gbase, u, s, kNoCount);
  CRFX_LAUNCH(union_totals_kernel, 1, 1, 0, s, b, u.count.get(), u.size.get(), u.gofs.get());
}

void launch_batch_gradient(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                           const std::uint32_t* groups, std::size_t count, const double* node, const double* pair,
                           const double* edge, double* dense, cudaStream_t s) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch gradient of " + std::to_string(n) + " sentences");
  if (count == 0) return;
  CRFX_LAUNCH(batch_gradient_kernel<BatchRows>, grid_for(count, 1, 1u << 20), group_threads(gl.L), 0, s, gl, r, n, t,
              groups, nullptr, count, node, pair, edge, dense, 1.0, nullptr);
}

void launch_sag_batch_gradient(const WeightGroups& gl, const SagBatch* b, std::size_t most_groups, const BatchPlans& t,
                               const std::uint32_t* groups, const std::size_t* gofs, const SagBatchMarginals& m,
                               double scale, double* g, cudaStream_t s) {
  if (most_groups == 0) return;
  CRFX_LAUNCH(batch_gradient_kernel<const SagBatch*>, batch_grid(most_groups), group_threads(gl.L), 0, s, gl, b,
              std::size_t(0), t, groups, gofs, std::size_t(0), m.new_node, m.new_pair, m.new_edge, nullptr, scale, g);
}

void launch_sag_batch_commit(const WeightGroups& gl, const SagBatch* b, std::size_t most_groups, const BatchPlans& t,
                             const std::uint32_t* groups, const SagBatchMarginals& m, const double* coef, double* d,
                             double* w, cudaStream_t s, SagGate gate) {
  if (most_groups == 0) return;
  CRFX_LAUNCH(sag_batch_commit_kernel, batch_grid(most_groups), group_threads(gl.L), 0, s, gl, b, t, groups, m, coef,
              d, w, gate);
}

void launch_sag_batch_store(std::size_t L, const SagBatch* b, std::size_t n, const std::size_t* sent_off,
                            const std::uint32_t* slots, const SagBatchMarginals& m, cudaStream_t s, SagGate gate) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch store of " + std::to_string(n) + " sentences");
  CRFX_LAUNCH(sag_batch_store_kernel, grid_for(n, 1, 1u << 20), group_threads(L), 0, s, L, b, sent_off, slots, m,
              gate);
}

void launch_sag_batch_set(SagBatch* b, const BatchIds& ids, const BatchRows& rows, std::size_t n, std::size_t ng,
                          std::size_t compact, cudaStream_t s) {
  if (n == 0 || n > kChunkIds) throw Error("internal: a batch of " + std::to_string(n) + " sentences");
  CRFX_LAUNCH(sag_batch_set_kernel, 1, 1, 0, s, b, ids, rows, std::uint32_t(n), ng, compact);
}

void launch_sag_draw_batch(const SagSamplerRef& r, SagBatch* b, std::size_t B, const std::size_t* gbase,
                           const std::size_t* sent_off, const std::size_t* edge_off, std::size_t rows,
                           std::uint32_t* sent, std::uint32_t* order, std::size_t* slots, std::size_t* row_token,
                           std::uint8_t* row_edge, cudaStream_t s, SagGate gate) {
  if (B == 0 || B > kChunkIds) throw Error("internal: a drawn batch of " + std::to_string(B) + " sentences");
  CRFX_LAUNCH(sag_draw_batch_kernel, 1, 256, 0, s, r, b, std::uint32_t(B), gbase, sent_off, edge_off, rows, sent,
              order, slots, row_token, row_edge, gate);
}

void launch_sag_drawn_batch_end(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                const SagSamplerRef& r, const SagBatch* b, const SagStepParams& p, std::size_t k,
                                double* P, double* S, double* R, double* coef, cudaStream_t s) {
  CRFX_LAUNCH(sag_drawn_batch_end_kernel, 1, 1, 0, s, q, search, at, r, b, p, k, P, S, R, coef);
}

void launch_span_loss(const double* losses, std::size_t n, double* out, cudaStream_t s) {
  CRFX_LAUNCH(span_loss_kernel, 1, 1, 0, s, losses, n, out);
}

void launch_batch_gather(std::size_t n, const std::size_t* index, double scale, double* dense, double* value,
                         cudaStream_t s) {
  if (n == 0) return;
  CRFX_LAUNCH(batch_gather_kernel, grid_for(n, 256), 256, 0, s, n, index, scale, dense, value);
}

}  // namespace crfx::cuda::detail
