// crfx — the sequential exp-loss H(w) = Σ_i 1/p(y_i|x_i; w) (seed 002, `--loss seq-exp`) in log
// space, for the trainers that need it where H itself does not fit a double: the Objective's
// log(H + c2‖w‖²) (objective.cpp) and sequence boosting's rounds (boost.cpp).
//
// At w = 0 every sentence contributes 1/p_i = L^{T_i}: e^{3.1·T} for CoNLL-2000's 22 labels, so H
// is ~1e104 there and beyond the doubles for a sentence of more than ~229 tokens (CoNLL-2002
// Spanish has one of 1,238). log H = logsumexp_i(−log p_i) and ∇H/H = Σ_i D(i)·∇(−log p_i) with
// D(i) = exp(−log p_i − log H) ∈ [0, 1] are within range wherever the per-sentence NLLs are.
#pragma once

#include "crfx/backend.hpp"

namespace crfx {

struct LogExpLoss {
  double log_h = 0;          // log H(w)
  bool overflowed = false;   // H or ∇H does not fit a double: the per-sentence way ran
};

/// log H(w) and, where `r` is given, r = ∇H/H (a backend vector of the weights' size). From the
/// backend's seq-exp evaluate where H and ∇H are finite (one pass); where they overflow, from the
/// per-sentence NLLs: a forward pass per sentence, then (with `r`) one evaluate per sentence of
/// the log-loss gradient scaled by D(i), skipping those whose D(i) underflows to 0.
/// `per_sentence` forces the second way (tests). `passes` gets the effective passes. Error where a
/// sentence's −log p is not finite.
LogExpLoss log_seq_exp(Backend& b, const BackendCorpus& corpus, const Vector& w, Vector* r, double& passes,
                       bool per_sentence = false);

}  // namespace crfx
