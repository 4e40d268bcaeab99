// crfx — tagging many inputs in one run: the model loaded once; batches of whole sentences
// gathered across inputs (thousands of short documents make full batches), read and compiled on
// worker threads while the backend decodes one batch at a time, formatted on the workers and
// written in input order, one output per input or all in one stream. `crfx tag` is this.
//
//   crfx::Tagger tagger(crfx::load_model("chunk.model"));
//   std::vector<crfx::InputFile> inputs = crfx::list_inputs({"docs"}, /*recursive=*/true);
//   crfx::DirectoryOutput out(crfx::output_paths(inputs, "tagged", ""));
//   crfx::TagRunOptions options;
//   options.workers = 8;
//   crfx::TagRunStats stats = crfx::tag_inputs(tagger, inputs, out, options);
//
// Memory: at most `workers` batches are in flight (read, compiled, tagged or formatted), each of
// about batch_tokens tokens. The outputs do not depend on the number of workers or the batch
// size: they are byte for byte those of tagging each input alone.
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: tag_inputs,
//  TagRunOptions, ConcatenatedOutput, DirectoryOutput, output_paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/io.hpp"
#include "crfx/internal/output.hpp"
#include "crfx/tagger.hpp"

namespace crfx {

/// Where a run's outputs go. Inputs are begun, written and ended (or failed) strictly in input
/// order, one at a time, from one thread at a time.
class TagSink {
 public:
  virtual ~TagSink() = default;
  virtual void begin(std::size_t input) = 0;
  virtual void write(std::size_t input, const char* data, std::size_t n) = 0;
  /// The input was tagged whole.
  virtual void end(std::size_t input) = 0;
  /// The input failed part-way: what was written of it must not stay (see drops_failed()).
  virtual void fail(std::size_t input) = 0;
  /// After the last input, when the run succeeded.
  virtual void finish() {}
  /// Whether fail() takes an input's output back; a run that goes on past failed inputs
  /// (keep_going) needs a sink that can.
  virtual bool drops_failed() const = 0;
};

/// Every input's output one after another: standard output ("-"), or a file written atomically
/// (a temporary renamed into place by finish(); a failed run leaves an existing file as it was).
class ConcatenatedOutput : public TagSink {
 public:
  explicit ConcatenatedOutput(const std::string& path);
  ~ConcatenatedOutput() override;
  void begin(std::size_t) override {}
  void write(std::size_t input, const char* data, std::size_t n) override;
  void end(std::size_t) override {}
  void fail(std::size_t) override {}
  void finish() override;
  bool drops_failed() const override { return false; }

 private:
  void flush();
  static constexpr std::size_t kPending = std::size_t(1) << 20;
  std::unique_ptr<AtomicFile> file_;  // null: standard output (buffered by stdio)
  std::string pending_;               // written to file_ at kPending bytes and at the end
};

/// One output file per input, paths[input], each written atomically; directories are made as
/// needed. A failed input's temporary is removed and an existing output left as it was. The
/// outputs are made durable in groups (AtomicFileGroup): a run stopped by a signal or an error
/// other than an input's keeps the outputs of the groups synced before it.
class DirectoryOutput : public TagSink {
 public:
  explicit DirectoryOutput(std::vector<std::string> paths);
  ~DirectoryOutput() override;
  void begin(std::size_t input) override;
  void write(std::size_t input, const char* data, std::size_t n) override;
  void end(std::size_t input) override;
  void fail(std::size_t input) override;
  void finish() override;
  bool drops_failed() const override { return true; }

 private:
  std::vector<std::string> paths_;
  AtomicFileGroup files_;
  std::string made_dir_;  // the last directory made (consecutive inputs mostly share one)
};

/// The output path of each input under `dir`: dir/NAME + suffix, NAME the input's name without
/// a ".gz" ending (the output is plain text). Throws Error for standard input, and naming both
/// inputs when two would write the same output.
std::vector<std::string> output_paths(const std::vector<InputFile>& inputs, const std::string& dir,
                                      const std::string& suffix);

/// Where a run stands, after each batch written.
struct TagProgress {
  std::size_t inputs = 0;       // of the run
  std::size_t inputs_done = 0;  // written whole (or failed)
  std::size_t sentences = 0, tokens = 0;  // written
  std::uint64_t bytes = 0;       // the inputs' sizes added up (0 where unknown: streams)
  std::uint64_t bytes_read = 0;  // taken from them so far
  double seconds = 0;            // since the run began
};

/// An input that failed (keep_going), with the error's message (file, line and problem).
struct TagFailure {
  std::size_t input = 0;
  std::string message;
};

/// Where a run's time went: each stage's seconds added up over the workers that ran it (read and
/// decode are one at a time, compile and format in parallel, write in batch order; CoNLL text is
/// read as lines and split into columns in compile), and the seconds workers waited for their
/// turn. With several workers the stages overlap, so they add up to more than the run's wall time.
struct TagStageSeconds {
  double read = 0, compile = 0, decode = 0, format = 0, write = 0, wait = 0;
};

struct TagRunStats : TagProgress {
  std::vector<TagFailure> failures;
  TagStageSeconds stages;
};

struct TagRunOptions {
  /// Tokens of whole sentences per batch (the last sentence may overshoot); ≥ 1.
  std::size_t batch_tokens = std::size_t(1) << 18;
  /// … and at most about this many bytes of input (a CRFsuite attribute file holds ~300 bytes a
  /// token: its batches are bounded by their text, so memory does not grow with the input).
  std::uint64_t batch_bytes = std::uint64_t(4) << 20;
  /// Threads that read, compile and format (the caller's own thread is one of them); ≥ 1.
  /// Reading is one at a time, and so is decoding, on the tagger's backend with its own threads.
  unsigned workers = 1;
  /// A failed input (unreadable, malformed) is recorded in TagRunStats::failures, its output
  /// dropped, and the run goes on; else the run stops there, the inputs before it written, and
  /// tag_inputs throws its error. Needs a sink that drops_failed().
  bool keep_going = false;
  /// Called after each batch is written (on the writing thread; keep it short).
  std::function<void(const TagProgress&)> progress;
};

/// Tags `inputs` in order into `sink` (which is finished when the run succeeds). Throws the
/// first input's error (InputError) unless keep_going, and any other error at once; the outputs
/// of the inputs written before it are complete.
TagRunStats tag_inputs(Tagger& tagger, const std::vector<InputFile>& inputs, TagSink& sink,
                       const TagRunOptions& options);

}  // namespace crfx
