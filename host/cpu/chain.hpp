// crfx — the per-sentence numerics of a linear-chain CRF, in double precision (the CPU backend
// and the reference for every other backend).
//
// Scores of one sentence of T positions and L labels:
//   state   [T][L]     s_t(y), log domain
//   trans   [L][L]     τ(y', y), the transition scores shared by all positions
//   edge    [T] → [L][L] or nullptr: the full transition matrix at position t (≥ 1) when enriched
//           edge features fire there; nullptr positions use `trans`
// No BOS/EOS transitions (CRFsuite, CRF++ and Wapiti have none): the path score is
//   Σ_t s_t(y_t) + Σ_{t≥1} τ_t(y_{t−1}, y_t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace crfx {

/// The scaled path (chain.cpp) works on rows of L labels padded with zeros to a multiple of
/// kChainLanes doubles: chain_stride(L) per row.
inline constexpr std::size_t kChainLanes = 4;
inline constexpr std::size_t chain_stride(std::size_t L) { return (L + kChainLanes - 1) / kChainLanes * kChainLanes; }

/// Whether chain.cpp's forward and backward passes run their AVX2 copies: on x86-64 CPUs with
/// AVX2, unless the environment sets CRFX_SIMD=baseline (to compare the copies, which give the
/// same bits).
bool cpu_simd_avx2();

struct ChainScores {
  std::size_t T = 0, L = 0;
  const double* state = nullptr;         // [T][L]
  const double* trans = nullptr;         // [L][L]
  const double* const* edge = nullptr;   // [T] per-position [L][L] or nullptr (may be null)
  /// Optional, precomputed by the caller once per weight vector: E = exp(τ − τ_max) [L][L], its
  /// transpose, and τ_max.
  const double* exp_trans = nullptr;
  const double* exp_trans_t = nullptr;
  /// Optional, the same E and Eᵀ as the scaled path takes them: [2][L][chain_stride(L)], each
  /// row's padding zero. Preferred to exp_trans (which the path would copy so, per sentence).
  const double* exp_trans_padded = nullptr;
  double trans_max = 0;
  /// No transition scores at any position (τ ≡ 0 and no edge matrix): the positions are
  /// independent — a Maxent model, or a CRF without transitions — so p(y | x) = Π_t softmax(s_t),
  /// log Z = Σ_t logsumexp(s_t) and Viterbi is the arg-max per position. forward_backward,
  /// log_partition and viterbi then take O(L) per position instead of O(L²) (pairwise marginals,
  /// p_{t−1} ⊗ p_t, only where asked for); the log-space reference path ignores the flag.
  bool independent = false;
  const double* trans_at(std::size_t t) const { return edge && edge[t] ? edge[t] : trans; }
};

/// Work buffers, reused across sentences (grow-only).
struct ChainScratch {
  std::vector<double> a, b, S, u, v, E, pair, pair_pos, outer;  // see chain.cpp
  std::vector<std::uint32_t> back;
  std::size_t log_space_fallbacks = 0;  // sentences the scaled path handed to log space
};

/// What forward_backward writes. Any pointer may be null.
struct ChainOutputs {
  double* node = nullptr;      // [T][L]   p(y_t = y | x)
  double* pair_sum = nullptr;  // [L][L]   Σ_{t≥1} p(y_{t−1} = y', y_t = y | x), accumulated (+=)
  double* pair_at = nullptr;   // [T][L][L] p(y_{t−1}, y_t | x) per position (t = 0 left untouched)
};

/// log Z(x) and the marginals. Runs the scaled exp-space recursion (L exps per position) and
/// falls back to exact log-space recursions for the whole sentence when a scaling factor
/// underflows (extreme weights); `log_space_only` forces the log-space path.
double forward_backward(const ChainScores& x, const ChainOutputs& out, ChainScratch& scratch,
                        bool log_space_only = false);

/// log Z(x) only (forward pass).
double log_partition(const ChainScores& x, ChainScratch& scratch, bool log_space_only = false);

/// Score of the label path `y` [T].
double path_score(const ChainScores& x, const std::uint32_t* y);

/// Best path into `y` [T]; ties go to the smallest label id (at every step and at the end).
/// Returns its score.
double viterbi(const ChainScores& x, std::uint32_t* y, ChainScratch& scratch);

/// The n best paths (list Viterbi): path r into y + r·T, its score into score[r], best first.
/// Every (position, label) keeps its n best partial paths, ordered by score, ties by the smaller
/// predecessor index yp·n + k (predecessor label yp, its rank k); the end is chosen the same way
/// over (label, rank). So path 0 is viterbi()'s, and the order is a strict total order: every
/// implementation of this rule (the CUDA kernel) gives the same list. When the sentence has fewer
/// than n paths (L^T < n) the missing ones get score −∞ and labels 0. Returns the paths found.
std::size_t viterbi_nbest(const ChainScores& x, std::size_t n, std::uint32_t* y, double* score,
                          ChainScratch& scratch);

}  // namespace crfx
