// crfx — constructors of the trainers; registry.cpp lists them in one table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/trainer.hpp"

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
// CRF++'s MIRA: mira.cpp (1-best MIRA with CRF++'s per-sentence bound and shrinking).
std::unique_ptr<Trainer> make_mira_trainer();
// Wapiti's bcd: bcd.cpp (blockwise coordinate descent for the elastic net, Lavergne et al. 2010).
std::unique_ptr<Trainer> make_bcd_trainer();
/// Why bcd runs on the CPU only (TrainerInfo::cpu_only, its error).
extern const char* const kBcdCpuOnly;

/// The loop of the mistake-driven online trainers ap, pa, arow and mira (perceptron.cpp): epochs
/// over the corpus shuffled with the seed (mira: in corpus order, shuffles()); per batch
/// (batch_size sentences, 1 by default; mira: always 1) a Viterbi decode with the current weights w
/// and, when a token is mislabeled, the feature difference
///     Δ = Σ_{i∈B} f(x_i, y_i) − f(x_i, ŷ_i)        (Backend::feature_difference)
/// handed to update(), which changes w and returns the batch's loss. A batch visits() refuses is
/// skipped: no decode, no pass, no step (mira's shrinking). With averaged() the model is the
/// average of the weights after every batch, with the lazy trick (perceptron.cpp): an update
/// w += τ·Δ at step t adds (t − 1)·τ·Δ to u, and w_avg = w − u/t. Per epoch: end_epoch(), the report
/// (the model's full objective f, as monitor_objective computes it; passes: a decode is a
/// forward-only evaluation), then, before the next epoch, for a trainer with a loss (has_loss) the
/// stop test converged() on the epoch's mean loss against --epsilon, and finished(). Stops inside an
/// epoch (Trainer::stop_when), checkpoints and bit-exact resumes as Trainer says; the trainer's own
/// state goes through own_state().
class MistakeDrivenTrainer : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) final;

 protected:
  explicit MistakeDrivenTrainer(const char* name) : name_(name) {}
  /// Whether the model is the averaged weights (ap: always; pa: --averaging).
  virtual bool averaged(const TrainOptions& opt) const = 0;
  /// Whether each epoch visits the sentences in a new order drawn with the seed (ap, pa, arow:
  /// CRFsuite's shuffle), or in corpus order, every epoch alike (mira: CRF++'s).
  virtual bool shuffles() const { return true; }
  /// The sentences of a step: --batch-size (ap, pa, arow), or one (mira, whose bounds are a sentence's).
  virtual std::size_t batch_size(const TrainOptions& opt) const { return opt.batch_size; }
  /// Once per train(), before a checkpoint is restored: the trainer's own vectors (arow's
  /// variances; mira's bounds and counts, one per sentence).
  virtual void prepare(Backend& b, std::size_t num_weights, std::size_t num_sentences, const TrainOptions& opt) {
    (void)b, (void)num_weights, (void)num_sentences, (void)opt;
  }
  /// Whether the batch `span` is decoded in this epoch (mira: not a sentence its shrinking skips).
  virtual bool visits(const SentenceSpan& span) const {
    (void)span;
    return true;
  }
  /// After every decoded batch, before its update (if any): `wrong` its mislabeled tokens.
  virtual void decoded(const SentenceSpan& span, std::size_t wrong) { (void)span, (void)wrong; }
  /// After a batch with `wrong` > 0 mislabeled tokens and difference Δ: updates w, returns the
  /// batch's loss, and sets tau to τ where the update was w += τ·Δ (what the averaging adds).
  virtual double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t wrong,
                        const TrainOptions& opt, double& tau) = 0;
  /// Whether update() is w += Δ (τ = 1, no loss) and decoded() reads nothing (ap): then a
  /// backend may take the whole step on its device (SparseGradients::perceptron_step).
  virtual bool adds_difference() const { return false; }
  /// The steps at batch size 1 on `run` (the first step t0 + 1) in one call where the backend runs
  /// them in a row (SparseGradients::perceptron_steps for ap, peer_steps for pa, arow and mira with
  /// the epoch's `loss` — mira's state — on the device); an empty run asks whether it does.
  /// run_step: whether the trainer's steps go in runs, its PeerStep set.
  bool run_step(const TrainOptions& opt);
  bool take_run(Objective& obj, SentenceSpan run, Vector& w, Vector* u, double t0, SparseVector& scratch,
                double& loss);
  /// Whether update() is pa's, arow's or mira's (their options into step): then a backend may take
  /// a sentence's step on its device (SparseGradients::peer_step), the loss summed there.
  virtual bool device_step(const TrainOptions& opt, PeerStep& step) const {
    (void)opt, (void)step;
    return false;
  }
  /// The state peer_step keeps on the device: put there before its first step (`loss`, the
  /// epoch's sum so far; mira: K, its bounds and counts), taken back where the host reads it.
  virtual void to_device(SparseGradients& sg, double loss) { sg.set_peer_loss(loss); }
  virtual void from_device(SparseGradients& sg, double& loss) { loss = sg.peer_loss(); }
  /// Whether the trainer has a loss (saved in checkpoints) and stops on it (converged()).
  virtual bool has_loss() const { return false; }
  /// Whether an epoch of mean loss `mean` stops training (CRFsuite: pa below epsilon, arow at most).
  virtual bool converged(double mean, double epsilon) const {
    (void)mean, (void)epsilon;
    return false;
  }
  /// After an epoch's last batch, before its report (and its state): the trainer's own epoch-end
  /// bookkeeping (mira: its convergence count and the shrinking's reset).
  virtual void end_epoch() {}
  /// Before each epoch after the first (so that a run resumed from an epoch's report stops there
  /// too): whether the epochs up to `last` end training, with the reason (mira: CRF++'s test).
  virtual bool finished(int last, std::string& reason) const {
    (void)last, (void)reason;
    return false;
  }
  /// The trainer's own checkpoint state (saved last; restored after prepare()).
  virtual void own_state(StateArchive& ar, Backend& b) { (void)ar, (void)b; }

 private:
  /// Before the epoch after `last`: whether the epochs so far end training, by the last one's
  /// mean loss or the trainer's own test (finished()); the reason into stop_reason_.
  bool stops_after(int last, double mean_loss, double epsilon);
  /// One batch, step t: decode it with w, Δ = f(gold) − f(decoded) into `delta`, and where it has
  /// mistakes the update, its loss added to `loss`, and its share (t − 1)·τ·Δ of the averaging's u
  /// (null: no averaging).
  void learn(Objective& obj, Vector& w, SentenceSpan span, SparseVector& delta, std::uint32_t* labels, Vector* u,
             double t, const TrainOptions& opt, double& loss);

  /// from_device where the steps since to_device ran there (at the epoch's end, a checkpoint, a
  /// step the device refused).
  void sync_device(Backend& b, double& loss);

  const char* name_;
  PeerStep run_peer_;  // run_step's
  std::vector<std::uint32_t> run_ids_;  // the epoch's sentences visited since its run's start
  bool on_device_ = false;  // the state is the device's (peer_step: the epoch's loss, mira's), not the host's
  bool device_refused_ = false;  // peer_step refused right after to_device: the host's steps
};
// Maxent trainers (seed 001; --type maxent, CPU only): gis.cpp, iis.cpp, scgis.cpp, cd.cpp, around
// maxent_problem.hpp.
std::unique_ptr<Trainer> make_gis_trainer();
std::unique_ptr<Trainer> make_iis_trainer();
std::unique_ptr<Trainer> make_scgis_trainer();
std::unique_ptr<Trainer> make_cd_trainer();

}  // namespace crfx
