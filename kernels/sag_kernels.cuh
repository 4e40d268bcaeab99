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

/// incremental_schedule's queue on the device (backend_sag_queue.cu): the scalars after the last
/// step done, and the index of the queued step that halted (kNoHalt: none).
struct SagQueueState {
  static constexpr std::uint32_t kNoHalt = 0xffffffffu;
  SagScalars s;
  std::uint32_t halt;
};
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

/// Brings the listed groups (all groups when `list` is null) from their stamp to step k.
void launch_sag_catch_up(const WeightGroups& gl, const std::uint32_t* list, std::size_t count, std::uint32_t k,
                         const double* P, const double* S, const double* R, std::uint32_t* stamp, double* w,
                         const double* d, cudaStream_t s, SagGate gate = {});
/// g (compact, per group) = scale · the span's gradient from its deltas.
void launch_sag_gradient(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                         const double* new_pair, const double* new_edge, double scale, double* g, cudaStream_t s);
/// Line-search trial (save) or restore on the span's groups; with `search` (on the device) at
/// its step, and not at all once it is done.
void launch_sag_trial(const WeightGroups& gl, const SagSpanView& v, std::size_t count, bool save, double step,
                      const SagLineSearch* search, const double* g, double* saved, double* w, cudaStream_t s);
/// *search = SagLineSearch(*f, *g2, B, L0) (one thread).
void launch_sag_search_start(SagLineSearch* search, const double* f, const double* g2, double B, double L0,
                             cudaStream_t s);
/// search->tried(*ft) unless it is done (one thread).
void launch_sag_search_tried(SagLineSearch* search, const double* ft, cudaStream_t s);
/// d += Δ_i (and w −= coef_i·Δ_i when coef is given) on the span's groups.
void launch_sag_commit(const WeightGroups& gl, const SagSpanView& v, std::size_t count, const double* new_node,
                       const double* old_node, const double* new_pair, const double* old_pair,
                       const double* new_edge, const double* old_edge, const double* coef, double* d, double* w,
                       cudaStream_t s, SagGate gate = {});
/// μ_stored ← μ_new: block per span row, then per span sentence (rows + n blocks).
void launch_sag_store(std::size_t L, std::size_t rows, std::size_t n, const std::uint32_t* row_tok,
                      const std::uint32_t* row_slot, const std::uint32_t* sid, const double* new_node,
                      const double* new_pair, const double* new_edge, double* old_node, double* old_pair,
                      double* old_edge, cudaStream_t s, SagGate gate = {});

/// P[k], S[k], R[k] from entry k − 1 and the step (a, b, τ): LazyStepHistory::push on the device
/// (one thread), so the history needs no copy per step.
void launch_sag_push(std::size_t k, double a, double b, double tau, double* P, double* S, double* R, cudaStream_t s);
/// index[gofs[q] + c] = the c-th weight index of group groups[q], q < count: a support's
/// indices from its groups (group_indices, host/backend/span_groups.cpp, on the device).
void launch_expand_groups(const WeightGroups& gl, const std::uint32_t* groups, const std::size_t* gofs,
                          std::size_t count, std::size_t* index, cudaStream_t s);
/// A queued step's search from q's L (done at once after a halted step), and its end: the
/// scalars and the history's step k, or the halt (incremental_schedule; one thread each).
void launch_sag_queue_search_start(SagLineSearch* search, const double* f, const double* g2, const SagQueueState* q,
                                   std::uint32_t at, cudaStream_t s);
void launch_sag_queue_step(SagQueueState* q, const SagLineSearch* search, std::uint32_t at, const SagStepParams& p,
                           std::size_t k, double* P, double* S, double* R, double* coef, cudaStream_t s);
/// SAG-NUS's sampler on the device (SagSamplerRef over device arrays, host/rules/sag_sampler.hpp;
/// one thread each): a span of one sentence drawn — *draw its sentence and probability, *L0 its
/// L_i after the visit (the line search's start) — and the end of its search: L_i scaled to the
/// *Lb found, *alpha the step size for lip_mult and λ.
void launch_sag_draw(const SagSamplerRef& sampler, SagDraw* draw, double* L0, cudaStream_t s);
void launch_sag_found(const SagSamplerRef& sampler, const SagDraw* draw, const double* L0, const double* Lb,
                      double lip_mult, double lambda, double* alpha, cudaStream_t s);
/// *dst = v (one thread): a scalar of the host's as a kernel argument, not a copy to wait for.
void launch_sag_set(double* dst, double v, cudaStream_t s);
/// The chunk plan of sentence `sid` alone (T tokens): sent = {sid}, order = {0}, slots = {0, T},
/// written by one thread instead of copied (run_chunk_front; a step of batch size 1).
void launch_one_sentence_chunk(std::uint32_t sid, std::size_t T, std::uint32_t* sent, std::uint32_t* order,
                               std::size_t* slots, cudaStream_t s);

}  // namespace crfx::cuda::detail
