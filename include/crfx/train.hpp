// crfx — training a model in one call, on sentences in memory or read from files. The `crfx
// train` command and the Python module are callers of this; so is any program that trains.
//
//   crfx::TrainConfig config;                      // L-BFGS, c2 = 1, CRFsuite's feature set
//   config.templ = crfx::FeatureTemplate::parse("U00:%x[0,0]\nB\n", "template");
//   crfx::TrainResult r = crfx::train(config, crfx::conll_data({{{"He", "B-NP"}, {"ran", "B-VP"}}}));
//   crfx::Tagger tagger(std::move(r.model));       // the best device: a usable GPU, else the CPU
//
// Every check of the input lives here (no sentences, no attributes, attribute values out of
// range, an implausible label set, a run that does not fit in memory), so that every caller
// refuses the same input with the same message.
//
// Entry points meant to stay stable: TrainConfig, TrainResult, train, TrainingRun, conll_data,
// attribute_data.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/collective.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/template.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"

namespace crfx {

/// A training run's settings (crfx train's options).
struct TrainConfig {
  std::string algorithm = "lbfgs";  // a name of trainer_registry() (crfx train --algo list)
  ModelType type = ModelType::crf;
  TrainOptions options;             // c1, c2, loss, stopping, the trainer's own settings
  FeatureSet features;              // CRFsuite's observed pairs by default
  std::size_t min_freq = 0;         // attributes seen fewer times are dropped (CRF++ -f)
  /// CoNLL columns are read through this CRF++ template; CRFsuite attribute data needs none
  /// (InputFormat::crfsuite).
  InputFormat format = InputFormat::conll;
  FeatureTemplate templ;
  BackendOptions backend;           // device (auto: a usable GPU, else the CPU) and threads
  double max_memory = 0;            // bytes the run may use; 0: what the backend has
  /// Bytes of device memory the run may use (0: what is free): a corpus that does not fit beside
  /// the weights and optimizer state is streamed (Backend::set_memory_limits).
  double max_device_memory = 0;
  /// After every iteration (epoch); returning false stops training there. May be empty.
  ProgressFn progress;
  /// Asked after every iteration, by the stochastic trainers inside an epoch, and by the batch
  /// trainers' passes: true stops training there. May be empty. A batch trainer's pass is
  /// abandoned where its iterations are slow (over `abandon_seconds`, or before the first has
  /// ended): the model is then the last completed iteration's (TrainResult::stopped_in_pass), or
  /// there is none (TrainingStopped). Where they are quick, the stop waits for the iteration's end.
  std::function<bool()> stop;
  double abandon_seconds = 1.0;
  /// Inside an iteration of a batch trainer that lasts longer than this, a note line (`note`)
  /// every so often: "iteration N in progress: S sentences evaluated, T s".
  double progress_seconds = 5.0;
  /// The run's report lines ("data: …", "memory: …", "training: …"), each without its newline.
  std::function<void(const std::string&)> note;
  /// The processes of a data-parallel run (crfx/internal/collective.hpp), or null: this process alone.
  /// Every rank compiles the same data the same way, keeps its shard (prepare()), and every pass
  /// over the data is summed across the ranks (distributed_backend); the weights, the steps and
  /// the model are the same on every rank. With more than one rank only the full-batch trainers
  /// run (kDistributedTrainers), the stop (`stop`) is agreed by all ranks at an iteration's end
  /// (a pass is never abandoned), and --device cuda takes the device of the rank's local rank.
  Collective* collective = nullptr;
  /// With `collective`: how the ranks' gradients may be summed on their devices (NCCL; the crfx
  /// tool built with -DCRFX_NCCL=ON); empty: through the host.
  DeviceSumMaker device_sum;
};

/// The trainers a run on several processes takes: their objective and gradient are sums over
/// the sentences, evaluated whole each iteration.
inline constexpr const char* kDistributedTrainers = "lbfgs, owlqn, rprop";

/// What a training run gives.
struct TrainResult {
  Model model;
  double objective = 0;        // the trainer's last objective (its log for seq-exp, see Objective)
  int iterations = 0;          // iterations or epochs completed
  double passes = 0;           // effective passes over the data
  std::size_t active_features = 0;  // non-zero weights
  double seconds = 0;          // in the trainer (without the progress callback's own time)
  std::string stop_reason;
  std::string device;          // the backend's name
  /// A stop (TrainConfig::stop) abandoned the pass of iteration `iterations` + 1: the model is
  /// iteration `iterations`'s.
  bool stopped_in_pass = false;
};

/// A stop (TrainConfig::stop) inside the first iteration of a batch trainer: no model.
class TrainingStopped : public Error {
 public:
  using Error::Error;
};

/// Sentences in memory as CoNLL columns: each token its columns, the label last when training.
TextData conll_data(const std::vector<std::vector<std::vector<std::string>>>& sentences);
/// Sentences in memory as CRFsuite attribute lists: each token its label (empty at tag time) and
/// its attributes (name, value).
TextData attribute_data(const std::vector<CrfsuiteSentence>& sentences);

/// A run of a memory check that failed: what() says why in the words of the library; the figures
/// are kept for a caller that names its own options in the advice.
class MemoryRefusal : public Error {
 public:
  MemoryRefusal(const MemoryCheck& check, bool dense_layout)
      : Error("this training run " + check.shortfall), check_(check), dense_(dense_layout) {}
  const MemoryCheck& check() const { return check_; }
  /// Every attribute × label pair has a weight (the advice: keep the observed pairs).
  bool dense_layout() const { return dense_; }

 private:
  MemoryCheck check_;
  bool dense_;
};

/// The stages of one training run, for callers that act between them (crfx train reads its
/// checkpoint keys after compile() and resumes the trainer before run()).
class TrainingRun {
 public:
  /// Checks the algorithm, the model type, the settings and the device against each other.
  explicit TrainingRun(TrainConfig config);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  const TrainConfig& config() const { return config_; }
  const TrainerInfo& trainer_info() const { return *info_; }
  /// The feature space so far (before compile(): the format and template to read data with).
  const FeatureSpace& features() const { return model_.features; }

  /// Compiles training data (read with features(), or made by conll_data / attribute_data) into
  /// the model's dictionaries and layout; every check of the input. `data` may be released after.
  void compile(const TextData& data);
  /// The same from training files (read one after the other, as one), a batch of text at a time
  /// (compile_training over files): the run holds the compiled corpus, never the whole text.
  void compile(const std::vector<std::string>& paths);
  const Corpus& corpus() const { return corpus_; }
  Dims dims() const { return model_.features.dims(); }

  /// Makes the backend, checks the run's memory (MemoryRefusal when it does not fit) and uploads
  /// the corpus. Before run(); after compile().
  Backend& prepare();
  Backend& backend();
  Objective& objective();
  /// The trainer, before run(): resume_from() continues a checkpointed run.
  Trainer& trainer() { return *algorithm_; }

  /// Trains; the model and the figures. `progress`, when given, replaces config().progress.
  /// The run is spent after it.
  TrainResult run(const ProgressFn& progress = {});

 private:
  TrainConfig config_;
  const TrainerInfo* info_;
  Model model_;
  Corpus corpus_;
  std::string source_;  // the data's name for messages
  bool compiled_ = false;
  void compiled(double t0, double t_read);  // the checks and the note after either compile (begun at t0, read by t_read)
  BackendPtr backend_;
  BackendCorpusPtr uploaded_;
  std::unique_ptr<Objective> objective_;
  std::unique_ptr<Trainer> algorithm_;
};

/// An objective as the progress lines print it: %.6f, or %.6e where %f would run to hundreds of
/// digits (boosting's H before it fits a double is reported as DBL_MAX).
std::string objective_text(double v);
/// One iteration as crfx train's progress line shows it (and Python's verbose fit), without a
/// newline: "iter    3  passes    4.0  obj 123.456789  |g| 1.234e+00  active 42  step 1  0.12 s".
std::string progress_text(const Progress& p);

/// Trains a model on `data` in one call: TrainingRun's stages one after the other.
TrainResult train(const TrainConfig& config, const TextData& data);

}  // namespace crfx
