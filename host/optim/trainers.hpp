// crfx — constructors of the trainers; registry.cpp lists them in one table.
#pragma once

#include <cstddef>
#include <memory>

#include "crfx/trainer.hpp"

namespace crfx {

std::unique_ptr<Trainer> make_lbfgs_trainer();
std::unique_ptr<Trainer> make_owlqn_trainer();
std::unique_ptr<Trainer> make_rprop_trainer();  // rprop.cpp
std::unique_ptr<Trainer> make_sag_trainer();   // sag.cpp (seed 004)
std::unique_ptr<Trainer> make_saga_trainer();  // sag.cpp (seed 004, Proposition 1)
// Stochastic trainers (seeds 000, 002, 003): sgd_l1.cpp, two_stage.cpp, adf.cpp, perceptron.cpp.
std::unique_ptr<Trainer> make_sgd_l1_trainer();
std::unique_ptr<Trainer> make_two_stage_trainer();
std::unique_ptr<Trainer> make_adf_trainer();
std::unique_ptr<Trainer> make_perceptron_trainer();
// CRFsuite's mistake-driven trainers: passive_aggressive.cpp (pa), arow.cpp (arow).
std::unique_ptr<Trainer> make_passive_aggressive_trainer();
std::unique_ptr<Trainer> make_arow_trainer();
// CRFsuite's l2sgd: l2sgd.cpp (SGD on the L2-regularised NLL with its calibrated Pegasos rate).
std::unique_ptr<Trainer> make_l2sgd_trainer();

/// The loop of the mistake-driven online trainers ap, pa and arow (perceptron.cpp): epochs over
/// the corpus shuffled with the seed; per batch (batch_size sentences, 1 by default) a Viterbi
/// decode with the current weights w and, when a token is mislabeled, the feature difference
///     Δ = Σ_{i∈B} f(x_i, y_i) − f(x_i, ŷ_i)        (Backend::feature_difference)
/// handed to update(), which changes w and returns the batch's loss. With averaged() the model is
/// the average of the weights after every batch, with the lazy trick (perceptron.cpp): an update
/// w += τ·Δ at step t adds (t − 1)·τ·Δ to u, and w_avg = w − u/t. Per epoch: the report (the model's
/// full objective f, as monitor_objective computes it; passes: a decode is a forward-only
/// evaluation), then, for a trainer with a loss (has_loss), the stop test converged() on the
/// epoch's mean loss against --epsilon. Stops inside an epoch (Trainer::stop_when), checkpoints
/// and bit-exact resumes as Trainer says; the trainer's own state goes through own_state().
class MistakeDrivenTrainer : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) final;

 protected:
  explicit MistakeDrivenTrainer(const char* name) : name_(name) {}
  /// Whether the model is the averaged weights (ap: always; pa: --averaging).
  virtual bool averaged(const TrainOptions& opt) const = 0;
  /// Once per train(), before a checkpoint is restored: the trainer's own vectors (arow's variances).
  virtual void prepare(Backend& b, std::size_t num_weights, const TrainOptions& opt) {
    (void)b, (void)num_weights, (void)opt;
  }
  /// After a batch with `wrong` > 0 mislabeled tokens and difference Δ: updates w, returns the
  /// batch's loss, and sets tau to τ where the update was w += τ·Δ (what the averaging adds).
  virtual double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t wrong,
                        const TrainOptions& opt, double& tau) = 0;
  /// Whether the trainer has a loss (saved in checkpoints) and stops on it (converged()).
  virtual bool has_loss() const { return false; }
  /// Whether an epoch of mean loss `mean` stops training (CRFsuite: pa below epsilon, arow at most).
  virtual bool converged(double mean, double epsilon) const {
    (void)mean, (void)epsilon;
    return false;
  }
  /// The trainer's own checkpoint state (saved last; restored after prepare()).
  virtual void own_state(StateArchive& ar, Backend& b) { (void)ar, (void)b; }

 private:
  const char* name_;
};
// Maxent trainers (seed 001; --type maxent, CPU only): gis.cpp, iis.cpp, scgis.cpp, cd.cpp, around
// maxent_problem.hpp.
std::unique_ptr<Trainer> make_gis_trainer();
std::unique_ptr<Trainer> make_iis_trainer();
std::unique_ptr<Trainer> make_scgis_trainer();
std::unique_ptr<Trainer> make_cd_trainer();

}  // namespace crfx
