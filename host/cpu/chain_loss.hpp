// crfx — the four label-sequence losses of Altun, Johnson & Hofmann (2003, "Investigating loss
// functions and optimization methods for discriminative learning of label sequences") for one
// sentence, with their exact gradients with respect to every score of chain.hpp's ChainScores
// (state s_t(y), transitions τ_t(y', y)). With p the CRF's distribution over paths, y* the gold
// path and μ_t(y) = p(y_t = y | x):
//   seq-log    −log p(y*|x)                  = log Z − score(y*)          (the NLL of chain.cpp)
//   seq-exp    1/p(y*|x)                     = exp(log Z − score(y*))
//   point-log  −Σ_t log μ_t(y*_t)
//   point-exp   Σ_t 1/μ_t(y*_t)
// (The paper's exponential losses subtract constants — 1/p − 1 — which change no gradient.)
// Every loss costs O(T·L²): one forward_backward plus two L×L sweeps per position for the
// pointwise ones (chain_loss.cpp has the derivation); sentences whose gold marginals are too small
// for the scaled marginals to carry them (< 1e-50) are computed exactly in log space instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/chain.hpp"
#include "crfx/internal/loss.hpp"

namespace crfx {

// SequenceLoss, parse_sequence_loss, sequence_loss_name, sequence_loss_names: crfx/internal/loss.hpp.

/// Where the gradient goes; any pointer may be null. What is written is exp(log_scale) times the
/// derivative of the loss, the product formed so that it stays finite wherever it is representable.
/// An exponential loss of an extreme sentence can exceed the double range (1/p for p < 1e-308):
/// with log_scale = 0 its gradient entries then saturate to ±inf (never NaN); with
/// log_scale = −log_value (LossValue) what is written is ∂log(loss)/∂score, always finite.
struct LossGradient {
  double* node = nullptr;      // [T][L]     ∂loss/∂s_t(y) (written)
  double* pair_sum = nullptr;  // [L][L]     Σ_{t≥1} ∂loss/∂τ_t(y', y), accumulated (+=)
  double* pair_at = nullptr;   // [T][L][L] ∂loss/∂τ_t(y', y) per position (written; t = 0 zeroed)
  double log_scale = 0;
};

struct LossValue {
  /// The loss. Finite for the log losses; +inf for an exponential loss only where it exceeds the
  /// double range (p(y*|x) or a gold marginal below ~1e-308).
  double value = 0;
  /// log(value), computed directly: finite for the exponential losses of any finite scores (the
  /// handle on a loss whose value overflows); for the log losses log(value), −inf where value ≤ 0.
  double log_value = 0;
};

/// Work buffers, reused across sentences (grow-only), and counters of the work done.
struct LossScratch {
  ChainScratch chain;  // forward_backward's
  std::vector<double> node, pair, fwd, rho, bwd, la, lb, lmu, lw, tmp;
  /// forward_backward calls made (one per sentence with a gradient or a pointwise loss, none on
  /// the log-space path).
  std::size_t chain_calls = 0;
  /// L×L sweeps this file made, in units of one label pair at one position: per sentence
  /// 2·(T−1)·L² for a pointwise gradient on the scaled path, 4·(T−1)·L² on the log-space path
  /// (which also does the forward and backward recursions; 2·(T−1)·L² for a value only), 0 for
  /// the sequence losses. Linear in T: the tests check it.
  std::size_t steps = 0;
  /// Sentences of a pointwise loss computed on the exact log-space path.
  std::size_t log_space_paths = 0;
};

/// The loss of the gold path `gold` [T] (every label < L, else crfx::Error) and, where `out` asks,
/// its gradient. T = 0 gives 0 and writes nothing. `log_space_only` forces the exact log-space
/// computations (tests): chain.cpp's log-space path for the sequence losses, this file's for the
/// pointwise ones.
LossValue sequence_loss(SequenceLoss loss, const ChainScores& x, const std::uint32_t* gold,
                        const LossGradient& out, LossScratch& scratch, bool log_space_only = false);

}  // namespace crfx
