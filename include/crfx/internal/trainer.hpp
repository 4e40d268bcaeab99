// crfx — the trainers: one interface, one registry (`crfx train --algo list`).
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: find_trainer,
//  trainer_registry, Trainer::train, Trainer::stop_when, Objective, TrainOptions, find_option.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/checkpoint.hpp"

namespace crfx {

/// The regularised objective every trainer minimises:
///     f(w) = Σ_i −log p(y_i | x_i; w)  +  c1·‖w‖₁  +  c2·‖w‖²
/// (CRFsuite's convention; CRF++ C = 1/(2·c2), Wapiti ρ2 = 2·c2), or with another `loss`
/// (crfx/internal/loss.hpp: seq-exp, point-log, point-exp) that loss summed over the sentences in place of
/// the NLL. The smooth part
///     h(w) = Σ_i loss_i(w) + c2·‖w‖²
/// is what value_and_gradient returns; c1 is handled by the L1-aware trainers. The trainers that
/// call the backend's evaluate themselves pass loss() along (loss_refusal says which cannot).
///
/// One exception (log_scale()): seq-exp without an L1 term. Its H = Σ_i 1/p(y_i|x_i) starts at
/// Σ_i L^{T_i} (~1e104 on CoNLL-2000, beyond the doubles with one 230-token sentence), where no
/// line search can work; the smooth part is then
///     h(w) = log(H(w) + c2·‖w‖²)
/// — log is increasing, so h has the minimisers and stationary points of H + c2·‖w‖²
/// (∇h = ∇(H + c2‖w‖²)/(H + c2‖w‖²)) — evaluated in log space (optim/exp_loss.hpp). With c1 > 0
/// the L1 term must stay outside the log (OWL-QN's orthants), and H itself is minimised.
class Objective {
 public:
  Objective(Backend& backend, const BackendCorpus& corpus, double c1, double c2,
            SequenceLoss loss = SequenceLoss::seq_log);
  Backend& backend() { return backend_; }
  const BackendCorpus& corpus() const { return corpus_; }
  double c1() const { return c1_; }
  double c2() const { return c2_; }
  SequenceLoss loss() const { return loss_; }
  /// h is log(H + c2·‖w‖²): the loss is seq-exp and c1 = 0 (above).
  bool log_scale() const { return loss_ == SequenceLoss::seq_exp && c1_ == 0; }

  /// h(w) over the whole corpus, and its gradient written to `g`.
  double value_and_gradient(const Vector& w, Vector& g);
  /// h(w) only (forward passes).
  double value(const Vector& w);
  /// c1·‖w‖₁ (over the weights the L1 term applies to).
  double l1_term(const Vector& w);
  /// Full objective f(w) = h(w) + c1·‖w‖₁ given h.
  double full(double h, const Vector& w) { return h + l1_term(w); }

  /// Effective passes so far: (forward-backward + forward-only evaluations) / n, seed 004's unit.
  double passes() const { return passes_; }
  void add_passes(double p) { passes_ += p; }
  /// The count as a checkpoint saved it (resuming).
  void set_passes(double p) { passes_ = p; }

 private:
  Backend& backend_;
  const BackendCorpus& corpus_;
  double c1_, c2_;
  SequenceLoss loss_;
  double passes_ = 0;
};

/// sgd-l1's per-batch line search: none, or the heuristic of Zhou et al. 2011 (Algorithm 1).
enum class LineSearch { none, heuristic };
/// How sag and saga draw sentences (Schmidt et al. 2015 §5): uniformly, ∝ the Lipschitz
/// estimates L_i, or half and half (SAG-NUS*, the default).
enum class Sampling { uniform, lipschitz, mixed };
/// How boost chooses and steps its feature each round (host/optim/boost.cpp): `gradient`, the
/// largest |∂H/∂w_k| and an exact (smoothed) minimisation of H along it; `bound` (the default), the
/// largest decrease of the convexity bound and its minimiser (Altun, Hofmann & Johnson's Algorithm 2).
enum class BoostRule { gradient, bound };
/// The names above ("none", "heuristic"; "uniform", "lipschitz", "mixed"); Error naming the
/// unknown one and the known ones otherwise.
LineSearch parse_line_search(const std::string& name);
Sampling parse_sampling(const std::string& name);
BoostRule parse_boost_rule(const std::string& name);
const char* name_of(LineSearch v);
const char* name_of(Sampling v);
const char* name_of(BoostRule v);

/// The stochastic trainers' default initial rates (TrainOptions::eta0).
constexpr double kDefaultEta0 = 0.1;
constexpr double kDefaultEta0Heuristic = 0.025;

/// TrainOptions::max_iterations where only the trainer's own tests and the caller end the run
/// (crfx train -a boost --dev without --max-iterations: the held-out rule).
inline constexpr int kUncappedIterations = std::numeric_limits<int>::max() - 1;

struct TrainOptions {
  double c1 = 0.0;
  double c2 = 1.0;
  SequenceLoss loss = SequenceLoss::seq_log;  // the objective's loss (crfx/internal/loss.hpp)
  int max_iterations = 0;   // 0 = no limit
  int period = 10;          // stopping test window (CRFsuite `period`)
  double delta = 1e-5;      // relative improvement threshold (CRFsuite `delta`)
  double epsilon = 1e-5;    // ‖g‖ / max(1, ‖w‖) threshold (CRFsuite/liblbfgs `epsilon`)
  int memory = 6;           // L-BFGS history pairs
  int max_linesearch = 20;
  std::uint64_t seed = 1;   // shuffling / sampling; same seed → same model

  // ---- stochastic trainers (sgd-l1, two-stage, sag, saga, adf, ap, l2sgd, mira) ------------
  std::size_t batch_size = 1;         // sentences per update (1 = online)
  int epochs = 30;                    // sgd-l1, adf, ap, pa, arow, l2sgd, mira: passes over the data
  /// sgd-l1: η₀ in η_k = η₀·α^(k/N); adf: the initial rate γ. Unset: the trainer's default,
  /// kDefaultEta0, or kDefaultEta0Heuristic with the heuristic line search (so for two-stage).
  std::optional<double> eta0;
  double alpha = 0.85;                // sgd-l1: the decay base α
  LineSearch line_search = LineSearch::none;  // sgd-l1 (two-stage: always heuristic)
  int sgd_epochs = 5;                 // two-stage: stage-1 epochs before OWL-QN
  Sampling sampling = Sampling::mixed;        // sag, saga
  int max_epochs = 100;               // sag, saga: epoch cap
  double adf_alpha = 0.995;           // adf: rate decay for rare features
  double adf_beta = 0.6;              // adf: rate decay for frequent features
  int adf_windows = 10;               // adf: update the rates every n / adf_windows samples

  // ---- CRFsuite's pa and arow (epochs, seed and epsilon as above) ------------------------------
  int pa_type = 1;                    // pa: 0 PA, 1 PA-I, 2 PA-II (CRFsuite's type)
  double pa_c = 1.0;                  // pa: the aggressiveness C of PA-I and PA-II (CRFsuite's c)
  bool error_sensitive = true;        // pa: loss −w·Δ + √(mislabeled tokens), else −w·Δ + 1
  bool averaging = true;              // pa: the model is the averaged weights
  double arow_variance = 1.0;         // arow: the initial variance of every weight
  double arow_gamma = 1.0;            // arow: the trade-off γ

  // ---- CRFsuite's l2sgd (epochs, period, delta and seed as above): its rate calibration --------
  double calibration_eta = 0.1;       // the first rate tried (CRFsuite's calibration.eta)
  double calibration_rate = 2.0;      // the factor the rate is multiplied, then divided by
  int calibration_samples = 1000;     // the sentences the trials train on
  int calibration_candidates = 10;    // the rates that lower the loss sought in each direction
  int calibration_max_trials = 20;    // CRFsuite's bound on the trials (max_trials − 1 run, at least 1)

  // ---- CRF++'s MIRA (epochs as above; corpus order, so no seed) -------------------------------
  double mira_c = 1.0;                // the bound C on the steps of a sentence summed over the run (CRF++'s -c)
  int shrinking_size = 20;            // a sentence decoded right this many epochs running is skipped (CRF++'s -H)

  // ---- Wapiti's bcd (max_iterations as above) -----------------------------------------------
  double bcd_kappa = 1.5;             // the curvature bound's stability factor κ (Wapiti's --kappa)
  int stop_window = 5;                // the error-rate window (Wapiti's --stopwin; 0: no test)
  double stop_epsilon = 0.02;         // its spread in percentage points (Wapiti's --stopeps)

  // ---- sequence boosting (max_iterations, period and delta as above) ---------------------------
  BoostRule boost_rule = BoostRule::bound;  // the feature's choice and step each round
  // The held-out stopping rule (seed 002 §5.2, "cross-validation on a heldout corpus"): with
  // `crfx train --dev`, stop once the dev figure has not improved for this many rounds (or a fifth
  // of the rounds to the best, where more) and write the best round's model (apps/cmd_train.cpp;
  // 0: no such test, the last round's model). Without --max-iterations that rule ends the run.
  int dev_patience = 2000;
};

/// What a trainer reports after every iteration (or epoch).
struct Progress {
  int iteration = 0;
  double passes = 0;
  double objective = 0;
  double gradient_norm = std::numeric_limits<double>::quiet_NaN();  // NaN: not computed
  std::size_t active_features = 0;
  double seconds = 0;
  double step = 0;
  /// The trainer's whole state at this point, for a checkpoint (crfx train --checkpoint): run on
  /// a saving StateArchive it saves what resume_from() needs to continue from here. Null where the
  /// trainer cannot be resumed from this point.
  const StateFn* state = nullptr;
  /// A report inside an iteration: the last report of a stochastic trainer stopped inside an
  /// epoch by its stop poll (Trainer::stop_when). `iteration` is then the epoch in progress, of
  /// which `sentences` of `epoch_sentences` were processed (sag, saga: sentences drawn); the
  /// objective and gradient norm are NaN (not computed: the stop is meant to be quick), passes,
  /// seconds and active features are the current ones, and `state` saves the state inside the
  /// epoch (a resume continues there). 0 and 0 at every other report.
  std::size_t sentences = 0;
  std::size_t epoch_sentences = 0;
  bool within_iteration() const { return epoch_sentences != 0; }
};
/// Called after each iteration with the current weights; return false to stop training.
using ProgressFn = std::function<bool(const Progress&, const Vector& w)>;
/// Asked between mini-batches whether to stop there (Trainer::stop_when).
using StopPoll = std::function<bool()>;

class Trainer {
 public:
  virtual ~Trainer() = default;
  /// Minimises `objective` starting from `w` (updated in place). Returns the final objective.
  virtual double train(Objective& objective, Vector& w, const TrainOptions& options,
                       const ProgressFn& progress) = 0;
  /// Why the last train() stopped, with its figures: the rule that fired ("the objective improved
  /// by 8.1e-06 over the last 10 iterations, less than --delta 1e-05"); crfx train prints it.
  const std::string& stop_reason() const { return stop_reason_; }
  /// The next train() continues from a checkpoint instead of starting: it allocates as usual,
  /// restores its state from `state` (a restoring archive, e.g. Checkpoint::state(), positioned
  /// at the state a Progress::state of this trainer saved, with the same options and data) and
  /// goes on after the iteration the state was saved at — ending with the weights an
  /// uninterrupted run gives, bit for bit, on the same backend. Null: start afresh.
  void resume_from(StateArchive* state) { resume_ = state; }
  /// A stop request for the next train()s, polled where reports are far apart: the stochastic
  /// trainers (sgd-l1, two-stage's first stage, adf, ap, pa, arow, l2sgd, mira, sag, saga) ask it after
  /// every mini-batch that does not end an epoch (l2sgd: not in its rate calibration, before its
  /// first epoch; mira: after every sentence, one its shrinking skips too). When it returns true they make one last report inside the epoch
  /// (Progress::within_iteration, with its state: a resume continues after that mini-batch and
  /// ends bit-identical to an uninterrupted run), stop whatever the ProgressFn returns
  /// (stop_reason: the caller) and return NaN, leaving in `w` the model's weights as an epoch's
  /// end would give them (sgd-l1, adf: the lazy L2 decay applied; sag, saga: the lazy steps
  /// applied; ap: the averaged weights; l2sgd: its model, the best epoch's weights, or in its first
  /// epoch the lazy L2 decay applied). That last report is handed the working weights, their
  /// lazy updates still pending (ap: the averaged weights, as at every report). After the batch
  /// that ends an epoch the epoch's report follows, and there, as for every trainer at each of its
  /// reports, the ProgressFn decides (a caller stopping at the next safe point returns false
  /// there). The full-batch trainers do not poll: their reports are their safe points. Null (the
  /// default): no poll.
  void stop_when(StopPoll poll) { stop_poll_ = std::move(poll); }

 protected:
  /// For train(): restores `state` from the archive resume_from() gave, once; true when it did.
  bool restore(const StateFn& state) {
    if (!resume_) return false;
    StateArchive* archive = resume_;
    resume_ = nullptr;
    state(*archive);
    return true;
  }

  /// For the stochastic trainers: whether the caller asked to stop now (stop_when).
  bool stop_requested() const { return stop_poll_ && stop_poll_(); }

  std::string stop_reason_;
  StateArchive* resume_ = nullptr;
  StopPoll stop_poll_;
};

/// One setting, as CRFsuite's trainers declare theirs (name, type, default, help): its name (crfx
/// train's --NAME), the kind of value, its help, and how it reads and writes its TrainOptions
/// field. The default is the field's initialiser in TrainOptions — one default, in the library;
/// the command line and the option listings are generated from these tables.
struct OptionSpec {
  const char* name;
  const char* kind;  // "real", "integer", "seed", or the choices ("none | heuristic")
  const char* help;
  /// The field's value as text (the shortest decimal that reads back; "" for an unset optional,
  /// whose default the trainer picks).
  std::string (*get)(const TrainOptions&);
  /// Parses `text` into the field; Error saying what is wrong with the value (not naming the
  /// option: the caller knows how its user spells it) for text that is not a valid value.
  void (*set)(TrainOptions&, const std::string& text);
};

/// The objective's settings, which every trainer reads (c1, c2), then every trainer setting, each
/// once, in listing order.
const std::vector<OptionSpec>& objective_options();
const std::vector<OptionSpec>& trainer_options();
/// The spec called `name` among both tables, or nullptr.
const OptionSpec* find_option(const std::string& name);

struct TrainerInfo {
  const char* name;
  const char* summary;
  std::unique_ptr<Trainer> (*make)();
  /// The trainer's own settings (names in trainer_options()), the ones it reads; the objective's
  /// c1 and c2 apply to every trainer but ap, pa, arow, mira and boost.
  std::vector<const char*> options;
  bool uses_objective = true;
  /// Weight-sized vectors the trainer holds besides w — its own and those the backend keeps for
  /// the primitives it calls — for the memory estimate; and whether it stores marginals (SAG).
  std::size_t (*state_vectors)(const TrainOptions&) = nullptr;
  bool stored_marginals = false;
  /// Trains Maxent models only (crfx train --type maxent: seed 001's gis, iis, scgis, cd).
  bool maxent_only = false;
  /// Why the trainer runs on the CPU backend only, or null (any backend): crfx train refuses
  /// --device cuda with it and takes the CPU under --device auto; the trainer refuses another backend.
  const char* cpu_only = nullptr;
  /// Whether `name` is one of this trainer's settings (objective settings included).
  bool takes(const std::string& name) const;
};

/// The memory a training run will hold, estimated from the sizes before anything is allocated:
/// `crfx train` prints it and refuses a run that cannot fit.
struct MemoryEstimate {
  std::size_t weights = 0;    // the weight vector
  std::size_t optimizer = 0;  // the trainer's vectors and backend state (SAG's stored marginals)
  std::size_t corpus = 0;     // the compiled training data
  std::size_t vectors = 0;    // weight-sized vectors in `optimizer`
  std::size_t dictionaries = 0;  // the feature space's strings and indexes (check_memory's argument)
  std::size_t total() const { return weights + optimizer + corpus + dictionaries; }
};
MemoryEstimate estimate_memory(const TrainerInfo& trainer, const TrainOptions& options, const Dims& dims,
                               const Corpus& corpus);
/// A run's memory on the backend it will train on: estimate_memory, the backend's copy of the
/// corpus (upload_bytes) and its evaluate buffers (workspace_bytes), against the memory available
/// there (Backend::memory_available) or `limit` bytes where that is smaller and > 0; with the
/// `dictionaries` bytes the run holds beside (the feature space: Dictionary::bytes). With a `limit`,
/// the whole estimate (the corpus and dictionaries already held included) must fit in it too.
struct MemoryCheck {
  MemoryEstimate estimate;  // estimate_memory's
  std::string figures;    // "weights 8.2 MB, optimizer state 58.4 MB (16 weight vectors), corpus …,
                          //  buffers …; 159.1 MB estimated, 24.5 GB available" (crfx train's line)
  bool fits = true;       // false: the run would not fit (availability unknown counts as fitting)
  std::string shortfall;  // where !fits: "needs an estimated 79.7 MB more (…) but 20.0 MB is available on cpu"
};
MemoryCheck check_memory(const TrainerInfo& trainer, const TrainOptions& options, const Dims& dims,
                         const Corpus& corpus, Backend& backend, double limit = 0, std::size_t dictionaries = 0);
/// Bytes as "512 B", "8.2 MB", "24.5 GB" (powers of 1000).
std::string bytes_text(double bytes);
/// Every algorithm, in listing order.
const std::vector<TrainerInfo>& trainer_registry();
/// Why `trainer` cannot minimise `loss` (a sentence naming both, for an error), or "" when it can:
/// lbfgs, owlqn, rprop, sgd-l1, two-stage and adf take every loss; sag and saga (their stored
/// marginals are the log-loss's) and the Maxent trainers take seq-log only; ap minimises no loss
/// (every loss but seq-log, the default, is refused). The trainers check it too.
std::string loss_refusal(const TrainerInfo& trainer, SequenceLoss loss);
/// The same by the trainer's name: throws Error with the reason (for the trainers themselves).
void check_loss(const char* trainer, SequenceLoss loss);
/// The registry entry called `name`, or Error listing the known names.
const TrainerInfo& find_trainer(const std::string& name);

/// CRFsuite's stopping test: relative improvement of the objective over the last `period`
/// iterations below `delta`.
class ImprovementTest {
 public:
  ImprovementTest(int period, double delta) : period_(period), delta_(delta) {}
  /// Records f for this iteration; true when training should stop.
  bool converged(double f);
  /// Why converged() returned true: the improvement it measured against delta and period.
  std::string reason() const;
  /// Saves or restores the recorded objectives (checkpoints).
  void state(StateArchive& ar);

 private:
  int period_;
  double delta_;
  double last_ = 0;  // the relative improvement of the last test
  std::vector<double> history_;
};

// The stopping rules in the words crfx train prints (Trainer::stop_reason).
/// "--max-iterations 100 reached" (option without its dashes).
std::string stop_at_limit(const char* option, int value);
/// "‖g‖ / max(1, ‖w‖) = 8.1e-06, at most --epsilon 1e-05" (`what` names the measured norm).
std::string stop_at_gradient(const char* what, double value, double epsilon);
/// The line search found no decrease in `trials` trials.
std::string stop_at_line_search(int trials);
/// The progress callback asked to stop.
std::string stop_by_caller();

}  // namespace crfx
