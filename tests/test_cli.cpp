// End-to-end: the crfx binary on the bundled CoNLL-2000 and CRFsuite slices.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>
#include <sstream>
#include <regex>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace crfx::test {
namespace {

std::string crfx() { return crfx_binary(); }
std::string q(const std::string& s) { return "'" + s + "'"; }

const std::string kTrain = data_path("conll2000.train300.txt");
const std::string kTest = data_path("conll2000.test100.txt");
const std::string kTemplate = data_path("chunking.template");

/// Trains once per test binary (shared by the tests below).
const std::string& trained_model() {
  static const std::string model = [] {
    const std::string m = temp_path("chunk.model");
    std::string out;
    const int rc = run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m) +
                           " --threads 2 --quiet",
                       &out);
    if (rc != 0) throw std::runtime_error("training failed: " + out);
    return m;
  }();
  return model;
}

TEST(Cli, TrainTagEvalEndToEnd) {
  const std::string tagged = temp_path("test.tagged");
  std::string out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -o " + q(tagged) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged), &out), 0) << out;
  // "accuracy:  xx.xx%; precision: ...; FB1:  xx.xx"
  const auto pos = out.find("FB1:");
  ASSERT_NE(pos, std::string::npos) << out;
  const double f1 = std::stod(out.substr(pos + 4));
  // L-BFGS with the defaults (observed pairs) is deterministic: 89.07 on this slice (300 training
  // sentences; 89.04 with every pair). A change of more than half a point means the objective or
  // the optimizer changed.
  EXPECT_NEAR(f1, 89.07, 0.5) << out;
}

TEST(Cli, SameModelBytesForAnyThreadCount) {
  const std::string m1 = temp_path("t1.model"), m3 = temp_path("t3.model");
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m1) + " --threads 1 --quiet --max-iterations 25", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m3) + " --threads 3 --quiet --max-iterations 25", &out), 0) << out;
  EXPECT_EQ(read_text(m1), read_text(m3));
}

TEST(Cli, LogCsvAndDevF1) {
  const std::string m = temp_path("m.model"), log = temp_path("train.csv");
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m) + " --log " + q(log) +
                    " --dev " + q(kTest) + " --max-iterations 5 --device cpu",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("dev F1"), std::string::npos) << out;
  EXPECT_NE(out.find("device: cpu"), std::string::npos) << out;
  const std::string csv = read_text(log);
  EXPECT_EQ(csv.rfind("iteration,passes,objective,gradient_norm,active_features,seconds,dev_f1\n", 0), 0u) << csv;
  std::size_t rows = 0;
  for (char c : csv) rows += c == '\n';
  EXPECT_EQ(rows, 6u) << csv;  // header + 5 iterations
  // The saved model (compacted, renumbered) tags the dev data exactly as the in-memory weights
  // did when the last CSV row was written: same F1.
  const std::string last = csv.substr(csv.rfind('\n', csv.size() - 2) + 1);
  const double dev_f1 = std::stod(last.substr(last.rfind(',') + 1));
  const std::string tagged = temp_path("dev.tagged");
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(m) + " -o " + q(tagged) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged), &out), 0) << out;
  const auto pos = out.find("FB1:");
  ASSERT_NE(pos, std::string::npos) << out;
  EXPECT_NEAR(std::stod(out.substr(pos + 4)), dev_f1, 0.005) << last << out;
}

TEST(Cli, LogOfThousandsOfIterationsHasEveryRow) {
  // Past its first rows the log is rewritten only when it has grown by an eighth or a second has
  // passed (not after every row): what a run ends with must still be every row, in order.
  std::string head, line;
  std::istringstream in(read_text(kTrain));
  for (int i = 0; i < 12 && std::getline(in, line); ++i) head += line + "\n";
  const std::string data = temp_path("log-tiny.txt"), log = temp_path("log-tiny.csv");
  write_text(data, head);
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(data) + " -t " + q(kTemplate) + " -a ap --epochs 3000 -q -m " +
                    q(temp_path("log-tiny.model")) + " --log " + q(log),
                &out),
            0)
      << out;
  std::istringstream csv(read_text(log));
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line.rfind("iteration,", 0), 0u) << line;
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    ASSERT_EQ(line.substr(0, line.find(',')), std::to_string(rows)) << line;
  }
  EXPECT_EQ(rows, 3000);
}

/// `text` without its last column (a CoNLL-2000 slice "word POS chunk" becomes POS-tagging data).
std::string drop_last_column(const std::string& text) {
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    const auto cut = line.rfind(' ');
    out += (cut == std::string::npos ? line : line.substr(0, cut)) + "\n";
  }
  return out;
}

// A tag set without chunk prefixes (POS): crfx eval reports accuracy and per-label scores, and
// the training log's dev figure is the token accuracy, named so.
TEST(Cli, PosTagsGetTheItemReportAndDevAccuracy) {
  const std::string train = temp_path("pos.train"), dev = temp_path("pos.dev"), tmpl = temp_path("pos.template");
  write_text(train, drop_last_column(read_text(kTrain)));
  write_text(dev, drop_last_column(read_text(kTest)));
  write_text(tmpl, "U00:%x[0,0]\nU01:%x[-1,0]\nU02:%x[1,0]\nB\n");
  const std::string m = temp_path("pos.model"), log = temp_path("pos.csv"), tagged = temp_path("pos.tagged");
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(train) + " -t " + q(tmpl) + " -m " + q(m) + " --log " + q(log) + " --dev " +
                    q(dev) + " --max-iterations 5",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("dev accuracy"), std::string::npos) << out;
  EXPECT_EQ(out.find("dev F1"), std::string::npos) << out;
  const std::string csv = read_text(log);
  EXPECT_EQ(csv.rfind("iteration,passes,objective,gradient_norm,active_features,seconds,dev_accuracy\n", 0), 0u)
      << csv;
  const std::string last = csv.substr(csv.rfind('\n', csv.size() - 2) + 1);
  const double dev_accuracy = std::stod(last.substr(last.rfind(',') + 1));

  ASSERT_EQ(run(crfx() + " tag " + q(dev) + " -m " + q(m) + " -o " + q(tagged) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged), &out), 0) << out;
  EXPECT_EQ(out.find("phrases"), std::string::npos) << "not the chunk report:\n" << out;
  ASSERT_EQ(out.rfind("processed ", 0), 0u) << out;
  const auto pos = out.find("accuracy: ");
  ASSERT_NE(pos, std::string::npos) << out;
  EXPECT_NEAR(std::stod(out.substr(pos + 10)), dev_accuracy, 0.005) << last << out;
  for (const char* row : {"\nNN ", "\nmacro average ", "\nmicro average "})
    EXPECT_NE(out.find(row), std::string::npos) << row << " in\n" << out;

  // --mode chunk forces conlleval's report; --confusion adds the matrix; a bad mode is a usage error.
  ASSERT_EQ(run(crfx() + " eval " + q(tagged) + " --mode chunk", &out), 0) << out;
  EXPECT_EQ(out.rfind("processed ", 0), 0u) << out;
  EXPECT_NE(out.find(" phrases; found: "), std::string::npos) << out;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged) + " --confusion", &out), 0) << out;
  EXPECT_NE(out.find("confusion of the 10 labels with the most errors"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " eval " + q(tagged) + " --mode tokens", &out), 2);
  EXPECT_NE(out.find("--mode: 'tokens' is none of auto, chunk, item"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " eval " + q(tagged) + " --mode item --raw", &out), 2);
  EXPECT_NE(out.find("--raw gives the chunk report"), std::string::npos) << out;
}

// Misuses a new user makes: each refused with its reason and a non-zero exit, nothing of the
// user's overwritten, no file named "-" created.
TEST(Cli, MisusesAreRefusedWithTheReason) {
  const std::string model = trained_model();
  const std::string before = read_text(model);
  const std::string empty_template = temp_path("empty.template");
  write_text(empty_template, "# only a comment\n");
  const std::string dir = temp_path("misuse");
  std::filesystem::create_directories(dir);
  // The word column last, read as the label: thousands of "labels", most seen once.
  const std::string word_last = temp_path("word-last.txt"), word_template = temp_path("word-last.template");
  {
    std::istringstream in(read_text(kTrain));
    std::string line, text;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string w, pos, chunk;
      text += (f >> w >> pos >> chunk) ? pos + " " + chunk + " " + w + "\n" : "\n";
    }
    write_text(word_last, text);
    write_text(word_template, "U00:%x[0,0]\nU01:%x[0,1]\n");
  }
  // One sentence of 70,000 tokens: 4,000 copies of its labels are beyond the 1 GiB of one batch.
  const std::string long_sentence = temp_path("long-sentence.txt");
  {
    std::string one, text;
    std::istringstream in(read_text(kTest));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) one += line + "\n";
    while (text.size() < 70000 * 16) text += one;
    std::size_t lines = 0, cut = 0;
    while (lines < 70000) cut = text.find('\n', cut) + 1, ++lines;
    write_text(long_sentence, text.substr(0, cut));
  }
  const std::string labels_only = temp_path("labels-only.txt");
  write_text(labels_only, "B-NP\nI-NP\n\nO\n");
  const std::string crfsuite_model = temp_path("misuse-cs.model");
  std::string cs_out;
  ASSERT_EQ(run(crfx() + " train " + q(data_path("conll2000.train60.crfsuite.txt")) + " --format crfsuite -q -m " +
                    q(crfsuite_model) + " --max-iterations 2",
                &cs_out),
            0)
      << cs_out;
  const std::string train = crfx() + " train " + q(kTrain);
  struct Case {
    std::string args;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {train + " other.txt -t " + q(kTemplate) + " -m " + q(model), 1, "other.txt: cannot open"},
      {crfx() + " tag " + q(kTest) + " -m " + q(model) + " --keep-going", 2,
       "--keep-going goes with -O DIR (one output per input): in one stream, a failed input's output already "
       "written could not be taken back"},
      {crfx() + " tag " + q(kTest) + " -m " + q(model) + " -o x.txt -O outdir", 2,
       "-o (one output) and -O (one per input) exclude each other"},
      {crfx() + " tag " + q(dir) + " -m " + q(model), 1, dir + ": a directory (--recursive reads every file below it)"},
      {crfx() + " tag " + q(kTest) + " " + q(kTest) + " -m " + q(model) + " -O outdir", 1,
       kTest + " and " + kTest + " would both be written to outdir/conll2000.test100.txt"},
      {crfx() + " tag - -m " + q(model) + " -O outdir", 1, "standard input ('-') has no name to write its output under"},
      {crfx() + " eval " + q(kTest) + " -m " + q(model), 2, "Option \xe2\x80\x98m\xe2\x80\x99 does not exist"},
      {crfx() + " train " + q(kTemplate) + " " + q(kTrain) + " " + q(model), 2,
       "crfx train reads DATA -t TEMPLATE -m MODEL; crf_learn's order TEMPLATE DATA MODEL is not crfx's"},
      {train + " -t " + q(kTemplate) + " -m -", 2, "-m/--model: a model is a binary file, not for standard output"},
      {train + " -t " + q(kTemplate) + " -c 4 -m " + q(model), 2,
       "Option \xe2\x80\x98" "c\xe2\x80\x99 does not exist; CRF++'s -c C is --c2 here, with c2 = 1/(2·C)"},
      {train + " -t " + q(kTemplate) + " -p 2 -m " + q(model), 2, "CRF++'s -p N (threads) is --threads N here"},
      {crfx() + " tag " + q(kTest) + " -m " + q(model) + " -v 1", 2,
       "CRF++'s -v 1 is -p/--probability here, -v 2 is --marginals"},
      {train + " -t " + q(empty_template) + " -m " + q(model), 1,
       empty_template + ": the template generates no attributes"},
      {train + " --format crfsuite -m " + q(model), 1,
       kTrain + ":1: 'Confidence NN B-NP' has spaces before its first tab: CRFsuite lines are LABEL<TAB>attr<TAB>…"},
      {crfx() + " tag " + q(kTest) + " -m " + q(crfsuite_model), 1,
       kTest + ":1: 'Rockwell NNP B-NP' has spaces before its first tab"},
      {crfx() + " train " + q(labels_only) + " --format crfsuite -m " + q(model), 1,
       "no attributes in the data read as CRFsuite lines (LABEL<TAB>attr…); for CoNLL columns use "
       "--format conll with a --template"},
      {train + " -t " + q(kTemplate) + " -m " + q(model) + " --log " + q(dir), 1, "it is a directory"},
      {crfx() + " eval " + q(kTest), 1, kTest + ": the last two columns share no label in 2279 tokens"},
      {crfx() + " tag " + q(long_sentence) + " -m " + q(model) + " -n 4000 -q", 1,
       "n-best output: 4000 label sequences of 70000 tokens (one batch of whole sentences) need 1 GiB at once "
       "(limit 1 GiB); ask for fewer paths"},
      {crfx() + " train " + q(data_path("conll2000.train60.crfsuite.txt")) + " -t " + q(kTemplate) + " -m " + q(model),
       1, "(this looks like CRFsuite attribute lines, LABEL<TAB>attr…: read them with --format crfsuite"},
      {crfx() + " tag " + q(data_path("conll2000.test30.crfsuite.txt")) + " -m " + q(model), 1,
       ":1: expected 2 or 3 columns, got 12 (this looks like CRFsuite attribute lines"},
      {crfx() + " train " + q(word_last) + " -t " + q(word_template) + " -m " + q(model), 1,
       word_last + ": 2144 labels in 7189 tokens (1349 seen once): the label is read from the last column (column 3 "
                   "of each token line); is that the label column? (Confidence, in, the, …)"},
  };
  std::vector<Case> more = cases;
  more.push_back({crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --thread-list 1,-1", 2,
                  "--thread-list: '-1' is not a thread count (0 to 1024, 0 = all cores)"});
  if (std::filesystem::is_character_file("/dev/full")) {  // a full disk: the output's loss is an error
    // (in braces: standard error still goes to the test, standard output to /dev/full)
    more.push_back({"{ " + crfx() + " dump " + q(model) + " > /dev/full; }", 1,
                    "crfx dump: cannot write to standard output: No space left on device"});
    const std::string tagged = temp_path("tagged-small.txt");
    write_text(tagged, "a DT DT\nb NN VB\n");
    more.push_back({"{ " + crfx() + " eval " + q(tagged) + " > /dev/full; }", 1,
                    "crfx eval: cannot write to standard output"});
    more.push_back({"{ " + crfx() + " tag " + q(kTest) + " -m " + q(model) + " -q > /dev/full; }", 1,
                    "crfx tag: cannot write to standard output: No space left on device"});
  }
  for (const Case& c : more) {
    std::string out;
    EXPECT_EQ(run("cd " + q(dir) + " && " + c.args, &out), c.status) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(read_text(model), before) << c.args << " changed the model";
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/-")) << "a file named '-' was created";
  // An output naming an input of the same run (here a copy of the training data) is refused.
  const std::string data_copy = temp_path("data-copy.txt");
  write_text(data_copy, read_text(kTrain));
  for (const std::string& args : {" -m " + q(data_copy), " -m " + q(temp_path("fine.model")) + " --log " + q(data_copy),
                                  " -m " + q(kTemplate)}) {
    std::string out;
    EXPECT_EQ(run(crfx() + " train " + q(data_copy) + " -t " + q(kTemplate) + args, &out), 1) << args << out;
    EXPECT_NE(out.find("it is an input of this run; choose another name"), std::string::npos) << args << out;
  }
  EXPECT_EQ(read_text(data_copy), read_text(kTrain));
  {
    std::string out;
    EXPECT_EQ(run(crfx() + " tag " + q(data_copy) + " -m " + q(model) + " -o " + q(data_copy), &out), 1) << out;
    EXPECT_NE(out.find("it is an input of this run"), std::string::npos) << out;
    EXPECT_EQ(read_text(data_copy), read_text(kTrain));
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/other.txt"));
}

// '-' as an output is standard output where a stream makes sense: tag -o -, train --log -.
TEST(Cli, DashIsStandardOutput) {
  const std::string dir = temp_path("dash");
  std::filesystem::create_directories(dir);
  std::string out, file_out;
  ASSERT_EQ(run("cd " + q(dir) + " && " + crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -q -o -", &out),
            0)
      << out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -q", &file_out), 0) << file_out;
  EXPECT_EQ(out, file_out);
  // /dev/stdout (a link to /proc/self/fd/1, here a pipe) is written in place, not replaced.
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -q -o /dev/stdout", &out), 0) << out;
  EXPECT_EQ(out, file_out);
  const std::string m = temp_path("dash.model");
  ASSERT_EQ(run("cd " + q(dir) + " && " + crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m) +
                    " --max-iterations 2 -q --log - 2>/dev/null",
                &out),
            0)
      << out;
  EXPECT_EQ(out.rfind("iteration,passes,objective,gradient_norm,active_features,seconds,dev_f1\n1,", 0), 0u) << out;
  EXPECT_NE(out.find("\n2,"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/-"));
}

// The run says which stopping rule fired, with its figures.
TEST(Cli, TrainingSaysWhyItStopped) {
  const std::string model = temp_path("stopped.model");
  const std::string train = crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(model) + " -a ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lbfgs --max-iterations 3", "stopped: --max-iterations 3 reached\n"},
      {"lbfgs --epsilon 0.5", "stopped: ‖g‖ / max(1, ‖w‖) = "},
      {"lbfgs --period 2 --delta 0.5", "stopped: the objective improved by "},
      {"owlqn --c1 1 --c2 0 --max-iterations 2", "stopped: --max-iterations 2 reached\n"},
      {"sgd-l1 --epochs 2", "stopped: --epochs 2 reached\n"},
      {"two-stage --sgd-epochs 1 --max-iterations 2", "stopped: stage 2 (OWL-QN): --max-iterations 2 reached\n"},
      {"sag --max-epochs 2", "stopped: --max-epochs 2 reached\n"},
      {"adf --epochs 1", "stopped: --epochs 1 reached\n"},
      {"ap --epochs 1", "stopped: --epochs 1 reached\n"},
      {"rprop --max-iterations 2", "stopped: --max-iterations 2 reached\n"},
  };
  for (const auto& [args, expected] : cases) {
    std::string out;
    ASSERT_EQ(run(train + args, &out), 0) << args << "\n" << out;
    EXPECT_NE(out.find(expected), std::string::npos) << args << "\n" << out;
  }
  std::string out;
  ASSERT_EQ(run(train + "lbfgs --period 2 --delta 0.5", &out), 0) << out;
  EXPECT_NE(out.find(" (relative) over the last 2 iterations, less than --delta 0.5 (--period 2)\n"), std::string::npos)
      << out;
}

// Several training files are read as one: the model is the one trained on their concatenation.
TEST(Cli, SeveralTrainingFilesAreReadAsOne) {
  const std::string both = temp_path("both.txt"), one = temp_path("one.model"), two = temp_path("two.model");
  write_text(both, read_text(kTrain) + "\n" + read_text(kTest));
  const std::string args = " -t " + q(kTemplate) + " --max-iterations 5 -q -m ";
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(both) + args + q(one), &out), 0) << out;
  ASSERT_EQ(run(crfx() + " train " + q(kTrain) + " " + q(kTest) + args + q(two), &out), 0) << out;
  EXPECT_EQ(read_text(one), read_text(two));
  // Their columns must agree; the file that differs is named.
  const std::string narrow = temp_path("narrow.txt");
  write_text(narrow, "Rockwell B-NP\n\n");
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " " + q(narrow) + args + q(two), &out), 1) << out;
  EXPECT_NE(out.find(narrow + ":1: 2 columns, but " + kTrain + ":1 has 3: training files are read as one"),
            std::string::npos)
      << out;
}

// Many labels: the per-sentence L² buffers are inside the estimate and the chunk budget, so the
// peak resident memory stays near the estimate printed before training (it was 2.6 GB against
// 8 MB estimated for 1,000 labels on 300 sentences).
TEST(Cli, ManyLabelsStayWithinTheMemoryEstimate) {
  const std::string data = temp_path("many-labels.txt"), model = temp_path("many-labels.model");
  std::string text;
  std::uint64_t x = 12345;
  auto next = [&] { return (x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int s = 0; s < 80; ++s) {
    for (int t = 0; t < 12; ++t) {
      const unsigned y = unsigned(next() % 600);
      text += "L" + std::to_string(y) + "\tw=" + std::to_string(y % 97) + "\tb=" + std::to_string(next() % 50) + "\n";
    }
    text += "\n";
  }
  write_text(data, text);
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(data) + " --format crfsuite --max-iterations 1 --threads 1 --device cpu -m " + q(model), &out),
            0)
      << out;
  auto megabytes = [&](const std::string& after, std::size_t from) {
    const auto p = from == std::string::npos ? from : out.find(after, from);
    if (p == std::string::npos) return -1.0;
    const double v = std::stod(out.substr(p + after.size()));
    const std::string unit = out.substr(out.find(' ', p + after.size()) + 1, 2);
    return unit == "GB" ? v * 1000 : unit == "KB" ? v / 1000 : v;
  };
  const double estimated = megabytes("; ", out.find("\nmemory: "));
  const double peak = megabytes("peak resident memory ", 0);
  ASSERT_GT(estimated, 0) << out;
  ASSERT_GT(peak, 0) << out;
  EXPECT_NE(out.find(", buffers "), std::string::npos) << out;
  EXPECT_LT(peak, estimated + 64) << "peak resident memory beyond the estimate:\n" << out;
}

TEST(Cli, VersionNamesTheBuild) {
  std::string out;
  ASSERT_EQ(run(crfx() + " --version", &out), 0) << out;
  EXPECT_EQ(out.rfind("crfx 0.", 0), 0u) << out;
  EXPECT_NE(out.find(" build, "), std::string::npos) << out;
  EXPECT_TRUE(out.find("CUDA backend for architectures") != std::string::npos ||
              out.find("no CUDA backend") != std::string::npos)
      << out;
  // The CPU's vector code, as chosen at run time, and as CRFX_SIMD=baseline forces it.
  EXPECT_NE(out.find("\nCPU vector code: "), std::string::npos) << out;
  ASSERT_EQ(run("CRFX_SIMD=baseline " + crfx() + " --version", &out), 0) << out;
  EXPECT_NE(out.find("\nCPU vector code: scalar state rows, SSE2 chain\n"), std::string::npos) << out;
}

TEST(Cli, CrfsuiteFormatAndMarginals) {
  const std::string m = temp_path("cs.model");
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(data_path("conll2000.train60.crfsuite.txt")) + " --format crfsuite -m " + q(m) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " tag " + q(data_path("conll2000.test30.crfsuite.txt")) + " -m " + q(m) + " --marginals --quiet", &out), 0) << out;
  // Each token line: gold, predicted, then LABEL:p for every label; the p sum to 1.
  const std::string line = out.substr(0, out.find('\n'));
  double sum = 0;
  std::size_t fields = 0, start = 0;
  while (true) {
    const std::size_t tab = line.find('\t', start);
    const std::string field = line.substr(start, tab == std::string::npos ? std::string::npos : tab - start);
    if (fields >= 2) sum += std::stod(field.substr(field.rfind(':') + 1));
    ++fields;
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  EXPECT_GT(fields, 3u) << line;
  EXPECT_NEAR(sum, 1.0, 1e-4) << line;
  // crfx eval reads past the LABEL:p columns: the same report as for the output without them,
  // in both formats.
  for (const auto& [data, model] : {std::pair<std::string, std::string>{data_path("conll2000.test30.crfsuite.txt"), m},
                                    std::pair<std::string, std::string>{kTest, trained_model()}}) {
    const std::string a = temp_path("plain-m.tagged"), b = temp_path("marg-m.tagged");
    ASSERT_EQ(run(crfx() + " tag " + q(data) + " -m " + q(model) + " --quiet -o " + q(a), &out), 0) << out;
    ASSERT_EQ(run(crfx() + " tag " + q(data) + " -m " + q(model) + " --quiet --marginals -o " + q(b), &out), 0) << out;
    std::string ra, rb;
    ASSERT_EQ(run(crfx() + " eval " + q(a), &ra), 0) << ra;
    ASSERT_EQ(run(crfx() + " eval " + q(b), &rb), 0) << rb;
    EXPECT_EQ(rb, ra) << data;
  }
}

TEST(Cli, DumpShowsModel) {
  std::string out;
  ASSERT_EQ(run(crfx() + " dump " + q(trained_model()), &out), 0) << out;
  EXPECT_NE(out.find("B-NP"), std::string::npos);
  EXPECT_NE(out.find("U02:"), std::string::npos);
}

TEST(Cli, FeatureSetsAndTheMemoryCheck) {
  const std::string base = crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " --threads 2 --max-iterations 3";
  const std::string observed = temp_path("observed.model"), all = temp_path("all.model");
  std::string out, dump;
  ASSERT_EQ(run(base + " -m " + q(observed), &out), 0) << out;  // the default: CRFsuite's observed pairs
  EXPECT_NE(out.find(" weights (observed pairs; every pair would be 570817;"), std::string::npos) << out;
  EXPECT_NE(out.find("memory: weights "), std::string::npos) << out;
  EXPECT_NE(out.find("peak resident memory"), std::string::npos) << out;
  ASSERT_EQ(run(crfx() + " dump " + q(observed), &dump), 0) << dump;
  EXPECT_NE(dump.find("  layout: observed pairs\n  weights: 39467\n"), std::string::npos) << dump.substr(0, 400);
  ASSERT_EQ(run(base + " --features all -m " + q(all), &out), 0) << out;
  EXPECT_NE(out.find(" 570817 weights (every pair;"), std::string::npos) << out;
  ASSERT_EQ(run(crfx() + " dump " + q(all), &dump), 0) << dump;
  EXPECT_NE(dump.find("  layout: all pairs\n"), std::string::npos) << dump.substr(0, 400);
  // CRFsuite's switches: every attribute × label pair, the observed bigrams (19² = 361 would be all).
  ASSERT_EQ(run(base + " --possible-states -m " + q(all), &out), 0) << out;
  EXPECT_NE(out.find(" 570552 weights (observed pairs;"), std::string::npos) << out;

  EXPECT_EQ(run(base + " --features most -m " + q(all), &out), 2);
  EXPECT_NE(out.find("--features: 'most' is neither observed nor all"), std::string::npos) << out;
  EXPECT_EQ(run(base + " --max-memory 20Q -m " + q(all), &out), 2);
  EXPECT_NE(out.find("--max-memory: '20Q' is not a size"), std::string::npos) << out;
  // A run that cannot fit is refused before it allocates, with its estimate; the model stays.
  const std::string before = read_text(all);
  EXPECT_EQ(run(base + " --features all --max-memory 20M --device cpu -m " + q(all), &out), 1);
  // (On two threads the corpus's copy is the reduction's per-thread item lists, cpu_backend.cpp.)
  EXPECT_NE(out.find("this training run needs an estimated 81.9 MB more (weights 4.6 MB, optimizer state 73.1 MB "
                     "(16 weight vectors), the corpus's copy 579.9 KB, buffers 2.1 MB, dictionaries 1.7 MB) but "
                     "20.0 MB is available on cpu"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--features observed"), std::string::npos) << out;
  EXPECT_EQ(read_text(all), before);
  EXPECT_EQ(run(base + " --max-memory 20M -q -m " + q(all), &out), 0) << out;  // observed pairs fit
  // Data that alone passes the budget is refused while it is read (the streamed compile checks each
  // batch, its batches sized to the budget and the template), naming the file, how far it got —
  // not to its end — and the figures; the model stays.
  const std::string kept = read_text(all);
  EXPECT_EQ(run(base + " --max-memory 1M -q -m " + q(all), &out), 1);
  const std::string refused = "crfx train: this training run cannot fit: reading " + std::string(kTrain) + " (";
  ASSERT_NE(out.find(refused), std::string::npos) << out;
  EXPECT_LT(std::stoul(out.substr(out.find(refused) + refused.size())), 300u) << out;
  EXPECT_NE(out.find(" sentences, to line "), std::string::npos) << out;
  EXPECT_NE(out.find("), the compiled data alone takes "), std::string::npos) << out;
  EXPECT_NE(out.find(": past two thirds of the budget)"), std::string::npos) << out;
  EXPECT_NE(out.find(" but 1.0 MB was available (the limit given); raise --min-freq"), std::string::npos) << out;
  EXPECT_EQ(out.find("needs an estimated"), std::string::npos) << out;  // before the run's estimate
  EXPECT_TRUE(read_text(all) == kept);
}

// --max-memory bounds the whole estimate the run prints, the corpus and the dictionaries it already
// holds included, not only what it has still to allocate: a limit just under the estimate (and
// above what is left to allocate) refuses the run.
TEST(Cli, TheMemoryLimitBoundsTheWholeEstimate) {
  const std::string base = crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) +
                           " --threads 1 --device cpu --max-iterations 2";
  const std::string model = temp_path("limit.model");
  std::string out;
  ASSERT_EQ(run(base + " --max-memory 1G -m " + q(model), &out), 0) << out;
  const std::size_t at = out.find(" MB estimated, ");
  ASSERT_NE(at, std::string::npos) << out;
  const double estimate = std::stod(out.substr(out.rfind("; ", at) + 2));  // "…; 10.4 MB estimated"
  // The corpus (~0.7 MB) and the dictionaries (~1.7 MB) are held already; 0.2 MB under the estimate
  // leaves room for what is still to be allocated.
  const std::string kept = read_text(model);
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.1fM", estimate - 0.2);
  EXPECT_EQ(run(base + " --max-memory " + limit + " -m " + q(model), &out), 1) << out;
  EXPECT_NE(out.find("this training run needs an estimated "), std::string::npos) << out;
  EXPECT_NE(out.find(" in all (weights "), std::string::npos) << out;
  EXPECT_NE(out.find(", corpus "), std::string::npos) << out;
  EXPECT_NE(out.find(" is the limit given; raise --min-freq"), std::string::npos) << out;
  EXPECT_TRUE(read_text(model) == kept);
  std::snprintf(limit, sizeof limit, "%.1fM", estimate + 0.2);
  EXPECT_EQ(run(base + " --max-memory " + limit + " -q -m " + q(model), &out), 0) << out;
}

TEST(Cli, HelpForEverySubcommand) {
  for (const char* cmd : {"train", "tag", "eval", "bench", "dump"}) {
    std::string out;
    EXPECT_EQ(run(crfx() + " " + cmd + " --help", &out), 0) << cmd;
    EXPECT_NE(out.find("Usage"), std::string::npos) << cmd << ": " << out;
  }
  std::string out;
  EXPECT_EQ(run(crfx() + " train --algo list", &out), 0);
  EXPECT_NE(out.find("owlqn"), std::string::npos) << out;
  // Each algorithm with its settings and their defaults (from the library's tables).
  EXPECT_NE(out.find("settings: --batch-size 1 --epsilon 1e-05 --max-epochs 100 --sampling mixed"), std::string::npos)
      << out;
  EXPECT_NE(out.find("for every algorithm but ap, pa, arow, mira, boost: --c1 0 --c2 1"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " train --help", &out), 0);
  EXPECT_NE(out.find("--max-linesearch"), std::string::npos) << out;
}

TEST(Cli, ASettingTheAlgorithmDoesNotTakeIsRefused) {
  const std::string model = temp_path("refused-setting.model");
  const std::string train = crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(model) + " -q";
  std::string out;
  EXPECT_EQ(run(train + " -a lbfgs --max-iterations 2 --eta0 0.1", &out), 2) << out;
  EXPECT_NE(out.find("--eta0 is not a setting of lbfgs ('crfx train --algo list' shows each algorithm's settings)"),
            std::string::npos)
      << out;
  EXPECT_EQ(run(train + " -a sag --epochs 2", &out), 2) << out;
  EXPECT_NE(out.find("--epochs is not a setting of sag; sag stops by --max-epochs"), std::string::npos) << out;
  EXPECT_EQ(run(train + " -a lbfgs --sampling lipschitz", &out), 2) << out;
  EXPECT_NE(out.find("--sampling is not a setting of lbfgs"), std::string::npos) << out;
  EXPECT_EQ(run(train + " -a sgd-l1 --max-iterations 3", &out), 2) << out;
  EXPECT_NE(out.find("sgd-l1 stops by --epochs"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(model));
  // The settings it does read are taken.
  EXPECT_EQ(run(train + " -a lbfgs --max-iterations 2 --epsilon 1e-4", &out), 0) << out;
}

TEST(Cli, UsageAndDeviceErrors) {
  std::string out;
  EXPECT_EQ(run(crfx(), &out), 2);
  EXPECT_EQ(run(crfx() + " frobnicate", &out), 2);
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate), &out), 2);  // no -m
  EXPECT_NE(out.find("--model"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " -m x.model", &out), 2);  // no template
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m x --algo nope", &out), 2);
  EXPECT_NE(out.find("unknown training algorithm"), std::string::npos) << out;
  const std::string empty = temp_path("empty.tagged");  // e.g. a tag run that failed upstream
  write_text(empty, "");
  EXPECT_EQ(run(crfx() + " eval " + q(empty), &out), 1);
  EXPECT_NE(out.find(empty + ": no tokens to evaluate"), std::string::npos) << out;
  // --device cuda fails clearly where `auto` finds no usable GPU (and works where it finds one).
  std::string note;
  const std::string tagged = temp_path("device.tagged");
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --device auto -o " + q(tagged), &note), 0)
      << note;
  const bool gpu = note.find("using the CPU") == std::string::npos;
  const int rc = run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --device cuda -o " + q(tagged), &out);
  if (gpu) {
    EXPECT_EQ(rc, 0) << out;
  } else {
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--device cuda: "), std::string::npos) << out;
    EXPECT_NE(out.find("; --device cpu runs on the CPU"), std::string::npos) << out;
    // The fallback reason: a machine without the NVIDIA driver says so, not the CUDA runtime's
    // "driver version is insufficient".
    if (::access("/proc/driver/nvidia/version", F_OK) != 0 && ::access("/dev/nvidia0", F_OK) != 0) {
      EXPECT_EQ(note.find("insufficient"), std::string::npos) << note;
    }
    // train refuses before reading its data (here a file that does not exist).
    EXPECT_EQ(run(crfx() + " train /nonexistent.txt -t " + q(kTemplate) + " -m " + q(temp_path("d.model")) +
                      " --device cuda",
                  &out),
              1)
        << out;
    EXPECT_NE(out.find("--device cuda: "), std::string::npos) << out;
  }
}

TEST(Cli, BadOptionsAndUnwritableOutputsFailBeforeAnyWork) {
  const std::string model = temp_path("never.model");
  const std::string train = crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(model) + " ";
  const std::pair<std::string, std::string> cases[] = {
      {"--max-iterations -5", "--max-iterations"}, {"--delta -1", "--delta"},
      {"--memory -3", "--memory"},                 {"--period -1", "--period"},
      {"--c1 -1", "--c1"},                         {"--c2 nan", "--c2"},  // cxxopts rejects the value
      {"--c2=abc", "--c2"},                        {"--threads 99999", "--threads"},
      {"--epsilon -1e-3", "--epsilon"},           {"--line-search bogus", "--line-search"},
      {"--max-linesearch 0", "--max-linesearch"}, {"--seed -3", "--seed"},
  };
  for (const auto& [args, option] : cases) {
    std::string out;
    EXPECT_EQ(run(train + args, &out), 2) << args << "\n" << out;
    EXPECT_NE(out.find(option), std::string::npos) << args << "\n" << out;
  }
  EXPECT_FALSE(std::filesystem::exists(model));
  std::string out;
  // An output that cannot be written is refused before any training or tagging happens.
  const std::string dir = temp_dir();
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(dir), &out), 1) << out;
  EXPECT_NE(out.find(dir + ": it is a directory"), std::string::npos) << out;
  EXPECT_EQ(out.find("iter"), std::string::npos) << "trained before failing:\n" << out;
  EXPECT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(dir + "/no/x.model"), &out), 1)
      << out;
  EXPECT_NE(out.find("directory " + dir + "/no: No such file or directory"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -o " + q(dir), &out), 1) << out;
  EXPECT_NE(out.find(dir + ": it is a directory"), std::string::npos) << out;
  EXPECT_EQ(run(crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --repeat 0", &out), 2) << out;
  EXPECT_NE(out.find("--repeat"), std::string::npos) << out;
  // bench says once why the GPU is not used (where it is not), not on every row.
  ASSERT_EQ(run(crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --repeat 1 --thread-list 1,2,1", &out), 0)
      << out;
  std::size_t rows = 0, notes = 0;
  for (std::size_t p = out.find("device: "); p != std::string::npos; p = out.find("device: ", p + 1)) ++rows;
  for (std::size_t p = out.find("auto: "); p != std::string::npos; p = out.find("auto: ", p + 1)) ++notes;
  EXPECT_EQ(rows, 3u) << out;
  EXPECT_LE(notes, 1u) << out;
  // bench --type and --loss: the Maxent model's pass, and the loss the pass computes.
  auto bench_loss = [&](const std::string& args) {
    const std::string cmd = crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --repeat 1 --thread-list 1 " + args;
    EXPECT_EQ(run(cmd, &out), 0) << out;
    const std::size_t at = out.find("; loss ", out.find("passes;"));
    return at == std::string::npos ? std::string("none") : out.substr(at, out.find(')', at) - at);
  };
  const std::string crf_log = bench_loss("--device cpu"), crf_exp = bench_loss("--device cpu --loss seq-exp");
  const std::string maxent_log = bench_loss("--device cpu --type maxent");
  EXPECT_NE(out.find("weights (Maxent); loss seq-log"), std::string::npos) << out;
  EXPECT_NE(crf_log, "none");
  EXPECT_NE(crf_log, crf_exp);
  EXPECT_NE(crf_log, maxent_log);
  EXPECT_EQ(run(crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --type hmm", &out), 2) << out;
  EXPECT_EQ(run(crfx() + " bench " + q(kTrain) + " -t " + q(kTemplate) + " --loss hinge", &out), 2) << out;
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --threads 5000", &out), 2) << out;
  EXPECT_NE(out.find("--threads"), std::string::npos) << out;
}

TEST(Cli, TheVectorAndBaselineCpuCodeGiveTheSameModel) {
  // chain.cpp's forward-backward and Viterbi are compiled for SSE2 and AVX2, and the observed
  // pairs' state rows have an AVX-512 copy (sparse_rows.hpp), each chosen at run time
  // (CRFX_SIMD=baseline forces SSE2 and the scalar rows): the same operations in the same order, so
  // the same model bytes and labels — with the transition matrix and with edge features (a B01
  // line: a matrix per position), 19 labels (not a multiple of the vector width). (Where the CPU
  // lacks AVX2 or AVX-512 both runs take the same code.)
  const std::string edges = temp_path("simd-edges.template");
  write_text(edges, read_text(kTemplate) + "\nB01:%x[0,1]\n");
  for (const std::string& tmpl : {kTemplate, edges}) {
    SCOPED_TRACE(tmpl);
    const std::string a = temp_path("simd-default.model"), b = temp_path("simd-baseline.model");
    const std::string args = " train " + q(kTrain) + " -t " + q(tmpl) + " --max-iterations 6 --threads 2 -q -m ";
    std::string out;
    ASSERT_EQ(run(crfx() + args + q(a), &out), 0) << out;
    ASSERT_EQ(run("CRFX_SIMD=baseline " + crfx() + args + q(b), &out), 0) << out;
    EXPECT_EQ(read_text(a), read_text(b));
    // Viterbi too (its recursion has the same two copies): the same labels.
    const std::string tag = " tag " + q(kTest) + " -m " + q(a) + " --threads 2 -q";
    std::string tagged, tagged_baseline;
    ASSERT_EQ(run(crfx() + tag, &tagged), 0) << tagged;
    ASSERT_EQ(run("CRFX_SIMD=baseline " + crfx() + tag, &tagged_baseline), 0) << tagged_baseline;
    EXPECT_EQ(tagged, tagged_baseline);
  }
}

TEST(Cli, TagTimingSaysWhereTheTimeWent) {
  std::string out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -o " + q(temp_path("timing.tagged")) +
                    " --timing --quiet --threads 2",
                &out),
            0)
      << out;
  const std::regex line("crfx tag: timing: model and device [0-9.]+ s; stages over 2 threads: read [0-9.]+, compile "
                        "[0-9.]+, decode [0-9.]+, format [0-9.]+, write [0-9.]+, waiting [0-9.]+ s\n");
  EXPECT_TRUE(std::regex_search(out, line)) << out;
  EXPECT_EQ(out.find("tokens in"), std::string::npos) << "--quiet printed the summary:\n" << out;
}

TEST(Cli, FailuresNeverClobberOutputs) {
  const std::string dir = temp_dir();
  const std::string existing = dir + "/keep.txt";
  write_text(existing, "precious\n");
  // Malformed training data: file:line error, exit 1, the model path untouched.
  const std::string bad = dir + "/bad.txt";
  write_text(bad, "He PRP B-NP\nreckons VBZ\n");
  std::string out;
  EXPECT_EQ(run(crfx() + " train " + q(bad) + " -t " + q(kTemplate) + " -m " + q(existing), &out), 1);
  EXPECT_NE(out.find(bad + ":2:"), std::string::npos) << out;
  EXPECT_EQ(read_text(existing), "precious\n");
  // Corrupt model: tag fails, the output file untouched.
  const std::string corrupt = dir + "/corrupt.model";
  std::string bytes = read_text(trained_model());
  bytes[bytes.size() / 2] ^= 0x5a;
  write_text(corrupt, bytes);
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(corrupt) + " -o " + q(existing), &out), 1);
  EXPECT_NE(out.find(corrupt), std::string::npos) << out;
  EXPECT_EQ(read_text(existing), "precious\n");
  // Malformed data after many good batches: tagging streams, yet the output file is untouched
  // and the error names the line.
  std::string text = read_text(kTest);
  const std::size_t good_lines = std::size_t(std::count(text.begin(), text.end(), '\n'));
  text += "\nlate NN\n";  // one column too few
  const std::string late = dir + "/late.txt";
  write_text(late, text);
  EXPECT_EQ(run(crfx() + " tag " + q(late) + " -m " + q(trained_model()) + " -o " + q(existing) +
                    " --batch-tokens 50",
                &out),
            1);
  EXPECT_NE(out.find(late + ":" + std::to_string(good_lines + 2) + ":"), std::string::npos) << out;
  EXPECT_EQ(read_text(existing), "precious\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 4)
      << "a temporary file was left behind";
}

TEST(Cli, FileSizeLimitIsAnErrorThatLeavesOutputsAlone) {
  // Under `ulimit -f` a write past the limit raises SIGXFSZ, whose default action kills the
  // process mid-write and leaves the temporary file behind. crfx ignores the signal, so the write
  // fails with EFBIG and is reported like any other write error. 16 blocks (8 or 16 KiB, by the
  // shell's block size) are far below the model and the tagged output (~36 KB).
  const std::string dir = temp_dir();
  const std::string existing = dir + "/keep.txt";
  write_text(existing, "precious\n");
  const std::string limit = "ulimit -f 16; ";
  std::string out;
  EXPECT_EQ(run(limit + crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(existing) +
                    " --quiet",
                &out),
            1)
      << out;
  EXPECT_NE(out.find(existing), std::string::npos) << out;
  EXPECT_NE(out.find("File too large"), std::string::npos) << out;
  EXPECT_EQ(read_text(existing), "precious\n");
  EXPECT_EQ(run(limit + crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -o " + q(existing), &out), 1)
      << out;
  EXPECT_NE(out.find("File too large"), std::string::npos) << out;
  EXPECT_EQ(read_text(existing), "precious\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1)
      << "a temporary file was left behind";
}

/// `text` without the lines that start with `prefix`.
std::string without_lines(const std::string& text, const std::string& prefix) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    if (text.compare(at, prefix.size(), prefix) != 0) out.append(text, at, end - at);
    at = end;
  }
  return out;
}

TEST(Cli, SentenceProbability) {
  // CoNLL data: "# p" before every sentence (CRF++ -v1); the token lines are those of a plain run.
  std::string plain, out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet", &plain), 0) << plain;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -p --marginals", &out), 0) << out;
  std::string marginals;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --marginals", &marginals), 0);
  EXPECT_EQ(without_lines(out, "# "), marginals);
  // Each sentence: its first line is "# p", then tokens ending in PRED and every LABEL:marginal.
  // p(ŷ | x) ≤ p(y_t = ŷ_t | x) for every t, and for a one-token sentence the two are equal.
  std::size_t sentences = 0, at = 0;
  while (at < out.size()) {
    std::size_t blank = out.find("\n\n", at);
    if (blank == std::string::npos) blank = out.size();
    const std::string block = out.substr(at, blank - at);
    at = blank + 2;
    ASSERT_EQ(block.compare(0, 2, "# "), 0) << block;
    const std::size_t nl = block.find('\n');
    const double p = std::stod(block.substr(2, nl - 2));
    EXPECT_GT(p, 0.0);
    EXPECT_LE(p, 1.0);
    double min_marginal = 1.0;
    std::size_t tokens = 0;
    for (std::size_t ls = nl + 1; ls < block.size();) {
      std::size_t le = block.find('\n', ls);
      if (le == std::string::npos) le = block.size();
      const std::string line = block.substr(ls, le - ls);
      ls = le + 1;
      ++tokens;
      // The predicted label is the field before the first LABEL:p field.
      std::vector<std::string> fields;
      for (std::size_t fs = 0;;) {
        const std::size_t tab = line.find('\t', fs);
        fields.push_back(line.substr(fs, tab == std::string::npos ? std::string::npos : tab - fs));
        if (tab == std::string::npos) break;
        fs = tab + 1;
      }
      std::size_t first = 0;
      while (first < fields.size() && fields[first].find(':') == std::string::npos) ++first;
      ASSERT_GT(first, 0u) << line;
      const std::string pred = fields[first - 1];
      for (std::size_t f = first; f < fields.size(); ++f)
        if (fields[f].compare(0, pred.size() + 1, pred + ":") == 0)
          min_marginal = std::min(min_marginal, std::stod(fields[f].substr(pred.size() + 1)));
    }
    EXPECT_LE(p, min_marginal + 1e-6) << block;
    if (tokens == 1) {
      EXPECT_NEAR(p, min_marginal, 1e-6) << block;
    }
    ++sentences;
  }
  EXPECT_EQ(sentences, 100u);
  // crfx eval skips the probability lines: the same report as for the plain output.
  const std::string a = temp_path("plain.tagged"), b = temp_path("prob.tagged");
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -o " + q(a), &out), 0);
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --probability -o " + q(b), &out), 0);
  std::string ra, rb;
  ASSERT_EQ(run(crfx() + " eval " + q(a), &ra), 0) << ra;
  ASSERT_EQ(run(crfx() + " eval " + q(b), &rb), 0) << rb;
  EXPECT_EQ(rb, ra);

  // CRFsuite data: "@probability<TAB>p" (CRFsuite -p), and the same eval report.
  const std::string m = temp_path("csp.model"), ca = temp_path("cs.tagged"), cb = temp_path("csp.tagged");
  const std::string data = data_path("conll2000.test30.crfsuite.txt");
  ASSERT_EQ(run(crfx() + " train " + q(data_path("conll2000.train60.crfsuite.txt")) + " --format crfsuite -m " + q(m) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " tag " + q(data) + " -m " + q(m) + " --quiet -o " + q(ca), &out), 0) << out;
  ASSERT_EQ(run(crfx() + " tag " + q(data) + " -m " + q(m) + " --quiet -p -o " + q(cb), &out), 0) << out;
  const std::string tagged = read_text(cb);
  EXPECT_EQ(tagged.compare(0, 13, "@probability\t"), 0) << tagged.substr(0, 40);
  EXPECT_EQ(without_lines(tagged, "@probability\t"), read_text(ca));
  ASSERT_EQ(run(crfx() + " eval " + q(ca), &ra), 0) << ra;
  ASSERT_EQ(run(crfx() + " eval " + q(cb), &rb), 0) << rb;
  EXPECT_EQ(rb, ra);
}

/// Blocks of `text` separated by blank lines.
std::vector<std::string> blocks_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t blank = text.find("\n\n", at);
    if (blank == std::string::npos) blank = text.size();
    out.push_back(text.substr(at, blank - at + 1));  // with its last newline
    at = blank + 2;
  }
  return out;
}

TEST(Cli, NbestOutput) {
  std::string prob, out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -p", &prob), 0) << prob;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -n 3 --batch-tokens 500", &out), 0) << out;
  // Every sentence three times (they all have more than 3 paths), "# RANK p" before each copy,
  // p not increasing with the rank and summing to at most 1; copy 0 is the Viterbi path, with
  // the probability -p prints.
  const std::vector<std::string> ref = blocks_of(prob), got = blocks_of(out);
  ASSERT_EQ(ref.size(), 100u);
  ASSERT_EQ(got.size(), 300u);
  for (std::size_t s = 0; s < ref.size(); ++s) {
    double previous = 1.0, sum = 0.0;
    for (std::size_t r = 0; r < 3; ++r) {
      const std::string& b = got[3 * s + r];
      const std::string head = "# " + std::to_string(r) + " ";
      ASSERT_EQ(b.compare(0, head.size(), head), 0) << b;
      const std::size_t nl = b.find('\n');
      const double p = std::stod(b.substr(head.size(), nl - head.size()));
      EXPECT_LE(p, previous + 1e-12) << b;
      previous = p;
      sum += p;
      if (r == 0) {
        // "# 0 p\n<tokens>" against "# p\n<tokens>"
        EXPECT_EQ("# " + b.substr(head.size()), ref[s]);
      } else {
        EXPECT_NE(b.substr(nl), got[3 * s].substr(got[3 * s].find('\n'))) << "a repeated path";
      }
    }
    EXPECT_LE(sum, 1.0 + 1e-5);
  }
  // -n 1 is plain tagging; -n 0 is an error; crfx eval refuses n-best output.
  std::string plain, one;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet", &plain), 0);
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -n 1", &one), 0);
  EXPECT_EQ(one, plain);
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -n 0", &out), 2);
  EXPECT_NE(out.find("--nbest"), std::string::npos) << out;
  const std::string kept = temp_path("kept.tagged");
  write_text(kept, "old\n");
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " -n 100001 -o " + q(kept), &out), 2);
  EXPECT_NE(out.find("--nbest must be between 1 and 100000, got 100001"), std::string::npos) << out;
  EXPECT_EQ(read_text(kept), "old\n");
  const std::string tagged = temp_path("nbest.tagged");
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet -n 2 -o " + q(tagged), &out), 0);
  EXPECT_EQ(run(crfx() + " eval " + q(tagged), &out), 1);
  EXPECT_NE(out.find(tagged + ":1: n-best output"), std::string::npos) << out;
  // CRFsuite data: "@nbest<TAB>RANK<TAB>p".
  const std::string m = temp_path("csn.model");
  ASSERT_EQ(run(crfx() + " train " + q(data_path("conll2000.train60.crfsuite.txt")) + " --format crfsuite -m " + q(m) + " --quiet", &out), 0) << out;
  ASSERT_EQ(run(crfx() + " tag " + q(data_path("conll2000.test30.crfsuite.txt")) + " -m " + q(m) + " --quiet -n 2", &out), 0) << out;
  const std::vector<std::string> cs = blocks_of(out);
  ASSERT_EQ(cs.size(), 60u);
  EXPECT_EQ(cs[0].compare(0, 9, "@nbest\t0\t"), 0) << cs[0];
  EXPECT_EQ(cs[1].compare(0, 9, "@nbest\t1\t"), 0) << cs[1];
}

TEST(Cli, KilledWhileWritingLeavesNoTemporaryFile) {
  // A tagging run that waits for its input (a FIFO nobody writes to) into a fresh directory where
  // the output exists already; SIGTERM once its temporary output file is there. The process dies
  // of the signal, the temporary file is gone, the old output untouched.
  namespace fs = std::filesystem;
  const std::string dir = temp_path("killed");
  fs::create_directories(dir);
  const std::string input = dir + "/in.fifo", output = dir + "/out.txt";
  ASSERT_EQ(::mkfifo(input.c_str(), 0600), 0);
  write_text(output, "keep me\n");
  const std::string model = trained_model(), binary = crfx();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGTERM, SIG_DFL);
    ::execl(binary.c_str(), binary.c_str(), "tag", input.c_str(), "-m", model.c_str(), "-q", "-o",
            output.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto temporaries = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir))
      n += e.path().filename().string().find(".tmp.") != std::string::npos;
    return n;
  };
  bool seen = false;
  for (int i = 0; i < 600 && !seen; ++i) {  // up to a minute (the model load comes first)
    seen = temporaries() > 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(seen) << "the run never created its temporary file";
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(temporaries(), 0u);
  EXPECT_EQ(read_text(output), "keep me\n");
}

// SIGTERM at any moment of a short run, the creation of its temporary output included, leaves
// no temporary file: the name is registered for removal before the file is created. 40 runs
// killed after 0 to 40 ms (the whole run takes about that), the output always the old or the new.
TEST(Cli, KilledAtAnyMomentLeavesNoTemporaryFile) {
  namespace fs = std::filesystem;
  const std::string dir = temp_path("killed-anytime");
  fs::create_directories(dir);
  const std::string output = dir + "/out.txt", model = trained_model(), binary = crfx();
  std::string fresh;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(model) + " -q", &fresh), 0);
  write_text(output, "old\n");
  std::uint64_t x = 99;
  int killed = 0;
  for (int k = 0; k < 40; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::signal(SIGTERM, SIG_DFL);
      ::execl(binary.c_str(), binary.c_str(), "tag", kTest.c_str(), "-m", model.c_str(), "-q", "-o", output.c_str(),
              "--threads", "1", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::microseconds((x >> 33) % 40000));
    ::kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    killed += WIFSIGNALED(status);
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
    const std::string now = read_text(output);
    EXPECT_TRUE(now == "old\n" || now == fresh) << "run " << k << ": a partial output";
  }
  EXPECT_GT(killed, 0) << "no run was killed in flight";
}

// Ctrl-C during training: the optimizer stops after the current iteration, the model of that
// iteration is written (the same bytes as a run told to stop there) and the exit status is 3.
TEST(Cli, SigintStopsTrainingAndWritesTheModel) {
  namespace fs = std::filesystem;
  const std::string dir = temp_path("graceful");
  fs::create_directories(dir);
  const std::string model = dir + "/stopped.model", log = dir + "/log.csv", binary = crfx();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL);
    ::execl(binary.c_str(), binary.c_str(), "train", kTrain.c_str(), "-t", kTemplate.c_str(), "-m", model.c_str(),
            "--log", log.c_str(), "--max-iterations", "100000", "--delta", "0", "--epsilon", "0", "--threads", "1",
            "-q", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto rows = [&] {
    std::ifstream in(log);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n - 1;  // the header
  };
  for (int i = 0; i < 3000 && rows() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);
  const int iterations = rows();
  ASSERT_GE(iterations, 3);
  ASSERT_TRUE(fs::exists(model));
  // The same run told to stop at that iteration writes the same model.
  const std::string again = dir + "/again.model";
  std::string out;
  ASSERT_EQ(run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(again) + " --max-iterations " +
                    std::to_string(iterations) + " --delta 0 --epsilon 0 --threads 1 -q",
                &out),
            0)
      << out;
  EXPECT_EQ(read_text(model), read_text(again)) << "stopped after iteration " << iterations;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

TEST(Cli, DashReadsStandardInput) {
  // "-" for DATA (plain or gzip) and for the file to evaluate; errors name "-" and the line.
  std::string from_file, from_stdin, gz_stdin, out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet", &from_file), 0);
  ASSERT_EQ(run(crfx() + " tag - -m " + q(trained_model()) + " --quiet < " + q(kTest), &from_stdin), 0) << from_stdin;
  EXPECT_EQ(from_stdin, from_file);
  const std::string gz = temp_path("test.txt.gz");
  write_gz(gz, read_text(kTest));
  ASSERT_EQ(run(crfx() + " tag - -m " + q(trained_model()) + " --quiet < " + q(gz), &gz_stdin), 0) << gz_stdin;
  EXPECT_EQ(gz_stdin, from_file);
  const std::string tagged = temp_path("stdin.tagged");
  write_text(tagged, from_file);
  std::string report_file, report_stdin;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged), &report_file), 0);
  ASSERT_EQ(run(crfx() + " eval - < " + q(tagged), &report_stdin), 0);
  EXPECT_EQ(report_stdin, report_file);
  EXPECT_EQ(run("printf 'a B-NP B-NP\\nb B-NP\\n' | " + crfx() + " eval -", &out), 1);
  EXPECT_NE(out.find("-:2: expected 3 columns (as on line 1), got 2"), std::string::npos) << out;
}

TEST(Cli, TaggingInSmallBatchesGivesTheSameOutput) {
  // Batches of 1, 37 and 100,000 tokens (whole sentences each): the same bytes, with and without
  // marginals, to a file and to standard output.
  std::string ref, out;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --marginals", &ref), 0);
  for (const char* batch : {"1", "37", "100000"}) {
    ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --marginals --batch-tokens " +
                      batch,
                  &out),
              0);
    EXPECT_EQ(out, ref) << batch;
    const std::string tagged = temp_path(std::string("batch") + batch + ".tagged");
    ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --batch-tokens " + batch +
                      " -o " + q(tagged),
                  &out),
              0);
    ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet", &out), 0);
    EXPECT_EQ(read_text(tagged), out) << batch;
  }
  EXPECT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --batch-tokens 0", &out), 2);
  EXPECT_NE(out.find("--batch-tokens"), std::string::npos) << out;
}

TEST(Cli, TaggingIsReproducibleAfterReload) {
  // Tag twice with the saved model (fresh processes): identical output.
  std::string a, b;
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet", &a), 0);
  ASSERT_EQ(run(crfx() + " tag " + q(kTest) + " -m " + q(trained_model()) + " --quiet --threads 1", &b), 0);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace crfx::test
