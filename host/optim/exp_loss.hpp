// crfx — the sequential exp-loss H(w) = Σ_i 1/p(y_i|x_i; w) (seed 002, `--loss seq-exp`) in log
// space, for the trainers that need it where H itself does not fit a double: the Objective's
// log(H + c2‖w‖²) (objective.cpp), sequence boosting's rounds (boost.cpp), and the start of the
// L1 trainers on seq-exp (with_seq_exp_start).
//
// At w = 0 every sentence contributes 1/p_i = L^{T_i}: e^{3.1·T} for CoNLL-2000's 22 labels, so H
// is ~1e104 there and beyond the doubles for a sentence of more than ~229 tokens (CoNLL-2002
// Spanish has one of 1,238). log H = logsumexp_i(−log p_i) and ∇H/H = Σ_i D(i)·∇(−log p_i) with
// D(i) = exp(−log p_i − log H) ∈ [0, 1] are within range wherever the per-sentence NLLs are.
#pragma once

#include <functional>
#include <memory>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/trainer.hpp"

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

/// A trainer that runs `make()`'s trainer (`name` in stop reasons: "OWL-QN", "RPROP") as it is,
/// except on seq-exp with c1 > 0. There the L1 term cannot go inside the log the Objective
/// minimises without c1 (OWL-QN's orthant steps, RPROP's pseudo-gradient need h + c1‖w‖₁), and
/// from w = 0 a step on H itself fails at once (OWL-QN's first step moves H from 3.7e104 to
/// 3.7e86 on CoNLL-2000, the next finds no decrease a double can show; on Spanish NER H is beyond
/// the doubles). So it runs in two phases: (1) L-BFGS on log(H + c2‖w‖²), without c1, to its own
/// stopping test; (2) the trainer on H + c2‖w‖² + c1‖w‖₁ itself from there, where H is a few
/// thousand. The objective is convex, so the start changes the path, not the optimum. One progress
/// stream: phase 2's iterations continue phase 1's numbering, --max-iterations bounds both
/// together, the objective reported switches from the log to H + c2‖w‖² + c1‖w‖₁. A checkpoint
/// holds the phase and phase 1's last report before the phase's trainer's state.
std::unique_ptr<Trainer> with_seq_exp_start(const char* name, std::function<std::unique_ptr<Trainer>()> make);

}  // namespace crfx
