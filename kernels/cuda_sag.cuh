// crfx — the CUDA backend's SAG / SAGA state and span plans (seed 004; issue 37): what
// backend_sag.cu, backend_sag_queue.cu, backend_plans.cu and backend_sparse.cu keep on the device
// between steps. Split from cuda_backend.cuh (which includes it) to keep that header readable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "batch_kernels.cuh"
#include "device_buffer.cuh"
#include "sag_kernels.cuh"

namespace crfx::cuda::detail {

struct CudaCorpus;  // cuda_backend.cuh

// ---- SAG / SAGA (seed 004) and span plans --------------------------------------------------

/// A span planned on the host for the span-local kernels (SAG and evaluate_sparse): its touched
/// weight groups in ascending id order (so their weights ascend: the layout of S(span)), the
/// offset of each group in the compact per-span arrays, and per group its occurrences in
/// (sentence, token, item) order — span row of the token, stored row (token id for state groups,
/// edge slot for edge groups; SAG only), value, span index of the sentence — plus per span row
/// its token and edge slot. Host vectors are reused; device copies are grow-only. What the
/// kernels read is `dev` (and ng, compact(), rows, sid): the plan's own copies after plan_span,
/// or a sentence's entry in the plans made once (SentencePlans, select_sentence), whose host vectors
/// other than sid are then not filled.
struct SpanPlan {
  std::vector<std::uint32_t> sid, row_tok, row_slot, groups, oofs, onew, oold, osent, local;
  SpanGroups support;  // plans `groups`
  std::vector<std::size_t> gofs;
  std::vector<double> oval;
  std::vector<std::uint32_t> scratch_ids;     // planning scratch, reused (no per-step allocation)
  std::vector<std::size_t> scratch_count;
  std::size_t rows = 0;
  bool valid = false;  // host and device plan complete (cleared first by plan_span)
  DeviceBuffer<std::uint32_t> d_sid, d_row_tok, d_row_slot, d_groups, d_oofs, d_onew, d_oold, d_osent;
  DeviceBuffer<std::size_t> d_gofs;
  DeviceBuffer<double> d_oval;
  // The device side the kernels read, and its sizes.
  SagSpanView dev{};
  const std::uint32_t* dev_row_tok = nullptr;   // [rows]
  const std::uint32_t* dev_row_slot = nullptr;  // [rows]
  std::size_t ng = 0, compact_size = 0;         // groups; Σ of their sizes
  std::size_t compact() const { return compact_size; }
  const SagSpanView& view() const { return dev; }
  /// Points the device side at this plan's own copies (plan_span, after its upload).
  void use_own_copies() {
    dev = {d_groups.get(), d_gofs.get(), d_oofs.get(), d_onew.get(), d_oold.get(), d_osent.get(),
           d_oval.get(), d_sid.get(), std::uint32_t(sid.size())};
    dev_row_tok = d_row_tok.get();
    dev_row_slot = d_row_slot.get();
    ng = groups.size();
    compact_size = gofs.empty() ? 0 : gofs.back();
  }
};

/// The span plans made once per corpus (plan_sentences: by incremental_create, or by the first
/// one-sentence evaluate_sparse / support): every sentence's plan for a span of itself alone —
/// exactly what plan_span makes for it, with SAG's edge slots — concatenated on the device, so
/// that a step on one sentence (batch size 1, the default) plans and copies nothing: its plan is
/// pointers into these tables (select_sentence). Sentence s's groups are [gbase[s], gbase[s + 1]);
/// its gofs and oofs, ng + 1 entries each, start at gbase[s] + s; its occurrences at obase[s]
/// (stored rows absolute, span rows and offsets sentence-local, as a one-sentence plan's).
struct SentencePlans {
  std::vector<std::size_t> gbase, obase;  // [S + 1]
  std::vector<std::size_t> compact;       // [S] Σ of the sentence's group sizes
  std::vector<std::size_t> iend;          // [S] its support's last weight index + 1 (0: empty)
  DeviceBuffer<std::uint32_t> groups, oofs, onew, oold;
  DeviceBuffer<std::size_t> gofs;
  DeviceBuffer<double> oval;
  DeviceBuffer<std::uint32_t> osent;      // [longest sentence's occurrences] zeros
  DeviceBuffer<std::uint32_t> ids;        // [S] s at s (a span of sentence s is ids + s)
  DeviceBuffer<std::uint32_t> tokens;     // [N] t at t (sentence s's rows' tokens)
  DeviceBuffer<std::uint32_t> slots;      // [N] the edge slot of token t, or kNone
  // On the device too, for a span whose sentence the device draws (SagPick): gbase, obase and
  // compact; and the largest sentence's group count and compact size (its kernels' launch sizes).
  DeviceBuffer<std::size_t> d_gbase, d_obase, d_compact;
  std::size_t most_groups = 0, most_compact = 0;
  // [k + 1], k ≤ kChunkIds: the sum of the k largest sentences' tokens, group counts, compact sizes
  // (bounds of a batch of k the device draws, SAG-NUS's).
  std::vector<std::size_t> top_rows, top_groups, top_compact;
};

/// SAG-NUS's sampler on the device (issue 37): a copy of the host's (SagSampler,
/// host/optim/sag.cpp) that one-thread kernels draw with (launch_sag_draw, launch_sag_found).
struct SagDeviceSampler {
  DeviceBuffer<SagSamplerScalars> sc;  // [1]
  DeviceBuffer<double> sum, max;       // [2·leaves] the tree of L_i
  DeviceBuffer<char> seen;             // [n]
  SagSamplerRef ref() { return {sc.get(), sum.get(), max.get(), seen.get()}; }
  /// The host's state (its arrays) onto the device, sized to it — unless it is what the device
  /// holds already (as last copied either way); and back into arrays of the same sizes (the
  /// caller waits for the stream, then calls downloaded()).
  void upload(const SagSamplerRef& host, cudaStream_t s);
  void download(const SagSamplerRef& host, cudaStream_t s);
  void downloaded(const SagSamplerRef& host) { keep(host); }

 private:
  // What the device holds, as last copied (the host's bytes): a queue starts without a copy
  // where the host's sampler is unchanged since its last wait.
  std::vector<unsigned char> h_sc;
  std::vector<double> h_sum, h_max;
  std::vector<char> h_seen;
  bool held(const SagSamplerRef& host) const;
  void keep(const SagSamplerRef& host);
};

/// A SAG batch step's sentences, chunk rows, S(batch)'s groups and compact size — bounds where the
/// device drew the batch (CudaBackend::sag_batch_begin).
struct SagBatchSizes {
  std::size_t n, rows, ng, compact;
};

/// SAG / SAGA state on the device. Stored marginals are kept as deltas μ − gold (all zero at the
/// start, which is the contract's "gold indicators"), so Δ_i = X_iᵀ(δ_new − δ_stored).
struct CudaSag final : IncrementalState, LazyStepHistory {
  const void* owner = nullptr;
  const CudaCorpus* corpus = nullptr;
  std::size_t groups = 0;                   // A + 1 + E
  DeviceBuffer<double> node, pair, edge;    // [N][L], [S][L][L], [edge slots][L][L]
  std::vector<std::uint32_t> edge_slot;     // [N] host: slot of a position with edge items, or kNone
  // Lazy bookkeeping: LazyStepHistory's P, S, R are appended on the host and mirrored here before every
  // catch-up (the first `uploaded` entries are on the device).
  std::size_t uploaded = 0;
  DeviceBuffer<double> dP, dS, dR;          // [capacity ≥ k + 1], doubled when full
  DeviceBuffer<std::uint32_t> stamp;        // [groups]
  SpanPlan plan;                            // the current span
  DeviceBuffer<double> coef;                // SAGA's per-sentence coefficients
  // incremental_search on the device (a one-sentence span): the line search's state, and ‖g‖²
  // (reduce()'s partials, then the sum at red[kRedBlocks]).
  DeviceBuffer<SagLineSearch> search;       // [1]
  /// The device's flag that the search is done (FbParams::skip: a queued round's pass after it
  /// does nothing).
  const bool* search_done() const {
    return reinterpret_cast<const bool*>(reinterpret_cast<const char*>(search.get()) + offsetof(SagLineSearch, done));
  }
  DeviceBuffer<double> red;                 // [kRedBlocks + 1]
  // Pending marginals of the span (deltas), its gradient g and the trial's saved weights.
  DeviceBuffer<double> new_node, new_pair, new_edge, g, saved;
  bool synced = false;  // incremental_sync succeeded for the current span
  bool evaluated = false, tried = false;
  // incremental_schedule's queue: its state (device, host copy), the steps queued since the last
  // wait (sentence, parameters), the history's step count before them, the vectors they update.
  DeviceBuffer<SagQueueState> queue;  SagQueueState hq{};  // [1], and its host copy
  std::vector<std::pair<std::uint32_t, SagStepParams>> queued;  // (sentence, its step's parameters)
  std::size_t queue_k0 = 0, queue_cap = 64;
  std::size_t run_from = 0;  // the first queued step not yet launched (sag runs: launched in runs)
  Vector *qw = nullptr, *qd = nullptr;
  // Drawn steps (incremental_schedule_drawn, SAG-NUS): the sampler's copy on the device, the
  // host's state it came from (written back at the wait), each queued step's draw and its L_i.
  SagDeviceSampler sampler;
  SagSamplerRef host_sampler{};
  DeviceBuffer<SagDraw> draws;  // [kMaxQueue]
  DeviceBuffer<double> draw_L0;  // [1]
  // Batch steps (a span of 2 … kChunkIds sentences; sag_enqueue_batch): under uniform sampling
  // queued step i's sentences at batch_ids[batch_at[i], batch_at[i + 1]) (a queue of batch steps
  // only); SAG-NUS's drawn on the device into `batch`.
  std::vector<std::uint32_t> batch_ids;
  std::vector<std::size_t> batch_at{0};
  DeviceBuffer<SagBatch> batch;  // [1] the batch step's sentences as its kernels read them (drawn there: SAG-NUS)
  SentenceSpan batch_span(std::size_t i) const {
    return {batch_ids.data() + batch_at[i], batch_at[i + 1] - batch_at[i]};
  }
};

}  // namespace crfx::cuda::detail
