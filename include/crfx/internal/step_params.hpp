// crfx — what the stochastic trainers hand a backend for steps it may take on its device without
// the host (issue 37): sgd-l1's heuristic line search's rates (SparseGradients::
// sgd_l1_search_step) and sgd-l1's and adf's steps at batch size 1 in runs
// (SparseGradients::gradient_steps). Internal, as backend.hpp, which includes it.
#pragma once

#include <cstdint>

#include "crfx/internal/loss.hpp"

namespace crfx {

class Vector;  // backend.hpp

/// A step of sgd-l1's heuristic line search (SparseGradients::sgd_l1_search_step, host/rules/
/// sgd_l1_search.hpp): the rates its 3 trials can take, η·2^j for j = kLow … kLow + 4 (index
/// j − kLow), each with what it adds to the L1 penalty per weight (r·c1/N) and to the lazy L2
/// decay's log-sum (log1p(−2·r·c2/N)) — made on the host, so a device deciding the search
/// computes no log1p of its own — and the batch objective's penalty coefficients c1/N, c2/N.
struct SgdL1StepParams {
  static constexpr int kLow = -2, kRates = 5;
  double rate[kRates] = {}, u_step[kRates] = {}, log_decay[kRates] = {};
  double c1 = 0, c2 = 0;
  SequenceLoss loss = SequenceLoss::seq_log;
};

/// sgd-l1's steps or adf's at batch size 1, one sentence each, for SparseGradients::gradient_steps.
/// Step i on sentence i of the span is the trainer's step through the primitives: where `stamp` is
/// given, the sentence's support caught up by LazyDecayRule{clock[i], coef} on {w, stamp, adf ? rate
/// : none}; the gradient g of its loss at w (evaluate_sparse_gradient, scale 1); then
/// SgdL1Rule{eta[i], u[i]} on {w, q} (sgd-l1) or AdfStepRule on {w, rate, count} (adf) over g's
/// support, or (`axpy`: l2sgd) w += −eta[i]·g as sparse_axpy; where `loss_sum` is given (a vector
/// of 1), each step's NLL is added to it in step order. The scalars are the host's, per step. With `line_search`, sgd-l1's steps with its
/// heuristic line search instead: step i is sgd_l1_search_step's with search[i], u and Λ in
/// `scalars` (a vector of 2; Λ the catch-up's clock).
struct GradientSteps {
  bool line_search = false;
  const SgdL1StepParams* search = nullptr;  // [steps] (sgd_l1_step_params(η, c1, c2, N, loss))
  Vector* scalars = nullptr;                // u, Λ
  double c1 = 0, N = 1;                     // as sgd_l1_step_params was given them
  bool adf = false, axpy = false;
  Vector* loss_sum = nullptr;  // each step's NLL added, or null
  SequenceLoss loss = SequenceLoss::seq_log;
  double coef = 0;           // the catch-up's decay coefficient (sgd-l1: 0, Λ the clock)
  Vector* q = nullptr;       // sgd-l1: the L1 penalty each weight has received, or null
  Vector* rate = nullptr;    // adf: the per-weight rates
  Vector* count = nullptr;   // adf: the window's counts
  Vector* stamp = nullptr;   // null: no catch-up (c2 = 0)
  const double* clock = nullptr;  // [steps] the catch-up's clock (sgd-l1: Λ; adf: the step count)
  const double* eta = nullptr;    // [steps] sgd-l1: the step's rate
  const double* u = nullptr;      // [steps] sgd-l1: the total L1 penalty after the step
};

}  // namespace crfx
