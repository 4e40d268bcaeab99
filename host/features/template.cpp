// CRF++ feature templates: parsing and expansion.
//
// Follows CRF++ 0.59 (feature_index.cpp: openTemplate, getIndex, applyRule):
//   - a line whose first character is 'U' is a unigram template, 'B' a bigram template, '#' or
//     an empty line is skipped, anything else is "unknown type";
//   - '%' must be followed by "x[ROW,COL]": ROW an optionally '-'-signed decimal, COL a decimal,
//     no spaces; any other character after '%' makes the template invalid (CRF++ applyRule
//     returns false, "format error");
//   - the expansion is the whole line with each macro replaced, so the "U01:" prefix keeps
//     attributes of different templates apart;
//   - positions before the sentence read "_B-1", "_B-2", … and after it "_B+1", "_B+2", …
//     (CRF++ has a fixed table of 8 each and rejects |ROW| > 8; here any distance is allowed,
//     named the same way);
//   - COL must be below the number of feature columns, checked at expansion as in CRF++
//     (even when the row falls outside the sentence).
// Differences, all on inputs CRF++ mishandles: a line of only white space is skipped (CRF++ calls
// it an unknown type); a macro needs at least one digit in ROW and in COL (CRF++ reads "%x[,]" as
// %x[0,0] and runs past the end of a line that stops inside a macro); a '+' sign is rejected as
// in CRF++.
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/template.hpp"

namespace crfx {

namespace {

constexpr long kMaxMacroNumber = 1000000;  // bound on |ROW| and COL (keeps int arithmetic safe)

/// Reads a run of decimal digits at text[i…]; false when there is none or it is too large.
bool read_number(const std::string& text, std::size_t& i, long& value) {
  const std::size_t start = i;
  value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    value = value * 10 + (text[i] - '0');
    if (value > kMaxMacroNumber) return false;
    ++i;
  }
  return i > start;
}

/// Parses one template line (already known to start with 'U' or 'B') into pieces.
FeatureTemplate::Line parse_line(const std::string& text, const std::string& name,
                                 std::size_t line_no) {
  FeatureTemplate::Line line;
  line.source_line = line_no;
  std::string literal;
  auto bad = [&](std::size_t at, const std::string& why) {
    throw InputError(name, line_no,
                     "bad macro at column " + std::to_string(at + 1) + " of template '" + text +
                         "': " + why + " (expected %x[ROW,COL], e.g. %x[-1,0])");
  };
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '%') {
      literal.push_back(text[i++]);
      continue;
    }
    const std::size_t at = i;
    if (i + 1 >= text.size() || text[i + 1] != 'x') bad(at, "'%' must be followed by x[");
    i += 2;
    if (i >= text.size() || text[i] != '[') bad(at, "'%x' must be followed by '['");
    ++i;
    bool negative = false;
    if (i < text.size() && text[i] == '-') {
      negative = true;
      ++i;
    }
    long row = 0, col = 0;
    // (read_number stops at the digit that takes a number beyond kMaxMacroNumber)
    auto too_large = [&] { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
    if (!read_number(text, i, row))
      bad(at, too_large() ? "row beyond ±" + std::to_string(kMaxMacroNumber) : std::string("row is not a number"));
    if (i >= text.size() || text[i] != ',') bad(at, "',' expected after the row");
    ++i;
    if (!read_number(text, i, col))
      bad(at, too_large() ? "column beyond " + std::to_string(kMaxMacroNumber)
                          : std::string("column is not a non-negative number"));
    if (i >= text.size() || text[i] != ']') bad(at, "']' expected after the column");
    ++i;
    if (!literal.empty()) {
      FeatureTemplate::Piece lit;
      lit.text = std::move(literal);
      line.pieces.push_back(std::move(lit));
      literal.clear();
    }
    FeatureTemplate::Piece macro;
    macro.is_macro = true;
    macro.row = static_cast<int>(negative ? -row : row);
    macro.col = static_cast<int>(col);
    line.pieces.push_back(macro);
  }
  if (!literal.empty()) {
    FeatureTemplate::Piece lit;
    lit.text = std::move(literal);
    line.pieces.push_back(std::move(lit));
  }
  return line;
}

}  // namespace

bool FeatureTemplate::Line::has_macro() const {
  for (const Piece& p : pieces)
    if (p.is_macro) return true;
  return false;
}

FeatureTemplate FeatureTemplate::parse(const std::string& text, const std::string& name) {
  FeatureTemplate t;
  t.source_ = text;
  t.name_ = name;
  std::size_t line_no = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF template files
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    if (line.find('\0') != std::string::npos)
      throw InputError(name, line_no, "NUL byte in template line");
    if (line[0] != 'U' && line[0] != 'B')
      throw InputError(name, line_no,
                       "unknown template type '" + line +
                           "' (a template line starts with U (unigram) or B (bigram))");
    Line parsed = parse_line(line, name, line_no);
    for (const Piece& p : parsed.pieces)
      if (p.is_macro && p.col > t.max_column_) t.max_column_ = p.col;
    if (line[0] == 'U') {
      t.unigrams_.push_back(std::move(parsed));
    } else if (parsed.has_macro()) {
      t.edge_bigrams_.push_back(std::move(parsed));
    } else {
      t.has_transitions_ = true;  // "B" (or any macro-free B line): plain label transitions
    }
  }
  return t;
}

FeatureTemplate FeatureTemplate::load(const std::string& path) {
  LineReader reader(path);  // plain or .gz, CR stripped, NUL rejected
  std::string text, line;
  while (reader.next(line)) {
    text += line;
    text += '\n';
  }
  return parse(text, path);
}

void FeatureTemplate::expand(const Line& line, const ConllSentence& sentence,
                             std::size_t feature_columns, std::size_t pos, std::string& out) {
  // Throws InputError with an empty file name (only the token's line is known here); the
  // compile functions re-throw it naming the data file.
  const long T = static_cast<long>(sentence.size());
  for (const Piece& p : line.pieces) {
    if (!p.is_macro) continue;
    if (p.col < 0 || static_cast<std::size_t>(p.col) >= feature_columns)
      throw InputError("", sentence[pos].line,
                       "template column " + std::to_string(p.col) + " but the data has only " +
                           std::to_string(feature_columns) + " feature column" +
                           (feature_columns == 1 ? "" : "s"));
    const long idx = static_cast<long>(pos) + p.row;
    if (idx < 0 || idx >= T) continue;
    const ConllToken& tok = sentence[static_cast<std::size_t>(idx)];
    if (static_cast<std::size_t>(p.col) >= tok.columns.size())
      throw InputError("", tok.line,
                       "template column " + std::to_string(p.col) + " but the token has only " +
                           std::to_string(tok.columns.size()) + " columns");
  }
  expand(line, sentence.size(), pos,
         [&](std::size_t i, int col) -> const std::string& { return sentence[i].columns[std::size_t(col)]; }, out);
}

}  // namespace crfx
