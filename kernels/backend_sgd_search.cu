// crfx — CudaBackend (cuda_backend.cuh): sgd-l1's step with its heuristic line search on a
// one-sentence batch, decided on the device (SparseGradients::sgd_l1_search_step; issue 37). The
// host's step (host/optim/sgd_l1.cpp: batch_gradient, sgd_l1_search_on_host, the update) through
// the same primitives' kernels, with the loss and the penalties left on the device and
// SgdL1Search run there by one-thread kernels (sgd_search_kernels.cu): nothing copied, nothing
// waited for. The rates are the host's (SgdL1StepParams), so no log1p is computed here.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "cuda_backend.cuh"
#include "run_kernels.cuh"
#include "sgd_search_kernels.cuh"

namespace crfx::cuda::detail {

bool CudaBackend::sgd_l1_search_step(const BackendCorpus& bc, SentenceSpan span, const SgdL1StepParams& p, Vector& w,
                                     Vector* q, Vector* stamp, Vector& scalars, SparseVector& gs,
                                     SparseVector& saveds) {
  const CudaCorpus& c = C(bc);
  // A one-sentence loss on the device is seq-log's forward pass (sentence_loss_on_device).
  if (span.count != 1 || p.loss != SequenceLoss::seq_log || c.stream || span[0] >= c.S || !c.h_labeled[span[0]])
    return false;
  if (scalars.size() != 2) throw Error("internal: sgd-l1's device scalars are u and Λ, not " +
                                       std::to_string(scalars.size()) + " values");
  if (q) same(w, *q);
  if (stamp) same(w, *stamp);
  CudaSparse& g = X(gs);
  CudaSparse& saved = X(saveds);
  double* const sc = P(scalars);
  if (lsd_red_.size() < std::size_t(kRedBlocks) + 1) lsd_red_.resize(std::size_t(kRedBlocks) + 1);
  if (lsd_search_.size() < 1) lsd_search_.resize(1);
  double* const red = lsd_red_.get();
  const double* const penalty = red + kRedBlocks;
  SgdL1Search* const search = lsd_search_.get();
  // batch_gradient: the support's weights caught up to Λ, the gradient (scale 1/M = 1), the NLL
  // left in losses_[0].
  if (stamp) {
    support(bc, span, gs);
    check_index(g, w.size());
    launch_sgd_catch_up(g.n, g.index.get(), P(w), P(*stamp), sc, stream_);
  }
  sparse_pass(c, w, span, g, 1.0, stamp != nullptr, p.loss, false);
  check_index(g, w.size());
  // sgd_l1_search_on_host: w saved over the support, l(w), then the trials.
  sparse_copy(gs, saveds);
  gather(w, saveds);
  launch_sgd_penalty(saved.n, saved.value.get(), p.c1, p.c2, red, stream_);
  launch_sgd_search_start(search, losses_.get(), penalty, stream_);
  double* const qd = q ? P(*q) : nullptr;
  for (int trial = 0; trial < SgdL1Search::kTrials; ++trial) {
    launch_sgd_trial(g.n, g.index.get(), g.value.get(), p, search, sc, P(w), qd, red, stream_);
    sentence_loss_on_device(c, w, span);
    scatter(saveds, w);  // exact restore
    launch_sgd_search_tried(search, losses_.get(), penalty, stream_);
  }
  // The update at the rate chosen, u and Λ advanced.
  launch_sgd_search_end(search, p, sc, stream_);
  launch_sgd_step(g.n, g.index.get(), g.value.get(), p, search, sc, P(w), qd, stream_);
  return true;
}

bool CudaBackend::gradient_steps(const BackendCorpus& bc, SentenceSpan span, Vector& w, const GradientSteps& s) {
  const CudaCorpus& c = C(bc);
  // The step's forward-backward at one sentence is the warp kernel's (L ≤ 32), its gradient seq-log's.
  if (runs_refused(c) || dims_.L > 32 || s.loss != SequenceLoss::seq_log) return false;
  if (span.count == 0) return true;  // (the trainer's question)
  for (Vector* v : {s.q, s.rate, s.count, s.stamp})
    if (v) same(w, *v);
  if ((s.adf && (!s.rate || !s.count)) || (s.stamp && !s.clock) || (!s.adf && (!s.eta || !s.u)))
    throw Error("internal: gradient steps without their operands");
  GradientRun r{};
  r.run = run_params(c, span, w, nullptr);
  r.fb = fb_params(arrays(c), w);  // (its chunk, τ and E are the run's own)
  r.fb.gold = true;
  r.fb.backward = true;
  r.fb.node = node_.get();
  r.fb.pair = pair_.get();
  r.adf = s.adf;
  r.coef = s.coef;
  r.q = s.q ? P(*s.q) : nullptr;
  r.rate = s.rate ? P(*s.rate) : nullptr;
  r.count = s.count ? P(*s.count) : nullptr;
  r.stamp = s.stamp ? P(*s.stamp) : nullptr;
  for (std::size_t begin = 0; begin < span.count; begin += kRunIds) {
    r.run.steps = std::min(kRunIds, span.count - begin);
    for (std::size_t i = 0; i < r.run.steps; ++i) {
      r.run.ids[i] = span[begin + i];
      r.clock[i] = s.clock ? s.clock[begin + i] : 0.0;
      r.eta[i] = s.eta ? s.eta[begin + i] : 0.0;
      r.u[i] = s.u ? s.u[begin + i] : 0.0;
    }
    launch_gradient_run(r, stream_);
  }
  return true;
}

}  // namespace crfx::cuda::detail
