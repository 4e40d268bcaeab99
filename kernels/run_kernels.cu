// crfx — the stochastic trainers' runs at batch size 1 (declared in run_kernels.cuh; issue 37):
// one block takes the run's steps one after another, each through the device functions the
// step's own launches use, with a barrier between the steps so that each reads the weights the
// last one left. CPU twins: the trainers' steps through the primitives (host/optim/perceptron.cpp,
// passive_aggressive.cpp, arow.cpp, mira.cpp, sgd_l1.cpp, adf.cpp, l2sgd.cpp; sag.cpp's
// scheduled steps, IncrementalGradients' default).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "crfx/errors.hpp"
#include "decode_kernels.cuh"
#include "fb_device.cuh"
#include "launch.cuh"
#include "rule_term.cuh"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_search.hpp"
#include "run_kernels.cuh"
#include "sag_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

constexpr unsigned kRunThreads = 256, kRunWarps = kRunThreads / 32;
static_assert(kRunThreads == unsigned(kRedThreads), "a run's sums are reduce_on_device's blocks, one after another");
using RunReduce = cub::BlockReduce<double, kRunThreads>;

/// A run's dynamic shared memory: τ at w [L][L], Viterbi's rows t − 1 and t [2][L], a sparse
/// layout's emission sums [kRunWarps][L].
struct RunShared {
  double *M, *rows, *acc;
};
__device__ RunShared run_shared(std::size_t L, double* smem) { return {smem, smem + L * L, smem + L * L + 2 * L}; }
std::size_t run_shared_bytes(std::size_t L) { return (L * L + (2 + kRunWarps) * L) * sizeof(double); }

/// The emissions of a sentence's T rows from token tok0 into p.S, a warp a row (the emission
/// kernels' sums: the same whatever the lanes a row); `acc` [kRunWarps][L] shared.
__device__ void run_emissions(const PerceptronRun& p, std::size_t tok0, std::size_t T, double* acc) {
  const unsigned L = unsigned(p.gl.L), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::size_t r0 = 0; r0 < T; r0 += kRunWarps) {  // (every warp the same number of rounds)
    const std::size_t r = r0 + warp;
    const bool live = r < T;
    const std::size_t k0 = live ? p.state_off[tok0 + r] : 0, k1 = live ? p.state_off[tok0 + r + 1] : 0;
    emission_row<32>(L, live, k0, k1, lane, p.state_ids, p.state_vals, p.w, p.gl, acc + warp * L, p.S + r * L);
  }
}

/// τ_t (edge_entry from τ in M, complete) into p.edge at the sentence's rows with edge items.
__device__ void run_edge_rows(const PerceptronRun& p, std::size_t tok0, std::size_t T, const double* M) {
  const std::size_t LL = p.gl.L * p.gl.L;
  for (std::size_t r = 1; p.edge_off && r < T; ++r)
    if (row_has_edge(p.edge_off, tok0 + r, r))
      for (std::size_t j = threadIdx.x; j < LL; j += kRunThreads)
        p.edge[r * LL + j] = edge_entry(p.gl, M[j], j, p.edge_off[tok0 + r], p.edge_off[tok0 + r + 1],
                                        p.edge_ids, p.edge_vals, p.w);
}

/// Sentence sid's decode by the whole block, as perceptron_step's launches take it: τ at w
/// (dense_row_entry), the emissions (a warp a row), the edge rows' τ_t (edge_entry), Viterbi (its
/// last two rows in shared memory) into p.path. Returns, in every thread, the rows with ŷ ≠ y.
__device__ std::uint32_t run_decode(const PerceptronRun& p, std::uint32_t sid, const RunShared& sh) {
  const unsigned L = unsigned(p.gl.L), tid = threadIdx.x;
  const std::size_t LL = std::size_t(L) * L;
  __shared__ std::uint32_t wrong;
  const BatchPlans& t = p.t;
  const std::size_t tok0 = t.sent_off[sid], T = t.sent_off[sid + 1] - tok0;
  for (std::size_t j = tid; j < LL; j += kRunThreads) sh.M[j] = dense_row_entry(p.gl, p.gl.A, j, p.w);
  run_emissions(p, tok0, T, sh.acc);
  if (tid == 0) wrong = 0;
  __syncthreads();
  if (T == 0) return 0;  // (block-uniform) no path, no mistake
  run_edge_rows(p, tok0, T, sh.M);
  for (unsigned y = tid; y < L; y += kRunThreads) sh.rows[y] = p.S[y];
  __syncthreads();
  for (std::size_t r = 1; r < T; ++r) {
    const double* dp = sh.rows + ((r - 1) & 1) * L;
    const double* M = row_has_edge(p.edge_off, tok0 + r, r) ? p.edge + r * LL : sh.M;
    for (unsigned yc = tid; yc < L; yc += kRunThreads) {
      double best;
      std::uint32_t arg;
      best_predecessor(dp, M, int(L), int(yc), best, arg);
      sh.rows[(r & 1) * L + yc] = best + p.S[r * L + yc];
      p.back[r * L + yc] = arg;
    }
    __syncthreads();
  }
  if (tid == 0) backtrack(sh.rows + ((T - 1) & 1) * L, p.back, int(L), T, p.path);
  __syncthreads();
  for (std::size_t r = tid; r < T; r += kRunThreads)
    if (t.gold[tok0 + r] != t.pred[r]) atomicAdd(&wrong, 1u);
  __syncthreads();
  return wrong;  // (read before the step's last barrier: the next step's reset comes after it)
}

/// f(j) for each weight of sentence sid's plan, in the plan's order (its compact support's:
/// group q's weights from gofs[q]), a warp a group: f(j, weight, Δ_weight).
template <class F>
__device__ void for_each_difference(const PerceptronRun& p, std::uint32_t sid, const std::size_t* gofs, F f) {
  const BatchPlans& t = p.t;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t tok0 = t.sent_off[sid];
  const DecodedRows d{t.tokens + tok0, t.gold, t.pred, t.sent_off[sid + 1] - tok0};
  const std::size_t g0 = t.gbase[sid], ng = t.gbase[sid + 1] - g0, o0 = t.obase[sid];
  for (std::size_t q = warp; q < ng; q += kRunWarps) {
    const std::uint32_t gid = t.groups[g0 + q];
    const std::size_t b = p.gl.begin(gid), size = p.gl.size(gid), j0 = gofs ? gofs[g0 + sid + q] : 0;
    for (std::size_t c = lane; c < size; c += 32)
      f(j0 + c, b + c,
        sentence_sum(p.gl, gid, p.gl.slot(b + c, gid), d, t.oofs + g0 + sid + q, t.onew + o0, t.oval + o0, 1.0, 0.0));
  }
}

/// Σ f(j) over j < n by reduce_on_device's two passes — its grid's blocks one after another, each
/// with cub's block reduction — so its bits; returned in every thread.
template <class F>
__device__ double run_sum(std::size_t n, const F& f, double* partial, RunReduce::TempStorage& tmp, double* out) {
  const unsigned tid = threadIdx.x;
  const std::size_t blocks = n ? min((n + kRunThreads - 1) / kRunThreads, std::size_t(kRedBlocks)) : 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    double acc = 0.0;
    for (std::size_t i = b * kRunThreads + tid; i < n; i += blocks * kRunThreads) acc = SumOp{}(acc, f(i));
    const double r = RunReduce(tmp).Reduce(acc, SumOp{});
    if (tid == 0) partial[b] = r;
    __syncthreads();
  }
  double acc = 0.0;
  for (std::size_t i = tid; i < blocks; i += kRunThreads) acc = SumOp{}(acc, partial[i]);
  const double r = RunReduce(tmp).Reduce(acc, SumOp{});
  if (tid == 0) *out = r;
  __syncthreads();
  return *out;
}

/// ap: where the path has a mistake, w += Δ and u += (t0 + i)·Δ (gated_axpy's expressions).
__global__ void __launch_bounds__(kRunThreads) perceptron_run_kernel(PerceptronRun p) {
  CRFX_DYNAMIC_SHARED(double, smem);
  const RunShared sh = run_shared(p.gl.L, smem);
  for (std::size_t i = 0; i < p.steps; ++i) {
    const std::uint32_t sid = p.ids[i];
    if (run_decode(p, sid, sh) != 0) {
      const double a = p.t0 + double(i);
      for_each_difference(p, sid, nullptr, [&](std::size_t, std::size_t k, double delta) {
        p.w[k] += 1.0 * delta;
        if (p.u && a != 0) p.u[k] += a * delta;
      });
    }
    __syncthreads();
  }
}

/// pa, arow: where the path has a mistake, Δ into idx/val, the two sums, the scalars (thread 0,
/// ℓ added to the loss), then the gated updates over idx/val as peer_step's maps take them.
__global__ void __launch_bounds__(kRunThreads) peer_run_kernel(PeerRun q) {
  const PerceptronRun& p = q.run;
  CRFX_DYNAMIC_SHARED(double, smem);
  const RunShared sh = run_shared(p.gl.L, smem);
  __shared__ double partial[kRedBlocks];
  __shared__ RunReduce::TempStorage tmp;
  __shared__ double sums[2], scalars[2];  // w·Δ, ‖Δ‖² (Σ Δ²·Σ); τ (α), the gate
  for (std::size_t i = 0; i < p.steps; ++i) {
    const std::uint32_t sid = p.ids[i];
    const std::uint32_t d = run_decode(p, sid, sh);
    if (d == 0 && q.step.mira && threadIdx.x == 0) ++q.step.shrink[sid];  // (mira_scalars')
    if (d != 0) {
      for_each_difference(p, sid, q.gofs, [&](std::size_t j, std::size_t k, double delta) {
        q.idx[j] = k;
        q.val[j] = delta;
      });
      __syncthreads();
      const std::size_t f0 = p.t.gbase[sid] + sid, n = q.gofs[f0 + p.t.gbase[sid + 1] - p.t.gbase[sid]] - q.gofs[f0];
      RuleTerm<SparseDotRule> dot{SparseDotRule{}, q.idx, q.val, {}};
      dot.base[0] = p.w;
      run_sum(n, dot, partial, tmp, &sums[0]);
      if (q.step.arow) {
        RuleTerm<ArowVarianceRule> conf{ArowVarianceRule{}, q.idx, q.val, {}};
        conf.base[0] = q.variance;
        run_sum(n, conf, partial, tmp, &sums[1]);
      } else {
        run_sum(n, PenaltyTerm{q.val, 0.0, 1.0}, partial, tmp, &sums[1]);
      }
      if (threadIdx.x == 0 && q.step.mira) {  // mira_scalars': K in the loss slot, B_i and the count its sentence's
        q.step.shrink[sid] = 0;
        scalars[0] = mira_step(double(d), -sums[0], sums[1], q.step.mira_c, q.step.bounds[sid], *q.loss);
        scalars[1] = scalars[0] > 1e-10 ? 1.0 : 0.0;
      } else if (threadIdx.x == 0) {
        const PeerScalars k = peer_scalars(q.step, d, sums[0], sums[1]);
        *q.loss = *q.loss + k.loss;
        scalars[0] = k.tau;
        scalars[1] = k.gate ? 1.0 : 0.0;
      }
      __syncthreads();
      const double a = p.t0 + double(i), tau = scalars[0], utau = mul_rn(a, tau);
      const PeerArowOp arow{q.idx, q.val, p.w, q.variance, &scalars[0], q.step.gamma, &scalars[1]};
      for (std::size_t j = threadIdx.x; scalars[1] != 0 && j < n; j += kRunThreads) {
        if (q.step.arow) {
          arow(j);
          continue;
        }
        p.w[q.idx[j]] += tau * q.val[j];
        if (p.u && a != 0) p.u[q.idx[j]] += utau * q.val[j];
      }
    }
    __syncthreads();
  }
}

/// Rule r on weight k with operands at k of `base` (null: none), as RuleTerm's map takes it.
template <class R>
__device__ double apply_at(const R& r, std::size_t k, double g, double* const (&base)[3]) {
  double* v[MapOperands::kMax] = {};
  for (int o = 0; o < 3; ++o) v[o] = base[o] ? base[o] + k : nullptr;
  RuleMemo<R> memo{};
  return apply_element(r, g, v, memo);
}

/// f(q, gid, weight) for every weight of sentence sid's support (its plan's groups), a warp a group.
template <class F>
__device__ void for_each_weight(const PerceptronRun& p, std::uint32_t sid, F f) {
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t g0 = p.t.gbase[sid], ng = p.t.gbase[sid + 1] - g0;
  for (std::size_t q = warp; q < ng; q += kRunWarps) {
    const std::uint32_t gid = p.t.groups[g0 + q];
    const std::size_t b = p.gl.begin(gid), size = p.gl.size(gid);
    for (std::size_t c = lane; c < size; c += 32) f(q, gid, b + c);
  }
}

/// Sentence sid's one-sentence span plan (the plans made once) as span_group_sum reads it.
__device__ SagSpanView sentence_view(const PerceptronRun& p, std::uint32_t sid) {
  const std::size_t g0 = p.t.gbase[sid], o0 = p.t.obase[sid];
  return {p.t.groups + g0, nullptr, p.t.oofs + g0 + sid, p.t.onew + o0, nullptr, nullptr, p.t.oval + o0, nullptr, 1u};
}

/// A gradient run's dynamic shared memory: τ, E, Eᵀ and the pair sums [L][L] each, the
/// forward-backward's vec and rowa [L] each, the emission sums [kRunWarps][L]; and its static:
/// the one-sentence chunk the forward-backward reads, a max's scratch.
struct GradShared {
  double *M, *E, *Et, *pacc, *vec, *rowa, *acc;
  double* red;  // [32]
  std::uint32_t *sent, *order;  // [1] each
  std::size_t* slots;           // [2]
  __device__ ChunkView chunk() const { return {sent, slots, order}; }
};
std::size_t gradient_shared_bytes(std::size_t L) {
  return ((L <= 32 ? 4 : 1) * L * L + (2 + kRunWarps) * L) * sizeof(double);  // (L > 32: E, Eᵀ global)
}

/// A gradient run's GradShared: its dynamic shared memory `smem`, E and Eᵀ there at L ≤ 32 (with
/// the pair sums; else E, Et global), and the static arrays given.
__device__ GradShared gradient_shared(std::size_t L, double* smem, double* E, double* Et, double* red,
                                      std::uint32_t* sent, std::uint32_t* order, std::size_t* slots) {
  const std::size_t LL = L * L;
  const bool warp = L <= 32;
  double* const rest = smem + (warp ? 4 : 1) * LL;
  return {smem, warp ? smem + LL : E, warp ? smem + 2 * LL : Et, warp ? smem + 3 * LL : nullptr, rest,
          rest + L, rest + 2 * L, red, sent, order, slots};
}

/// The chunk front of sentence sid at w as prepare and run_chunk_front take it: τ, τ_max
/// (prepare_kernel's, a max: exact whatever the threads), E and Eᵀ, the emissions, the edge rows,
/// the chunk. Returns τ_max; ends with a barrier.
__device__ double gradient_front(const PerceptronRun& p, std::uint32_t sid, std::size_t tok0, std::size_t T,
                                 const GradShared& sh) {
  const std::size_t L = p.gl.L, LL = L * L;
  for (std::size_t j = threadIdx.x; j < LL; j += kRunThreads) sh.M[j] = dense_row_entry(p.gl, p.gl.A, j, p.w);
  __syncthreads();
  double m = -CUDART_INF;
  for (std::size_t j = threadIdx.x; j < LL; j += kRunThreads) m = fmax(m, sh.M[j]);
  double tmax = block_max(m, sh.red);
  if (!isfinite(tmax)) tmax = 0;
  for (std::size_t j = threadIdx.x; j < LL; j += kRunThreads) {
    const double e = exp(sh.M[j] - tmax);
    const std::size_t yp = j / L, y = j - yp * L;
    sh.E[j] = e;
    sh.Et[y * L + yp] = e;
  }
  run_emissions(p, tok0, T, sh.acc);
  run_edge_rows(p, tok0, T, sh.M);
  if (threadIdx.x == 0) {
    sh.sent[0] = sid;
    sh.order[0] = 0;
    sh.slots[0] = 0;
    sh.slots[1] = T;
  }
  __syncthreads();
  return tmax;
}

/// The sentence's forward-backward on `group` (gold mode, the loss in fb.result[0]): with
/// `backward`, the marginals' deltas into fb.node and fb.pair (the pair sums in `pacc` where given);
/// without, the loss only (sentence_loss_on_device's).
template <class Group>
__device__ void run_fb(const FbParams& fb, const GradShared& sh, double tmax, bool backward, Group group,
                       double* pacc) {
  FbParams fp = fb;
  fp.ch = sh.chunk();
  fp.trans = sh.M;
  if (!backward) {
    fp.backward = false;
    fp.node = fp.pair = nullptr;
  }
  fb::FbSentence<Group> f;
  f.g = group;
  f.L = fp.L;
  f.LL = std::size_t(fp.L) * fp.L;
  f.E = sh.E;
  f.Et = sh.Et;
  f.p = &fp;
  f.vec = sh.vec;
  f.rowa = sh.rowa;
  f.pacc = backward ? pacc : nullptr;
  f.tmax = tmax;
  f.single = fp.L <= group.size();
  fb::fb_sentence(f, 0);
}

/// The step's forward-backward as the step's launch takes it: at L ≤ 32 forward_backward_warp_kernel's
/// (one warp); beyond, forward_backward_kernel's with blockDim.x = fb_threads (or the groups kernel's
/// group of as many: the same bits) on the block's first fb_threads threads, named barrier 1. Ends
/// with a barrier.
__device__ void gradient_fb(const FbParams& fb, int fb_threads, const GradShared& sh, double tmax, bool backward) {
  if (fb.L <= 32) {
    if (threadIdx.x < 32) run_fb(fb, sh, tmax, backward, fb::WarpGroup{}, fb.shared_pair ? sh.pacc : nullptr);
  } else if (int(threadIdx.x) < fb_threads) {
    run_fb(fb, sh, tmax, backward, fb::SubBlockGroup{sh.red, 0, fb_threads, 1}, nullptr);
  }
  __syncthreads();
}

/// Weight w's gradient (its k-th group gid of the sentence's plan v) as sag_gradient_kernel's at
/// scale 1, from the forward-backward's deltas.
__device__ double weight_gradient(const WeightGroups& gl, const FbParams& fb, const SagSpanView& v, std::size_t k,
                                  std::uint32_t gid, std::size_t w) {
  return __dmul_rn(1.0, span_group_sum(gl, v, k, gid, gl.slot(w, gid), marginal_width(gl, gid), fb.node, fb.pair,
                                       fb.edge, 0.0));
}

/// Step i's SgdL1StepParams as sgd_l1_step_params made them: the rates from η by its doublings
/// and halvings, r·c1/N of each (two rounded operations, as the host's), the host's log_decay.
__device__ SgdL1StepParams run_step_params(const GradientRun& q, const double* ps) {
  constexpr int z = -SgdL1StepParams::kLow;
  SgdL1StepParams sp;
  sp.rate[z] = ps[0];
  sp.rate[z + 1] = __ddiv_rn(ps[0], SgdL1Search::kDecay);
  sp.rate[z + 2] = __ddiv_rn(sp.rate[z + 1], SgdL1Search::kDecay);
  sp.rate[z - 1] = __dmul_rn(ps[0], SgdL1Search::kDecay);
  sp.rate[z - 2] = __dmul_rn(sp.rate[z - 1], SgdL1Search::kDecay);
  for (int k = 0; k < SgdL1StepParams::kRates; ++k) {
    sp.u_step[k] = __ddiv_rn(__dmul_rn(sp.rate[k], q.c1), q.N);
    sp.log_decay[k] = ps[1 + k];
  }
  sp.c1 = q.pc1;
  sp.c2 = q.pc2;
  return sp;
}

/// What a search step keeps in shared memory: reduce_on_device's partials and block reduction, the
/// search, the sums.
struct SearchShared {
  double* partial;  // [kRedBlocks]
  RunReduce::TempStorage* tmp;
  SgdL1Search* search;
  double* sum;
};

/// sgd_l1_search_step after its forward-backward: the gradient, the support and w over it into
/// idx/g/saved in the plan's compact order; l(w) = NLL + the penalty; the 3 trials (each a rule
/// pass summing its penalty, the forward-only loss, the restore); u and Λ advanced; the step.
__device__ void search_step(const GradientRun& q, const double* ps, std::uint32_t sid, std::size_t tok0,
                            std::size_t T, const GradShared& sh, const SearchShared& ss) {
  const PerceptronRun& p = q.run;
  const SgdL1StepParams sp = run_step_params(q, ps);
  double* const ops[3] = {p.w, q.q, nullptr};  // SgdL1Rule's
  const std::size_t g0 = p.t.gbase[sid], f0 = g0 + sid;
  const std::size_t n = q.gofs[f0 + p.t.gbase[sid + 1] - g0] - q.gofs[f0];
  const SagSpanView v = sentence_view(p, sid);
  for_each_weight(p, sid, [&](std::size_t k, std::uint32_t gid, std::size_t w) {
    const std::size_t o = q.gofs[f0 + k] - q.gofs[f0] + (w - p.gl.begin(gid));
    q.idx[o] = w;
    q.g[o] = weight_gradient(p.gl, q.fb, v, k, gid, w);
    q.saved[o] = p.w[w];
  });
  __syncthreads();
  const double penalty = run_sum(n, PenaltyTerm{q.saved, sp.c1, sp.c2}, ss.partial, *ss.tmp, ss.sum);
  if (threadIdx.x == 0) *ss.search = SgdL1Search(__dadd_rn(q.fb.result[0], penalty));
  __syncthreads();
  for (int trial = 0; trial < SgdL1Search::kTrials; ++trial) {
    const int k = ss.search->index();
    const SgdL1Rule r{sp.rate[k], __dadd_rn(q.scalars[0], sp.u_step[k]), sp.c1, sp.c2, true};
    auto term = [&](std::size_t j) { return apply_at(r, q.idx[j], q.g[j], ops); };
    const double tp = run_sum(n, term, ss.partial, *ss.tmp, ss.sum);
    gradient_fb(q.fb, q.fb_threads, sh, gradient_front(p, sid, tok0, T, sh), false);
    for (std::size_t j = threadIdx.x; j < n; j += kRunThreads) p.w[q.idx[j]] = q.saved[j];  // exact restore
    if (threadIdx.x == 0) ss.search->tried(__dadd_rn(q.fb.result[0], tp));
    __syncthreads();
  }
  const int k = ss.search->chosen_index();
  if (threadIdx.x == 0) {  // sgd_search_end_kernel's
    q.scalars[0] = __dadd_rn(q.scalars[0], sp.u_step[k]);
    if (sp.c2 > 0) q.scalars[1] = __dadd_rn(q.scalars[1], sp.log_decay[k]);
  }
  __syncthreads();
  const SgdL1Rule r{sp.rate[k], q.scalars[0], 0.0, 0.0, false};
  for (std::size_t j = threadIdx.x; j < n; j += kRunThreads) apply_at(r, q.idx[j], q.g[j], ops);
  __syncthreads();
}

/// sgd-l1, adf, l2sgd: the steps of launch_gradient_run, each as its launches take it (see GradientRun).
__global__ void __launch_bounds__(kRunThreads) gradient_run_kernel(GradientRun q) {
  const PerceptronRun& p = q.run;
  CRFX_DYNAMIC_SHARED(double, smem);
  const std::size_t L = p.gl.L;
  __shared__ double red[32], partial[kRedBlocks], sum;
  __shared__ RunReduce::TempStorage tmp;
  __shared__ SgdL1Search search;
  __shared__ std::uint32_t ch_sent[1], ch_order[1];
  __shared__ std::size_t ch_slots[2];
  const GradShared sh = gradient_shared(L, smem, q.E, q.Et, red, ch_sent, ch_order, ch_slots);
  const SearchShared ss{partial, &tmp, &search, &sum};
  double* const decay_ops[3] = {p.w, q.stamp, q.adf ? q.rate : nullptr};
  double* const step_ops[3] = {p.w, q.adf ? q.rate : q.q, q.adf ? q.count : nullptr};
  for (std::size_t i = 0; i < p.steps; ++i) {
    const std::uint32_t sid = p.ids[i];
    const std::size_t tok0 = p.t.sent_off[sid], T = p.t.sent_off[sid + 1] - tok0;
    const double* ps = q.per_step + i * (q.search ? 6 : 3);
    const double clock = q.search ? q.scalars[1] : ps[0];  // (the search: Λ on the device)
    if (q.stamp)  // the support brought up to the clock (batch_gradient's catch-up)
      for_each_weight(p, sid, [&](std::size_t, std::uint32_t, std::size_t k) {
        apply_at(LazyDecayRule{clock, q.coef}, k, 0.0, decay_ops);
      });
    __syncthreads();
    gradient_fb(q.fb, q.fb_threads, sh, gradient_front(p, sid, tok0, T, sh), true);
    if (q.loss && threadIdx.x == 0) *q.loss += q.fb.result[0];  // (the host's sum, in step order)
    if (q.search) {
      search_step(q, ps, sid, tok0, T, sh, ss);
      continue;
    }
    // span_gradient (scale 1) and the step's rule, weight by weight.
    const SagSpanView v = sentence_view(p, sid);
    for_each_weight(p, sid, [&](std::size_t k, std::uint32_t gid, std::size_t w) {
      const double g = weight_gradient(p.gl, q.fb, v, k, gid, w);
      if (q.adf)
        apply_at(AdfStepRule{}, w, g, step_ops);
      else if (q.axpy)
        p.w[w] += (-ps[1]) * g;  // SparseAxpyOp's, a = −η
      else
        apply_at(SgdL1Rule{ps[1], ps[2], 0.0, 0.0, false}, w, g, step_ops);
    });
    __syncthreads();
  }
}

/// A SAG run's step state in shared memory: the line search, SAGA's coefficient, the halt.
struct SagShared {
  SagLineSearch search;
  SagDraw draw;  // a drawn step's draw and its L_i
  double L0, coef;
  bool halted;
};

/// The compact index of weight w (its k-th group gid of plan v): sag_gradient_kernel's.
__device__ std::size_t compact_at(const WeightGroups& gl, const SagSpanView& v, std::size_t k, std::uint32_t gid,
                                  std::size_t w) {
  return v.gofs[k] + (w - gl.begin(gid));
}

/// Sentence sid's groups (plan v, ng of them) brought from their stamps to step k, as
/// sag_catch_up_kernel (none at k = 0); then its forward-backward at w, the edge rows' deltas
/// into new_edge, the gradient into g (compact). Ends with a barrier.
__device__ void sag_run_evaluate(const SagRun& q, std::uint32_t sid, const SagSpanView& v, std::size_t ng,
                                 std::size_t k, const GradShared& sh) {
  const PerceptronRun& p = q.run;
  if (k > 0) {
    for_each_weight(p, sid, [&](std::size_t, std::uint32_t gid, std::size_t w) {
      const std::uint32_t k0 = q.stamp[gid];
      if (k0 != k) p.w[w] = SagCatchUp(q.P, q.S, q.R, k0, k)(p.w[w], q.d[w]);
    });
    __syncthreads();  // every thread has read the stamps
    for (std::size_t g = threadIdx.x; g < ng; g += kRunThreads) q.stamp[v.groups[g]] = std::uint32_t(k);
  }
  __syncthreads();
  const std::size_t tok0 = p.t.sent_off[sid], T = p.t.sent_off[sid + 1] - tok0, LL = p.gl.L * p.gl.L;
  gradient_fb(q.fb, q.fb_threads, sh, gradient_front(p, sid, tok0, T, sh), true);
  for (std::size_t j = threadIdx.x; q.new_edge && j < T * LL; j += kRunThreads) q.new_edge[j] = p.edge[j];
  for_each_weight(p, sid, [&](std::size_t g, std::uint32_t gid, std::size_t w) {
    q.g[compact_at(p.gl, v, g, gid, w)] = weight_gradient(p.gl, q.fb, v, g, gid, w);
  });
  __syncthreads();
}

/// incremental_search's loop on the device: while the search is not done, the trial (saved ← w,
/// w ← w − step·g), the forward-only loss, the exact restore, the trial's loss taken.
__device__ void sag_run_search(const SagRun& q, std::uint32_t sid, const SagSpanView& v, const GradShared& sh,
                               SagLineSearch& search) {
  const PerceptronRun& p = q.run;
  const std::size_t tok0 = p.t.sent_off[sid], T = p.t.sent_off[sid + 1] - tok0;
  while (!search.done) {  // (block-uniform: read after a barrier)
    const double step = search.step();
    for_each_weight(p, sid, [&](std::size_t g, std::uint32_t gid, std::size_t w) {
      const std::size_t o = compact_at(p.gl, v, g, gid, w);
      q.saved[o] = p.w[w];
      p.w[w] = __dsub_rn(p.w[w], __dmul_rn(step, q.g[o]));
    });
    __syncthreads();
    gradient_fb(q.fb, q.fb_threads, sh, gradient_front(p, sid, tok0, T, sh), false);
    for_each_weight(p, sid, [&](std::size_t g, std::uint32_t gid, std::size_t w) {
      p.w[w] = q.saved[compact_at(p.gl, v, g, gid, w)];
    });
    if (threadIdx.x == 0) search.tried(q.fb.result[0]);
    __syncthreads();
  }
}

/// The step's commit (d += Δ_i; SAGA: w −= coef·Δ_i) and store (μ_stored ← μ_new), as
/// sag_commit_kernel and sag_store_kernel take them. Ends with a barrier.
__device__ void sag_run_commit(const SagRun& q, std::uint32_t sid, const SagSpanView& v, const double* coef) {
  const PerceptronRun& p = q.run;
  for_each_weight(p, sid, [&](std::size_t g, std::uint32_t gid, std::size_t w) {
    sag_commit_weight(p.gl, v, g, gid, w, q.fb.node, q.old_node, q.fb.pair, q.old_pair, q.new_edge, q.old_edge,
                      coef, q.d, p.w);
  });
  __syncthreads();  // every commit has read the stored marginals
  const std::size_t L = p.gl.L, LL = L * L, tok0 = p.t.sent_off[sid], T = p.t.sent_off[sid + 1] - tok0;
  for (std::size_t j = threadIdx.x; j < T * L; j += kRunThreads)
    q.old_node[std::size_t(p.t.tokens[tok0 + j / L]) * L + j % L] = q.fb.node[j];
  for (std::size_t j = threadIdx.x; q.new_edge && j < T * LL; j += kRunThreads) {
    const std::uint32_t slot = q.slots[tok0 + j / LL];
    if (slot != kNone) q.old_edge[std::size_t(slot) * LL + j % LL] = q.new_edge[j];
  }
  for (std::size_t j = threadIdx.x; q.old_pair && j < LL; j += kRunThreads) q.old_pair[sid * LL + j] = q.fb.pair[j];
  __syncthreads();
}

/// sag, saga: the steps of launch_sag_run (see SagRun).
__global__ void __launch_bounds__(kRunThreads) sag_run_kernel(SagRun q) {
  const PerceptronRun& p = q.run;
  CRFX_DYNAMIC_SHARED(double, smem);
  __shared__ double red[32], partial[kRedBlocks], sum;
  __shared__ RunReduce::TempStorage tmp;
  __shared__ SagShared ss;
  __shared__ std::uint32_t ch_sent[1], ch_order[1];
  __shared__ std::size_t ch_slots[2];
  const GradShared sh = gradient_shared(p.gl.L, smem, q.E, q.Et, red, ch_sent, ch_order, ch_slots);
  if (q.queue->halt != SagQueueState::kNoHalt) return;  // an earlier step halted (block-uniform)
  for (std::size_t i = 0; i < p.steps; ++i) {
    const std::uint32_t at = q.at0 + std::uint32_t(i);
    if (q.draws) {  // sag_draw_kernel's
      if (threadIdx.x == 0) {
        ss.draw = q.sampler.draw_one();
        q.draws[at] = ss.draw;
        ss.L0 = q.sampler.get(ss.draw.id);
      }
      __syncthreads();
    }
    const std::uint32_t sid = q.draws ? ss.draw.id : p.ids[i];
    const std::size_t k = q.k0 + i, ng = p.t.gbase[sid + 1] - p.t.gbase[sid];
    const SagSpanView v = sentence_plan(q.tables, p.t.gbase, p.t.obase, sid);
    sag_run_evaluate(q, sid, v, ng, k, sh);
    const double g2 = run_sum(v.gofs[ng], DotTerm{q.g, q.g}, partial, tmp, &sum);
    if (threadIdx.x == 0) ss.search = SagLineSearch(q.fb.result[0], g2, 1.0, q.draws ? ss.L0 : q.queue->s.L);
    __syncthreads();
    sag_run_search(q, sid, v, sh, ss.search);
    if (threadIdx.x == 0)
      ss.halted = q.draws ? !sag_drawn_step_end(q.queue, ss.search, at, q.sampler, ss.draw, q.step[i], k + 1, q.P,
                                                q.S, q.R, &ss.coef)
                          : !sag_step_end(q.queue, ss.search, at, q.step[i], k + 1, q.P, q.S, q.R, &ss.coef);
    __syncthreads();
    if (ss.halted) return;  // (block-uniform) it and the steps after it change nothing
    sag_run_commit(q, sid, v, q.step[i].saga ? &ss.coef : nullptr);
  }
}

void check_run(const PerceptronRun& p) {
  if (p.steps > kRunIds || p.gl.L > kRunMaxL) throw Error("internal: a run beyond its launch's bounds");
}

}  // namespace

void launch_perceptron_run(const PerceptronRun& p, cudaStream_t s) {
  if (p.steps == 0) return;
  check_run(p);
  CRFX_LAUNCH(perceptron_run_kernel, 1, int(kRunThreads), run_shared_bytes(p.gl.L), s, p);
}

void launch_gradient_run(const GradientRun& p, cudaStream_t s) {
  if (p.run.steps == 0) return;
  check_run(p.run);
  if (p.run.gl.L > 32 && (p.fb_threads < int(p.run.gl.L) || p.fb_threads > int(kRunThreads) || !p.E || !p.Et))
    throw Error("internal: a gradient run's forward-backward group beyond its block");
  CRFX_LAUNCH(gradient_run_kernel, 1, int(kRunThreads), gradient_shared_bytes(p.run.gl.L), s, p);
}

void launch_sag_run(const SagRun& p, cudaStream_t s) {
  if (p.run.steps == 0) return;
  check_run(p.run);
  if (p.run.steps > kSagRunSteps) throw Error("internal: a SAG run beyond its launch's bounds");
  if (p.run.gl.L > 32 && (p.fb_threads < int(p.run.gl.L) || p.fb_threads > int(kRunThreads) || !p.E || !p.Et))
    throw Error("internal: a SAG run's forward-backward group beyond its block");
  CRFX_LAUNCH(sag_run_kernel, 1, int(kRunThreads), gradient_shared_bytes(p.run.gl.L), s, p);
}

void launch_peer_run(const PeerRun& p, cudaStream_t s) {
  if (p.run.steps == 0) return;
  check_run(p.run);
  CRFX_LAUNCH(peer_run_kernel, 1, int(kRunThreads), run_shared_bytes(p.run.gl.L), s, p);
}

}  // namespace crfx::cuda::detail
