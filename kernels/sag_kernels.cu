// crfx — the SAG / SAGA span kernels: sag_catch_up, sag_gradient, incremental_trial, incremental_commit and
// sag_store, and their launchers (declared in sag_kernels.cuh). Explicit round-to-nearest
// arithmetic where the CPU's formulas (host/cpu/cpu_sag.cpp) must be matched bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "rules/sag_sampler.hpp"
#include "rules/sag_update.hpp"
#include "device_buffer.cuh"
#include "launch.cuh"
#include "sag_kernels.cuh"

namespace crfx::cuda::detail {
namespace {

/// Composite map of the lazy steps stamp+1 … k on every listed group (all groups when `list` is
/// null); block per group. Explicit round-to-nearest arithmetic: the CPU's formula, no FMA.
__global__ void __launch_bounds__(256) sag_catch_up_kernel(WeightGroups gl, const std::uint32_t* list, std::size_t count, std::uint32_t k,
                                    const double* P, const double* S, const double* R, std::uint32_t* stamp,
                                    double* w, const double* d, SagGate gate, SagPick pick,
                                    const std::size_t* count_at) {
  if (gate.halted_before(gate.at)) return;  // grid-uniform
  if (pick.draw) {
    list = pick.view().groups;
    count = pick.groups();
  }
  if (count_at) count = *count_at;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = list ? list[q] : std::uint32_t(q);
    const std::uint32_t k0 = stamp[gid];
    if (k0 != k) {  // block-uniform
      const SagCatchUp step(P, S, R, k0, k);
      const std::size_t b = gl.begin(gid), e = b + gl.size(gid);
      for (std::size_t j = b + threadIdx.x; j < e; j += blockDim.x) w[j] = step(w[j], d[j]);
    }
    __syncthreads();  // every thread has read stamp[gid]
    if (threadIdx.x == 0) stamp[gid] = k;
  }
}

/// g (compact, per group) = scale · Σ over the span's occurrences of x · (μ_new − gold);
/// transitions: scale · Σ over the span's sentences of the pairwise deltas. Fixed order per entry.
__global__ void __launch_bounds__(256) sag_gradient_kernel(WeightGroups gl, SagSpanView v, std::size_t count, const double* new_node,
                                    const double* new_pair, const double* new_edge, double scale, double* g,
                                    SagPick pick) {
  if (pick.draw) {
    v = pick.view();
    count = pick.groups();
  }
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid), width = marginal_width(gl, gid);
    double* out = g + v.gofs[q];
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      const std::size_t j = gl.slot(b + c, gid);
      out[c] = __dmul_rn(scale, span_group_sum(gl, v, q, gid, j, width, new_node, new_pair, new_edge, 0.0));
    }
  }
}

/// Line-search trial (save = true: saved ← w, w ← w − step·g) or restore (w ← saved) on the
/// span's groups. With `search` (the line search on the device): nothing once it is done, and
/// the step its current one.
__global__ void __launch_bounds__(256) sag_trial_kernel(WeightGroups gl, SagSpanView v, std::size_t count, bool save, double step,
                                 const SagLineSearch* search, const double* g, double* saved, double* w,
                                 SagPick pick, const std::size_t* count_at) {
  if (search) {
    if (search->done) return;  // grid-uniform
    step = search->step();
  }
  if (pick.draw) {
    v = pick.view();
    count = pick.groups();
  }
  if (count_at) count = *count_at;
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid), o = v.gofs[q];
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      if (save) {
        saved[o + c] = w[b + c];
        w[b + c] = __dsub_rn(w[b + c], __dmul_rn(step, g[o + c]));
      } else {
        w[b + c] = saved[o + c];
      }
    }
  }
}

/// d += Δ_i and w −= coef_i·Δ_i, Δ_i = X_iᵀ(μ_new,i − μ_stored,i), per weight (its slot's
/// column of the marginals) in the span's (sentence, token, item) order, as the CPU.
__global__ void __launch_bounds__(256) sag_commit_kernel(WeightGroups gl, SagSpanView v, std::size_t count, const double* new_node,
                                  const double* old_node, const double* new_pair, const double* old_pair,
                                  const double* new_edge, const double* old_edge, const double* coef, double* d,
                                  double* w, SagGate gate, SagPick pick) {
  if (gate.halted_before(gate.at + 1)) return;  // grid-uniform: the halted step commits nothing
  if (pick.draw) {
    v = pick.view();
    count = pick.groups();
  }
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x)
      sag_commit_weight(gl, v, q, gid, b + c, new_node, old_node, new_pair, old_pair, new_edge, old_edge, coef, d, w);
  }
}

/// μ_stored ← μ_new: block per span row (node marginals; the position's pairwise marginals when
/// it has an edge slot), then block per span sentence (summed pairwise marginals).
__global__ void __launch_bounds__(256) sag_store_kernel(std::size_t L, std::size_t rows, std::uint32_t n, const std::uint32_t* row_tok,
                                 const std::uint32_t* row_slot, const std::uint32_t* sid, const double* new_node,
                                 const double* new_pair, const double* new_edge, double* old_node,
                                 double* old_pair, double* old_edge, SagGate gate, SagPick pick) {
  if (gate.halted_before(gate.at + 1)) return;  // grid-uniform
  if (pick.draw) {
    rows = pick.rows();
    row_tok = pick.tokens + pick.row0();
    row_slot = pick.slots + pick.row0();
    sid = pick.tables.sid + pick.sid();
    n = 1;
  }
  const std::size_t LL = L * L;
  for (std::size_t b = blockIdx.x; b < rows + n; b += gridDim.x) {
    if (b < rows) {
      for (std::size_t y = threadIdx.x; y < L; y += blockDim.x)
        old_node[std::size_t(row_tok[b]) * L + y] = new_node[b * L + y];
      if (row_slot[b] != kNone)
        for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
          old_edge[std::size_t(row_slot[b]) * LL + j] = new_edge[b * LL + j];
    } else if (old_pair) {
      const std::size_t i = b - rows;
      for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
        old_pair[std::size_t(sid[i]) * LL + j] = new_pair[i * LL + j];
    }
  }
}

/// Step k of the lazy-step history from step k − 1: LazyStepHistory::push (backend.hpp), the
/// host's arithmetic rounded alike (the host keeps its own copy; both must hold the same bits).
__global__ void sag_push_kernel(std::size_t k, double a, double b, double tau, double* P, double* S, double* R) {
  const double Pk = __dmul_rn(P[k - 1], a);
  S[k] = __dadd_rn(S[k - 1], __ddiv_rn(b, Pk));
  R[k] = __dadd_rn(R[k - 1], __ddiv_rn(tau, Pk));
  P[k] = Pk;
}

__global__ void sag_set_kernel(double* dst, double v) { *dst = v; }

/// A queued step's search from the queue's L (incremental_schedule); done at once, so that its
/// trials change nothing, where an earlier step halted.
__global__ void sag_queue_search_start_kernel(SagLineSearch* search, const double* f, const double* g2,
                                              const SagQueueState* q, std::uint32_t at, const double* L0, double B) {
  *search = SagLineSearch(*f, *g2, B, L0 ? *L0 : q->s.L);
  if (q->halt < at) search->done = true;
}

/// A queued step's end (finish_sag_step's scalars, LazyStepHistory::push as sag_push_kernel), or
/// its halt: its search not done after the rounds queued, or P_k below 1e-150 (a flush first).
/// SAGA's coefficient into coef[0, count) (a batch's sentences all take the same).
__global__ void sag_queue_step_kernel(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                      SagStepParams p, std::size_t k, double* P, double* S, double* R,
                                      double* coef, std::uint32_t count) {
  if (q->halt >= at && sag_step_end(q, *search, at, p, k, P, S, R, coef) && coef)
    for (std::uint32_t i = 1; i < count; ++i) coef[i] = coef[0];
}

/// A one-sentence span drawn by SAG-NUS's sampler (the host's rules, SagSamplerRef).
__global__ void sag_draw_kernel(SagSamplerRef r, SagDraw* draw, double* L0, SagGate gate) {
  if (gate.halted_before(gate.at)) {
    *draw = SagDraw{0, 1.0};
    return;
  }
  *draw = r.draw_one();
  *L0 = r.get(draw->id);
}

/// The drawn sentence's L_i scaled to the L its search found, and the step size after it.
__global__ void sag_found_kernel(SagSamplerRef r, const SagDraw* draw, const double* L0, const double* Lb,
                                 double lip_mult, double lambda, double* alpha) {
  r.found(&draw->id, 1, *L0, *Lb);
  *alpha = r.step_size(lip_mult, lambda);
}

/// A queued drawn step's end (sag_queue_step_kernel's, the sampler's L_i and α; issue 37).
__global__ void sag_queue_drawn_step_kernel(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                            SagSamplerRef r, const SagDraw* draw, SagStepParams p, std::size_t k,
                                            double* P, double* S, double* R, double* coef) {
  if (q->halt >= at) sag_drawn_step_end(q, *search, at, r, *draw, p, k, P, S, R, coef);
}

/// The drawn sentence's chunk plan and rows (launch_picked_chunk).
__global__ void __launch_bounds__(256) picked_chunk_kernel(const SagDraw* draw, const std::size_t* sent_off,
                                                           const std::size_t* edge_off, std::size_t rows,
                                                           std::uint32_t* sent, std::uint32_t* order,
                                                           std::size_t* slots, std::size_t* row_token,
                                                           std::uint8_t* row_edge) {
  const std::uint32_t s = draw->id;
  const std::size_t tok0 = sent_off[s], T = sent_off[s + 1] - tok0;
  if (threadIdx.x == 0) {
    sent[0] = s;
    order[0] = 0;
    slots[0] = 0;
    slots[1] = T;
  }
  for (std::size_t r = threadIdx.x; r < rows; r += blockDim.x) {
    row_token[r] = r < T ? tok0 + r : 0;
    row_edge[r] = r < T && row_has_edge(edge_off, tok0 + r, r) ? 1 : 0;
  }
}

/// The line search's start from the span's loss and ‖g‖² where the device left them.
__global__ void sag_search_start_kernel(SagLineSearch* search, const double* f, const double* g2, double B,
                                        double L0) {
  *search = SagLineSearch(*f, *g2, B, L0);
}

/// A trial's loss taken (once the search is done, trials change nothing).
__global__ void sag_search_tried_kernel(SagLineSearch* search, const double* ft) {
  if (!search->done) search->tried(*ft);
}

/// The chunk plan of one sentence: sent = {s}, order = {0}, slots = {0, T}.
__global__ void one_sentence_chunk_kernel(std::uint32_t s, std::size_t T, std::uint32_t* sent, std::uint32_t* order,
                                          std::size_t* slots) {
  sent[0] = s;
  order[0] = 0;
  slots[0] = 0;
  slots[1] = T;
}

/// index[gofs[q] + c] = the c-th weight of group groups[q] (group_indices on the device).
__global__ void __launch_bounds__(256) expand_groups_kernel(WeightGroups gl, const std::uint32_t* groups,
                                                            const std::size_t* gofs, std::size_t count,
                                                            std::size_t* index) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) index[gofs[q] + c] = b + c;
  }
}

int group_threads(std::size_t L) { return int(std::min<std::size_t>(256, (L + 31) / 32 * 32)); }
unsigned group_grid(std::size_t groups) { return grid_for(groups, 1, 1u << 20); }

}  // namespace

void launch_sag_catch_up(const WeightGroups& gl, const std::uint32_t* list, std::size_t count, std::uint32_t k,
                         const double* P, const double* S, const double* R, std::uint32_t* stamp, double* w,
                         const double* d, cudaStream_t s, SagGate gate, const SagPick& pick,
                         const std::size_t* count_at) {
  CRFX_LAUNCH(sag_catch_up_kernel, count_at ? grid_for(count, 1, 4096) : group_grid(count), group_threads(gl.L), 0, s,
              gl, list, count, k, P, S, R, stamp, w, d, gate, pick, count_at);
}

void launch_sag_gradient(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                         const double* new_pair, const double* new_edge, double scale, double* g, cudaStream_t s,
                         const SagPick& pick) {
  CRFX_LAUNCH(sag_gradient_kernel, group_grid(count), group_threads(gl.L), 0, s, gl, v, count, new_node, new_pair,
              new_edge, scale, g, pick);
}

void launch_sag_trial(const WeightGroups& gl, const SagSpanView& v, std::size_t count, bool save, double step,
                      const SagLineSearch* search, const double* g, double* saved, double* w, cudaStream_t s,
                      const SagPick& pick, const std::size_t* count_at) {
  CRFX_LAUNCH(sag_trial_kernel, count_at ? grid_for(count, 1, 4096) : group_grid(count), group_threads(gl.L), 0, s, gl,
              v, count, save, step, search, g, saved, w, pick, count_at);
}

void launch_sag_search_start(SagLineSearch* search, const double* f, const double* g2, double B, double L0,
                             cudaStream_t s) {
  CRFX_LAUNCH(sag_search_start_kernel, 1, 1, 0, s, search, f, g2, B, L0);
}

void launch_sag_search_tried(SagLineSearch* search, const double* ft, cudaStream_t s) {
  CRFX_LAUNCH(sag_search_tried_kernel, 1, 1, 0, s, search, ft);
}

void launch_sag_commit(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                       const double* old_node, const double* new_pair, const double* old_pair,
                       const double* new_edge, const double* old_edge, const double* coef, double* d, double* w,
                       cudaStream_t s, SagGate gate, const SagPick& pick) {
  CRFX_LAUNCH(sag_commit_kernel, group_grid(count), group_threads(gl.L), 0, s, gl, v, count, new_node, old_node,
              new_pair, old_pair, new_edge, old_edge, coef, d, w, gate, pick);
}

void launch_sag_store(std::size_t L, std::size_t rows, std::size_t n, const std::uint32_t* row_tok,
                      const std::uint32_t* row_slot, const std::uint32_t* sid, const double* new_node,
                      const double* new_pair, const double* new_edge, double* old_node, double* old_pair,
                      double* old_edge, cudaStream_t s, SagGate gate, const SagPick& pick) {
  CRFX_LAUNCH(sag_store_kernel, grid_for(rows + n, 1, 1u << 20), group_threads(L), 0, s, L, rows,
              std::uint32_t(n), row_tok, row_slot, sid, new_node, new_pair, new_edge, old_node, old_pair, old_edge,
              gate, pick);
}

void launch_sag_push(std::size_t k, double a, double b, double tau, double* P, double* S, double* R, cudaStream_t s) {
  CRFX_LAUNCH(sag_push_kernel, 1, 1, 0, s, k, a, b, tau, P, S, R);
}

void launch_sag_draw(const SagSamplerRef& sampler, SagDraw* draw, double* L0, cudaStream_t s, SagGate gate) {
  CRFX_LAUNCH(sag_draw_kernel, 1, 1, 0, s, sampler, draw, L0, gate);
}

void launch_sag_queue_drawn_step(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                 const SagSamplerRef& sampler, const SagDraw* draw, const SagStepParams& p,
                                 std::size_t k, double* P, double* S, double* R, double* coef, cudaStream_t s) {
  CRFX_LAUNCH(sag_queue_drawn_step_kernel, 1, 1, 0, s, q, search, at, sampler, draw, p, k, P, S, R, coef);
}

void launch_picked_chunk(const SagDraw* draw, const std::size_t* sent_off, const std::size_t* edge_off,
                         std::size_t rows, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                         std::size_t* row_token, std::uint8_t* row_edge, cudaStream_t s) {
  CRFX_LAUNCH(picked_chunk_kernel, 1, 256, 0, s, draw, sent_off, edge_off, rows, sent, order, slots, row_token,
              row_edge);
}

void launch_sag_found(const SagSamplerRef& sampler, const SagDraw* draw, const double* L0, const double* Lb,
                      double lip_mult, double lambda, double* alpha, cudaStream_t s) {
  CRFX_LAUNCH(sag_found_kernel, 1, 1, 0, s, sampler, draw, L0, Lb, lip_mult, lambda, alpha);
}

void launch_sag_set(double* dst, double v, cudaStream_t s) { CRFX_LAUNCH(sag_set_kernel, 1, 1, 0, s, dst, v); }

void launch_sag_queue_search_start(SagLineSearch* search, const double* f, const double* g2, const SagQueueState* q,
                                   std::uint32_t at, cudaStream_t s, const double* L0, double B) {
  CRFX_LAUNCH(sag_queue_search_start_kernel, 1, 1, 0, s, search, f, g2, q, at, L0, B);
}

void launch_sag_queue_step(SagQueueState* q, const SagLineSearch* search, std::uint32_t at, const SagStepParams& p,
                           std::size_t k, double* P, double* S, double* R, double* coef, cudaStream_t s,
                           std::uint32_t count) {
  CRFX_LAUNCH(sag_queue_step_kernel, 1, 1, 0, s, q, search, at, p, k, P, S, R, coef, count);
}

void launch_one_sentence_chunk(std::uint32_t sid, std::size_t T, std::uint32_t* sent, std::uint32_t* order,
                               std::size_t* slots, cudaStream_t s) {
  CRFX_LAUNCH(one_sentence_chunk_kernel, 1, 1, 0, s, sid, T, sent, order, slots);
}

void launch_expand_groups(const WeightGroups& gl, const std::uint32_t* groups, const std::size_t* gofs,
                          std::size_t count, std::size_t* index, cudaStream_t s) {
  CRFX_LAUNCH(expand_groups_kernel, group_grid(count), group_threads(gl.L), 0, s, gl, groups, gofs, count, index);
}

}  // namespace crfx::cuda::detail
