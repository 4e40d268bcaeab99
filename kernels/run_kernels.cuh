// crfx — the mistake-driven trainers' steps at batch size 1 in runs (kernels/run_kernels.cu;
// issue 37): one launch of one block takes a few hundred steps one after another, each as the
// step's own launches (about a dozen) took it, through the same device functions — so the same
// bits — where a step's launches, not its work, were its cost.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "crfx/internal/backend.hpp"  // SentenceSpan
#include "chain_kernels.cuh"           // FbParams
#include "crfx/internal/corpus.hpp"   // WeightGroups
#include "peer_step.cuh"             // PeerParams
#include "perceptron_kernels.cuh"    // BatchPlans
#include "sag_kernels.cuh"           // SagQueueState, SagSpanView

namespace crfx::cuda::detail {

/// Sentences a run takes in one launch (their ids are its launch parameters: 2 KiB), and the label
/// counts it takes (τ, Viterbi's last two rows and a sparse layout's emission sums in shared
/// memory: ≤ 38 KB at L = 64).
inline constexpr std::size_t kRunIds = 512;
inline constexpr std::size_t kRunMaxL = 64;

/// ap's steps at batch size 1 over `steps` sentences in a row (launch_perceptron_run, by value):
/// each the step perceptron_step takes on one sentence — Viterbi at w, and where the path has a
/// mistake w += Δ and u += (t0 + i)·Δ for the run's i-th (nothing to u where t0 + i is 0).
struct PerceptronRun {
  std::uint32_t ids[kRunIds];  // the sentences, in step order
  std::size_t steps;
  double t0;                   // the trainer's steps before the run's first
  WeightGroups gl;             // device groups (the transitions' row: group gl.A)
  const std::size_t* state_off;
  const std::uint32_t* state_ids;
  const double* state_vals;     // or null (binary attributes)
  const std::size_t* edge_off;  // null: no edge attributes
  const std::uint32_t* edge_ids;
  const double* edge_vals;
  double* edge;                // [longest sentence][L][L] τ_t at its rows with edge items
  BatchPlans t;                // the plans made once, sent_off and gold; t.pred: the path, read
  std::uint32_t* path;         // [longest sentence] the path written (t.pred)
  double* w;
  double* u;                   // null: no averaging
  double* S;                   // [longest sentence][L] its emissions
  std::uint32_t* back;         // [longest sentence][L] Viterbi's predecessors
};

/// Sets r's ids, steps and t0 to each kRunIds sentences of `span` in turn (the first step t0 + 1),
/// calling launch() after each.
template <class Launch>
void for_each_run(SentenceSpan span, double t0, PerceptronRun& r, Launch&& launch) {
  for (std::size_t begin = 0; begin < span.count; begin += kRunIds) {
    r.steps = span.count - begin < kRunIds ? span.count - begin : kRunIds;
    for (std::size_t i = 0; i < r.steps; ++i) r.ids[i] = span[begin + i];
    r.t0 = t0 + double(begin);
    launch();
  }
}

/// ap's run in one launch of one block. Bitwise the steps of perceptron_step one sentence at a
/// time: the same sums in the same order (emission_row, edge_entry, best_predecessor, backtrack,
/// sentence_sum, the updates' expressions). The layout's transitions must be on, L ≤ kRunMaxL.
void launch_perceptron_run(const PerceptronRun& p, cudaStream_t s);

/// pa's, arow's or mira's steps at batch size 1 in a row (launch_peer_run): each peer_step's on one
/// sentence — the decode as ap's, Δ over the sentence's plan into idx/val (its compact support),
/// w·Δ and ‖Δ‖² (arow: Σ Δ_j²·Σ_jj) by reduce_on_device's two passes, the scalars (peer_scalars;
/// mira's mira_step with its bounds, counts and K), ℓ added to *loss, and w (arow: w and Σ; pa: u
/// by mul_rn(t0 + i, τ)) updated where the gate is set.
struct PeerRun {
  PerceptronRun run;         // (u: pa's average, null for arow)
  PeerParams step;           // (mira: its bounds and counts indexed by the step's sentence, K the loss)
  double* variance;          // arow's Σ
  const std::size_t* gofs;   // the plans' group offsets (sentence s's at gbase[s] + s)
  std::size_t* idx;          // [the largest compact support] scratch
  double* val;
  double* loss;              // the epoch's ℓ sum so far
};
void launch_peer_run(const PeerRun& p, cudaStream_t s);

/// sgd-l1's or adf's steps at batch size 1 in a row (launch_gradient_run): each the step the
/// primitives take on one sentence (GradientSteps, step_params.hpp) — the support caught up
/// (LazyDecayRule), τ and E = exp(τ − τ_max) as prepare's, the emissions and edge rows as the
/// chunk front's, the forward-backward as the warp kernel's (one warp; L > 32: the block kernel's), the gradient as
/// sag_gradient_kernel's, and the rule (SgdL1Rule, AdfStepRule; l2sgd's axpy) on each weight. With `search`,
/// sgd_l1_search_step's: the gradient and w over the support into idx/g/saved (compact), the
/// penalty and each trial's by reduce_on_device's passes, the forward-only trials, the search
/// (SgdL1Search) in shared memory, u and Λ in `scalars`.
struct GradientRun {
  PerceptronRun run;  // the sentences, the corpus's arrays, the plans, w, S, the edge rows
  /// Per step, the host's: clock, η, u (3 a step) or, with `search`, η and log_decay[5] (6).
  double per_step[kRunIds * 6];
  FbParams fb;        // the step's (fb_params, gold mode): la, lb, node, pair, result, the flags
  bool adf, search, axpy;
  double* loss;       // each step's NLL added (null: none)
  double coef;        // the catch-up's
  double *q, *rate, *count, *stamp;  // (null where not used)
  double c1, N, pc1, pc2;            // search: c1 and N as the host's, c1/N and c2/N
  double* scalars;                   // search: u, Λ
  const std::size_t* gofs;           // search: the plans' group offsets (sentence s's at gbase[s] + s)
  std::size_t* idx;                  // search: [the largest compact support] scratch
  double *g, *saved;
  int fb_threads;     // L > 32: the forward-backward's group (the step's block: threads_), ≤ 256
  double *E, *Et;     // L > 32: [L][L] each (E and Eᵀ there; at L ≤ 32 in shared memory)
};
static_assert(sizeof(GradientRun) <= 32764, "a kernel's parameters (CUDA 12.1 and later on sm_70 and up)");
/// Takes L ≤ kRunMaxL (the forward-backward on one warp at L ≤ 32, else on the block's first
/// fb_threads threads, as the block kernels' group), a resident corpus, transitions on.
void launch_gradient_run(const GradientRun& p, cudaStream_t s);

/// Steps a SAG run takes in one launch (their SagStepParams are its launch parameters: 18 KB).
inline constexpr std::size_t kSagRunSteps = 256;

/// SAG's or SAGA's queued steps at batch size 1 in a row (launch_sag_run; incremental_schedule's
/// queue, backend_sag_queue.cu): each the step its ~30 launches took — the sentence's groups
/// caught up to the history's step (SagCatchUp), the forward-backward at w into fb.node/pair (the
/// edge rows' deltas copied to new_edge), the gradient into g (compact) as sag_gradient_kernel's,
/// ‖g‖² by reduce_on_device's passes, the line search (SagLineSearch from the queue's L, looping
/// on the device: trial, forward-only loss, exact restore), the step's end (sag_step_end: the
/// scalars, the history's step, SAGA's coefficient, or the halt), the commit and the store. The run
/// does nothing when an earlier step halted, and stops at a step that halts. Drawn steps
/// (incremental_schedule_drawn, SAG-NUS) draw their sentence first (one thread, the host's code),
/// search from its L_i and end as sag_drawn_step_end.
struct SagRun {
  PerceptronRun run;                    // the sentences (≤ kSagRunSteps), the corpus's arrays, the plans, w
  SagStepParams step[kSagRunSteps];     // each step's, the host's
  FbParams fb;                          // fb_params, gold mode, the backward's deltas into node_, pair_
  int fb_threads;                       // L > 32: the forward-backward's group (threads_)
  double *E, *Et;                       // L > 32: [L][L] each
  SagQueueState* queue;                 // the scalars (L, α, trials) and the halt
  std::uint32_t at0;                    // the queue index of the run's first step
  std::size_t k0;                       // the history's steps before it
  double *P, *S, *R;                    // the lazy-step history (device)
  std::uint32_t* stamp;                 // [groups] each group's step
  double* d;                            // SAG's Σ of the stored gradients
  SagSpanView tables;                   // SentencePlans' arrays from their starts (sentence_plan)
  const std::uint32_t* slots;           // [N] SentencePlans::slots
  double *old_node, *old_pair, *old_edge;  // the stored marginals (pair: null without transitions)
  double* new_edge;                     // [longest sentence][L][L] (null: no edge attributes)
  double *g, *saved;                    // [the largest compact support]
  SagSamplerRef sampler;                // drawn steps: the device's copy of SAG-NUS's sampler
  SagDraw* draws;                       // drawn steps: each step's draw at its queue index; null:
                                        // the sentences are run.ids
};
static_assert(sizeof(SagRun) <= 32764, "a kernel's parameters (CUDA 12.1 and later on sm_70 and up)");
/// Takes L ≤ kRunMaxL, a resident corpus, transitions on (as launch_gradient_run).
void launch_sag_run(const SagRun& p, cudaStream_t s);

}  // namespace crfx::cuda::detail
