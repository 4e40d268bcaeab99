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
#include "rules/sgd_l1_search.hpp"
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
  // The step's forward-backward at one sentence is the warp kernel's (L ≤ 32) or a block of threads_
  // (≤ 64 at L ≤ kRunMaxL: the run's group), its gradient seq-log's.
  if (runs_refused(c) || s.loss != SequenceLoss::seq_log) return false;
  if (span.count == 0) return true;  // (the trainer's question)
  for (Vector* v : {s.q, s.rate, s.count, s.stamp})
    if (v) same(w, *v);
  const bool search = s.line_search;
  if (search ? !s.search || !s.scalars || s.adf || s.axpy
             : (s.adf && (!s.rate || !s.count)) || (s.stamp && !s.clock) || (!s.adf && !s.eta) ||
                   (!s.adf && !s.axpy && !s.u) || (s.loss_sum && s.loss_sum->size() != 1))
    throw Error("internal: gradient steps without their operands");
  GradientRun r{};
  r.run = run_params(c, span, w, nullptr);
  r.fb = fb_params(arrays(c), w);  // (its chunk, τ and E are the run's own)
  r.fb.gold = true;
  r.fb.backward = true;
  r.fb.node = node_.get();
  r.fb.pair = pair_.get();
  r.adf = s.adf;
  r.axpy = s.axpy;
  r.loss = s.loss_sum ? P(*s.loss_sum) : nullptr;
  r.search = search;
  r.fb_threads = threads_;
  r.E = E_.get();
  r.Et = Et_.get();
  r.coef = s.coef;
  r.q = s.q ? P(*s.q) : nullptr;
  r.rate = s.rate ? P(*s.rate) : nullptr;
  r.count = s.count ? P(*s.count) : nullptr;
  r.stamp = s.stamp ? P(*s.stamp) : nullptr;
  if (search) search_run_params(s, span.count, r);
  for (std::size_t begin = 0; begin < span.count; begin += kRunIds) {
    r.run.steps = std::min(kRunIds, span.count - begin);
    for (std::size_t i = 0; i < r.run.steps; ++i) {
      r.run.ids[i] = span[begin + i];
      double* const ps = r.per_step + i * (search ? 6 : 3);
      if (search) {
        const SgdL1StepParams& sp = s.search[begin + i];
        ps[0] = sp.rate[-SgdL1StepParams::kLow];
        for (int k = 0; k < SgdL1StepParams::kRates; ++k) ps[1 + k] = sp.log_decay[k];
      } else {
        ps[0] = s.clock ? s.clock[begin + i] : 0.0;
        ps[1] = s.eta ? s.eta[begin + i] : 0.0;
        ps[2] = s.u ? s.u[begin + i] : 0.0;
      }
    }
    launch_gradient_run(r, stream_);
  }
  return true;
}

void CudaBackend::search_run_params(const GradientSteps& s, std::size_t steps, GradientRun& r) {
  // The device remakes each step's rates from η and r·c1/N of each (run_step_params): checked here
  // against the host's, so that a change to sgd_l1_step_params cannot pass unnoticed.
  for (std::size_t i = 0; i < steps; ++i) {
    const SgdL1StepParams& sp = s.search[i];
    const SgdL1StepParams h = sgd_l1_step_params(sp.rate[-SgdL1StepParams::kLow], s.c1, 0.0, s.N, sp.loss);
    bool same_rates = h.c1 == sp.c1 && sp.loss == SequenceLoss::seq_log;
    for (int k = 0; k < SgdL1StepParams::kRates; ++k)
      same_rates = same_rates && h.rate[k] == sp.rate[k] && h.u_step[k] == sp.u_step[k];
    if (!same_rates) throw Error("internal: sgd-l1's step rates are not sgd_l1_step_params' of its η");
  }
  if (s.scalars->size() != 2) throw Error("internal: sgd-l1's device scalars are u and Λ, not " +
                                          std::to_string(s.scalars->size()) + " values");
  r.c1 = s.c1;
  r.N = s.N;
  r.pc1 = s.search[0].c1;
  r.pc2 = s.search[0].c2;
  r.scalars = P(*s.scalars);
  const SentencePlans& sp = sentence_plans_;  // (run_params made them)
  r.gofs = sp.gofs.get();
  reserve_device(run_index_, sp.most_compact);
  reserve_device(run_g_, sp.most_compact);
  reserve_device(run_saved_, sp.most_compact);
  r.idx = run_index_.get();
  r.g = run_g_.get();
  r.saved = run_saved_.get();
}

}  // namespace crfx::cuda::detail
