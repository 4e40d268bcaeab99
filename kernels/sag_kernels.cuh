// crfx — SAG / SAGA (seed 004) on the device (kernels/sag_kernels.cu): the device view of a span
// plan (over the weight groups of crfx::WeightGroups, include/crfx/internal/corpus.hpp), and the launchers of the span kernels — lazy catch-up, span
// gradient, line-search trial / restore, commit, and the store of the new marginals. The host
// side (plans, the lazy-step history) is CudaBackend's, in backend_sag.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "crfx/internal/corpus.hpp"  // WeightGroups
#include "rules/sag_sampler.hpp"  // SagSamplerRef
#include "rules/sag_update.hpp"  // SagLineSearch

namespace crfx::cuda::detail {

/// Device view of a SpanPlan (cuda_backend.cuh): its touched groups in ascending id order, the
/// offset of each group in the compact per-span arrays (g, saved), and per group its occurrences
/// in the span in (sentence, token, item) order: span row of the token, stored row (token id for
/// state groups, edge slot for edge groups), value, and span index of the sentence.
struct SagSpanView {
  const std::uint32_t* groups;  // [ng]
  const std::size_t* gofs;      // [ng + 1]
  const std::uint32_t* oofs;    // [ng + 1]
  const std::uint32_t* onew;    // [occ]
  const std::uint32_t* oold;    // [occ]
  const std::uint32_t* osent;   // [occ]
  const double* oval;           // [occ]
  const std::uint32_t* sid;     // [n] sentence ids, span order
  std::uint32_t n;
};

/// Width of group gid's marginal rows: L (state groups) or L² (transitions, edge groups). Weight
/// k of the group reads column slot(k) of them (dense: the k-th; sparse: the pair its row lists).
inline __device__ std::size_t marginal_width(const WeightGroups& gl, std::uint32_t gid) {
  return gid < gl.A ? gl.L : gl.L * gl.L;
}

/// The span's gradient sum for weight slot j of its q-th group gid (width: L for state groups, L²
/// for the transitions and edge groups), added to acc in the plan's fixed order: the transitions
/// over the span's sentences' pairwise rows, other groups over their occurrences, value ×
/// marginal. Round-to-nearest throughout (no FMA contraction), so the sums are bitwise the same
/// in every kernel that uses it (sag_gradient_kernel, batch_gradient_kernel).
inline __device__ double span_group_sum(const WeightGroups& gl, const SagSpanView& v, std::size_t q,
                                        std::uint32_t gid, std::size_t j, std::size_t width, const double* node,
                                        const double* pair, const double* edge, double acc) {
  if (gid == gl.A) {
    for (std::uint32_t i = 0; i < v.n; ++i) acc = __dadd_rn(acc, pair[std::size_t(i) * width + j]);
  } else {
    const double* src = gid < gl.A ? node : edge;
    for (std::uint32_t o = v.oofs[q]; o < v.oofs[q + 1]; ++o)
      acc = __dadd_rn(acc, __dmul_rn(v.oval[o], src[std::size_t(v.onew[o]) * width + j]));
  }
  return acc;
}

/// Sentence s's one-sentence span plan in the plans made once (SentencePlans' arrays from their
/// starts in `t`; CudaBackend::select_sentence's pointers, taken on the device).
CRFX_HOST_DEVICE inline SagSpanView sentence_plan(const SagSpanView& t, const std::size_t* gbase,
                                                  const std::size_t* obase, std::uint32_t s) {
  const std::size_t g0 = gbase[s], f0 = g0 + s, o0 = obase[s];
  return {t.groups + g0, t.gofs + f0, t.oofs + f0, t.onew + o0, t.oold + o0, t.osent, t.oval + o0, t.sid + s, 1u};
}

/// A one-sentence span whose sentence the device drew (SAG-NUS's queued steps, issue 37): the
/// sentence at draw->id, its plan its entry in the plans made once (SentencePlans, cuda_sag.cuh,
/// select_sentence's pointers taken on the device). The span kernels given one are launched for
/// the largest sentence's plan and each does its sentence's share; `draw` null: none (the kernels
/// use the plan they are given).
struct SagPick {
  const SagDraw* draw = nullptr;
  const std::size_t* gbase = nullptr;     // [S + 1] SentencePlans::gbase
  const std::size_t* obase = nullptr;     // [S + 1]
  const std::size_t* sent_off = nullptr;  // [S + 1] the corpus's
  SagSpanView tables{};                   // SentencePlans' arrays from their starts
  const std::uint32_t* tokens = nullptr;  // [N] SentencePlans::tokens
  const std::uint32_t* slots = nullptr;   // [N] SentencePlans::slots
  CRFX_HOST_DEVICE std::uint32_t sid() const { return draw->id; }
  CRFX_HOST_DEVICE SagSpanView view() const { return sentence_plan(tables, gbase, obase, sid()); }
  CRFX_HOST_DEVICE std::size_t groups() const { return gbase[sid() + 1] - gbase[sid()]; }
  CRFX_HOST_DEVICE std::size_t row0() const { return sent_off[sid()]; }
  CRFX_HOST_DEVICE std::size_t rows() const { return sent_off[sid() + 1] - sent_off[sid()]; }
};

/// incremental_schedule's queue on the device (backend_sag_queue.cu): the scalars after the last
/// step done, and the index of the queued step that halted (kNoHalt: none).
struct SagQueueState {
  static constexpr std::uint32_t kNoHalt = 0xffffffffu;
  SagScalars s;
  std::uint32_t halt;
};

/// d += Δ_i and (coef given) w −= coef_i·Δ_i at weight k (slot j of group gid, the q-th of the
/// span's plan v): Δ_i = X_iᵀ(μ_new,i − μ_stored,i), its slot's column of the marginals in the
/// span's (sentence, token, item) order, as the CPU (sag_commit_kernel's, a sag run's).
inline __device__ void sag_commit_weight(const WeightGroups& gl, const SagSpanView& v, std::size_t q,
                                         std::uint32_t gid, std::size_t k, const double* new_node,
                                         const double* old_node, const double* new_pair, const double* old_pair,
                                         const double* new_edge, const double* old_edge, const double* coef,
                                         double* d, double* w) {
  const std::size_t j = gl.slot(k, gid), width = marginal_width(gl, gid);
  double dj = d[k], wj = coef ? w[k] : 0.0;
  if (gid == gl.A) {
    for (std::uint32_t i = 0; i < v.n; ++i) {
      const double x = __dsub_rn(new_pair[std::size_t(i) * width + j], old_pair[std::size_t(v.sid[i]) * width + j]);
      dj = __dadd_rn(dj, x);
      if (coef) wj = __dsub_rn(wj, __dmul_rn(coef[i], x));
    }
  } else {
    const double* nw = gid < gl.A ? new_node : new_edge;
    const double* od = gid < gl.A ? old_node : old_edge;
    for (std::uint32_t o = v.oofs[q]; o < v.oofs[q + 1]; ++o) {
      const double x =
          __dmul_rn(v.oval[o], __dsub_rn(nw[std::size_t(v.onew[o]) * width + j], od[std::size_t(v.oold[o]) * width + j]));
      dj = __dadd_rn(dj, x);
      if (coef) wj = __dsub_rn(wj, __dmul_rn(coef[v.osent[o]], x));
    }
  }
  d[k] = dj;
  if (coef) w[k] = wj;
}

/// A queued step's end (one thread; sag_queue_step_kernel's, a sag run's): finish_sag_step's
/// scalars into q and the history's step k (LazyStepHistory::push, rounded as the host's), SAGA's
/// coefficient into *coef; or false, q->halt = at, where it halts — its search not done, or P_k
/// below 1e-150 (the CPU flushes first).
inline __device__ bool sag_step_end(SagQueueState* q, const SagLineSearch& search, std::uint32_t at,
                                    const SagStepParams& p, std::size_t k, double* P, double* S, double* R,
                                    double* coef) {
  const SagStepScalars x(p, search.L);
  const double Pk = __dmul_rn(P[k - 1], x.a);
  if (!search.done || Pk < 1e-150) {
    q->halt = at;
    return false;
  }
  q->s.trials += search.trials;
  q->s.alpha = x.alpha;
  q->s.L = __dmul_rn(search.L, p.decay);
  if (coef) *coef = x.coef;
  S[k] = __dadd_rn(S[k - 1], __ddiv_rn(x.b, Pk));
  R[k] = __dadd_rn(R[k - 1], __ddiv_rn(x.tau, Pk));
  P[k] = Pk;
  return true;
}

/// A queued drawn step's end (one thread; sag_queue_drawn_step_kernel's, a sag run's): as
/// sag_step_end, with the drawn sentence's L_i scaled to the L its search found and α the
/// sampler's (SagSamplerRef::found, step_size), the sentences seen and the draw's probability into
/// SagStepScalars, L left as it was; L_i restored where the step halts on P_k (the host then ends
/// it again).
inline __device__ bool sag_drawn_step_end(SagQueueState* q, const SagLineSearch& search, std::uint32_t at,
                                          const SagSamplerRef& r, const SagDraw& draw, SagStepParams p,
                                          std::size_t k, double* P, double* S, double* R, double* coef) {
  if (!search.done) {
    q->halt = at;
    return false;
  }
  const std::uint32_t id = draw.id;
  const double Li = r.get(id);  // the search's L0
  r.found(&id, 1, Li, search.L);
  p.seen = double(r.s->m);
  p.prob = draw.prob;
  const SagStepScalars x(p, SagStepSize{r.step_size(p.lip_mult, p.lambda)});
  const double Pk = __dmul_rn(P[k - 1], x.a);
  if (Pk < 1e-150) {
    r.set(id, Li);  // the tree as before found(): its sums are recomputed from the same leaves
    q->halt = at;
    return false;
  }
  q->s.trials += search.trials;
  q->s.alpha = x.alpha;
  if (coef) *coef = x.coef;
  S[k] = __dadd_rn(S[k - 1], __ddiv_rn(x.b, Pk));
  R[k] = __dadd_rn(R[k - 1], __ddiv_rn(x.tau, Pk));
  P[k] = Pk;
  return true;
}
/// Where a queued step's kernel stands: `halt` the queue's (null: not queued), `at` its index.
/// A step after a halted one changes nothing (its catch-up, commit and store return at once),
/// nor does the halted step commit.
struct SagGate {
  const std::uint32_t* halt = nullptr;
  std::uint32_t at = 0;
  CRFX_HOST_DEVICE bool halted_before(std::uint32_t i) const { return halt && *halt < i; }
};

// Every launcher but the store's runs a block per listed group (count groups), ≤ 256 threads
// over the group's entries; `gl` is the weight groups with device pointers
// (CudaBackend::device_groups): weight k of a group reads column slot(k) of its marginal rows.

/// Brings the listed groups (all groups when `list` is null) from their stamp to step k. With
/// count_at, the device's count (at most `count`: the launch's bound) replaces it (a drawn batch).
void launch_sag_catch_up(const WeightGroups& gl, const std::uint32_t* list, std::size_t count, std::uint32_t k,
                         const double* P, const double* S, const double* R, std::uint32_t* stamp, double* w,
                         const double* d, cudaStream_t s, SagGate gate = {}, const SagPick& pick = {},
                         const std::size_t* count_at = nullptr);
/// g (compact, per group) = scale · the span's gradient from its deltas.
void launch_sag_gradient(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                         const double* new_pair, const double* new_edge, double scale, double* g, cudaStream_t s,
                         const SagPick& pick = {});
/// Line-search trial (save) or restore on the span's groups; with `search` (on the device) at
/// its step, and not at all once it is done.
void launch_sag_trial(const WeightGroups& gl, const SagSpanView& v, std::size_t count, bool save, double step,
                      const SagLineSearch* search, const double* g, double* saved, double* w, cudaStream_t s,
                      const SagPick& pick = {}, const std::size_t* count_at = nullptr);
/// *search = SagLineSearch(*f, *g2, B, L0) (one thread).
void launch_sag_search_start(SagLineSearch* search, const double* f, const double* g2, double B, double L0,
                             cudaStream_t s);
/// search->tried(*ft) unless it is done (one thread).
void launch_sag_search_tried(SagLineSearch* search, const double* ft, cudaStream_t s);
/// d += Δ_i (and w −= coef_i·Δ_i when coef is given) on the span's groups.
void launch_sag_commit(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                       const double* old_node, const double* new_pair, const double* old_pair,
                       const double* new_edge, const double* old_edge, const double* coef, double* d, double* w,
                       cudaStream_t s, SagGate gate = {}, const SagPick& pick = {});
/// μ_stored ← μ_new: block per span row, then per span sentence (rows + n blocks).
void launch_sag_store(std::size_t L, std::size_t rows, std::size_t n, const std::uint32_t* row_tok,
                      const std::uint32_t* row_slot, const std::uint32_t* sid, const double* new_node,
                      const double* new_pair, const double* new_edge, double* old_node, double* old_pair,
                      double* old_edge, cudaStream_t s, SagGate gate = {}, const SagPick& pick = {});

/// P[k], S[k], R[k] from entry k − 1 and the step (a, b, τ): LazyStepHistory::push on the device
/// (one thread), so the history needs no copy per step.
void launch_sag_push(std::size_t k, double a, double b, double tau, double* P, double* S, double* R, cudaStream_t s);
/// index[gofs[q] + c] = the c-th weight index of group groups[q], q < count: a support's
/// indices from its groups (group_indices, host/backend/span_groups.cpp, on the device).
void launch_expand_groups(const WeightGroups& gl, const std::uint32_t* groups, const std::size_t* gofs,
                          std::size_t count, std::size_t* index, cudaStream_t s);
/// A queued step's search from q's L (done at once after a halted step), and its end: the
/// scalars and the history's step k, or the halt (incremental_schedule; one thread each).
/// With L0 (a drawn step: its L_i, launch_sag_draw's) the search starts from *L0, not q's L; B is
/// the span's size (SagLineSearch's). SAGA's coefficient goes to coef[0, count).
void launch_sag_queue_search_start(SagLineSearch* search, const double* f, const double* g2, const SagQueueState* q,
                                   std::uint32_t at, cudaStream_t s, const double* L0 = nullptr, double B = 1.0);
void launch_sag_queue_step(SagQueueState* q, const SagLineSearch* search, std::uint32_t at, const SagStepParams& p,
                           std::size_t k, double* P, double* S, double* R, double* coef, cudaStream_t s,
                           std::uint32_t count = 1);
/// SAG-NUS's sampler on the device (SagSamplerRef over device arrays, host/rules/sag_sampler.hpp;
/// one thread each): a span of one sentence drawn — *draw its sentence and probability, *L0 its
/// L_i after the visit (the line search's start) — and the end of its search: L_i scaled to the
/// *Lb found, *alpha the step size for lip_mult and λ.
/// A queued draw (gate.halt set) after a halted step draws nothing and writes sentence 0 (whose
/// work then changes nothing).
void launch_sag_draw(const SagSamplerRef& sampler, SagDraw* draw, double* L0, cudaStream_t s, SagGate gate = {});
/// A queued drawn step's end: as launch_sag_queue_step, with L_i scaled to the L found and α the
/// sampler's (SagSamplerRef::found, step_size), the sentences seen and the draw's probability
/// into SagStepScalars; L_i restored where the step halts on P_k (the host then ends it again).
void launch_sag_queue_drawn_step(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                 const SagSamplerRef& sampler, const SagDraw* draw, const SagStepParams& p,
                                 std::size_t k, double* P, double* S, double* R, double* coef, cudaStream_t s);
/// The chunk plan of the drawn sentence alone (sent = {s}, order = {0}, slots = {0, T}) and its
/// rows' tokens and edge flags; rows T … rows − 1 (up to the longest sentence's, what the chunk
/// kernels are launched for) on token 0 without edges: scored, never read.
void launch_picked_chunk(const SagDraw* draw, const std::size_t* sent_off, const std::size_t* edge_off,
                         std::size_t rows, std::uint32_t* sent, std::uint32_t* order, std::size_t* slots,
                         std::size_t* row_token, std::uint8_t* row_edge, cudaStream_t s);
void launch_sag_found(const SagSamplerRef& sampler, const SagDraw* draw, const double* L0, const double* Lb,
                      double lip_mult, double lambda, double* alpha, cudaStream_t s);
/// *dst = v (one thread): a scalar of the host's as a kernel argument, not a copy to wait for.
void launch_sag_set(double* dst, double v, cudaStream_t s);
/// The chunk plan of sentence `sid` alone (T tokens): sent = {sid}, order = {0}, slots = {0, T},
/// written by one thread instead of copied (run_chunk_front; a step of batch size 1).
void launch_one_sentence_chunk(std::uint32_t sid, std::size_t T, std::uint32_t* sent, std::uint32_t* order,
                               std::size_t* slots, cudaStream_t s);

}  // namespace crfx::cuda::detail
