// crfx — CudaBackend (cuda_backend.cuh): the batch primitives over chunks of a span — evaluate
// (loss and gradient), viterbi, viterbi_nbest, marginals — and the marginal reduction that turns
// a chunk's deltas into the gradient (reduce_gradient). The chunk front they share is in
// backend.cu; the kernels in chain_kernels.cu, decode_kernels.cu and gather_kernels.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "chain_kernels.cuh"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "decode_kernels.cuh"
#include "gather_kernels.cuh"

namespace crfx::cuda::detail {

// ---- batch primitives ------------------------------------------------------------------

void CudaBackend::pointwise_chunk(const CorpusArrays& a, FbParams& fp, std::size_t n, SequenceLoss loss,
                                  bool gradient) {
  fp.gold = false;  // μ itself at the gold labels (μ − 1 would lose a small one's digits)
  fp.backward = true;
  fp.independent = false;  // the pointwise kernel reads the general recursions' â, b̂
  fp.node = node_.get();
  fp.pair = gradient ? pair_.get() : nullptr;
  if (gradient) fp.pair_at = a.edge_off ? edge_.get() : pt_pair_.get();  // sized by pointwise_rows
  launch_fb(fp, n, fb_work(a));
  launch_pointwise_loss(fp, n, loss == SequenceLoss::point_exp, gradient, stream_);
}

std::size_t CudaBackend::pointwise_rows(const CudaCorpus& c) {
  if (c.edge_off.get() || (c.stream && c.stream->edges)) return std::numeric_limits<std::size_t>::max();
  const std::size_t LL = std::size_t(dims_.L) * dims_.L;
  if (c.stream) {  // the fixed chunks: a buffer for the largest (grow-only, on the first such pass)
    reserve_device(pt_pair_, c.stream->max_rows * LL);
    return std::numeric_limits<std::size_t>::max();
  }
  const std::size_t rows = std::min(rows_cap_, std::max<std::size_t>(c.max_len, kPointwiseBytes / (LL * sizeof(double))));
  reserve_device(pt_pair_, rows * LL);
  return rows;
}

void CudaBackend::check_pointwise(SequenceLoss loss, SentenceSpan span, std::size_t begin, std::size_t n,
                                  const double* losses) const {
  char floor[16];
  std::snprintf(floor, sizeof floor, "%g", kGoldFloor);
  for (std::size_t i = 0; i < n; ++i)
    if (std::isnan(losses[i]))
      throw Error(std::string("the loss ") + sequence_loss_name(loss) + " of sentence " +
                  std::to_string(span[begin + i]) + ": a gold label's marginal is below " + floor +
                  ", which the CUDA backend does not compute (the CPU backend does, in log space); use --device cpu");
}

double CudaBackend::evaluate(const BackendCorpus& bc, const Vector& w, SentenceSpan span, Vector* grad,
                             double scale, SequenceLoss loss_kind) {
  const CudaCorpus& c = C(bc);
  if (grad && grad->size() != dims_.num_weights()) throw Error("internal: gradient size mismatch");
  for (std::size_t k = 0; k < span.count; ++k)
    if (span[k] >= c.S) throw Error("internal: sentence id beyond the corpus");
    else if (!c.h_labeled[span[k]])
      throw Error("sentence " + std::to_string(span[k]) + " has tokens without a label");
  if (c.stream && span.count) require_resident(c, span.ids || span.count != c.S ? "a pass over part of it" : nullptr);
  prepare(w);
  double* G = grad ? P(*grad) : nullptr;
  if (G) gathers(c);  // (a corpus only decoded never has them)
  double loss = 0;
  const std::size_t rows_limit = G && pointwise_loss(loss_kind) ? pointwise_rows(c)
                                                                : std::numeric_limits<std::size_t>::max();
  // A streamed corpus: its chunks' losses go to the pinned host array, read once after the pass
  // (no host wait a chunk: the copies of the next chunks run on while the host queues).
  double* const streamed_losses = c.stream ? c.stream->losses.get() : nullptr;
  if (c.stream && span.count) stream_begin(c);
  std::size_t done_before = 0;  // sentences reported to the stop poll
  for (std::size_t begin = 0, k = 0; begin < span.count; ++k) {
    // Between chunks (nothing of a resident chunk is pending); the previous chunk's sentences
    // are done (queued, when streamed).
    if (stop_requested(begin - done_before)) throw PassStopped();
    done_before = begin;
    const std::size_t end = c.stream ? begin + c.stream->chunks[k].n : plan(c, span, begin, rows_limit);
    const CorpusArrays a = c.stream ? stream_chunk(c, k) : arrays(c);
    const std::size_t n = end - begin, rows = c.stream ? c.stream->chunks[k].rows : h_slots_[n];
    try {
      // Token slots only where the gathers need them: a chunk of consecutive sentences (as the
      // whole-corpus spans of the batch trainers give) is read by token range instead.
      run_chunk_front(a, w, n, rows, G != nullptr && !h_consecutive_ && !a.streamed);
      FbParams fp = fb_params(a, w);
      fp.gold = true;
      fp.backward = G != nullptr;
      if (G) {
        fp.node = node_.get();
        fp.pair = dims_.transitions ? pair_.get() : nullptr;
        if (fp.edge && !fp.pair) fp.pair = pair_.get();  // edge deltas are written in the pair pass
      }
      if (pointwise_loss(loss_kind)) {
        pointwise_chunk(a, fp, n, loss_kind, G != nullptr);
      } else {
        launch_fb(fp, n, fb_work(a));
        if (loss_kind == SequenceLoss::seq_exp) launch_seq_exp(fp, n, stream_);  // 1/p, its deltas times 1/p
      }
      if (G) reduce_gradient(a, n, rows, scale, G);
      if (streamed_losses) {
        CRFX_CUDA_CHECK(cudaMemcpyAsync(streamed_losses + begin, losses_.get(), n * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream_));
        stream_done(c, k);
      }
    } catch (...) {
      // The chunk's token slots must not outlive it: a later evaluate would gather through
      // them. (Where the context itself is lost, this launch fails too, and so would any.)
      if (slots_set_ && rows) {  // only once fill_rows ran: before it, row_token_ is stale
        // This launch was not checked before CRFX_LAUNCH: its failure must not replace the error
        // being rethrown.
        try {
          launch_reset_slots(rows, row_token_.get(), c.token_slot.get(), stream_);
        } catch (...) {
        }
        cudaStreamSynchronize(stream_);
      }
      slots_set_ = false;
      throw;
    }
    if (!streamed_losses) {
      h_losses_.resize(n);
      CRFX_CUDA_CHECK(cudaMemcpyAsync(h_losses_.data(), losses_.get(), n * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
      sync();
      if (pointwise_loss(loss_kind)) check_pointwise(loss_kind, span, begin, n, h_losses_.data());
      for (std::size_t i = 0; i < n; ++i) loss += h_losses_[i];  // span order, as the CPU
    }
    begin = end;
  }
  if (streamed_losses && span.count) {
    sync();
    if (pointwise_loss(loss_kind)) check_pointwise(loss_kind, span, 0, span.count, streamed_losses);
    for (std::size_t i = 0; i < span.count; ++i) loss += streamed_losses[i];  // span order, as the CPU
  }
  if (cfg_.gather_counters && G) {  // the work counts the tests read: moved to the host's
    GatherCountersDevice v{};
    CRFX_CUDA_CHECK(cudaMemcpyAsync(&v, gather_counters_.get(), sizeof v, cudaMemcpyDeviceToHost, stream_));
    CRFX_CUDA_CHECK(cudaMemsetAsync(gather_counters_.get(), 0, sizeof v, stream_));
    sync();
    auto& h = *cfg_.gather_counters;
    h.visits += v.visits;
    h.longest_walk = std::max<std::uint64_t>(h.longest_walk, v.longest_walk);
    h.longest_combine = std::max<std::uint64_t>(h.longest_combine, v.longest_combine);
    h.longest_chain = std::max<std::uint64_t>(h.longest_chain, v.longest_chain);
  }
  return loss;
}

void CudaBackend::viterbi(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::uint32_t* labels,
                          double* best_scores) {
  const CudaCorpus& c = C(bc);
  if (c.stream && span.count) require_resident(c, span.ids || span.count != c.S ? "decoding part of it" : nullptr);
  prepare(w);
  if (c.stream && span.count) stream_begin(c);
  std::size_t out_off = 0;
  for (std::size_t begin = 0, k = 0; begin < span.count; ++k) {
    const std::size_t end = c.stream ? begin + c.stream->chunks[k].n : plan(c, span, begin);
    const CorpusArrays a = c.stream ? stream_chunk(c, k) : arrays(c);
    const std::size_t n = end - begin, rows = c.stream ? c.stream->chunks[k].rows : h_slots_[n];
    run_chunk_front(a, w, n, rows, false);
    ViterbiParams vp;
    static_cast<DecodeInputs&>(vp) = decode_inputs(a, w);
    vp.d = la_.get();
    vp.back = back_.get();
    vp.out = labels_.get();
    vp.score = best_scores ? losses_.get() : nullptr;
    launch_viterbi(vp, n, threads_, stream_);
    if (c.stream) stream_done(c, k);
    if (rows)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(labels + out_off, labels_.get(), rows * sizeof(std::uint32_t),
                                      cudaMemcpyDeviceToHost, stream_));
    if (best_scores)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(best_scores + begin, losses_.get(), n * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    sync();
    out_off += rows;
    begin = end;
  }
}

void CudaBackend::viterbi_nbest(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::size_t n,
                                std::uint32_t* labels, double* path_scores) {
  if (n == 0) throw Error("internal: n-best decoding needs n ≥ 1");
  if (n > 0xffffffffu / std::max<std::size_t>(1, dims_.L))
    throw Error("n-best decoding: n = " + std::to_string(n) + " is too large");
  const CudaCorpus& c = C(bc);
  require_resident(c, "n-best decoding");
  prepare(w);
  const std::size_t L = dims_.L;
  // The n-best tables are their own buffers (grow-only), not the workspace: chunks are cut so
  // that they need at most kNbestBytes (a longer sentence alone gets what it needs).
  const std::size_t per_row = L * n * (sizeof(double) + sizeof(std::uint32_t)) + n * sizeof(std::uint32_t);
  const std::size_t rows_limit = std::max<std::size_t>(1, kNbestBytes / per_row);
  std::size_t out_off = 0;
  for (std::size_t begin = 0; begin < span.count;) {
    const std::size_t end = plan(c, span, begin, rows_limit);
    const std::size_t m = end - begin, rows = h_slots_[m];
    const CorpusArrays a = arrays(c);
    run_chunk_front(a, w, m, rows, false);
    // Each table is checked on its own: a resize that threw leaves its buffer empty (and may
    // leave the ones after it at their old size), so a retry after a caught failure regrows it.
    if (nb_d_.size() < rows * L * n) nb_d_.resize(rows * L * n);
    if (nb_back_.size() < rows * L * n) nb_back_.resize(rows * L * n);
    if (nb_out_.size() < rows * n) nb_out_.resize(rows * n);
    if (nb_score_.size() < m * n) nb_score_.resize(m * n);
    NbestParams np;
    static_cast<DecodeInputs&>(np) = decode_inputs(a, w);
    np.n = unsigned(n);
    np.d = nb_d_.get();
    np.back = nb_back_.get();
    np.out = nb_out_.get();
    np.score = nb_score_.get();
    launch_viterbi_nbest(np, m, threads_, stream_);
    if (rows)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(labels + n * out_off, nb_out_.get(), rows * n * sizeof(std::uint32_t),
                                      cudaMemcpyDeviceToHost, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(path_scores + begin * n, nb_score_.get(), m * n * sizeof(double),
                                    cudaMemcpyDeviceToHost, stream_));
    sync();
    out_off += rows;
    begin = end;
  }
}

void CudaBackend::marginals(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                            double* node_marginals, double* log_z) {
  const CudaCorpus& c = C(bc);
  if (c.stream && span.count) require_resident(c, span.ids || span.count != c.S ? "the marginals of part of it" : nullptr);
  prepare(w);
  if (c.stream && span.count) stream_begin(c);
  std::size_t out_off = 0;
  for (std::size_t begin = 0, k = 0; begin < span.count; ++k) {
    const std::size_t end = c.stream ? begin + c.stream->chunks[k].n : plan(c, span, begin);
    const CorpusArrays a = c.stream ? stream_chunk(c, k) : arrays(c);
    const std::size_t n = end - begin, rows = c.stream ? c.stream->chunks[k].rows : h_slots_[n];
    run_chunk_front(a, w, n, rows, false);
    FbParams fp = fb_params(a, w);
    fp.gold = false;
    fp.backward = node_marginals != nullptr;
    fp.node = node_.get();
    launch_fb(fp, n, fb_work(a));
    if (c.stream) stream_done(c, k);
    if (node_marginals && rows)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(node_marginals + out_off * dims_.L, node_.get(),
                                      rows * dims_.L * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    if (log_z)
      CRFX_CUDA_CHECK(cudaMemcpyAsync(log_z + begin, losses_.get(), n * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    sync();
    out_off += rows;
    begin = end;
  }
}

// ---- the marginal reduction ------------------------------------------------------------

void CudaBackend::reduce_gradient(const CorpusArrays& a, std::size_t n, std::size_t rows, double scale,
                                  double* G) {
  const std::size_t L = dims_.L, LL = L * L;
  GatherChunk ch, ech;
  if (slots_set_) {
    ch.token_slot = a.token_slot;
  } else {  // consecutive sentences: rows are the tokens from the first one's on
    ch.t_lo = std::uint32_t(a.t_lo);
    ch.t_hi = std::uint32_t(ch.t_lo + rows);
  }
  ech = ch;
  if (a.streamed) {  // the chunk's own segments (tokens chunk-local: t_lo = 0)
    ch.seg_id = a.st_own.seg_id;
    ch.seg_off = a.st_own.seg_off;
    ch.segments = a.st_own.segments;
    ech.seg_id = a.et_own.seg_id;
    ech.seg_off = a.et_own.seg_off;
    ech.segments = a.et_own.segments;
  }
  GatherCountersDevice* counters = gather_counters_.get();
  // The gathers index the weights through the groups (state groups from 0, edge groups from
  // A + 1); the transition sums go to the transition row's weights by slot (sparse layout).
  const WeightGroups& gl = dgroups_;
  if (rows && dims_.A)
    launch_gather(*a.st_plan, L, max_state_row_, gl, 0, a.st_tok, a.st_val, ch, node_.get(), scale, G, counters,
                  stream_);
  if (rows && a.edge_off && dims_.E)
    launch_gather(*a.et_plan, LL, max_edge_row_, gl, gl.edge(0), a.et_tok, a.et_val, ech, edge_.get(), scale, G,
                  counters, stream_);
  if (dims_.transitions && n) {
    const WeightGroups hg = dims_.groups();
    launch_transition_tree(LL, n, pair_.get(), partial_.get(), scale, hg.size(hg.transitions()),
                           gl.slots ? gl.slots + hg.begin(hg.transitions()) : nullptr,
                           G + dims_.transition_offset(), stream_);
  }
  if (rows && slots_set_) launch_reset_slots(rows, row_token_.get(), a.token_slot, stream_);
  slots_set_ = false;
}

}  // namespace crfx::cuda::detail
