// CRF++ templates: parsing, expansion against hand-derived CRF++ feature strings (the example of
// the CRF++ documentation), boundaries, and malformed templates.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/template.hpp"
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

/// The sentence of the CRF++ documentation ("Preparing feature templates"), lines 1…13.
ConllSentence crfpp_example() {
  const char* rows[][3] = {{"He", "PRP", "B-NP"},    {"reckons", "VBZ", "B-VP"},
                           {"the", "DT", "B-NP"},    {"current", "JJ", "I-NP"},
                           {"account", "NN", "I-NP"}, {"deficit", "NN", "I-NP"},
                           {"will", "MD", "B-VP"},   {"narrow", "VB", "I-VP"},
                           {"to", "TO", "B-PP"},     {"only", "RB", "B-NP"},
                           {"#", "#", "I-NP"},       {"1.4", "CD", "I-NP"},
                           {"billion", "CD", "I-NP"}};
  ConllSentence s;
  std::size_t line = 1;
  for (const auto& r : rows) {
    ConllToken t;
    t.columns = {r[0], r[1], r[2]};
    t.line = line++;
    s.push_back(t);
  }
  return s;
}

/// Expands the single template line `text` at token `pos` of the example (2 feature columns).
std::string expand1(const std::string& text, std::size_t pos) {
  const FeatureTemplate t = FeatureTemplate::parse(text + "\n", "t");
  const auto& lines = t.unigrams().empty() ? t.edge_bigrams() : t.unigrams();
  EXPECT_EQ(lines.size(), 1u) << text;
  std::string out = "stale";
  FeatureTemplate::expand(lines.at(0), crfpp_example(), 2, pos, out);
  return out;
}

TEST(Template, CrfppDocumentationExample) {
  // Current token "the" (row 2): the table of the CRF++ documentation.
  const std::size_t the = 2;
  EXPECT_EQ(expand1("U:%x[0,0]", the), "U:the");
  EXPECT_EQ(expand1("U:%x[0,1]", the), "U:DT");
  EXPECT_EQ(expand1("U:%x[-1,0]", the), "U:reckons");
  EXPECT_EQ(expand1("U:%x[-2,1]", the), "U:PRP");
  EXPECT_EQ(expand1("U:%x[0,0]/%x[0,1]", the), "U:the/DT");
  EXPECT_EQ(expand1("U:ABC%x[0,1]123", the), "U:ABCDT123");
  // The whole line is the attribute, its "U01:" prefix included.
  EXPECT_EQ(expand1("U01:%x[0,0]", the), "U01:the");
  EXPECT_EQ(expand1("U05:%x[-1,0]/%x[0,0]", the), "U05:reckons/the");
  EXPECT_EQ(expand1("U", the), "U");
  EXPECT_EQ(expand1("B01:%x[1,1]", the), "B01:JJ");
}

TEST(Template, BoundariesBeforeAndAfterTheSentence) {
  const std::size_t first = 0, second = 1, last = 12;
  EXPECT_EQ(expand1("U:%x[-1,0]", first), "U:_B-1");
  EXPECT_EQ(expand1("U:%x[-2,0]", first), "U:_B-2");
  EXPECT_EQ(expand1("U:%x[-2,1]", second), "U:_B-1");
  EXPECT_EQ(expand1("U:%x[-2,1]/%x[-1,1]/%x[0,1]", second), "U:_B-1/PRP/VBZ");
  EXPECT_EQ(expand1("U:%x[1,0]", last), "U:_B+1");
  EXPECT_EQ(expand1("U:%x[2,1]", last), "U:_B+2");
  EXPECT_EQ(expand1("U:%x[2,0]", last - 1), "U:_B+1");
  EXPECT_EQ(expand1("U:%x[0,0]/%x[1,0]", last), "U:billion/_B+1");
  // CRF++ stops at distance 8; the same naming continues here.
  EXPECT_EQ(expand1("U:%x[-10,0]", first), "U:_B-10");
  EXPECT_EQ(expand1("U:%x[20,0]", last), "U:_B+20");
  EXPECT_EQ(expand1("U:%x[-13,0]", last), "U:_B-1");
}

TEST(Template, ParseStructure) {
  const std::string text =
      "# comment\n"
      "\n"
      "U00:%x[-2,0]\n"
      "   \t\n"
      "U01:%x[0,1]/%x[1,0]x\n"
      "U00:%x[-2,0]\n"  // duplicates are allowed (CRF++ allows them)
      "B\n"
      "B01:%x[-1,3]\n"
      "U\n";
  const FeatureTemplate t = FeatureTemplate::parse(text, "name");
  EXPECT_EQ(t.source(), text);
  ASSERT_EQ(t.unigrams().size(), 4u);
  ASSERT_EQ(t.edge_bigrams().size(), 1u);
  EXPECT_TRUE(t.has_transitions());
  EXPECT_EQ(t.max_column(), 3);
  const auto& u1 = t.unigrams()[1];
  EXPECT_EQ(u1.source_line, 5u);
  ASSERT_EQ(u1.pieces.size(), 5u);
  EXPECT_FALSE(u1.pieces[0].is_macro);
  EXPECT_EQ(u1.pieces[0].text, "U01:");
  EXPECT_TRUE(u1.pieces[1].is_macro);
  EXPECT_EQ(u1.pieces[1].row, 0);
  EXPECT_EQ(u1.pieces[1].col, 1);
  EXPECT_EQ(u1.pieces[2].text, "/");
  EXPECT_EQ(u1.pieces[3].row, 1);
  EXPECT_EQ(u1.pieces[3].col, 0);
  EXPECT_EQ(u1.pieces[4].text, "x");
  EXPECT_TRUE(u1.has_macro());
  EXPECT_FALSE(t.unigrams()[3].has_macro());
  EXPECT_EQ(t.edge_bigrams()[0].pieces[1].row, -1);
  EXPECT_EQ(t.edge_bigrams()[0].source_line, 8u);

  const FeatureTemplate only_edges = FeatureTemplate::parse("U:%x[0,0]\nB:%x[0,0]\n", "n");
  EXPECT_FALSE(only_edges.has_transitions());
  EXPECT_EQ(only_edges.edge_bigrams().size(), 1u);
  const FeatureTemplate none = FeatureTemplate::parse("# nothing\n", "n");
  EXPECT_EQ(none.max_column(), -1);
  EXPECT_FALSE(none.has_transitions());
}

TEST(Template, LoadChunkingTemplateAndCrlf) {
  const FeatureTemplate t = FeatureTemplate::load(data_path("chunking.template"));
  EXPECT_EQ(t.unigrams().size(), 19u);
  EXPECT_TRUE(t.edge_bigrams().empty());
  EXPECT_TRUE(t.has_transitions());
  EXPECT_EQ(t.max_column(), 1);

  const std::string p = temp_path("crlf.template");
  write_text(p, "# c\r\nU00:%x[0,0]\r\n\r\nB\r\n");
  const FeatureTemplate c = FeatureTemplate::load(p);
  ASSERT_EQ(c.unigrams().size(), 1u);
  EXPECT_TRUE(c.has_transitions());
  EXPECT_EQ(c.unigrams()[0].source_line, 2u);
  std::string out;
  FeatureTemplate::expand(c.unigrams()[0], crfpp_example(), 2, 0, out);
  EXPECT_EQ(out, "U00:He");  // no stray '\r'
  EXPECT_TRUE(throws_input_error([&] { FeatureTemplate::load(p + ".missing"); },
                                 p + ".missing: cannot open: "));
}

TEST(Template, UnknownTypeNamesTheLine) {
  EXPECT_TRUE(throws_input_error(
      [] { FeatureTemplate::parse("U00:%x[0,0]\n\nX01:%x[0,0]\n", "my.template"); },
      "my.template:3: ", "unknown template type"));
  EXPECT_TRUE(throws_input_error([] { FeatureTemplate::parse(" U00:%x[0,0]\n", "t"); }, "t:1: ",
                                 "unknown template type"));
  EXPECT_TRUE(throws_input_error([] { FeatureTemplate::parse("u00:%x[0,0]\n", "t"); }, "t:1: ",
                                 "unknown template type"));
}

TEST(Template, MalformedMacrosNameTheLine) {
  const std::vector<std::string> bad = {
      "U:%y[0,0]",  "U:%x(0,0)",   "U:%x[0 ,0]", "U:%x[ 0,0]", "U:%x[a,0]",  "U:%x[0,-1]",
      "U:%x[0,0",   "U:%x[+1,0]",  "U:%",        "U:%x",       "U:%x[,0]",   "U:%x[0,]",
      "U:%x[0]",    "U:100%",      "U:%%",       "B:%X[0,0]",  "U:%x[0,1x]", "U:%x[99999999999,0]"};
  for (const std::string& line : bad) {
    EXPECT_TRUE(throws_input_error(
        [&] { FeatureTemplate::parse("# header\nU00:%x[0,0]\n" + line + "\nB\n", "bad.tpl"); },
        "bad.tpl:3: ", "bad macro"))
        << line;
  }
}

TEST(Template, ColumnBeyondFeatureColumnsNamesTheTokenLine) {
  const FeatureTemplate t = FeatureTemplate::parse("U:%x[0,2]\nU:%x[-5,2]\n", "t");
  const ConllSentence s = crfpp_example();
  std::string out;
  try {
    FeatureTemplate::expand(t.unigrams()[0], s, 2, 4, out);
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 5u);  // the current token's line; the caller names the file
    EXPECT_EQ(e.problem(), "template column 2 but the data has only 2 feature columns");
  }
  // Checked even where the row falls outside the sentence (as CRF++ does).
  EXPECT_THROW(FeatureTemplate::expand(t.unigrams()[1], s, 2, 0, out), InputError);
  EXPECT_NO_THROW(FeatureTemplate::expand(t.unigrams()[0], s, 3, 4, out));
  EXPECT_EQ(out, "U:I-NP");
}

}  // namespace
}  // namespace crfx::test
