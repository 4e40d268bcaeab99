// crfx tag's reading of CoNLL inputs (host/io/text_chunks.hpp): ConllScanner's lines of whole
// sentences, parsed by parse_conll_lines, are ConllReader's sentences (columns and lines) wherever
// the scanner cuts — every token or byte limit — and a bad line gives ConllReader's error at the
// same line, after the same sentences.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "io/text_chunks.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

/// The sentences as "line:col col …" strings, one per token, "" between sentences.
std::vector<std::string> flat(const std::vector<ConllSentence>& sentences) {
  std::vector<std::string> out;
  for (const ConllSentence& s : sentences) {
    for (const ConllToken& t : s) {
      std::string line = std::to_string(t.line) + ":";
      for (const std::string& c : t.columns) line += c + "|";
      out.push_back(line);
    }
    out.emplace_back();
  }
  return out;
}

struct Read {
  std::vector<ConllSentence> sentences;
  std::string error = "(no error)";
};

/// ConllReader's sentences of `path` and its error.
Read by_reader(const std::string& path, std::size_t expected) {
  Read r;
  try {
    ConllReader reader(path, expected, expected > 0);
    ConllSentence s;
    while (reader.next(s)) r.sentences.push_back(s);
  } catch (const InputError& e) {
    r.error = e.what();
  }
  return r;
}

/// The same by appends of at most `tokens` tokens or `bytes` bytes, each parsed on its own as
/// crfx tag parses a piece (the scanner's error after its lines, a parse error before it). Checks
/// that every append but the last ends where a sentence does and counts the tokens parsed.
Read by_scanner(const std::string& path, std::size_t expected, std::size_t tokens, std::uint64_t bytes) {
  Read r;
  ConllScanner scanner(path, expected, expected > 0);
  ConllSpares spares;
  std::vector<ConllSentence> scratch;
  while (!scanner.exhausted()) {
    TextChunk chunk;
    std::string read_error;
    std::size_t got = 0;
    try {
      got = scanner.append(chunk, tokens, bytes);
    } catch (const InputError& e) {
      read_error = e.what();
    }
    // Parsed into `scratch`, whose sentences are then given back: every chunk after the first
    // refills the storage of sentences and tokens of other lengths and columns.
    std::string parse_error;
    try {
      const std::size_t parsed = parse_conll_lines(chunk, path, scanner.columns(), read_error.empty(), scratch, spares);
      if (read_error.empty()) {
        EXPECT_EQ(parsed, got);
      }
    } catch (const InputError& e) {
      parse_error = e.what();
    }
    r.sentences.insert(r.sentences.end(), scratch.begin(), scratch.end());
    spares.keep(scratch);
    if (!parse_error.empty()) {
      r.error = parse_error;
      return r;
    }
    if (!read_error.empty()) {
      r.error = read_error;
      return r;
    }
  }
  return r;
}

void expect_same_reading(const std::string& text, std::size_t expected) {
  const std::string path = temp_path("scan.txt");
  write_text(path, text);
  const Read whole = by_reader(path, expected);
  for (const std::size_t tokens : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(5), std::size_t(1) << 20})
    for (const std::uint64_t bytes : {std::uint64_t(1), std::uint64_t(40), ~std::uint64_t(0)}) {
      SCOPED_TRACE(::testing::Message() << tokens << " tokens, " << bytes << " bytes");
      const Read r = by_scanner(path, expected, tokens, bytes);
      EXPECT_EQ(flat(r.sentences), flat(whole.sentences));
      EXPECT_EQ(r.error, whole.error);
    }
}

const char* const kText =
    "\n  \t\nHe PRP B-NP\nsaw VBD B-VP\n\n\n-DOCSTART- -X- O\nit PRP B-NP\r\n \r\n"
    "  indented\tNN   I-NP\n-DOCSTART-\nx y O\n\r\r NN O\nlast NN O";

TEST(ConllScan, ParsedPiecesAreTheReadersSentencesWhereverTheCut) {
  expect_same_reading(kText, 2);
  expect_same_reading(kText, 0);
  expect_same_reading(std::string(kText) + "\n\n", 2);
  expect_same_reading("", 2);
  expect_same_reading("\n \n-DOCSTART- x\n", 2);
}

TEST(ConllScan, ABadLineGivesTheReadersErrorAfterTheSameSentences) {
  // Columns against the model's count, against the first token's, a NUL byte (in a token, and in
  // the line that ends a sentence), a tab-separated CRFsuite-looking line.
  expect_same_reading("a b c d\nx y z\n", 2);
  expect_same_reading("a B\n\nb C\nc d e\nd E\n", 2);
  expect_same_reading("a B\nb C\n\nc D\nd E\n\ne F\nf\n", 0);
  expect_same_reading(std::string("a B\nb C\n\nc D\nd\0x E\n", 18), 2);
  expect_same_reading(std::string("a B\nb C\n \0\nc D\n", 15), 2);
  expect_same_reading("a B\nb C\n\nB-NP\tw=the\tp=DT\tx=1\n", 2);
}

TEST(ConllScan, AReadErrorNamesTheLineUnderWay) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "w" + std::to_string(i) + " NN B-NP\n" + (i % 7 == 6 ? "\n" : "");
  const std::string gz = temp_path("scan.txt.gz");
  write_gz(gz, text);
  std::string cut = read_text(gz);
  cut.resize(cut.size() / 2);
  write_text(gz, cut);
  const Read whole = by_reader(gz, 2);
  ASSERT_NE(whole.error, "(no error)");
  for (const std::size_t tokens : {std::size_t(3), std::size_t(1000), std::size_t(1) << 20}) {
    const Read r = by_scanner(gz, 2, tokens, ~std::uint64_t(0));
    EXPECT_EQ(flat(r.sentences), flat(whole.sentences));
    EXPECT_EQ(r.error, whole.error);
  }
}

}  // namespace
}  // namespace crfx::test
