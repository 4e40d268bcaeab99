// read_conll: CoNLL / CRF++ column files.
//
// Like CRF++ (tagger.cpp, TaggerImpl::read) columns are split on runs of spaces and tabs and a
// blank line ends a sentence. Unlike CRF++, a line holding only whitespace also counts as blank
// (CRF++ treats any line *starting* with a space or tab as a sentence break, which silently drops
// tokens of lines with leading indentation; here those tokens are kept). Several blank lines in a
// row are one break. "-DOCSTART-" lines (CoNLL-2003 document markers) end the sentence and are
// dropped. UTF-8 passes through as bytes.
#include <string>
#include <vector>

#include "crfx/error.hpp"
#include "crfx/io.hpp"

namespace crfx {

namespace {
std::string plural_columns(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " column" : " columns");
}
}  // namespace

std::vector<ConllSentence> read_conll(const std::string& path, std::size_t expected_columns,
                                      bool allow_one_more) {
  LineReader reader(path);
  std::vector<ConllSentence> sentences;
  ConllSentence current;
  std::string line;
  std::size_t columns = 0;     // column count of the file's first token (0: none seen yet)
  std::size_t first_line = 0;  // the line that fixed `columns`
  auto flush = [&] {
    if (!current.empty()) sentences.push_back(std::move(current));
    current.clear();
  };
  while (reader.next(line)) {
    ConllToken token;
    token.columns.reserve(columns ? columns : 4);
    split_whitespace(line, token.columns);
    if (token.columns.empty()) {  // blank or whitespace-only: sentence boundary
      flush();
      continue;
    }
    if (token.columns[0].compare(0, 10, "-DOCSTART-") == 0) {
      flush();
      continue;
    }
    token.line = reader.line_number();
    const std::size_t got = token.columns.size();
    if (columns == 0) {
      if (expected_columns > 0 && got != expected_columns &&
          !(allow_one_more && got == expected_columns + 1)) {
        throw InputError(path, token.line,
                         "expected " +
                             (allow_one_more ? std::to_string(expected_columns) + " or " +
                                                   plural_columns(expected_columns + 1)
                                             : plural_columns(expected_columns)) +
                             ", got " + std::to_string(got));
      }
      columns = got;
      first_line = token.line;
    } else if (got != columns) {
      throw InputError(path, token.line,
                       "inconsistent column count: expected " + plural_columns(columns) +
                           " (as on line " + std::to_string(first_line) + "), got " +
                           std::to_string(got));
    }
    current.push_back(std::move(token));
  }
  flush();
  return sentences;
}

}  // namespace crfx
