// Data of one shape read as another (issue 42, "silent wrong results"): each used to exit 0 with a
// useless model or useless tags, and is now refused with the likely cause; the real files of each
// format still train and tag. Through the CLI, as a user meets them.
//
//   tab-separated CoNLL columns trained with --format crfsuite   → refused, naming --format conll
//   tab-separated CoNLL columns tagged with a CRFsuite model     → refused, naming --format conll
//   word + gold chunk tagged with a word, POS, chunk model       → refused, naming column 1
//
// And issue 42's messages as a run shows them (Issue42Messages): what lbfgs with c1 > 0 runs, no
// "seed 00N" in a message.
//
// The rules (with their numbers) are at the code: host/io/crfsuite.cpp (CrfsuiteReader::conll_shape)
// and host/features/compile.cpp (check_feature_columns, check_conll_shape).
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crfx::test {
namespace {

std::string quote(const std::string& s) { return "'" + s + "'"; }
bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

/// `path`'s lines with `f` applied to each non-blank one (blank lines kept: sentence breaks).
template <class F>
std::string map_lines(const std::string& text, F f) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) {
      out += "\n";
      continue;
    }
    std::istringstream fields(line);
    std::vector<std::string> columns;
    for (std::string c; fields >> c;) columns.push_back(c);
    const std::string mapped = f(columns);
    if (!mapped.empty()) out += mapped + "\n";
  }
  return out;
}

std::string join(const std::vector<std::string>& columns, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < columns.size(); ++i) s += (i ? sep : "") + columns[i];
  return s;
}

/// A CoNLL file of tests/data with its columns separated by tabs; `drop_colons` leaves out the
/// tokens whose POS is ':' (as CRFsuite lines they fail to parse, which takes another path).
std::string tab_separated(const std::string& name, bool drop_colons) {
  return map_lines(read_text(data_path(name)), [&](const std::vector<std::string>& c) {
    return drop_colons && c.size() > 1 && c[1] == ":" ? std::string() : join(c, "\t");
  });
}

/// Trains a model quickly; returns its path (the test fails on a non-zero exit).
std::string train_model(const std::string& name, const std::string& data, const std::string& options) {
  const std::string model = temp_path(name);
  std::string out;
  const int rc = run(quote(crfx_binary()) + " train " + quote(data) + " " + options + " -m " + quote(model) +
                         " --max-iterations 10 -q",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  return model;
}

std::string conll_model() {
  return train_model("conll.model", data_path("conll2000.train300.txt"),
                     "-t " + quote(data_path("chunking.template")));
}

std::string crfsuite_model() {
  return train_model("crfsuite.model", data_path("conll2000.train60.crfsuite.txt"), "--format crfsuite");
}

// ---- the three confusions ------------------------------------------------------------------------

TEST(FormatConfusion, TabSeparatedConllTrainedAsCrfsuiteIsRefused) {
  // Both ways in: lines that all parse (refused when compiled for training), and the whole file,
  // whose ':' POS tokens fail to parse as attributes (refused by the reader, with the cause).
  for (const bool drop_colons : {true, false}) {
    SCOPED_TRACE(drop_colons ? "without ':' tokens" : "the whole file");
    const std::string data = temp_path("train.tsv"), model = temp_path("out.model");
    write_text(data, tab_separated("conll2000.train300.txt", drop_colons));
    std::string out;
    const int rc = run(quote(crfx_binary()) + " train " + quote(data) + " --format crfsuite -m " + quote(model) +
                           " --max-iterations 10 -q",
                       &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("look like CoNLL columns, not CRFsuite attribute lines"), std::string::npos) << out;
    EXPECT_NE(out.find("--format conll"), std::string::npos) << out;
    EXPECT_FALSE(exists(model));
  }
}

TEST(FormatConfusion, ConllColumnsTaggedWithACrfsuiteModelAreRefused) {
  const std::string model = crfsuite_model();
  for (const bool drop_colons : {true, false}) {
    SCOPED_TRACE(drop_colons ? "without ':' tokens" : "the whole file");
    const std::string data = temp_path("test.tsv"), tagged = temp_path("tagged.txt");
    write_text(data, tab_separated("conll2000.test100.txt", drop_colons));
    std::string out;
    const int rc = run(quote(crfx_binary()) + " tag " + quote(data) + " -m " + quote(model) + " -o " +
                           quote(tagged) + " -q",
                       &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("look like CoNLL columns, not CRFsuite attribute lines"), std::string::npos) << out;
    EXPECT_NE(out.find("--format conll"), std::string::npos) << out;
    if (drop_colons) {
      EXPECT_NE(out.find(" attributes are unknown to the model"), std::string::npos) << out;
    }
    EXPECT_FALSE(exists(tagged));
  }
}

TEST(FormatConfusion, GoldChunksWhereThePosColumnBelongsAreRefused) {
  // word, chunk (2 columns) for a word, POS, chunk model (2 feature columns): the chunk tags would
  // be read as POS tags and the file tagged without a gold column.
  const std::string model = conll_model();
  const std::string data = temp_path("word_chunk.txt"), tagged = temp_path("tagged.txt");
  write_text(data, map_lines(read_text(data_path("conll2000.test100.txt")),
                             [](const std::vector<std::string>& c) { return c[0] + " " + c[2]; }));
  std::string out;
  const int rc =
      run(quote(crfx_binary()) + " tag " + quote(data) + " -m " + quote(model) + " -o " + quote(tagged) + " -q", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("word_chunk.txt:1: column 1 does not hold what the model was trained on: 2000 of the first "
                     "2000 tokens have a value there that the model never saw in that column (B-NP, I-NP, B-VP, …"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("(template line 16, U12:%x[0,1])"), std::string::npos) << out;
  EXPECT_FALSE(exists(tagged));

  // Columns swapped (POS, word, chunk): column 0 holds POS tags where words were trained.
  write_text(data, map_lines(read_text(data_path("conll2000.test100.txt")), [](const std::vector<std::string>& c) {
               return c[1] + " " + c[0] + " " + c[2];
             }));
  EXPECT_NE(run(quote(crfx_binary()) + " tag " + quote(data) + " -m " + quote(model) + " -o " + quote(tagged) + " -q",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("column 0 does not hold what the model was trained on"), std::string::npos) << out;
}

// ---- what must keep working -----------------------------------------------------------------------

TEST(FormatConfusion, RealCrfsuiteFilesStillTrainAndTag) {
  const std::string model = crfsuite_model();
  const std::string tagged = temp_path("tagged.txt");
  std::string out;
  EXPECT_EQ(run(quote(crfx_binary()) + " tag " + quote(data_path("conll2000.test30.crfsuite.txt")) + " -m " +
                    quote(model) + " -o " + quote(tagged) + " -q",
                &out),
            0)
      << out;
  EXPECT_TRUE(exists(tagged));
  // CRFsuite lines of plain attributes (no '=') with a fixed count: the label still comes first.
  const std::string plain = temp_path("plain.cs");
  write_text(plain, map_lines(read_text(data_path("conll2000.train300.txt")), [](const std::vector<std::string>& c) {
               const bool colon = c[0].find(':') != std::string::npos || c[1].find(':') != std::string::npos;
               return colon ? std::string() : c[2] + "\t" + c[0] + "\t" + c[1];  // ':' would need \:
             }));
  EXPECT_EQ(run(quote(crfx_binary()) + " train " + quote(plain) + " --format crfsuite -m " +
                    quote(temp_path("plain.model")) + " --max-iterations 5 -q",
                &out),
            0)
      << out;
}

TEST(FormatConfusion, ConllFilesStillTrainAndTag) {
  const std::string model = conll_model();
  const std::string tagged = temp_path("tagged.txt");
  std::string out;
  auto tag = [&](const std::string& data) {
    return run(quote(crfx_binary()) + " tag " + quote(data) + " -m " + quote(model) + " -o " + quote(tagged) + " -q",
               &out);
  };
  EXPECT_EQ(tag(data_path("conll2000.test100.txt")), 0) << out;  // word, POS, gold chunk
  const std::string words_pos = temp_path("word_pos.txt");       // word, POS: the model's F columns
  write_text(words_pos, map_lines(read_text(data_path("conll2000.test100.txt")),
                                  [](const std::vector<std::string>& c) { return c[0] + " " + c[1]; }));
  EXPECT_EQ(tag(words_pos), 0) << out;
  const std::string tabs = temp_path("test.tsv");  // tab-separated is CoNLL too
  write_text(tabs, tab_separated("conll2000.test100.txt", false));
  EXPECT_EQ(tag(tabs), 0) << out;
  EXPECT_EQ(run(quote(crfx_binary()) + " train " + quote(tabs) + " -t " + quote(data_path("chunking.template")) +
                    " -m " + quote(temp_path("tabs.model")) + " --max-iterations 5 -q",
                &out),
            0)
      << out;
}

TEST(FormatConfusion, ManyNewWordsAreNotAColumnConfusion) {
  // A model of 20 sentences: most words of the test file are new to it, but words are many
  // distinct values, not a tag set (condition 2 of check_feature_columns) — tagged, not refused.
  const std::string small = temp_path("small.txt");
  std::string text = read_text(data_path("conll2000.train300.txt")), head;
  for (std::size_t pos = 0, sentences = 0; sentences < 20; ++sentences) {
    const std::size_t end = text.find("\n\n", pos);
    head += text.substr(pos, end + 2 - pos);
    pos = end + 2;
  }
  write_text(small, head);
  const std::string model = train_model("small.model", small, "-t " + quote(data_path("chunking.template")));
  std::string out;
  EXPECT_EQ(run(quote(crfx_binary()) + " tag " + quote(data_path("conll2000.test100.txt")) + " -m " + quote(model) +
                    " -o " + quote(temp_path("tagged.txt")) + " -q",
                &out),
            0)
      << out;
  // Spanish (CoNLL-2002) with the English model: a word column of new words is tagged, but its
  // POS column holds another tag set, which the model never saw — refused, naming column 1.
  EXPECT_NE(run(quote(crfx_binary()) + " tag " + quote(data_path("conll2002.esp.testb100.txt")) + " -m " +
                    quote(model) + " -o " + quote(temp_path("tagged.txt")) + " -q",
                &out),
            0);
  EXPECT_NE(out.find("column 1 does not hold what the model was trained on"), std::string::npos) << out;
}

// ---- issue 42's messages, as a run shows them ------------------------------------------------------

TEST(Issue42Messages, LbfgsWithC1SaysItRunsOwlqn) {
  const std::string base = quote(crfx_binary()) + " train " + quote(data_path("conll2000.train300.txt")) + " -t " +
                           quote(data_path("chunking.template")) + " -m " + quote(temp_path("l.model")) +
                           " -a lbfgs --max-iterations 2";
  std::string out;
  ASSERT_EQ(run(base + " --c1 1", &out), 0) << out;
  EXPECT_NE(out.find("training: lbfgs with c1 > 0, i.e. OWL-QN (Andrew & Gao 2007), the L1 variant of L-BFGS, "
                     "c1 = 1, c2 = "),
            std::string::npos)
      << out;
  ASSERT_EQ(run(base + " --c1 0", &out), 0) << out;
  EXPECT_NE(out.find("training: lbfgs, c1 = 0, c2 = "), std::string::npos) << out;
  EXPECT_EQ(out.find("OWL-QN"), std::string::npos) << out;
}

TEST(Issue42Messages, NoSeedNumbersInTheBinary) {
  // "seed 001's objective" meant nothing to a user: the papers are named by author and year. The
  // binary's text holds every message, and no comment.
  const std::string binary = read_text(crfx_binary());
  for (const char* seed : {"seed 000", "seed 001", "seed 002", "seed 003", "seed 004", "Seed 00"})
    EXPECT_EQ(binary.find(seed), std::string::npos) << seed;
  EXPECT_NE(binary.find("the objective of Huang, Hsieh, Chang & Lin 2009"), std::string::npos);
}

}  // namespace
}  // namespace crfx::test
