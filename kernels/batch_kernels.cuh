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

/// g[gofs[q] + c] ← scale · the batch's gradient at weight c of S(batch)'s q-th group: the chain
/// launch_batch_gradient sums, from 0 — sag_gradient's on the batch's span plan, bit for bit.
void launch_sag_batch_gradient(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                               const std::uint32_t* groups, const std::size_t* gofs, std::size_t count,
                               const SagBatchMarginals& m, double scale, double* g, cudaStream_t s);
/// d += Δ_i and (coef given) w −= coef[i]·Δ_i over S(batch)'s `count` groups, sentence by
/// sentence in batch order: launch_sag_commit's arithmetic on the batch's span plan.
void launch_sag_batch_commit(const WeightGroups& gl, const BatchRows& r, std::size_t n, const BatchPlans& t,
                             const std::uint32_t* groups, std::size_t count, const SagBatchMarginals& m,
                             const double* coef, double* d, double* w, cudaStream_t s, SagGate gate);
/// μ_stored ← μ_new for the batch's sentences (launch_sag_store's copies; block per sentence).
void launch_sag_batch_store(std::size_t L, const BatchRows& r, std::size_t n, const std::size_t* sent_off,
                            const std::uint32_t* slots, const SagBatchMarginals& m, cudaStream_t s, SagGate gate);
/// *out = the sum of losses[0, n) left to right (the host's sum of a span's losses; one thread).
void launch_span_loss(const double* losses, std::size_t n, double* out, cudaStream_t s);

/// value[p] = scale · dense[index[p]], and dense[index[p]] = 0 (all zero again), p < n.
void launch_batch_gather(std::size_t n, const std::size_t* index, double scale, double* dense, double* value,
                         cudaStream_t s);

}  // namespace crfx::cuda::detail
