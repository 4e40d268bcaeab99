// crfx — CudaBackend (cuda_backend.cuh): SAG / SAGA (seed 004) with their state on the device,
// and the span plans they share with evaluate_sparse — planning a span on the host, its
// forward-backward through the chunk workspace (span_marginals) and its compact gradient
// (span_gradient) are in backend_plans.cu; the kernels in sag_kernels.cu. A step on one
// sentence (batch size 1, the default) points its plan into the plans made once at
// incremental_create (select_sentence) instead of planning on the host and copying, which a GPU
// paid for with a copy and a wait per step; and it decides its line search on the device
// (incremental_search), so the host waits once per step, not per loss (issue 37).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "chain_kernels.cuh"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "sag_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

constexpr std::size_t kLazyStepHistory = std::size_t(1) << 16;  // initial lazy-step capacity (grows)

}  // namespace

// ---- SAG / SAGA --------------------------------------------------------------------------

IncrementalStatePtr CudaBackend::incremental_create(const BackendCorpus& bc) {
  const CudaCorpus& c = C(bc);
  require_resident(c, "SAG / SAGA (stored marginals, per-sentence steps)");
  const Corpus& h = c.host;
  if (!h.labeled()) throw Error("SAG needs every training token labeled");
  auto st = std::make_unique<CudaSag>();
  CudaSag& s = *st;
  s.owner = this;
  s.corpus = &c;
  s.groups = dims_.groups().count();
  const std::size_t L = dims_.L, LL = L * L, N = c.N;
  std::size_t slots = 0;
  s.edge_slot = edge_slots(c, &slots);
  const std::size_t T = std::max<std::size_t>(1, c.max_len);
  const std::size_t pending = T * L + LL + (slots ? T * LL : 0);  // a span of the longest sentence
  const std::size_t bytes = (N * L + c.S * LL + slots * LL + pending + 3 * (kLazyStepHistory + 1)) * sizeof(double) +
                            s.groups * sizeof(std::uint32_t);
  plan_sentences(c, bytes);  // checks the free memory for both
  s.node.resize(N * L);
  s.pair.resize(c.S * LL);
  s.edge.resize(slots * LL);
  s.dP.resize(kLazyStepHistory + 1);
  s.dS.resize(kLazyStepHistory + 1);
  s.dR.resize(kLazyStepHistory + 1);
  s.stamp.resize(s.groups);
  if (N) CRFX_CUDA_CHECK(cudaMemsetAsync(s.node.get(), 0, N * L * sizeof(double), stream_));
  if (c.S) CRFX_CUDA_CHECK(cudaMemsetAsync(s.pair.get(), 0, c.S * LL * sizeof(double), stream_));
  if (slots) CRFX_CUDA_CHECK(cudaMemsetAsync(s.edge.get(), 0, slots * LL * sizeof(double), stream_));
  CRFX_CUDA_CHECK(cudaMemsetAsync(s.stamp.get(), 0, s.groups * sizeof(std::uint32_t), stream_));
  s.P.reserve(kLazyStepHistory + 1);
  s.S.reserve(kLazyStepHistory + 1);
  s.R.reserve(kLazyStepHistory + 1);
  // Step 0 of the history (P_0 = 1, S_0 = R_0 = 0) never changes: on the device from here on;
  // later steps are appended there by incremental_step's kernel, not copied.
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dP.get(), s.P.data(), sizeof(double), cudaMemcpyHostToDevice, stream_));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dS.get(), s.S.data(), sizeof(double), cudaMemcpyHostToDevice, stream_));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dR.get(), s.R.data(), sizeof(double), cudaMemcpyHostToDevice, stream_));
  s.uploaded = 1;
  // Pending marginals for a span of the longest sentence: batch-1 SAG never regrows them
  // (mini-batches grow them a few times, as the small plan, g and saved buffers grow during the
  // first steps; all are grow-only).
  s.new_node.resize(T * L);
  s.new_pair.resize(LL);
  if (slots) s.new_edge.resize(T * LL);
  sync();
  return st;
}

void CudaBackend::incremental_sync(IncrementalState& state, SentenceSpan span, Vector& w, const Vector& d) {
  CudaSag& s = G(state);
  sag_finish(s);  // the queued steps first (incremental_schedule)
  if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
    throw Error("internal: SAG vectors have the wrong size");
  s.evaluated = false;  // before planning: a refused span leaves nothing to commit or restore
  s.tried = false;
  s.synced = false;
  if (span.count == 1)  // batch size 1: the plan made once, nothing planned or copied
    select_sentence(*s.corpus, span[0], s.plan);
  else
    plan_span(*s.corpus, span, s.edge_slot.empty() ? nullptr : &s.edge_slot, true, s.plan);
  sag_catch_up(s, s.plan.ng, s.plan.view().groups, w, d);
  s.synced = true;
}

double CudaBackend::incremental_evaluate(IncrementalState& state, const Vector& w, double* grad_norm2) {
  CudaSag& s = G(state);
  if (!s.synced || !s.plan.valid) throw Error("internal: incremental_evaluate without a successful incremental_sync");
  SpanPlan& pl = s.plan;
  const double loss = span_marginals(*s.corpus, w, pl, s.new_node, s.new_pair, s.new_edge);
  reserve_device(s.g, pl.compact());
  span_gradient(*s.corpus, pl, s.new_node, s.new_pair, s.new_edge, 1.0, s.g.get());
  const double g2 = reduce(pl.compact(), DotTerm{s.g.get(), s.g.get()}, SumOp{}, 0.0, red_.get(), stream_);
  if (grad_norm2) *grad_norm2 = g2;
  s.evaluated = true;
  return loss;
}

LipschitzFound CudaBackend::incremental_search(IncrementalState& state, Vector& w, double L0) {
  CudaSag& s = G(state);
  if (!s.synced || !s.plan.valid) throw Error("internal: incremental_search without a successful incremental_sync");
  SpanPlan& pl = s.plan;
  const CudaCorpus& c = *s.corpus;
  const SentenceSpan span{pl.sid.data(), pl.sid.size()};
  if (span.count != 1) return lipschitz_search_on_host(*this, *this, state, c, span, w, L0);
  // One sentence (batch size 1): the loss, ‖g‖² and every trial's loss stay on the device, where
  // one-thread kernels run SagLineSearch on them; the host reads back the result only.
  const double* g2 = sag_evaluate_on_device(s, w);
  launch_sag_search_start(s.search.get(), losses_.get(), g2, 1.0, L0, stream_);
  const std::size_t ng = pl.ng;
  // Rounds of trial, forward-only loss, restore and the rule, each a no-op once the search is
  // done: one round and a look (most steps accept their first trial), then four a look, so a
  // step waits for the device once, rarely more, and a done search wastes at most a few
  // forward-only passes of one sentence.
  SagLineSearch h{};
  for (int rounds = 1;; rounds = 4) {
    for (int r = 0; r < rounds; ++r) {
      if (ng)
        launch_sag_trial(device_groups(), pl.view(), ng, true, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w),
                         stream_);
      sentence_loss_on_device(c, w, span, s.search_done());
      if (ng)
        launch_sag_trial(device_groups(), pl.view(), ng, false, 0.0, s.search.get(), s.g.get(), s.saved.get(),
                         P(w), stream_);
      launch_sag_search_tried(s.search.get(), losses_.get(), stream_);
    }
    CRFX_CUDA_CHECK(cudaMemcpyAsync(&h, s.search.get(), sizeof h, cudaMemcpyDeviceToHost, stream_));
    sync();
    if (h.done) break;
  }
  s.tried = h.trials > 0;
  return {h.L, h.trials};
}

const double* CudaBackend::sag_evaluate_on_device(CudaSag& s, const Vector& w) {
  SpanPlan& pl = s.plan;
  span_marginals(*s.corpus, w, pl, s.new_node, s.new_pair, s.new_edge, SequenceLoss::seq_log, false);
  reserve_device(s.g, pl.compact());
  span_gradient(*s.corpus, pl, s.new_node, s.new_pair, s.new_edge, 1.0, s.g.get());
  s.evaluated = true;
  if (s.red.size() < std::size_t(kRedBlocks) + 1) s.red.resize(std::size_t(kRedBlocks) + 1);
  if (s.search.size() < 1) s.search.resize(1);
  reserve_device(s.saved, pl.compact());
  return sag_g2_on_device(s, pl.compact());
}

namespace {
/// ‖g‖² of a span whose compact size the device holds (a drawn batch): DotTerm's terms, a zero
/// past *n, so that reduce's passes launched for the bound sum the same terms in the same places.
struct BoundedDotTerm {
  const double* g;
  const std::size_t* n;
  __device__ double operator()(std::size_t i) const {
    const double x = i < *n ? g[i] : 0.0;
    return x * x;
  }
};
}  // namespace

const double* CudaBackend::sag_g2_on_device(CudaSag& s, std::size_t compact, const std::size_t* compact_at) {
  double* g2 = s.red.get() + kRedBlocks;
  const unsigned blocks = grid_for(compact, kRedThreads, kRedBlocks);
  if (compact == 0) {
    launch_sag_set(g2, 0.0, stream_);
  } else if (compact_at) {
    const BoundedDotTerm f{s.g.get(), compact_at};
    CRFX_LAUNCH((reduce_pass1<BoundedDotTerm, SumOp>), blocks, kRedThreads, 0, stream_, compact, f, SumOp{}, 0.0,
                s.red.get());
    CRFX_LAUNCH(reduce_pass2<SumOp>, 1, kRedThreads, 0, stream_, blocks, s.red.get(), SumOp{}, 0.0, g2);
  } else {  // reduce()'s two passes (vector_ops.cuh), the same sum, left on the device
    const DotTerm f{s.g.get(), s.g.get()};
    CRFX_LAUNCH((reduce_pass1<DotTerm, SumOp>), blocks, kRedThreads, 0, stream_, compact, f, SumOp{}, 0.0,
                s.red.get());
    CRFX_LAUNCH(reduce_pass2<SumOp>, 1, kRedThreads, 0, stream_, blocks, s.red.get(), SumOp{}, 0.0, g2);
  }
  return g2;
}

void CudaBackend::sentence_loss_on_device(const CudaCorpus& c, const Vector& w, SentenceSpan span,
                                          const bool* skip) {
  // evaluate(c, w, span, nullptr, 1.0)'s chunk, without its copy of the loss to the host; a line
  // search's trial passes nothing where *skip (the search done).
  require_resident(c, "a one-sentence loss on the device");
  prepare(w);
  const std::size_t end = plan(c, span, 0);
  if (end != 1) throw Error("internal: a one-sentence span did not fit one chunk");
  run_chunk_front(c, w, 1, h_slots_[1], false, skip);
  FbParams fp = fb_params(c, w);
  fp.gold = true;
  fp.backward = false;
  fp.skip = skip;
  launch_fb(fp, 1);
}

void CudaBackend::incremental_trial(IncrementalState& state, Vector& w, double step) {
  CudaSag& s = G(state);
  if (!s.evaluated) throw Error("internal: incremental_trial before incremental_evaluate");
  reserve_device(s.saved, s.plan.compact());
  const std::size_t ng = s.plan.ng;
  if (ng) {
    launch_sag_trial(device_groups(), s.plan.view(), ng, true, step, nullptr, s.g.get(), s.saved.get(), P(w),
                     stream_);
  }
  s.tried = true;
}

void CudaBackend::incremental_restore(IncrementalState& state, Vector& w) {
  CudaSag& s = G(state);
  if (!s.tried) throw Error("internal: incremental_restore without incremental_trial");
  const std::size_t ng = s.plan.ng;
  if (ng) {
    launch_sag_trial(device_groups(), s.plan.view(), ng, false, 0.0, nullptr, s.g.get(), s.saved.get(), P(w),
                     stream_);
  }
}

void CudaBackend::incremental_commit(IncrementalState& state, Vector& d, Vector& w, const double* w_coef) {
  CudaSag& s = G(state);
  if (!s.evaluated) throw Error("internal: incremental_commit before incremental_evaluate");
  const SpanPlan& pl = s.plan;
  const std::size_t n = pl.sid.size(), ng = pl.ng;
  const bool edges = !s.edge_slot.empty();
  bool copied = false;  // w_coef is being copied from the caller's host array
  if (w_coef && n) {
    reserve_device(s.coef, n);
    if (n == 1) {  // a kernel argument: no copy, no wait
      launch_sag_set(s.coef.get(), w_coef[0], stream_);
    } else {
      CRFX_CUDA_CHECK(cudaMemcpyAsync(s.coef.get(), w_coef, n * sizeof(double), cudaMemcpyHostToDevice, stream_));
      copied = true;
    }
  }
  if (ng) {
    launch_sag_commit(device_groups(), pl.view(), ng, s.new_node.get(), s.node.get(), s.new_pair.get(), s.pair.get(),
                      edges ? s.new_edge.get() : nullptr, edges ? s.edge.get() : nullptr,
                      w_coef ? s.coef.get() : nullptr, P(d), P(w), stream_);
  }
  if (pl.rows + n) {
    launch_sag_store(dims_.L, pl.rows, n, pl.dev_row_tok, pl.dev_row_slot, pl.view().sid, s.new_node.get(),
                     s.new_pair.get(), edges ? s.new_edge.get() : nullptr, s.node.get(),
                     dims_.transitions ? s.pair.get() : nullptr, edges ? s.edge.get() : nullptr, stream_);
  }
  if (copied) sync();  // w_coef is the caller's host array
  s.evaluated = false;  // the pending marginals are stored now
}

void CudaBackend::incremental_step(IncrementalState& state, double a, double b, double tau, Vector& w, const Vector& d) {
  CudaSag& s = G(state);
  LazyStepHistory::check_step(a, b, tau);
  if (s.needs_flush(a)) incremental_flush(state, w, d);  // as the CPU
  s.push(a, b, tau);
  // The device's copy of the history is appended to by a one-thread kernel with the host's
  // arithmetic (the same bits): no copy per step. Where the device copy is behind (after a
  // checkpoint's load) or full, the next catch-up copies what is missing instead.
  const std::size_t k = s.k();
  if (s.uploaded == k && k < std::min({s.dP.size(), s.dS.size(), s.dR.size()})) {
    launch_sag_push(k, a, b, tau, s.dP.get(), s.dS.get(), s.dR.get(), stream_);
    s.uploaded = k + 1;
  }
}

void CudaBackend::incremental_flush(IncrementalState& state, Vector& w, const Vector& d) {
  CudaSag& s = G(state);
  sag_finish(s);  // the queued steps first (incremental_schedule)
  if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
    throw Error("internal: SAG vectors have the wrong size");
  if (s.k() > 0) sag_catch_up(s, s.groups, nullptr, w, d);
  CRFX_CUDA_CHECK(cudaMemsetAsync(s.stamp.get(), 0, s.groups * sizeof(std::uint32_t), stream_));
  s.restart();
  s.uploaded = std::min<std::size_t>(s.uploaded, 1);  // step 0 (1, 0, 0) stays valid on the device
}

std::vector<double> CudaBackend::incremental_save(IncrementalState& state) {
  CudaSag& s = G(state);
  sag_finish(s);  // the queued steps first (incremental_schedule)
  std::vector<double> out(s.node.size() + s.pair.size() + s.edge.size());
  std::size_t at = 0;
  for (const DeviceBuffer<double>* buf : {&s.node, &s.pair, &s.edge}) {
    if (buf->size())
      CRFX_CUDA_CHECK(cudaMemcpyAsync(out.data() + at, buf->get(), buf->size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    at += buf->size();
  }
  std::vector<std::uint32_t> stamps;
  if (s.k() > 0) {  // inside an epoch: the lazy steps pending and the stamps too
    stamps.resize(s.groups);
    CRFX_CUDA_CHECK(cudaMemcpyAsync(stamps.data(), s.stamp.get(), s.groups * sizeof(std::uint32_t),
                                    cudaMemcpyDeviceToHost, stream_));
  }
  sync();
  if (s.k() > 0) save_lazy_steps(s, stamps, out);
  return out;
}

void CudaBackend::incremental_load(IncrementalState& state, const std::vector<double>& m) {
  CudaSag& s = G(state);
  if (s.k() > 0) throw Error("internal: SAG's state is restored only into a flushed state");
  const std::size_t total = s.node.size() + s.pair.size() + s.edge.size();
  if (m.size() < total)
    throw Error("checkpoint: SAG's stored marginals (" + std::to_string(m.size()) + " values) are not of this corpus (" +
                std::to_string(total) + ")");
  std::vector<std::uint32_t> stamps(s.groups);
  load_lazy_steps(m, total, s, stamps);
  std::size_t at = 0;
  for (DeviceBuffer<double>* buf : {&s.node, &s.pair, &s.edge}) {
    if (buf->size())
      CRFX_CUDA_CHECK(cudaMemcpyAsync(buf->get(), m.data() + at, buf->size() * sizeof(double),
                                      cudaMemcpyHostToDevice, stream_));
    at += buf->size();
  }
  if (s.groups)
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.stamp.get(), stamps.data(), s.groups * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
  s.uploaded = 0;  // the history goes to the device at the next catch-up
  sync();
}

// ---- the lazy catch-up ------------------------------------------------------------------

void CudaBackend::sag_catch_up(CudaSag& s, std::size_t count, const std::uint32_t* list, Vector& w,
                               const Vector& d) {
  const std::size_t k = s.k();
  const std::size_t have = std::min({s.dP.size(), s.dS.size(), s.dR.size()});
  if (k + 1 > have) {  // the history outgrew the device copy: double it, re-upload
    // `uploaded` is reset first and each table checked on its own, so a resize that throws
    // (leaving that buffer empty) is redone, and everything re-uploaded, by the next call.
    s.uploaded = 0;
    const std::size_t cap = std::max(k + 1, 2 * have);
    if (s.dP.size() < cap) s.dP.resize(cap);
    if (s.dS.size() < cap) s.dS.resize(cap);
    if (s.dR.size() < cap) s.dR.resize(cap);
  }
  if (k >= s.uploaded) {
    const std::size_t from = s.uploaded, m = k + 1 - from;
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dP.get() + from, s.P.data() + from, m * sizeof(double),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dS.get() + from, s.S.data() + from, m * sizeof(double),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dR.get() + from, s.R.data() + from, m * sizeof(double),
                                    cudaMemcpyHostToDevice, stream_));
    s.uploaded = k + 1;
    sync();  // P, S, R are appended to (and reset by incremental_flush) right after
  }
  if (count == 0 || k == 0) return;
  launch_sag_catch_up(device_groups(), list, count, std::uint32_t(k), s.dP.get(), s.dS.get(), s.dR.get(), s.stamp.get(),
                      P(w), P(d), stream_);
}

}  // namespace crfx::cuda::detail
