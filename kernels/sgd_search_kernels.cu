// crfx — sgd-l1's heuristic line search on the device: the kernels and launchers of
// sgd_search_kernels.cuh. Each element is the rule's own function (SgdL1Rule, LazyDecayRule) with
// its scalars read from the device, summed by vector_ops.cuh's fixed two passes; the one-thread
// kernels add with explicit round-to-nearest (what the host adds).
#include <cuda_runtime.h>

#include <cstddef>

#include "common.cuh"
#include "launch.cuh"
#include "rules/lazy_decay.hpp"
#include "rules/sgd_l1_update.hpp"
#include "sgd_search_kernels.cuh"
#include "vector_ops.cuh"

namespace crfx::cuda::detail {
namespace {

/// SgdL1Rule on entry j, its rate the search's (the next trial's, or the one chosen) and u from
/// the scalars (plus the trial's step): as apply_rule's element, the rule's parameters bitwise the
/// host's (u + u_step one rounded addition).
struct SgdRuleTerm {
  const std::size_t* idx;
  const double* g;
  double* w;
  double* q;
  const SgdL1Search* search;
  const double* scalars;
  SgdL1StepParams p;
  bool trial;
  __device__ double operator()(std::size_t j) const {
    const int k = trial ? search->index() : search->chosen_index();
    const SgdL1Rule r = trial ? SgdL1Rule{p.rate[k], __dadd_rn(scalars[0], p.u_step[k]), p.c1, p.c2, true}
                              : SgdL1Rule{p.rate[k], scalars[0], 0.0, 0.0, false};
    const std::size_t i = idx[j];
    double* const v[2] = {w + i, q ? q + i : nullptr};
    return r(g[j], v);
  }
};
struct SgdRuleMap {
  SgdRuleTerm term;
  __device__ void operator()(std::size_t j) const { term(j); }
};

/// LazyDecayRule{Λ, 0} on entry j's weight (the memo per element, as on the GPU's apply_rule).
struct SgdCatchUp {
  const std::size_t* idx;
  double* w;
  double* stamp;
  const double* scalars;
  __device__ void operator()(std::size_t j) const {
    const std::size_t i = idx[j];
    double* const v[3] = {w + i, stamp + i, nullptr};
    LazyDecayRule::Memo memo{};
    LazyDecayRule{scalars[1], 0.0}(0.0, v, memo);
  }
};

__global__ void set_kernel(double* dst, double v) { *dst = v; }

/// reduce()'s two passes (vector_ops.cuh), the sum left at red[kRedBlocks]; 0 there when n = 0.
template <class F>
void reduce_on_device(std::size_t n, const F& f, double* red, cudaStream_t s) {
  if (n == 0) {
    CRFX_LAUNCH(set_kernel, 1, 1, 0, s, red + kRedBlocks, 0.0);
    return;
  }
  const unsigned blocks = grid_for(n, kRedThreads, kRedBlocks);  // reduce()'s grid
  CRFX_LAUNCH((reduce_pass1<F, SumOp>), blocks, kRedThreads, 0, s, n, f, SumOp{}, 0.0, red);
  CRFX_LAUNCH(reduce_pass2<SumOp>, 1, kRedThreads, 0, s, blocks, red, SumOp{}, 0.0, red + kRedBlocks);
}

__global__ void sgd_search_start_kernel(SgdL1Search* search, const double* nll, const double* penalty) {
  *search = SgdL1Search(__dadd_rn(*nll, *penalty));
}

__global__ void sgd_search_tried_kernel(SgdL1Search* search, const double* loss, const double* penalty) {
  search->tried(__dadd_rn(*loss, *penalty));
}

__global__ void sgd_search_end_kernel(const SgdL1Search* search, SgdL1StepParams p, double* scalars) {
  const int k = search->chosen_index();
  scalars[0] = __dadd_rn(scalars[0], p.u_step[k]);
  if (p.c2 > 0) scalars[1] = __dadd_rn(scalars[1], p.log_decay[k]);
}

}  // namespace

void launch_sgd_penalty(std::size_t n, const double* val, double c1, double c2, double* red, cudaStream_t s) {
  reduce_on_device(n, PenaltyTerm{val, c1, c2}, red, s);
}

void launch_sgd_search_start(SgdL1Search* search, const double* nll, const double* penalty, cudaStream_t s) {
  CRFX_LAUNCH(sgd_search_start_kernel, 1, 1, 0, s, search, nll, penalty);
}

void launch_sgd_trial(std::size_t n, const std::size_t* idx, const double* g, const SgdL1StepParams& p,
                      const SgdL1Search* search, const double* scalars, double* w, double* q, double* red,
                      cudaStream_t s) {
  reduce_on_device(n, SgdRuleTerm{idx, g, w, q, search, scalars, p, true}, red, s);
}

void launch_sgd_search_tried(SgdL1Search* search, const double* loss, const double* penalty, cudaStream_t s) {
  CRFX_LAUNCH(sgd_search_tried_kernel, 1, 1, 0, s, search, loss, penalty);
}

void launch_sgd_search_end(const SgdL1Search* search, const SgdL1StepParams& p, double* scalars, cudaStream_t s) {
  CRFX_LAUNCH(sgd_search_end_kernel, 1, 1, 0, s, search, p, scalars);
}

void launch_sgd_step(std::size_t n, const std::size_t* idx, const double* g, const SgdL1StepParams& p,
                     const SgdL1Search* search, const double* scalars, double* w, double* q, cudaStream_t s) {
  launch_map(n, SgdRuleMap{{idx, g, w, q, search, scalars, p, false}}, s);
}

void launch_sgd_catch_up(std::size_t n, const std::size_t* idx, double* w, double* stamp, const double* scalars,
                         cudaStream_t s) {
  launch_map(n, SgdCatchUp{idx, w, stamp, scalars}, s);
}

}  // namespace crfx::cuda::detail
