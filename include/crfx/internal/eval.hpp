// crfx — evaluation: token accuracy and conlleval-identical chunk precision / recall / F1 for
// chunk tag sets; item accuracy, sentence accuracy and per-label precision / recall / F1 (as
// CRFsuite's `tag -qt`) for any other tag set (POS, morphology, classification-style labels).
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: evaluate,
//  evaluate_labels_file, Evaluation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace crfx {

/// Counts as conlleval keeps them, of chunks (ChunkEvaluator) or of one label's tokens
/// (ItemEvaluator, as LabelCounts).
struct ChunkCounts {
  std::size_t correct = 0;  // in both gold and guess (chunks: same span and type)
  std::size_t gold = 0;     // in the gold labels (conlleval's "phrases"; a label's support)
  std::size_t guessed = 0;  // in the guessed labels ("found")
  double precision() const;  // percent, 0 when nothing guessed
  double recall() const;     // percent
  double f1() const;         // percent (FB1)
};

/// Which report: chosen from the labels (automatic), or forced.
enum class EvalMode { automatic, chunk, item };

struct EvalOptions {
  bool raw = false;             // conlleval -r: labels carry no B-/I- prefixes
  std::string outside = "O";    // conlleval -o
  EvalMode mode = EvalMode::automatic;
};

/// True when every label is a chunk tag: the outside label, or B, I, E or S alone or followed by
/// "-TYPE" (IOB1, IOB2, IOE, IOBES; untyped B/I/O too). An empty set counts as chunk tags.
bool chunk_tag_set(const std::set<std::string>& labels, const std::string& outside = "O");
/// The first label that is not a chunk tag ("" when all are): what the item report names.
std::string first_non_chunk_label(const std::set<std::string>& labels, const std::string& outside = "O");

/// Accumulates sentences and reports like conlleval (version 2004-01-26 rules), which covers
/// IOB1, IOB2 and IOE schemes; IOBES "S-" and "E-" tags are handled by the same start/end rules
/// extended with S (a single-token chunk), as the common conlleval ports do.
class ChunkEvaluator {
 public:
  explicit ChunkEvaluator(EvalOptions options = {});
  /// One sentence of gold and guessed labels (same length, else Error).
  void add(const std::vector<std::string>& gold, const std::vector<std::string>& guess);
  /// The last sentence of an input that ends right after it, with no boundary (conlleval then
  /// closes the open chunk without the boundary step); nothing may be added after it.
  void add_last(const std::vector<std::string>& gold, const std::vector<std::string>& guess);

  std::size_t tokens() const { return tokens_; }
  std::size_t correct_tokens() const { return correct_tokens_; }
  double accuracy() const;  // percent
  const ChunkCounts& overall() const { return overall_; }
  const std::map<std::string, ChunkCounts>& by_type() const { return by_type_; }
  /// The report text, formatted exactly as conlleval prints it.
  std::string report() const;
  /// Adds the counts of another input's evaluation (a total over several files).
  void merge(const ChunkEvaluator& other);

 private:
  /// One sentence through conlleval's stream, followed by a boundary or not.
  void add_sentence(const std::vector<std::string>& gold, const std::vector<std::string>& guess, bool boundary);

  EvalOptions options_;
  std::size_t tokens_ = 0, correct_tokens_ = 0;
  ChunkCounts overall_;
  std::map<std::string, ChunkCounts> by_type_;
  bool in_correct_ = false;  // conlleval's $inCorrect, still set after a sentence (odd tags only)
};

/// Per-label counts: the label's tokens in gold (support), in the guess, and in both.
using LabelCounts = ChunkCounts;

/// Item (token) evaluation for any tag set: accuracy over tokens and whole sentences, per-label
/// precision / recall / F1 with their macro average (the mean over every label in gold or
/// guess) and micro average (over tokens: one label per token, so the accuracy), and the
/// confusion counts.
class ItemEvaluator {
 public:
  /// One sentence of gold and guessed labels (same length, else Error).
  void add(const std::vector<std::string>& gold, const std::vector<std::string>& guess);

  std::size_t tokens() const { return tokens_; }
  std::size_t correct_tokens() const { return correct_tokens_; }
  std::size_t sentences() const { return sentences_; }
  std::size_t correct_sentences() const { return correct_sentences_; }
  double accuracy() const;           // percent of tokens
  double sentence_accuracy() const;  // percent of sentences with every label right
  const std::map<std::string, LabelCounts>& by_label() const { return by_label_; }
  /// Macro averages (percent) over the labels of by_label().
  double macro_precision() const;
  double macro_recall() const;
  double macro_f1() const;
  /// (gold, guess) → tokens, for gold ≠ guess.
  const std::map<std::pair<std::string, std::string>, std::size_t>& confusions() const { return confusions_; }
  /// The report: counts, accuracies and the per-label table.
  std::string report() const;
  /// The confusion matrix (rows gold, columns guess) of the `max_labels` labels with the most
  /// errors (as gold or guess; ties by name), or a line saying there is no error.
  std::string confusion_report(std::size_t max_labels = 10) const;
  /// Adds the counts of another input's evaluation (a total over several files).
  void merge(const ItemEvaluator& other);

 private:
  std::size_t tokens_ = 0, correct_tokens_ = 0, sentences_ = 0, correct_sentences_ = 0;
  std::map<std::string, LabelCounts> by_label_;
  double macro(double (LabelCounts::*figure)() const) const;  // the mean over by_label_
  std::map<std::pair<std::string, std::string>, std::size_t> confusions_;
};

/// Both evaluations of one labelled input and the report its labels call for.
struct Evaluation {
  ChunkEvaluator chunk;
  ItemEvaluator item;
  std::set<std::string> labels;  // every gold and guessed label
  EvalMode mode = EvalMode::chunk;  // resolved: chunk or item
  /// The chunk report (conlleval's, byte for byte) or the item report; confusion: + the matrix.
  std::string report(bool confusion = false) const;
  /// The one figure a training log shows: chunk F1 or item accuracy (percent), and its name.
  double headline() const;
  const char* headline_name() const;  // "F1" or "accuracy"
  /// Adds another input's counts and labels, and resolves the mode again over all of them.
  void merge(const Evaluation& other, const EvalOptions& options);
};

/// Evaluation::headline of many guesses against one set of gold labels, the guesses given as label
/// ids (a training log's dev figure, every iteration): each label split once, no string made per
/// token; the figure evaluate() gives on the labels' strings, with default options.
class LabelIdScorer {
 public:
  /// `labels`: the string of each id a guess uses; `gold`: every token's gold label; `offsets`:
  /// where each sentence starts in `gold`, then gold.size(); `mode`: chunk or item.
  LabelIdScorer(const std::vector<std::string>& labels, const std::vector<std::string>& gold,
                std::vector<std::size_t> offsets, EvalMode mode);
  ~LabelIdScorer();
  LabelIdScorer(LabelIdScorer&&) noexcept;
  /// The figure of `guess`, a label id (< labels.size()) for each gold token (one call at a time).
  double headline(const std::uint32_t* guess) const;

 private:
  struct Tags;                  // each id's tag and type, their relations (conlleval.cpp)
  std::unique_ptr<Tags> tags_;  // labels' ids first, then gold labels the guesses never use
  std::vector<std::uint32_t> gold_;
  std::vector<std::size_t> offsets_;
  EvalMode mode_;
};

/// The mode `options` asks for, resolved over `labels` (automatic: chunk when chunk_tag_set).
EvalMode resolve_mode(const EvalOptions& options, const std::set<std::string>& labels);

/// Evaluates sentences of gold and guessed labels (same shapes, else Error).
Evaluation evaluate(const std::vector<std::vector<std::string>>& gold,
                    const std::vector<std::vector<std::string>>& guess, EvalOptions options = {});

/// Evaluates a conlleval input file: tokens one per line, the last two columns are gold and
/// guessed labels, blank lines between sentences, "-DOCSTART-" lines as boundaries.
/// Throws InputError naming the file and line for malformed lines, and for a file without tokens.
Evaluation evaluate_labels_file(const std::string& path, EvalOptions options = {});
/// The same, the chunk evaluation alone.
ChunkEvaluator evaluate_file(const std::string& path, EvalOptions options = {});

}  // namespace crfx
