// crfx tag's reading of CRFsuite attribute inputs (host/io/text_chunks.hpp): CrfsuiteScanner's
// whole sequences, checked piece by piece by check_crfsuite_lines as crfx tag's workers check
// them, are CrfsuiteReader::next(CrfsuiteLines&)'s sequences (text and lines) wherever the
// scanner cuts — every token or byte limit — and a bad line gives the reader's error at the same
// line, after the same sequences, the CoNLL-shape hint included.
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "io/text_chunks.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

/// The sequences as "line:text" strings, one per token, "" after each sequence.
std::vector<std::string> flat(const CrfsuiteLines& lines) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (std::size_t k = lines.first_token(i); k < lines.sentence_ends[i]; ++k)
      out.push_back(std::to_string(lines.sentence_lines[i] + (k - lines.first_token(i))) + ":" +
                    std::string(lines.line(k)));
    out.emplace_back();
  }
  return out;
}

struct Read {
  CrfsuiteLines lines;
  std::string error = "(no error)";
};

/// CrfsuiteReader's sequences of `path` and its error.
Read by_reader(const std::string& path) {
  Read r;
  try {
    CrfsuiteReader reader(path);
    while (reader.next(r.lines)) {
    }
  } catch (const InputError& e) {
    r.error = e.what();
  }
  return r;
}

/// The same by appends of at most `tokens` tokens or `bytes` bytes into one CrfsuiteLines, each
/// piece checked on its own from the shape before it, as crfx tag does (a bad line's error
/// before the scanner's, whose unfinished sequence is dropped). Checks the tokens counted.
Read by_scanner(const std::string& path, std::size_t tokens, std::uint64_t bytes) {
  Read r;
  CrfsuiteScanner scanner(path);
  while (!scanner.exhausted()) {
    CrfsuiteShape shape = scanner.shape();
    const std::size_t first = r.lines.size(), tokens_before = r.lines.token_ends.size();
    std::string read_error;
    bool partial = false;
    try {
      const std::size_t got = scanner.append(r.lines, tokens, bytes);
      EXPECT_EQ(got, r.lines.token_ends.size() - tokens_before);
      if (!scanner.exhausted()) {
        EXPECT_GT(got, 0u);  // (the end of the file: perhaps blank lines only)
      }
    } catch (const InputError& e) {
      read_error = e.what();
      partial = scanner.partial();
    }
    EXPECT_EQ(r.lines.sentence_lines.size(), r.lines.size());
    std::exception_ptr error;
    const std::size_t bad = check_crfsuite_lines(r.lines, first, r.lines.size(), path, shape, error);
    if (error) {
      r.lines.erase(bad, r.lines.size());
      try {
        std::rethrow_exception(error);
      } catch (const InputError& e) {
        r.error = e.what();
      }
      return r;
    }
    if (!read_error.empty()) {
      if (partial) r.lines.erase(r.lines.size() - 1, r.lines.size());
      r.error = read_error;
      return r;
    }
  }
  return r;
}

/// Checks that the scanner's pieces read `text` as the reader does; the reader's reading.
Read expect_same_reading(const std::string& text) {
  const std::string path = temp_path("cs-scan.txt");
  write_text(path, text);
  const Read whole = by_reader(path);
  for (const std::size_t tokens : {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(1) << 20})
    for (const std::uint64_t bytes : {std::uint64_t(1), std::uint64_t(40), ~std::uint64_t(0)}) {
      SCOPED_TRACE(::testing::Message() << tokens << " tokens, " << bytes << " bytes");
      const Read r = by_scanner(path, tokens, bytes);
      EXPECT_EQ(flat(r.lines), flat(whole.lines));
      EXPECT_EQ(r.error, whole.error);
    }
  return whole;
}

const char* const kText =
    "\n  \t\nB-NP\tw=He\tp=PRP\nB-VP\tw=saw\t\tp:2.5\r\n \r\n\t\n"
    "\tw\\:x=1\tb\\\\c\tc:1e3\td\\/e\tf\\\nO\r\n\r\r\n\r\rlast\tw=a\nI-NP\tx";

TEST(CrfsuiteScan, CheckedPiecesAreTheReadersSequencesWhereverTheCut) {
  expect_same_reading(kText);
  expect_same_reading(std::string(kText) + "\n\n");
  expect_same_reading("");
  expect_same_reading("\n \t\n\n");
}

TEST(CrfsuiteScan, ABadLineGivesTheReadersErrorAfterTheSameSequences) {
  // A space in a label, values that are not numbers (the colon hint), beyond the range, an empty
  // name, a NUL byte in a token (before and after another error), CRLF.
  expect_same_reading("A\tw=1\n\nB C\tw=2\nD\tw=3\n");
  expect_same_reading("A\tw=1\nB\tw=2\n\nC\tw=x:abc\nD\tw=3\n");
  expect_same_reading("A\tw=Note:\n");
  expect_same_reading("A\tw=1\n\nB\tt=1\\:30:pm\n\nC\ta:1e11\n");
  expect_same_reading("A\tw=1\n\nB\t:3\n");
  expect_same_reading(std::string("A\tw=1\n\nB\tw\0=2\nC\tw=x:y\n", 22));
  expect_same_reading(std::string("A\tw=1\n\nB\tw=x:y\nC\tw\0=2\n", 22));
  expect_same_reading("A\tw=1\r\n\r\nB\tw=x:abc\r\n");
}

/// `n` tokens of CoNLL columns (word, POS, chunk) written with tabs, a sentence every 9, token
/// `bad` (1-based; 0: none) with its POS replaced by "x:abc" — an attribute CRFsuite refuses.
std::string conll_tabs(int n, int bad) {
  const char* const words[] = {"He", "reckons", "the", "current", "account", "deficit", "will", "narrow", "to"};
  const char* const pos[] = {"PRP", "VBZ", "DT", "JJ", "NN", "NN", "MD", "VB", "TO"};
  const char* const chunk[] = {"B-NP", "B-VP", "B-NP", "I-NP", "I-NP", "I-NP", "B-VP", "I-VP", "B-PP"};
  std::string text;
  for (int i = 1, k = 0; i <= n; ++i, k = (k + 1) % 9) {
    text += std::string(words[k]) + "\t" + (i == bad ? "x:abc" : pos[k]) + "\t" + chunk[k] + "\n";
    if (k == 8) text += "\n";
  }
  return text;
}

TEST(CrfsuiteScan, TheConllShapeHintIsTheVerdictOverTheLinesUpToTheBadOne) {
  // At line 3 (three lines observed), at line 150 (the first 100 observed: the pieces after them
  // begin full).
  for (const int bad : {3, 150}) {
    SCOPED_TRACE(bad);
    const Read whole = expect_same_reading(conll_tabs(300, bad));
    EXPECT_NE(whole.error.find("look like CoNLL columns"), std::string::npos) << whole.error;
    const int line = bad + (bad - 1) / 9;  // (a blank line after every 9)
    EXPECT_NE(whole.error.find(":" + std::to_string(line) + ": lines 1–"), std::string::npos) << whole.error;
  }
}

TEST(CrfsuiteScan, AReadErrorNamesTheLineUnderWayAfterTheLinesBeforeIt) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "B-NP\tw=" + std::to_string(i) + "\tp=NN\n" + (i % 7 == 6 ? "\n" : "");
  const std::string gz = temp_path("cs-scan.txt.gz");
  // (Second: an attribute error early on comes before the read error.)
  for (const std::string& head : {std::string(), std::string("A\tw=1\n\nB\tw=1:x\n")}) {
    SCOPED_TRACE(head);
    write_gz(gz, head + text);
    std::string cut = read_text(gz);
    cut.resize(cut.size() / 2);
    write_text(gz, cut);
    const Read whole = by_reader(gz);
    ASSERT_NE(whole.error, "(no error)");
    for (const std::size_t tokens : {std::size_t(3), std::size_t(1000), std::size_t(1) << 20}) {
      const Read r = by_scanner(gz, tokens, ~std::uint64_t(0));
      EXPECT_EQ(flat(r.lines), flat(whole.lines));
      EXPECT_EQ(r.error, whole.error);
    }
  }
}

}  // namespace
}  // namespace crfx::test
