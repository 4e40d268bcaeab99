// CRFsuite data read as its lines' text (TextReader::keep_lines, CrfsuiteLines: what tagging
// reads): the same sequences, labels, attributes and line numbers as the sentences read_crfsuite
// gives, the same errors at the same lines with the sequences before a bad one left whole, and
// the same compiled corpus, gold labels and tags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "corpus_checks.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::expect_same_corpus;
using test::data_path;
using test::temp_path;
using test::write_text;

/// Escapes, values, empty fields, an empty label, a label alone, CRLF, blank lines of spaces.
const char* const kTricky =
    "B-NP\tw[0]=He\ta\\:b:2.5\tx\\\\y\tp\\:q\r\n"
    "I-NP\t\tpos=PRP:-1e-3\t\n"
    " \t \n"
    "\n"
    "\tw=x:0\ta:b:7\tc\\\\:3\tw[0]=hotel\\/casino\n"
    "O\n";

TextData read_all(const std::string& path, bool lines, std::size_t max_tokens = std::size_t(-1)) {
  TextReader reader(InputFormat::crfsuite, path);
  reader.keep_lines(lines);
  TextData d;
  d.format = InputFormat::crfsuite;
  d.path = path;
  while (reader.append(d, max_tokens) > 0) {
  }
  return d;
}

void expect_same_tokens(const std::string& path, std::size_t max_tokens) {
  SCOPED_TRACE(path + ", batches of " + std::to_string(max_tokens) + " tokens");
  const TextData sentences = read_all(path, false), lines = read_all(path, true, max_tokens);
  const CrfsuiteLines& l = lines.crfsuite_lines;
  EXPECT_TRUE(lines.crfsuite.empty());
  ASSERT_EQ(lines.num_sentences(), sentences.num_sentences());
  for (std::size_t i = 0; i < l.size(); ++i) {
    const CrfsuiteSentence& s = sentences.crfsuite[i];
    ASSERT_EQ(l.tokens(i), s.size());
    for (std::size_t t = 0; t < s.size(); ++t) {
      const std::string_view line = l.line(l.first_token(i) + t);
      EXPECT_EQ(CrfsuiteLines::label(line), s[t].label);
      EXPECT_EQ(l.sentence_lines[i] + t, s[t].line);
      std::vector<std::pair<std::string, double>> attributes, expected;
      for_each_attribute(line, path, s[t].line,
                         [&](std::string_view name, double value) { attributes.emplace_back(name, value); });
      for (const CrfsuiteAttribute& a : s[t].attributes) expected.emplace_back(a.name, a.value);
      EXPECT_EQ(attributes, expected) << line;
    }
  }
  EXPECT_EQ(gold_labels(lines), gold_labels(sentences));
}

TEST(CrfsuiteLines, TheSameTokensAsTheSentences) {
  const std::string p = temp_path("tricky.crfsuite");
  write_text(p, kTricky);
  expect_same_tokens(p, std::size_t(-1));
  expect_same_tokens(p, 1);
  expect_same_tokens(data_path("conll2000.test30.crfsuite.txt"), 100);
  EXPECT_EQ(read_all(p, true).crfsuite_lines.line(0), "B-NP\tw[0]=He\ta\\:b:2.5\tx\\\\y\tp\\:q");  // CR stripped
}

/// The message of the InputError reading `path` throws, and the lines read before it.
std::string lines_error(const std::string& path, CrfsuiteLines& out) {
  CrfsuiteReader reader(path);
  try {
    while (reader.next(out)) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string sentences_error(const std::string& path) {
  try {
    read_crfsuite(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CrfsuiteLines, ABadLineGivesTheSameErrorAndKeepsTheSequencesBeforeIt) {
  const std::string p = temp_path("bad.crfsuite");
  for (const std::string bad : {"I-NP\tw=Note:", "I-NP\t:2", "Two NN B-NP", "I-NP\ta:1e20"}) {
    SCOPED_TRACE(bad);
    write_text(p, "B-NP\tw=a\nI-NP\tw=b\n\nB-NP\tw=c\n" + bad + "\nI-NP\tw=d\n");
    CrfsuiteLines out;
    const std::string message = lines_error(p, out);
    EXPECT_EQ(message, sentences_error(p));
    EXPECT_EQ(message.rfind(p + ":5: ", 0), 0u) << message;
    // The first sequence whole; nothing of the second (its first line was read before the error).
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out.token_ends.size(), 2u);
    EXPECT_EQ(out.sentence_lines, (std::vector<std::size_t>{1}));
    EXPECT_EQ(out.text, "B-NP\tw=aI-NP\tw=b");
  }
}

TEST(CrfsuiteLines, CompileGivesTheCorpusOfTheSentences) {
  const std::string tricky = temp_path("tricky.crfsuite"), labelled = temp_path("labelled.crfsuite");
  write_text(tricky, kTricky);
  std::string text = kTricky;
  text.replace(text.find("\n\n\t") + 2, 0, "B-NP");  // the empty label given one
  write_text(labelled, text);
  for (const auto& [train, test] : {std::pair<std::string, std::string>{labelled, tricky},
                                    {data_path("conll2000.train60.crfsuite.txt"),
                                     data_path("conll2000.test30.crfsuite.txt")}}) {
    SCOPED_TRACE(test);
    // Lines as training data too: the same dictionaries and corpus.
    FeatureSpace fs, from_lines;
    fs.format = from_lines.format = InputFormat::crfsuite;
    const Corpus trained = compile_training(fs, read_all(train, false), 1);
    expect_same_corpus(compile_training(from_lines, read_all(train, true), 1), trained);
    EXPECT_EQ(from_lines.state_attrs.strings(), fs.state_attrs.strings());
    EXPECT_EQ(from_lines.labels.strings(), fs.labels.strings());
    const Corpus compiled = compile(fs, read_all(test, true));
    expect_same_corpus(compiled, compile(fs, read_all(test, false)));
    if (test == tricky) {  // a value not 1 after a 1, and every attribute known: all values kept
      EXPECT_EQ(compiled.state_values, (std::vector<double>{1, 2.5, 1, 1, -1e-3, 0, 7, 3, 1}));
      EXPECT_EQ(compiled.labels[2], Corpus::kNoLabel);
    } else {  // all 1: none kept
      EXPECT_TRUE(compiled.state_values.empty());
      EXPECT_FALSE(compiled.state_ids.empty());
    }
  }
}

/// What tagging `path` alone prints, read as sentences (TextReader without keep_lines).
std::string tag_alone(Tagger& tagger, const std::string& path) {
  TextReader reader(tagger.features(), path);
  TextData batch;
  Tagged tagged;
  std::string out;
  while (reader.next(batch, 1000)) {
    tagger.tag(batch, tagged);
    tagger.format(batch, tagged, out);
  }
  return out;
}

// A bad line in the second sequence of an input: with keep_going the run drops that input and
// tags the others as if each were alone, in batches that hold the sequences of several inputs
// (the bad sequence's first line, read into the batch, must not stay in it).
TEST(CrfsuiteLines, TaggingGoesOnPastABadSequence) {
  const std::string model = temp_path("lines.model");
  std::string log;
  ASSERT_EQ(test::run("'" + test::crfx_binary() + "' train '" + data_path("conll2000.train60.crfsuite.txt") +
                          "' --format crfsuite --max-iterations 10 --quiet -m '" + model + "'",
                      &log),
            0)
      << log;
  const std::string text = test::read_text(data_path("conll2000.test30.crfsuite.txt"));
  std::vector<std::string> sequences;  // each with its blank line
  for (std::size_t b = 0, e; b < text.size(); b = e + 2) {
    e = text.find("\n\n", b);
    if (e == std::string::npos) e = text.size() - 1;
    sequences.push_back(text.substr(b, e + 2 - b));
  }
  ASSERT_GE(sequences.size(), 6u);
  const std::string dir = test::temp_dir();
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) paths.push_back(dir + "/in" + std::to_string(i) + ".txt");
  write_text(paths[0], sequences[0] + sequences[1]);
  write_text(paths[1], sequences[2] + "B-NP\tw[0]=He\nI-NP\tw[0]=Note:\n\n" + sequences[3]);
  write_text(paths[2], sequences[4] + sequences[5]);
  Model m = load_model(model);
  const Dims dims = m.features.dims();
  BackendOptions bo;
  bo.device = DeviceKind::cpu;
  Tagger tagger(std::move(m), make_backend(dims, bo, nullptr), TagOptions());
  const std::string expected[] = {tag_alone(tagger, paths[0]), "", tag_alone(tagger, paths[2])};
  const std::string message = sentences_error(paths[1]);
  ASSERT_EQ(message.rfind(paths[1] + ":" + std::to_string(std::count(sequences[2].begin(), sequences[2].end(), '\n') + 2) + ": ", 0), 0u)
      << message;
  for (unsigned workers : {1u, 2u})
    for (std::size_t batch_tokens : {std::size_t(3), std::size_t(1) << 18}) {
      SCOPED_TRACE(std::to_string(workers) + " workers, batches of " + std::to_string(batch_tokens) + " tokens");
      TagRunOptions ro;
      ro.workers = workers;
      ro.batch_tokens = batch_tokens;
      ro.keep_going = true;
      const std::string out = test::temp_dir();
      const std::vector<std::string> outputs = output_paths(list_inputs(paths, false), out, ".tag");
      TagRunStats stats;
      {
        DirectoryOutput sink(outputs);
        stats = tag_inputs(tagger, list_inputs(paths, false), sink, ro);
      }
      ASSERT_EQ(stats.failures.size(), 1u);
      EXPECT_EQ(stats.failures[0].input, 1u);
      EXPECT_EQ(stats.failures[0].message, message);
      EXPECT_EQ(test::read_text(outputs[0]), expected[0]);
      EXPECT_FALSE(std::filesystem::exists(outputs[1]));
      EXPECT_EQ(test::read_text(outputs[2]), expected[2]);
    }
}

}  // namespace
}  // namespace crfx
