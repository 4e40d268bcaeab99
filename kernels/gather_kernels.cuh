// crfx — the marginal reduction of evaluate() (kernels/gather_kernels.cu): the gradient
// g += scale · Xᵀ·delta for state and edge attributes (gather) and the transition sums over the
// chunk's sentences by a fixed two-level tree (trans_partial, trans_final). No atomics: every
// entry is summed in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace crfx::cuda::detail {

/// G[a·width + c] += scale · Σ x · delta[row][c] over the occurrences (occ_off, occ_tok, occ_val:
/// the transposed CSR, token order) of each of the num_attrs attributes whose token has a row in
/// the chunk (token_slot ≥ 0); warp per (attribute, 32 columns).
void launch_gather(std::size_t num_attrs, std::size_t width, const std::size_t* occ_off,
                   const std::uint32_t* occ_tok, const double* occ_val, const int* token_slot,
                   const double* delta, double scale, double* G, cudaStream_t s);
/// G[j] += scale · Σ_i pair[i][j] over the n sentences' [LL] blocks, by the fixed tree: sums of
/// kTransGroup sentences in order into `partial` [⌈n / kTransGroup⌉][LL], then those in order.
void launch_transition_tree(std::size_t LL, std::size_t n, const double* pair, double* partial, double scale,
                            double* G, cudaStream_t s);

}  // namespace crfx::cuda::detail
