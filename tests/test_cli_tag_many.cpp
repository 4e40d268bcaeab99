// End-to-end: `crfx tag` and `crfx eval` over many inputs (files, directories, -O DIR), their
// outputs against tagging each input alone, failures, progress and the summary line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace crfx::test {
namespace {

namespace fs = std::filesystem;

std::string crfx() { return crfx_binary(); }
std::string q(const std::string& s) { return "'" + s + "'"; }

const std::string kTrain = data_path("conll2000.train300.txt");
const std::string kTest = data_path("conll2000.test100.txt");
const std::string kTemplate = data_path("chunking.template");

const std::string& model() {
  static const std::string m = [] {
    const std::string path = temp_path("many.model");
    std::string out;
    if (run(crfx() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(path) +
                " --max-iterations 20 --threads 2 -q",
            &out) != 0)
      throw std::runtime_error("training failed: " + out);
    return path;
  }();
  return m;
}

/// The test slice's sentences, each as its text with the blank line after it.
std::vector<std::string> sentences() {
  std::vector<std::string> out;
  std::istringstream in(read_text(kTest));
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!current.empty()) out.push_back(current + "\n");
      current.clear();
    } else {
      current += line + "\n";
    }
  }
  if (!current.empty()) out.push_back(current + "\n");
  return out;
}

/// A tree of documents under `root`: docs/a/… with 1–3 sentences each, one empty file, nested
/// directories; returns the relative names in sorted order.
std::vector<std::string> make_documents(const std::string& root) {
  const std::vector<std::string> s = sentences();
  std::vector<std::string> names;
  std::size_t k = 0;
  for (int d = 0; k < s.size(); ++d) {
    const std::string name = (d % 3 == 0 ? "a/" : d % 3 == 1 ? "b/deep/" : "") + std::string("doc") +
                             std::to_string(100 + d) + ".txt";
    fs::create_directories(fs::path(root + "/" + name).parent_path());
    std::string text;
    for (int n = 0; n < 1 + d % 3 && k < s.size(); ++n) text += s[k++];
    write_text(root + "/" + name, text);
    names.push_back(name);
  }
  write_text(root + "/a/empty.txt", "");
  names.push_back("a/empty.txt");
  std::sort(names.begin(), names.end());
  return names;
}

/// `crfx tag` of one file alone, to standard output.
std::string tag_alone(const std::string& path, const std::string& options = "") {
  std::string out;
  const std::string file = temp_path("alone.out");
  EXPECT_EQ(run(crfx() + " tag " + q(path) + " -m " + q(model()) + " -q -o " + q(file) + options, &out), 0) << out;
  return read_text(file);
}

TEST(CliTagMany, EveryOutputIsTheInputTaggedAlone) {
  const std::string root = temp_path("docs"), out_dir = temp_path("tagged");
  const std::vector<std::string> names = make_documents(root);
  for (const std::string options : {"", " -n 2 -p", " --marginals"}) {
    for (const std::string threads : {"1", "2", "3"}) {
      fs::remove_all(out_dir);
      std::string out;
      const std::string cmd = crfx() + " tag -r " + q(root) + " -m " + q(model()) + " -O " + q(out_dir) +
                              " --threads " + threads + " --batch-tokens 40 -q" + options;
      ASSERT_EQ(run(cmd, &out), 0) << cmd << "\n" << out;
      EXPECT_EQ(out, "") << "-q: nothing on standard error";
      std::size_t files = 0;
      for (const auto& e : fs::recursive_directory_iterator(out_dir)) files += e.is_regular_file();
      EXPECT_EQ(files, names.size()) << cmd;
      std::string all;
      for (const std::string& name : names) {
        const std::string alone = tag_alone(root + "/" + name, options);
        EXPECT_EQ(read_text(out_dir + "/" + name), alone) << name << " with" << options << ", " << threads << " threads";
        all += alone;
      }
      // One stream (-o): the outputs one after another, in input order.
      const std::string one = temp_path("one.out");
      ASSERT_EQ(run(crfx() + " tag -r " + q(root) + " -m " + q(model()) + " -o " + q(one) + " --threads " + threads +
                        " -q" + options,
                    &out),
                0)
          << out;
      EXPECT_EQ(read_text(one), all) << options;
    }
  }
}

TEST(CliTagMany, SuffixGzAndSkipExisting) {
  const std::string in = temp_path("in"), out_dir = temp_path("out");
  fs::create_directories(in);
  const std::vector<std::string> s = sentences();
  write_text(in + "/one.txt", s[0]);
  write_gz(in + "/two.txt.gz", s[1] + s[2]);
  std::string out;
  ASSERT_EQ(run(crfx() + " tag " + q(in + "/one.txt") + " " + q(in + "/two.txt.gz") + " -m " + q(model()) + " -O " +
                    q(out_dir) + " --suffix .tagged --threads 1",
                &out),
            0)
      << out;
  EXPECT_EQ(read_text(out_dir + "/one.txt.tagged"), tag_alone(in + "/one.txt"));
  EXPECT_EQ(read_text(out_dir + "/two.txt.tagged"), tag_alone(in + "/two.txt.gz")) << "a .gz input: plain output";
  // The summary line: inputs, sentences, tokens, seconds, rate and device.
  const std::regex summary(R"(crfx tag: 2 inputs, 3 sentences, [0-9,]+ tokens in [0-9]+\.[0-9]{2} s \([0-9]+\.[0-9]{2} M tokens/s\) on (cpu \(1 thread\)|cuda:[^\n]*)\n)");
  EXPECT_TRUE(std::regex_search(out, summary)) << out;

  // --skip-existing: an output that exists is left alone (here marked, to be sure), the others made.
  write_text(out_dir + "/one.txt.tagged", "kept\n");
  fs::remove(out_dir + "/two.txt.tagged");
  ASSERT_EQ(run(crfx() + " tag -r " + q(in) + " -m " + q(model()) + " -O " + q(out_dir) +
                    " --suffix .tagged --skip-existing --threads 2",
                &out),
            0)
      << out;
  EXPECT_EQ(read_text(out_dir + "/one.txt.tagged"), "kept\n");
  EXPECT_EQ(read_text(out_dir + "/two.txt.tagged"), tag_alone(in + "/two.txt.gz"));
  EXPECT_NE(out.find("crfx tag: 1 input (1 more skipped: output exists), 2 sentences,"), std::string::npos) << out;
}

TEST(CliTagMany, ABadInputStopsTheRunOrIsListedWithKeepGoing) {
  const std::string in = temp_path("mixed"), out_dir = temp_path("mixed-out");
  fs::create_directories(in);
  const std::vector<std::string> s = sentences();
  write_text(in + "/1.txt", s[0]);
  write_text(in + "/2.txt", s[1] + "too many columns here x y\n\n");
  write_text(in + "/3.txt", s[2]);
  fs::create_directories(out_dir);
  write_text(out_dir + "/2.txt", "old output\n");
  const std::string bad = in + "/2.txt:" + std::to_string(std::count(s[1].begin(), s[1].end(), '\n') + 1) + ": ";
  std::string out;
  // Default: the run stops at the bad input; the inputs before it are written, nothing after.
  EXPECT_EQ(run(crfx() + " tag -r " + q(in) + " -m " + q(model()) + " -O " + q(out_dir) + " -q --threads 2", &out), 1);
  EXPECT_NE(out.find("crfx tag: " + bad + "inconsistent column count: expected 3 columns (as on line 1), got 6"), std::string::npos) << out;
  EXPECT_EQ(read_text(out_dir + "/1.txt"), tag_alone(in + "/1.txt"));
  EXPECT_EQ(read_text(out_dir + "/2.txt"), "old output\n") << "a failed input's old output is kept";
  EXPECT_FALSE(fs::exists(out_dir + "/3.txt"));
  for (const auto& e : fs::directory_iterator(out_dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "temporary left: " << e.path();

  // --keep-going: every other input is written; the failure is listed and the status is 1.
  EXPECT_EQ(run(crfx() + " tag -r " + q(in) + " -m " + q(model()) + " -O " + q(out_dir) + " --keep-going --threads 1",
                &out),
            1);
  EXPECT_NE(out.find("crfx tag: 1 of 3 inputs failed (no output written for them):\n  " + bad), std::string::npos)
      << out;
  EXPECT_NE(out.find("crfx tag: 3 inputs, 2 sentences,"), std::string::npos) << out;
  EXPECT_EQ(read_text(out_dir + "/3.txt"), tag_alone(in + "/3.txt"));
  EXPECT_EQ(read_text(out_dir + "/2.txt"), "old output\n");

  // One output (-o): a failure leaves an existing file as it was.
  const std::string one = temp_path("one.txt");
  write_text(one, "before\n");
  EXPECT_EQ(run(crfx() + " tag -r " + q(in) + " -m " + q(model()) + " -o " + q(one) + " -q", &out), 1);
  EXPECT_NE(out.find(bad), std::string::npos) << out;
  EXPECT_EQ(read_text(one), "before\n");
}

// Ctrl-C in the middle of a run over many documents: no temporary is left, every output that
// exists is whole (outputs are renamed into place only after their group was synced), and a
// second run with --skip-existing completes the set.
TEST(CliTagMany, AnInterruptedRunContinuesWithSkipExisting) {
  const std::vector<std::string> s = sentences();
  const std::string root = temp_dir() + "/docs", out_dir = temp_dir() + "/out";
  std::vector<std::string> names;
  std::string all;
  for (int d = 0; d < 2500; ++d) {
    char name[32];
    std::snprintf(name, sizeof name, "%02d/doc%04d.txt", d / 100, d);
    fs::create_directories(fs::path(root + "/" + name).parent_path());
    write_text(root + "/" + name, s[std::size_t(d) % s.size()]);
    names.push_back(name);
    all += s[std::size_t(d) % s.size()];
  }
  // The expected outputs: the documents' sentences tagged in one file, one block each.
  const std::string one_in = temp_path("all.txt"), one_out = temp_path("all.tagged");
  write_text(one_in, all);
  std::string out;
  ASSERT_EQ(run(crfx() + " tag " + q(one_in) + " -m " + q(model()) + " -q -o " + q(one_out), &out), 0) << out;
  std::vector<std::string> expected;
  {
    const std::string text = read_text(one_out);
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = text.find("\n\n", at) + 2;
      expected.push_back(text.substr(at, end - at));
      at = end;
    }
  }
  ASSERT_EQ(expected.size(), names.size());

  const std::string binary = crfx(), m = model();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL);
    ::execl(binary.c_str(), binary.c_str(), "tag", "-r", root.c_str(), "-m", m.c_str(), "-q", "-O", out_dir.c_str(),
            "--threads", "2", "--batch-tokens", "500", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto outputs = [&] {
    std::size_t whole = 0, temporary = 0;
    if (!fs::exists(out_dir)) return std::make_pair(whole, temporary);
    for (const auto& e : fs::recursive_directory_iterator(out_dir)) {
      if (!e.is_regular_file()) continue;
      (e.path().filename().string().find(".tmp.") == std::string::npos ? whole : temporary) += 1;
    }
    return std::make_pair(whole, temporary);
  };
  bool seen = false;  // the first group of outputs in place: the run is half-way
  for (int i = 0; i < 6000 && !seen; ++i) {
    seen = outputs().first > 0;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const auto [whole, temporary] = outputs();
  EXPECT_EQ(temporary, 0u) << "temporaries left behind";
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGINT);
    EXPECT_LT(whole, names.size()) << "stopped before the end";
  } else {
    ADD_FAILURE() << "the run ended before the signal (status " << status << "); nothing was interrupted";
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (fs::exists(out_dir + "/" + names[i])) {
      EXPECT_EQ(read_text(out_dir + "/" + names[i]), expected[i]) << names[i];
    }
  }

  ASSERT_EQ(run(crfx() + " tag -r " + q(root) + " -m " + q(model()) + " -O " + q(out_dir) + " --skip-existing", &out), 0)
      << out;
  EXPECT_NE(out.find(" more skipped: output exists)"), std::string::npos) << out;
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(read_text(out_dir + "/" + names[i]), expected[i]) << names[i];
}

// An input that fails after sentences of its own were read, with nothing else in the batch:
// those sentences are tagged and dropped with it (this once crashed: no text for its piece).
TEST(CliTagMany, AnInputFailingAfterItsFirstSentences) {
  const std::string dir = temp_dir();
  const std::vector<std::string> s = sentences();
  write_text(dir + "/bad.txt", s[0] + s[1] + "too many columns here x y\n\n");
  write_text(dir + "/good.txt", s[2]);
  std::string out;
  for (const std::string& mode : {" -O " + q(dir + "/out"), " -o " + q(dir + "/one.txt")}) {
    EXPECT_EQ(run(crfx() + " tag " + q(dir + "/bad.txt") + " -m " + q(model()) + " -q" + mode, &out), 1) << mode;
    EXPECT_NE(out.find(dir + "/bad.txt:"), std::string::npos) << out;
  }
  EXPECT_EQ(run(crfx() + " tag " + q(dir + "/bad.txt") + " " + q(dir + "/good.txt") + " -m " + q(model()) +
                    " -q --keep-going -O " + q(dir + "/out"),
                &out),
            1);
  EXPECT_FALSE(fs::exists(dir + "/out/bad.txt"));
  EXPECT_EQ(read_text(dir + "/out/good.txt"), tag_alone(dir + "/good.txt"));
}

TEST(CliTagMany, AnErrorFoundByTheWorkersDropsTheRestOfItsInput) {
  // CoNLL lines are split into columns on the workers (host/tag/tag_run.cpp), after the reader has
  // gone on past the bad line into later batches: those sentences of the failed input are dropped,
  // the error names its line, once, and the next input is tagged whole.
  const std::string dir = temp_dir();
  const std::vector<std::string> s = sentences();
  const std::string before = s[0] + s[1];
  write_text(dir + "/bad.txt", before + "too many columns here x y\n\n" + s[2] + s[3] + s[0]);
  write_text(dir + "/good.txt", s[2] + s[3]);
  const std::string where =
      dir + "/bad.txt:" + std::to_string(std::count(before.begin(), before.end(), '\n') + 1) + ":";
  for (const std::string threads : {"1", "2", "3"}) {
    std::string out;
    EXPECT_EQ(run(crfx() + " tag " + q(dir + "/bad.txt") + " " + q(dir + "/good.txt") + " -m " + q(model()) +
                      " -q --keep-going --batch-tokens 2 --threads " + threads + " -O " + q(dir + "/out" + threads),
                  &out),
              1);
    EXPECT_NE(out.find(where), std::string::npos) << out;
    EXPECT_EQ(out.find(where), out.rfind(where)) << "listed once:\n" << out;
    EXPECT_FALSE(fs::exists(dir + "/out" + threads + "/bad.txt"));
    EXPECT_EQ(read_text(dir + "/out" + threads + "/good.txt"), tag_alone(dir + "/good.txt"));
    // Without --keep-going, to standard output: the sentences before the bad line, then the error.
    EXPECT_EQ(run("{ " + crfx() + " tag " + q(dir + "/bad.txt") + " " + q(dir + "/good.txt") + " -m " + q(model()) +
                      " -q --batch-tokens 2 --threads " + threads + " 2>/dev/null; }",
                  &out),
              1);
    write_text(dir + "/before.txt", before);
    EXPECT_EQ(out, tag_alone(dir + "/before.txt"));
  }
}

TEST(CliTagMany, CrfsuiteLinesCheckedByTheWorkers) {
  // CRFsuite lines are checked on the workers too (host/tag/tag_run.cpp): an attribute error drops
  // the rest of its input, read on into later batches. Lines that look like CoNLL columns (an
  // error at line 3 says so) are not refused as such for what was read on past their error.
  const std::string dir = temp_dir();
  std::string cs_model = dir + "/cs.model", out;
  ASSERT_EQ(run(crfx() + " train --format crfsuite " + q(data_path("conll2000.train60.crfsuite.txt")) + " -m " +
                    q(cs_model) + " --max-iterations 10 -q",
                &out),
            0)
      << out;
  std::vector<std::string> s;
  std::istringstream in(read_text(data_path("conll2000.test30.crfsuite.txt")));
  for (std::string line, current; std::getline(in, line);) {
    current += line + "\n";
    if (line.empty()) s.push_back(current), current.clear();
  }
  ASSERT_GE(s.size(), 4u);
  const std::string before = s[0] + s[1];
  write_text(dir + "/bad.txt", before + "B-NP\tw=x:abc\n\n" + s[2] + s[3] + s[0]);
  std::string conll;
  for (int i = 0; i < 40; ++i) conll += std::string(i == 2 ? "x\tx:abc\tO\n" : "He\tPRP\tB-NP\n") + (i % 5 == 4 ? "\n" : "");
  write_text(dir + "/conll.txt", conll);
  write_text(dir + "/good.txt", s[2] + s[3]);
  write_text(dir + "/before.txt", before);
  auto tag = [&](const std::string& inputs, const std::string& options) {
    std::string text;
    const int rc = run("{ " + crfx() + " tag " + inputs + " -m " + q(cs_model) + " -q " + options + "; }", &text);
    return std::make_pair(rc, text);
  };
  const std::string good_alone = tag(q(dir + "/good.txt"), "2>/dev/null").second;
  const std::string before_alone = tag(q(dir + "/before.txt"), "2>/dev/null").second;
  const std::string bad_at = dir + "/bad.txt:" + std::to_string(std::count(before.begin(), before.end(), '\n') + 1) + ":";
  const std::string conll_at = dir + "/conll.txt:3: lines 1–3 look like CoNLL columns";
  const std::string all = q(dir + "/bad.txt") + " " + q(dir + "/conll.txt") + " " + q(dir + "/good.txt");
  for (const std::string threads : {"1", "2", "3"}) {
    const std::string o = dir + "/out" + threads;
    const auto kept = tag(all, "--keep-going --batch-tokens 2 --threads " + threads + " -O " + q(o));
    EXPECT_EQ(kept.first, 1);
    for (const std::string& where : {bad_at, conll_at}) {
      EXPECT_NE(kept.second.find(where), std::string::npos) << kept.second;
      EXPECT_EQ(kept.second.find(where), kept.second.rfind(where)) << "listed once:\n" << kept.second;
    }
    EXPECT_EQ(kept.second.find("unknown to the model"), std::string::npos) << kept.second;
    EXPECT_FALSE(fs::exists(o + "/bad.txt") || fs::exists(o + "/conll.txt"));
    EXPECT_EQ(read_text(o + "/good.txt"), good_alone);
    // Without --keep-going, to standard output: the sentences before the bad line, then the error.
    EXPECT_EQ(tag(all, "--batch-tokens 2 --threads " + threads + " 2>/dev/null"), std::make_pair(1, before_alone));
    const auto stopped = tag(q(dir + "/conll.txt") + " " + q(dir + "/good.txt"), "--batch-tokens 2 --threads " + threads);
    EXPECT_EQ(stopped.first, 1);
    EXPECT_EQ(stopped.second.rfind("crfx tag: " + conll_at, 0), 0u) << stopped.second;
  }
}

TEST(CliTagMany, OutputsMayNotOverwriteInputs) {
  const std::string dir = temp_path("self");
  fs::create_directories(dir);
  write_text(dir + "/x.txt", sentences()[0]);
  std::string out;
  // -O onto the inputs' own directory with no suffix would replace each input by its output.
  EXPECT_EQ(run(crfx() + " tag " + q(dir + "/x.txt") + " -m " + q(model()) + " -O " + q(dir), &out), 1);
  EXPECT_NE(out.find("cannot write " + dir + "/x.txt: it is an input of this run"), std::string::npos) << out;
  EXPECT_EQ(read_text(dir + "/x.txt"), sentences()[0]);
}

TEST(CliTagMany, ProgressLinesHaveTheirFormat) {
  const std::string root = temp_path("progress-docs");
  make_documents(root);
  std::string out;
  ASSERT_EQ(run(crfx() + " tag -r " + q(root) + " -m " + q(model()) + " -o /dev/null --progress --threads 2", &out), 0)
      << out;
  // Not a terminal: lines of their own, the last one at the end of the run.
  const std::regex line(
      R"(crfx tag: [0-9,]+ of [0-9,]+ inputs, [0-9,]+ tokens, [0-9]+\.[0-9]{2} M tokens/s, [0-9]+% of [0-9]+ kB read, ETA [0-9]+:[0-9]{2}\n)");
  EXPECT_TRUE(std::regex_search(out, line)) << out;
  EXPECT_NE(out.find(" inputs, 2,279 tokens, "), std::string::npos) << "the last line counts every token:\n" << out;
  EXPECT_NE(out.find("100% of "), std::string::npos) << out;
  // -q: nothing.
  ASSERT_EQ(run(crfx() + " tag -r " + q(root) + " -m " + q(model()) + " -o /dev/null --progress -q", &out), 0);
  EXPECT_EQ(out, "");
}

TEST(CliEvalMany, OneReportPerFileAndATotal) {
  const std::string a = temp_path("a.tagged"), b = temp_path("b.tagged"), both = temp_path("both.tagged");
  const std::vector<std::string> s = sentences();
  std::string first, second;
  for (std::size_t i = 0; i < s.size(); ++i) (i < s.size() / 2 ? first : second) += s[i];
  const std::string first_path = temp_path("first.txt"), second_path = temp_path("second.txt");
  write_text(first_path, first);
  write_text(second_path, second);
  const std::string ta = tag_alone(first_path), tb = tag_alone(second_path);
  write_text(a, ta);
  write_text(b, tb);
  write_text(both, ta + tb);
  std::string out, one_a, whole;
  ASSERT_EQ(run(crfx() + " eval " + q(a) + " " + q(b), &out), 0) << out;
  ASSERT_EQ(run(crfx() + " eval " + q(a), &one_a), 0) << one_a;
  ASSERT_EQ(run(crfx() + " eval " + q(both), &whole), 0) << whole;
  EXPECT_EQ(out.find("== " + a + "\n" + one_a + "\n== " + b + "\n"), 0u) << out;
  EXPECT_NE(out.find("== total: 2 files\n" + whole), std::string::npos) << "the total is the report over both:\n"
                                                                        << out << "\n" << whole;
}

}  // namespace
}  // namespace crfx::test
