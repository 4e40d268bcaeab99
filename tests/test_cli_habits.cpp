// CRFsuite, CRF++ and conlleval users' habits (crfx learn, the hints of train, tag and eval),
// crfx eval --json and --total-only, crfx train's ETA, and the man page and bash completion
// written by scripts/crfx-docs.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crfx::test {
namespace {

std::string crfx() { return crfx_binary(); }
std::string q(const std::string& s) { return "'" + s + "'"; }

const std::string kCrfsuite = data_path("conll2000.train60.crfsuite.txt");
const std::string kCrfsuiteTest = data_path("conll2000.test30.crfsuite.txt");
const std::string kConll = data_path("conll2000.train300.txt");
const std::string kTemplate = data_path("chunking.template");
const std::string kDocs = data_path("../../scripts/crfx-docs.sh");

/// A model of the CRFsuite slice and its tagged test slice (gold and predicted label), made once.
const std::string& crfsuite_model() {
  static const std::string model = [] {
    const std::string m = temp_path("habits.model");
    std::string out;
    if (run(crfx() + " train " + q(kCrfsuite) + " --format crfsuite --max-iterations 10 -q -m " + q(m), &out) != 0)
      throw std::runtime_error("training failed: " + out);
    return m;
  }();
  return model;
}

const std::string& tagged() {
  static const std::string path = [] {
    const std::string t = temp_path("habits.tagged");
    std::string out;
    if (run(crfx() + " tag " + q(kCrfsuiteTest) + " -m " + q(crfsuite_model()) + " -q -o " + q(t), &out) != 0)
      throw std::runtime_error("tagging failed: " + out);
    return t;
  }();
  return path;
}

// ---- a small JSON reader: enough to check that crfx eval --json is JSON and read its figures ----

struct Json {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> members;
  const Json& operator[](const std::string& key) const {
    const auto it = members.find(key);
    if (kind != object || it == members.end()) throw std::runtime_error("no member '" + key + "'");
    return it->second;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  /// The one value of the text (anything after it but white space is an error).
  Json document() {
    Json v = value();
    space();
    if (i_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_));
  }
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_value() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      const char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unfinished escape");
      const char e = s_[i_++];
      const std::string simple = "\"\\/bfnrt", meaning = "\"\\/\b\f\n\r\t";
      if (simple.find(e) != std::string::npos) {
        out += meaning[simple.find(e)];
      } else if (e == 'u' && i_ + 4 <= s_.size()) {
        const unsigned code = unsigned(std::stoul(s_.substr(i_, 4), nullptr, 16));
        i_ += 4;
        if (code >= 0x80) fail("only ASCII \\u escapes are read here");
        out += char(code);
      } else {
        fail("bad escape");
      }
    }
    if (i_ >= s_.size()) fail("unfinished string");
    ++i_;
    return out;
  }
  Json value() {
    space();
    Json v;
    if (i_ >= s_.size()) fail("no value");
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Json::object;
      ++i_;
      if (take('}')) return v;
      do {
        const std::string key = string_value();
        expect(':');
        if (!v.members.emplace(key, value()).second) fail("repeated key '" + key + "'");
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::array;
      ++i_;
      if (take(']')) return v;
      do v.items.push_back(value());
      while (take(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::string;
      v.str = string_value();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::boolean;
      v.num = s_[i_] == 't';
      i_ += s_[i_] == 't' ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      v.kind = Json::number;
      v.num = std::strtod(start, &end);
      const std::string text(start, static_cast<const char*>(end));
      if (end == start || c == '+' || c == '.' || text.find_first_of("xXnN") != std::string::npos) fail("not a value");
      i_ += std::size_t(end - start);
    }
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

Json parse_json(const std::string& text) { return JsonReader(text).document(); }

/// The number after `key` in a text report ("FB1:", "accuracy:").
double figure(const std::string& report, const std::string& key) {
  const std::size_t at = report.find(key);
  if (at == std::string::npos) throw std::runtime_error("no '" + key + "' in:\n" + report);
  return std::stod(report.substr(at + key.size()));
}

// ---- habits --------------------------------------------------------------------------------

/// A CRFsuite, CRF++ or conlleval habit: crfx's arguments (DATA, CS, MODEL, TAGGED and OUT stand
/// for files), the exit status, and what the message must say (the crfx way).
struct Habit {
  const char* args;
  int status;
  const char* says;
};

std::string expand(std::string args) {
  const std::pair<const char*, std::string> files[] = {
      {"DATA", q(kConll) + " -t " + q(kTemplate)}, {"CS", q(kCrfsuite)}, {"MODEL", q(crfsuite_model())},
      {"TAGGED", q(tagged())}, {"OUT", q(temp_path("habit.out"))}};
  for (const auto& [name, path] : files)
    for (std::size_t at; (at = args.find(name)) != std::string::npos;) args.replace(at, std::string(name).size(), path);
  return args;
}

TEST(CliHabits, EachHabitGetsTheCrfxWay) {
  const Habit habits[] = {
      // CRF++'s crf_learn -a, in crfx train.
      {"train DATA -m OUT -a CRF-L2", 2, "CRF++'s -a CRF-L2 is -a lbfgs here"},
      {"train DATA -m OUT -a crf-l1", 2, "is -a owlqn --c1 1/C --c2 0 here"},
      {"train DATA -m OUT -q -a MIRA --epochs 2", 0, ""},  // CRF++'s MIRA is crfx's mira, in any case (issue 41)
      {"train DATA -m OUT -q -a Mira", 0, "-a mira runs at most --epochs 30 by default (CRF++'s crf_learn -m 100000"},
      {"train DATA -m OUT -H 5", 2, "CRF++'s -H N (MIRA's shrinking size) is --shrinking-size N here"},
      {"train DATA -m OUT -q -a pa --epochs 1", 0, ""},  // CRFsuite's pa and arow are crfx's (issue 41)
      {"train DATA -m OUT -p c2=1", 2, "CRFsuite's -p NAME=VALUE is understood by 'crfx learn'"},
      // CRFsuite's learn.
      {"learn CS -m OUT -q -a l2sgd -p max_iterations=2", 0, "-p max_iterations=2 is --epochs 2"},  // (issue 41)
      {"learn CS -m OUT -a crf-l1", 2, "CRF++'s -a crf-l1 is -a owlqn --c1 1/C --c2 0 here"},
      {"learn CS -m OUT -q -a MIRA -p max_iterations=2", 0, "-p max_iterations=2 is --epochs 2"},
      {"learn CS -m OUT -q -a pa -p type=0 -p c=2 -p max_iterations=2", 0, "-p type=0 is --pa-type 0"},
      {"learn CS -m OUT -q -a arow -p variance=0.5 -p gamma=2 -p max_iterations=2", 0, "-p gamma=2 is --gamma 2"},
      {"learn CS -m OUT -p linesearch=Backtracking", 2, "one line search, strong Wolfe"},
      {"learn CS -m OUT -q -a l2sgd -p calibration.eta=0.2 -p max_iterations=2", 0,
       "-p calibration.eta=0.2 is --calibration-eta 0.2"},
      {"learn CS -m OUT -p calibration.eta=0.1", 2, "--calibration-eta is not a setting of lbfgs"},
      {"learn CS -m OUT -p stop=10", 2, "not a CRFsuite setting crfx learn translates"},
      {"learn CS -m OUT -p c2", 2, "CRFsuite's -p takes NAME=VALUE"},
      {"learn CS -m OUT -p feature.possible_states=2", 2, "0 or 1 (1 is --possible-states)"},
      {"learn CS -m OUT -p feature.minfreq=0.5", 2, "--min-freq counts occurrences"},
      {"learn CS -m OUT -e2", 2, "--dev FILE scores held-out data"},
      {"learn CS -m OUT -H", 2, "is 'crfx train --algo list' here"},
      {"learn CS -m OUT -l", 2, "is --log FILE here"},
      {"learn CS -m OUT -q -p c2=0.5 -p max_iterations=2", 0, "crfx learn: note: -p c2=0.5 is --c2 0.5"},
      {"learn CS -m OUT -q --set=max_iterations=2", 0, "-p max_iterations=2 is --max-iterations 2"},
      {"learn CS -m OUT -q -a ap -p max_iterations=2", 0, "-p max_iterations=2 is --epochs 2"},
      {"learn CS -m OUT -q -a sag -p max_iterations=2", 0, "-p max_iterations=2 is --max-epochs 2"},
      {"learn CS -m OUT -q -p max_iterations=2 -p num_memories=3", 0, "-p num_memories=3 is --memory 3"},
      {"learn CS -m OUT -q -p max_iterations=2 -p epsilon=0.01 -p delta=0.001 -p period=3", 0,
       "-p period=3 is --period 3"},
      {"learn CS -m OUT -q -p max_iterations=2 -p feature.possible_transitions=1", 0, "is --possible-transitions"},
      {"learn CS -m OUT -q -p max_iterations=2 -p feature.possible_states=0", 0,
       "crfx's default (no --possible-states)"},
      {"learn CS -m OUT -q -p max_iterations=2 -p feature.minfreq=2", 0, "-p feature.minfreq=2 is --min-freq 2"},
      {"learn CS -m OUT -q -p max_iterations=2 -p c1=0.1", 0, "-p c1=0.1 is --c1 0.1"},
      {"learn CS -m OUT -q -p max_iterations=2 -t 1d", 0, "-t 1d (CRFsuite's first-order CRF) is crfx's --type crf"},
      {"learn CS -m OUT -q -a ap", 0, "-a ap runs --epochs 30 by default"},
      // CRFsuite's tag.
      {"tag CS -m MODEL -qt", 2, "crfx eval on the tagged output (crfx tag … | crfx eval -)"},
      {"tag CS -m MODEL -t", 2, "CRFsuite's tag -t (evaluate) is crfx eval"},
      {"tag CS -m MODEL -i", 2, "is --marginals here"},
      {"tag CS -m MODEL --reference", 2, "the input's gold label is kept"},
      {"tag CS -m MODEL -r -o OUT", 0, "CRFsuite's tag -r (the reference labels) is what crfx tag does anyway"},
      {"tag CS -m MODEL -R", 2, "crfx tag's recursive option is -r"},
      // conlleval's -r; -r is recursive in crfx.
      {"eval TAGGED -r", 2, "conlleval's -r (raw labels) is --raw here, and -R/--recursive reads directories"},
      {"eval TAGGED --raw", 0, "processed 720 tokens"},
  };
  for (const Habit& h : habits) {
    std::string out;
    EXPECT_EQ(run(crfx() + " " + expand(h.args), &out), h.status) << h.args << "\n" << out;
    EXPECT_NE(out.find(h.says), std::string::npos) << h.args << "\n" << out;
  }
  // The note on -r only when no argument is a directory; with one, -r recurses into it.
  const std::string dir = temp_path("habits-dir");
  std::filesystem::create_directories(dir);
  write_text(dir + "/a.txt", read_text(kCrfsuiteTest));
  const std::string dir_out = temp_path("dir.out");
  std::string out;
  ASSERT_EQ(run(crfx() + " tag -r " + q(dir) + " -m " + q(crfsuite_model()) + " -o " + q(dir_out), &out), 0) << out;
  EXPECT_EQ(out.find("CRFsuite's tag -r"), std::string::npos) << out;
  EXPECT_EQ(read_text(dir_out), read_text(tagged()));
}

// crfx learn is crfx train with CRFsuite's options translated: the same model, byte for byte.
TEST(CliHabits, LearnGivesTrainsModel) {
  const std::string learned = temp_path("learned.model"), trained = temp_path("trained.model");
  std::string out;
  ASSERT_EQ(run(crfx() + " learn " + q(kCrfsuite) + " -p c2=0.5 -p max_iterations=5 -m " + q(learned), &out), 0) << out;
  EXPECT_NE(out.find("crfx learn: note: -p c2=0.5 is --c2 0.5\n"), std::string::npos) << out;
  EXPECT_NE(out.find("crfx learn: note: -p max_iterations=5 is --max-iterations 5\n"), std::string::npos) << out;
  ASSERT_EQ(run(crfx() + " train --format crfsuite --c2 0.5 --max-iterations 5 -q -m " + q(trained) + " " +
                    q(kCrfsuite), &out),
            0)
      << out;
  EXPECT_EQ(read_text(learned), read_text(trained));
  // The same with CRFsuite's -a ap: max_iterations is ap's epochs.
  ASSERT_EQ(run(crfx() + " learn " + q(kCrfsuite) + " -a ap -p max_iterations=3 -q -m " + q(learned), &out), 0) << out;
  ASSERT_EQ(run(crfx() + " train " + q(kCrfsuite) + " --format crfsuite -a ap --epochs 3 -q -m " + q(trained), &out), 0)
      << out;
  EXPECT_EQ(read_text(learned), read_text(trained));
  // and a setting that changes the model does change it (the translation is not a no-op).
  ASSERT_EQ(run(crfx() + " learn " + q(kCrfsuite) + " -a ap -p max_iterations=2 -q -m " + q(learned), &out), 0) << out;
  EXPECT_NE(read_text(learned), read_text(trained));
  // learn's help says what it takes.
  ASSERT_EQ(run(crfx() + " learn --help", &out), 0) << out;
  EXPECT_NE(out.find("crfx learn [OPTION...] DATA..."), std::string::npos) << out;
  EXPECT_NE(out.find("-p, --set"), std::string::npos) << out;
  EXPECT_NE(out.find("(default: crfsuite)"), std::string::npos) << out;
}

// ---- eval --json, --total-only ---------------------------------------------------------------

TEST(CliHabits, EvalJsonHasTheReportsFigures) {
  std::string text, json;
  ASSERT_EQ(run(crfx() + " eval " + q(tagged()), &text), 0) << text;
  ASSERT_EQ(run(crfx() + " eval --json " + q(tagged()), &json), 0) << json;
  const Json one = parse_json(json);
  EXPECT_EQ(one["file"].str, tagged());
  EXPECT_EQ(one["mode"].str, "chunk");
  EXPECT_EQ(one["tokens"].num, figure(text, "processed "));
  EXPECT_NEAR(one["accuracy"].num, figure(text, "accuracy: "), 0.005) << text << json;
  EXPECT_NEAR(one["chunks"]["f1"].num, figure(text, "FB1: "), 0.005) << text << json;
  EXPECT_NEAR(one["chunks"]["precision"].num, figure(text, "precision: "), 0.005) << text << json;
  EXPECT_EQ(one["chunks"]["gold"].num, figure(text, " with "));
  EXPECT_EQ(one["chunks"]["guessed"].num, figure(text, "found: "));
  EXPECT_EQ(one["chunks"]["correct"].num, figure(text, "correct: "));
  EXPECT_NEAR(one["types"]["NP"]["f1"].num, figure(text.substr(text.find("  NP: ")), "FB1: "), 0.005) << text;

  // Several files: each file's object, then the total; --total-only: the total alone.
  ASSERT_EQ(run(crfx() + " eval --json " + q(tagged()) + " " + q(tagged()), &json), 0) << json;
  const Json two = parse_json(json);
  ASSERT_EQ(two["files"].items.size(), 2u) << json;
  EXPECT_EQ(two["files"].items[1]["chunks"]["f1"].num, one["chunks"]["f1"].num);
  EXPECT_EQ(two["total"]["files"].num, 2);
  EXPECT_EQ(two["total"]["tokens"].num, 2 * one["tokens"].num);
  EXPECT_EQ(two["total"]["chunks"]["correct"].num, 2 * one["chunks"]["correct"].num);
  ASSERT_EQ(run(crfx() + " eval --json --total-only " + q(tagged()) + " " + q(tagged()), &json), 0) << json;
  const Json total = parse_json(json);
  EXPECT_EQ(total["files"].num, 2);
  EXPECT_EQ(total["tokens"].num, 2 * one["tokens"].num);
  EXPECT_EQ(total.members.count("file"), 0u);
  ASSERT_EQ(run(crfx() + " eval --total-only " + q(tagged()) + " " + q(tagged()), &text), 0) << text;
  EXPECT_EQ(text.rfind("== total: 2 files\nprocessed 1440 tokens", 0), 0u) << text;
  EXPECT_EQ(text.find("== " + tagged()), std::string::npos) << text;

  // The item report, with labels that JSON must escape, and --confusion's pairs.
  const std::string items = temp_path("items.txt");
  write_text(items, "a N\"q N\"q\nb V\\b N\"q\n\nc N\"q N\"q\n");
  ASSERT_EQ(run(crfx() + " eval --json --confusion " + q(items), &json), 0) << json;
  const Json item = parse_json(json);
  EXPECT_EQ(item["mode"].str, "item");
  EXPECT_EQ(item["tokens"].num, 3);
  EXPECT_EQ(item["correct_sentences"].num, 1);
  EXPECT_NEAR(item["accuracy"].num, 200.0 / 3, 1e-6);
  EXPECT_EQ(item["labels"]["N\"q"]["guessed"].num, 3);
  EXPECT_EQ(item["labels"]["V\\b"]["gold"].num, 1);
  ASSERT_EQ(item["confusions"].items.size(), 1u);
  EXPECT_EQ(item["confusions"].items[0]["gold"].str, "V\\b");
  EXPECT_EQ(item["confusions"].items[0]["count"].num, 1);
}

// ---- train's ETA -----------------------------------------------------------------------------

TEST(CliHabits, TrainShowsAnEtaWhenTheRunHasACap) {
  const std::string m = temp_path("eta.model"), log = temp_path("eta.csv");
  std::string out;
  auto eta_lines = [](const std::string& text) {
    std::size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("iter ", 0) == 0 && line.find("  eta ") != std::string::npos) ++n;
    return n;
  };
  ASSERT_EQ(run(crfx() + " train " + q(kCrfsuite) + " --format crfsuite --max-iterations 4 -m " + q(m) + " --log " +
                    q(log), &out),
            0)
      << out;
  EXPECT_EQ(eta_lines(out), 3u) << out;  // none on the last iteration
  EXPECT_NE(out.find(" s  eta "), std::string::npos) << out;
  EXPECT_EQ(read_text(log).find("eta"), std::string::npos);
  ASSERT_EQ(run(crfx() + " train " + q(kCrfsuite) + " --format crfsuite -a ap --epochs 3 -m " + q(m), &out), 0) << out;
  EXPECT_EQ(eta_lines(out), 2u) << out;
  // Unbounded (lbfgs stops by its tests): none.
  ASSERT_EQ(run(crfx() + " train " + q(kCrfsuite) + " --format crfsuite --delta 0.01 -m " + q(m), &out), 0) << out;
  EXPECT_NE(out.find("iter "), std::string::npos) << out;
  EXPECT_EQ(eta_lines(out), 0u) << out;
}

// ---- man page, bash completion ---------------------------------------------------------------

/// The commands `crfx --help` lists.
std::vector<std::string> commands() {
  std::string out;
  run(crfx() + " --help", &out);
  std::vector<std::string> names;
  std::istringstream in(out.substr(out.find("commands:\n")));
  for (std::string line; std::getline(in, line);)
    if (line.size() > 2 && line.compare(0, 2, "  ") == 0 && std::islower(static_cast<unsigned char>(line[2])))
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
  return names;
}

TEST(CliHabits, ManPageNamesEveryCommandAndOption) {
  const std::vector<std::string> names = commands();
  ASSERT_GE(names.size(), 6u);
  std::string man;
  ASSERT_EQ(run("bash " + q(kDocs) + " man " + q(crfx()), &man), 0) << man;
  EXPECT_EQ(man.rfind(".TH CRFX 1 ", 0), 0u) << man.substr(0, 200);
  for (std::string name : names) {
    EXPECT_NE(man.find(".TP\n.B " + name + "\n"), std::string::npos) << name;  // in COMMANDS
    for (char& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_NE(man.find(".SH \"CRFX " + name + "\"\n"), std::string::npos) << name;  // its section
  }
  // Options of each command, from its --help: a sample.
  for (const char* option : {"\\fB\\-\\-max\\-iterations\\fR \\fIvalue\\fR", "\\fB\\-p\\fR, \\fB\\-\\-set\\fR",
                             "\\fB\\-\\-json\\fR", "\\fB\\-\\-total\\-only\\fR", "\\fB\\-\\-marginals\\fR",
                             "\\fB\\-\\-thread\\-list\\fR", ".B two\\-stage\n"})
    EXPECT_NE(man.find(option), std::string::npos) << option;
  EXPECT_TRUE(std::none_of(man.begin(), man.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
      << "non-ASCII left in the page";
  // groff reads it without a warning, where groff is installed.
  const std::string page = temp_path("crfx.1");
  write_text(page, man);
  std::string warnings;
  if (run("command -v groff", &warnings) == 0) {
    EXPECT_EQ(run("groff -man -Tutf8 -ww -z " + q(page), &warnings), 0) << warnings;
    EXPECT_EQ(warnings, "");
  }
}

TEST(CliHabits, CompletionListsEveryCommandAndCompletes) {
  std::string script;
  ASSERT_EQ(run("bash " + q(kDocs) + " completion " + q(crfx()), &script), 0) << script;
  const std::size_t list = script.find("compgen -W \"");
  ASSERT_NE(list, std::string::npos) << script;
  const std::string words = " " + script.substr(list + 12, script.find('"', list + 12) - list - 12) + " ";
  for (const std::string& name : commands())
    EXPECT_NE(words.find(" " + name + " "), std::string::npos) << name << words;
  for (const std::string& name : commands()) EXPECT_NE(script.find("    " + name + ")\n"), std::string::npos) << name;
  const std::string file = temp_path("crfx.bash");
  write_text(file, script);
  // Completed in bash: the command, an option of that command, an option's choices.
  auto complete = [&](const std::string& words, int cword) {
    std::string out;
    run("bash -c " + q("source " + file + "; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                       "; _crfx; echo \"${COMPREPLY[*]}\""),
        &out);
    return out;
  };
  EXPECT_EQ(complete("crfx le", 1), "learn\n");
  EXPECT_EQ(complete("crfx eval --to", 2), "--total-only\n");
  EXPECT_EQ(complete("crfx train --format c", 3), "conll crfsuite\n");
  EXPECT_EQ(complete("crfx learn -a two", 3), "two-stage\n");
  EXPECT_EQ(complete("crfx eval --mode ", 3), "auto chunk item\n");
}

}  // namespace
}  // namespace crfx::test
