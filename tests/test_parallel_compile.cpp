// compile_training over CoNLL files on several threads (TrainingCompiler::add_file): the corpus
// and dictionaries of the text read line by line (read_text, the reference readers), whatever the
// thread count and the chunks' size (the caches the threads share among them), and the first bad
// line's error, named by file and line; and the template expansion's ids against a plain loop (every string built, in text order), its
// caches kept from call to call as a chunk slot keeps them.
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "features/expand.hpp"
#include "corpus_checks.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

using Strings = std::vector<std::string>;

FeatureSpace conll_space(const std::string& template_text) {
  FeatureSpace fs;
  fs.format = InputFormat::conll;
  fs.templ = FeatureTemplate::parse(template_text, "test.template");
  return fs;
}

void expect_same(const FeatureSpace& a, const Corpus& ca, const FeatureSpace& b, const Corpus& cb) {
  EXPECT_EQ(a.labels.strings(), b.labels.strings());
  EXPECT_EQ(a.state_attrs.strings(), b.state_attrs.strings());
  EXPECT_EQ(a.edge_attrs.strings(), b.edge_attrs.strings());
  EXPECT_EQ(a.feature_columns, b.feature_columns);
  expect_same_corpus(ca, cb);
  EXPECT_TRUE(cb.state_values.empty() && cb.edge_values.empty());
}

std::string edge_template() {
  return read_text(data_path("chunking.template")) + "\nB10:%x[-1,1]/%x[0,1]\nU30:%x[-1,0]/%x[0,1]/%x[1,0]/%x[0,0]\n";
}

/// `text` with line `n` (1-based) replaced by `line`.
std::string with_line(const std::string& text, std::size_t n, const std::string& line) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < n; ++i) b = text.find('\n', b) + 1;
  return text.substr(0, b) + line + text.substr(text.find('\n', b));
}

/// The text's sentences read line by line, and the file compiled on 1, 2, 3 and 7 threads in
/// small chunks (many batches, several chunks each) and in the default ones: all the same.
void check_threads(const std::string& templ, const std::string& path, std::size_t min_freq) {
  FeatureSpace whole = conll_space(templ);
  const Corpus cw = compile_training(whole, read_text(whole, path), min_freq);
  for (const unsigned threads : {1u, 2u, 3u, 7u})
    for (const std::uint64_t batch : {std::uint64_t(1500), std::uint64_t(7000), kCompileBatchBytes}) {
      SCOPED_TRACE(::testing::Message() << path << ", " << threads << " threads, batch " << batch);
      FeatureSpace fs = conll_space(templ);
      const Corpus c = compile_training(fs, Strings{path}, min_freq, batch, {}, 0, threads);
      expect_same(whole, cw, fs, c);
    }
}

TEST(ParallelCompile, EveryThreadCountGivesTheLineByLineCompile) {
  const std::string p = data_path("conll2000.train300.txt");
  for (const std::size_t min_freq : {std::size_t(1), std::size_t(3)}) {
    check_threads(edge_template(), p, min_freq);
    FeatureSpace fs = conll_space(edge_template());
    const Corpus c = compile_training(fs, Strings{p}, min_freq, 1500, {}, 0, 3);
    EXPECT_GT(c.edge_ids.size(), 0u);
  }
  // The reading rules at chunk boundaries: CRLF, blank lines of spaces and tabs, several in a row,
  // -DOCSTART- markers, no final newline; and gzip.
  std::string text = read_text(p), odd;
  for (std::size_t b = 0, n = 0; b < text.size(); ++n) {
    const std::size_t e = text.find('\n', b);
    const std::string line = text.substr(b, e - b);
    odd += line.empty() ? (n % 3 == 0 ? " \t\r\n\n" : n % 3 == 1 ? "-DOCSTART- -X- O\r\n" : "\r\n") : line + "\r\n";
    b = e + 1;
  }
  while (!odd.empty() && std::string(" \t\r\n").find(odd.back()) != std::string::npos)
    odd.pop_back();  // the last line without its newline
  const std::string crlf = temp_path("parallel-odd.txt");
  write_text(crlf, odd);
  check_threads(edge_template(), crlf, 1);
  const std::string gz = temp_path("parallel.txt.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), unsigned(text.size()));
  gzclose(f);
  check_threads(read_text(data_path("chunking.template")), gz, 2);
}

/// `text` (CoNLL lines "word POS chunk") with the words of part `part` made its own ("word~2"),
/// and from part 3 on its POS tags too.
std::string part_text(const std::string& text, int part) {
  std::string out;
  for (std::size_t b = 0; b < text.size();) {
    const std::size_t e = std::min(text.find('\n', b), text.size());
    std::string line = text.substr(b, e - b);
    const std::size_t word = line.find(' '), pos = line.find(' ', word + 1);
    if (part >= 3 && pos != std::string::npos) line.insert(pos, "~" + std::to_string(part));
    if (part >= 2 && word != std::string::npos) line.insert(word, "~" + std::to_string(part));
    out += line + "\n";
    b = e + 1;
  }
  return out;
}

TEST(ParallelCompile, SharedCachesGiveTheIdsOfOneThread) {
  // Parts of new words and tags (an overlay's values outgrowing the shared caches' direct tables
  // within a batch) between parts met before (the shared caches' hits), read on many threads in
  // small batches: a string is first met by one slot while others meet it in the same batch, or
  // first in a later batch. Counted (min_freq 3) and not.
  const std::string text = read_text(data_path("conll2000.train300.txt"));
  std::string mixed;
  for (const int part : {0, 2, 0, 3, 2, 4, 0}) mixed += part_text(text, part);
  const std::string p = temp_path("parallel-parts.txt");
  write_text(p, mixed);
  for (const std::size_t min_freq : {std::size_t(1), std::size_t(3)}) {
    FeatureSpace whole = conll_space(edge_template());
    const Corpus cw = compile_training(whole, read_text(whole, p), min_freq);
    for (const unsigned threads : {2u, 5u, 16u})
      for (const std::uint64_t batch : {std::uint64_t(800), std::uint64_t(6000)}) {
        SCOPED_TRACE(::testing::Message() << "min_freq " << min_freq << ", " << threads << " threads, batch " << batch);
        FeatureSpace fs = conll_space(edge_template());
        const Corpus c = compile_training(fs, Strings{p}, min_freq, batch, {}, 0, threads);
        expect_same(whole, cw, fs, c);
      }
  }
}

TEST(ParallelCompile, FilesAndCrfsuiteAlike) {
  const std::string p = data_path("conll2000.train300.txt");
  FeatureSpace one = conll_space(edge_template());
  const Corpus c1 = compile_training(one, Strings{p, p}, 2, 2000, {}, 0, 1);
  FeatureSpace many = conll_space(edge_template());
  const Corpus c7 = compile_training(many, Strings{p, p}, 2, 2000, {}, 0, 7);
  expect_same(one, c1, many, c7);
  const std::string a = data_path("conll2000.train60.crfsuite.txt");
  FeatureSpace s1, s3;
  s1.format = s3.format = InputFormat::crfsuite;
  const Corpus d1 = compile_training(s1, Strings{a}, 1, 2000, {}, 0, 1);
  const Corpus d3 = compile_training(s3, Strings{a}, 1, 2000, {}, 0, 3);
  EXPECT_EQ(s1.state_attrs.strings(), s3.state_attrs.strings());
  EXPECT_EQ(d1.state_ids, d3.state_ids);
  EXPECT_EQ(d1.state_values, d3.state_values);
}

/// The message of compiling `path` on `threads` threads in chunks of about `batch` bytes.
std::string error_of(const std::string& path, unsigned threads, std::uint64_t batch) {
  FeatureSpace fs = conll_space("U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\n");
  try {
    compile_training(fs, Strings{path}, 1, batch, {}, 0, threads);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParallelCompile, TheFirstBadLineIsReportedWhateverTheThreads) {
  const std::string text = read_text(data_path("conll2000.train300.txt"));
  const std::string p = temp_path("parallel-bad.txt");
  // A bad line far into the file (a later chunk of a later batch), then two in one batch.
  write_text(p, with_line(text, 5000, "He PRP extra B-NP"));
  for (const unsigned threads : {1u, 2u, 3u, 7u}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    EXPECT_EQ(error_of(p, threads, 1000).rfind(p + ":5000: inconsistent column count: expected 3 columns (as on line 1), got 4", 0), 0u)
        << error_of(p, threads, 1000);
  }
  write_text(p, with_line(with_line(text, 4000, "He PRP extra B-NP"), 4100, std::string("a\0b", 3) + " NN O"));
  for (const unsigned threads : {1u, 2u, 7u}) {
    EXPECT_EQ(error_of(p, threads, 400).rfind(p + ":4000: inconsistent column count", 0), 0u) << error_of(p, threads, 400);
  }
  write_text(p, with_line(text, 4100, std::string("a\0b", 3) + " NN O"));
  for (const unsigned threads : {1u, 2u, 7u})
    EXPECT_EQ(error_of(p, threads, 400).rfind(p + ":4100: NUL byte in line", 0), 0u) << error_of(p, threads, 400);
  // The file's first token decides its columns, whichever chunk it is in.
  write_text(p, "\n\n   \n\nHe PRP B-NP\n\nran VBD\n");
  for (const unsigned threads : {1u, 3u})
    EXPECT_EQ(error_of(p, threads, 2).rfind(p + ":7: inconsistent column count: expected 3 columns (as on line 5), got 2", 0), 0u)
        << error_of(p, threads, 2);
}

TEST(ParallelCompile, AReadErrorComesAfterTheBatchesBeforeIt) {
  // On several threads a helper reads the next batch while the shards compile this one: a gzip
  // file cut short fails in a later batch's reading, and a bad line in an earlier batch is still
  // the error reported; without one, the read error is, as on one thread.
  const std::string text = read_text(data_path("conll2000.train300.txt"));
  auto cut_gzip = [](const std::string& path, const std::string& t) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    gzwrite(f, t.data(), unsigned(t.size()));
    gzclose(f);
    const std::string z = read_text(path);
    write_text(path, z.substr(0, z.size() * 3 / 4));
  };
  const std::string p = temp_path("parallel-cut.txt.gz");
  cut_gzip(p, text);
  for (const unsigned threads : {1u, 2u, 7u}) {
    const std::string e = error_of(p, threads, 1000);
    EXPECT_EQ(e.rfind(p + ":", 0), 0u) << threads << " threads: " << e;
    EXPECT_NE(e.find("read error (corrupt or truncated file?)"), std::string::npos) << threads << " threads: " << e;
  }
  cut_gzip(p, with_line(text, 300, "He PRP extra B-NP"));
  for (const unsigned threads : {1u, 2u, 7u})
    EXPECT_EQ(error_of(p, threads, 1000).rfind(p + ":300: inconsistent column count", 0), 0u)
        << threads << " threads: " << error_of(p, threads, 1000);
}

/// expand_conll's tokens: sentences [first, last) of `all` (F feature columns, then the label).
struct SomeSentences {
  const std::vector<ConllSentence>* all;
  std::size_t first, last, F;
  std::vector<std::size_t> ends;  // [sentence] one past its last token
  std::vector<const ConllToken*> tokens;
  SomeSentences(const std::vector<ConllSentence>& a, std::size_t f, std::size_t l, std::size_t columns)
      : all(&a), first(f), last(l), F(columns) {
    for (std::size_t s = f; s < l; ++s) {
      for (const ConllToken& t : a[s]) tokens.push_back(&t);
      ends.push_back(tokens.size());
    }
  }
  std::size_t sentences() const { return last - first; }
  std::size_t end(std::size_t s) const { return ends[s]; }
  std::size_t line(std::size_t s) const { return (*all)[first + s].front().line; }
  std::string_view cell(std::size_t k, std::size_t col) const { return tokens[k]->columns[col]; }
  void expand(const FeatureTemplate::Line& line, std::size_t s, std::size_t t, std::string& out) const {
    FeatureTemplate::expand(line, (*all)[first + s], F, t, out);
  }
};

/// A sink adding to a dictionary, counting every occurrence.
struct CountingSink {
  Dictionary* dict;
  std::vector<std::uint32_t> counts;
  std::uint32_t lookup(const std::string& s) { return dict->add(s); }
  bool counting() const { return true; }
  void count(std::uint32_t id, std::uint32_t n) { features_detail::bump(counts, id, n); }
};

TEST(ParallelCompile, KeptCachesGiveThePlainLoopsIds) {
  const FeatureSpace fs = conll_space(edge_template());  // U lines of 1 to 4 macros, a B line
  const std::vector<ConllSentence> text = read_conll(data_path("conll2000.train300.txt"));
  const std::size_t F = 2, S = text.size();
  // The plain loop: every string built, token after token, line after line, added to the dictionary.
  Dictionary plain_state, plain_edge;
  std::vector<std::uint32_t> plain_ids, plain_edge_ids, plain_counts;
  std::string buf;
  for (const ConllSentence& sentence : text)
    for (std::size_t t = 0; t < sentence.size(); ++t) {
      for (const auto& line : fs.templ.unigrams()) {
        FeatureTemplate::expand(line, sentence, F, t, buf);
        plain_ids.push_back(plain_state.add(buf));
        features_detail::bump(plain_counts, plain_ids.back());
      }
      for (const auto& line : fs.templ.edge_bigrams())
        if (t > 0) FeatureTemplate::expand(line, sentence, F, t, buf), plain_edge_ids.push_back(plain_edge.add(buf));
    }
  ASSERT_GT(plain_ids.size(), 2 * features_detail::kExpandBlock);  // several blocks of tokens
  // The same text in parts of 10, 50 and S sentences, caches made afresh, kept, and kept but
  // emptied half way (a direct table outgrown by the words of later parts, a hash line grown).
  for (const std::size_t part : {std::size_t(10), std::size_t(50), S})
    for (const int mode : {0, 1, 2}) {
      SCOPED_TRACE(::testing::Message() << "parts of " << part << " sentences, mode " << mode);
      Dictionary state_dict, edge_dict;
      CountingSink state{&state_dict, {}}, edge{&edge_dict, {}};
      Corpus c;
      features_detail::ExpandCaches caches;
      caches.kept = mode > 0;
      for (std::size_t first = 0; first < S; first += part) {
        if (mode == 0 || (mode == 2 && first == S / 2 / part * part)) caches.clear();
        const SomeSentences tokens(text, first, std::min(S, first + part), F);
        features_detail::expand_conll(fs.templ, F, tokens, c, state, edge, true, [](std::size_t) { return 0u; },
                                      caches);
        if (mode > 0) {
          EXPECT_GT(caches.bytes(), 0u);
        }
      }
      EXPECT_EQ(state_dict.strings(), plain_state.strings());
      EXPECT_EQ(edge_dict.strings(), plain_edge.strings());
      EXPECT_EQ(c.state_ids, plain_ids);
      EXPECT_EQ(c.edge_ids, plain_edge_ids);
      EXPECT_EQ(state.counts, plain_counts);
      EXPECT_EQ(c.num_sentences(), S);
    }
}

}  // namespace
}  // namespace crfx::test
