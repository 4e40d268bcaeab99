// crfx train: the command line of a training run around crfx::TrainingRun — its outputs, the
// per-iteration report and --log, --dev, checkpoints and --resume, signals.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cxxopts.hpp>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/checkpoint.hpp"
#include "crfx/internal/eval.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/output.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "crfx/train.hpp"

#include "cli.hpp"
#include "train_options.hpp"

namespace crfx::cli {

namespace {

/// The dev figure of `w`: every dev sentence's Viterbi labels (into `ids`) scored against gold.
double dev_figure(Backend& b, const BackendCorpus& corpus, const Vector& w, const LabelIdScorer& scorer,
                  std::vector<std::uint32_t>& ids) {
  b.viterbi(corpus, w, all_sentences(corpus), ids.data(), nullptr);
  return scorer.headline(ids.data());
}

// ---- train ---------------------------------------------------------------------------------

/// crfx train's per-iteration report: a line on stderr, a CSV row in --log (rewritten atomically
/// each time), with --dev the dev figure (chunk F1 for chunk tags, else token accuracy, as crfx
/// eval chooses). Its own time is kept out of the reported seconds.
/// Writes the --log FILE (atomically); a failure (a full disk, an I/O error) costs the log, not
/// the training: a warning, once, and the log is not written again (`broken`).
void write_log_file(const std::string& path, const std::string& text, bool& broken) {
  if (broken) return;
  try {
    write_file_atomic(path, text);
  } catch (const Error& e) {
    broken = true;
    std::cerr << "crfx train: warning: " << e.what() << "; training goes on, the log is no longer written\n";
  }
}

struct TrainProgress {
  Backend& backend;
  const BackendCorpus* dev;  // null without --dev
  const LabelIdScorer* dev_scorer;  // with --dev
  EvalMode dev_mode;  // chunk or item
  std::vector<std::uint32_t> dev_ids;  // the dev tokens' Viterbi labels (one per dev token)
  bool quiet;
  std::string log_path;  // empty without --log
  std::string log_text;
  // --log FILE is rewritten whole (atomically: a reader never sees half a row) once it has grown by
  // an eighth since the last write (so every row of its first few) or a second has passed: thousands
  // of short iterations write O(rows) bytes, not O(rows²), and a slow run shows each row as it comes.
  // flush_log() writes what is left (at the end of training, or when an error ends it).
  static constexpr double kLogSeconds = 1;
  std::size_t log_written = 0;  // log_text's size at the last write
  bool log_broken = false;      // a write of the log failed: warned once, not written again
  double last_log_write = now_seconds();
  int iterations = 0;
  // The reports' own time (this object's calls), kept out of the reported seconds: the trainer's
  // clock counts it. A checkpoint keeps it (the "report-seconds" note), as it keeps the clock.
  double callback_seconds = 0;
  double callback_start = 0;  // the call in progress's
  int iteration_cap = 0;  // the run's last iteration (epoch) at the latest; 0: unbounded (no ETA)
  // --checkpoint: where, how often (0: by time), and what a resume must match.
  std::string checkpoint_path{};  // empty without --checkpoint
  int checkpoint_every = 0;
  CheckpointKeys checkpoint_keys{};
  double last_checkpoint = now_seconds();
  int checkpoint_iteration = 0;  // of the last checkpoint written (0: none)
  Checkpoint* resumed = nullptr;  // --resume: its end checked at the first report
  // A stop inside an iteration (Progress::within_iteration): "epoch 3 after 1200 of 8936
  // sentences", and whether its checkpoint was written.
  std::string stopped_within{};
  bool within_checkpoint = false;
  // --dev-patience (boost's held-out stopping rule, seed 002 §5.2): the best dev figure, its
  // iteration, objective and weights; a stop once patience() iterations have passed without a
  // better one. Checkpoints keep them (the "dev-best" note), so a resumed run keeps that round.
  int dev_patience = 0;  // 0: no such rule
  double best_dev = -1;
  int best_iteration = 0;
  double best_objective = 0;
  std::vector<double> best_w{};
  bool patience_ran_out = false;

  /// The iterations without a better dev figure that end the run: `dev_patience`, or a fifth of
  /// the iterations to the best where that is more — boosting's dev figure rises by steps hundreds
  /// of rounds apart, and ever further apart as the run goes on (RESULTS.md: Spanish NER stopped
  /// at round 13,926 by a fixed 2,000, at dev F1 40.4; it was 53.7 at round 39,000).
  int patience() const { return std::max(dev_patience, best_iteration / 5); }

  /// Keeps w when its dev figure is the best so far; the patience runs out patience() iterations
  /// after the best.
  void track_best(double figure, const Progress& p, const Vector& w) {
    if (figure > best_dev) {
      best_dev = figure;
      best_iteration = p.iteration;
      best_objective = p.objective;
      best_w.resize(w.size());
      backend.read(w, best_w.data());
    } else if (p.iteration - best_iteration >= patience()) {
      patience_ran_out = true;
    }
  }

  /// The best so far as a checkpoint note: "iteration figure objective size" and each weight
  /// that is not +0 as "index:value", the doubles in hexadecimal (read back exactly).
  std::string best_note() const {
    std::string s = std::to_string(best_iteration) + " " + fmt("%a %a", best_dev, best_objective) + " " +
                    std::to_string(best_w.size());
    for (std::size_t j = 0; j < best_w.size(); ++j)
      if (best_w[j] != 0 || std::signbit(best_w[j])) s += " " + std::to_string(j) + ":" + fmt("%a", best_w[j]);
    return s;
  }

  /// The best so far from a checkpoint's note (best_note); throws naming `path` where it is malformed.
  void restore_best(const std::string& note, const std::string& path) {
    std::istringstream in(note);
    std::string figure, objective, item;
    std::size_t size = 0;
    auto number = [](const std::string& t, double& x) {
      char* end = nullptr;
      x = std::strtod(t.c_str(), &end);
      return !t.empty() && *end == '\0';
    };
    bool ok = bool(in >> best_iteration >> figure >> objective >> size) && number(figure, best_dev) &&
              number(objective, best_objective);
    best_w.assign(ok ? size : 0, 0.0);
    while (ok && in >> item) {
      const std::size_t colon = item.find(':');
      char* end = nullptr;
      const unsigned long long j = std::strtoull(item.c_str(), &end, 10);
      ok = colon != std::string::npos && end == item.c_str() + colon && j < size &&
           number(item.substr(colon + 1), best_w[std::size_t(j)]);
    }
    if (!ok) throw Error(path + ": the checkpoint's dev-best note is malformed (a corrupt checkpoint?)");
  }

  static constexpr double kCheckpointSeconds = 300;

  /// The trainer's state at `iteration` to --checkpoint, atomically, with the log so far (and,
  /// inside the next iteration, where: `within`).
  void save_checkpoint(const StateFn& state, int iteration, const std::string& within = "") {
    AtomicFile file(checkpoint_path);
    std::string buffer;  // AtomicFile writes as it is told: records gathered into 1 MB writes
    constexpr std::size_t kBuffer = std::size_t(1) << 20;
    auto sink = [&](const char* p, std::size_t n) {
      if (buffer.size() + n > kBuffer) {
        file.write(buffer.data(), buffer.size());
        buffer.clear();
      }
      if (n >= kBuffer)
        file.write(p, n);
      else
        buffer.append(p, n);
    };
    CheckpointKeys notes = {
        {"device", backend.name()}, {"iteration", std::to_string(iteration)}, {"log", log_text}};
    if (!within.empty()) notes.emplace_back("within", within);
    if (!best_w.empty()) notes.emplace_back("dev-best", best_note());
    notes.emplace_back("report-seconds", fmt("%.17g", callback_seconds + (now_seconds() - callback_start)));
    write_checkpoint(sink, checkpoint_keys, notes, state);
    file.write(buffer.data(), buffer.size());
    file.commit();
    checkpoint_iteration = iteration;
    last_checkpoint = now_seconds();
  }

  void flush_log() {
    if (log_path.empty() || log_path == "-" || log_written == log_text.size()) return;
    write_log_file(log_path, log_text, log_broken);
    log_written = log_text.size();
    last_log_write = now_seconds();
  }

  bool operator()(const Progress& reported, const Vector& w) {
    if (reported.within_iteration()) return stop_within(reported);
    callback_start = now_seconds();
    Progress p = reported;
    p.seconds -= callback_seconds;
    iterations = p.iteration;
    std::string dev_f1;
    if (dev) {
      const double figure = dev_figure(backend, *dev, w, *dev_scorer, dev_ids);
      dev_f1 = fmt("%.2f", figure);
      if (dev_patience > 0) track_best(figure, p, w);
    }
    if (!quiet) {
      // To the cap at the mean iteration time so far (callbacks included: they take wall time too).
      const std::string eta =
          iteration_cap > p.iteration && p.iteration > 0
              ? "  eta " + eta_text(reported.seconds / p.iteration * (iteration_cap - p.iteration))
              : "";
      std::cerr << progress_text(p) << eta
                << (dev_f1.empty() ? "" : dev_mode == EvalMode::item ? "  dev accuracy " : "  dev F1 ") << dev_f1
                << "\n" << std::flush;
    }
    if (!log_path.empty()) {
      char row[256];
      const std::string gnorm = std::isnan(p.gradient_norm) ? "" : fmt("%.6e", p.gradient_norm);
      std::snprintf(row, sizeof row, "%d,%.4f,%.17g,%s,%zu,%.4f,%s\n", p.iteration, p.passes,
                    p.objective, gnorm.c_str(), p.active_features, p.seconds, dev_f1.c_str());
      if (log_path == "-") {  // --log -: the rows on standard output as they come
        if (!(std::cout << row << std::flush)) throw Error("cannot write the log to standard output: " + stdout_error());
      } else {
        log_text += row;
        if (log_text.size() - log_written >= log_written / 8 || now_seconds() - last_log_write >= kLogSeconds)
          flush_log();
      }
    }
    if (resumed) {  // the trainer has read its state: nothing of the checkpoint may be left
      resumed->finish();
      resumed = nullptr;
    }
    const bool stopping = stop_signal() != 0;  // Ctrl-C or kill: stop here, the model is written
    if (!checkpoint_path.empty() && reported.state) {
      const bool due = checkpoint_every > 0 ? p.iteration % checkpoint_every == 0
                                            : now_seconds() - last_checkpoint >= kCheckpointSeconds;
      if (due || stopping) save_checkpoint(*reported.state, p.iteration);
    }
    callback_seconds += now_seconds() - callback_start;
    return !stopping && !patience_ran_out;
  }

  /// The last report of a stochastic trainer stopped inside an epoch by a signal (the poll that
  /// main() gives the trainer): no progress line or log row (the epoch is not done), the
  /// checkpoint of that point.
  bool stop_within(const Progress& p) {
    callback_start = now_seconds();
    stopped_within = "epoch " + std::to_string(p.iteration) + " after " + std::to_string(p.sentences) + " of " +
                     std::to_string(p.epoch_sentences) + " sentences";
    if (resumed) {
      resumed->finish();
      resumed = nullptr;
    }
    if (!checkpoint_path.empty() && p.state) {
      save_checkpoint(*p.state, p.iteration - 1, stopped_within);
      within_checkpoint = true;
    }
    return false;
  }
};

/// What a checkpoint of this run records and a resume must match, one key per thing a user can
/// name: the crfx version, the algorithm and each of its settings, the feature options, the
/// template, and fingerprints of the features and the compiled training data. Not the stopping
/// settings: every trainer reads them only in its stop tests (the loop bound over iterations,
/// epochs or rounds; the improvement test, whose history the checkpoint holds whole; the gradient
/// test), never in a step, so a run resumed with other ones follows the same path and only ends
/// elsewhere — a run that stopped at --max-iterations 100 goes on to 200.
CheckpointKeys checkpoint_keys(const cxxopts::ParseResult& r, const TrainerInfo& trainer, const TrainOptions& opt,
                               const FeatureSpace& fs, const Corpus& corpus) {
  static const std::set<std::string> stopping = {"max-iterations", "epochs", "max-epochs", "period", "delta", "dev-patience",
                                                 "epsilon"};
  CheckpointKeys keys = {{"crfx", CRFX_VERSION}, {"--algo", trainer.name}};
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& spec : *table)
      if (trainer.takes(spec.name) && !stopping.count(spec.name))
        keys.emplace_back(std::string("--") + spec.name, spec.get(opt));
  std::string features = get<std::string>(r, "features");
  for (const char* flag : {"possible-states", "possible-transitions"})
    if (r.count(flag)) features += std::string(" --") + flag;
  keys.emplace_back("--features", features);
  keys.emplace_back("--min-freq", std::to_string(get<std::size_t>(r, "min-freq")));
  keys.emplace_back("--format", get<std::string>(r, "format"));
  auto hex = [](std::uint64_t v) { return fmt("%016llx", static_cast<unsigned long long>(v)); };
  if (fs.format == InputFormat::conll) keys.emplace_back("template", "text " + hex(fingerprint(fs.templ.source())));
  const Dims d = fs.dims();
  keys.emplace_back("features", std::to_string(d.L) + " labels, " + std::to_string(d.A) + " attributes, " +
                                    std::to_string(d.E) + " edge attributes, " + std::to_string(d.num_weights()) +
                                    " weights, fingerprint " + hex(fingerprint(fs)));
  keys.emplace_back("training data", std::to_string(corpus.num_sentences()) + " sentences, " +
                                         std::to_string(corpus.num_tokens()) + " tokens, fingerprint " +
                                         hex(fingerprint(corpus)));
  return keys;
}

/// crfx train's command line, checked: the run's settings (a TrainConfig) and what the command
/// does around the run (outputs, checkpoint, resume, dev data).
struct TrainArgs {
  TrainConfig config;
  std::vector<std::string> data_paths;
  std::string model_path, log_path, checkpoint_path, dev_path;
  int checkpoint_every = 0;
  std::unique_ptr<Checkpoint> resume;  // --resume: read (and its checksum verified) before the data
  bool quiet = false;
  std::string program = "crfx train";  // or "crfx learn"
};

/// The outputs (-m, --log, --checkpoint) checked before minutes of training, not after: each
/// writable, none of them the same file as another or as one of the run's inputs.
void check_train_outputs(const cxxopts::ParseResult& r, TrainArgs& a) {
  const std::string& model_path = a.model_path;
  if (model_path == "-") throw UsageError("-m/--model: a model is a binary file, not for standard output; name a file");
  set_replace_read_only(r.count("force") > 0);
  check_output_path(model_path);
  std::vector<std::string> inputs = a.data_paths;
  for (const char* in : {"template", "dev"})
    if (r.count(in)) inputs.push_back(get<std::string>(r, in));
  check_not_an_input(model_path, inputs);
  if (!a.log_path.empty() && a.log_path != "-") {
    check_output_path(a.log_path);
    check_not_the_same_output(a.log_path, model_path, "the model file (-m)");
    inputs.push_back(model_path);
    check_not_an_input(a.log_path, inputs);
  }
  a.checkpoint_every = get<int>(r, "checkpoint-every");
  if (a.checkpoint_every < 0) throw UsageError("--checkpoint-every: a number of iterations ≥ 0 (0: every 5 minutes)");
  if (r.count("checkpoint-every") && a.checkpoint_path.empty())
    throw UsageError("--checkpoint-every needs --checkpoint FILE");
  if (!a.checkpoint_path.empty()) {
    if (a.checkpoint_path == "-") throw UsageError("--checkpoint: a checkpoint is a binary file; name a file");
    check_output_path(a.checkpoint_path);
    check_not_the_same_output(a.checkpoint_path, model_path, "the model file (-m)");
    if (!a.log_path.empty()) check_not_the_same_output(a.checkpoint_path, a.log_path, "the log (--log)");
    check_not_an_input(a.checkpoint_path, inputs);  // the data, template, dev
  }
  if (r.count("resume")) {
    a.resume = std::make_unique<Checkpoint>(get<std::string>(r, "resume"));
    check_not_an_input(model_path, {a.resume->path()});
    if (!a.log_path.empty()) check_not_an_input(a.log_path, {a.resume->path()});
  }
}

/// The training run's settings from the command line (TrainConfig), in crfx train's words. The
/// device is checked by TrainingRun, before any data is read.
TrainConfig train_config(const cxxopts::ParseResult& r, const TrainerInfo& trainer) {
  TrainConfig c;
  c.algorithm = trainer.name;
  c.type = model_type(r, trainer);
  c.options = train_options(r, trainer);
  c.features = feature_set(r);
  c.min_freq = get<std::size_t>(r, "min-freq");
  c.format = parse_format(get<std::string>(r, "format"));
  if (c.format == InputFormat::conll && !r.count("template"))
    throw UsageError("CoNLL data needs --template (or use --format crfsuite)");
  if (c.format != InputFormat::conll && r.count("template"))
    throw UsageError("--template applies to CoNLL data, not --format crfsuite");
  c.backend = backend_options(r);
  if (trainer.cpu_only && c.backend.device == DeviceKind::cuda)
    throw UsageError("-a " + c.algorithm + ": " + trainer.cpu_only + "; use --device cpu (or auto)");
  c.max_memory = r.count("max-memory") ? parse_bytes(get<std::string>(r, "max-memory")) : 0;
  c.max_device_memory =
      r.count("max-device-memory") ? parse_bytes(get<std::string>(r, "max-device-memory"), "--max-device-memory") : 0;
  if (c.format == InputFormat::conll) c.templ = FeatureTemplate::load(get<std::string>(r, "template"));
  return c;
}

/// The command line of crfx train, checked (usage errors before any data is read).
TrainArgs train_args(const cxxopts::ParseResult& r, const TrainerInfo& trainer, bool learn) {
  TrainArgs a;
  a.program = learn ? "crfx learn" : "crfx train";
  model_type(r, trainer);
  if (!r.count("data")) throw UsageError("missing training data (" + a.program + " DATA -m MODEL ...)");
  a.data_paths = get<std::vector<std::string>>(r, "data");
  if (!learn && a.data_paths.size() == 3 && !r.count("model") && !r.count("template"))
    throw UsageError("crfx train reads DATA -t TEMPLATE -m MODEL; crf_learn's order TEMPLATE DATA MODEL is not "
                     "crfx's (see 'crfx train --help')");
  a.model_path = required(r, "model", "-m/--model: where to write the model");
  a.log_path = r.count("log") ? get<std::string>(r, "log") : "";
  a.checkpoint_path = r.count("checkpoint") ? get<std::string>(r, "checkpoint") : "";
  a.dev_path = r.count("dev") ? get<std::string>(r, "dev") : "";
  a.quiet = r.count("quiet") > 0;
  check_train_outputs(r, a);
  a.config = train_config(r, trainer);
  // Boosting with --dev and no --max-iterations runs until the held-out rule stops it (seed 002
  // §5.2): its 1,000 rounds without --dev would end it first, short of the paper's relation.
  if (!a.dev_path.empty() && trainer.takes("dev-patience") && !r.count("max-iterations") &&
      a.config.options.dev_patience > 0)
    a.config.options.max_iterations = kUncappedIterations;
  return a;
}

/// --dev: the development data compiled with the model's features, the figure crfx eval would
/// report for its labels (chunk F1 or token accuracy), and its scorer (holding the gold labels).
struct DevData {
  Corpus corpus;
  EvalMode mode = EvalMode::item;
  std::optional<LabelIdScorer> scorer;  // with a path: its gold labels
};

DevData read_dev(const std::string& path, const FeatureSpace& fs) {
  DevData d;
  std::vector<std::string> gold;
  if (!path.empty()) {
    const TextData text = read_text(fs, path);
    d.corpus = compile(fs, text);
    gold = gold_labels(text);
    if (gold.size() != d.corpus.num_tokens()) throw InputError(text.path, 0, "development data needs gold labels");
  }
  std::set<std::string> labels(gold.begin(), gold.end());
  labels.insert(fs.labels.strings().begin(), fs.labels.strings().end());
  d.mode = resolve_mode(EvalOptions{}, labels);
  if (!path.empty()) d.scorer.emplace(fs.labels.strings(), gold, d.corpus.sentence_offsets, d.mode);
  return d;
}

/// The log's rows so far: its header, or the rows a resumed checkpoint kept; written at once.
std::string start_log(const TrainArgs& a, EvalMode dev_mode, bool& broken) {
  std::string text = std::string("iteration,passes,objective,gradient_norm,active_features,seconds,") +
                     (dev_mode == EvalMode::item ? "dev_accuracy\n" : "dev_f1\n");
  if (a.resume && !a.resume->note("log").empty()) text = a.resume->note("log");  // the rows before the checkpoint
  if (a.log_path == "-") {
    if (!(std::cout << text << std::flush)) throw Error("cannot write the log to standard output: " + stdout_error());
  } else if (!a.log_path.empty()) {
    write_log_file(a.log_path, text, broken);
  }
  return text;
}

/// --resume: the trainer continues from the checkpoint's state (said on stderr).
void resume_training(TrainArgs& a, TrainingRun& run, TrainProgress& progress) {
  Checkpoint& resume = *a.resume;
  const std::string made_on = resume.note("device");
  auto kind = [](const std::string& device) { return device.substr(0, device.find_first_of(" :")); };
  if (kind(made_on) != kind(run.backend().name()))
    std::cerr << a.program << ": note: the checkpoint was made on " << made_on << ", this run uses "
              << run.backend().name() << ": the model will not be bit-identical to an uninterrupted run\n";
  if (!a.quiet) {
    const std::string within = resume.note("within");
    std::cerr << "resuming: " << resume.path() << ", "
              << (within.empty() ? "after iteration " + resume.note("iteration") : "in " + within) << "\n";
  }
  progress.iterations = std::atoi(resume.note("iteration").c_str());
  progress.callback_seconds = std::atof(resume.note("report-seconds").c_str());  // (0 when absent)
  if (progress.dev_patience > 0 && !resume.note("dev-best").empty())
    progress.restore_best(resume.note("dev-best"), resume.path());
  progress.resumed = &resume;
  run.trainer().resume_from(&resume.state());
}

/// How a run stopped by a signal ends: the message, exit status 3.
int stopped_by_signal(int signal, const TrainArgs& a, const TrainProgress& progress, const TrainResult& result) {
  std::cerr << a.program << ": stopped by " << (signal == SIGINT ? "SIGINT" : "SIGTERM");
  if (result.stopped_in_pass)  // a slow iteration's pass abandoned
    std::cerr << " inside iteration " << result.iterations + 1 << "; the model of iteration " << result.iterations
              << " written to " << a.model_path;
  else
    std::cerr << (progress.stopped_within.empty() ? " at iteration " + std::to_string(progress.iterations)
                                                   : " in " + progress.stopped_within)
              << "; model written to " << a.model_path;
  if (!progress.best_w.empty() && progress.best_iteration != progress.iterations)
    std::cerr << " (of iteration " << progress.best_iteration << ", the best dev figure: --dev-patience)";
  if (progress.within_checkpoint ||
      (progress.stopped_within.empty() && progress.checkpoint_iteration == progress.iterations &&
       progress.iterations > 0))
    std::cerr << "; checkpoint written to " << a.checkpoint_path << " (continue with --resume " << a.checkpoint_path
              << ")";
  std::cerr << "\n";
  return kExitStoppedBySignal;
}

/// --dev-patience: the best iteration's weights into the model where a later one ended the run,
/// and the stop reason where the patience ran out.
void keep_best(const TrainProgress& progress, TrainResult& result) {
  if (progress.best_w.empty()) return;
  const std::string figure = progress.dev_mode == EvalMode::item ? "dev accuracy " : "dev F1 ";
  if (progress.patience_ran_out)
    result.stop_reason = figure + "not above " + fmt("%.2f", progress.best_dev) + " for " +
                         std::to_string(progress.patience()) + " iterations (--dev-patience " +
                         std::to_string(progress.dev_patience) + ", or a fifth of the iterations to the best)";
  if (progress.best_iteration == progress.iterations) return;
  if (progress.best_w.size() != result.model.weights.size())
    throw Error("internal: the best dev round's weights (" + std::to_string(progress.best_w.size()) +
                ") are not the model's (" + std::to_string(result.model.weights.size()) + ")");
  result.model.weights = progress.best_w;
  result.objective = progress.best_objective;
  result.active_features = std::size_t(
      std::count_if(progress.best_w.begin(), progress.best_w.end(), [](double x) { return x != 0; }));
  result.stop_reason += "; the model of iteration " + std::to_string(progress.best_iteration) + " (" + figure +
                        fmt("%.2f", progress.best_dev) + ") written";
}

/// The trainer named by -a (after algorithm_name), or the usage error naming the choices or, for
/// another tool's algorithm, crfx's nearest.
const TrainerInfo& chosen_trainer(const std::string& algo) {
  try {
    return find_trainer(algo);
  } catch (const Error& e) {
    const std::string hint = foreign_algorithm_hint(algo);
    throw UsageError("-a: " + (hint.empty() ? std::string(e.what()) + " (crfx train --algo list describes them)"
                                            : "unknown training algorithm '" + algo + "': " + hint));
  }
}

/// The closing lines of a run that ended by itself (not with --quiet); t0: when the command started.
void print_done(const TrainArgs& a, const TrainProgress& progress, const TrainResult& result, double t0) {
  std::cerr << "stopped: " << result.stop_reason << "\n"
            << "done: " << progress.iterations << " iterations, " << fmt("%.1f", result.passes)
            << " passes, objective " << objective_text(result.objective) << ", " << result.active_features
            << " active features, training " << fmt("%.2f", result.seconds) << " s, total "
            << fmt("%.2f", now_seconds() - t0) << " s, peak resident memory " << bytes_text(peak_resident_bytes())
            << "\nmodel written to " << a.model_path << "\n";
}

/// Under mpirun every process trains on its shard; the first (rank 0) alone reports and writes:
/// joins the processes' collective (and the devices' sum) and quiets the others. Whether this
/// process leads.
bool join_processes(TrainArgs& a) {
  a.config.collective = processes();
  a.config.device_sum = device_sum();
  const bool lead = !a.config.collective || a.config.collective->rank() == 0;
  if (!lead) {
    a.log_path = a.checkpoint_path = a.dev_path = "";
    a.quiet = true;
  }
  a.config.note = [quiet = a.quiet, lead, program = a.program](const std::string& line) {
    if (!lead) return;
    if (line.rfind("note: ", 0) == 0)
      std::cerr << program << ": " << line << "\n";
    else if (!quiet)
      std::cerr << line << "\n";
  };
  return lead;
}

/// Runs the trainer into `result`; false where a signal stopped it before its first iteration
/// ended (said: no model). A failure is rethrown naming the last checkpoint, where there is one.
bool run_training(TrainingRun& run, TrainProgress& progress, const TrainArgs& a, TrainResult& result) {
  try {
    result = run.run(std::ref(progress));
    return true;
  } catch (const TrainingStopped&) {  // a signal before the first iteration ended: no model
    progress.flush_log();
    const int signal = stop_signal();
    std::cerr << a.program << ": stopped by " << (signal == SIGINT ? "SIGINT" : "SIGTERM") << " inside iteration "
              << progress.iterations + 1 << ", before any iteration ended: no model written\n";
    return false;
  } catch (const Error& e) {  // no model of this run; say where the last good state is
    try {
      progress.flush_log();  // the rows up to the failure
    } catch (const Error&) {  // the log itself may be what failed: the first error is the one to tell
    }
    if (progress.checkpoint_iteration == 0) throw;
    throw Error(std::string(e.what()) + "; the last checkpoint, of iteration " +
                std::to_string(progress.checkpoint_iteration) + ", is " + a.checkpoint_path);
  }
}

}  // namespace

int cmd_train(int argc, char** argv) { return train_command(argc, argv, false); }

int train_command(int argc, char** argv, bool learn) {
  cxxopts::Options o(learn ? "crfx learn" : "crfx train",
                     learn ? "Train a linear-chain CRF with CRFsuite's command line: crfx train, reading CRFsuite\n"
                             "attribute files by default, with CRFsuite's -p NAME=VALUE and -a NAME translated to\n"
                             "crfx's options (each said in a note line)."
                           : "Train a linear-chain CRF.");
  add_train_options(o, learn);
  add_feature_options(o);
  add_device_options(o);
  o.parse_positional({"data"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  if (learn && r.count("set"))  // (apps/cmd_learn.cpp takes every -p standing on its own)
    throw UsageError("-p NAME=VALUE: give it on its own, not grouped with other letters (-p c2=1)");
  const std::string algo = algorithm_name(get<std::string>(r, "algo"));
  if (algo == "list") {
    list_trainers();
    return 0;
  }
  const TrainerInfo* trainer = &chosen_trainer(algo);
  TrainArgs a = train_args(r, *trainer, learn);
  if (std::string(trainer->name) == "mira" && !r.count("epochs"))  // CRF++'s -m is 100000: its own test stops it
    std::cerr << a.program << ": note: -a mira runs at most --epochs " << a.config.options.epochs
              << " by default (CRF++'s crf_learn -m 100000: until its convergence test)\n";
  if (a.config.options.max_iterations == kUncappedIterations && !a.quiet)
    std::cerr << a.program << ": note: -a " << trainer->name << " with --dev runs until its dev figure stops rising "
              << "(--dev-patience " << a.config.options.dev_patience << "; a fifth of the rounds to the best where that "
              << "is more), or Ctrl-C; --max-iterations caps it\n";
  const double t0 = now_seconds();
  const bool lead = join_processes(a);
  const int ranks = a.config.collective ? a.config.collective->size() : 1;
  // The first Ctrl-C or kill ends training after the current iteration — for the stochastic
  // trainers after the current mini-batch (their poll), with the checkpoint of that point.
  a.config.stop = [] { return stop_signal() != 0; };
  TrainingRun run(a.config);
  try {
    run.compile(a.data_paths);  // streamed: a batch of text at a time, never the whole text
  } catch (const MemoryRefusal& e) {
    refuse_memory(e);
  }
  const FeatureSpace& fs = run.features();
  CheckpointKeys keys;
  if (!a.checkpoint_path.empty() || a.resume) keys = checkpoint_keys(r, *trainer, a.config.options, fs, run.corpus());
  if (ranks > 1) keys.emplace_back("processes", std::to_string(ranks));
  if (a.resume) check_resume_processes(*a.resume, ranks);
  if (a.resume) a.resume->check(keys);
  const DevData dev = read_dev(a.dev_path, fs);
  // The first Ctrl-C or kill from here on stops training (TrainConfig::stop) instead of ending
  // the process: inside a slow iteration's pass, after a quick one, after a stochastic trainer's
  // mini-batch; a second ends it at once.
  set_graceful_stop(true);
  try {
    run.prepare();
  } catch (const MemoryRefusal& e) {
    refuse_memory(e);
  }
  release_free_memory();  // the training text, before the trainer's vectors are mapped
  BackendCorpusPtr dev_up = a.dev_path.empty() ? nullptr : run.backend().upload(dev.corpus);
  bool log_broken = false;
  const std::string log_text = start_log(a, dev.mode, log_broken);
  TrainProgress progress{run.backend(), dev_up.get(), dev.scorer ? &*dev.scorer : nullptr, dev.mode,
                         std::vector<std::uint32_t>(dev.corpus.num_tokens()), a.quiet, a.log_path, log_text};
  progress.log_written = log_text.size();  // written by start_log
  progress.log_broken = log_broken;
  progress.checkpoint_path = a.checkpoint_path;
  progress.checkpoint_every = a.checkpoint_every;
  progress.checkpoint_keys = keys;
  progress.iteration_cap = iteration_cap(*trainer, a.config.options);
  if (dev_up && trainer->takes("dev-patience")) progress.dev_patience = a.config.options.dev_patience;
  if (a.resume) resume_training(a, run, progress);
  TrainResult result;
  if (!run_training(run, progress, a, result)) return kExitStoppedBySignal;
  if (progress.resumed) progress.resumed->finish();  // stopped without a report (a test fired at once)
  a.resume.reset();
  const int stopped_by = stop_signal();
  progress.flush_log();
  if (!lead) return stopped_by ? kExitStoppedBySignal : 0;
  keep_best(progress, result);
  save_model(result.model, a.model_path);
  set_graceful_stop(false);  // (a second signal meanwhile removed the temporary and ended us)
  if (stopped_by) return stopped_by_signal(stopped_by, a, progress, result);
  if (!a.quiet) print_done(a, progress, result, t0);
  return 0;
}

}  // namespace crfx::cli
