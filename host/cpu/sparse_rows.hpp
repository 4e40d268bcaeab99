// crfx — the state weights of an observed-pair layout (WeightGroups with slots) on the CPU: the
// emissions s_t = Σ_k x_k · W[row(a_k)] and the marginal reduction G[row(a_k)] += f_k · d_t[slots],
// one whole token's L lanes in AVX-512 registers.
//
// A row holds an attribute's weights for the labels in its slots (ascending). Its lane mask has
// bit y set for each slot y. Then
//   emissions:  s_t += x_k · expand(mask, W[row])   the row's weights spread into their label lanes
//   reduction:  G[row] += f_k · d_t[slots]         the delta's lanes picked by slot (a permute)
// instead of one scalar load, add and store per weight with a loop as long as the row (whose exit
// the CPU mispredicts for most items: rows hold 1 to L weights). Every s_t(y) and every G[k] still
// receives its terms in item order with one multiply and one add each (-ffp-contract=off), so the
// results are the scalar loops' bit for bit. A lane the row lacks receives +0.0, which changes no
// sum here: x + (+0.0) differs from x only for x = −0.0, and a sum that starts at +0.0 never
// becomes −0.0 (under round-to-nearest a sum is −0.0 only when both terms are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "crfx/internal/corpus.hpp"

namespace crfx {

/// The most labels the AVX-512 row code takes (a token's lanes in at most 8 registers).
inline constexpr std::size_t kRowMaxLabels = 64;

/// Items ahead whose weight rows the CPU backend prefetches, here and in its scalar loops: a row's
/// offset (and lane mask) 2·kPrefetchItems items ahead, the row itself kPrefetchItems ahead, when
/// its offset is in the cache.
inline constexpr std::size_t kPrefetchItems = 16;

/// Whether the AVX-512 row code runs: on x86-64 CPUs with AVX-512 F, VL, DQ and BW, unless the
/// environment sets CRFX_SIMD=baseline or CRFX_SIMD=avx2 (the scalar loops, the same bits).
bool cpu_rows_avx512();

/// The lane masks of the state rows 0 … wg.A − 1 (bit y: the row has a weight for label y).
/// Requires wg.L ≤ kRowMaxLabels and a sparse layout.
std::vector<std::uint64_t> row_lane_masks(const WeightGroups& wg);

/// The state rows and the corpus's items, as the two functions below take them.
struct SparseRows {
  std::size_t L = 0;
  const std::size_t* offsets = nullptr;  // [A + 1] the row of attribute a: [offsets[a], offsets[a + 1])
  const std::uint32_t* slots = nullptr;  // the rows' labels
  const std::uint64_t* masks = nullptr;  // [A] row_lane_masks
  const std::size_t* item_offsets = nullptr;  // [tokens + 1] the items of token t (corpus-wide)
  const std::uint32_t* ids = nullptr;         // [items] attribute ids
  const double* values = nullptr;             // [items] or null: every value 1
  // For the reduction over one part's own items (a list of its own, cpu_backend.cpp): token t
  // has counts[t] of them, one after the other in ids and values; null: item_offsets.
  const std::uint16_t* counts = nullptr;
};

/// state[t·L + y] = Σ_k x_k · W[row(a_k)](y) over the items k of tokens tok0 … tok0 + T − 1 (every
/// lane written; 0 where no row has y). Runs only where cpu_rows_avx512().
void row_emissions_avx512(const SparseRows& r, std::size_t tok0, std::size_t T, const double* W, double* state);

/// G[row(a_k)] += (scale · x_k) · d[t·L + slot] over the items k of tokens tok0 … tok0 + T − 1 whose
/// attribute a_k lies in [lo, hi), in item order; [first, last) are the sentence's items (with
/// r.counts, in r's own list). Runs only where cpu_rows_avx512().
void row_reduce_avx512(const SparseRows& r, std::size_t tok0, std::size_t T, std::size_t first, std::size_t last,
                       const double* d, double scale, std::uint32_t lo, std::uint32_t hi, double* G);

}  // namespace crfx
