// crfx learn: CRFsuite's `learn` command line, translated to crfx train's (train_command with
// CRFsuite's data format by default). CRFsuite's -p NAME=VALUE becomes crfx's option, said in a
// note line ("crfx learn: note: -p c2=1 is --c2 1"); -a NAME and --algorithm NAME become --algo
// (the names crfx lacks are refused by train_command with what crfx has instead); -t/--type 1d,
// CRFsuite's one model type, is crfx's CRF.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "crfx/internal/trainer.hpp"

#include "cli.hpp"

namespace crfx::cli {

namespace {

/// Whether args[i] is one of the options `names` ("-a", "--algorithm", ...), given as "-aX",
/// "--name=X" or followed by its value (then i steps over that); its value in `value`.
bool option_value(const std::vector<std::string>& args, std::size_t& i, std::initializer_list<const char*> names,
                  std::string& value) {
  const std::string& a = args[i];
  for (const char* name : names) {
    const std::size_t n = std::strlen(name);
    if (a == name) {
      if (i + 1 >= args.size()) throw UsageError(std::string(name) + " needs a value");
      value = args[++i];
      return true;
    }
    const bool is_long = n > 2;
    if (a.compare(0, n, name) == 0 && a.size() > n) {
      if (is_long && a[n] != '=') continue;  // --algorithmX is another option
      value = a.substr(n + (is_long ? 1 : 0));
      return true;
    }
  }
  return false;
}

/// CRFsuite's `max_iterations` is crfx's stopping setting of `trainer`: --max-iterations, or the
/// epochs of the stochastic trainers.
std::string iterations_option(const TrainerInfo* trainer) {
  if (trainer && trainer->takes("epochs")) return "--epochs";
  if (trainer && trainer->takes("max-epochs")) return "--max-epochs";
  return "--max-iterations";
}

/// One -p NAME=VALUE as crfx train's arguments (appended to `out`), with its note on stderr.
void translate_parameter(const std::string& setting, const TrainerInfo* trainer, std::vector<std::string>& out) {
  const std::size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError("-p '" + setting + "': CRFsuite's -p takes NAME=VALUE (e.g. -p c2=1)");
  const std::string name = setting.substr(0, eq), value = setting.substr(eq + 1);
  auto note = [&](const std::string& crfx) {
    std::cerr << "crfx learn: note: -p " << setting << " is " << crfx << "\n";
  };
  static const std::pair<const char*, const char*> kSame[] = {
      {"c1", "--c1"},         {"c2", "--c2"},         {"epsilon", "--epsilon"},
      {"delta", "--delta"},   {"period", "--period"}, {"num_memories", "--memory"},
      {"max_linesearch", "--max-linesearch"},
      // pa's and arow's (crfx's names for them: CRFsuite's type and c are pa's alone there).
      {"type", "--pa-type"},  {"c", "--pa-c"},        {"error_sensitive", "--error-sensitive"},
      {"averaging", "--averaging"}, {"variance", "--variance"}, {"gamma", "--gamma"},
      // l2sgd's rate calibration.
      {"calibration.eta", "--calibration-eta"}, {"calibration.rate", "--calibration-rate"},
      {"calibration.samples", "--calibration-samples"}, {"calibration.candidates", "--calibration-candidates"},
      {"calibration.max_trials", "--calibration-max-trials"}};
  for (const auto& [crfsuite, crfx] : kSame)
    if (name == crfsuite) {
      note(std::string(crfx) + " " + value);
      out.insert(out.end(), {crfx, value});
      return;
    }
  if (name == "max_iterations") {
    const std::string option = iterations_option(trainer);
    note(option + " " + value);
    out.insert(out.end(), {option, value});
    return;
  }
  if (name == "feature.minfreq") {
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v >= 0) || v != double(std::size_t(v)))
      throw UsageError("-p feature.minfreq=" + value + ": crfx's --min-freq counts occurrences, a whole number ≥ 0");
    const std::string n = std::to_string(std::size_t(v));
    note("--min-freq " + n + " (crfx counts an attribute's occurrences, CRFsuite an attribute-label feature's)");
    out.insert(out.end(), {"--min-freq", n});
    return;
  }
  for (const char* flag : {"possible_states", "possible_transitions"})
    if (name == std::string("feature.") + flag) {
      std::string option = std::string("--") + flag;
      option[option.find('_')] = '-';
      if (value == "1") {
        note(option);
        out.push_back(option);
      } else if (value == "0") {
        note("crfx's default (no " + option + ")");
      } else {
        throw UsageError("-p " + setting + ": 0 or 1 (1 is " + option + ")");
      }
      return;
    }
  if (name == "linesearch") {
    if (value == "MoreThuente") {
      note("crfx's one line search, strong Wolfe (nothing to set)");
      return;
    }
    throw UsageError("-p linesearch=" + value + ": crfx's lbfgs has one line search, strong Wolfe (CRFsuite's "
                     "MoreThuente); --max-linesearch bounds its trials");
  }
  throw UsageError("-p " + name + ": not a CRFsuite setting crfx learn translates (c1, c2, max_iterations, epsilon, "
                   "delta, period, num_memories, max_linesearch, type, c, error_sensitive, averaging, variance, gamma, "
                   "calibration.eta, calibration.rate, calibration.samples, calibration.candidates, "
                   "calibration.max_trials, feature.minfreq, feature.possible_states, feature.possible_transitions); "
                   "crfx's own are in 'crfx train --algo list'");
}

}  // namespace

int cmd_learn(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  // The algorithm first: CRFsuite's max_iterations is an epoch count for the stochastic trainers.
  std::string algo = "lbfgs";
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i)
    option_value(args, i, {"-a", "--algorithm", "--algo"}, algo);
  algo = algorithm_name(algo);
  const TrainerInfo* trainer = nullptr;
  try {
    trainer = &find_trainer(algo);
  } catch (const Error&) {  // refused by train_command, with what crfx has instead
  }
  std::vector<std::string> out = {argv[0]};
  bool epochs_set = false, delta_set = false;  // for the notes on the defaults of ap, pa, arow and l2sgd
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string arg = args[i];
    std::string value;
    if (arg == "--") {
      out.insert(out.end(), args.begin() + std::ptrdiff_t(i), args.end());
      break;
    }
    if (option_value(args, i, {"-a", "--algorithm", "--algo"}, value)) {
      out.insert(out.end(), {"--algo", value});
    } else if (option_value(args, i, {"-p", "--set"}, value)) {
      epochs_set |= value.rfind("max_iterations=", 0) == 0;
      delta_set |= value.rfind("delta=", 0) == 0;
      translate_parameter(value, trainer, out);
    } else if (option_value(args, i, {"-t", "--type"}, value)) {
      const bool type = arg.rfind("--type", 0) == 0;
      if (value == "1d") {
        std::cerr << "crfx learn: note: " << (type ? "--type" : "-t") << " 1d (CRFsuite's first-order CRF) is "
                  << "crfx's --type crf, the default\n";
        out.insert(out.end(), {"--type", "crf"});
      } else {  // crfx's own: -t TEMPLATE, --type maxent
        out.insert(out.end(), {type ? "--type" : "--template", value});
      }
    } else {
      epochs_set |= arg.rfind("--epochs", 0) == 0;
      delta_set |= arg.rfind("--delta", 0) == 0;
      out.push_back(arg);
    }
  }
  const std::string name = trainer ? trainer->name : "";
  if ((name == "ap" || name == "pa" || name == "arow") && !epochs_set)
    std::cerr << "crfx learn: note: -a " << name << " runs --epochs 30 by default (CRFsuite's " << name
              << ": max_iterations=100)\n";
  if (name == "l2sgd" && !epochs_set)
    std::cerr << "crfx learn: note: -a l2sgd runs --epochs " << TrainOptions{}.epochs
              << " by default (CRFsuite's l2sgd: max_iterations=1000)\n";
  if (name == "l2sgd" && !delta_set)
    std::cerr << "crfx learn: note: -a l2sgd stops at --delta " << TrainOptions{}.delta
              << " by default (CRFsuite's l2sgd: delta=1e-6)\n";
  std::vector<char*> translated;
  for (std::string& a : out) translated.push_back(a.data());
  translated.push_back(nullptr);
  return train_command(int(out.size()), translated.data(), true);
}

}  // namespace crfx::cli
