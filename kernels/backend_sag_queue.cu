// crfx — CudaBackend (cuda_backend.cuh): SAG / SAGA's scheduled steps (uniform sampling, batch
// size 1) queued on the device, so that an epoch waits for the device a few times rather than
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
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "cuda_api.hpp"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "sag_kernels.cuh"

namespace crfx::cuda::detail {
namespace {

constexpr int kRounds = 2;                                 // line-search rounds queued per step
constexpr std::size_t kMinQueue = 64, kMaxQueue = 1u << 14;  // steps between two waits

}  // namespace

void CudaBackend::incremental_schedule(IncrementalState& state, SentenceSpan span, const SagStepParams& p, Vector& w,
                                       Vector& d) {
  CudaSag& s = G(state);
  if (span.count != 1 || s.k() + s.queued.size() + 2 >= 0xffffffffu) {  // several sentences, or stamps near 2³²
    sag_finish(s);
    schedule_on_host(*this, state, span, p, w, d);
    return;
  }
  if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
    throw Error("internal: SAG vectors have the wrong size");
  if (!s.queued.empty() && (s.queued.size() >= s.queue_cap || s.qw != &w || s.qd != &d)) sag_finish(s);
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
  if (s.queue.size() < 1) incremental_set_scalars(state, state.scalars);
  if (s.queued.empty()) {
    s.queue_k0 = s.k();
    s.qw = &w;
    s.qd = &d;
  }
  select_sentence(*s.corpus, span[0], s.plan);  // its checks, before anything is queued
  s.queued.emplace_back(span[0], p);
  sag_enqueue(s, s.queued.size() - 1);
}

void CudaBackend::sag_enqueue(CudaSag& s, std::size_t at) {
  const std::uint32_t sid = s.queued[at].first;
  const SagStepParams& p = s.queued[at].second;
  Vector& w = *s.qw;
  s.synced = s.evaluated = s.tried = false;
  select_sentence(*s.corpus, sid, s.plan);
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
    sentence_loss_on_device(*s.corpus, w, span);
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
  // The host's history holds a placeholder for the step until the wait reads it back.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.P.push_back(nan);
  s.S.push_back(nan);
  s.R.push_back(nan);
  s.uploaded = s.k() + 1;
  s.evaluated = false;  // nothing to commit or restore by the host's primitives
}

void CudaBackend::sag_finish(CudaSag& s) {
  while (!s.queued.empty()) {
    // The scalars and the history's steps queue_k0 + 1 … k, as the device left them.
    const std::size_t k0 = s.queue_k0, m = s.k() - k0;
    CRFX_CUDA_CHECK(cudaMemcpyAsync(&s.hq, s.queue.get(), sizeof s.hq, cudaMemcpyDeviceToHost, stream_));
    for (auto [dst, src] : {std::pair{&s.P, &s.dP}, std::pair{&s.S, &s.dS}, std::pair{&s.R, &s.dR}})
      CRFX_CUDA_CHECK(cudaMemcpyAsync(dst->data() + k0 + 1, src->get() + k0 + 1, m * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    sync();
    auto queued = std::move(s.queued);
    s.queued.clear();
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
    const std::uint32_t sid = queued[h].first;
    incremental_sync(s, SentenceSpan{&sid, 1}, w, d);  // its groups are caught up already: no-op
    const LipschitzFound found = incremental_search(s, w, s.scalars.L);
    finish_sag_step(*this, s, 1, queued[h].second, found, w, d);
    incremental_set_scalars(s, s.scalars);
    s.queue_k0 = s.k();
    s.qw = &w;
    s.qd = &d;
    for (std::size_t i = h + 1; i < queued.size(); ++i) {
      s.queued.push_back(queued[i]);
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

void SagDeviceSampler::upload(const SagSamplerRef& host, cudaStream_t s) {
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
}

}  // namespace crfx::cuda
