// crfx — the marginal reduction of evaluate() (kernels/gather_kernels.cu): the gradient
// g += scale · Xᵀ·delta for state and edge attributes (gather) and the transition sums over the
// chunk's sentences by a fixed two-level tree (trans_partial, trans_final). No atomics: every
// entry is summed in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace crfx::cuda::detail {

/// The chunk a gather reads: either any set of sentences, through the token → row map
/// (token_slot[t] ≥ 0 for the chunk's tokens; every occurrence of the corpus is scanned), or
/// consecutive tokens [t_lo, t_hi) with row t − t_lo (token_slot null; only the chunk's own
/// occurrences are scanned). `visits`, when set, counts the occurrences scanned (tests).
struct GatherChunk {
  const int* token_slot = nullptr;
  std::uint32_t t_lo = 0, t_hi = 0;
  unsigned long long* visits = nullptr;
};

/// G[a·width + c] += scale · Σ x · delta[row][c] over the occurrences (occ_off, occ_tok, occ_val:
/// the transposed CSR, token order) of each of the num_attrs attributes whose token is in the
/// chunk; warp per (attribute, 32 columns).
void launch_gather(std::size_t num_attrs, std::size_t width, const std::size_t* occ_off,
                   const std::uint32_t* occ_tok, const double* occ_val, const GatherChunk& ch,
                   const double* delta, double scale, double* G, cudaStream_t s);
/// G[j] += scale · Σ_i pair[i][j] over the n sentences' [LL] blocks, by the fixed tree: sums of
/// kTransGroup sentences in order into `partial` [⌈n / kTransGroup⌉][LL], then those in order.
void launch_transition_tree(std::size_t LL, std::size_t n, const double* pair, double* partial, double scale,
                            double* G, cudaStream_t s);

}  // namespace crfx::cuda::detail
