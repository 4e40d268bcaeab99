// crfx — tagging many inputs in one run (include/crfx/internal/tag_run.hpp).
//
// Every worker runs the same loop on a batch of its own:
//   read      (one worker at a time)   whole sentences from the inputs in order, up to
//                                      batch_tokens, noting which input each run of sentences
//                                      came from (a "piece"), as their lines' text: the lines
//                                      are only told apart, token or not (ConllScanner,
//                                      CrfsuiteScanner)
//   compile   (in parallel)            CoNLL lines split into columns (parse_conll_lines, with
//                                      the reader's errors; a worker's first batch one at a time,
//                                      see work), CRFsuite lines checked (check_crfsuite_lines),
//                                      then template expansion (the worker's caches kept from
//                                      batch to batch: CompileCaches) or the attributes looked
//                                      up against the model's dictionaries
//   decode    (one worker at a time)   Tagger::tag on the backend (which has its own threads)
//   format    (in parallel)            the text of every sentence, and where each one ends
//   write     (in batch order)         each piece's text to its input's output
// Each worker times its stages and its waits for a turn (TagRunStats::stages, crfx tag --timing).
// A batch is numbered when it is read and written when every batch before it was, so the
// output is the same whatever the number of workers. A worker holds one batch from reading to
// writing: at most `workers` batches are in memory.
#include "crfx/internal/tag_run.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "io/text_chunks.hpp"

namespace crfx {

// ---- sinks -------------------------------------------------------------------------------------

ConcatenatedOutput::ConcatenatedOutput(const std::string& path) {
  if (path != "-") file_ = std::make_unique<AtomicFile>(path);
}

ConcatenatedOutput::~ConcatenatedOutput() = default;

void ConcatenatedOutput::write(std::size_t, const char* data, std::size_t n) {
  if (!file_) {
    if (std::fwrite(data, 1, n, stdout) != n)
      throw Error(std::string("cannot write to standard output: ") + std::strerror(errno));
    return;
  }
  // Thousands of short inputs are thousands of small pieces: gathered into one write(2).
  pending_.append(data, n);
  if (pending_.size() >= kPending) flush();
}

void ConcatenatedOutput::flush() {
  file_->write(pending_.data(), pending_.size());
  pending_.clear();
}

void ConcatenatedOutput::finish() {
  if (file_) {
    flush();
    file_->commit();
  } else if (std::fflush(stdout) != 0) {
    throw Error(std::string("cannot write to standard output: ") + std::strerror(errno));
  }
}

DirectoryOutput::DirectoryOutput(std::vector<std::string> paths) : paths_(std::move(paths)) {}

DirectoryOutput::~DirectoryOutput() = default;

void DirectoryOutput::begin(std::size_t input) {
  const std::string dir = std::filesystem::path(paths_.at(input)).parent_path().string();
  if (dir != made_dir_) {  // mkdir -p, once per directory of consecutive inputs
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(dir + ": cannot make the output directory: " + ec.message());
    made_dir_ = dir;
  }
  files_.begin(paths_[input]);
}

void DirectoryOutput::write(std::size_t, const char* data, std::size_t n) { files_.write(data, n); }

void DirectoryOutput::end(std::size_t) { files_.end(); }

void DirectoryOutput::fail(std::size_t) {
  files_.drop();   // the temporary removed, any old file kept
  files_.flush();  // the inputs before it are in place, whether the run stops or goes on
}

void DirectoryOutput::finish() { files_.flush(); }

std::vector<std::string> output_paths(const std::vector<InputFile>& inputs, const std::string& dir,
                                      const std::string& suffix) {
  if (dir.empty()) throw Error("the output directory: an empty name");
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<std::string> out;
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].path == "-")
      throw Error("standard input ('-') has no name to write its output under " + dir);
    std::string name = inputs[i].name;
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
    out.push_back((base == "/" ? "" : base) + "/" + name + suffix);
    const auto [it, fresh] = seen.emplace(out.back(), i);
    if (!fresh)
      throw Error(inputs[it->second].path + " and " + inputs[i].path + " would both be written to " + out.back() +
                  " (give them different names, or tag them in two runs)");
  }
  return out;
}

// ---- the run -----------------------------------------------------------------------------------

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A run of consecutive sentences of one input in a batch.
struct Piece {
  std::size_t input = 0;
  std::size_t first = 0, end = 0;  // sentences [first, end) of the batch
  std::size_t tokens = 0;          // theirs
  bool begins = false, ends = false;
  std::exception_ptr error;        // the input failed here (ends is set)
  // CoNLL: the piece as text until the batch is parsed (parse): Batch::lines[lines], the input's
  // column rule, and the reading's error after them (the parse may find one before it).
  std::size_t lines = std::size_t(-1);  // (none: the input could not be opened)
  ConllColumns rule;
  std::exception_ptr read_error;
  // CRFsuite: the input's evidence before the piece (the check observes on from it), its verdict
  // after the piece (the batch's conll_shape when the piece is good), and whether the reading's
  // error stopped inside its last sequence (unfinished: dropped).
  CrfsuiteShape shape;
  ConllShape verdict;
  bool partial = false;
};

struct Batch {
  /// A batch whose worker's expansion caches hold at most `cache_bytes`.
  explicit Batch(std::size_t cache_bytes) : caches(cache_bytes) {}
  std::size_t seq = 0;
  TextData text;
  std::vector<Piece> pieces;
  std::size_t tokens = 0;
  std::uint64_t bytes = 0;  // of the inputs, read into this batch
  Tagged tagged;
  std::string out;
  std::vector<std::size_t> ends;  // out's size after each sentence
  std::vector<TextChunk> lines;   // CoNLL: the pieces' text (kept with their room: the next batch's is as large)
  std::size_t lines_used = 0;
  ConllSpares spares;
  CompileCaches caches;  // the worker's template expansion's, kept from batch to batch
  TextChunk& next_lines() {
    if (lines_used == lines.size()) lines.emplace_back();
    TextChunk& c = lines[lines_used++];
    c.text.clear();
    return c;
  }
  void clear(InputFormat format, std::size_t feature_columns) {
    text.format = format;
    text.feature_columns = feature_columns;
    spares.keep(text.conll);  // (their storage for the next parse)
    text.crfsuite.clear();
    text.crfsuite_lines.clear();  // (its text keeps its room: the next batch's is as large)
    pieces.clear();
    lines_used = 0;
    tokens = 0;
    bytes = 0;
  }
};

class Run {
 public:
  Run(Tagger& tagger, const std::vector<InputFile>& inputs, TagSink& sink, const TagRunOptions& options)
      : tagger_(tagger), inputs_(inputs), sink_(sink), options_(options) {
    stats_.inputs = inputs.size();
    for (const InputFile& f : inputs) stats_.bytes += f.bytes;
    start_ = now();
  }

  TagRunStats run() {
    const unsigned workers = std::max(1u, options_.workers);
    std::vector<std::thread> threads;
    try {
      for (unsigned w = 1; w < workers; ++w) threads.emplace_back([this] { work(); });
    } catch (...) {
      stop(std::current_exception(), 0);
    }
    work();
    for (std::thread& t : threads) t.join();
    if (fatal_) std::rethrow_exception(fatal_);
    if (input_error_) std::rethrow_exception(input_error_);
    sink_.finish();
    stats_.seconds = now() - start_;
    return stats_;
  }

 private:
  /// One worker: batches from reading to writing until the inputs are done or the run stops.
  void work() {
    // The caches a worker keeps hold at most 4 batches' bytes of input: memory stays the model plus,
    // per worker, a batch and what it is bounded by.
    Batch b(std::size_t(std::min<std::uint64_t>(options_.batch_bytes, std::uint64_t(1) << 40) * 4));
    TagStageSeconds mine;  // this worker's stage times, added to the run's when it ends
    struct Merge {
      Run& run;
      TagStageSeconds& t;
      ~Merge() {
        std::lock_guard<std::mutex> lock(run.write_mutex_);
        TagStageSeconds& s = run.stats_.stages;
        s.read += t.read, s.compile += t.compile, s.decode += t.decode, s.format += t.format;
        s.write += t.write, s.wait += t.wait;
      }
    } merge{*this, mine};
    double t = now();
    auto lap = [&t](double& into) {
      const double n = now();
      into += n - t;
      t = n;
    };
    for (;;) {
      try {
        // read() and write() call `turn` once they hold their turn: the time before it is waiting.
        if (!read(b, [&] { lap(mine.wait); })) return;
        lap(mine.read);
        if (b.text.format == InputFormat::conll && b.spares.sentences.empty()) {
          // A worker's first CoNLL batch, one at a time: its parse allocates a vector a token, and
          // on the one heap of apps/main.cpp (M_ARENA_MAX 1) such allocations on several threads
          // wait for each other. The batches after it refill its storage (Batch::spares).
          // (CRFsuite lines are only checked: nothing to allocate.)
          std::lock_guard<std::mutex> lock(parse_mutex_);
          lap(mine.wait);
          parse(b);
        } else {
          parse(b);
        }
        lap(mine.compile);
        b.out.clear();
        b.ends.clear();
        // Every sentence read is tagged and formatted, those of an input that failed after them
        // too (their text is dropped with the input; b.tokens does not count them): a batch with
        // no sentence at all only has pieces to begin and end.
        Corpus compiled;
        if (b.text.num_sentences() > 0 && !compile_batch(b, compiled)) return;
        if (b.text.num_sentences() > 0) {
          lap(mine.compile);
          {
            std::lock_guard<std::mutex> lock(decode_mutex_);
            lap(mine.wait);
            if (stopped()) return;
            tagger_.tag(std::move(compiled), b.tagged);
          }
          lap(mine.decode);
          tagger_.format(b.text, b.tagged, b.out, &b.ends);
          lap(mine.format);
        }
        if (!write(b, [&] { lap(mine.wait); })) return;
        lap(mine.write);
      } catch (...) {
        stop(std::current_exception(), b.seq);
        return;
      }
    }
  }

  bool stopped() const { return stopping_.load(); }

  /// The first error by batch number wins (the same one whatever the threads' timing).
  void stop(std::exception_ptr e, std::size_t seq) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (!fatal_ || seq < fatal_seq_) {
      fatal_ = e;
      fatal_seq_ = seq;
    }
    stopping_ = true;
    written_.notify_all();
  }

  /// The next batch into `b` (numbered); false when nothing is left to read or the run stopped.
  /// `turn` is called once the reader is this worker's.
  bool read(Batch& b, const std::function<void()>& turn) {
    std::lock_guard<std::mutex> lock(read_mutex_);
    turn();
    if (stopped() || (next_input_ == inputs_.size() && !open())) return false;
    const FeatureSpace& fs = tagger_.features();
    b.clear(fs.format, fs.format == InputFormat::conll ? fs.feature_columns : 0);
    b.seq = next_seq_++;
    // n copies of every sentence: batches of about batch_tokens / n tokens keep memory as bounded.
    const std::size_t limit = std::max<std::size_t>(1, options_.batch_tokens / tagger_.options().nbest);
    const std::uint64_t byte_limit = std::max<std::uint64_t>(1, options_.batch_bytes / tagger_.options().nbest);
    while (b.tokens < limit && b.bytes < byte_limit && (open() || next_input_ < inputs_.size())) {
      Piece piece;
      if (!open()) {
        piece.input = next_input_++;
        piece.begins = true;
      } else {
        piece.input = next_input_ - 1;
      }
      piece.first = piece.end = b.text.num_sentences();
      if (b.pieces.empty()) b.text.path = inputs_[piece.input].path;
      try {
        const std::size_t got = fs.format == InputFormat::conll ? scan(b, piece, limit, byte_limit)
                                                                : append(b, piece, limit, byte_limit);
        b.tokens += got;
        piece.tokens = got;
        piece.end = b.text.num_sentences();
        if (piece.read_error || (lines_ ? lines_->exhausted() : scanner_->exhausted())) {
          piece.ends = true;
          finish_input(piece.input);
          if (piece.read_error && !options_.keep_going) next_input_ = inputs_.size();
        }
      } catch (const InputError&) {  // (sentences read before the error count in b.tokens only)
        piece.end = b.text.num_sentences();
        piece.ends = true;
        piece.error = std::current_exception();
        finish_input(piece.input);
        if (!options_.keep_going) next_input_ = inputs_.size();  // read nothing more
      }
      b.pieces.push_back(std::move(piece));
    }
    bytes_read_ = bytes_done_ + (lines_ ? lines_->bytes_read() : scanner_ ? scanner_->bytes_read() : 0);
    return true;
  }

  bool open() const { return lines_ || scanner_; }

  /// CRFsuite: whole sequences' lines of piece.input into b.text.crfsuite_lines (parse checks
  /// them on the worker); returns their tokens. A read error after some lines is the piece's
  /// read_error.
  std::size_t append(Batch& b, Piece& piece, std::size_t limit, std::uint64_t byte_limit) {
    const std::string& path = inputs_[piece.input].path;
    if (!lines_) lines_ = std::make_unique<CrfsuiteScanner>(path);
    piece.shape = lines_->shape();
    const std::uint64_t bytes_before = lines_->bytes_read();
    std::size_t got = 0;
    try {
      got = lines_->append(b.text.crfsuite_lines, limit - b.tokens, byte_limit - std::min(byte_limit, b.bytes));
    } catch (const InputError&) {
      piece.read_error = std::current_exception();
      piece.partial = lines_->partial();
    }
    piece.verdict = lines_->shape().verdict(path);
    b.bytes += lines_->bytes_read() - bytes_before;
    return got;
  }

  /// CoNLL: whole sentences' lines of piece.input into b.lines (parse splits them on the worker);
  /// returns their tokens. A read error after some lines is the piece's read_error.
  std::size_t scan(Batch& b, Piece& piece, std::size_t limit, std::uint64_t byte_limit) {
    const FeatureSpace& fs = tagger_.features();
    if (!scanner_)
      scanner_ = std::make_unique<ConllScanner>(inputs_[piece.input].path, fs.feature_columns, fs.feature_columns > 0);
    TextChunk& lines = b.next_lines();
    piece.lines = b.lines_used - 1;
    const std::uint64_t bytes_before = scanner_->bytes_read();
    std::size_t got = 0;
    try {
      got = scanner_->append(lines, limit - b.tokens, byte_limit - std::min(byte_limit, b.bytes));
    } catch (const InputError&) {
      piece.read_error = std::current_exception();
    }
    piece.rule = scanner_->columns();
    b.bytes += scanner_->bytes_read() - bytes_before;
    return got;
  }

  /// The CoNLL pieces' lines into b.text's sentences (on the worker, before compile): their
  /// sentences and tokens; the first error of a piece's lines ends its input there, as reading
  /// them whole would have (its input's pieces after it are not written: write).
  void parse(Batch& b) {
    if (b.text.format != InputFormat::conll) return check(b);
    for (Piece& p : b.pieces) {
      p.first = p.end = b.text.conll.size();
      if (p.lines >= b.lines_used) continue;  // (the input could not be opened: p.error)
      try {
        p.tokens = parse_conll_lines(b.lines[p.lines], inputs_[p.input].path, p.rule, !p.read_error, b.text.conll,
                                     b.spares);
        if (p.read_error) p.error = p.read_error;
      } catch (const InputError&) {
        p.error = std::current_exception();
        p.ends = true;
      }
      p.end = b.text.conll.size();
    }
  }

  /// The CRFsuite pieces' lines checked (on the worker, before compile): the first bad line of a
  /// piece ends its input there, as CrfsuiteReader would have — the sequences before it stay, the
  /// rest of the piece is removed (and, the run ending there, every piece after it) — and an
  /// input's error in reading comes after its lines' errors, its unfinished sequence removed.
  void check(Batch& b) {
    CrfsuiteLines& lines = b.text.crfsuite_lines;
    std::size_t read = b.pieces.size();  // the pieces the reading would have given
    for (std::size_t i = 0; i < read; ++i) {
      Piece& p = b.pieces[i];
      if (p.error) continue;  // (the input could not be opened)
      std::exception_ptr error;
      std::size_t keep = check_crfsuite_lines(lines, p.first, p.end, inputs_[p.input].path, p.shape, error);
      if (!error && p.read_error) {
        error = p.read_error;
        keep = p.end - (p.partial ? 1 : 0);
      }
      if (!error) continue;
      p.error = error;
      p.ends = true;
      p.tokens = lines.first_token(keep) - lines.first_token(p.first);
      if (!options_.keep_going) read = i + 1;  // (the run ends with this input)
      erase(b, keep, options_.keep_going ? p.end : lines.size());
    }
    for (std::size_t i = 0; i < read; ++i)  // as TextReader::append set it: the last good piece's
      if (!b.pieces[i].error) b.text.conll_shape = b.pieces[i].verdict;
  }

  /// Removes sentences [first, end) of b.text, moving the pieces' sentences after them up.
  static void erase(Batch& b, std::size_t first, std::size_t end) {
    if (b.text.format == InputFormat::conll)
      b.text.conll.erase(b.text.conll.begin() + std::ptrdiff_t(first), b.text.conll.begin() + std::ptrdiff_t(end));
    else
      b.text.crfsuite_lines.erase(first, end);
    for (Piece& p : b.pieces) {
      p.first = p.first >= end ? p.first - (end - first) : std::min(p.first, first);
      p.end = p.end >= end ? p.end - (end - first) : std::min(p.end, first);
    }
  }

  /// compile(b.text) into `out`. Its InputError (lines refused as CoNLL columns) may come from an
  /// input read on past an error that an earlier batch's parse found, which the reading would
  /// not have given it: b then waits for its turn to write, when that is known. An earlier
  /// input's error ends the run: false (b is not written). Sentences of the input that failed:
  /// removed, and the rest compiled again. Else the error is b's own.
  bool compile_batch(Batch& b, Corpus& out) {
    try {
      out = compile(tagger_.features(), b.text, b.caches);
      return true;
    } catch (const InputError&) {
      std::unique_lock<std::mutex> lock(write_mutex_);
      written_.wait(lock, [&] { return fatal_ || input_error_ || next_write_ == b.seq; });
      if (fatal_ || input_error_) return false;
      bool dropped = false;
      for (const Piece& p : b.pieces)
        if (p.input == failed_ && p.end > p.first) {
          dropped = true;
          erase(b, p.first, p.end);
        }
      if (!dropped) throw;
      for (const Piece& p : b.pieces)
        if (!p.error && p.input != failed_) b.text.conll_shape = p.verdict;
    }
    if (b.text.num_sentences() > 0) out = compile(tagger_.features(), b.text, b.caches);
    return true;
  }

  void finish_input(std::size_t input) {
    lines_.reset();
    scanner_.reset();
    bytes_done_ += inputs_[input].bytes;
  }

  /// Writes `b` when every batch before it is written; false when the run stopped meanwhile.
  /// `turn` is called once it is b's turn (or the run stopped).
  bool write(Batch& b, const std::function<void()>& turn) {
    std::unique_lock<std::mutex> lock(write_mutex_);
    written_.wait(lock, [&] { return fatal_ || input_error_ || next_write_ == b.seq; });
    turn();
    if (fatal_ || input_error_) return false;  // (an input's error: the batches after it are not written)
    for (const Piece& p : b.pieces) {
      if (p.input == failed_) continue;  // read on before parse found its error: dropped
      if (p.begins) {
        sink_.begin(p.input);
        input_sentences_ = input_tokens_ = 0;
      }
      if (p.end > p.first) {
        const std::size_t from = p.first == 0 ? 0 : b.ends[p.first - 1], to = b.ends[p.end - 1];
        sink_.write(p.input, b.out.data() + from, to - from);
      }
      input_tokens_ += p.tokens;
      stats_.tokens += p.tokens;
      input_sentences_ += p.end - p.first;
      stats_.sentences += p.end - p.first;
      if (p.error) {
        failed_ = p.input;
        stats_.sentences -= input_sentences_;  // a failed input's output is not written: not counted
        stats_.tokens -= input_tokens_;
        sink_.fail(p.input);
        if (options_.keep_going) {
          try {
            std::rethrow_exception(p.error);
          } catch (const std::exception& e) {
            stats_.failures.push_back({p.input, e.what()});
          }
        } else {
          input_error_ = p.error;
          stopping_ = true;
          break;  // nothing after the failed input
        }
      } else if (p.ends) {
        sink_.end(p.input);
      }
      if (p.ends) ++stats_.inputs_done;
    }
    stats_.bytes_read = std::max(stats_.bytes_read, bytes_read_.load());
    stats_.seconds = now() - start_;
    if (options_.progress) options_.progress(stats_);
    ++next_write_;
    written_.notify_all();
    return true;
  }

  Tagger& tagger_;
  const std::vector<InputFile>& inputs_;
  TagSink& sink_;
  const TagRunOptions& options_;
  double start_ = 0;

  std::mutex read_mutex_;  // the reader's state
  std::unique_ptr<CrfsuiteScanner> lines_;  // the input being read (CRFsuite), or null between inputs
  std::unique_ptr<ConllScanner> scanner_;  // the same for CoNLL
  std::size_t next_input_ = 0, next_seq_ = 0;
  std::uint64_t bytes_done_ = 0;
  std::atomic<std::uint64_t> bytes_read_{0};  // bytes_done_ and the open input's, after a batch

  std::mutex parse_mutex_;   // parse (see work)
  std::mutex decode_mutex_;  // the tagger and its backend

  std::mutex write_mutex_;  // the sink, stats_, the errors
  std::condition_variable written_;
  std::size_t next_write_ = 0;
  std::size_t input_sentences_ = 0, input_tokens_ = 0;  // written of the input being written
  std::size_t failed_ = std::size_t(-1);                 // the last input that failed
  TagRunStats stats_;
  std::exception_ptr fatal_, input_error_;
  std::size_t fatal_seq_ = 0;
  std::atomic<bool> stopping_{false};  // fatal_ or input_error_ is set: every stage stops
};

}  // namespace

TagRunStats tag_inputs(Tagger& tagger, const std::vector<InputFile>& inputs, TagSink& sink,
                       const TagRunOptions& options) {
  if (options.batch_tokens == 0) throw Error("tagging: batches of at least 1 token");
  if (options.keep_going && !sink.drops_failed())
    throw Error("going on past a failed input needs one output per input: in one stream, what was "
                "written of the failed input could not be taken back");
  return Run(tagger, inputs, sink, options).run();
}

}  // namespace crfx
