// crfx — from sentences to a Corpus: feature extraction with frozen dictionaries.
//
//   ConllSentence    + FeatureTemplate → attribute strings ("U02:Confidence") → ids
//   CrfsuiteSentence                    → attribute names                     → ids
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: read_text,
//  TextReader, compile_training, choose_layout, FeatureSet, compile, FeatureSpace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/corpus.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/template.hpp"

namespace crfx {

enum class InputFormat { conll, crfsuite };

/// What a model is (crfx train --type): a linear-chain CRF, or a Maxent classifier that labels
/// every token on its own from the same attributes — no label transitions and no edge features
/// (a template's B lines are not expanded), so Dims::transitions is false and E = 0, and
/// Viterbi decoding is the arg-max per token.
enum class ModelType { crf, maxent };
/// "crf", "maxent"; parse_model_type throws Error naming the known types.
const char* name_of(ModelType type);
ModelType parse_model_type(const std::string& name);

/// Everything that maps text to ids: kept in the model file.
struct FeatureSpace {
  ModelType type = ModelType::crf;
  InputFormat format = InputFormat::conll;
  FeatureTemplate templ;            // conll only
  std::size_t feature_columns = 0;  // conll only: columns of a token without its label
  Dictionary labels;
  Dictionary state_attrs;
  Dictionary edge_attrs;  // conll only (B templates with macros; none in a Maxent model)
  /// The weights' layout: null for every attribute × label pair (`--features all`), else the
  /// pairs observed in training (use_observed_pairs).
  std::shared_ptr<const WeightLayout> layout;

  Dims dims() const;
  /// The dictionaries' heap bytes (Dictionary::bytes of labels and attributes).
  std::size_t dictionary_bytes() const;
};

/// Sentences as read from one file, in either format (one of conll, crfsuite and crfsuite_lines
/// is used).
struct TextData {
  InputFormat format = InputFormat::conll;
  std::string path;
  std::vector<ConllSentence> conll;
  std::vector<CrfsuiteSentence> crfsuite;
  /// crfsuite data as its lines' text (TextReader::keep_lines: tagging), for compile, gold_labels
  /// and the Tagger; compile_training takes `crfsuite`.
  CrfsuiteLines crfsuite_lines;
  std::size_t feature_columns = 0;  // conll: fs.feature_columns when read (0: last column = label)
  /// crfsuite data read from a file: whether its first lines look like CoNLL columns
  /// (CrfsuiteReader::conll_shape). compile_training refuses such data; compile refuses it when
  /// most of its attributes are unknown to the model. Empty for data made in memory.
  ConllShape conll_shape;
  std::size_t num_sentences() const;
};

/// Reads `path` in `fs.format`. For CoNLL data whose feature columns are already fixed
/// (fs.feature_columns > 0) a token must have that many columns, or one more (a gold label).
TextData read_text(const FeatureSpace& fs, const std::string& path);

/// Reads `path` like read_text, a batch of whole sentences at a time, so that data larger than
/// memory can be tagged: each batch holds sentences until it reaches `max_tokens` tokens (at
/// least one sentence). The concatenated batches are read_text's result.
class TextReader {
 public:
  TextReader(const FeatureSpace& fs, const std::string& path);
  /// Training data: CoNLL columns not fixed by a model (the first token sets them).
  TextReader(InputFormat format, const std::string& path);
  /// The next batch into `batch` (replacing it); false when the input is exhausted.
  bool next(TextData& batch, std::size_t max_tokens);
  /// Appends whole sentences to `batch` (of the same format) until `max_tokens` tokens were
  /// appended or `max_bytes` bytes of the file read (at least one sentence); returns how many
  /// tokens. exhausted() says whether the input has ended.
  std::size_t append(TextData& batch, std::size_t max_tokens, std::uint64_t max_bytes = ~std::uint64_t(0));
  /// The input has no more sentences (append found its end).
  bool exhausted() const { return exhausted_; }
  /// Bytes taken from the file so far (LineReader::bytes_read).
  std::uint64_t bytes_read() const;
  /// CRFsuite data: append() puts the sequences in batch.crfsuite_lines (their lines' text,
  /// checked as they are read) instead of batch.crfsuite (a string per attribute: several times
  /// the text).
  void keep_lines(bool keep = true) { lines_ = keep; }

 private:
  InputFormat format_;
  std::size_t feature_columns_;
  std::string path_;
  std::unique_ptr<ConllReader> conll_;
  std::unique_ptr<CrfsuiteReader> crfsuite_;
  bool exhausted_ = false;
  bool lines_ = false;
  TextReader(InputFormat format, std::size_t feature_columns, const std::string& path);
};

/// Compiles training data: adds labels and attributes to the (unfrozen) dictionaries, drops
/// attributes seen fewer than `min_freq` times (CRF++ -f), then freezes all dictionaries.
/// CoNLL: the last column is the label, the others are feature columns; fs.feature_columns is
/// set from the data. Every token must carry a non-empty label. CRFsuite data that looks like
/// CoNLL columns (data.conll_shape) is refused (InputError naming --format conll).
Corpus compile_training(FeatureSpace& fs, const TextData& data, std::size_t min_freq);

/// The text a streamed compile holds at a time (compile_training over files): a batch of whole
/// sentences from about this many bytes of a file.
constexpr std::uint64_t kCompileBatchBytes = std::uint64_t(4) << 20;

/// compile_training over training files read one after the other, as one (CRFsuite's learn takes
/// several), a batch of about `batch_bytes` of text at a time: the corpus and dictionaries of
/// their whole text, with one batch's strings in memory (a token's strings take several times its
/// compiled items). CoNLL files must agree on their column count (InputError naming the file
/// that differs).
/// What a streamed compile has built after a batch (compile_training over files): for a check of
/// the memory the run will need at least, as the reading goes.
struct CompileProgress {
  std::string path;             // the file being read
  std::size_t line = 0;         // the line of the batch's last sentence
  std::size_t sentences = 0;    // so far, every file
  std::size_t corpus_bytes = 0; // the compiled corpus's arrays (their capacity)
  std::size_t strings_bytes = 0;  // the dictionaries' strings and index, estimated
  /// What the next batch's new strings may allocate at once (the dictionaries' next growth,
  /// Dictionary::growth_bytes, for a batch's worth of strings of the template: an upper bound).
  std::size_t growth_bytes = 0;
};
/// With `reserve_limit` > 0, the arrays are reserved after the first batch for the whole text
/// (projected from the files' bytes) where that projection's bytes stay within it: a reading the
/// memory cannot hold is refused by after_batch as before, never after reserving past its limit.
/// The files are read and compiled on `threads` threads (0: every core), a batch split into one
/// chunk of whole sentences per thread; the result is the same whatever the count.
Corpus compile_training(FeatureSpace& fs, const std::vector<std::string>& paths, std::size_t min_freq,
                        std::uint64_t batch_bytes = kCompileBatchBytes,
                        const std::function<void(const CompileProgress&)>& after_batch = {},
                        double reserve_limit = 0, unsigned threads = 1);

/// compile_training in parts: add() each batch of the training text in order, then finish() —
/// the same corpus and dictionaries as compile_training over the whole text at once (ids in
/// order of first occurrence, min_freq applied at the end).
class TrainingCompiler {
 public:
  explicit TrainingCompiler(FeatureSpace& fs);
  void add(const TextData& batch);
  /// Reads and adds CoNLL file `path` on `threads` threads (0: every core), a batch of about
  /// `batch_bytes` of text at a time, each cut into one chunk of whole sentences per thread and
  /// compiled against the dictionaries as they were before the batch; the chunks' new strings
  /// are then added in the chunks' order, so ids are those of add() over the whole text.
  /// Calls after_batch(bytes read from the file, the first line of the batch's last sentence)
  /// after each batch; returns the bytes read from the file.
  std::uint64_t add_file(const std::string& path, unsigned threads, std::uint64_t batch_bytes,
                         const std::function<void(std::uint64_t, std::size_t)>& after_batch);
  /// The same for CRFsuite file `path`: each chunk's lines parsed and their labels and attributes
  /// looked up or added on its thread, the new ones then added in the chunks' order (the ids of
  /// add() over the whole text). Errors come as add() gives them, the first bad line's; those in
  /// the file's first CrfsuiteShape::kLines non-blank lines come before the refusal of lines that
  /// look like CoNLL columns, the others after it.
  std::uint64_t add_crfsuite_file(const std::string& path, unsigned threads, std::uint64_t batch_bytes,
                                  const std::function<void(std::uint64_t, std::size_t)>& after_batch);
  /// The text a batch of add_file or add_crfsuite_file holds at most, for `batch_bytes` a thread.
  static std::uint64_t batch_text(std::uint64_t batch_bytes, unsigned threads);
  Corpus finish(std::size_t min_freq);
  /// Whether add_file and add_crfsuite_file count the attributes' occurrences (finish's
  /// min_freq > 1 needs them).
  void count_occurrences(bool count) { counting_ = count; }
  /// The corpus so far and the dictionaries' estimated bytes (CompileProgress).
  std::size_t corpus_bytes() const;
  std::size_t strings_bytes() const;
  std::size_t sentences() const { return c_.num_sentences(); }
  /// Makes room in every array for `scale` times what it holds (the text still to come,
  /// projected from what was read so far), so that each is allocated about once instead of
  /// doubling over the batches and being copied to its size at finish (which held the old and
  /// the new array at once: the reading's peak).
  void reserve_for(double scale);

 private:
  FeatureSpace& fs_;
  Corpus c_;
  std::vector<std::uint32_t> state_count_, edge_count_;  // [A], [E] occurrences (for min_freq)
  /// CoNLL: the first token of a file has `columns` columns (the first of the training data
  /// fixes them, and the template is checked against them); InputError when they disagree.
  void check_columns(const std::string& path, std::size_t columns, std::size_t line);
  std::size_t columns_ = 0;  // CoNLL: the first token's column count
  std::string first_path_;
  std::size_t first_line_ = 0;
  bool finished_ = false;
  bool counting_ = true;
};

/// Which weights a model has: every (attribute, label) pair and label bigram, as CRF++ and Wapiti
/// build them (`all`), or only those seen in the training data, as CRFsuite does by default
/// (feature.possible_states = 0, feature.possible_transitions = 0); the two parts can be chosen
/// apart, as in CRFsuite.
struct FeatureSet {
  bool all_states = false;       // every attribute × label pair
  bool all_transitions = false;  // every label bigram (transitions, and per edge attribute)
  bool all() const { return all_states && all_transitions; }
};

/// Gives `fs` the layout `set` asks for over its training corpus: none (dense) for all pairs,
/// else observed_layout (corpus.hpp).
void choose_layout(FeatureSpace& fs, const Corpus& training, FeatureSet set, unsigned threads = 1);

/// Fingerprints (64-bit FNV-1a) for checkpoints: a training run resumes only on the corpus and
/// features it was checkpointed with. Of a compiled corpus: every array (items, values, labels,
/// offsets); of a feature space: the format, the template's text, the dictionaries and the layout.
std::uint64_t fingerprint(const Corpus& corpus);
std::uint64_t fingerprint(const FeatureSpace& fs);
/// Of a text (a template's).
std::uint64_t fingerprint(const std::string& text);

/// Compiles data with the frozen dictionaries (dev, test, tagging). Unknown attributes are
/// skipped; unknown or absent labels become Corpus::kNoLabel. Refuses (InputError) data that is
/// evidently not what the model reads — the rules are in host/features/compile.cpp:
///   - CoNLL: a feature column whose values are mostly ones the model never saw there, from a
///     small set (a tag set: chunk tags where POS tags were trained, a column missing or moved);
///   - CRFsuite: lines that look like CoNLL columns (data.conll_shape) with most attributes
///     unknown to the model.
Corpus compile(const FeatureSpace& fs, const TextData& data);

/// Template expansion's caches kept from one compile() to the next of the same feature space (a
/// tagging worker's, batch after batch): a column value or a template line's key met in an earlier
/// batch is neither built nor looked up again. They are emptied when they pass `max_bytes`, so
/// that a worker's memory stays bounded whatever the text, and when another feature space (by
/// address) compiles with them; the feature space's dictionaries must not change meanwhile (they
/// are frozen once trained).
class CompileCaches {
 public:
  explicit CompileCaches(std::size_t max_bytes = std::size_t(32) << 20);
  ~CompileCaches();
  CompileCaches(const CompileCaches&) = delete;
  CompileCaches& operator=(const CompileCaches&) = delete;
  std::size_t bytes() const;
  struct Kept;  // (host/features/compile.cpp)
  Kept& kept() { return *kept_; }

 private:
  std::unique_ptr<Kept> kept_;
};
/// compile(fs, data) with `caches` kept from the call before (CoNLL data; CRFsuite data has no
/// template to expand and compiles as without). The same corpus as without.
Corpus compile(const FeatureSpace& fs, const TextData& data, CompileCaches& caches);

/// The gold label string of every token in sentence order (empty when the data has none).
std::vector<std::string> gold_labels(const TextData& data);

}  // namespace crfx
