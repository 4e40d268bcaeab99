// compile_training over CRFsuite attribute files on several threads
// (TrainingCompiler::add_crfsuite_file): the corpus, values and dictionaries of the text read line
// by line (read_text, CrfsuiteReader), whatever the thread count and the chunks' size; the first
// bad line's error, named by file and line; the refusal of CoNLL columns read as CRFsuite lines;
// and the same model bytes from `crfx train` on 1, 2 and 3 threads.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

using Strings = std::vector<std::string>;

FeatureSpace crfsuite_space() {
  FeatureSpace fs;
  fs.format = InputFormat::crfsuite;
  return fs;
}

/// The CRFsuite slice with what the reading must take at chunk boundaries and inside lines:
/// values (":2.5", ":-1e3"), escapes ("\:", "\\", "\/"), empty fields, CRLF, blank lines of spaces
/// and tabs, several in a row, and no final newline.
std::string odd_crfsuite_text() {
  const std::string text = read_text(data_path("conll2000.train60.crfsuite.txt"));
  std::string odd;
  for (std::size_t b = 0, n = 0; b < text.size(); ++n) {
    const std::size_t e = text.find('\n', b);
    std::string line = text.substr(b, e - b);
    b = e + 1;
    if (line.empty()) {
      odd += n % 3 == 0 ? " \t\n\n" : n % 3 == 1 ? "\r\n" : "\n\t\n";
      continue;
    }
    if (n % 7 == 0) line += "\tv:2.5";
    if (n % 11 == 0) line += "\tt=1\\:30\\\\\t\tw=1\\/2:-1e3";
    if (n % 13 == 0) line += "\t";
    odd += line + (n % 5 == 0 ? "\r\n" : "\n");
  }
  while (!odd.empty() && std::string(" \t\r\n").find(odd.back()) != std::string::npos) odd.pop_back();
  return odd;
}

void expect_same(const FeatureSpace& a, const Corpus& ca, const FeatureSpace& b, const Corpus& cb) {
  EXPECT_EQ(a.labels.strings(), b.labels.strings());
  EXPECT_EQ(a.state_attrs.strings(), b.state_attrs.strings());
  EXPECT_EQ(ca.sentence_offsets, cb.sentence_offsets);
  EXPECT_EQ(ca.source_lines, cb.source_lines);
  EXPECT_EQ(ca.labels, cb.labels);
  EXPECT_EQ(ca.state_offsets, cb.state_offsets);
  EXPECT_EQ(ca.state_ids, cb.state_ids);
  EXPECT_EQ(ca.state_values, cb.state_values);
  EXPECT_EQ(ca.edge_offsets, cb.edge_offsets);
  EXPECT_TRUE(cb.edge_ids.empty());
}

/// The file read line by line, and compiled on 1, 2, 3 and 7 threads in small chunks (many
/// batches, several chunks each) and in the default ones: all the same.
void check_threads(const std::string& path, std::size_t min_freq, bool values) {
  FeatureSpace whole = crfsuite_space();
  const Corpus cw = compile_training(whole, read_text(whole, path), min_freq);
  ASSERT_EQ(cw.state_values.empty(), !values);
  for (const unsigned threads : {1u, 2u, 3u, 7u})
    for (const std::uint64_t batch : {std::uint64_t(300), std::uint64_t(5000), kCompileBatchBytes}) {
      SCOPED_TRACE(::testing::Message() << path << ", " << threads << " threads, batch " << batch);
      FeatureSpace fs = crfsuite_space();
      const Corpus c = compile_training(fs, Strings{path}, min_freq, batch, {}, 0, threads);
      expect_same(whole, cw, fs, c);
    }
}

TEST(ParallelCrfsuite, EveryThreadCountGivesTheLineByLineCompile) {
  check_threads(data_path("conll2000.train60.crfsuite.txt"), 1, false);
  const std::string odd = temp_path("parallel-odd.crfsuite.txt");
  write_text(odd, odd_crfsuite_text());
  for (const std::size_t min_freq : {std::size_t(1), std::size_t(2)}) check_threads(odd, min_freq, true);
  const std::string gz = temp_path("parallel.crfsuite.txt.gz");
  const std::string text = read_text(data_path("conll2000.train60.crfsuite.txt"));
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), unsigned(text.size()));
  gzclose(f);
  check_threads(gz, 2, false);
}

TEST(ParallelCrfsuite, SameModelBytesForOneTwoAndThreeThreads) {
  const std::string data = temp_path("parallel-model.crfsuite.txt");
  write_text(data, odd_crfsuite_text());
  std::vector<std::string> models;
  for (const int threads : {1, 2, 3}) {
    models.push_back(temp_path("parallel-crfsuite" + std::to_string(threads) + ".model"));
    std::string out;
    ASSERT_EQ(run(crfx_binary() + " train '" + data + "' --format crfsuite --max-iterations 5 --device cpu --quiet" +
                      " --threads " + std::to_string(threads) + " -m '" + models.back() + "'",
                  &out),
              0)
        << out;
  }
  EXPECT_GT(read_text(models[0]).size(), 10000u);
  EXPECT_EQ(read_text(models[0]), read_text(models[1]));
  EXPECT_EQ(read_text(models[0]), read_text(models[2]));
}

/// `text` with line `n` (1-based) replaced by `line`.
std::string with_line(const std::string& text, std::size_t n, const std::string& line) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < n; ++i) b = text.find('\n', b) + 1;
  return text.substr(0, b) + line + text.substr(text.find('\n', b));
}

/// The message of compiling `path` on `threads` threads in chunks of about `batch` bytes.
std::string error_of(const std::string& path, unsigned threads, std::uint64_t batch) {
  FeatureSpace fs = crfsuite_space();
  try {
    compile_training(fs, Strings{path}, 1, batch, {}, 0, threads);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParallelCrfsuite, TheFirstBadLineIsReportedWhateverTheThreads) {
  const std::string text = read_text(data_path("conll2000.train60.crfsuite.txt"));
  const std::string p = temp_path("parallel-bad.crfsuite.txt");
  const struct {
    std::size_t line;
    std::string text, message;
  } cases[] = {
      {1200, "B-NP\tw=He:abc", ":1200: attribute 'w=He:abc': value 'abc' is not a finite number"},
      {1300, "\tw=He", ":1300: missing label (the first field) in training data"},
      {1400, "B NP\tw=He", ":1400: 'B NP' has spaces before its first tab"},
      {1500, std::string("B-NP\tw=a\0b", 10), ":1500: NUL byte in line"},
  };
  for (const auto& c : cases) {
    write_text(p, with_line(text, c.line, c.text));
    for (const unsigned threads : {1u, 2u, 3u, 7u})
      for (const std::uint64_t batch : {std::uint64_t(2000), kCompileBatchBytes})
        EXPECT_EQ(error_of(p, threads, batch).rfind(p + c.message, 0), 0u) << threads << " threads, batch " << batch
                                                                            << ": " << error_of(p, threads, batch);
  }
  // Two bad lines, in one chunk or in two: the first.
  write_text(p, with_line(with_line(text, 700, "B-NP\t:1"), 720, "\tw=x"));
  for (const unsigned threads : {1u, 2u, 7u})
    for (const std::uint64_t batch : {std::uint64_t(2000), kCompileBatchBytes})
      EXPECT_EQ(error_of(p, threads, batch).rfind(p + ":700: empty attribute name in ':1'", 0), 0u)
          << error_of(p, threads, batch);
}

TEST(ParallelCrfsuite, CoNLLColumnsAreRefusedAsTheReaderRefusesThem) {
  // CoNLL columns with tabs: the refusal names the first lines, whatever the threads; an attribute
  // error among those lines comes first, with the likely cause.
  std::string conll;
  for (int s = 0; s < 80; ++s) conll += "He\tPRP\tB-NP\nreckons\tVBZ\tB-VP\nthe\tDT\tB-NP\n\n";
  const std::string p = temp_path("parallel-conll.txt");
  write_text(p, conll);
  for (const unsigned threads : {1u, 3u})
    for (const std::uint64_t batch : {std::uint64_t(40), kCompileBatchBytes}) {
      const std::string e = error_of(p, threads, batch);
      EXPECT_EQ(e.rfind(p + ":1: lines 1–133 look like CoNLL columns, not CRFsuite attribute lines", 0), 0u) << e;
      EXPECT_NE(e.find("train with --format conll"), std::string::npos) << e;
    }
  write_text(p, with_line(conll, 6, "ran\tVB:D\tB-VP"));
  for (const unsigned threads : {1u, 3u}) {
    const std::string e = error_of(p, threads, 40);
    EXPECT_EQ(e.rfind(p + ":6: lines 1–6 look like CoNLL columns", 0), 0u) << e;
    EXPECT_NE(e.find("Read as CRFsuite, this line fails: attribute 'VB:D'"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace crfx::test
