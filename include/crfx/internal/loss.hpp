// crfx — the loss a linear-chain CRF is trained with: the four label-sequence losses of Altun,
// Johnson & Hofmann (2003, seed 002). With p the CRF's distribution over label paths, y* the gold
// path of a sentence and μ_t(y) = p(y_t = y | x):
//   seq-log    −log p(y*|x)          the negative log-likelihood (the default; convex)
//   seq-exp    1/p(y*|x)             the sequential exponential loss (convex)
//   point-log  −Σ_t log μ_t(y*_t)    the pointwise log-loss (not convex)
//   point-exp   Σ_t 1/μ_t(y*_t)      the pointwise exponential loss (not convex)
// summed over the sentences. It reaches a backend explicitly, as an argument of
// Backend::evaluate and Backend::evaluate_sparse (Objective holds it: crfx/internal/trainer.hpp); both
// backends compute each with its exact gradient (the CPU: host/cpu/chain_loss.hpp; CUDA:
// launch_seq_exp and launch_pointwise_loss in kernels/chain_kernels.cuh).
#pragma once

#include <string>

#include "crfx/errors.hpp"

namespace crfx {

enum class SequenceLoss { seq_log, seq_exp, point_log, point_exp };

namespace detail {
struct NamedLoss {
  const char* name;
  SequenceLoss loss;
};
inline constexpr NamedLoss kSequenceLosses[] = {{"seq-log", SequenceLoss::seq_log},
                                                {"seq-exp", SequenceLoss::seq_exp},
                                                {"point-log", SequenceLoss::point_log},
                                                {"point-exp", SequenceLoss::point_exp}};
}  // namespace detail

/// "seq-log, seq-exp, point-log, point-exp" (for help texts and errors).
inline std::string sequence_loss_names() {
  std::string s;
  for (const detail::NamedLoss& l : detail::kSequenceLosses) s += (s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

/// "seq-log", "seq-exp", "point-log", "point-exp" → the enum; any other name throws crfx::Error
/// naming the known ones.
inline SequenceLoss parse_sequence_loss(const std::string& name) {
  for (const detail::NamedLoss& l : detail::kSequenceLosses)
    if (name == l.name) return l.loss;
  throw Error("unknown loss '" + name + "' (known: " + sequence_loss_names() + ")");
}

/// The name parse_sequence_loss accepts for `loss`.
inline const char* sequence_loss_name(SequenceLoss loss) {
  for (const detail::NamedLoss& l : detail::kSequenceLosses)
    if (l.loss == loss) return l.name;
  throw Error("internal: unknown SequenceLoss value");
}

/// Whether the pointwise losses (point-log, point-exp), whose gradients need every position's
/// pairwise marginals (T·L² per sentence), not only their sum.
inline bool pointwise_loss(SequenceLoss loss) {
  return loss == SequenceLoss::point_log || loss == SequenceLoss::point_exp;
}

}  // namespace crfx
