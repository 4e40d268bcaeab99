// crfx — CudaBackend (cuda_backend.cuh): pa's, arow's and mira's step left on the device (issue 37).
// The decode and Δ are ap's (decode_on_device, backend_perceptron.cu; a batch's Δ summed in its
// dense scratch, batch_difference, then gathered over S(batch) as sgd-l1's batch gradient is,
// batch_support: the sparse Δ the host's feature_difference uploads); then w·Δ and ‖Δ‖² (arow:
// Σ Δ_j²·Σ_jj) by the very reductions apply_rule and sparse_penalty run (the same kernels,
// reduce_on_device: the same sums), left on the device, where one thread takes ℓ and τ (α) by
// the host's formulas (host/rules/peer_update.hpp), the update's gate and u's coefficient, and
// adds ℓ to the epoch's sum; the updates read them there. Nothing is read back per step: the
// loss sum once, when the trainer asks (an epoch's end, a checkpoint). Bitwise the primitives'
// path: map_reduce → sparse_penalty → the host's τ → sparse_axpy (arow: map of ArowUpdateRule).
// mira's bounds B_i and shrinking counts live on the device between the host's looks (set_mira_state,
// mira_state), its K in the loss slot; the host still picks the sentences a shrunk epoch skips.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "batch_kernels.cuh"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "peer_step.cuh"
#include "rule_term.cuh"
#include "rules/rule_set.hpp"
#include "run_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

// peer_'s layout: two reductions (kRedBlocks partials, then the sum), then the step's scalars.
constexpr std::size_t kDot = 0, kSecond = kRedBlocks + 1, kScalars = 2 * (kRedBlocks + 1);
constexpr std::size_t kTau = 0, kUTau = 1, kGate = 2, kLoss = 3, kPeerSize = kScalars + 4;

/// mira's step scalars (its update() and decoded()): the shrinking count, μ by mira_step with
/// B_i and K (the loss slot) on the device, the gate μ > 1e-10.
__device__ void mira_scalars(const PeerParams& p, std::uint32_t d, const double* s, double* out) {
  if (d == 0) {
    ++p.shrink[p.sid];
    out[kGate] = 0.0;
    return;
  }
  p.shrink[p.sid] = 0;
  const double dot = s[kDot + kRedBlocks], second = s[kSecond + kRedBlocks];
  const double mu = mira_step(double(d), -dot, second, p.mira_c, p.bounds[p.sid], out[kLoss]);
  out[kTau] = mu;
  out[kGate] = mu > 1e-10 ? 1.0 : 0.0;
}

/// The step's scalars from the decode's mistakes and the two sums, as the host's update() takes
/// them: nothing (gate 0) without a mistake; else ℓ added to the loss sum, τ (α), u's (t − 1)·τ
/// and the gate (pa: τ ≠ 0; arow: always).
__global__ void peer_scalars_kernel(PeerParams p, const std::uint32_t* wrong, double* s) {
  double* out = s + kScalars;
  const std::uint32_t d = *wrong;
  if (p.mira) {
    mira_scalars(p, d, s, out);
    return;
  }
  if (d == 0) {
    out[kGate] = 0.0;
    return;
  }
  const PeerScalars k = peer_scalars(p, d, s[kDot + kRedBlocks], s[kSecond + kRedBlocks]);
  out[kGate] = k.gate ? 1.0 : 0.0;
  out[kTau] = k.tau;
  out[kUTau] = mul_rn(p.u_scale, k.tau);
  out[kLoss] = out[kLoss] + k.loss;
}

__global__ void set_loss_kernel(double* s, double value) { s[kScalars + kLoss] = value; }

}  // namespace

void CudaBackend::set_peer_loss(double value) {
  if (peer_.size() == 0) {
    peer_.resize(kPeerSize);
    CRFX_CUDA_CHECK(cudaMemsetAsync(peer_.get(), 0, kPeerSize * sizeof(double), stream_));
  }
  CRFX_LAUNCH(set_loss_kernel, 1, 1, 0, stream_, peer_.get(), value);
}

double CudaBackend::peer_loss() {
  if (peer_.size() == 0) return 0.0;
  double r = 0;
  CRFX_CUDA_CHECK(
      cudaMemcpyAsync(&r, peer_.get() + kScalars + kLoss, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  sync();
  return r;
}

void CudaBackend::set_mira_state(const float* bounds, const std::uint32_t* shrink, std::size_t n) {
  mira_bounds_.resize(n);
  mira_shrink_.resize(n);
  if (n == 0) return;
  CRFX_CUDA_CHECK(cudaMemcpyAsync(mira_bounds_.get(), bounds, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  CRFX_CUDA_CHECK(
      cudaMemcpyAsync(mira_shrink_.get(), shrink, n * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream_));
  sync();  // the caller's arrays are free again (they change between the epochs)
}

void CudaBackend::mira_state(float* bounds, std::uint32_t* shrink, std::size_t n) {
  if (n == 0 || mira_bounds_.size() != n) return;
  CRFX_CUDA_CHECK(cudaMemcpyAsync(bounds, mira_bounds_.get(), n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CRFX_CUDA_CHECK(
      cudaMemcpyAsync(shrink, mira_shrink_.get(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream_));
  sync();
}

bool CudaBackend::peer_steps(const BackendCorpus& bc, SentenceSpan span, const PeerStep& step, Vector& w, Vector* u,
                             double t0, SparseVector& scratch) {
  const CudaCorpus& c = C(bc);
  if (runs_refused(c)) return false;
  if (step.arow && (!step.variance || step.variance->size() != w.size())) return false;
  if (span.count == 0) return true;  // (the trainer's question)
  // mira's bounds and counts are its sentences' (set_mira_state first), its u none.
  for (std::size_t i = 0; step.mira && i < span.count; ++i)
    if (span[i] >= mira_bounds_.size()) throw Error("internal: mira's run before its bounds");
  PeerRun q{run_params(c, span, w, step.arow || step.mira ? nullptr : u), {}, nullptr, nullptr, nullptr, nullptr,
            nullptr};
  q.step.mira = step.mira;
  q.step.mira_c = step.mira_c;
  q.step.bounds = step.mira ? mira_bounds_.get() : nullptr;
  q.step.shrink = step.mira ? mira_shrink_.get() : nullptr;
  q.step.arow = step.arow;
  q.step.pa_type = step.pa_type;
  q.step.c = step.c;
  q.step.gamma = step.gamma;
  q.step.error_sensitive = step.error_sensitive;
  q.variance = step.arow ? P(*step.variance) : nullptr;
  CudaSparse& x = X(scratch);  // Δ over the sentence's compact support
  x.reserve(sentence_plans_.most_compact);
  x.n = x.end = 0;
  q.gofs = sentence_plans_.gofs.get();
  q.idx = x.index.get();
  q.val = x.value.get();
  if (peer_.size() == 0) set_peer_loss(0.0);
  q.loss = peer_.get() + kScalars + kLoss;
  for_each_run(span, t0, q.run, [&] { launch_peer_run(q, stream_); });
  return true;
}

bool CudaBackend::peer_step(const BackendCorpus& bc, SentenceSpan span, const PeerStep& step, Vector& w, Vector* u,
                            double u_scale, SparseVector& delta) {
  const CudaCorpus& c = C(bc);
  if (step.arow && (!step.variance || step.variance->size() != w.size())) return false;
  // mira's bounds are a sentence's (its trainer steps one at a time); set_mira_state first.
  if (step.mira && (span.count != 1 || span[0] >= mira_bounds_.size())) return false;
  CudaSparse& x = X(delta);
  if (!decode_on_device(c, span, w, u, x)) return false;
  // A batch: x ← S(batch), as the host's support (batch_support: refused only where its offsets
  // would pass 2³², the decode then wasted), and Δ summed in the host's order and gathered over it
  // — the sparse Δ the primitives upload, the reductions below over the same entries in the same
  // order; the mistakes d of the whole batch in mistakes_.
  if (span.count > 1) {
    if (!batch_support(c, span, x)) return false;
    launch_batch_gather(x.n, x.index.get(), 1.0, batch_difference(c, span, w.size()), x.value.get(), stream_);
  }
  if (peer_.size() == 0) set_peer_loss(0.0);
  double* s = peer_.get();
  RuleTerm<SparseDotRule> dot{SparseDotRule{}, x.index.get(), x.value.get(), {}};
  dot.base[0] = P(w);
  reduce_on_device(x.n, dot, SumOp{}, 0.0, s + kDot, stream_);
  if (step.arow) {
    RuleTerm<ArowVarianceRule> conf{ArowVarianceRule{}, x.index.get(), x.value.get(), {}};
    conf.base[0] = P(*step.variance);
    reduce_on_device(x.n, conf, SumOp{}, 0.0, s + kSecond, stream_);
  } else {
    reduce_on_device(x.n, PenaltyTerm{x.value.get(), 0.0, 1.0}, SumOp{}, 0.0, s + kSecond, stream_);
  }
  const PeerParams p{step.arow, step.pa_type, step.c,    step.gamma,         u_scale,           step.error_sensitive,
                     step.mira, step.mira_c,  span[0], mira_bounds_.get(), mira_shrink_.get()};
  CRFX_LAUNCH(peer_scalars_kernel, 1, 1, 0, stream_, p, mistakes_.get(), s);
  const double* out = s + kScalars;
  if (step.arow) {
    launch_map(x.n, PeerArowOp{x.index.get(), x.value.get(), P(w), P(*step.variance), out + kTau, step.gamma,
                               out + kGate},
               stream_);
    return true;
  }
  launch_map(x.n, gated_axpy(x.index.get(), x.value.get(), P(w), out + kTau, out + kGate), stream_);
  if (u) launch_map(x.n, gated_axpy(x.index.get(), x.value.get(), P(*u), out + kUTau, out + kGate), stream_);
  return true;
}

}  // namespace crfx::cuda::detail
