// crfx — what the commands of the crfx tool share: option parsing with hints for other tools'
// habits, output checks, the device options (declared in apps/cli.hpp).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

namespace crfx::cli {

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

/// The text between cxxopts' quotes ‘…’ in one of its messages ("" when there is none).
std::string quoted(const std::string& msg) {
  const std::size_t open = msg.find("\xe2\x80\x98"), close = msg.find("\xe2\x80\x99");
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return msg.substr(open + 3, close - open - 3);
}

/// What crfx calls an option that CRF++ (crf_learn, crf_test), CRFsuite or conlleval users type,
/// from cxxopts' "Option ‘c’ does not exist"; "" for any other option.
std::string foreign_option_hint(const std::string& program, const std::string& msg) {
  const std::string name = quoted(msg);
  const bool train = program == "crfx train" || program == "crfx learn", learn = program == "crfx learn";
  const bool tag = program == "crfx tag";
  if (name == "c" && train)
    return "; CRF++'s -c C is --c2 here, with c2 = 1/(2·C) (-c 4 → --c2 0.125); with -a MIRA it is --mira-c C";
  if (name == "p" && train)
    return "; CRF++'s -p N (threads) is --threads N here; CRFsuite's -p NAME=VALUE is understood by 'crfx learn'";
  if (name == "H" && !learn && train)  // crf_learn's -H, CRFsuite's too (below)
    return "; CRF++'s -H N (MIRA's shrinking size) is --shrinking-size N here; CRFsuite's -H (the algorithm's "
           "parameters) is 'crfx train --algo list'";
  // CRFsuite's learn.
  if ((name == "H" || name == "help-parameters") && train)
    return "; CRFsuite's -H (the algorithm's parameters) is 'crfx train --algo list' here";
  if ((name == "e" || name == "holdout" || name == "g" || name == "split" || name == "x" ||
       name == "cross-validate") && learn)
    return "; crfx has no groups of instances (CRFsuite's -g, -e, -x): the data files are read as one, and "
           "--dev FILE scores held-out data after every iteration";
  if ((name == "l" || name == "log-to-file" || name == "L" || name == "logbase") && learn)
    return "; CRFsuite's -l/-L (log to a file) is --log FILE here (CSV, one row an iteration)";
  // CRFsuite's tag.
  if ((name == "t" || name == "test") && tag)
    return "; CRFsuite's tag -t (evaluate) is crfx eval on the tagged output (crfx tag … | crfx eval -)";
  if ((name == "i" || name == "marginal" || name == "l" || name == "marginal-all") && tag)
    return "; CRFsuite's tag -i/-l (marginal probabilities) is --marginals here (LABEL:p for every label)";
  if (name == "reference" && tag)
    return "; CRFsuite's tag -r (the reference labels) is what crfx tag does anyway: the input's gold label is "
           "kept before the predicted one";
  if (name == "R" && tag) return "; crfx tag's recursive option is -r";
  // conlleval's -r; -r means recursive in crfx (tag -r, eval -R).
  if (name == "r" && program == "crfx eval")
    return "; conlleval's -r (raw labels) is --raw here, and -R/--recursive reads directories (crfx tag's -r)";
  if (name == "v") return "; CRF++'s -v 1 is -p/--probability here, -v 2 is --marginals";
  if (name == "version") return "; the version is 'crfx --version'";
  return "";
}

namespace {
std::string lowercase(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

/// crf_learn lowercases its -a (encoder.cpp, crfpp_learn): its MIRA, in any case, is crfx's mira.
std::string algorithm_name(const std::string& name) { return lowercase(name) == "mira" ? "mira" : name; }

/// For a CRF++ (crf_learn -a) or CRFsuite (learn -a) algorithm that crfx does not have under that
/// name: what crfx has instead; "" for any other name.
std::string foreign_algorithm_hint(const std::string& name) {
  const std::string lower = lowercase(name);
  if (lower == "crf-l2" || lower == "crf")
    return "CRF++'s -a " + name + " is -a lbfgs here, the default (CRF++'s -c C is --c2 1/(2·C))";
  if (lower == "crf-l1") return "CRF++'s -a " + name + " is -a owlqn --c1 1/C --c2 0 here (CRF++'s -c C)";
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

BackendPtr backend_from(const cxxopts::ParseResult& r, const Dims& dims, bool quiet, int cuda_device) {
  BackendOptions bo = backend_options(r);
  bo.cuda_device = cuda_device;
  std::string note;
  BackendPtr b = make_backend(dims, bo, &note);
  if (!quiet) std::cerr << note << "\n";
  return b;
}

}  // namespace crfx::cli
