// crfx — the command-line tool: train, tag, eval, bench, dump.
//
// Library code throws crfx::Error; this file alone turns errors into messages and exit codes:
//   0 success, 1 failure (bad input, I/O, numerical), 2 usage error, 3 training stopped by a
//   signal (SIGINT, SIGTERM) with the model of its last iteration (a stochastic trainer: of its
//   last mini-batch) written.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
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

#include "crfx/backend.hpp"
#include "crfx/checkpoint.hpp"
#include "crfx/error.hpp"
#include "crfx/eval.hpp"
#include "crfx/features.hpp"
#include "crfx/model.hpp"
#include "crfx/output.hpp"
#include "crfx/tagger.hpp"
#include "crfx/tag_run.hpp"
#include "crfx/train.hpp"
#include "crfx/trainer.hpp"

namespace crfx {
namespace {

/// crfx train stopped by a signal after writing its model (see the top of this file).
constexpr int kExitStoppedBySignal = 3;

struct UsageError : Error {
  using Error::Error;
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// printf into a string; the compiler checks each call's arguments against its format (a
/// fingerprint once went through a double here and printed a register's leftovers).
__attribute__((format(printf, 1, 2))) std::string fmt(const char* format, ...) {
  char buf[64];
  std::va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

/// An objective as the progress lines print it: %.6f, or %.6e where %f would run to hundreds of
/// digits (boost's H before it fits a double is reported as DBL_MAX).
std::string objective_text(double v) { return std::fabs(v) < 1e15 ? fmt("%.6f", v) : fmt("%.6e", v); }

/// The text between cxxopts' quotes ‘…’ in one of its messages ("" when there is none).
std::string quoted(const std::string& msg) {
  const std::size_t open = msg.find("\xe2\x80\x98"), close = msg.find("\xe2\x80\x99");
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return msg.substr(open + 3, close - open - 3);
}

/// What crfx calls an option that CRF++ (crf_learn, crf_test) or CRFsuite users type, from
/// cxxopts' "Option ‘c’ does not exist"; "" for any other option.
std::string foreign_option_hint(const std::string& program, const std::string& msg) {
  const std::string name = quoted(msg);
  const bool train = program == "crfx train";
  if (name == "c" && train) return "; CRF++'s -c C is --c2 here, with c2 = 1/(2·C) (-c 4 → --c2 0.125)";
  if (name == "p" && train) return "; CRF++'s -p N (threads) is --threads N here";
  if (name == "v") return "; CRF++'s -v 1 is -p/--probability here, -v 2 is --marginals";
  if (name == "version") return "; the version is 'crfx --version'";
  return "";
}

/// Parses a subcommand's options; prints help and returns false for --help.
bool parse(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result) {
  try {
    result = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    // cxxopts names the bad value ("Argument ‘x’ failed to parse") but not its option: find it.
    const std::string msg = e.what(), value = quoted(msg);
    std::string option;
    if (!value.empty()) {
      for (int i = 1; i < argc && option.empty(); ++i) {
        const std::string a = argv[i];
        if (a == value && i > 1 && argv[i - 1][0] == '-') option = argv[i - 1];
        else if (a.size() > value.size() + 1 && a[0] == '-' &&
                 a.compare(a.size() - value.size() - 1, std::string::npos, "=" + value) == 0)
          option = a.substr(0, a.size() - value.size() - 1);
      }
    }
    throw UsageError((option.empty() ? "" : option + ": ") + msg + " (see '" + options.program() + " --help')");
  } catch (const cxxopts::exceptions::no_such_option& e) {
    throw UsageError(std::string(e.what()) + foreign_option_hint(options.program(), e.what()) + " (see '" +
                     options.program() + " --help')");
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see '" + options.program() + " --help')");
  }
  if (result.count("help")) {
    std::cout << options.help() << std::flush;
    return false;
  }
  // Every argument is used or refused: an extra file name is a mistake, not something to ignore.
  const auto& extra = result.unmatched();
  if (!extra.empty())
    throw UsageError("unexpected argument '" + extra.front() + "'" +
                     (extra.size() > 1 ? " (and " + std::to_string(extra.size() - 1) + " more)" : std::string()) +
                     ": " + options.program() + " takes one input file (see '" + options.program() + " --help')");
  return true;
}

template <class T>
T get(const cxxopts::ParseResult& r, const char* name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string("--") + name + ": " + e.what());
  }
}

/// Refuses two outputs of one run that name one file, whether it exists yet or not (through
/// links: the file an atomic write would replace); `b_what` says what `b` is.
void check_not_the_same_output(const std::string& a, const std::string& b, const std::string& b_what) {
  std::error_code ea, eb;
  const auto pa = std::filesystem::weakly_canonical(a, ea), pb = std::filesystem::weakly_canonical(b, eb);
  if (!ea && !eb && pa == pb)
    throw Error("cannot write " + a + ": it is also " + b_what + " of this run; choose another name");
}

/// Why a write to standard output failed (errno, as the failed write left it).
std::string stdout_error() { return std::strerror(errno ? errno : EIO); }

std::string required(const cxxopts::ParseResult& r, const char* name, const char* what) {
  if (!r.count(name)) throw UsageError(std::string("missing ") + what);
  return get<std::string>(r, name);
}

InputFormat parse_format(const std::string& s) {
  if (s == "conll") return InputFormat::conll;
  if (s == "crfsuite") return InputFormat::crfsuite;
  throw UsageError("unknown --format '" + s + "' (expected conll or crfsuite)");
}

/// Hands the heap's free pages back to the system. With large blocks kept on the heap (see
/// main), memory freed below the heap's top stays resident until this is called.
void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/// More worker threads than this is a typo, not a machine (and would only thrash).
constexpr unsigned kMaxThreads = 1024;

void add_device_options(cxxopts::Options& o) {
  o.add_options()
      ("device", "auto | cpu | cuda ('auto' falls back to the CPU and says so)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("threads", "CPU worker threads (0 = all cores)", cxxopts::value<unsigned>()->default_value("0"));
}

/// --device and --threads.
BackendOptions backend_options(const cxxopts::ParseResult& r) {
  BackendOptions bo;
  bo.device = parse_device(get<std::string>(r, "device"));
  bo.threads = get<unsigned>(r, "threads");
  if (bo.threads > kMaxThreads)
    throw UsageError("--threads: at most " + std::to_string(kMaxThreads) + " (got " + std::to_string(bo.threads) + ")");
  return bo;
}

BackendPtr backend_from(const cxxopts::ParseResult& r, const Dims& dims, bool quiet) {
  const BackendOptions bo = backend_options(r);
  std::string note;
  BackendPtr b = make_backend(dims, bo, &note);
  if (!quiet) std::cerr << note << "\n";
  return b;
}

/// Viterbi labels of every sentence of `corpus`, as strings, sentence by sentence.
std::vector<std::vector<std::string>> decode(Backend& b, const BackendCorpus& corpus,
                                             const Corpus& host, const Vector& w,
                                             const Dictionary& labels) {
  std::vector<std::uint32_t> ids(host.num_tokens());
  b.viterbi(corpus, w, all_sentences(corpus), ids.data(), nullptr);
  std::vector<std::vector<std::string>> out(host.num_sentences());
  for (std::size_t s = 0; s < host.num_sentences(); ++s)
    for (std::size_t t = host.sentence_offsets[s]; t < host.sentence_offsets[s + 1]; ++t)
      out[s].push_back(labels.at(ids[t]));
  return out;
}

/// Predicted against gold label strings (gold given token after token), in `mode`.
Evaluation score(const std::vector<std::vector<std::string>>& predicted, const std::vector<std::string>& gold,
                 EvalMode mode) {
  std::vector<std::vector<std::string>> g;
  std::size_t k = 0;
  for (const auto& sentence : predicted) {
    g.emplace_back(gold.begin() + k, gold.begin() + k + sentence.size());
    k += sentence.size();
  }
  EvalOptions eo;
  eo.mode = mode;
  return evaluate(g, predicted, eo);
}

// ---- train ---------------------------------------------------------------------------------

/// The trainers that take setting `name`, for its help ("sgd-l1, adf: "; "" when all do, "all
/// but ap: " when fewer do not).
std::string takers(const char* name) {
  std::string yes, no;
  std::size_t n_yes = 0, n_no = 0;
  for (const auto& t : trainer_registry()) {
    const bool takes = t.takes(name);
    std::string& list = takes ? yes : no;
    list += (list.empty() ? "" : ", ") + std::string(t.name);
    ++(takes ? n_yes : n_no);
  }
  if (n_no == 0) return "";
  return n_no < n_yes ? "all but " + no + ": " : yes + ": ";
}

/// Which weights a model has (train, bench): FeatureSet.
void add_feature_options(cxxopts::Options& o) {
  o.add_options()
      ("features", "observed | all: weights for the (attribute, label) pairs and label bigrams seen in "
       "the training data (CRFsuite's default), or for every pair (CRF++, Wapiti)",
       cxxopts::value<std::string>()->default_value("observed"))
      ("possible-states", "with --features observed: every attribute × label pair all the same "
       "(CRFsuite's feature.possible_states=1)")
      ("possible-transitions", "with --features observed: every label bigram all the same "
       "(CRFsuite's feature.possible_transitions=1)");
}

/// crfx train's options (the device options come from add_device_options); the trainers'
/// settings are generated from their tables (OptionSpec, crfx/trainer.hpp), with the library's
/// defaults.
void add_train_options(cxxopts::Options& o) {
  const TrainOptions d;
  o.positional_help("DATA...");
  o.add_options()
      ("data", "training data (CoNLL columns, or CRFsuite attributes with --format crfsuite; .gz ok); "
       "several files are read one after the other, as one",
       cxxopts::value<std::vector<std::string>>())
      ("m,model", "model file to write", cxxopts::value<std::string>())
      ("force", "replace a read-only model or log file")
      ("t,template", "CRF++ feature template (CoNLL data)", cxxopts::value<std::string>())
      ("format", "conll | crfsuite", cxxopts::value<std::string>()->default_value("conll"))
      ("type", "crf | maxent: a linear-chain CRF, or a Maxent classifier labelling every token on its own from "
       "the same attributes (no transitions; a template's B lines are ignored)",
       cxxopts::value<std::string>()->default_value("crf"))
      ("a,algo", "training algorithm ('list' shows them with their settings)",
       cxxopts::value<std::string>()->default_value("lbfgs"))
      ("f,min-freq", "drop attributes seen fewer times (CRF++ -f)", cxxopts::value<std::size_t>()->default_value("1"))
      ("max-memory", "refuse to start a run whose estimated memory exceeds this (e.g. 512M, 8G; default: "
       "what the backend has available)", cxxopts::value<std::string>());
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& spec : *table) {
      auto value = cxxopts::value<std::string>();
      const std::string v = spec.get(d);
      if (!v.empty()) value->default_value(v);  // else the trainer's default (said in the help)
      const std::string kind = spec.kind;  // the choices, where there are some
      const std::string choices = kind.find('|') != std::string::npos ? kind + "; " : "";
      o.add_options()(spec.name, takers(spec.name) + choices + spec.help, value);
    }
  o.add_options()
      ("dev", "development data: report its chunk F1 (chunk tags) or token accuracy after every iteration", cxxopts::value<std::string>())
      ("log", "write per-iteration progress as CSV to this file ('-': standard output)",
       cxxopts::value<std::string>())
      ("checkpoint", "write the trainer's whole state to this file as training goes (see --checkpoint-every) and "
       "when stopped by Ctrl-C or kill; --resume continues from it",
       cxxopts::value<std::string>())
      ("checkpoint-every", "a checkpoint after every N iterations (epochs for the stochastic trainers); 0: after "
       "the first iteration that ends 5 minutes or more after the last checkpoint",
       cxxopts::value<int>()->default_value("0"))
      ("resume", "continue the run that wrote this checkpoint, with the same data, template and settings; the "
       "model is the one the uninterrupted run gives, byte for byte (on the same device)",
       cxxopts::value<std::string>())
      ("q,quiet", "no progress lines")
      ("h,help", "show this help");
}

/// "512M", "8G", "1.5T", "1000000" (bytes; K, M, G, T are powers of 1000, with KiB-style
/// suffixes powers of 1024).
double parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  double scale = 0;
  const std::pair<const char*, double> units[] = {{"", 1},       {"B", 1},      {"K", 1e3},   {"KB", 1e3},
                                                  {"M", 1e6},    {"MB", 1e6},   {"G", 1e9},   {"GB", 1e9},
                                                  {"T", 1e12},   {"TB", 1e12},  {"KiB", 1024.0},
                                                  {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (used == 0 || scale == 0 || !(v > 0) || !std::isfinite(v))
    throw UsageError("--max-memory: '" + text + "' is not a size (e.g. 512M, 8G, 16GiB)");
  return v * scale;
}

/// The process's peak resident set so far (getrusage; Linux reports kilobytes).
double peak_resident_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0;
}

/// A run refused by the memory check, in crfx train's words: the library's shortfall and advice
/// naming crfx train's options.
[[noreturn]] void refuse_memory(const MemoryRefusal& e) {
  std::string advice;
  if (e.dense_layout())
    advice = "--features all gives every attribute × label pair a weight (" +
             std::to_string(e.check().estimate.weights / sizeof(double)) +
             "); the default, --features observed, keeps the pairs seen in training";
  else
    advice = "raise --min-freq to drop rare attributes";
  if (e.check().estimate.vectors > 3) advice += ", or use a trainer with less state (sgd-l1, adf)";
  throw Error(std::string(e.what()) + "; " + advice);
}

/// --features and CRFsuite's two switches.
FeatureSet feature_set(const cxxopts::ParseResult& r) {
  const std::string f = get<std::string>(r, "features");
  FeatureSet set;
  if (f == "all") {
    set.all_states = set.all_transitions = true;
  } else if (f != "observed") {
    throw UsageError("--features: '" + f + "' is neither observed nor all");
  }
  if (r.count("possible-states")) set.all_states = true;
  if (r.count("possible-transitions")) set.all_transitions = true;
  return set;
}

/// For a stopping setting the trainer does not read (--epochs, --max-epochs, --max-iterations),
/// the one it does: "; sag stops by --max-epochs". "" otherwise.
std::string stopping_setting(const TrainerInfo& trainer, const std::string& name) {
  static const char* const kStops[] = {"max-iterations", "epochs", "max-epochs"};
  if (std::find(std::begin(kStops), std::end(kStops), name) == std::end(kStops)) return "";
  std::string own;
  for (const char* s : kStops)
    if (trainer.takes(s)) own += (own.empty() ? " --" : " and --") + std::string(s);
  return own.empty() ? "" : "; " + std::string(trainer.name) + " stops by" + own;
}

/// The objective's and the trainers' settings from the command line; a setting the chosen
/// trainer does not read is an error (a silently ignored option runs another experiment).
TrainOptions train_options(const cxxopts::ParseResult& r, const TrainerInfo& trainer) {
  TrainOptions opt;
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& spec : *table) {
      if (!r.count(spec.name)) continue;
      const std::string text = get<std::string>(r, spec.name);
      try {
        spec.set(opt, text);
      } catch (const Error& e) {
        throw UsageError(std::string("--") + spec.name + ": " + e.what());
      }
      if (std::string(spec.name) == "loss") {  // a trainer that cannot minimise it says why
        const std::string why = loss_refusal(trainer, opt.loss);
        if (!why.empty()) throw UsageError("--loss: " + why);
      }
      if (!trainer.takes(spec.name))
        throw UsageError("--" + std::string(spec.name) + " is not a setting of " + trainer.name +
                         stopping_setting(trainer, spec.name) +
                         " ('crfx train --algo list' shows each algorithm's settings)");
    }
  return opt;
}

/// `crfx train --algo list`: every algorithm, its summary and its settings with their defaults.
void list_trainers() {
  const TrainOptions d;
  std::string without;
  for (const auto& t : trainer_registry())
    if (!t.uses_objective) without += std::string(without.empty() ? " but " : ", ") + t.name;
  std::cout << "Settings of the objective, for every algorithm" << without << ":";
  for (const OptionSpec& spec : objective_options()) std::cout << " --" << spec.name << " " << spec.get(d);
  std::cout << "\n\n";
  for (const auto& t : trainer_registry()) {
    std::cout << "  " << t.name << "\t" << t.summary << "\n    settings:";
    for (const char* name : t.options) {
      const std::string v = find_option(name)->get(d);
      std::cout << " --" << name << " " << (v.empty() ? "(auto)" : v);
    }
    std::cout << "\n";
  }
}

/// crfx train's per-iteration report: a line on stderr, a CSV row in --log (rewritten atomically
/// each time), with --dev the dev figure (chunk F1 for chunk tags, else token accuracy, as crfx
/// eval chooses). Its own time is kept out of the reported seconds.
struct TrainProgress {
  Backend& backend;
  const BackendCorpus* dev;  // null without --dev
  const Corpus& dev_corpus;
  const std::vector<std::string>& dev_gold;
  EvalMode dev_mode;  // chunk or item
  const Dictionary& labels;
  bool quiet;
  std::string log_path;  // empty without --log
  std::string log_text;
  // --log FILE is rewritten whole (atomically: a reader never sees half a row) once it has grown by
  // an eighth since the last write (so every row of its first few) or a second has passed: thousands
  // of short iterations write O(rows) bytes, not O(rows²), and a slow run shows each row as it comes.
  // flush_log() writes what is left (at the end of training, or when an error ends it).
  static constexpr double kLogSeconds = 1;
  std::size_t log_written = 0;  // log_text's size at the last write
  double last_log_write = now_seconds();
  int iterations = 0;
  double callback_seconds = 0;
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
    write_checkpoint(sink, checkpoint_keys, notes, state);
    file.write(buffer.data(), buffer.size());
    file.commit();
    checkpoint_iteration = iteration;
    last_checkpoint = now_seconds();
  }

  void flush_log() {
    if (log_path.empty() || log_path == "-" || log_written == log_text.size()) return;
    write_file_atomic(log_path, log_text);
    log_written = log_text.size();
    last_log_write = now_seconds();
  }

  bool operator()(const Progress& reported, const Vector& w) {
    if (reported.within_iteration()) return stop_within(reported);
    const double callback_start = now_seconds();
    Progress p = reported;
    p.seconds -= callback_seconds;
    iterations = p.iteration;
    std::string dev_f1;
    if (dev) {
      auto predicted = decode(backend, *dev, dev_corpus, w, labels);
      dev_f1 = fmt("%.2f", score(predicted, dev_gold, dev_mode).headline());
    }
    if (!quiet) {
      char line[256];
      const std::string gnorm = std::isnan(p.gradient_norm) ? "-" : fmt("%.3e", p.gradient_norm);
      const std::string obj = objective_text(p.objective);
      std::snprintf(line, sizeof line,
                    "iter %4d  passes %6.1f  obj %s  |g| %s  active %zu  step %.3g  %.2f s%s%s\n",
                    p.iteration, p.passes, obj.c_str(), gnorm.c_str(), p.active_features, p.step,
                    p.seconds, dev_f1.empty() ? "" : dev_mode == EvalMode::item ? "  dev accuracy " : "  dev F1 ",
                    dev_f1.c_str());
      std::cerr << line << std::flush;
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
    return !stopping;
  }

  /// The last report of a stochastic trainer stopped inside an epoch by a signal (the poll that
  /// main() gives the trainer): no progress line or log row (the epoch is not done), the
  /// checkpoint of that point.
  bool stop_within(const Progress& p) {
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
  static const std::set<std::string> stopping = {"max-iterations", "epochs", "max-epochs", "period", "delta",
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

/// --type, checked against the algorithm (the first thing crfx train checks).
ModelType model_type(const cxxopts::ParseResult& r, const TrainerInfo& trainer) {
  ModelType type;
  try {
    type = parse_model_type(get<std::string>(r, "type"));
  } catch (const Error& e) {
    throw UsageError(std::string("--type: ") + e.what());
  }
  if (trainer.maxent_only && type != ModelType::maxent)
    throw UsageError("-a " + std::string(trainer.name) +
                     " trains Maxent models: add --type maxent (or use lbfgs, owlqn, … for a CRF)");
  return type;
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
  if (c.format == InputFormat::conll) c.templ = FeatureTemplate::load(get<std::string>(r, "template"));
  return c;
}

/// The command line of crfx train, checked (usage errors before any data is read).
TrainArgs train_args(const cxxopts::ParseResult& r, const TrainerInfo& trainer) {
  TrainArgs a;
  model_type(r, trainer);
  if (!r.count("data")) throw UsageError("missing training data (crfx train DATA -m MODEL ...)");
  a.data_paths = get<std::vector<std::string>>(r, "data");
  if (a.data_paths.size() == 3 && !r.count("model") && !r.count("template"))
    throw UsageError("crfx train reads DATA -t TEMPLATE -m MODEL; crf_learn's order TEMPLATE DATA MODEL is not "
                     "crfx's (see 'crfx train --help')");
  a.model_path = required(r, "model", "-m/--model: where to write the model");
  a.log_path = r.count("log") ? get<std::string>(r, "log") : "";
  a.checkpoint_path = r.count("checkpoint") ? get<std::string>(r, "checkpoint") : "";
  a.dev_path = r.count("dev") ? get<std::string>(r, "dev") : "";
  a.quiet = r.count("quiet") > 0;
  check_train_outputs(r, a);
  a.config = train_config(r, trainer);
  return a;
}

/// --dev: the development data compiled with the model's features, its gold labels, and the
/// figure crfx eval would report for these labels (chunk F1 or token accuracy).
struct DevData {
  Corpus corpus;
  std::vector<std::string> gold;
  EvalMode mode = EvalMode::item;
};

DevData read_dev(const std::string& path, const FeatureSpace& fs) {
  DevData d;
  if (!path.empty()) {
    const TextData text = read_text(fs, path);
    d.corpus = compile(fs, text);
    d.gold = gold_labels(text);
    if (d.gold.size() != d.corpus.num_tokens()) throw InputError(text.path, 0, "development data needs gold labels");
  }
  std::set<std::string> labels(d.gold.begin(), d.gold.end());
  labels.insert(fs.labels.strings().begin(), fs.labels.strings().end());
  d.mode = resolve_mode(EvalOptions{}, labels);
  return d;
}

/// The log's rows so far: its header, or the rows a resumed checkpoint kept; written at once.
std::string start_log(const TrainArgs& a, EvalMode dev_mode) {
  std::string text = std::string("iteration,passes,objective,gradient_norm,active_features,seconds,") +
                     (dev_mode == EvalMode::item ? "dev_accuracy\n" : "dev_f1\n");
  if (a.resume && !a.resume->note("log").empty()) text = a.resume->note("log");  // the rows before the checkpoint
  if (a.log_path == "-") {
    if (!(std::cout << text << std::flush)) throw Error("cannot write the log to standard output: " + stdout_error());
  } else if (!a.log_path.empty()) {
    write_file_atomic(a.log_path, text);
  }
  return text;
}

/// --resume: the trainer continues from the checkpoint's state (said on stderr).
void resume_training(TrainArgs& a, TrainingRun& run, TrainProgress& progress) {
  Checkpoint& resume = *a.resume;
  const std::string made_on = resume.note("device");
  auto kind = [](const std::string& device) { return device.substr(0, device.find_first_of(" :")); };
  if (kind(made_on) != kind(run.backend().name()))
    std::cerr << "crfx train: note: the checkpoint was made on " << made_on << ", this run uses "
              << run.backend().name() << ": the model will not be bit-identical to an uninterrupted run\n";
  if (!a.quiet) {
    const std::string within = resume.note("within");
    std::cerr << "resuming: " << resume.path() << ", "
              << (within.empty() ? "after iteration " + resume.note("iteration") : "in " + within) << "\n";
  }
  progress.iterations = std::atoi(resume.note("iteration").c_str());
  progress.resumed = &resume;
  run.trainer().resume_from(&resume.state());
}

/// How a run stopped by a signal ends: the message, exit status 3.
int stopped_by_signal(int signal, const TrainArgs& a, const TrainProgress& progress) {
  std::cerr << "crfx train: stopped by " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
            << (progress.stopped_within.empty() ? " at iteration " + std::to_string(progress.iterations)
                                                 : " in " + progress.stopped_within)
            << "; model written to " << a.model_path;
  if (progress.within_checkpoint ||
      (progress.stopped_within.empty() && progress.checkpoint_iteration == progress.iterations &&
       progress.iterations > 0))
    std::cerr << "; checkpoint written to " << a.checkpoint_path << " (continue with --resume " << a.checkpoint_path
              << ")";
  std::cerr << "\n";
  return kExitStoppedBySignal;
}

int cmd_train(int argc, char** argv) {
  cxxopts::Options o("crfx train", "Train a linear-chain CRF.");
  add_train_options(o);
  add_feature_options(o);
  add_device_options(o);
  o.parse_positional({"data"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  const std::string algo = get<std::string>(r, "algo");
  if (algo == "list") {
    list_trainers();
    return 0;
  }
  const TrainerInfo* trainer = nullptr;
  try {
    trainer = &find_trainer(algo);
  } catch (const Error& e) {
    throw UsageError(std::string("-a: ") + e.what() + " (crfx train --algo list describes them)");
  }
  TrainArgs a = train_args(r, *trainer);
  const double t0 = now_seconds();
  a.config.note = [quiet = a.quiet](const std::string& line) {
    if (line.rfind("note: ", 0) == 0)
      std::cerr << "crfx train: " << line << "\n";
    else if (!quiet)
      std::cerr << line << "\n";
  };
  // The first Ctrl-C or kill ends training after the current iteration — for the stochastic
  // trainers after the current mini-batch (their poll), with the checkpoint of that point.
  a.config.stop = [] { return stop_signal() != 0; };
  TrainingRun run(a.config);
  run.compile(read_text(run.features(), a.data_paths));  // the text is released after compiling
  const FeatureSpace& fs = run.features();
  CheckpointKeys keys;
  if (!a.checkpoint_path.empty() || a.resume) keys = checkpoint_keys(r, *trainer, a.config.options, fs, run.corpus());
  if (a.resume) a.resume->check(keys);
  const DevData dev = read_dev(a.dev_path, fs);
  try {
    run.prepare();
  } catch (const MemoryRefusal& e) {
    refuse_memory(e);
  }
  release_free_memory();  // the training text, before the trainer's vectors are mapped
  BackendCorpusPtr dev_up = a.dev_path.empty() ? nullptr : run.backend().upload(dev.corpus);
  const std::string log_text = start_log(a, dev.mode);
  TrainProgress progress{run.backend(), dev_up.get(), dev.corpus, dev.gold, dev.mode, fs.labels, a.quiet, a.log_path,
                         log_text};
  progress.log_written = log_text.size();  // written by start_log
  progress.checkpoint_path = a.checkpoint_path;
  progress.checkpoint_every = a.checkpoint_every;
  progress.checkpoint_keys = keys;
  if (a.resume) resume_training(a, run, progress);
  TrainResult result;
  set_graceful_stop(true);
  try {
    result = run.run(std::ref(progress));
  } catch (const Error& e) {  // no model of this run; say where the last good state is
    try {
      progress.flush_log();  // the rows up to the failure
    } catch (const Error&) {  // the log itself may be what failed: the first error is the one to tell
    }
    if (progress.checkpoint_iteration == 0) throw;
    throw Error(std::string(e.what()) + "; the last checkpoint, of iteration " +
                std::to_string(progress.checkpoint_iteration) + ", is " + a.checkpoint_path);
  }
  if (progress.resumed) progress.resumed->finish();  // stopped without a report (a test fired at once)
  a.resume.reset();
  const int stopped_by = stop_signal();
  progress.flush_log();
  save_model(result.model, a.model_path);
  set_graceful_stop(false);  // (a second signal meanwhile removed the temporary and ended us)
  if (stopped_by) return stopped_by_signal(stopped_by, a, progress);
  if (!a.quiet)
    std::cerr << "stopped: " << result.stop_reason << "\n"
              << "done: " << progress.iterations << " iterations, " << fmt("%.1f", result.passes)
              << " passes, objective " << objective_text(result.objective) << ", " << result.active_features
              << " active features, training " << fmt("%.2f", result.seconds) << " s, total "
              << fmt("%.2f", now_seconds() - t0) << " s, peak resident memory " << bytes_text(peak_resident_bytes())
              << "\nmodel written to " << a.model_path << "\n";
  return 0;
}

// ---- tag -----------------------------------------------------------------------------------

/// "1234567" → "1,234,567".
std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string plural(std::uint64_t n, const char* one, const char* many) {
  return grouped(n) + " " + (n == 1 ? one : many);
}

/// "2.4 MB", "512 kB".
std::string megabytes(std::uint64_t bytes) {
  return bytes >= 1000000 ? fmt("%.1f MB", double(bytes) / 1e6) : fmt("%.0f kB", double(bytes) / 1e3);
}

/// "0:07", "1:02:03".
std::string clock_time(double seconds) {
  const long s = long(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string rate(std::uint64_t tokens, double seconds) {
  return fmt("%.2f M tokens/s", seconds > 0 ? double(tokens) / seconds / 1e6 : 0.0);
}

/// The progress line of a tagging run (TagProgress → text), as crfx tag shows it on a terminal.
std::string progress_line(const TagProgress& p) {
  std::string line = "crfx tag: " + grouped(p.inputs_done) + " of " + plural(p.inputs, "input", "inputs") + ", " +
                     plural(p.tokens, "token", "tokens") + ", " + rate(p.tokens, p.seconds);
  if (p.bytes > 0) {
    const double done = std::min(1.0, double(p.bytes_read) / double(p.bytes));
    line += ", " + fmt("%.0f%%", 100 * done) + " of " + megabytes(p.bytes) + " read";
    if (done > 0 && p.seconds > 0) line += ", ETA " + clock_time(p.seconds * (1 - done) / done);
  }
  return line;
}

/// Progress on standard error: on a terminal one line rewritten in place, four times a second;
/// elsewhere (asked for with --progress) a line a second.
/// Times are the command's (model load included), as in the summary line.
class ProgressDisplay {
 public:
  ProgressDisplay(bool terminal, double started) : terminal_(terminal), started_(started) {}
  void update(const TagProgress& p) {
    const double t = now_seconds();
    if (t - last_ < (terminal_ ? 0.25 : 1.0)) return;
    last_ = t;
    shown_ = true;
    std::cerr << (terminal_ ? "\r" : "") << line(p) << (terminal_ ? "\033[K" : "\n") << std::flush;
  }
  /// The run's end: elsewhere than on a terminal, its last state as a line of its own.
  void last(const TagProgress& p) {
    if (!terminal_) std::cerr << line(p) << "\n" << std::flush;
  }
  /// Clears the line on a terminal (before the summary or an error).
  void clear() {
    if (terminal_ && shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }
  ~ProgressDisplay() { clear(); }

 private:
  std::string line(TagProgress p) const {
    p.seconds = now_seconds() - started_;
    return progress_line(p);
  }
  bool terminal_;
  double started_;
  bool shown_ = false;
  double last_ = now_seconds();  // the first line after a quarter of a second: short runs show none
};

int cmd_tag(int argc, char** argv) {
  const double started = now_seconds();
  cxxopts::Options o("crfx tag",
                     "Label data with a trained model (Viterbi). Takes any number of files and directories\n"
                     "(-r) and loads the model once; the output goes to standard output, to one file (-o) or\n"
                     "to one file per input (-O DIR), in input order. Reading, template expansion and\n"
                     "formatting run on every thread (--threads) while the device decodes.");
  o.positional_help("DATA...");
  o.add_options()
      ("data", "data to label, in the model's format (a gold label column is kept); '-': standard input",
       cxxopts::value<std::vector<std::string>>())
      ("m,model", "model file", cxxopts::value<std::string>())
      ("o,output", "write every input's output here, one after another, instead of standard output "
       "(atomically; '-': standard output)", cxxopts::value<std::string>())
      ("O,output-dir", "write one output per input under DIR, named as the input (its path below a directory "
       "argument, else its file name; a .gz ending dropped), each atomically", cxxopts::value<std::string>())
      ("suffix", "with -O: append this to every output's name (e.g. .tagged)", cxxopts::value<std::string>())
      ("r,recursive", "tag every file below a directory argument")
      ("skip-existing", "with -O: leave out the inputs whose output exists (an interrupted run continues)")
      ("keep-going", "with -O: report a bad input and go on with the others (exit status 1 at the end, the "
       "failures listed); default: stop at the first")
      ("progress", "show progress on standard error even when it is not a terminal (a line a second, and the "
       "last)")
      ("timing", "after the summary, where the time went: loading the model and starting the device, then each "
       "stage of the run (read, compile, decode, format, write, waits) in seconds added up over the threads")
      ("force", "replace a read-only output file")
      ("marginals", "append every label's marginal probability (LABEL:p) to each token")
      ("p,probability", "print each sentence's probability p(labels | x) on a line before it: "
       "'# p' (as CRF++ -v1) for CoNLL data, '@probability<TAB>p' (as CRFsuite -p) for CRFsuite data")
      ("n,nbest", "print the N (at most 100000) best label sequences of each sentence, best first, each preceded by "
       "'# RANK p' (as CRF++ -n) for CoNLL data or '@nbest<TAB>RANK<TAB>p' for CRFsuite data",
       cxxopts::value<std::size_t>()->default_value("1"))
      ("batch-tokens", "tokens of whole sentences per batch (bounds memory: threads × batch in flight)",
       cxxopts::value<std::size_t>()->default_value("262144"))
      ("q,quiet", "no messages on standard error (failures and errors still)")
      ("h,help", "show this help");
  add_device_options(o);
  o.parse_positional({"data"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  if (!r.count("data")) throw UsageError("missing data to tag (crfx tag DATA... -m MODEL)");
  const auto data = get<std::vector<std::string>>(r, "data");
  const std::string model_path = required(r, "model", "-m/--model");
  const bool quiet = r.count("quiet") > 0;
  set_replace_read_only(r.count("force") > 0);
  const bool to_dir = r.count("output-dir") > 0;
  if (to_dir && r.count("output")) throw UsageError("-o (one output) and -O (one per input) exclude each other");
  for (const char* needs_dir : {"suffix", "skip-existing", "keep-going"})
    if (r.count(needs_dir) && !to_dir)
      throw UsageError(std::string("--") + needs_dir + " goes with -O DIR (one output per input)" +
                       (std::strcmp(needs_dir, "keep-going") == 0
                            ? ": in one stream, a failed input's output already written could not be taken back"
                            : ""));
  const std::string output = r.count("output") ? get<std::string>(r, "output") : "-";  // "-": standard output

  std::vector<InputFile> inputs = list_inputs(data, r.count("recursive") > 0);
  std::vector<std::string> outputs;
  std::size_t skipped = 0;
  if (to_dir) {
    const std::string dir = get<std::string>(r, "output-dir");
    const std::vector<std::string> all = output_paths(inputs, dir, r.count("suffix") ? get<std::string>(r, "suffix") : "");
    const bool skip_existing = r.count("skip-existing") > 0;
    std::vector<InputFile> left;
    std::vector<std::string> existing;  // outputs to replace: replaceable, and not an input
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      struct stat st;
      if (::lstat(all[i].c_str(), &st) == 0) {
        if (skip_existing && ::stat(all[i].c_str(), &st) == 0) {  // (a dangling link is no output)
          ++skipped;
          continue;
        }
        check_output_path(all[i]);
        check_not_an_input(all[i], {model_path});
        existing.push_back(all[i]);
      }
      left.push_back(inputs[i]);
      outputs.push_back(all[i]);
    }
    inputs.swap(left);
    check_not_an_input(existing, inputs);
  } else if (output != "-") {  // before the model is loaded
    check_output_path(output);
    check_not_an_input(output, {model_path});
    check_not_an_input(std::vector<std::string>{output}, inputs);
  }

  TagOptions options;
  options.marginals = r.count("marginals") > 0;
  options.probability = r.count("probability") > 0;
  options.nbest = get<std::size_t>(r, "nbest");
  if (options.nbest == 0 || options.nbest > kMaxNbest)
    throw UsageError("--nbest must be between 1 and " + std::to_string(kMaxNbest) + ", got " +
                std::to_string(options.nbest));
  TagRunOptions run;
  run.batch_tokens = get<std::size_t>(r, "batch-tokens");
  if (run.batch_tokens == 0) throw UsageError("--batch-tokens must be at least 1");
  run.keep_going = r.count("keep-going") > 0;

  const double load_start = now_seconds();
  Model model = load_model(model_path);
  const Dims dims = model.features.dims();
  Tagger tagger(std::move(model), backend_from(r, dims, quiet), options);
  const double load_seconds = now_seconds() - load_start;
  const unsigned threads = get<unsigned>(r, "threads");
  run.workers = threads ? threads : std::max(1u, std::thread::hardware_concurrency());

  // Streamed a batch of whole sentences at a time (memory bounded by the batches in flight, not
  // the inputs); each output goes to a temporary file renamed when it is whole, so a failure
  // half-way leaves an existing output untouched. (On standard output, what was tagged before an
  // error is out.)
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  ProgressDisplay display(terminal, started);
  if (!quiet && (terminal || r.count("progress")))
    run.progress = [&display](const TagProgress& p) { display.update(p); };
  std::unique_ptr<TagSink> sink;
  if (to_dir)
    sink = std::make_unique<DirectoryOutput>(outputs);
  else
    sink = std::make_unique<ConcatenatedOutput>(output);
  const TagRunStats stats = tag_inputs(tagger, inputs, *sink, run);  // (on an error, ~ProgressDisplay clears)
  if (run.progress) display.last(stats);
  display.clear();
  const double seconds = now_seconds() - started;
  if (!quiet) {
    std::string line = "crfx tag: " + plural(stats.inputs, "input", "inputs");
    if (skipped) line += " (" + grouped(skipped) + " more skipped: output exists)";
    line += ", " + plural(stats.sentences, "sentence", "sentences") + ", " + plural(stats.tokens, "token", "tokens") +
            " in " + fmt("%.2f s", seconds) + " (" + rate(stats.tokens, seconds) + ") on " + tagger.device();
    std::cerr << line << "\n";
  }
  if (r.count("timing")) {  // (asked for: shown even with --quiet)
    const TagStageSeconds& t = stats.stages;
    std::cerr << "crfx tag: timing: model and device " << fmt("%.3f s", load_seconds) << "; stages over "
              << plural(run.workers, "thread", "threads") << ": read " << fmt("%.3f", t.read) << ", compile "
              << fmt("%.3f", t.compile) << ", decode " << fmt("%.3f", t.decode) << ", format " << fmt("%.3f", t.format)
              << ", write " << fmt("%.3f", t.write) << ", waiting " << fmt("%.3f", t.wait) << " s\n";
  }
  if (!stats.failures.empty()) {
    std::cerr << "crfx tag: " << grouped(stats.failures.size()) << " of " << plural(stats.inputs, "input", "inputs")
              << " failed (no output written for them):\n";
    for (const TagFailure& f : stats.failures) std::cerr << "  " << f.message << "\n";
    return 1;
  }
  return 0;
}

// ---- eval ----------------------------------------------------------------------------------

int cmd_eval(int argc, char** argv) {
  cxxopts::Options o("crfx eval",
                     "Scores labelled output. Chunk tags (IOB1, IOB2, IOE, IOBES: B-, I-, E-, S- prefixes and\n"
                     "the outside label) get conlleval's report: token accuracy and chunk precision / recall /\n"
                     "F1. Any other tag set (POS, morphology, classes) gets token and sentence accuracy and\n"
                     "per-label precision / recall / F1 with macro and micro averages (CRFsuite's tag -qt).\n"
                     "Input: one token per line, the last two columns gold and predicted label\n"
                     "(what 'crfx tag' writes for data with gold labels). Several files (or directories, -r)\n"
                     "get a report each, under a '== FILE' line, then one over them all under '== total'.");
  o.positional_help("FILE...");
  o.add_options()
      ("file", "labelled output to score", cxxopts::value<std::vector<std::string>>())
      ("R,recursive", "score every file below a directory argument")
      ("mode", "auto | chunk | item: the report (auto: chunk when every label is a chunk tag)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("confusion", "also print the confusion matrix of the labels with the most errors")
      ("r,raw", "chunk report over labels without B-/I- prefixes: each token is a chunk (conlleval -r)")
      ("o,outside", "the outside label (conlleval -o)", cxxopts::value<std::string>()->default_value("O"))
      ("h,help", "show this help");
  o.parse_positional({"file"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  EvalOptions eo;
  eo.raw = r.count("raw") > 0;
  eo.outside = get<std::string>(r, "outside");
  const std::string mode = get<std::string>(r, "mode");
  if (mode == "chunk")
    eo.mode = EvalMode::chunk;
  else if (mode == "item")
    eo.mode = EvalMode::item;
  else if (mode != "auto")
    throw UsageError("--mode: '" + mode + "' is none of auto, chunk, item");
  if (eo.raw && eo.mode == EvalMode::item) throw UsageError("--raw gives the chunk report; it does not go with --mode item");
  if (!r.count("file")) throw UsageError("missing a file to evaluate (crfx eval FILE...)");
  const std::vector<InputFile> files =
      list_inputs(get<std::vector<std::string>>(r, "file"), r.count("recursive") > 0);
  const bool confusion = r.count("confusion") > 0;
  if (files.size() == 1) {  // conlleval's report alone, byte for byte
    std::cout << evaluate_labels_file(files[0].path, eo).report(confusion) << std::flush;
    return 0;
  }
  Evaluation total{ChunkEvaluator(eo), ItemEvaluator(), {}, EvalMode::chunk};
  for (const InputFile& f : files) {
    const Evaluation ev = evaluate_labels_file(f.path, eo);
    std::cout << "== " << f.path << "\n" << ev.report(confusion) << "\n" << std::flush;
    total.merge(ev, eo);
  }
  std::cout << "== total: " << files.size() << " files\n" << total.report(confusion) << std::flush;
  return 0;
}

// ---- dump ----------------------------------------------------------------------------------

int cmd_dump(int argc, char** argv) {
  cxxopts::Options o("crfx dump", "Print a model file readably.");
  o.positional_help("MODEL");
  o.add_options()("model", "model file", cxxopts::value<std::string>())("h,help", "show this help");
  o.parse_positional({"model"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  std::cout << dump_model(load_model(required(r, "model", "a model file (crfx dump MODEL)"))) << std::flush;
  return 0;
}

// ---- bench ---------------------------------------------------------------------------------

int cmd_bench(int argc, char** argv) {
  cxxopts::Options o("crfx bench",
                     "Time objective + gradient passes (forward-backward and the marginal reduction)\n"
                     "over a whole training set, for one or more thread counts.");
  o.positional_help("DATA");
  o.add_options()
      ("data", "training data", cxxopts::value<std::string>())
      ("t,template", "CRF++ template (CoNLL data)", cxxopts::value<std::string>())
      ("format", "conll | crfsuite", cxxopts::value<std::string>()->default_value("conll"))
      ("thread-list", "comma-separated thread counts to time", cxxopts::value<std::string>()->default_value("1,2"))
      ("repeat", "timed passes per thread count (after one warm-up)", cxxopts::value<int>()->default_value("5"))
      ("type", "crf | maxent (as crfx train --type)", cxxopts::value<std::string>()->default_value("crf"))
      ("loss", "seq-log | seq-exp | point-log | point-exp: the loss the pass computes (as crfx train --loss)",
       cxxopts::value<std::string>()->default_value("seq-log"))
      ("h,help", "show this help");
  add_feature_options(o);
  add_device_options(o);
  o.parse_positional({"data"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  // The thread counts and the repeat count are checked before the data is read.
  std::vector<unsigned> thread_counts;
  {
    std::stringstream list(get<std::string>(r, "thread-list"));
    std::string item;
    while (std::getline(list, item, ',')) {
      if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(item) > kMaxThreads)
        throw UsageError("--thread-list: '" + item + "' is not a thread count (0 to " +
                         std::to_string(kMaxThreads) + ", 0 = all cores)");
      thread_counts.push_back(unsigned(std::stoul(item)));
    }
    if (thread_counts.empty()) throw UsageError("--thread-list: no thread count given");
  }
  const int repeat = get<int>(r, "repeat");
  if (repeat < 1) throw UsageError("--repeat must be ≥ 1, got " + std::to_string(repeat));
  FeatureSpace fs;
  SequenceLoss loss;
  try {
    fs.type = parse_model_type(get<std::string>(r, "type"));
    loss = parse_sequence_loss(get<std::string>(r, "loss"));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  fs.format = parse_format(get<std::string>(r, "format"));
  if (fs.format == InputFormat::conll)
    fs.templ = FeatureTemplate::load(required(r, "template", "--template for CoNLL data"));
  double t = now_seconds();
  const FeatureSet features = feature_set(r);
  Corpus corpus = compile_training(fs, read_text(fs, required(r, "data", "training data")), 1);
  choose_layout(fs, corpus, features);
  const double compile_s = now_seconds() - t;
  const Dims dims = fs.dims();
  std::printf("data: %zu sentences, %zu tokens, L = %u, A = %u, E = %u, %zu weights%s; loss %s; read + compile %.3f s\n",
              corpus.num_sentences(), corpus.num_tokens(), dims.L, dims.A, dims.E, dims.num_weights(),
              fs.type == ModelType::maxent ? " (Maxent)" : "", sequence_loss_name(loss), compile_s);
  std::string said;  // the device's fallback note, printed once
  for (const unsigned threads : thread_counts) {
    BackendOptions bo;
    bo.device = parse_device(get<std::string>(r, "device"));
    bo.threads = threads;
    std::string note, fallback;
    BackendPtr b = make_backend(dims, bo, &note, &fallback);
    if (!fallback.empty() && said.empty())  // why the GPU is not used: once, not on every row
      std::printf("device auto: %s; using the CPU\n", (said = fallback).c_str());
    BackendCorpusPtr up = b->upload(corpus);
    // Small non-zero weights, so that the chain does real work (a fixed pattern, same each run).
    std::vector<double> host(dims.num_weights());
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.01 * double(int(i % 17) - 8);
    VectorPtr w = to_backend(*b, host);
    VectorPtr g = b->vector(dims.num_weights());
    std::vector<double> times;
    double value = 0;
    for (int k = 0; k <= repeat; ++k) {
      b->fill(*g, 0.0);
      t = now_seconds();
      value = b->evaluate(*up, *w, all_sentences(*up), g.get(), 1.0, loss);
      if (k > 0) times.push_back(now_seconds() - t);
    }
    std::sort(times.begin(), times.end());
    std::printf("%s: objective+gradient pass: median %.4f s, min %.4f s (%d passes; %.2f M tokens/s; loss %.6f)\n",
                note.c_str(), times[times.size() / 2], times.front(), repeat,
                double(corpus.num_tokens()) / times[times.size() / 2] / 1e6, value);
  }
  return 0;
}

void usage(std::ostream& os) {
  os << "crfx — linear-chain CRF trainer and tagger\n\n"
        "usage: crfx COMMAND [options]   (crfx COMMAND --help for its options)\n\n"
        "commands:\n"
        "  train   train a model from CoNLL (with a CRF++ template) or CRFsuite data\n"
        "  tag     label data with a model\n"
        "  eval    conlleval chunk P/R/F1, or accuracy and per-label P/R/F1, of labelled output\n"
        "  bench   time objective+gradient passes over a data set\n"
        "  dump    print a model readably\n"
        "  --version  the version, build type and CUDA backend of this crfx\n";
}

}  // namespace
}  // namespace crfx

int main(int argc, char** argv) {
  using namespace crfx;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::cout << "crfx " << CRFX_VERSION << " (" << CRFX_BUILD_INFO << ")\n"
              << "CPU vector code: " << cpu_vector_code() << "\n";
    return 0;
  }
  // A file-size limit (ulimit -f) would otherwise kill us with SIGXFSZ mid-write, leaving the
  // temporary file behind; ignored, the write fails with EFBIG and AtomicFile reports it and
  // cleans up like any other write error.
  std::signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C, kill or a closed terminal: the open temporary outputs are removed first.
  remove_temporaries_on_signals();
#ifdef __GLIBC__
  // Tagging streams batches whose buffers run to tens of MB. glibc would give each its own mmap,
  // fault it in page by page and unmap it at free; from the heap, kept rather than trimmed, the
  // next batch reuses the pages (benchmarks/tag.sh: 2.6 → 1.7 s). The trainers' big vectors are
  // HostArray mappings of their own and do not go through malloc; what training frees on the
  // heap (the text, once compiled) is handed back by release_free_memory().
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One heap for every thread: tagging's workers each hold a batch, and in arenas of their own
  // those pages would be fresh for every worker and never reused by another (sys time 0.03 →
  // 0.12 s, wall +18% on benchmarks/tag.sh with 2 threads). Their allocations are few and large.
  mallopt(M_ARENA_MAX, 1);
#endif
  try {
    int status = -1;
    if (cmd == "train") status = cmd_train(argc - 1, argv + 1);
    else if (cmd == "tag") status = cmd_tag(argc - 1, argv + 1);
    else if (cmd == "eval") status = cmd_eval(argc - 1, argv + 1);
    else if (cmd == "bench") status = cmd_bench(argc - 1, argv + 1);
    else if (cmd == "dump") status = cmd_dump(argc - 1, argv + 1);
    if (status < 0) {
      std::cerr << "crfx: unknown command '" << cmd << "'\n";
      usage(std::cerr);
      return 2;
    }
    // What went to standard output must have arrived (a full disk, /dev/full, a closed pipe):
    // a report or a dump that was lost is a failure, not exit 0.
    std::cout.flush();
    if (!std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout))
      throw Error(std::string("cannot write to standard output: ") + std::strerror(errno ? errno : EIO));
    return status;
  } catch (const UsageError& e) {
    std::cerr << "crfx " << cmd << ": " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "crfx " << cmd << ": out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "crfx " << cmd << ": " << e.what() << "\n";
    return 1;
  }
}
