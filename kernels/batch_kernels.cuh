// crfx — sgd-l1's and adf's batch gradient on the device (kernels/batch_kernels.cu; issue 37):
// S(batch), the sorted union of the batch's sentences' group lists, built from the plans made
// once (SentencePlans) with the sentence ids in the launch parameters, and the batch's gradient
// summed into a dense scratch in one launch over S(batch), each weight's sum in plan_span's order
// (sentence, token, item), then gathered over S(batch) — so that a step copies nothing up, waits
// for nothing, and launches as many kernels whatever the batch's size
// (CudaBackend::batch_support / batch_gradient, backend_sparse_batch.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "crfx/internal/corpus.hpp"  // WeightGroups
#include "device_buffer.cuh"
#include "perceptron_kernels.cuh"  // kChunkIds
#include "sag_kernels.cuh"         // SagSpanView

namespace crfx::cuda::detail {

/// A batch of at most kChunkIds sentences as the union kernels take it, by value (2 KiB): the
/// sentence ids and the offsets of their group lists in the concatenation of those lists.
struct BatchIds {
  std::uint32_t sid[kChunkIds];
  std::uint32_t off[kChunkIds + 1];
};

/// S(batch)'s scratch: the host's plan of it (its group count and compact size, without a
/// look at the device), and on the device its groups and offsets (as a SpanPlan's) and the union
/// kernels' per-entry flags and prefix counts; grow-only.
struct BatchUnion {
  std::vector<std::uint32_t> h_groups;       // the host's plan: S(batch)'s groups, ascending
  std::vector<std::uint32_t> h_span;         // the sentence ids h_groups was planned for
  std::uint64_t corpus = 0;                  // and their corpus's serial (0: none)
  std::size_t compact = 0, end = 0;          // S(batch)'s weights; one past its last weight
  bool on_device = false;                    // the groups below are h_span's (launch_batch_union)
  DeviceBuffer<std::uint32_t> groups, flag;  // [ng], [entries]
  DeviceBuffer<std::size_t> gofs, count, size;  // [ng + 1], [entries + sentences] (twice)
};

/// u.groups[0, ng) ← the sorted union of the n lists sentence_groups[gbase[sid[i]], gbase[sid[i]
/// + 1]) (each ascending), u.gofs ← its groups' offsets (u.gofs[ng] = compact): a group's rank is
/// the number of distinct smaller groups, each counted in the first list that holds it.
void launch_batch_union(const WeightGroups& gl, const BatchIds& ids, std::size_t n,
                        const std::uint32_t* sentence_groups, const std::size_t* gbase, std::size_t compact,
                        BatchUnion& u, cudaStream_t s);

/// dense[weight] (all zero) ← the batch's gradient over the `count` groups of S(batch) (ascending,
/// on the device), unscaled: per weight, each sentence's sum over its plan made once (sag_gradient's
/// sums; its rows in the chunk at r.slot[i]: node + slot·L, edge + slot·L², pair + i·L²) in batch
/// order, each going on from the last — the chain of additions that one launch a sentence made,
/// so the same bits, in one launch.
void launch_batch_gradient(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                           const std::uint32_t* groups, std::size_t count, const double* node, const double* pair,
                           const double* edge, double* dense, cudaStream_t s);

/// A count the device decides (kNoCount where a launcher's caller has none to give).
inline constexpr std::size_t kNoCount = ~std::size_t(0);

/// SAG's batch step on the device (CudaBackend::sag_enqueue_batch, issue 37): its sentences (ids,
/// with their group lists' offsets in the plans made once) and each one's first row in the chunk,
/// S(batch)'s group count and compact size, and for a batch the device drew (SAG-NUS) each
/// member's draw probability and the span's mean L_i (the search's start). Written by a kernel
/// from the host's ids (launch_sag_batch_set) or by the draw (launch_sag_draw_batch); the batch
/// kernels read it where they run (~5 KiB).
struct SagBatch {
  BatchIds ids;
  std::uint32_t slot[kChunkIds];
  double prob[kChunkIds];
  double L0;
  std::uint32_t n;
  std::size_t ng, compact;
};

/// SAG's batch step (issue 37; CudaBackend::sag_enqueue_batch): the batch's pending marginals
/// (deltas) as the chunk left them — node and edge rows at each sentence's chunk slot, pairwise
/// rows at its batch index (null where the model has none) — and the stored ones they replace.
struct SagBatchMarginals {
  const double* new_node;
  const double* new_pair;
  const double* new_edge;
  double* old_node;
  double* old_pair;
  double* old_edge;
};

/// g[gofs[q] + c] ← scale · the batch's gradient at weight c of S(batch)'s q-th group (b's
/// sentences and group count; at most most_groups): the chain launch_batch_gradient sums, from 0 —
/// sag_gradient's on the batch's span plan, bit for bit.
void launch_sag_batch_gradient(const WeightGroups& gl, const SagBatch* b, std::size_t most_groups, const BatchPlans& t,
                               const std::uint32_t* groups, const std::size_t* gofs, const SagBatchMarginals& m,
                               double scale, double* g, cudaStream_t s);
/// d += Δ_i and (coef given) w −= coef[i]·Δ_i over S(batch)'s groups, sentence by sentence in
/// batch order: launch_sag_commit's arithmetic on the batch's span plan.
void launch_sag_batch_commit(const WeightGroups& gl, const SagBatch* b, std::size_t most_groups, const BatchPlans& t,
                             const std::uint32_t* groups, const SagBatchMarginals& m, const double* coef, double* d,
                             double* w, cudaStream_t s, SagGate gate);
/// μ_stored ← μ_new for the batch's n sentences (launch_sag_store's copies; block per sentence).
void launch_sag_batch_store(std::size_t L, const SagBatch* b, std::size_t n, const std::size_t* sent_off,
                            const std::uint32_t* slots, const SagBatchMarginals& m, cudaStream_t s, SagGate gate);
/// *b ← the host's batch (its ids, chunk slots and S(batch)'s sizes), by one thread.
void launch_sag_batch_set(SagBatch* b, const BatchIds& ids, const BatchRows& rows, std::size_t n, std::size_t ng,
                          std::size_t compact, cudaStream_t s);
/// SAG-NUS's batch of B drawn on the device into *b (SagSamplerRef::draw_span), the chunk plan
/// (sent, order, slots) and the rows' tokens and edge flags up to `rows` (a bound: rows past the
/// batch's on token 0); a draw after a halted step draws nothing.
void launch_sag_draw_batch(const SagSamplerRef& r, SagBatch* b, std::size_t B, const std::size_t* gbase,
                           const std::size_t* sent_off, const std::size_t* edge_off, std::size_t rows,
                           std::uint32_t* sent, std::uint32_t* order, std::size_t* slots, std::size_t* row_token,
                           std::uint8_t* row_edge, cudaStream_t s, SagGate gate);
/// S(batch) of the batch the device drew (b's ids): as launch_batch_union, its group count and
/// compact size decided on the device into b (entries, ng: bounds of the concatenated lists' and
/// of S(batch)'s length for the scratch).
void launch_batch_union(const WeightGroups& gl, SagBatch* b, std::size_t n, std::size_t entries, std::size_t ng,
                        const std::uint32_t* sentence_groups, const std::size_t* gbase, BatchUnion& u,
                        cudaStream_t s);
/// A queued drawn batch's end (one thread): its L_i scaled to the L its search found, α the
/// sampler's, the history's step k and SAGA's coef[i] per member, or the queue's halt at `at`.
void launch_sag_drawn_batch_end(SagQueueState* q, const SagLineSearch* search, std::uint32_t at,
                                const SagSamplerRef& r, const SagBatch* b, const SagStepParams& p, std::size_t k,
                                double* P, double* S, double* R, double* coef, cudaStream_t s);
/// *out = the sum of losses[0, n) left to right (the host's sum of a span's losses; one thread).
void launch_span_loss(const double* losses, std::size_t n, double* out, cudaStream_t s);

/// value[p] = scale · dense[index[p]], and dense[index[p]] = 0 (all zero again), p < n.
void launch_batch_gather(std::size_t n, const std::size_t* index, double scale, double* dense, double* value,
                         cudaStream_t s);

}  // namespace crfx::cuda::detail
