// crfx — CudaBackend (cuda_backend.cuh): the perceptron's step left on the device (issue 37).
// ap's step decoded, differenced and updated without a look from the host: the batch's chunk
// plan written by a kernel from launch parameters (or, one sentence, launch_one_sentence_chunk),
// Viterbi's path left in the workspace (labels_), the feature difference taken over the
// sentences' plans made once (select_sentence; perceptron_kernels.cu) — a batch's in one launch
// over S(batch) built on the device (batch_union), each weight's sum run over the batch's
// sentences in order in a dense scratch — and the updates of w and u gated on the device by the
// path's mistakes. Bitwise the path of viterbi → feature_difference → sparse_axpy, which copied
// the path back, the difference up and waited twice a step; a step's launches do not grow with
// the batch. At batch size 1 a run of steps is one launch of one block (perceptron_steps,
// launch_perceptron_run): the steps one after another on the device, bitwise the same.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "perceptron_kernels.cuh"
#include "run_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {

bool CudaBackend::decode_on_device(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u, CudaSparse& x) {
  if (span.count == 0 || span.count > kChunkIds || c.stream) return false;  // the primitives' path
  if (w.size() != dims_.num_weights() || (u && u->size() != w.size()))
    throw Error("internal: weight vector size mismatch");
  // The plans first: they refuse an unlabeled sentence before anything is queued.
  if (span.count == 1) {
    sentence_support(c, span[0], x);  // x ← S({sid}), sp_plan_ ← its plan made once
  } else {
    for (std::size_t i = 0; i < span.count; ++i) {
      if (span[i] >= c.S) throw Error("internal: sentence id beyond the corpus");
      if (!c.h_labeled[span[i]]) throw Error("sentence " + std::to_string(span[i]) + " has tokens without a label");
    }
    if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);
  }
  // One chunk (a repeated sentence or the workspace would cut it), written by a kernel unless the
  // split forward-backward's work list would need copies beside it.
  if (plan(c, span, 0) != span.count || (span.count > 1 && split_fb())) return false;
  const std::size_t n = span.count, rows = h_slots_[n];
  if (!plan_on_device_ && n > 1) {
    launch_chunk_from_ids(h_sent_.data(), h_order_.data(), n, c.sent_off.get(), sent_.get(), order_.get(),
                          slots_.get(), stream_);
    plan_on_device_ = true;
  }
  prepare(w);
  run_chunk_front(c, w, n, rows, false);
  ViterbiParams vp;
  static_cast<DecodeInputs&>(vp) = decode_inputs(arrays(c), w);
  vp.d = la_.get();
  vp.back = back_.get();
  vp.out = labels_.get();
  vp.score = nullptr;
  launch_viterbi(vp, n, threads_, stream_);
  if (mistakes_.size() == 0) mistakes_.resize(1);
  if (n == 1) {  // Δ over S({sid}) into x, the mistakes
    const DecodedRows d{sp_plan_.dev_row_tok, c.labels.get(), labels_.get(), rows};
    launch_feature_difference(device_groups(), sp_plan_.view(), sp_plan_.ng, d, 1.0, x.value.get(), mistakes_.get(),
                              stream_);
  }
  return true;
}

bool CudaBackend::perceptron_step(const BackendCorpus& bc, SentenceSpan span, Vector& w, Vector* u, double u_scale,
                                  SparseVector& delta) {
  const CudaCorpus& c = C(bc);
  CudaSparse& x = X(delta);
  if (!decode_on_device(c, span, w, u, x)) return false;
  if (span.count == 1) {
    launch_map(x.n, gated_axpy(x.index.get(), x.value.get(), P(w), 1.0, mistakes_.get()), stream_);
    if (u) launch_map(x.n, gated_axpy(x.index.get(), x.value.get(), P(*u), u_scale, mistakes_.get()), stream_);
    return true;
  }
  return perceptron_batch(c, span, w, u, u_scale);
}

PerceptronRun CudaBackend::run_params(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u) {
  if (w.size() != dims_.num_weights() || (u && u->size() != w.size()))
    throw Error("internal: weight vector size mismatch");
  if (rows_cap_ == 0) throw Error("CUDA backend: no device workspace (a device allocation failed earlier)");
  for (std::size_t i = 0; i < span.count; ++i) {  // what the steps' plans refuse, before anything is queued
    const std::uint32_t sid = span[i];
    if (sid >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (!c.h_labeled[sid]) throw Error("sentence " + std::to_string(sid) + " has tokens without a label");
    if (c.h_sent_off[sid + 1] - c.h_sent_off[sid] > rows_cap_)
      throw Error("internal: sentence longer than the CUDA workspace");
  }
  if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);
  PerceptronRun r{};
  r.gl = device_groups();
  r.state_off = c.state_off.get();
  r.state_ids = c.state_ids.get();
  r.state_vals = c.state_vals.get();
  r.edge_off = c.edge_off.get();
  r.edge_ids = c.edge_ids.get();
  r.edge_vals = c.edge_vals.get();
  r.edge = c.edge_off.get() ? edge_.get() : nullptr;
  r.t = batch_plans(c);
  r.path = labels_.get();
  r.w = P(w);
  r.u = u ? P(*u) : nullptr;
  r.S = S_.get();
  r.back = back_.get();
  return r;
}

bool CudaBackend::runs_refused(const CudaCorpus& c) const {
  return c.stream || !dims_.transitions || dims_.L > kRunMaxL;
}

bool CudaBackend::perceptron_steps(const BackendCorpus& bc, SentenceSpan span, Vector& w, Vector* u, double t0) {
  const CudaCorpus& c = C(bc);
  if (runs_refused(c)) return false;
  if (span.count == 0) return true;  // (the trainer's question)
  PerceptronRun r = run_params(c, span, w, u);
  for_each_run(span, t0, r, [&] { launch_perceptron_run(r, stream_); });
  return true;
}

double* CudaBackend::zeroed_dense(std::size_t n) {
  if (pc_dense_.size() != n) {
    pc_dense_.resize(n);
    CRFX_CUDA_CHECK(cudaMemsetAsync(pc_dense_.get(), 0, n * sizeof(double), stream_));
  }
  return pc_dense_.get();
}

double* CudaBackend::batch_difference(const CudaCorpus& c, SentenceSpan span, std::size_t num_weights) {
  // Δ into the dense scratch (all zero between steps) over S(batch), which batch_union has just
  // queued for this span; each weight's sum over the sentences in the host's order
  // (add_feature_difference's), the mistakes added up — two launches whatever the batch's size.
  const BatchUnion& un = batch_union_;
  bool same = un.corpus == c.serial && un.h_span.size() == span.count;
  for (std::size_t i = 0; same && i < span.count; ++i) same = un.h_span[i] == span[i];
  if (!same) throw Error("internal: a batch's difference without its S(batch)");
  double* dense = zeroed_dense(num_weights);
  launch_batch_difference(device_groups(), batch_rows(span), span.count, batch_plans(c), un.groups.get(),
                          un.h_groups.size(), dense, mistakes_.get(), stream_);
  return dense;
}

bool CudaBackend::perceptron_batch(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u, double u_scale) {
  // S(batch)'s groups built on the device (refused only where their offsets would pass 2³²: the
  // decode then wasted), Δ in the dense scratch; then each weight of S(batch) updated once with
  // its whole sum — what the first of its sentences did, sentence by sentence — and zeroed.
  if (!batch_union(c, span)) return false;
  double* dense = batch_difference(c, span, w.size());
  launch_apply_difference(device_groups(), batch_union_.groups.get(), batch_union_.h_groups.size(), dense, P(w),
                          u ? P(*u) : nullptr, u_scale, mistakes_.get(), stream_);
  return true;
}

}  // namespace crfx::cuda::detail
