// crfx — CRF++ feature templates.
//
// Semantics follow CRF++ 0.59 exactly:
//   - one template per line; blank lines and lines starting with '#' are ignored;
//   - a line starting with 'U' is a unigram (state) template, 'B' a bigram (edge) template;
//     any other first character is an error;
//   - `%x[row,col]` is replaced by column `col` of the token `row` positions away from the
//     current one; rows before the sentence give "_B-1", "_B-2", …, rows after it "_B+1", …;
//   - the whole expanded line (its "U00:" prefix included) is the attribute string;
//   - a 'B' line without macros is the plain label-transition feature; a 'B' line with macros
//     gives enriched edge features (attribute × label pair), defined from the second token on.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "crfx/internal/io.hpp"

namespace crfx {

class FeatureTemplate {
 public:
  /// One piece of a template line: literal text, or a %x[row,col] macro.
  struct Piece {
    std::string text;  // literal text (when !is_macro)
    bool is_macro = false;
    int row = 0;
    int col = 0;
  };
  struct Line {
    std::vector<Piece> pieces;
    std::size_t source_line = 0;
    bool has_macro() const;
  };

  FeatureTemplate() = default;
  /// Parses template text; `name` is used in error messages ("name:line: problem").
  static FeatureTemplate parse(const std::string& text, const std::string& name);
  static FeatureTemplate load(const std::string& path);

  const std::vector<Line>& unigrams() const { return unigrams_; }
  /// Bigram lines that carry macros (enriched edge features).
  const std::vector<Line>& edge_bigrams() const { return edge_bigrams_; }
  /// True when some 'B' line has no macro (label transitions are modelled).
  bool has_transitions() const { return has_transitions_; }
  /// Largest column index used by any macro, or -1 when none.
  int max_column() const { return max_column_; }
  /// The text the template was parsed from (stored in model files).
  const std::string& source() const { return source_; }
  /// The name it was parsed under (its file's path), for messages.
  const std::string& name() const { return name_; }

  /// Expands `line` at token `pos` of `sentence`, writing the attribute string to `out`.
  /// Only the first `feature_columns` columns of a token may be referenced (the label column is
  /// not a feature); a macro column at or beyond it throws InputError naming the token's line.
  static void expand(const Line& line, const ConllSentence& sentence, std::size_t feature_columns,
                     std::size_t pos, std::string& out);
  /// The same for a sentence of T tokens held otherwise, `cell(i, col)` giving column col of its
  /// token i (whose columns the caller has checked): the one definition of an attribute string.
  template <class Cell>
  static void expand(const Line& line, std::size_t T, std::size_t pos, const Cell& cell, std::string& out) {
    out.clear();
    for (const Piece& p : line.pieces) {
      if (!p.is_macro) {
        out += p.text;
        continue;
      }
      const long idx = static_cast<long>(pos) + p.row;
      if (idx < 0) {
        out += "_B-";
        out += std::to_string(-idx);
      } else if (idx >= static_cast<long>(T)) {
        out += "_B+";
        out += std::to_string(idx - static_cast<long>(T) + 1);
      } else {
        out += cell(static_cast<std::size_t>(idx), p.col);
      }
    }
  }

 private:
  std::vector<Line> unigrams_;
  std::vector<Line> edge_bigrams_;
  bool has_transitions_ = false;
  int max_column_ = -1;
  std::string source_;
  std::string name_;
};

}  // namespace crfx
