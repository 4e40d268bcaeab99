// crfx — CudaBackend (cuda_backend.cuh): sgd-l1's and adf's batch step without a look from the
// host (issue 37). For a batch of 2 … kChunkIds labeled sentences of a resident corpus that one
// chunk holds, support and evaluate_sparse_gradient copy nothing up and wait for nothing:
// S(batch) is built on the device from the sentences' plans made once (batch_kernels.cu; the
// host plans it too, for its sizes only), the chunk plan is written from launch parameters (as
// ap's), the forward-backward's deltas are read in the workspace, the gradient is summed into a
// dense scratch in one launch over S(batch), each weight's sum run sentence by sentence in
// plan_span's order — bitwise the span plan's sums (sparse_pass, backend_sparse.cu) — and
// gathered over S(batch); the loss, unread, stays in losses_. A step's launches do not grow with
// the batch. Anything else takes sparse_pass's planned and copied span.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "batch_kernels.cuh"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "perceptron_kernels.cuh"

namespace crfx::cuda::detail {

namespace {

/// u's host plan of S(span) — its groups, compact size and end — made once per span: support()
/// and the evaluate_sparse_gradient after it ask for the same span's.
void plan_union(SpanGroups& planner, const CudaCorpus& c, SentenceSpan span, const WeightGroups& wg, bool transitions,
                BatchUnion& u) {
  bool same = u.corpus == c.serial && u.h_span.size() == span.count;
  for (std::size_t i = 0; same && i < span.count; ++i) same = u.h_span[i] == span[i];
  if (same) return;
  planner.plan(c.host, span, wg, transitions, u.h_groups);
  u.on_device = false;
  u.compact = u.end = 0;
  for (const std::uint32_t g : u.h_groups) {
    u.compact += wg.size(g);
    if (wg.size(g)) u.end = wg.begin(g) + wg.size(g);
  }
  u.corpus = c.serial;
  u.h_span.resize(span.count);
  for (std::size_t i = 0; i < span.count; ++i) u.h_span[i] = span[i];
}

}  // namespace

bool CudaBackend::batch_union(const CudaCorpus& c, SentenceSpan span, BatchIds* ids_out) {
  if (span.count < 2 || span.count > kChunkIds || c.stream) return false;
  for (std::size_t i = 0; i < span.count; ++i) {
    if (span[i] >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (!c.h_labeled[span[i]]) return false;  // the host's support (an unlabeled one has no plan)
  }
  if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);
  const SentencePlans& sp = sentence_plans_;
  BatchIds ids;
  ids.off[0] = 0;
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::size_t ng = sp.gbase[span[i] + 1] - sp.gbase[span[i]];
    if (ids.off[i] + ng >= 0xffffffffu) return false;
    ids.sid[i] = span[i];
    ids.off[i + 1] = std::uint32_t(ids.off[i] + ng);
  }
  // The host's own plan of S(batch): its sizes, known without a wait; the device builds its own.
  plan_union(support_groups_, c, span, dims_.groups(), dims_.transitions, batch_union_);
  launch_batch_union(device_groups(), ids, span.count, sp.groups.get(), sp.d_gbase.get(), batch_union_.compact,
                     batch_union_, stream_);
  batch_union_.on_device = true;
  if (ids_out) *ids_out = ids;  // (SAG's batch step keeps them on the device: launch_sag_batch_set)
  return true;
}

BatchRows CudaBackend::batch_rows(SentenceSpan span) const {
  BatchRows r;
  for (std::size_t i = 0; i < span.count; ++i) {
    if (h_slots_[i] > 0xffffffffu) throw Error("internal: a chunk of more than 2^32 rows");
    r.sid[i] = span[i];
    r.slot[i] = std::uint32_t(h_slots_[i]);
  }
  return r;
}

BatchPlans CudaBackend::batch_plans(const CudaCorpus& c) const {
  const SentencePlans& sp = sentence_plans_;
  return {sp.groups.get(), sp.d_gbase.get(), sp.oofs.get(),  sp.d_obase.get(), sp.onew.get(),
          sp.oval.get(),   sp.tokens.get(),  c.sent_off.get(), c.labels.get(),   labels_.get(),
          sp.oold.get(),   sp.osent.get(),   sp.slots.get()};
}

bool CudaBackend::batch_support(const CudaCorpus& c, SentenceSpan span, CudaSparse& x) {
  if (!batch_union(c, span)) return false;
  const BatchUnion& u = batch_union_;
  const std::size_t compact = u.compact;
  x.reserve(compact);
  x.n = compact;
  x.end = u.end;
  if (compact == 0) return true;
  launch_expand_groups(device_groups(), u.groups.get(), u.gofs.get(), u.h_groups.size(), x.index.get(), stream_);
  CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, compact * sizeof(double), stream_));
  return true;
}

bool CudaBackend::batch_gradient(const CudaCorpus& c, const Vector& w, SentenceSpan span, CudaSparse& x, double scale,
                                 bool support_given, SequenceLoss loss_kind) {
  if (span.count < 2 || span.count > kChunkIds || c.stream || pointwise_loss(loss_kind)) return false;
  if (w.size() != dims_.num_weights()) throw Error("internal: weight vector size mismatch");
  for (std::size_t i = 0; i < span.count; ++i) {
    if (span[i] >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (!c.h_labeled[span[i]]) throw Error("sentence " + std::to_string(span[i]) + " has tokens without a label");
  }
  require_resident(c, "a stochastic trainer's span");
  // One chunk (a repeated sentence or the workspace would cut it), its plan written by a kernel
  // unless the split forward-backward's work list would need copies beside it.
  if (plan(c, span, 0) != span.count || split_fb()) return false;
  if (support_given) {  // x's indices are S(span) from support(): its length must be the union's
    plan_union(support_groups_, c, span, dims_.groups(), dims_.transitions, batch_union_);
    if (x.n != batch_union_.compact)
      throw Error("internal: evaluate_sparse given a support of " + std::to_string(x.n) +
                  " entries for a span whose support has " + std::to_string(batch_union_.compact));
    // The sum runs over S(batch)'s groups on the device: support() built them (batch_support)
    // unless it took the host's path.
    if (!batch_union_.on_device && !batch_union(c, span)) return false;
  } else if (!batch_support(c, span, x)) {
    return false;
  }
  const std::size_t n = span.count, rows = h_slots_[n];
  if (!plan_on_device_) {
    launch_chunk_from_ids(h_sent_.data(), h_order_.data(), n, c.sent_off.get(), sent_.get(), order_.get(),
                          slots_.get(), stream_);
    plan_on_device_ = true;
  }
  const bool edges = c.edge_off.get() != nullptr, pairs = dims_.transitions || edges;
  prepare(w);
  run_chunk_front(c, w, n, rows, false);
  FbParams fp = fb_params(c, w);
  fp.gold = true;
  fp.backward = true;
  fp.node = node_.get();
  fp.pair = pairs ? pair_.get() : nullptr;
  launch_fb(fp, n);
  if (loss_kind == SequenceLoss::seq_exp) launch_seq_exp(fp, n, stream_);
  // The gradient over S(batch) in one launch, each weight's sum run sentence by sentence over
  // their plans made once into the dense scratch (all zero between steps), then scaled and
  // gathered over S(batch), the scratch zeroed again.
  if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);  // (made for another corpus since)
  double* dense = zeroed_dense(w.size());
  launch_batch_gradient(device_groups(), batch_rows(span), n, batch_plans(c), batch_union_.groups.get(),
                        batch_union_.h_groups.size(), node_.get(), pairs ? pair_.get() : nullptr,
                        edges ? edge_.get() : nullptr, dense, stream_);
  launch_batch_gather(x.n, x.index.get(), scale, dense, x.value.get(), stream_);
  return true;
}

}  // namespace crfx::cuda::detail
