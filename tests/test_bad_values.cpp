// Attribute values that are not finite numbers (issue 17, item 4a): a CRFsuite attribute
// `name:value` whose value is NaN, ±inf or overflows to inf ("1e999") is refused when it is read,
// with the usual "file:line: problem" naming the attribute — by the library (read_crfsuite,
// CrfsuiteReader, read_text) and by every crfx command that reads CRFsuite data (train, its --dev
// file, tag). Data built in memory (the Python module's path) is checked by compile_training and
// compile. CoNLL columns and templates carry no values (every attribute is 1), so there is
// nothing to check there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "fault/spawn.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

namespace fs = std::filesystem;

/// Two CRFsuite sequences; `bad` replaces the attribute of line 4.
std::string crfsuite_data(const std::string& bad = "pos=VBZ") {
  return "B-NP\tw=He\tpos=PRP\n"
         "B-VP\tw=reckons\tpos=VBZ\n"
         "\n"
         "B-NP\tw=the\t" + bad + "\n"
         "I-NP\tw=deficit\tpos=NN\n";
}

/// The values refused, as written in the file, and what strtod makes of them.
const std::vector<std::string> kNotFinite = {"nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999",
                                             "0x1p99999", "1.8e308"};

struct Case {
  std::string text;    // the value as written
  std::string raw;     // the whole attribute field
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& v : kNotFinite) out.push_back({v, "w=x:" + v});
  out.push_back({"inf", "a\\:b:inf"});  // an escaped ':' in the name: the value is after the last ':'
  return out;
}

// ---- the library ----------------------------------------------------------------------------

TEST(BadValue, ReadCrfsuiteRefusesEveryNonFiniteValue) {
  for (const Case& c : cases()) {
    const std::string p = temp_path("values.txt");
    write_text(p, crfsuite_data(c.raw));
    try {
      read_crfsuite(p);
      ADD_FAILURE() << c.raw << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), p);
      EXPECT_EQ(e.line(), 4u) << c.raw;
      EXPECT_EQ(e.problem(), "attribute '" + c.raw + "': value '" + c.text + "' is not a finite number");
      EXPECT_EQ(std::string(e.what()), p + ":4: " + e.problem());
    }
  }
}

TEST(BadValue, ReaderReturnsTheSequencesBeforeTheBadOne) {
  const std::string p = temp_path("values.txt");
  write_text(p, crfsuite_data("pos=DT:nan"));
  CrfsuiteReader reader(p);
  CrfsuiteSentence s;
  ASSERT_TRUE(reader.next(s));  // the first sequence is whole and good
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].attributes[1].name, "pos=VBZ");
  EXPECT_EQ(s[1].attributes[1].value, 1.0);
  EXPECT_THROW(reader.next(s), InputError);
}

TEST(BadValue, ReadTextOfCrfsuiteDataRefusesIt) {
  const std::string p = temp_path("values.txt.gz");  // through the gzip path too
  write_gz(p, crfsuite_data("pos=DT:-inf"));
  FeatureSpace space;
  space.format = InputFormat::crfsuite;
  try {
    read_text(space, p);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), p + ":4: attribute 'pos=DT:-inf': value '-inf' is not a finite number");
  }
}

TEST(BadValue, FiniteExtremesAreRead) {
  // Underflow to zero or a subnormal is a finite value (and harmless); so are signs and exponents.
  const std::string p = temp_path("values.txt");
  write_text(p, "A\ta:1e-999\tb:-2.5e-310\tc:+3\td:-1e3\te\n");
  const auto s = read_crfsuite(p);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0][0].attributes.size(), 5u);
  EXPECT_EQ(s[0][0].attributes[0].value, 0.0);
  EXPECT_TRUE(std::isfinite(s[0][0].attributes[1].value));
  EXPECT_LT(s[0][0].attributes[1].value, 0.0);
  EXPECT_EQ(s[0][0].attributes[2].value, 3.0);
  EXPECT_EQ(s[0][0].attributes[3].value, -1000.0);
  EXPECT_EQ(s[0][0].attributes[4].value, 1.0);
}

/// CRFsuite data made in memory (as the Python module makes it), with one value `v`.
TextData in_memory(double v, const std::string& name = "w=x") {
  TextData d;
  d.format = InputFormat::crfsuite;
  d.path = "<X>";
  CrfsuiteSentence s(2);
  s[0].label = "A";
  s[0].line = 1;
  s[0].attributes = {{"w=y", 1.0}};
  s[1].label = "B";
  s[1].line = 2;
  s[1].attributes = {{"w=z", 0.5}, {name, v}};
  d.crfsuite.push_back(s);
  return d;
}

TEST(BadValue, CompileTrainingRefusesNonFiniteValuesMadeInMemory) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::pair<double, std::string> values[] = {{nan, "nan"}, {inf, "inf"}, {-inf, "-inf"}};
  for (const auto& [v, text] : values) {
    FeatureSpace space;
    space.format = InputFormat::crfsuite;
    try {
      compile_training(space, in_memory(v), 1);
      ADD_FAILURE() << text << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "<X>:2: attribute 'w=x': value " + text + " is not a finite number");
    }
  }
}

TEST(BadValue, CompileRefusesThemAtTagTimeEvenForUnseenAttributes) {
  FeatureSpace space;
  space.format = InputFormat::crfsuite;
  compile_training(space, in_memory(2.0), 1);
  // A known attribute and one never seen in training (which gets no weight) alike.
  for (const std::string name : {"w=x", "w=never-seen"}) {
    try {
      compile(space, in_memory(std::numeric_limits<double>::infinity(), name));
      ADD_FAILURE() << name << ": accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "<X>:2: attribute '" + name + "': value inf is not a finite number");
    }
  }
  EXPECT_NO_THROW(compile(space, in_memory(-7.0)));
}

// ---- the crfx commands ----------------------------------------------------------------------

struct Dir {
  std::string path = temp_dir();
  std::string scratch = temp_dir();  // the captured output, apart from the files checked
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

Spawned crfx_in(const Dir& d, const std::vector<std::string>& args) {
  std::vector<std::string> argv{crfx_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions o;
  o.cwd = d.path;
  return spawn(argv, o, d.scratch);
}

/// Nothing but `names` in the directory (no temporary, no new output).
::testing::AssertionResult only_files(const Dir& d, std::vector<std::string> names) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(d.path)) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  std::sort(names.begin(), names.end());
  if (found == names) return ::testing::AssertionSuccess();
  std::string list;
  for (const auto& f : found) list += " " + f;
  return ::testing::AssertionFailure() << "the directory holds:" << list;
}

TEST(BadValue, CrfxTrainRefusesEachWithFileLineAndAttribute) {
  for (const Case& c : cases()) {
    Dir d;
    write_text(d / "train.txt", crfsuite_data(c.raw));
    write_text(d / "out.model", "old model\n");
    const Spawned r = crfx_in(d, {"train", "train.txt", "--format", "crfsuite", "-m", "out.model", "-q"});
    EXPECT_EQ(r.status, 1) << c.raw;
    EXPECT_EQ(r.err, "crfx train: train.txt:4: attribute '" + c.raw + "': value '" + c.text +
                         "' is not a finite number\n");
    EXPECT_EQ(read_text(d / "out.model"), "old model\n") << c.raw;
    EXPECT_TRUE(only_files(d, {"train.txt", "out.model"})) << c.raw;
  }
}

/// A CRFsuite model trained once on good data (crfx_in's directory layout).
const std::string& crfsuite_model() {
  static const std::string model = [] {
    Dir d;
    write_text(d / "train.txt", crfsuite_data());
    const Spawned r = crfx_in(d, {"train", "train.txt", "--format", "crfsuite", "-m", "m.model", "-q"});
    if (r.status != 0) throw std::runtime_error("training failed: " + r.err);
    return d / "m.model";
  }();
  return model;
}

TEST(BadValue, CrfxTrainRefusesThemInTheDevFile) {
  Dir d;
  write_text(d / "train.txt", crfsuite_data());
  write_text(d / "dev.txt", crfsuite_data("pos=DT:1e999"));
  const Spawned r =
      crfx_in(d, {"train", "train.txt", "--format", "crfsuite", "--dev", "dev.txt", "-m", "out.model", "-q"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "crfx train: dev.txt:4: attribute 'pos=DT:1e999': value '1e999' is not a finite number\n");
  EXPECT_TRUE(only_files(d, {"train.txt", "dev.txt"}));
}

TEST(BadValue, CrfxTagRefusesThemAndKeepsTheOutput) {
  Dir d;
  fs::copy_file(crfsuite_model(), d / "m.model");
  write_text(d / "test.txt", crfsuite_data("pos=DT:NaN"));
  write_text(d / "out.txt", "old output\n");
  const Spawned r = crfx_in(d, {"tag", "test.txt", "-m", "m.model", "-o", "out.txt", "-q"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "crfx tag: test.txt:4: attribute 'pos=DT:NaN': value 'NaN' is not a finite number\n");
  EXPECT_EQ(read_text(d / "out.txt"), "old output\n");
  EXPECT_TRUE(only_files(d, {"m.model", "test.txt", "out.txt"}));
  // The same data with a finite value there is tagged.
  write_text(d / "test.txt", crfsuite_data("pos=DT:0.5"));
  const Spawned ok = crfx_in(d, {"tag", "test.txt", "-m", "m.model", "-o", "out.txt", "-q"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(read_text(d / "out.txt"), "old output\n");
}

}  // namespace
}  // namespace crfx::test
