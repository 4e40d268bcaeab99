// crfx — evaluation: token accuracy and conlleval-identical chunk precision / recall / F1.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace crfx {

/// Counts as conlleval keeps them.
struct ChunkCounts {
  std::size_t correct = 0;  // chunks in both gold and guess (same span and type)
  std::size_t gold = 0;     // chunks in the gold labels ("phrases")
  std::size_t guessed = 0;  // chunks in the guessed labels ("found")
  double precision() const;  // percent, 0 when nothing guessed
  double recall() const;     // percent
  double f1() const;         // percent (FB1)
};

struct EvalOptions {
  bool raw = false;             // conlleval -r: labels carry no B-/I- prefixes
  std::string outside = "O";    // conlleval -o
};

/// Accumulates sentences and reports like conlleval (version 2004-01-26 rules), which covers
/// IOB1, IOB2 and IOE schemes; IOBES "S-" and "E-" tags are handled by the same start/end rules
/// extended with S (a single-token chunk), as the common conlleval ports do.
class ChunkEvaluator {
 public:
  explicit ChunkEvaluator(EvalOptions options = {});
  /// One sentence of gold and guessed labels (same length, else Error).
  void add(const std::vector<std::string>& gold, const std::vector<std::string>& guess);

  std::size_t tokens() const { return tokens_; }
  std::size_t correct_tokens() const { return correct_tokens_; }
  double accuracy() const;  // percent
  const ChunkCounts& overall() const { return overall_; }
  const std::map<std::string, ChunkCounts>& by_type() const { return by_type_; }
  /// The report text, formatted exactly as conlleval prints it.
  std::string report() const;

 private:
  EvalOptions options_;
  std::size_t tokens_ = 0, correct_tokens_ = 0;
  ChunkCounts overall_;
  std::map<std::string, ChunkCounts> by_type_;
  bool in_correct_ = false;  // conlleval's $inCorrect, still set after a sentence (odd tags only)
  friend ChunkEvaluator evaluate_file(const std::string& path, EvalOptions options);
};

/// Evaluates a conlleval input file: tokens one per line, the last two columns are gold and
/// guessed labels, blank lines between sentences, "-DOCSTART-" lines as boundaries.
/// Throws InputError naming the file and line for malformed lines, and for a file without tokens.
ChunkEvaluator evaluate_file(const std::string& path, EvalOptions options = {});

}  // namespace crfx
