// Write faults (issue 17, item 5): a full disk or a failing write while crfx writes a model
// (train -m), its training log (train --log), tagged output (tag -o FILE, tag -O DIR) or a report
// on standard output (dump, tag, eval, train --log -). Each must end with a clear error naming the
// file and saying what failed, exit status 1, no temporary file left, and any file that existed
// before byte for byte as it was.
//
// The full disk is injected: tests/fault/fail_write.c, preloaded (LD_PRELOAD), fails the writes,
// fsyncs or closes of the files whose path contains a pattern (CI cannot mount a small tmpfs).
// Standard output goes to /dev/full, a real device that fails every write with ENOSPC.
//
// One row per writer and fault in kWriters below; a new writer (a checkpoint file, say) is one
// more row. Each row's command must succeed when nothing fails (WriteFaultControl checks it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fault/spawn.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

namespace fs = std::filesystem;

/// What fails: the shim's settings (pattern "" = no shim), or standard output going to /dev/full.
struct Fault {
  const char* pattern = "";   // CRFX_FAIL_WRITE_PATTERN: a substring of the paths that fail
  const char* after = "";     // CRFX_FAIL_WRITE_AFTER: bytes written before the disk is full
  bool fsync = false;         // CRFX_FAIL_FSYNC: fsync / syncfs fail instead
  bool close = false;         // CRFX_FAIL_CLOSE: close fails instead
  const char* error = "";     // CRFX_FAIL_WRITE_ERRNO ("": ENOSPC)
  bool full_stdout = false;   // standard output is /dev/full
};

/// Marks a file's expected content as "what it held before the run" (see Writer::files).
constexpr const char* kOld = "\x01" "old";
/// … and a file that must not exist after the run.
constexpr const char* kAbsent = "\x01" "absent";
/// … and a file the run wrote anew (it existed with known content; now it differs).
constexpr const char* kNew = "\x01" "new";

struct Writer {
  const char* name;                // the test's name
  std::vector<std::string> args;   // crfx's arguments, run in the case's directory (below)
  Fault fault;
  const char* message;             // standard error, exactly
  /// Files and their content after the run: kOld (created before the run with known content,
  /// which must be unchanged), kNew (created so, and written anew), kAbsent, or the exact text.
  std::vector<std::pair<const char*, const char*>> files;
  /// The exit status: 1, or 0 where the fault costs a side output only (the training log).
  int status = 1;
};

// Every case runs in a fresh directory holding:
//   train.txt  300 CoNLL-2000 sentences     t.tpl  a small template (words, tags, bigrams)
//   m.model    a model trained on them      test.txt  100 sentences to tag, tagged.txt  tagged
//   in/a.txt, in/b.txt, in/c.txt  three inputs for -O     od/  an output directory
// Training runs stop after 2 iterations (--max-iterations 2) and use one thread.
const std::vector<std::string> kTrain = {"train", "train.txt", "-t", "t.tpl", "--max-iterations", "2",
                                         "--threads", "1", "-q"};
std::vector<std::string> train(std::vector<std::string> more) {
  std::vector<std::string> a = kTrain;
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const char* const kLogHeader = "iteration,passes,objective,gradient_norm,active_features,seconds,dev_f1\n";

const std::vector<Writer> kWriters = {
    // ---- the model (crfx train -m) --------------------------------------------------------------
    {"ModelDiskFullAtOnce", train({"-m", "out.model"}), {"out.model", "0"},
     "crfx train: cannot write out.model: write: No space left on device\n", {{"out.model", kOld}}},
    {"ModelDiskFullHalfWay", train({"-m", "out.model"}), {"out.model", "5000"},
     "crfx train: cannot write out.model: write: No space left on device\n", {{"out.model", kOld}}},
    {"ModelQuotaExceeded", train({"-m", "out.model"}), {"out.model", "5000", false, false, "EDQUOT"},
     "crfx train: cannot write out.model: write: Disk quota exceeded\n", {{"out.model", kOld}}},
    {"ModelFsyncFails", train({"-m", "out.model"}), {"out.model", "", true, false, "EIO"},
     "crfx train: cannot write out.model: fsync: Input/output error\n", {{"out.model", kOld}}},
    {"ModelCloseFails", train({"-m", "out.model"}), {"out.model", "", false, true},
     "crfx train: cannot write out.model: close: No space left on device\n", {{"out.model", kOld}}},
    {"NewModelDiskFull", train({"-m", "new.model"}), {"new.model", "0"},
     "crfx train: cannot write new.model: write: No space left on device\n", {{"new.model", kAbsent}}},
    // ---- the training log (crfx train --log): a failure costs the log, not the model ----------------
    // Its header is written before the first iteration: no model is written either.
    {"LogDiskFullAtOnce", train({"-m", "out.model", "--log", "log.csv"}), {"log.csv", "0"},
     "crfx train: warning: cannot write log.csv: write: No space left on device; training goes on, the log is "
     "no longer written\n",
     {{"log.csv", kOld}, {"out.model", kNew}}, 0},
    // The log is rewritten whole after each iteration: the header went in, the first row did not.
    {"LogDiskFullAfterTheHeader", train({"-m", "out.model", "--log", "log.csv"}), {"log.csv", "100"},
     "crfx train: warning: cannot write log.csv: write: No space left on device; training goes on, the log is "
     "no longer written\n",
     {{"log.csv", kLogHeader}, {"out.model", kNew}}, 0},
    {"LogFsyncFails", train({"-m", "out.model", "--log", "log.csv"}), {"log.csv", "", true},
     "crfx train: warning: cannot write log.csv: fsync: No space left on device; training goes on, the log is "
     "no longer written\n",
     {{"log.csv", kOld}, {"out.model", kNew}}, 0},
    {"LogToFullStandardOutput", train({"-m", "out.model", "--log", "-"}), {"", "", false, false, "", true},
     "crfx train: cannot write the log to standard output: No space left on device\n", {{"out.model", kOld}}},
    // ---- the checkpoint (crfx train --checkpoint), written after the first iteration ---------------
    {"CheckpointDiskFullAtOnce", train({"-m", "out.model", "--checkpoint", "run.ckpt", "--checkpoint-every", "1"}),
     {"run.ckpt", "0"}, "crfx train: cannot write run.ckpt: write: No space left on device\n",
     {{"run.ckpt", kOld}, {"out.model", kOld}}},
    {"CheckpointDiskFullHalfWay", train({"-m", "out.model", "--checkpoint", "run.ckpt", "--checkpoint-every", "1"}),
     {"run.ckpt", "20000"}, "crfx train: cannot write run.ckpt: write: No space left on device\n",
     {{"run.ckpt", kOld}, {"out.model", kOld}}},
    {"CheckpointFsyncFails", train({"-m", "out.model", "--checkpoint", "run.ckpt", "--checkpoint-every", "1"}),
     {"run.ckpt", "", true}, "crfx train: cannot write run.ckpt: fsync: No space left on device\n",
     {{"run.ckpt", kOld}, {"out.model", kOld}}},
    // ---- tagged output in one file (crfx tag -o) ---------------------------------------------------
    {"TagOutputDiskFullAtOnce", {"tag", "test.txt", "-m", "m.model", "-o", "out.txt", "-q"}, {"out.txt", "0"},
     "crfx tag: cannot write out.txt: write: No space left on device\n", {{"out.txt", kOld}}},
    {"TagOutputDiskFullHalfWay", {"tag", "test.txt", "-m", "m.model", "-o", "out.txt", "-q"}, {"out.txt", "3000"},
     "crfx tag: cannot write out.txt: write: No space left on device\n", {{"out.txt", kOld}}},
    {"TagOutputFsyncFails", {"tag", "test.txt", "-m", "m.model", "-o", "out.txt", "-q"}, {"out.txt", "", true},
     "crfx tag: cannot write out.txt: fsync: No space left on device\n", {{"out.txt", kOld}}},
    {"TagToFullStandardOutput", {"tag", "test.txt", "-m", "m.model", "-q"}, {"", "", false, false, "", true},
     "crfx tag: cannot write to standard output: No space left on device\n", {}},
    // ---- one output per input (crfx tag -O) ------------------------------------------------------
    // The second output fails: none is put in place (the first was not yet synced and renamed).
    {"TagDirDiskFull", {"tag", "-r", "in", "-m", "m.model", "-O", "od", "-q"}, {"od/b.txt", "0"},
     "crfx tag: cannot write od/b.txt: write: No space left on device\n",
     {{"od/a.txt", kOld}, {"od/b.txt", kOld}, {"od/c.txt", kAbsent}}},
    {"TagDirDiskFullWithKeepGoing", {"tag", "-r", "in", "-m", "m.model", "-O", "od", "-q", "--keep-going"},
     {"od/b.txt", "100"}, "crfx tag: cannot write od/b.txt: write: No space left on device\n",
     {{"od/a.txt", kOld}, {"od/b.txt", kOld}, {"od/c.txt", kAbsent}}},
    {"TagDirSyncFails", {"tag", "-r", "in", "-m", "m.model", "-O", "od", "-q"}, {"/od", "", true},
     "crfx tag: cannot write od/a.txt (and 2 more files): syncfs of od: No space left on device\n",
     {{"od/a.txt", kOld}, {"od/b.txt", kOld}, {"od/c.txt", kAbsent}}},
    {"TagDirCloseFails", {"tag", "-r", "in", "-m", "m.model", "-O", "od", "-q"}, {"od/c.txt", "", false, true},
     "crfx tag: cannot write od/c.txt: close: No space left on device\n",
     {{"od/a.txt", kOld}, {"od/b.txt", kOld}, {"od/c.txt", kAbsent}}},
    // ---- reports on standard output ----------------------------------------------------------------
    {"DumpToFullStandardOutput", {"dump", "m.model"}, {"", "", false, false, "", true},
     "crfx dump: cannot write to standard output: No space left on device\n", {}},
    {"EvalToFullStandardOutput", {"eval", "tagged.txt"}, {"", "", false, false, "", true},
     "crfx eval: cannot write to standard output: No space left on device\n", {}},
};

std::string shim() {
#ifdef CRFX_FAIL_WRITE_SHIM
  return CRFX_FAIL_WRITE_SHIM;
#else
  return "";
#endif
}

/// The files every case starts from, made once: a model and the data (see above).
const std::string& fixture() {
  static const std::string dir = [] {
    const std::string d = temp_dir();
    fs::copy_file(data_path("conll2000.train300.txt"), d + "/train.txt");
    write_text(d + "/t.tpl", "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,0]/%x[0,0]\nB\n");
    const std::string test = read_text(data_path("conll2000.test100.txt"));
    write_text(d + "/test.txt", test);
    fs::create_directories(d + "/in");
    const std::size_t third = test.find("\n\n", test.size() / 3) + 2, two = test.find("\n\n", 2 * test.size() / 3) + 2;
    write_text(d + "/in/a.txt", test.substr(0, third));
    write_text(d + "/in/b.txt", test.substr(third, two - third));
    write_text(d + "/in/c.txt", test.substr(two));
    std::string out;
    if (run(crfx_binary() + " train " + d + "/train.txt -t " + d + "/t.tpl -m " + d +
                "/m.model --max-iterations 10 --threads 1 -q",
            &out) != 0)
      throw std::runtime_error("training the fixture's model failed: " + out);
    if (run(crfx_binary() + " tag " + d + "/test.txt -m " + d + "/m.model -o " + d + "/tagged.txt -q", &out) != 0)
      throw std::runtime_error("tagging the fixture's test data failed: " + out);
    return d;
  }();
  return dir;
}

/// A fresh copy of the fixture with `od/` and the files of `w` that must exist before the run.
std::string prepare(const Writer& w) {
  const std::string dir = temp_dir();
  fs::copy(fixture(), dir, fs::copy_options::recursive);
  fs::create_directories(dir + "/od");
  for (const auto& [name, content] : w.files)
    if (content != kAbsent) write_text(dir + "/" + name, std::string("old ") + name + ", before the run\n");
  return dir;
}

/// The names of the temporary files (".tmp.") anywhere below `dir`.
Spawned run_writer(const Writer& w, const std::string& dir) {
  std::vector<std::string> argv{crfx_binary()};
  argv.insert(argv.end(), w.args.begin(), w.args.end());
  SpawnOptions o;
  o.cwd = dir;
  if (*w.fault.pattern) {
    o.env = {{"LD_PRELOAD", shim()}, {"CRFX_FAIL_WRITE_PATTERN", w.fault.pattern}};
    if (*w.fault.after) o.env.emplace_back("CRFX_FAIL_WRITE_AFTER", w.fault.after);
    if (w.fault.fsync) o.env.emplace_back("CRFX_FAIL_FSYNC", "1");
    if (w.fault.close) o.env.emplace_back("CRFX_FAIL_CLOSE", "1");
    if (*w.fault.error) o.env.emplace_back("CRFX_FAIL_WRITE_ERRNO", w.fault.error);
  }
  if (w.fault.full_stdout) o.stdout_path = "/dev/full";
  return spawn(argv, o, temp_dir());
}

class WriteFault : public ::testing::TestWithParam<Writer> {};

TEST_P(WriteFault, FailsCleanlyAndKeepsTheOldFile) {
  const Writer& w = GetParam();
  ASSERT_FALSE(shim().empty()) << "built without the fail_write shim (tests/CMakeLists.txt)";
  const std::string dir = prepare(w);
  const Spawned r = run_writer(w, dir);
  EXPECT_EQ(r.status, w.status) << r.err;
  EXPECT_EQ(r.err, w.message);
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{}) << "temporary files left behind";
  for (const auto& [name, content] : w.files) {
    const std::string path = dir + "/" + name;
    if (content == kAbsent)
      EXPECT_FALSE(fs::exists(path)) << name << " was written";
    else if (content == kOld)
      EXPECT_EQ(read_text(path), std::string("old ") + name + ", before the run\n") << name << " changed";
    else if (content == kNew)
      EXPECT_NE(read_text(path), std::string("old ") + name + ", before the run\n") << name << " not written";
    else
      EXPECT_EQ(read_text(path), content) << name;
  }
}

void PrintTo(const Writer& w, std::ostream* os) { *os << w.name; }

INSTANTIATE_TEST_SUITE_P(Writers, WriteFault, ::testing::ValuesIn(kWriters),
                         [](const ::testing::TestParamInfo<Writer>& info) { return std::string(info.param.name); });

// Without a fault the same runs succeed (so that the rows above fail for the fault, not for
// a mistake in their command): the shim loaded, with a pattern that matches nothing.
TEST(WriteFaultControl, TheSameRunsSucceedWithoutAFault) {
  ASSERT_FALSE(shim().empty());
  for (Writer w : kWriters) {
    if (w.fault.full_stdout) continue;
    w.fault.pattern = "no-such-file-name";
    const std::string dir = prepare(w);
    const Spawned r = run_writer(w, dir);
    EXPECT_EQ(r.status, 0) << w.name << ": " << r.err;
    EXPECT_EQ(temporaries(dir), std::vector<std::string>{}) << w.name;
  }
}

// ---- a read-only directory ----------------------------------------------------------------------

struct ReadOnlyCase {
  const char* name;
  std::vector<std::string> args;
  const char* message;
  std::vector<const char*> kept;  // files in ro/ that exist before and must be unchanged
};

const std::vector<ReadOnlyCase> kReadOnly = {
    {"Model", train({"-m", "ro/out.model"}), "crfx train: cannot write ro/out.model: directory ro: Permission denied\n",
     {"out.model"}},
    {"Log", train({"-m", "out.model", "--log", "ro/log.csv"}),
     "crfx train: cannot write ro/log.csv: directory ro: Permission denied\n", {"log.csv"}},
    {"TagOutput", {"tag", "test.txt", "-m", "m.model", "-o", "ro/out.txt", "-q"},
     "crfx tag: cannot write ro/out.txt: directory ro: Permission denied\n", {"out.txt"}},
    {"TagDirNewOutputs", {"tag", "-r", "in", "-m", "m.model", "-O", "ro", "-q"},
     "crfx tag: cannot write ro/a.txt: cannot create a temporary file: Permission denied\n", {}},
    {"TagDirExistingOutput", {"tag", "-r", "in", "-m", "m.model", "-O", "ro", "-q"},
     "crfx tag: cannot write ro/b.txt: directory ro: Permission denied\n", {"b.txt"}},
};

class WriteFaultReadOnlyDir : public ::testing::TestWithParam<ReadOnlyCase> {};

TEST_P(WriteFaultReadOnlyDir, FailsAndLeavesTheDirectoryAsItWas) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root, which may write into a read-only directory";
  const ReadOnlyCase& c = GetParam();
  const std::string dir = temp_dir();
  fs::copy(fixture(), dir, fs::copy_options::recursive);
  const std::string ro = dir + "/ro";
  fs::create_directories(ro);
  for (const char* name : c.kept) write_text(ro + "/" + name, "old\n");
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  std::vector<std::string> argv{crfx_binary()};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  SpawnOptions o;
  o.cwd = dir;
  const Spawned r = spawn(argv, o, temp_dir());
  ::chmod(ro.c_str(), 0755);  // (so that the test's directory can be removed)
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err, c.message);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ro)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, std::vector<std::string>(c.kept.begin(), c.kept.end())) << "files in ro/";
  for (const char* name : c.kept) EXPECT_EQ(read_text(ro + "/" + name), "old\n") << name;
}

void PrintTo(const ReadOnlyCase& c, std::ostream* os) { *os << c.name; }

INSTANTIATE_TEST_SUITE_P(Writers, WriteFaultReadOnlyDir, ::testing::ValuesIn(kReadOnly),
                         [](const ::testing::TestParamInfo<ReadOnlyCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace crfx::test
