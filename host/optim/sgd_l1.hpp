// crfx — internals shared by the stochastic trainers (sgd-l1, two-stage, adf, ap; sag and saga use
// progress_within).
//
// Stops inside an epoch (Trainer::stop_when): each asks the poll after every mini-batch but an
// epoch's last; on a stop it makes a report inside the epoch (progress_within) whose state is the
// epoch-end state plus the position in the epoch (its permutation is the shuffler's) and what the
// lazy updates need there, then brings the weights up to date for the model and returns NaN.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "crfx/internal/trainer.hpp"

namespace crfx {

class Stopwatch;  // quasi_newton.hpp

/// Deterministic epoch shuffles: std::mt19937_64 seeded with TrainOptions::seed and a Fisher–Yates
/// shuffle on raw 64-bit draws (j = draw mod (i + 1); the modulo bias is below 2⁻⁴⁰ for any
/// corpus that fits in memory). Same seed → same permutations on every platform (std::shuffle
/// and std::uniform_int_distribution are implementation-defined).
class EpochShuffler {
 public:
  EpochShuffler(std::size_t n, std::uint64_t seed);
  /// Reshuffles the permutation in place (each epoch continues from the last one's order).
  const std::vector<std::uint32_t>& next();
  /// The current permutation (the last next()'s, or a restored one).
  const std::vector<std::uint32_t>& permutation() const { return perm_; }
  /// Saves or restores the generator and the permutation (checkpoints).
  void state(StateArchive& ar);

 private:
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> perm_;
};

/// sgd-l1's (no line search) and adf's steps at batch size 1 in runs where the backend takes them
/// (SparseGradients::gradient_steps; issue 37): the trainer decides each step's scalars as before
/// and queues them with its sentence; take() hands the queue over, before anything reads the
/// weights (a window's end, a stop, an epoch's end). Off (the trainer steps through the
/// primitives) where not `wanted` or where the backend has no runs.
class GradientRunQueue {
 public:
  GradientRunQueue(Objective& obj, Vector& w, const GradientSteps& shape, bool wanted);
  bool on() const { return on_; }
  void push(std::uint32_t sentence, double clock, double eta, double u);
  void push(std::uint32_t sentence, const SgdL1StepParams& search);  // (GradientSteps::line_search)
  /// `scalars`: the line search's u and Λ on the backend (GradientSteps::scalars).
  void take(Vector* scalars = nullptr);

 private:
  Objective& obj_;
  Vector& w_;
  GradientSteps shape_;
  bool on_ = false;
  std::vector<std::uint32_t> ids_;
  std::vector<double> clock_, eta_, u_;
  std::vector<SgdL1StepParams> search_;
};

/// Full objective f(w) = Σ NLL + c1·‖w‖₁ + c2·‖w‖² over the whole corpus, for monitoring: one
/// forward pass that is NOT counted in Objective::passes().
double monitor_objective(Objective& obj, const Vector& w);

/// Throws Error unless the options every stochastic trainer shares are valid
/// (epochs ≥ 1, batch_size ≥ 1).
void validate_stochastic_options(const TrainOptions& opt, int epochs);

/// Stage-1 driver of sgd-l1 and two-stage: `epochs` epochs of mini-batch SGD with the cumulative
/// L1 penalty, from w (updated in place). Reports Progress per epoch with iteration = epoch and
/// seconds from the start of this call. Returns the objective after the last epoch (lazy updates
/// flushed); *stopped = true when the progress callback asked to stop. With `resume`, continues
/// from the state a Progress::state of this stage saved (Trainer::resume_from). With `poll`
/// (Trainer::stop_when), asks it after every mini-batch that does not end an epoch and stops
/// there when it says so (a report inside the epoch, *stopped = true, NaN returned).
double run_sgd_l1(Objective& obj, Vector& w, const TrainOptions& opt, int epochs, bool heuristic,
                  const ProgressFn& progress, bool* stopped, StateArchive* resume = nullptr,
                  const StopPoll* poll = nullptr);

/// The last report of a stochastic trainer stopped inside epoch `epoch` after `done` of `total`
/// sentences (Progress::within_iteration): the objective and gradient norm not computed.
Progress progress_within(int epoch, std::size_t done, std::size_t total, Objective& obj, const Vector& w,
                         double step, const Stopwatch& clock);

}  // namespace crfx
