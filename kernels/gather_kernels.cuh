// crfx — the marginal reduction of evaluate() (kernels/gather_kernels.cu): the gradient
// g += scale · Xᵀ·delta for state and edge attributes (gather) and the transition sums over the
// chunk's sentences by a fixed two-level tree (trans_partial, trans_final). No atomics: every
// entry is summed in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "crfx/corpus.hpp"  // WeightGroups

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

/// G[k] += scale · Σ x · delta[row][slot(k)] for each weight k of group gid0 + a, over the
/// occurrences (occ_off, occ_tok, occ_val: the transposed CSR, token order) of each of the
/// num_attrs attributes a whose token is in the chunk; delta rows are `width` wide (L or L²), `gl`
/// the weight groups (device pointers; dense: k = begin + slot), `max_row` the longest of the
/// rows (`width` when dense); warp per (attribute, 32 weights of its row).
void launch_gather(std::size_t num_attrs, std::size_t width, std::size_t max_row, const WeightGroups& gl,
                   std::uint32_t gid0, const std::size_t* occ_off, const std::uint32_t* occ_tok,
                   const double* occ_val, const GatherChunk& ch, const double* delta, double scale, double* G,
                   cudaStream_t s);
/// G[k] += scale · Σ_i pair[i][slots[k]] for k < count (slots null: slot k, count LL) over the n
/// sentences' [LL] blocks, by the fixed tree: sums of kTransGroup sentences in order into
/// `partial` [⌈n / kTransGroup⌉][LL], then those in order.
void launch_transition_tree(std::size_t LL, std::size_t n, const double* pair, double* partial, double scale,
                            std::size_t count, const std::uint32_t* slots, double* G, cudaStream_t s);

}  // namespace crfx::cuda::detail
