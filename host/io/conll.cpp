// read_conll: CoNLL / CRF++ column files.
//
// Like CRF++ (tagger.cpp, TaggerImpl::read) columns are split on runs of spaces and tabs and a
// blank line ends a sentence. Unlike CRF++, a line holding only whitespace also counts as blank
// (CRF++ treats any line *starting* with a space or tab as a sentence break, which silently drops
// tokens of lines with leading indentation; here those tokens are kept). Several blank lines in a
// row are one break. "-DOCSTART-" lines (CoNLL-2003 document markers) end the sentence and are
// dropped. UTF-8 passes through as bytes.
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "io/text_chunks.hpp"

namespace crfx {

namespace {
std::string plural_columns(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " column" : " columns");
}
}  // namespace

ConllReader::ConllReader(const std::string& path, std::size_t expected_columns, bool allow_one_more)
    : reader_(path), expected_(expected_columns), allow_one_more_(allow_one_more) {}

namespace {
/// " (… CRFsuite attribute lines …)" when a line that breaks the column rules looks like
/// CRFsuite's LABEL<TAB>attr=value… (tab-separated, most fields after the first with '='); "".
template <class Columns>
std::string crfsuite_hint(std::string_view line, const Columns& columns) {
  if (line.find('\t') == std::string::npos || columns.size() < 3) return "";
  std::size_t with_eq = 0;
  for (std::size_t i = 1; i < columns.size(); ++i) with_eq += columns[i].find('=') != std::string::npos;
  if (2 * with_eq < columns.size() - 1) return "";
  return " (this looks like CRFsuite attribute lines, LABEL<TAB>attr…: read them with --format crfsuite, or "
         "tag them with a model trained on CRFsuite data)";
}

std::string inconsistent(std::size_t expected, std::size_t first_line, std::size_t got) {
  return "inconsistent column count: expected " + plural_columns(expected) + " (as on line " +
         std::to_string(first_line) + "), got " + std::to_string(got);
}
}  // namespace

std::string conll_expected_problem(const ConllColumns& rule, std::string_view line,
                                   const std::vector<std::string_view>& columns) {
  const std::size_t got = columns.size(), n = rule.expected;
  if (n == 0 || got == n || (rule.allow_one_more && got == n + 1)) return "";
  return "expected " + (rule.allow_one_more ? std::to_string(n) + " or " + plural_columns(n + 1) : plural_columns(n)) +
         ", got " + std::to_string(got) + crfsuite_hint(line, columns);
}

std::string conll_column_problem(std::size_t expected, std::size_t first_line, std::string_view line,
                                 const std::vector<std::string_view>& columns) {
  return inconsistent(expected, first_line, columns.size()) + crfsuite_hint(line, columns);
}

bool ConllReader::next(ConllSentence& out) {
  out.clear();
  const std::string& path = reader_.path();
  while (reader_.next(line_)) {
    ConllToken token;
    token.columns.reserve(columns_ ? columns_ : 4);
    split_whitespace(line_, token.columns);
    if (conll_not_a_token(token.columns)) {
      if (!out.empty()) return true;  // blank / whitespace-only or a document marker: a boundary
      continue;
    }
    token.line = reader_.line_number();
    const std::size_t got = token.columns.size();
    if (columns_ == 0) {
      if (expected_ > 0 && got != expected_ && !(allow_one_more_ && got == expected_ + 1)) {
        const std::vector<std::string_view> views(token.columns.begin(), token.columns.end());
        throw InputError(path, token.line, conll_expected_problem({expected_, allow_one_more_, 0, 0}, line_, views));
      }
      columns_ = got;
      first_line_ = token.line;
    } else if (got != columns_) {
      throw InputError(path, token.line,
                       inconsistent(columns_, first_line_, got) + crfsuite_hint(line_, token.columns));
    }
    out.push_back(std::move(token));
  }
  return !out.empty();
}

std::vector<ConllSentence> read_conll(const std::string& path, std::size_t expected_columns,
                                      bool allow_one_more) {
  ConllReader reader(path, expected_columns, allow_one_more);
  std::vector<ConllSentence> sentences;
  ConllSentence s;
  while (reader.next(s)) sentences.push_back(std::move(s));
  return sentences;
}

}  // namespace crfx
