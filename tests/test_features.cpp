// Feature compilation: CoNLL + template and CRFsuite data → Corpus; ids, CSR layout, edge
// attributes, min_freq, frozen dictionaries, labels, and input errors naming file:line.
#include <gtest/gtest.h>
#include <zlib.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "corpus_checks.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

::testing::AssertionResult throws_input_error(const std::function<void()>& f,
                                              const std::string& prefix,
                                              const std::string& fragment = "") {
  try {
    f();
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.compare(0, prefix.size(), prefix) != 0)
      return ::testing::AssertionFailure()
             << "message '" << what << "' lacks prefix '" << prefix << "'";
    if (what.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << what << "' lacks '" << fragment << "'";
    return ::testing::AssertionSuccess() << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "other exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

using Strings = std::vector<std::string>;

FeatureSpace conll_space(const std::string& template_text) {
  FeatureSpace fs;
  fs.format = InputFormat::conll;
  fs.templ = FeatureTemplate::parse(template_text, "test.template");
  return fs;
}

/// Attribute strings of token t's state items.
Strings state_strings(const FeatureSpace& fs, const Corpus& c, std::size_t t) {
  Strings out;
  for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
    out.push_back(fs.state_attrs.at(c.state_ids[k]));
  return out;
}
Strings edge_strings(const FeatureSpace& fs, const Corpus& c, std::size_t t) {
  Strings out;
  for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k)
    out.push_back(fs.edge_attrs.at(c.edge_ids[k]));
  return out;
}

void check_shape(const Corpus& c) {
  const std::size_t N = c.num_tokens();
  EXPECT_EQ(c.labels.size(), N);
  EXPECT_EQ(c.edge_offsets.size(), N + 1);
  EXPECT_EQ(c.sentence_offsets.back(), N);
  EXPECT_EQ(c.source_lines.size(), c.num_sentences());
  EXPECT_EQ(c.state_offsets.back(), c.state_ids.size());
  EXPECT_EQ(c.edge_offsets.back(), c.edge_ids.size());
  EXPECT_NO_THROW(c.check_values());  // values: one per item, or none (binary)
  for (std::size_t s = 0; s < c.num_sentences(); ++s) {  // no edge items at a sentence's start
    const std::size_t first = c.sentence_offsets[s];
    EXPECT_EQ(c.edge_offsets[first], c.edge_offsets[first + 1]);
  }
}

const char* kSmall =
    "He PRP B-NP\n"
    "reckons VBZ B-VP\n"
    "the DT B-NP\n"
    "\n"
    "He VBZ I-NP\n"
    "the DT O\n";

TEST(Dictionary, AssignGivesIdsInOrderAndFindsTheFirstDuplicate) {
  std::vector<std::string> words;
  for (int i = 0; i < 5000; ++i) words.push_back("w" + std::to_string(i * 7919 % 10007));
  words.push_back("");  // the empty string is a string like any other
  Dictionary d;
  ASSERT_EQ(d.assign(words), Dictionary::kNoDuplicate);
  ASSERT_EQ(d.size(), words.size());
  for (std::size_t i = 0; i < words.size(); ++i) {
    ASSERT_EQ(d.find(words[i]), i);
    ASSERT_EQ(d.at(std::uint32_t(i)), words[i]);
  }
  EXPECT_EQ(d.find("absent"), Dictionary::kNone);
  EXPECT_EQ(d.add("new"), words.size());  // still a working table (before freeze)
  d.freeze();
  EXPECT_EQ(d.add("newer"), Dictionary::kNone);

  Dictionary e;
  EXPECT_EQ(e.assign({}), Dictionary::kNoDuplicate);
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.find(""), Dictionary::kNone);
  EXPECT_EQ(e.add("a"), 0u);

  std::vector<std::string> dup = words;
  dup.insert(dup.begin() + 3000, words[1234]);  // index 3000 repeats index 1234
  dup.push_back(words[7]);
  EXPECT_EQ(e.assign(dup), 3000u);
  EXPECT_EQ(e.size(), 0u);
  EXPECT_EQ(e.find(words[0]), Dictionary::kNone);
}

// growth_bytes: what the next strings may allocate at once — nothing while the arrays and the slot
// table have room, their next growth (new arrays beside the old) where they have not.
TEST(Dictionary, GrowthBytesIsTheNextGrowth) {
  Dictionary d;
  d.reserve(100);
  for (int i = 0; i < 10; ++i) d.add("s" + std::to_string(i));
  EXPECT_EQ(d.growth_bytes(0), 0u);
  EXPECT_EQ(d.growth_bytes(50), 0u);  // 60 strings: reserved room, table more than twice as large
  const std::size_t grown = d.growth_bytes(1000);
  EXPECT_GE(grown, 1010 * (sizeof(std::string) + sizeof(std::size_t)));
  EXPECT_LT(grown, 2 * 1010 * (sizeof(std::string) + sizeof(std::size_t)) + 4096 * sizeof(std::uint32_t));
}

TEST(Dictionary, IdsInInsertionOrderThroughGrowthCompactAndFreeze) {
  Dictionary d;
  std::vector<std::string> words;
  for (int i = 0; i < 5000; ++i) words.push_back("w" + std::to_string(i * 7919 % 10007));
  for (std::size_t i = 0; i < words.size(); ++i) ASSERT_EQ(d.add(words[i]), i);  // many rehashes
  for (std::size_t i = 0; i < words.size(); ++i) ASSERT_EQ(d.add(words[i]), i);  // no duplicates
  EXPECT_EQ(d.size(), words.size());
  EXPECT_EQ(d.find("absent"), Dictionary::kNone);
  EXPECT_EQ(d.find(""), Dictionary::kNone);
  EXPECT_EQ(d.add(""), words.size());  // the empty string is a string like any other
  std::vector<bool> keep(d.size());
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i % 3 == 1;
  const auto remap = d.compact(keep);
  std::uint32_t next = 0;
  for (std::size_t i = 0; i < keep.size(); ++i) {
    const std::string& w = i < words.size() ? words[i] : std::string();
    if (keep[i]) {
      EXPECT_EQ(remap[i], next);
      EXPECT_EQ(d.find(w), next);
      EXPECT_EQ(d.at(next), w);
      ++next;
    } else {
      EXPECT_EQ(remap[i], Dictionary::kNone);
      EXPECT_EQ(d.find(w), Dictionary::kNone) << w;
    }
  }
  EXPECT_EQ(d.size(), next);
  Dictionary copy = d;  // copies keep their own index
  copy.freeze();
  EXPECT_EQ(copy.add("new"), Dictionary::kNone);
  EXPECT_EQ(copy.add(words[1]), 0u);
  EXPECT_EQ(d.add("new"), next);  // the original is not frozen
  Dictionary r;
  r.reserve(100);
  EXPECT_EQ(r.add("a"), 0u);
  EXPECT_EQ(r.find("a"), 0u);
}

TEST(Compile, SmallConllByHand) {
  const std::string p = temp_path("small.txt");
  write_text(p, kSmall);
  FeatureSpace fs = conll_space("U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\nB\nB10:%x[-1,0]\n");
  const TextData d = read_text(fs, p);
  EXPECT_EQ(d.num_sentences(), 2u);
  const Corpus c = compile_training(fs, d, 1);
  check_shape(c);
  EXPECT_EQ(fs.feature_columns, 2u);
  EXPECT_TRUE(fs.labels.frozen() && fs.state_attrs.frozen() && fs.edge_attrs.frozen());
  EXPECT_EQ(fs.labels.strings(), (Strings{"B-NP", "B-VP", "I-NP", "O"}));
  EXPECT_EQ(fs.state_attrs.strings(),
            (Strings{"U00:He", "U01:_B-1/PRP", "U00:reckons", "U01:PRP/VBZ", "U00:the",
                     "U01:VBZ/DT", "U01:_B-1/VBZ"}));
  EXPECT_EQ(fs.edge_attrs.strings(), (Strings{"B10:He", "B10:reckons"}));
  const Dims dims = fs.dims();
  EXPECT_EQ(dims.L, 4u);
  EXPECT_EQ(dims.A, 7u);
  EXPECT_EQ(dims.E, 2u);
  EXPECT_TRUE(dims.transitions);

  EXPECT_EQ(c.num_sentences(), 2u);
  EXPECT_EQ(c.num_tokens(), 5u);
  EXPECT_EQ(c.sentence_offsets, (std::vector<std::size_t>{0, 3, 5}));
  EXPECT_EQ(c.source_lines, (std::vector<std::size_t>{1, 5}));
  EXPECT_EQ(c.labels, (std::vector<std::uint32_t>{0, 1, 0, 2, 3}));
  EXPECT_EQ(state_strings(fs, c, 0), (Strings{"U00:He", "U01:_B-1/PRP"}));
  EXPECT_EQ(state_strings(fs, c, 2), (Strings{"U00:the", "U01:VBZ/DT"}));
  EXPECT_EQ(state_strings(fs, c, 3), (Strings{"U00:He", "U01:_B-1/VBZ"}));
  EXPECT_EQ(state_strings(fs, c, 4), (Strings{"U00:the", "U01:VBZ/DT"}));
  EXPECT_TRUE(edge_strings(fs, c, 0).empty());
  EXPECT_EQ(edge_strings(fs, c, 1), (Strings{"B10:He"}));
  EXPECT_EQ(edge_strings(fs, c, 2), (Strings{"B10:reckons"}));
  EXPECT_TRUE(edge_strings(fs, c, 3).empty());
  EXPECT_EQ(edge_strings(fs, c, 4), (Strings{"B10:He"}));
  // Template attributes are binary: no values are stored, and every item's value is 1.
  EXPECT_TRUE(c.state_values.empty());
  EXPECT_TRUE(c.edge_values.empty());
  EXPECT_EQ(c.state_value(0), 1.0);
  EXPECT_EQ(c.edge_value(0), 1.0);
  EXPECT_TRUE(c.labeled());
  EXPECT_EQ(gold_labels(d), (Strings{"B-NP", "B-VP", "B-NP", "I-NP", "O"}));
}

TEST(Compile, TransitionsFlag) {
  const std::string p = temp_path("small.txt");
  write_text(p, kSmall);
  FeatureSpace without = conll_space("U00:%x[0,0]\n");
  compile_training(without, read_text(without, p), 1);
  EXPECT_FALSE(without.dims().transitions);
  EXPECT_EQ(without.dims().E, 0u);
  FeatureSpace edges_only = conll_space("U00:%x[0,0]\nB1:%x[0,1]\n");
  compile_training(edges_only, read_text(edges_only, p), 1);
  EXPECT_FALSE(edges_only.dims().transitions);
  EXPECT_EQ(edges_only.dims().E, 2u);  // VBZ, DT (sentence 1), DT again (sentence 2)
}

/// Reference: the plain loop (expand every line at every token, Dictionary::add), which the
/// memoised compile must reproduce id for id.
struct Naive {
  Dictionary state, edge, labels;
  std::vector<std::uint32_t> state_ids, edge_ids, labels_of;
  std::vector<std::size_t> state_offsets{0}, edge_offsets{0};
};
Naive naive(const FeatureTemplate& templ, const std::vector<ConllSentence>& data) {
  Naive n;
  std::string buf;
  const std::size_t F = data[0][0].columns.size() - 1;
  for (const auto& s : data) {
    for (std::size_t t = 0; t < s.size(); ++t) {
      n.labels_of.push_back(n.labels.add(s[t].columns.back()));
      for (const auto& line : templ.unigrams()) {
        FeatureTemplate::expand(line, s, F, t, buf);
        n.state_ids.push_back(n.state.add(buf));
      }
      n.state_offsets.push_back(n.state_ids.size());
      if (t > 0)
        for (const auto& line : templ.edge_bigrams()) {
          FeatureTemplate::expand(line, s, F, t, buf);
          n.edge_ids.push_back(n.edge.add(buf));
        }
      n.edge_offsets.push_back(n.edge_ids.size());
    }
  }
  return n;
}

TEST(Compile, MatchesThePlainLoopOnChunkingData) {
  // The chunking template plus lines that exercise every path: a macro-free U line, a line with
  // more than three macros, a duplicate line, edge templates, far boundaries, and a line whose
  // strings collide with another line's ("UX:" + word for both columns).
  std::string text = read_text(data_path("chunking.template"));
  text +=
      "U\nU30:%x[-2,0]/%x[-1,0]/%x[0,0]/%x[1,0]/%x[2,0]\nU02:%x[0,0]\nU40:%x[-9,1]%x[9,1]\n"
      "UX:%x[0,0]\nUX:%x[0,1]\nB50:%x[0,1]\nB51:%x[-1,0]/%x[0,0]/%x[0,1]/%x[1,1]\n";
  FeatureSpace fs = conll_space(text);
  const TextData d = read_text(fs, data_path("conll2000.train300.txt"));
  const Corpus c = compile_training(fs, d, 1);
  check_shape(c);
  const Naive n = naive(fs.templ, d.conll);
  EXPECT_EQ(fs.state_attrs.strings(), n.state.strings());
  EXPECT_EQ(fs.edge_attrs.strings(), n.edge.strings());
  EXPECT_EQ(fs.labels.strings(), n.labels.strings());
  EXPECT_EQ(c.state_ids, n.state_ids);
  EXPECT_EQ(c.state_offsets, n.state_offsets);
  EXPECT_EQ(c.edge_ids, n.edge_ids);
  EXPECT_EQ(c.edge_offsets, n.edge_offsets);
  EXPECT_EQ(c.labels, n.labels_of);
  EXPECT_EQ(c.num_sentences(), 300u);

  // min_freq: exactly the attributes seen at least 3 times survive, in their old order.
  std::map<std::uint32_t, std::size_t> state_count, edge_count;
  for (auto id : n.state_ids) ++state_count[id];
  for (auto id : n.edge_ids) ++edge_count[id];
  FeatureSpace f3 = conll_space(text);
  const Corpus c3 = compile_training(f3, d, 3);
  check_shape(c3);
  Strings kept_state, kept_edge;
  std::vector<std::uint32_t> expect_ids;
  std::map<std::uint32_t, std::uint32_t> remap;
  for (std::uint32_t id = 0; id < n.state.size(); ++id)
    if (state_count[id] >= 3) {
      remap[id] = std::uint32_t(kept_state.size());
      kept_state.push_back(n.state.at(id));
    }
  for (std::uint32_t id = 0; id < n.edge.size(); ++id)
    if (edge_count[id] >= 3) kept_edge.push_back(n.edge.at(id));
  for (auto id : n.state_ids)
    if (remap.count(id)) expect_ids.push_back(remap[id]);
  EXPECT_EQ(f3.state_attrs.strings(), kept_state);
  EXPECT_EQ(f3.edge_attrs.strings(), kept_edge);
  EXPECT_EQ(c3.state_ids, expect_ids);
  EXPECT_LT(f3.dims().A, fs.dims().A);
  EXPECT_LT(f3.dims().E, fs.dims().E);
  EXPECT_EQ(c3.labels, c.labels);
}

TEST(Compile, MinFreqSmall) {
  const std::string p = temp_path("small.txt");
  write_text(p, kSmall);
  FeatureSpace fs = conll_space("U00:%x[0,0]\nU01:%x[0,1]\nB2:%x[0,1]\n");
  const Corpus c = compile_training(fs, read_text(fs, p), 2);
  check_shape(c);
  // Seen twice: He, the, VBZ, DT (state); DT (edge, at t ≥ 1 only).
  EXPECT_EQ(fs.state_attrs.strings(), (Strings{"U00:He", "U01:VBZ", "U00:the", "U01:DT"}));
  EXPECT_EQ(fs.edge_attrs.strings(), (Strings{"B2:DT"}));
  EXPECT_EQ(state_strings(fs, c, 0), (Strings{"U00:He"}));
  EXPECT_EQ(state_strings(fs, c, 1), (Strings{"U01:VBZ"}));
  EXPECT_EQ(state_strings(fs, c, 2), (Strings{"U00:the", "U01:DT"}));
  EXPECT_EQ(state_strings(fs, c, 3), (Strings{"U00:He", "U01:VBZ"}));
  EXPECT_EQ(edge_strings(fs, c, 1), Strings{});
  EXPECT_EQ(edge_strings(fs, c, 2), (Strings{"B2:DT"}));
  EXPECT_EQ(edge_strings(fs, c, 4), (Strings{"B2:DT"}));
  EXPECT_EQ(fs.labels.size(), 4u);  // labels are never cut
}

TEST(Compile, FrozenDictionariesForTestData) {
  const std::string train = temp_path("train.txt");
  write_text(train, kSmall);
  FeatureSpace fs = conll_space("U00:%x[0,0]\nU01:%x[0,1]\nB\nB2:%x[-1,1]\n");
  compile_training(fs, read_text(fs, train), 1);
  const std::size_t A = fs.state_attrs.size(), E = fs.edge_attrs.size();

  const std::string test = temp_path("test.txt");
  write_text(test, "\nShe PRP B-NP\nreckons VBZ NEW-LABEL\n\n\nthe XX O\n");
  const TextData d = read_text(fs, test);
  const Corpus c = compile(fs, d);
  check_shape(c);
  EXPECT_EQ(fs.state_attrs.size(), A);  // nothing added
  EXPECT_EQ(fs.edge_attrs.size(), E);
  EXPECT_EQ(state_strings(fs, c, 0), (Strings{"U01:PRP"}));  // "U00:She" unknown: skipped
  EXPECT_EQ(state_strings(fs, c, 1), (Strings{"U00:reckons", "U01:VBZ"}));
  EXPECT_EQ(state_strings(fs, c, 2), (Strings{"U00:the"}));
  EXPECT_EQ(edge_strings(fs, c, 1), (Strings{"B2:PRP"}));
  EXPECT_EQ(c.labels, (std::vector<std::uint32_t>{0, Corpus::kNoLabel, fs.labels.find("O")}));
  EXPECT_EQ(c.source_lines, (std::vector<std::size_t>{2, 6}));
  EXPECT_FALSE(c.labeled());
  EXPECT_EQ(gold_labels(d), (Strings{"B-NP", "NEW-LABEL", "O"}));

  // Without the label column: every label unknown, no gold labels.
  const std::string unlabeled = temp_path("unlabeled.txt");
  write_text(unlabeled, "He PRP\nthe DT\n");
  const TextData u = read_text(fs, unlabeled);
  const Corpus cu = compile(fs, u);
  EXPECT_EQ(cu.labels, (std::vector<std::uint32_t>{Corpus::kNoLabel, Corpus::kNoLabel}));
  EXPECT_EQ(state_strings(fs, cu, 0), (Strings{"U00:He", "U01:PRP"}));
  EXPECT_TRUE(gold_labels(u).empty());

  // Another column count is an error naming the line.
  const std::string wrong = temp_path("wrong.txt");
  write_text(wrong, "\nHe PRP B-NP x\n");
  EXPECT_TRUE(throws_input_error([&] { read_text(fs, wrong); }, wrong + ":2: ",
                                 "expected 2 or 3 columns, got 4"));
}

/// The sentences of CoNLL text `text` in batches of `sizes` sentences (cycled), each a TextData
/// of the model's columns as the tagger reads them.
std::vector<TextData> conll_batches(const FeatureSpace& fs, const std::string& text, const std::vector<std::size_t>& sizes) {
  std::vector<std::string> sentences;
  for (std::size_t b = 0; b < text.size();) {
    std::size_t e = text.find("\n\n", b);
    e = e == std::string::npos ? text.size() : e + 2;
    sentences.push_back(text.substr(b, e - b));
    b = e;
  }
  std::vector<TextData> out;
  for (std::size_t i = 0, k = 0; i < sentences.size(); ++k) {
    std::string part;
    for (std::size_t n = 0; n < sizes[k % sizes.size()] && i < sentences.size(); ++n) part += sentences[i++];
    const std::string path = temp_path("batch.txt");
    write_text(path, part);
    out.push_back(read_text(fs, path));
  }
  return out;
}

TEST(Compile, KeptCachesGiveTheCorpusOfFreshOnes) {
  // Test data compiled batch after batch with caches kept from one to the next (a tagging
  // worker's) against fresh caches each time: words the model never saw (no item, remembered as
  // such), batches of 1 to 40 sentences, a batch of new POS tags (more column values than a direct
  // table planned before has room for), caches that are emptied every time (a bound of 1 byte), a
  // batch refused halfway, and caches moved to another model's feature space.
  const std::string tmpl = read_text(data_path("chunking.template")) + "\nB10:%x[-1,1]/%x[0,1]\nU30:%x[-1,0]/%x[0,1]\n";
  FeatureSpace fs = conll_space(tmpl), other = conll_space("U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\nB\n");
  compile_training(fs, read_text(fs, data_path("conll2000.train300.txt")), 1);
  compile_training(other, read_text(other, data_path("conll2002.esp.train300.txt")), 1);
  std::string test = read_text(data_path("conll2000.test100.txt"));
  std::string tags;  // a sentence of 60 tags no model has
  for (int i = 0; i < 60; ++i) tags += "w" + std::to_string(i) + " XX" + std::to_string(i) + " O\n";
  test.insert(test.find("\n\n", test.size() / 2) + 2, tags + "\n");
  for (const std::size_t bound : {std::size_t(32) << 20, std::size_t(1)}) {
    SCOPED_TRACE(::testing::Message() << "max_bytes " << bound);
    CompileCaches caches(bound);
    for (const auto& batch : conll_batches(fs, test, {1, 7, 40, 3})) expect_same_corpus(compile(fs, batch, caches), compile(fs, batch));
    if (bound > 1) EXPECT_GT(caches.bytes(), 0u);
    TextData bad = conll_batches(fs, test, {5}).at(2);  // a token of five columns in its second sentence
    bad.conll.at(1).at(1).columns.resize(5, "x");
    EXPECT_THROW(compile(fs, bad, caches), InputError);
    for (const auto& batch : conll_batches(fs, test, {13})) expect_same_corpus(compile(fs, batch, caches), compile(fs, batch));
    const std::string esp = read_text(data_path("conll2002.esp.testb100.txt"));
    for (const auto& batch : conll_batches(other, esp, {11})) expect_same_corpus(compile(other, batch, caches), compile(other, batch));
  }
}

TEST(Compile, GzipTrainingData) {
  const std::string p = temp_path("train.txt.gz");
  gzFile gz = gzopen(p.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzputs(gz, kSmall);
  ASSERT_EQ(gzclose(gz), Z_OK);
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  const Corpus c = compile_training(fs, read_text(fs, p), 1);
  EXPECT_EQ(c.num_tokens(), 5u);
  EXPECT_EQ(fs.state_attrs.size(), 3u);
}

TEST(Compile, CrfppDocumentationSentence) {
  const std::string p = temp_path("readme.txt");
  write_text(p,
             "He        PRP  B-NP\nreckons   VBZ  B-VP\nthe       DT   B-NP\n"
             "current   JJ   I-NP\naccount   NN   I-NP\ndeficit   NN   I-NP\n"
             "will      MD   B-VP\nnarrow    VB   I-VP\nto        TO   B-PP\n"
             "only      RB   B-NP\n#         #    I-NP\n1.4       CD   I-NP\n"
             "billion   CD   I-NP\n");
  FeatureSpace fs = conll_space(
      "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,0]\nU03:%x[-2,1]\nU04:%x[0,0]/%x[0,1]\n"
      "U05:ABC%x[0,1]123\n");
  const Corpus c = compile_training(fs, read_text(fs, p), 1);
  EXPECT_EQ(state_strings(fs, c, 2), (Strings{"U00:the", "U01:DT", "U02:reckons", "U03:PRP",
                                              "U04:the/DT", "U05:ABCDT123"}));
  EXPECT_EQ(state_strings(fs, c, 0), (Strings{"U00:He", "U01:PRP", "U02:_B-1", "U03:_B-2",
                                              "U04:He/PRP", "U05:ABCPRP123"}));
}

// ---- CRFsuite ------------------------------------------------------------------------------

TEST(Compile, CrfsuiteTrainingAndFrozen) {
  const std::string p = temp_path("train.crfsuite");
  write_text(p, "A\tx\ty:2.5\nB\tx\tz\\:q:0.5\n\nA\tx\ty\n");
  FeatureSpace fs;
  fs.format = InputFormat::crfsuite;
  const TextData d = read_text(fs, p);
  const Corpus c = compile_training(fs, d, 1);
  check_shape(c);
  EXPECT_EQ(fs.labels.strings(), (Strings{"A", "B"}));
  EXPECT_EQ(fs.state_attrs.strings(), (Strings{"x", "y", "z:q"}));
  EXPECT_EQ(c.state_ids, (std::vector<std::uint32_t>{0, 1, 0, 2, 0, 1}));
  EXPECT_EQ(c.state_values, (std::vector<double>{1.0, 2.5, 1.0, 0.5, 1.0, 1.0}));
  EXPECT_EQ(c.source_lines, (std::vector<std::size_t>{1, 4}));
  EXPECT_TRUE(fs.dims().transitions);
  EXPECT_EQ(fs.dims().E, 0u);
  EXPECT_TRUE(c.edge_ids.empty());

  FeatureSpace f2;
  f2.format = InputFormat::crfsuite;
  compile_training(f2, d, 2);
  EXPECT_EQ(f2.state_attrs.strings(), (Strings{"x", "y"}));

  const std::string test = temp_path("test.crfsuite");
  write_text(test, "B\tunknown\ty:3\n\tx\nC\tz\\:q\n");
  const TextData t = read_text(fs, test);
  const Corpus ct = compile(fs, t);
  EXPECT_EQ(ct.state_ids, (std::vector<std::uint32_t>{1, 0, 2}));
  EXPECT_EQ(ct.state_values, (std::vector<double>{3.0, 1.0, 1.0}));
  EXPECT_EQ(ct.labels, (std::vector<std::uint32_t>{1, Corpus::kNoLabel, Corpus::kNoLabel}));
  EXPECT_TRUE(gold_labels(t).empty());  // a token without a label
}

TEST(Compile, CrfsuiteTestDataSlice) {
  FeatureSpace fs;
  fs.format = InputFormat::crfsuite;
  const TextData d = read_text(fs, data_path("conll2000.train60.crfsuite.txt"));
  const Corpus c = compile_training(fs, d, 1);
  check_shape(c);
  EXPECT_EQ(c.num_sentences(), 60u);
  EXPECT_GT(fs.dims().A, 1000u);
}

// ---- errors --------------------------------------------------------------------------------

TEST(CompileErrors, EmptyLabelInCrfsuiteTrainingData) {
  const std::string p = temp_path("nolabel.crfsuite");
  write_text(p, "A\tx\n\tx\ty\n");
  FeatureSpace fs;
  fs.format = InputFormat::crfsuite;
  const TextData d = read_text(fs, p);
  EXPECT_TRUE(throws_input_error([&] { compile_training(fs, d, 1); }, p + ":2: ", "missing label"));
}

TEST(CompileErrors, OneColumnConllTrainingFile) {
  const std::string p = temp_path("one.txt");
  write_text(p, "\nHe\nreckons\n");
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  const TextData d = read_text(fs, p);
  EXPECT_TRUE(throws_input_error([&] { compile_training(fs, d, 1); }, p + ":2: ",
                                 "feature columns and a label column"));
}

TEST(CompileErrors, TemplateColumnOutOfRange) {
  const std::string p = temp_path("two.txt");
  write_text(p, "\n\nHe B-NP\nreckons B-VP\n");
  FeatureSpace fs = conll_space("U00:%x[0,0]\nU01:%x[0,1]\n");
  const TextData d = read_text(fs, p);
  EXPECT_TRUE(throws_input_error([&] { compile_training(fs, d, 1); }, p + ":3: ",
                                 "template column 1 but the data has only 1 feature column"));
}

TEST(CompileErrors, InconsistentColumnsInTrainingData) {
  const std::string p = temp_path("bad.txt");
  write_text(p, "He PRP B-NP\nreckons VBZ\n");  // the case of the CLI test
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  EXPECT_TRUE(throws_input_error([&] { read_text(fs, p); }, p + ":2: ", "expected 3 columns"));
}

TEST(CompileErrors, ReadErrorsCarryTheDataPath) {
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  const std::string missing = temp_dir() + "/missing.txt";
  EXPECT_TRUE(throws_input_error([&] { read_text(fs, missing); }, missing + ": cannot open: "));
  const std::string nul = temp_path("nul.txt");
  write_text(nul, std::string("a B\n\nb\0 C\n", 10));
  EXPECT_TRUE(throws_input_error([&] { read_text(fs, nul); }, nul + ":3: ", "NUL"));
  FeatureSpace cs;
  cs.format = InputFormat::crfsuite;
  const std::string badval = temp_path("badval.crfsuite");
  write_text(badval, "A\tx:1\nB\tx:nan\n");
  EXPECT_TRUE(throws_input_error([&] { read_text(cs, badval); }, badval + ":2: ", "finite"));
}

TEST(CompileErrors, EmptyDataGivesEmptyCorpus) {
  const std::string p = temp_path("empty.txt");
  write_text(p, "\n");
  FeatureSpace fs = conll_space("U00:%x[0,0]\nB\n");
  const Corpus c = compile_training(fs, read_text(fs, p), 1);
  EXPECT_EQ(c.num_sentences(), 0u);
  EXPECT_EQ(c.num_tokens(), 0u);
  EXPECT_TRUE(fs.state_attrs.frozen());
}

TEST(CompileErrors, TrainingTwiceIsRefused) {
  const std::string p = temp_path("small.txt");
  write_text(p, kSmall);
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  const TextData d = read_text(fs, p);
  compile_training(fs, d, 1);
  EXPECT_THROW(compile_training(fs, d, 1), Error);
}

// The streamed compile of training files (crfx train's path) gives the whole text's corpus and
// dictionaries: batches of a few KB (many sentences cut at batch ends), two files read as one,
// min_freq 1 and 2, both formats.
void expect_same_compile(const FeatureSpace& a, const Corpus& ca, const FeatureSpace& b, const Corpus& cb,
                         bool one_file = true) {
  EXPECT_EQ(a.labels.strings(), b.labels.strings());
  EXPECT_EQ(a.state_attrs.strings(), b.state_attrs.strings());
  EXPECT_EQ(a.edge_attrs.strings(), b.edge_attrs.strings());
  EXPECT_EQ(a.feature_columns, b.feature_columns);
  EXPECT_EQ(ca.sentence_offsets, cb.sentence_offsets);
  if (one_file) {  // else each file's own line numbers
    EXPECT_EQ(ca.source_lines, cb.source_lines);
  }
  EXPECT_EQ(ca.labels, cb.labels);
  EXPECT_EQ(ca.state_offsets, cb.state_offsets);
  EXPECT_EQ(ca.state_ids, cb.state_ids);
  EXPECT_EQ(ca.state_values, cb.state_values);
  EXPECT_EQ(ca.edge_offsets, cb.edge_offsets);
  EXPECT_EQ(ca.edge_ids, cb.edge_ids);
  EXPECT_EQ(ca.edge_values, cb.edge_values);
}

/// `path`'s sentences split into two files (at a blank line near the middle).
Strings split_in_two(const std::string& path, const std::string& stem) {
  const std::string text = read_text(path);
  std::size_t cut = text.find("\n\n", text.size() / 2);
  EXPECT_NE(cut, std::string::npos);
  cut += 2;
  const Strings parts{temp_path(stem + ".1"), temp_path(stem + ".2")};
  write_text(parts[0], text.substr(0, cut));
  write_text(parts[1], text.substr(cut));
  return parts;
}

TEST(Compile, StreamedFilesEqualTheWholeText) {
  const std::string templ = read_text(data_path("chunking.template"));
  for (const std::size_t min_freq : {std::size_t(1), std::size_t(2)}) {
    SCOPED_TRACE(::testing::Message() << "min_freq " << min_freq);
    {  // CoNLL, with edge attributes (a B line with a macro)
      const std::string p = data_path("conll2000.train300.txt");
      FeatureSpace whole = conll_space(templ + "\nB10:%x[-1,1]/%x[0,1]\n");
      const Corpus cw = compile_training(whole, read_text(whole, p), min_freq);
      FeatureSpace streamed = conll_space(templ + "\nB10:%x[-1,1]/%x[0,1]\n");
      const Corpus cs = compile_training(streamed, Strings{p}, min_freq, 4096);
      expect_same_compile(whole, cw, streamed, cs);
      const Strings two = split_in_two(p, "conll-part");
      FeatureSpace parts = conll_space(templ + "\nB10:%x[-1,1]/%x[0,1]\n");
      const Corpus cp = compile_training(parts, two, min_freq, 3000);
      expect_same_compile(whole, cw, parts, cp, false);
      EXPECT_GT(cw.edge_ids.size(), 0u);
    }
    {  // CRFsuite attributes
      const std::string p = data_path("conll2000.train60.crfsuite.txt");
      FeatureSpace whole;
      whole.format = InputFormat::crfsuite;
      const Corpus cw = compile_training(whole, read_text(whole, p), min_freq);
      FeatureSpace streamed;
      streamed.format = InputFormat::crfsuite;
      const Corpus cs = compile_training(streamed, Strings{p}, min_freq, 2000);
      expect_same_compile(whole, cw, streamed, cs);
      FeatureSpace parts;
      parts.format = InputFormat::crfsuite;
      const Corpus cp = compile_training(parts, split_in_two(p, "crfsuite-part"), min_freq, 2000);
      expect_same_compile(whole, cw, parts, cp, false);
    }
  }
}

TEST(Compile, StreamedFilesMustAgreeOnColumns) {
  const std::string a = temp_path("cols-a.txt"), b = temp_path("cols-b.txt");
  write_text(a, "He PRP B-NP\nran VBD B-VP\n\n");
  write_text(b, "She PRP extra B-NP\n\n");
  FeatureSpace fs = conll_space("U00:%x[0,0]\n");
  EXPECT_TRUE(throws_input_error([&] { compile_training(fs, Strings{a, b}, 1, 16); }, b + ":1:",
                                 "training files are read as one, so their columns must agree"));
  FeatureSpace one = conll_space("U00:%x[0,0]\n");
  write_text(a, "He PRP B-NP\n\nran VBD x B-VP\n\n");
  EXPECT_TRUE(throws_input_error([&] { compile_training(one, Strings{a}, 1, 4); }, a + ":3:",
                                 "inconsistent column count: expected 3 columns"));
}

}  // namespace
}  // namespace crfx::test
