// crfx train's and learn's options: the table (add_train_options, generated from the trainers'
// OptionSpec tables), their parsing into TrainOptions and the model type, sizes ("20M"), the
// feature set switches, the trainer list (--algo list), and the small texts of the progress
// report (ETA, the iteration cap, the peak resident memory). The command itself: cmd_train.cpp.
#include "train_options.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cxxopts.hpp>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "crfx/train.hpp"

#include "cli.hpp"

namespace crfx::cli {

namespace {

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

}  // namespace

/// crfx train's options; learn: crfx learn's (CRFsuite's data format by default, and -p).
void add_train_options(cxxopts::Options& o, bool learn) {
  const TrainOptions d;
  o.positional_help("DATA...");
  o.add_options()
      ("data", learn ? "training data (CRFsuite attributes, or CoNLL columns with --format conll; .gz ok); "
                       "several files are read one after the other, as one"
                     : "training data (CoNLL columns, or CRFsuite attributes with --format crfsuite; .gz ok); "
                       "several files are read one after the other, as one",
       cxxopts::value<std::vector<std::string>>())
      ("m,model", "model file to write", cxxopts::value<std::string>())
      ("force", "replace a read-only model or log file")
      ("t,template", "CRF++ feature template (CoNLL data)", cxxopts::value<std::string>())
      ("format", "conll | crfsuite", cxxopts::value<std::string>()->default_value(learn ? "crfsuite" : "conll"))
      ("type", "crf | maxent: a linear-chain CRF, or a Maxent classifier labelling every token on its own from "
       "the same attributes (no transitions; a template's B lines are ignored)",
       cxxopts::value<std::string>()->default_value("crf"))
      ("a,algo", learn ? "training algorithm ('list' shows them with their settings); CRFsuite's lbfgs, l2sgd, ap, "
                         "pa and arow are crfx's"
                       : "training algorithm ('list' shows them with their settings); CRF++'s -a MIRA is mira",
       cxxopts::value<std::string>()->default_value("lbfgs"))
      ("f,min-freq", "drop attributes seen fewer times (CRF++ -f)", cxxopts::value<std::size_t>()->default_value("1"))
      ("max-memory", "refuse to start a run whose estimated memory exceeds this (e.g. 512M, 8G; default: "
       "what the backend has available)", cxxopts::value<std::string>())
      ("max-device-memory", "the most GPU memory the run may use (e.g. 512M, 2G; default: what is free); a "
       "corpus that does not fit beside the weights and optimizer state is streamed from pinned host memory "
       "in chunks (batch trainers: lbfgs, owlqn, rprop, …)", cxxopts::value<std::string>());
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& spec : *table) {
      auto value = cxxopts::value<std::string>();
      const std::string v = spec.get(d);
      if (!v.empty()) value->default_value(v);  // else the trainer's default (said in the help)
      const std::string kind = spec.kind;  // the choices, where there are some
      const std::string choices = kind.find('|') != std::string::npos ? kind + "; " : "";
      o.add_options()(spec.name, takers(spec.name) + choices + spec.help, value);
    }
  if (learn)
    o.add_options()("p,set", "CRFsuite's NAME=VALUE, translated to crfx's option and said in a note: c1, c2, "
                             "max_iterations, epsilon, delta, period, num_memories, max_linesearch, "
                             "feature.minfreq, feature.possible_states, feature.possible_transitions",
                    cxxopts::value<std::vector<std::string>>());
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
double parse_bytes(const std::string& text, const char* option) {
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
    throw UsageError(std::string(option) + ": '" + text + "' is not a size (e.g. 512M, 8G, 16GiB)");
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

namespace {

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

}  // namespace

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

/// "12 s", "3.5 min", "2.1 h".
std::string eta_text(double seconds) {
  if (seconds < 99.5) return fmt("%.0f s", seconds);
  if (seconds < 5970) return fmt("%.1f min", seconds / 60);
  return fmt("%.1f h", seconds / 3600);
}

/// The last iteration (epoch) a run of `trainer` can reach with `opt`: the epochs of sgd-l1, adf
/// and ap, sag's and saga's --max-epochs, --max-iterations (boost: 1000 rounds when 0; two-stage:
/// after its --sgd-epochs); 0 when there is no cap (--max-iterations 0; boost with --dev: its
/// held-out rule).
int iteration_cap(const TrainerInfo& trainer, const TrainOptions& opt) {
  if (trainer.takes("epochs")) return opt.epochs;
  if (trainer.takes("max-epochs")) return opt.max_epochs;
  if (!trainer.takes("max-iterations")) return 0;
  int cap = opt.max_iterations;
  if (cap >= kUncappedIterations) return 0;
  if (cap <= 0 && std::string(trainer.name) == "boost") cap = 1000;  // host/optim/boost.hpp, kDefaultRounds
  if (cap > 0 && trainer.takes("sgd-epochs")) cap += opt.sgd_epochs;  // two-stage numbers stage 2 on from there
  return cap;
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
/// settings are generated from their tables (OptionSpec, crfx/internal/trainer.hpp), with the library's
/// defaults.
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

}  // namespace crfx::cli
