// crfx tag: tagging many inputs with a model (crfx::tag_inputs), and its progress line.
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
#include <future>
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

namespace {

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

}  // namespace

namespace {

/// crfx tag's options (besides the device's).
void add_tag_options(cxxopts::Options& o) {
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
      ("r,recursive", "tag every file below a directory argument (not CRFsuite's tag -r: crfx keeps the gold "
       "label anyway)")
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
      ("batch-bytes", "… and at most about this many bytes of input per batch (with --batch-tokens and the threads, "
       "what bounds memory; CRFsuite attribute lines are long)",
       cxxopts::value<std::size_t>()->default_value("4194304"))
      ("q,quiet", "no messages on standard error (failures and errors still)")
      ("h,help", "show this help");
}

/// Where the outputs go: -O DIR (one per input, those that exist checked as replaceable, or
/// skipped with --skip-existing), -o FILE or standard output ("-"); checked before the model is
/// loaded. Leaves in `inputs` the inputs to tag.
struct Outputs {
  std::vector<std::string> paths;  // -O: one per input left
  std::size_t skipped = 0;         // --skip-existing
};

Outputs plan_outputs(const cxxopts::ParseResult& r, std::vector<InputFile>& inputs, const std::string& model_path,
                     bool to_dir, const std::string& output) {
  Outputs out;
  std::vector<std::string>& outputs = out.paths;
  std::size_t& skipped = out.skipped;
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

  return out;
}

bool lead(const Collective* ranks) { return !ranks || ranks->rank() == 0; }

/// Keeps this process's share of the inputs, and their outputs: input i goes to process i mod N,
/// each output written by the process that tags its input (so -O DIR only: one stream cannot
/// be written by several processes).
void share_inputs(const Collective& ranks, bool to_dir, std::vector<InputFile>& inputs,
                  std::vector<std::string>& outputs) {
  if (!to_dir)
    throw UsageError("across " + std::to_string(ranks.size()) +
                     " processes each input needs an output of its own: -O DIR (not -o or standard output)");
  std::vector<InputFile> mine;
  std::vector<std::string> mine_out;
  for (std::size_t i = std::size_t(ranks.rank()); i < inputs.size(); i += std::size_t(ranks.size())) {
    mine.push_back(inputs[i]);
    mine_out.push_back(outputs[i]);
  }
  inputs.swap(mine);
  outputs.swap(mine_out);
}

/// The run's figures added up over the processes (for the first one's summary line).
TagRunStats all_processes(Collective* ranks, TagRunStats stats) {
  if (!ranks || ranks->size() == 1) return stats;
  double n[] = {double(stats.inputs), double(stats.sentences), double(stats.tokens)};
  ranks->sum(n, 3);
  stats.inputs = std::size_t(n[0]);
  stats.sentences = std::size_t(n[1]);
  stats.tokens = std::size_t(n[2]);
  return stats;
}

/// The summary line (and --timing's) on standard error.
void report(const cxxopts::ParseResult& r, const TagRunStats& stats, const TagRunOptions& run, const Tagger& tagger,
            std::size_t skipped, double started, double load_seconds, bool quiet) {
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
}

}  // namespace

int cmd_tag(int argc, char** argv) {
  const double started = now_seconds();
  cxxopts::Options o("crfx tag",
                     "Label data with a trained model (Viterbi). Takes any number of files and directories\n"
                     "(-r) and loads the model once; the output goes to standard output, to one file (-o) or\n"
                     "to one file per input (-O DIR), in input order. Reading, template expansion and\n"
                     "formatting run on every thread (--threads) while the device decodes.");
  add_tag_options(o);
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

  // CRFsuite's tag -r prints the reference labels; crfx's -r recurses into directories. With no
  // directory to recurse into, the user likely meant CRFsuite's: say what crfx does.
  if (r.count("recursive") && !quiet &&
      std::none_of(data.begin(), data.end(), [](const std::string& p) {
        std::error_code ec;
        return std::filesystem::is_directory(p, ec);
      }))
    std::cerr << "crfx tag: note: -r (recursive) applies to directory arguments and none is given; CRFsuite's "
                 "tag -r (the reference labels) is what crfx tag does anyway: the input's gold label is kept "
                 "before the predicted one\n";
  std::vector<InputFile> inputs = list_inputs(data, r.count("recursive") > 0);
  Outputs outputs = plan_outputs(r, inputs, model_path, to_dir, output);
  // Under mpirun the inputs are shared out, input i to process i mod N, each writing their outputs.
  Collective* ranks = processes();
  if (ranks && ranks->size() > 1) share_inputs(*ranks, to_dir, inputs, outputs.paths);
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
  run.batch_bytes = get<std::size_t>(r, "batch-bytes");
  if (run.batch_bytes == 0) throw UsageError("--batch-bytes must be at least 1");
  run.keep_going = r.count("keep-going") > 0;

  const double load_start = now_seconds();
  // The device starts (the CUDA context and the kernels' module, a fifth of a second) while the
  // model loads; the backend is made once both are done (its own check then finds the device up).
  std::future<std::string> device_start;
  if (backend_options(r).device != DeviceKind::cpu)
    device_start = std::async(std::launch::async, [] { return gpu_unavailable(); });
  Model model = load_model(model_path);
  if (device_start.valid()) device_start.wait();
  const Dims dims = model.features.dims();
  Tagger tagger(std::move(model), backend_from(r, dims, quiet || !lead(ranks), ranks ? ranks->local_rank() : 0),
                options);
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
    sink = std::make_unique<DirectoryOutput>(outputs.paths);
  else
    sink = std::make_unique<ConcatenatedOutput>(output);
  const TagRunStats stats = tag_inputs(tagger, inputs, *sink, run);  // (on an error, ~ProgressDisplay clears)
  if (run.progress) display.last(stats);
  display.clear();
  report(r, all_processes(ranks, stats), run, tagger, outputs.skipped, started, load_seconds, quiet || !lead(ranks));
  if (!stats.failures.empty()) {
    std::cerr << "crfx tag: " << grouped(stats.failures.size()) << " of " << plural(stats.inputs, "input", "inputs")
              << " failed (no output written for them):\n";
    for (const TagFailure& f : stats.failures) std::cerr << "  " << f.message << "\n";
    return 1;
  }
  return 0;
}

}  // namespace crfx::cli
