// crfx — sgd-l1's heuristic line search decided on the device (issue 37; CudaBackend::
// sgd_l1_search_step, backend_sgd_search.cu): one-thread kernels running SgdL1Search
// (host/rules/sgd_l1_search.hpp) on losses and penalties left on the device, and the rules of the
// step (SgdL1Rule's trials and update, the lazy L2 catch-up) reading their rate, u and Λ from
// device scalars instead of launch parameters. The sums are vector_ops.cuh's reductions, the
// elements the rules' own host-device functions: bitwise what apply_rule gives them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "crfx/internal/backend.hpp"  // SgdL1StepParams
#include "rules/sgd_l1_search.hpp"    // SgdL1Search

namespace crfx::cuda::detail {

// `scalars` is the trainer's vector of two: u (the L1 penalty per weight so far) and Λ (the lazy
// L2 decay's log-sum). A sparse vector's n entries are (idx, val); `red` holds kRedBlocks
// partials and, at red + kRedBlocks, the sum.

/// red[kRedBlocks] = Σ_j c1·|val_j| + c2·val_j² (sparse_penalty's sum, left on the device).
void launch_sgd_penalty(std::size_t n, const double* val, double c1, double c2, double* red, cudaStream_t s);
/// *search = SgdL1Search(*nll + *penalty): a one-sentence batch's objective at w (one thread).
void launch_sgd_search_start(SgdL1Search* search, const double* nll, const double* penalty, cudaStream_t s);
/// The next trial: w ← SgdL1Rule{rate, u + u_step, c1, c2, keep q} on the entries of g, its
/// penalty summed into red[kRedBlocks].
void launch_sgd_trial(std::size_t n, const std::size_t* idx, const double* g, const SgdL1StepParams& p,
                      const SgdL1Search* search, const double* scalars, double* w, double* q, double* red,
                      cudaStream_t s);
/// search->tried(*loss + *penalty) (one thread).
void launch_sgd_search_tried(SgdL1Search* search, const double* loss, const double* penalty, cudaStream_t s);
/// The search's choice k: u += u_step[k], and with L2 Λ += log_decay[k] (one thread).
void launch_sgd_search_end(const SgdL1Search* search, const SgdL1StepParams& p, double* scalars, cudaStream_t s);
/// The step at the rate chosen: w (and q) ← SgdL1Rule{rate[k], u} on the entries of g.
void launch_sgd_step(std::size_t n, const std::size_t* idx, const double* g, const SgdL1StepParams& p,
                     const SgdL1Search* search, const double* scalars, double* w, double* q, cudaStream_t s);
/// The entries' weights caught up to Λ = scalars[1] (LazyDecayRule{Λ, 0}).
void launch_sgd_catch_up(std::size_t n, const std::size_t* idx, double* w, double* stamp, const double* scalars,
                         cudaStream_t s);

}  // namespace crfx::cuda::detail
