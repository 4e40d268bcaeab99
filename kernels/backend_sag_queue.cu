// crfx — CudaBackend (cuda_backend.cuh): SAG / SAGA's scheduled steps (uniform sampling and NUS,
// one sentence or a batch) queued on the device, so that an epoch waits for the device a few times rather than
// once per step (issue 37). A queued step is incremental_sync's catch-up, the evaluation and
// line search of incremental_search — kRounds rounds of trial, forward-only loss and restore,
// without a look — then one thread's finish_sag_step (SagStepScalars, the history's push) and the
// commit and store: every scalar the host decided per step (L, α, a, b, τ, SAGA's coefficient)
// decided on the device by the same rule, so the model is the CPU's bit for bit.
// A step whose search is not done after its rounds, or whose step would take P_k below 1e-150
// (the CPU flushes first), halts the queue: it and the steps after it change nothing (SagGate),
// and the wait finishes it on the host's primitives — the search with its looks, the flush — and
// queues the rest again. The queue waits after queue_cap steps (64, doubled up to kMaxQueue after
// each wait without a halt, quartered after a halt), so a halt costs at most that many steps again.
// Where the layout takes runs (transitions on, L ≤ 64, a resident corpus), queued steps, drawn ones
// too, are not launched one by one: up to 256 go in one run (launch_sag_run, run_kernels.cu; one
// block, the same device functions, the search looping there until done, so only P_k halts it),
// launched as they reach 256 and at each wait (CudaBackendConfig::sag_runs: the tests' switch).
// Drawn steps (incremental_schedule_drawn: SAG-NUS, lipschitz and mixed sampling) queue the same
// way with the sentence decided on the device: a one-thread kernel draws it with the host's code
// (SagSamplerRef, host/rules/sag_sampler.hpp, on a copy of the host's sampler uploaded when the
// queue starts and read back at the wait), and the step's kernels find its plan from the draw
// (SagPick), launched for the longest sentence's; its end scales L_i and takes α from the sampler.
// Batch steps (a span of 2 … kChunkIds sentences that one unsplit chunk takes) queue the same way
// (sag_enqueue_batch): S(batch) built on the device from the plans made once (batch_union, as
// sgd-l1's batches), the chunk plan from launch parameters, the span's losses summed on the device
// in span order, the gradient, commit and store sentence by sentence over the plans made once
// (batch_kernels.cu, reading the batch from a SagBatch on the device) — the span plan's sums bit
// for bit; a halted one is finished on the host's primitives. SAG-NUS's batches (drawn ones, any B
// sentences whose B longest fit a chunk) are drawn there by one thread (draw_span), which also
// writes the chunk plan and rows; S(batch)'s sizes stay on the device and its kernels are
// launched for bounds. Other spans take the host's path (schedule_on_host, _drawn_) at once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "cuda_api.hpp"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "batch_kernels.cuh"
#include "run_kernels.cuh"
#include "sag_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

constexpr int kRounds = 2;                                 // line-search rounds queued per step
// Per drawn step: L_i is lowered on a revisit (×0.9, ×½), so its search often doubles twice
// (with 2 rounds the tests' NUS epochs halted every ~15 steps; with 4, not once).
constexpr int kDrawnRounds = 4;
constexpr std::size_t kMinQueue = 64, kMaxQueue = 1u << 14;  // steps between two waits
constexpr std::uint32_t kDrawn = 0xffffffffu;              // a queued step's sentence: the device's draw
constexpr std::uint32_t kBatch = 0xfffffffeu;              // a queued step's sentence: its batch's (batch_span)
constexpr std::uint32_t kDrawnBatch = 0xfffffffdu;         // a queued step's sentences: the device's draws

/// A queued step's kind: kDrawn, kBatch, kDrawnBatch, or 0 (a sentence of its own).
std::uint32_t kind_of(std::uint32_t first) { return first >= kDrawnBatch ? first : 0u; }
bool drawn_kind(std::uint32_t first) { return first == kDrawn || first == kDrawnBatch; }

/// ‖g‖² of a drawn span (g compact, zero-padded in effect to the largest sentence's size): the
/// terms DotTerm's, a zero past the sentence's size, so that reduce's passes launched for the
/// largest size sum the same terms in the same places (each thread holds one term or adds zeros).
struct PickedDotTerm {
  const double* g;
  const SagDraw* draw;
  const std::size_t* compact;  // [S]
  __device__ double operator()(std::size_t i) const {
    const double x = i < compact[draw->id] ? g[i] : 0.0;
    return x * x;
  }
};

}  // namespace

void CudaBackend::incremental_schedule(IncrementalState& state, SentenceSpan span, const SagStepParams& p, Vector& w,
                                       Vector& d) {
  CudaSag& s = G(state);
  // Stamps near 2³², or several sentences that one chunk does not take: on the host's primitives.
  if (s.k() + s.queued.size() + 2 >= 0xffffffffu || (span.count != 1 && !sag_batch_fits(s, span))) {
    sag_finish(s);
    schedule_on_host(*this, state, span, p, w, d);
    return;
  }
  if (span.count != 1) {
    sag_queue_ready(s, w, d, kBatch);
    s.queued.emplace_back(kBatch, p);
    s.batch_ids.insert(s.batch_ids.end(), span.ids, span.ids + span.count);
    s.batch_at.push_back(s.batch_ids.size());
    sag_enqueue(s, s.queued.size() - 1);
    return;
  }
  sag_queue_ready(s, w, d, 0);
  select_sentence(*s.corpus, span[0], s.plan);  // its checks, before anything is queued
  s.queued.emplace_back(span[0], p);
  sag_enqueue(s, s.queued.size() - 1);
}

void CudaBackend::incremental_schedule_drawn(IncrementalState& state, const SagSamplerRef& sampler,
                                             const SagStepParams& p, Vector& w, Vector& d) {
  CudaSag& s = G(state);
  const bool batch = p.B > 1;
  // Stamps near 2³², or a batch the device cannot draw and step in one chunk: on the host.
  if (s.k() + s.queued.size() + 2 >= 0xffffffffu || (batch && !sag_drawn_batch_fits(s, std::size_t(p.B)))) {
    sag_finish(s);
    schedule_drawn_on_host(*this, state, sampler, p, w, d);
    return;
  }
  if (!s.queued.empty() && s.host_sampler.s != sampler.s) sag_finish(s);
  if (sag_queue_ready(s, w, d, batch ? kDrawnBatch : kDrawn)) {  // a new queue: the sampler onto the device
    const CudaCorpus& c = *s.corpus;
    if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);
    s.host_sampler = sampler;
    s.sampler.upload(sampler, stream_);
    if (s.draws.size() < kMaxQueue) s.draws.resize(kMaxQueue);
    if (s.draw_L0.size() < 1) s.draw_L0.resize(1);
  }
  s.queued.emplace_back(batch ? kDrawnBatch : kDrawn, p);
  sag_enqueue(s, s.queued.size() - 1);
}

bool CudaBackend::sag_queue_ready(CudaSag& s, Vector& w, Vector& d, std::uint32_t kind) {
  if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
    throw Error("internal: SAG vectors have the wrong size");
  if (!s.queued.empty() && (s.queued.size() >= s.queue_cap || s.qw != &w || s.qd != &d ||
                            kind_of(s.queued.back().first) != kind))
    sag_finish(s);
  // The device's history complete (after a checkpoint's load it is not) and room for the step.
  if (s.uploaded < s.k() + 1 || s.k() + 2 > std::min({s.dP.size(), s.dS.size(), s.dR.size()})) {
    sag_finish(s);
    const std::size_t need = s.k() + 2, have = std::min({s.dP.size(), s.dS.size(), s.dR.size()});
    if (need > have) {  // as sag_catch_up grows it: everything uploaded again
      s.uploaded = 0;
      const std::size_t cap = std::max(need, 2 * have);
      for (DeviceBuffer<double>* buf : {&s.dP, &s.dS, &s.dR})
        if (buf->size() < cap) buf->resize(cap);
    }
    sag_catch_up(s, 0, nullptr, w, d);  // uploads what the device lacks
  }
  if (s.queue.size() < 1) incremental_set_scalars(s, s.scalars);
  if (!s.queued.empty()) return false;
  s.queue_k0 = s.k();
  s.qw = &w;
  s.qd = &d;
  return true;
}

void CudaBackend::sag_enqueue(CudaSag& s, std::size_t at) {
  if (s.queued[at].first == kDrawn) {
    sag_enqueue_drawn(s, at);
    return;
  }
  if (s.queued[at].first == kBatch || s.queued[at].first == kDrawnBatch) {
    sag_enqueue_batch(s, at);
    return;
  }
  const std::uint32_t sid = s.queued[at].first;
  const SagStepParams& p = s.queued[at].second;
  Vector& w = *s.qw;
  s.synced = s.evaluated = s.tried = false;
  select_sentence(*s.corpus, sid, s.plan);
  if (sag_runs(s)) {  // launched with the next run's
    sag_placeholder(s);
    if (s.queued.size() - s.run_from >= kSagRunSteps) sag_launch_run(s);
    return;
  }
  const SpanPlan& pl = s.plan;
  const auto* halt = reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const char*>(s.queue.get()) +
                                                             offsetof(SagQueueState, halt));
  const SagGate gate{halt, std::uint32_t(at)};
  const std::size_t k = s.k(), ng = pl.ng;
  if (k > 0 && ng)
    launch_sag_catch_up(device_groups(), pl.view().groups, ng, std::uint32_t(k), s.dP.get(), s.dS.get(), s.dR.get(),
                        s.stamp.get(), P(w), P(*s.qd), stream_, gate);
  const double* g2 = sag_evaluate_on_device(s, w);
  launch_sag_queue_search_start(s.search.get(), losses_.get(), g2, s.queue.get(), gate.at, stream_);
  const SentenceSpan span{&sid, 1};
  for (int r = 0; r < kRounds; ++r) {  // incremental_search's rounds, without a look
    if (ng)
      launch_sag_trial(device_groups(), pl.view(), ng, true, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w),
                       stream_);
    sentence_loss_on_device(*s.corpus, w, span, s.search_done());
    if (ng)
      launch_sag_trial(device_groups(), pl.view(), ng, false, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w),
                       stream_);
    launch_sag_search_tried(s.search.get(), losses_.get(), stream_);
  }
  reserve_device(s.coef, 1);
  launch_sag_queue_step(s.queue.get(), s.search.get(), gate.at, p, k + 1, s.dP.get(), s.dS.get(), s.dR.get(),
                        p.saga ? s.coef.get() : nullptr, stream_);
  const bool edges = !s.edge_slot.empty();
  if (ng)
    launch_sag_commit(device_groups(), pl.view(), ng, s.new_node.get(), s.node.get(), s.new_pair.get(), s.pair.get(),
                      edges ? s.new_edge.get() : nullptr, edges ? s.edge.get() : nullptr,
                      p.saga ? s.coef.get() : nullptr, P(*s.qd), P(w), stream_, gate);
  launch_sag_store(dims_.L, pl.rows, 1, pl.dev_row_tok, pl.dev_row_slot, pl.view().sid, s.new_node.get(),
                   s.new_pair.get(), edges ? s.new_edge.get() : nullptr, s.node.get(),
                   dims_.transitions ? s.pair.get() : nullptr, edges ? s.edge.get() : nullptr, stream_, gate);
  sag_placeholder(s);
}

bool CudaBackend::sag_runs(const CudaSag& s) const { return cfg_.sag_runs && !runs_refused(*s.corpus); }

void CudaBackend::sag_launch_run(CudaSag& s) {
  if (s.run_from >= s.queued.size() || !sag_runs(s)) return;
  const CudaCorpus& c = *s.corpus;
  const bool drawn = s.queued.front().first == kDrawn;
  if (c.max_len > rows_cap_) throw Error("internal: sentence longer than the CUDA workspace");
  const std::size_t n = s.queued.size() - s.run_from, LL = std::size_t(dims_.L) * dims_.L;
  if (n > kSagRunSteps) throw Error("internal: more SAG steps pending than a run takes");
  std::vector<std::uint32_t> ids;  // (drawn: none, the device draws them)
  for (std::size_t i = 0; !drawn && i < n; ++i) ids.push_back(s.queued[s.run_from + i].first);
  const SentenceSpan span{ids.data(), ids.size()};
  Vector& w = *s.qw;
  const SentencePlans& sp = sentence_plans_;
  const bool edges = !s.edge_slot.empty();
  if (edges) reserve_device(s.new_edge, std::max<std::size_t>(1, c.max_len) * LL);
  reserve_device(s.g, sp.most_compact);
  reserve_device(s.saved, sp.most_compact);
  auto r = std::make_unique<SagRun>();  // (22 KB)
  r->run = run_params(c, span, w, nullptr);
  r->fb = fb_params(arrays(c), w);  // (its chunk, τ and E are the run's own)
  r->fb.gold = true;
  r->fb.backward = true;
  r->fb.node = node_.get();
  r->fb.pair = pair_.get();
  r->fb_threads = threads_;
  r->E = E_.get();
  r->Et = Et_.get();
  r->queue = s.queue.get();
  r->P = s.dP.get();
  r->S = s.dS.get();
  r->R = s.dR.get();
  r->stamp = s.stamp.get();
  r->d = P(*s.qd);
  r->tables = {sp.groups.get(), sp.gofs.get(), sp.oofs.get(), sp.onew.get(), sp.oold.get(),
               sp.osent.get(),  sp.oval.get(), sp.ids.get(),  1u};
  r->slots = sp.slots.get();
  r->old_node = s.node.get();
  r->old_pair = dims_.transitions ? s.pair.get() : nullptr;
  r->old_edge = edges ? s.edge.get() : nullptr;
  r->new_edge = edges ? s.new_edge.get() : nullptr;
  r->g = s.g.get();
  r->saved = s.saved.get();
  if (drawn) {
    r->sampler = s.sampler.ref();
    r->draws = s.draws.get();
  }
  r->run.steps = n;
  for (std::size_t i = 0; i < n; ++i) {
    r->run.ids[i] = drawn ? 0 : ids[i];
    r->step[i] = s.queued[s.run_from + i].second;
  }
  r->at0 = std::uint32_t(s.run_from);
  r->k0 = s.queue_k0 + s.run_from;
  launch_sag_run(*r, stream_);
  s.run_from = s.queued.size();
}

void CudaBackend::sag_placeholder(CudaSag& s) {
  // The host's history holds a placeholder for the step until the wait reads it back.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.P.push_back(nan);
  s.S.push_back(nan);
  s.R.push_back(nan);
  s.uploaded = s.k() + 1;
  s.evaluated = false;  // nothing to commit or restore by the host's primitives
}

void CudaBackend::sag_enqueue_drawn(CudaSag& s, std::size_t at) {
  const SagStepParams& p = s.queued[at].second;
  Vector& w = *s.qw;
  s.synced = s.evaluated = s.tried = false;
  s.plan.valid = false;  // the host's plan is not this step's
  if (sag_runs(s)) {  // launched with the next run's
    sag_placeholder(s);
    if (s.queued.size() - s.run_from >= kSagRunSteps) sag_launch_run(s);
    return;
  }
  const auto* halt = reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const char*>(s.queue.get()) +
                                                             offsetof(SagQueueState, halt));
  const SagGate gate{halt, std::uint32_t(at)};
  SagDraw* draw = s.draws.get() + at;
  const SagSamplerRef r = s.sampler.ref();
  launch_sag_draw(r, draw, s.draw_L0.get(), stream_, gate);
  const SentencePlans& sp = sentence_plans_;
  const SagPick pick{draw,
                     sp.d_gbase.get(),
                     sp.d_obase.get(),
                     s.corpus->sent_off.get(),
                     {sp.groups.get(), sp.gofs.get(), sp.oofs.get(), sp.onew.get(), sp.oold.get(), sp.osent.get(),
                      sp.oval.get(), sp.ids.get(), 1u},
                     sp.tokens.get(),
                     sp.slots.get()};
  const std::size_t k = s.k(), ng = sp.most_groups;
  if (k > 0 && ng)
    launch_sag_catch_up(device_groups(), nullptr, ng, std::uint32_t(k), s.dP.get(), s.dS.get(), s.dR.get(),
                        s.stamp.get(), P(w), P(*s.qd), stream_, gate, pick);
  const double* g2 = sag_evaluate_picked(s, w, pick);
  launch_sag_queue_search_start(s.search.get(), losses_.get(), g2, s.queue.get(), gate.at, stream_, s.draw_L0.get());
  for (int round = 0; round < kDrawnRounds; ++round) {  // incremental_search's rounds, without a look
    if (ng)
      launch_sag_trial(device_groups(), {}, ng, true, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w), stream_,
                       pick);
    sentence_loss_picked(*s.corpus, w, draw, false, s.search_done());
    if (ng)
      launch_sag_trial(device_groups(), {}, ng, false, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w), stream_,
                       pick);
    launch_sag_search_tried(s.search.get(), losses_.get(), stream_);
  }
  reserve_device(s.coef, 1);
  launch_sag_queue_drawn_step(s.queue.get(), s.search.get(), gate.at, r, draw, p, k + 1, s.dP.get(), s.dS.get(),
                              s.dR.get(), p.saga ? s.coef.get() : nullptr, stream_);
  const bool edges = !s.edge_slot.empty();
  if (ng)
    launch_sag_commit(device_groups(), {}, ng, s.new_node.get(), s.node.get(), s.new_pair.get(), s.pair.get(),
                      edges ? s.new_edge.get() : nullptr, edges ? s.edge.get() : nullptr,
                      p.saga ? s.coef.get() : nullptr, P(*s.qd), P(w), stream_, gate, pick);
  launch_sag_store(dims_.L, std::max<std::size_t>(1, s.corpus->max_len), 1, nullptr, nullptr, nullptr,
                   s.new_node.get(), s.new_pair.get(), edges ? s.new_edge.get() : nullptr, s.node.get(),
                   dims_.transitions ? s.pair.get() : nullptr, edges ? s.edge.get() : nullptr, stream_, gate, pick);
  sag_placeholder(s);
}

const double* CudaBackend::sag_evaluate_picked(CudaSag& s, const Vector& w, const SagPick& pick) {
  // span_marginals' chunk and copies, and sag_evaluate_on_device's gradient and ‖g‖², for the
  // longest sentence's sizes.
  const CudaCorpus& c = *s.corpus;
  const std::size_t L = dims_.L, LL = L * L, T = std::max<std::size_t>(1, c.max_len);
  const bool edges = c.edge_off.get() != nullptr, pairs = dims_.transitions || edges;
  reserve_device(s.new_node, T * L);
  reserve_device(s.new_pair, LL);
  if (edges) reserve_device(s.new_edge, T * LL);
  sentence_loss_picked(c, w, pick.draw, true);
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_node.get(), node_.get(), T * L * sizeof(double), cudaMemcpyDeviceToDevice,
                                  stream_));
  if (pairs)
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_pair.get(), pair_.get(), LL * sizeof(double), cudaMemcpyDeviceToDevice,
                                    stream_));
  if (edges)
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_edge.get(), edge_.get(), T * LL * sizeof(double),
                                    cudaMemcpyDeviceToDevice, stream_));
  const SentencePlans& sp = sentence_plans_;
  reserve_device(s.g, sp.most_compact);
  reserve_device(s.saved, sp.most_compact);
  if (s.red.size() < std::size_t(kRedBlocks) + 1) s.red.resize(std::size_t(kRedBlocks) + 1);
  if (s.search.size() < 1) s.search.resize(1);
  if (sp.most_groups)
    launch_sag_gradient(device_groups(), {}, sp.most_groups, s.new_node.get(), s.new_pair.get(),
                        edges ? s.new_edge.get() : nullptr, 1.0, s.g.get(), stream_, pick);
  double* g2 = s.red.get() + kRedBlocks;
  if (sp.most_compact == 0) {
    launch_sag_set(g2, 0.0, stream_);
  } else {  // reduce()'s two passes for the largest size: the drawn sentence's sum (PickedDotTerm)
    const unsigned blocks = grid_for(sp.most_compact, kRedThreads, kRedBlocks);
    const PickedDotTerm f{s.g.get(), pick.draw, sp.d_compact.get()};
    CRFX_LAUNCH((reduce_pass1<PickedDotTerm, SumOp>), blocks, kRedThreads, 0, stream_, sp.most_compact, f, SumOp{},
                0.0, s.red.get());
    CRFX_LAUNCH(reduce_pass2<SumOp>, 1, kRedThreads, 0, stream_, blocks, s.red.get(), SumOp{}, 0.0, g2);
  }
  return g2;
}

void CudaBackend::sentence_loss_picked(const CudaCorpus& c, const Vector& w, const SagDraw* draw, bool backward,
                                       const bool* skip) {
  // run_chunk_front and the forward-backward of a one-sentence chunk (sentence_loss_on_device,
  // span_marginals), the chunk plan and rows written on the device from the draw; nothing but the
  // plan where *skip (a trial's, the search done).
  require_resident(c, "a drawn sentence's loss on the device");
  const std::size_t T = std::max<std::size_t>(1, c.max_len);
  if (T > rows_cap_ || sents_cap_ < 1) throw Error("internal: sentence longer than the CUDA workspace");
  prepare(w);
  plan_key_.corpus = 0;  // the device's chunk plan is the draw's: the next plan() is made and copied again
  plan_on_device_ = false;
  const CorpusArrays a = arrays(c);
  const int L = int(dims_.L);
  launch_picked_chunk(draw, a.sent_off, a.edge_off, T, sent_.get(), order_.get(), slots_.get(), row_token_.get(),
                      row_edge_.get(), stream_);
  slots_set_ = false;
  launch_emission(L, T, row_token_.get(), a.state_off, a.state_ids, a.state_vals, P(w), dgroups_, S_.get(), stream_,
                  skip);
  if (a.edge_off)
    launch_edge_matrix(L, T, row_token_.get(), row_edge_.get(), a.edge_off, a.edge_ids, a.edge_vals, trans_ptr(w),
                       P(w), dgroups_, edge_.get(), stream_, skip);
  FbParams fp = fb_params(c, w);
  fp.gold = true;
  fp.backward = backward;
  fp.skip = skip;
  if (backward) {
    fp.node = node_.get();
    fp.pair = dims_.transitions || a.edge_off ? pair_.get() : nullptr;
  }
  launch_fb(fp, 1, FbWork{1, 0, 0, 0, 0, nullptr, nullptr});  // one sentence: never split
}

bool CudaBackend::sag_batch_fits(const CudaSag& s, SentenceSpan span) {
  const CudaCorpus& c = *s.corpus;
  if (span.count < 2 || span.count > kChunkIds || c.stream) return false;
  for (std::size_t i = 0; i < span.count; ++i) {
    if (span[i] >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (!c.h_labeled[span[i]]) return false;  // (SAG refuses such a corpus: the host's errors)
  }
  // One chunk (a repeated sentence or the workspace would cut it), its plan written by a kernel
  // (the split forward-backward's work list would need copies beside it).
  return plan(c, span, 0) == span.count && !split_fb();
}

bool CudaBackend::sag_drawn_batch_fits(const CudaSag& s, std::size_t B) {
  // Any B sentences in one chunk (the B longest fit it), which no mode splits.
  const CudaCorpus& c = *s.corpus;
  const std::size_t T = std::max<std::size_t>(1, c.max_len);
  if (B < 2 || B > kChunkIds || B > c.S || c.stream || B > sents_cap_) return false;
  if (split_fb(FbWork{B, T, 0, 0, 0, nullptr, nullptr})) return false;
  if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);
  return sentence_plans_.top_rows[B] <= rows_cap_;
}

SagBatchSizes CudaBackend::sag_batch_begin(CudaSag& s, std::size_t at, const SagGate& gate, SentenceSpan& span) {
  // The batch onto the device (its SagBatch) and S(batch) built there: the host's span's, or the
  // device's draws (then its sizes are bounds: the sums of the B largest sentences').
  const bool drawn = s.queued[at].first == kDrawnBatch;
  const SagStepParams& p = s.queued[at].second;
  const CudaCorpus& c = *s.corpus;
  const SentencePlans& sp = sentence_plans_;
  if (s.batch.size() < 1) s.batch.resize(1);
  SagBatch* b = s.batch.get();
  BatchUnion& u = batch_union_;
  std::size_t n, rows, ng, compact;
  if (drawn) {
    n = std::size_t(p.B);  // the n largest sentences' sums bound the batch's
    rows = std::max<std::size_t>(1, sp.top_rows[n]);
    ng = std::min(sp.top_groups[n], s.groups);
    compact = std::min(sp.top_compact[n], dims_.num_weights());
    launch_sag_draw_batch(s.sampler.ref(), b, n, sp.d_gbase.get(), c.sent_off.get(), c.edge_off.get(), rows,
                          sent_.get(), order_.get(), slots_.get(), row_token_.get(), row_edge_.get(), stream_, gate);
    plan_key_.corpus = 0;  // the device's chunk plan is the draw's: the next plan() is made and copied again
    plan_on_device_ = slots_set_ = false;
    u.corpus = 0;  // S(batch) on the device is not the host's plan's
    u.on_device = false;
    launch_batch_union(device_groups(), b, n, sp.top_groups[n], ng, sp.groups.get(), sp.d_gbase.get(), u, stream_);
  } else {
    span = s.batch_span(at);
    BatchIds ids;
    if (!batch_union(c, span, &ids) || !sag_batch_fits(s, span))
      throw Error("internal: a queued SAG batch left its chunk");
    n = span.count;
    rows = h_slots_[n];
    ng = u.h_groups.size();
    compact = u.compact;
    launch_sag_batch_set(b, ids, batch_rows(span), n, ng, compact, stream_);
  }
  return {n, rows, ng, compact};
}

void CudaBackend::sag_enqueue_batch(CudaSag& s, std::size_t at) {
  // incremental_sync's catch-up, incremental_search's evaluation and its trials' rounds,
  // finish_sag_step's end (a drawn batch: finish_drawn_span's), commit and store — on S(batch)
  // built on the device from the plans made once (batch_union, as sgd-l1's batches), the chunk plan
  // written by a kernel (from launch parameters, or by the draw), the span's losses summed on the
  // device in span order: nothing copied up, nothing waited for. A drawn batch's sizes are the
  // device's: its kernels are launched for bounds (the sums of the B largest sentences').
  const bool drawn = s.queued[at].first == kDrawnBatch;
  const SagStepParams& p = s.queued[at].second;
  const CudaCorpus& c = *s.corpus;
  Vector& w = *s.qw;
  s.synced = s.evaluated = s.tried = false;
  s.plan.valid = false;  // the host's plan is not this step's
  const auto* halt = reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const char*>(s.queue.get()) +
                                                             offsetof(SagQueueState, halt));
  const SagGate gate{halt, std::uint32_t(at)};
  SentenceSpan span{};
  const SagBatchSizes z = sag_batch_begin(s, at, gate, span);
  const std::size_t n = z.n, rows = z.rows, ng = z.ng, compact = z.compact;  // a drawn batch's: bounds
  SagBatch* b = s.batch.get();
  BatchUnion& u = batch_union_;
  const auto field = [b](std::size_t offset) {  // a field of *b (its sizes on the device)
    return reinterpret_cast<const std::size_t*>(reinterpret_cast<const char*>(b) + offset);
  };
  const std::size_t* ng_at = drawn ? field(offsetof(SagBatch, ng)) : nullptr;
  const std::size_t* compact_at = drawn ? field(offsetof(SagBatch, compact)) : nullptr;
  const std::size_t L = dims_.L, LL = L * L, k = s.k();
  const bool edges = !s.edge_slot.empty(), pairs = dims_.transitions || c.edge_off.get() != nullptr;
  if (k > 0 && ng)
    launch_sag_catch_up(device_groups(), u.groups.get(), ng, std::uint32_t(k), s.dP.get(), s.dS.get(), s.dR.get(),
                        s.stamp.get(), P(w), P(*s.qd), stream_, gate, {}, ng_at);
  // The evaluation: the marginals out of the workspace (the trials' passes overwrite it), g, ‖g‖².
  if (s.red.size() < std::size_t(kRedBlocks) + 3) s.red.resize(std::size_t(kRedBlocks) + 3);
  if (s.search.size() < 1) s.search.resize(1);
  double* f = s.red.get() + kRedBlocks + 1;
  double* ft = f + 1;
  reserve_device(s.new_node, rows * L);
  reserve_device(s.new_pair, n * LL);
  if (c.edge_off.get()) reserve_device(s.new_edge, rows * LL);
  reserve_device(s.g, compact);
  reserve_device(s.saved, compact);
  reserve_device(s.coef, n);
  batch_loss_on_device(c, w, drawn ? nullptr : &span, n, rows, nullptr, f);
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_node.get(), node_.get(), rows * L * sizeof(double), cudaMemcpyDeviceToDevice,
                                  stream_));
  if (pairs)
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_pair.get(), pair_.get(), n * LL * sizeof(double), cudaMemcpyDeviceToDevice,
                                    stream_));
  if (c.edge_off.get())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(s.new_edge.get(), edge_.get(), rows * LL * sizeof(double),
                                    cudaMemcpyDeviceToDevice, stream_));
  const BatchPlans t = batch_plans(c);
  const SagBatchMarginals m{s.new_node.get(), s.new_pair.get(), edges ? s.new_edge.get() : nullptr,
                            s.node.get(),     dims_.transitions ? s.pair.get() : nullptr,
                            edges ? s.edge.get() : nullptr};
  launch_sag_batch_gradient(device_groups(), b, ng, t, u.groups.get(), u.gofs.get(), m, 1.0, s.g.get(), stream_);
  const double* g2 = sag_g2_on_device(s, compact, compact_at);
  const double* L0 = drawn ? reinterpret_cast<const double*>(reinterpret_cast<const char*>(b) + offsetof(SagBatch, L0))
                           : nullptr;
  launch_sag_queue_search_start(s.search.get(), f, g2, s.queue.get(), gate.at, stream_, L0, double(n));
  const SagSpanView v{u.groups.get(), u.gofs.get(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0u};
  const bool* done = s.search_done();  // a done search's passes: none
  for (int r = 0; r < (drawn ? kDrawnRounds : kRounds); ++r) {  // incremental_search's rounds, without a look
    if (ng)
      launch_sag_trial(device_groups(), v, ng, true, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w), stream_, {},
                       ng_at);
    batch_loss_on_device(c, w, drawn ? nullptr : &span, n, rows, done, ft);
    if (ng)
      launch_sag_trial(device_groups(), v, ng, false, 0.0, s.search.get(), s.g.get(), s.saved.get(), P(w), stream_,
                       {}, ng_at);
    launch_sag_search_tried(s.search.get(), ft, stream_);
  }
  double* coef = p.saga ? s.coef.get() : nullptr;
  if (drawn)
    launch_sag_drawn_batch_end(s.queue.get(), s.search.get(), gate.at, s.sampler.ref(), b, p, k + 1, s.dP.get(),
                               s.dS.get(), s.dR.get(), coef, stream_);
  else
    launch_sag_queue_step(s.queue.get(), s.search.get(), gate.at, p, k + 1, s.dP.get(), s.dS.get(), s.dR.get(), coef,
                          stream_, std::uint32_t(n));
  launch_sag_batch_commit(device_groups(), b, ng, t, u.groups.get(), m, coef, P(*s.qd), P(w), stream_, gate);
  launch_sag_batch_store(L, b, n, c.sent_off.get(), t.slots, m, stream_, gate);
  sag_placeholder(s);
  s.run_from = s.queued.size();  // (never in a run)
}

void CudaBackend::batch_loss_on_device(const CudaCorpus& c, const Vector& w, const SentenceSpan* span, std::size_t n,
                                       std::size_t rows, const bool* skip, double* out) {
  // span_marginals' chunk (the evaluation: skip null, the marginals) or evaluate's forward-only one
  // (a trial: nothing where *skip, the search done), the losses summed on the device; a trial's chunk
  // plan and rows are the evaluation's, a drawn batch's (span null) as its draw wrote them.
  const bool backward = skip == nullptr;
  prepare(w);
  if (span && backward) {
    if (plan(c, *span, 0) != n) throw Error("internal: a SAG batch beyond one chunk");
    if (!plan_on_device_) {
      launch_chunk_from_ids(h_sent_.data(), h_order_.data(), n, c.sent_off.get(), sent_.get(), order_.get(),
                            slots_.get(), stream_);
      plan_on_device_ = true;
    }
    run_chunk_front(c, w, n, rows, false);
  } else {
    const CorpusArrays a = arrays(c);
    launch_emission(int(dims_.L), rows, row_token_.get(), a.state_off, a.state_ids, a.state_vals, P(w), dgroups_,
                    S_.get(), stream_, skip);
    if (a.edge_off)
      launch_edge_matrix(int(dims_.L), rows, row_token_.get(), row_edge_.get(), a.edge_off, a.edge_ids, a.edge_vals,
                         trans_ptr(w), P(w), dgroups_, edge_.get(), stream_, skip);
  }
  FbParams fp = fb_params(c, w);
  fp.gold = true;
  fp.backward = backward;
  fp.skip = skip;
  if (backward) {
    fp.node = node_.get();
    fp.pair = dims_.transitions || c.edge_off.get() != nullptr ? pair_.get() : nullptr;
  }
  launch_fb(fp, n, FbWork{n, 0, 0, 0, 0, nullptr, nullptr});  // (never split: sag_batch_fits)
  launch_span_loss(losses_.get(), n, out, stream_);
}

void CudaBackend::sag_finish(CudaSag& s) {
  while (!s.queued.empty()) {
    sag_launch_run(s);
    // The scalars and the history's steps queue_k0 + 1 … k, as the device left them.
    const std::size_t k0 = s.queue_k0, m = s.k() - k0;
    CRFX_CUDA_CHECK(cudaMemcpyAsync(&s.hq, s.queue.get(), sizeof s.hq, cudaMemcpyDeviceToHost, stream_));
    for (auto [dst, src] : {std::pair{&s.P, &s.dP}, std::pair{&s.S, &s.dS}, std::pair{&s.R, &s.dR}})
      CRFX_CUDA_CHECK(cudaMemcpyAsync(dst->data() + k0 + 1, src->get() + k0 + 1, m * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    const bool drawn = drawn_kind(s.queued.front().first);
    if (drawn) s.sampler.download(s.host_sampler, stream_);  // the sampler as the draws left it
    sync();
    if (drawn) s.sampler.downloaded(s.host_sampler);
    auto queued = std::move(s.queued);
    s.queued.clear();
    const std::vector<std::uint32_t> batch_ids = std::move(s.batch_ids);
    const std::vector<std::size_t> batch_at = std::move(s.batch_at);
    s.batch_ids.clear();
    s.batch_at.assign(1, 0);
    s.run_from = 0;
    s.scalars = s.hq.s;
    if (s.hq.halt == SagQueueState::kNoHalt) {
      s.queue_cap = std::min(kMaxQueue, 2 * s.queue_cap);
      return;
    }
    // Step `h` halted: the steps before it are done; it and those after changed nothing.
    const std::size_t h = s.hq.halt;
    for (LazyStepHistory* x = &s; x->k() > k0 + h;) {
      x->P.pop_back();
      x->S.pop_back();
      x->R.pop_back();
    }
    s.uploaded = s.k() + 1;
    s.queue_cap = std::max(kMinQueue, s.queue_cap / 4);
    s.hq.halt = SagQueueState::kNoHalt;
    Vector& w = *s.qw;
    Vector& d = *s.qd;
    if (queued[h].first == kDrawnBatch) {  // drawn and visited on the device, as one below
      SagBatch x;
      CRFX_CUDA_CHECK(cudaMemcpyAsync(&x, s.batch.get(), sizeof x, cudaMemcpyDeviceToHost, stream_));
      sync();
      const std::vector<std::uint32_t> ids(x.ids.sid, x.ids.sid + x.n);
      const std::vector<double> prob(x.prob, x.prob + x.n);
      incremental_sync(s, SentenceSpan{ids.data(), ids.size()}, w, d);  // caught up already: no-op
      finish_drawn_span(*this, s, s.host_sampler, ids, prob, queued[h].second, w, d);
    } else if (drawn) {  // drawn and visited on the device (the sampler read back as it was then)
      SagDraw x{};
      CRFX_CUDA_CHECK(cudaMemcpyAsync(&x, s.draws.get() + h, sizeof x, cudaMemcpyDeviceToHost, stream_));
      sync();
      incremental_sync(s, SentenceSpan{&x.id, 1}, w, d);  // its groups are caught up already: no-op
      finish_drawn_step(*this, s, s.host_sampler, x, queued[h].second, w, d);
    } else {  // a sentence, or a batch (its search on the host's primitives, as schedule_on_host)
      const std::uint32_t sid = queued[h].first;
      const SentenceSpan span = sid != kBatch ? SentenceSpan{&sid, 1}
                                              : SentenceSpan{batch_ids.data() + batch_at[h], batch_at[h + 1] - batch_at[h]};
      incremental_sync(s, span, w, d);  // its groups are caught up already: no-op
      const LipschitzFound found = incremental_search(s, w, s.scalars.L);
      finish_sag_step(*this, s, span.count, queued[h].second, found, w, d);
    }
    incremental_set_scalars(s, s.scalars);
    if (drawn) s.sampler.upload(s.host_sampler, stream_);
    s.queue_k0 = s.k();
    s.qw = &w;
    s.qd = &d;
    for (std::size_t i = h + 1; i < queued.size(); ++i) {
      s.queued.push_back(queued[i]);
      if (queued[i].first == kBatch) {
        s.batch_ids.insert(s.batch_ids.end(), batch_ids.begin() + std::ptrdiff_t(batch_at[i]),
                           batch_ids.begin() + std::ptrdiff_t(batch_at[i + 1]));
        s.batch_at.push_back(s.batch_ids.size());
      }
      sag_enqueue(s, s.queued.size() - 1);
    }
  }
}

SagScalars CudaBackend::incremental_scalars(IncrementalState& state) {
  CudaSag& s = G(state);
  sag_finish(s);
  return s.scalars;
}

void CudaBackend::incremental_set_scalars(IncrementalState& state, const SagScalars& scalars) {
  CudaSag& s = G(state);
  sag_finish(s);
  s.scalars = scalars;
  if (s.queue.size() < 1) s.queue.resize(1);
  s.hq.s = scalars;
  s.hq.halt = SagQueueState::kNoHalt;
  CRFX_CUDA_CHECK(cudaMemcpyAsync(s.queue.get(), &s.hq, sizeof s.hq, cudaMemcpyHostToDevice, stream_));
}

// ---- SAG-NUS's sampler on the device ------------------------------------------------------

bool SagDeviceSampler::held(const SagSamplerRef& host) const {
  const std::size_t n = host.s->n, tree = 2 * host.s->leaves;
  return h_sc.size() == sizeof *host.s && h_sum.size() == tree && h_seen.size() == n &&
         std::memcmp(h_sc.data(), host.s, sizeof *host.s) == 0 &&
         std::equal(h_seen.begin(), h_seen.end(), host.seen) &&
         std::memcmp(h_sum.data(), host.sum, tree * sizeof(double)) == 0 &&
         std::memcmp(h_max.data(), host.max, tree * sizeof(double)) == 0;
}

void SagDeviceSampler::keep(const SagSamplerRef& host) {
  const std::size_t n = host.s->n, tree = 2 * host.s->leaves;
  const auto* sc_bytes = reinterpret_cast<const unsigned char*>(host.s);
  h_sc.assign(sc_bytes, sc_bytes + sizeof *host.s);
  h_sum.assign(host.sum, host.sum + tree);
  h_max.assign(host.max, host.max + tree);
  h_seen.assign(host.seen, host.seen + n);
}

void SagDeviceSampler::upload(const SagSamplerRef& host, cudaStream_t s) {
  if (held(host)) return;
  keep(host);
  const std::size_t n = host.s->n, tree = 2 * host.s->leaves;
  if (sc.size() < 1) sc.resize(1);
  if (sum.size() != tree) sum.resize(tree);
  if (max.size() != tree) max.resize(tree);
  if (seen.size() != n) seen.resize(n);
  CRFX_CUDA_CHECK(cudaMemcpyAsync(sc.get(), host.s, sizeof *host.s, cudaMemcpyHostToDevice, s));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(sum.get(), host.sum, tree * sizeof(double), cudaMemcpyHostToDevice, s));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(max.get(), host.max, tree * sizeof(double), cudaMemcpyHostToDevice, s));
  if (n) CRFX_CUDA_CHECK(cudaMemcpyAsync(seen.get(), host.seen, n, cudaMemcpyHostToDevice, s));
}

void SagDeviceSampler::download(const SagSamplerRef& host, cudaStream_t s) {
  const std::size_t n = host.s->n, tree = 2 * host.s->leaves;
  if (sum.size() != tree || seen.size() != n) throw Error("internal: the device's sampler is not the host's");
  CRFX_CUDA_CHECK(cudaMemcpyAsync(host.s, sc.get(), sizeof *host.s, cudaMemcpyDeviceToHost, s));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(host.sum, sum.get(), tree * sizeof(double), cudaMemcpyDeviceToHost, s));
  CRFX_CUDA_CHECK(cudaMemcpyAsync(host.max, max.get(), tree * sizeof(double), cudaMemcpyDeviceToHost, s));
  if (n) CRFX_CUDA_CHECK(cudaMemcpyAsync(host.seen, seen.get(), n, cudaMemcpyDeviceToHost, s));
}

}  // namespace crfx::cuda::detail

namespace crfx::cuda {

void sag_sampler_steps_on_device(int device, const SagSamplerRef& sampler, std::size_t count,
                                 const std::function<double(std::uint32_t, double)>& search, double lip_mult,
                                 double lambda, SagDraw* draws, double* alpha) {
  CRFX_CUDA_CHECK(cudaSetDevice(device));
  detail::SagDeviceSampler dev;
  detail::DeviceBuffer<SagDraw> draw(1);
  detail::DeviceBuffer<double> x(3);  // L0, the L found, α
  dev.upload(sampler, nullptr);
  for (std::size_t t = 0; t < count; ++t) {
    detail::launch_sag_draw(dev.ref(), draw.get(), x.get(), nullptr);
    double L[2];
    CRFX_CUDA_CHECK(cudaMemcpy(&draws[t], draw.get(), sizeof(SagDraw), cudaMemcpyDeviceToHost));
    CRFX_CUDA_CHECK(cudaMemcpy(&L[0], x.get(), sizeof(double), cudaMemcpyDeviceToHost));
    L[1] = search(draws[t].id, L[0]);
    CRFX_CUDA_CHECK(cudaMemcpy(x.get() + 1, &L[1], sizeof(double), cudaMemcpyHostToDevice));
    detail::launch_sag_found(dev.ref(), draw.get(), x.get(), x.get() + 1, lip_mult, lambda, x.get() + 2, nullptr);
    CRFX_CUDA_CHECK(cudaMemcpy(&alpha[t], x.get() + 2, sizeof(double), cudaMemcpyDeviceToHost));
  }
  dev.download(sampler, nullptr);
  CRFX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  dev.downloaded(sampler);
}

}  // namespace crfx::cuda
