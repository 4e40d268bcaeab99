// Checkpoints and resume: every trainer resumed from any reported iteration ends with the weights
// of the uninterrupted run, bit for bit (library); the checkpoint file refuses damage, truncation,
// another trainer and another run; crfx train stopped by a signal writes a checkpoint that
// --resume continues to the uninterrupted model, byte for byte, for every algorithm (CLI).
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "checkpoint_check.hpp"
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::random_problem;

BackendPtr cpu(const Dims& d) { return std::make_unique<CpuBackend>(d, 2); }

TEST(Checkpoint, EveryTrainerResumesBitExactFromEveryIteration) {
  const auto p = random_problem(4, 30, 2, 40, 10, 31);
  for (const TrainerInfo& info : trainer_registry()) {
    if (info.maxent_only) continue;  // on Maxent models: tests/test_maxent.cpp
    SCOPED_TRACE(info.name);
    test::check_resume_is_exact(cpu, p, info, test::resume_options(info.name), 100);
  }
}

TEST(Checkpoint, LbfgsWithL1ResumesThroughOwlqn) {
  const auto p = random_problem(3, 20, 0, 30, 8, 5);
  test::check_resume_is_exact(cpu, p, find_trainer("lbfgs"), test::resume_options("lbfgs-l1"), 100);
}

TEST(Checkpoint, StochasticTrainersResumeWithMiniBatchesAndWithoutL2) {
  const auto p = random_problem(3, 25, 1, 50, 6, 9);
  for (const char* algo : {"sgd-l1", "two-stage", "adf", "ap", "sag", "saga"}) {
    TrainOptions o = test::resume_options(algo);
    o.batch_size = 7;
    o.c2 = 0;
    o.sampling = Sampling::uniform;
    test::check_resume_is_exact(cpu, p, find_trainer(algo), o, 3);
  }
}

// ---- stops inside an epoch: the stochastic trainers' poll ----------------------------------

/// Every stochastic trainer, with its mini-batch settings and the options that change its state
/// between batches, stopped by its poll after the first and the last polled batch of an epoch,
/// the first of the next, one in the middle and the run's last, and resumed from there.
TEST(Checkpoint, StochasticTrainersStopInsideAnEpochAndResumeBitExact) {
  const auto p = random_problem(4, 30, 2, 23, 8, 17);
  const std::size_t n = p.corpus.num_sentences();
  struct Case {
    const char* algo;
    std::size_t batch;
    LineSearch search = LineSearch::none;
    Sampling sampling = Sampling::mixed;
    double c2 = 0.3;
  };
  const std::vector<Case> cases = {
      {"sgd-l1", 1},
      {"sgd-l1", 4},
      {"sgd-l1", 1, LineSearch::heuristic},
      {"sgd-l1", 5, LineSearch::heuristic},
      {"sgd-l1", 3, LineSearch::none, Sampling::mixed, 0.0},
      {"two-stage", 1},
      {"two-stage", 4},
      {"adf", 1},
      {"adf", 3},
      {"adf", 4, LineSearch::none, Sampling::mixed, 0.0},
      {"ap", 1},
      {"ap", 5},
      {"mira", 1},
      {"sag", 1, LineSearch::none, Sampling::mixed},
      {"sag", 1, LineSearch::none, Sampling::uniform},
      {"sag", 4, LineSearch::none, Sampling::lipschitz},
      {"sag", 3, LineSearch::none, Sampling::mixed, 0.0},
      {"saga", 1, LineSearch::none, Sampling::mixed},
      {"saga", 3, LineSearch::none, Sampling::uniform},
      {"saga", 4, LineSearch::none, Sampling::lipschitz},
  };
  for (const Case& c : cases) {
    TrainOptions o = test::resume_options(c.algo);
    o.batch_size = c.batch;
    o.line_search = c.search;
    o.sampling = c.sampling;
    o.c2 = c.c2;
    o.adf_windows = 4;  // a window of 5 sentences: stops inside windows and at their ends
    o.epochs = o.max_epochs = 3;
    SCOPED_TRACE(::testing::Message() << c.algo << " batch " << c.batch << " " << name_of(c.search) << " "
                                      << name_of(c.sampling) << " c2 " << c.c2);
    test::check_stop_within_is_exact(cpu, p, find_trainer(c.algo), o, test::within_stops(c.algo, o, n));
  }
}

/// The poll is asked only between mini-batches and only by the stochastic trainers: a stop it
/// asks for is a stop after that batch, not at the epoch's end; the full-batch trainers never ask
/// it (their reports are their safe points) and run as without it.
TEST(Checkpoint, StopPollIsAskedPerMiniBatchOnlyByTheStochasticTrainers) {
  const auto p = random_problem(3, 20, 0, 30, 8, 5);
  for (const TrainerInfo& info : trainer_registry()) {
    if (info.maxent_only) continue;
    const std::string algo = info.name;
    SCOPED_TRACE(algo);
    const bool stochastic = algo == "sgd-l1" || algo == "two-stage" || algo == "adf" || algo == "ap" ||
                            algo == "pa" || algo == "arow" || algo == "l2sgd" || algo == "mira" || algo == "sag" ||
                            algo == "saga";
    TrainOptions o = test::resume_options(algo);
    const std::string path = test::temp_path("poll-" + algo + ".ckpt");
    const test::StoppedRun polled = test::train_stopped(cpu, p, info, o, 0, path, false);
    const test::Run plain = test::train_run(cpu, p, info, o, 0, path, false);
    EXPECT_TRUE(test::bitwise_equal(polled.w, plain.w)) << "a poll that never stops changed the run";
    if (!stochastic) {
      EXPECT_EQ(polled.polls, 0u);
      continue;
    }
    const test::BatchPlan plan = test::batch_plan(algo, o, p.corpus.num_sentences());
    EXPECT_EQ(polled.polls, plan.polls());
    // Stopped after the third batch of the first epoch: 3 batches' passes, no epoch report.
    const test::StoppedRun stopped = test::train_stopped(cpu, p, info, o, 3, path, false);
    ASSERT_EQ(stopped.within.size(), 1u);
    EXPECT_TRUE(stopped.reports.empty());
    EXPECT_EQ(stopped.within[0].iteration, 1);
    EXPECT_EQ(stopped.within[0].sentences, 3 * plan.batch);
    if (algo == "sgd-l1" || algo == "adf" || algo == "ap" || algo == "pa" || algo == "arow" ||
        algo == "mira") {  // a pass per sentence (mira: none skipped in the first epoch)
      EXPECT_DOUBLE_EQ(stopped.within[0].passes, double(3 * plan.batch) / double(p.corpus.num_sentences()));
    }
  }
}

/// A checkpoint of sag's state at its second epoch, for the file tests.
std::string sag_checkpoint(const test::RandomProblem& p) {
  const std::string path = test::temp_path("sag.ckpt");
  test::train_run(cpu, p, find_trainer("sag"), test::resume_options("sag"), 2, path, false);
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

TEST(Checkpoint, DamagedTruncatedAndForeignFilesAreRefused) {
  const auto p = random_problem(3, 20, 0, 30, 8, 5);
  const std::string good = sag_checkpoint(p), bad = test::temp_path("bad.ckpt");
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 100u);
  EXPECT_NO_THROW(Checkpoint{good});

  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  write_bytes(bad, flipped);
  EXPECT_EQ(test::error_text([&] { Checkpoint c(bad); }),
            bad + ": the checkpoint is damaged or incomplete (its checksum does not match)");
  write_bytes(bad, bytes.substr(0, bytes.size() - 9));
  EXPECT_EQ(test::error_text([&] { Checkpoint c(bad); }),
            bad + ": the checkpoint is damaged or incomplete (its checksum does not match)");
  write_bytes(bad, "crfx checkpoint\n");
  EXPECT_EQ(test::error_text([&] { Checkpoint c(bad); }), bad + ": not a crfx checkpoint (crfx train --checkpoint writes them)");
  write_bytes(bad, "LABEL\tattr\n");
  EXPECT_EQ(test::error_text([&] { Checkpoint c(bad); }), bad + ": not a crfx checkpoint (crfx train --checkpoint writes them)");
  EXPECT_NE(test::error_text([&] { Checkpoint c(test::temp_path("missing.ckpt")); }).find("cannot open the checkpoint"),
            std::string::npos);
}

TEST(Checkpoint, AnotherTrainersStateIsRefusedNamingTheField) {
  const auto p = random_problem(3, 20, 0, 30, 8, 5);
  const std::string path = sag_checkpoint(p);
  const std::string e = test::error_text([&] { test::train_run(cpu, p, find_trainer("lbfgs"), test::resume_options("lbfgs"), 0, path, true); });
  EXPECT_NE(e.find("the trainer expects field 'gnorm' (real numbers) where the checkpoint has 'alpha' (real numbers)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("written by another trainer"), std::string::npos) << e;
}

TEST(Checkpoint, KeysThatDifferAreEachNamed) {
  const std::string path = test::temp_path("keys.ckpt");
  {
    std::ofstream out(path, std::ios::binary);
    write_checkpoint([&](const char* d, std::size_t n) { out.write(d, std::streamsize(n)); },
                     {{"crfx", "0.1.0"}, {"--c2", "1"}, {"--period", "10"}}, {{"device", "cpu (2 threads)"}},
                     [](StateArchive& ar) {
                       double x = 1;
                       ar.value("x", x);
                     });
  }
  Checkpoint c(path);
  EXPECT_EQ(c.note("device"), "cpu (2 threads)");
  EXPECT_NO_THROW(c.check({{"crfx", "0.1.0"}, {"--c2", "1"}, {"--period", "10"}}));
  EXPECT_EQ(test::error_text([&] { c.check({{"crfx", "0.2.0"}, {"--c2", "0.5"}, {"--seed", "3"}}); }),
            "checkpoint " + path +
                " was made by another run; resume with the data, template and settings it was made with:\n"
                "  crfx: 0.1.0 in the checkpoint, 0.2.0 now\n"
                "  --c2: 1 in the checkpoint, 0.5 now\n"
                "  --period: 10 in the checkpoint, not part of this run\n"
                "  --seed: not in the checkpoint, 3 now");
  // A state read short of its end is refused; read whole, it is not.
  EXPECT_NE(test::error_text([&] { c.finish(); }).find("field 'x' was not read"), std::string::npos);
  Checkpoint whole(path);
  double x = 0;
  whole.state().value("x", x);
  EXPECT_EQ(x, 1.0);
  EXPECT_NO_THROW(whole.finish());
}

// ---- crfx train --checkpoint / --resume ----------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }

/// An empty directory of the test's temporary tree called `name` (emptied if it was there).
std::string fresh_dir(const std::string& name) {
  const std::string dir = test::temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
const std::string kTrain = test::data_path("conll2000.train300.txt");
const std::string kTest = test::data_path("conll2000.test100.txt");
const std::string kTemplate = test::data_path("chunking.template");

/// Each algorithm's run: long enough that a signal sent at its first report stops it midway.
std::vector<std::string> cli_run(const std::string& algo) {
  std::vector<std::string> a = {"--algo", algo, "--threads", "1"};
  for (const char* setting : {"delta", "epsilon"})
    if (find_trainer(algo).takes(setting)) a.insert(a.end(), {std::string("--") + setting, "0"});
  if (algo == "owlqn" || algo == "two-stage" || algo == "sgd-l1" || algo == "sag") a.insert(a.end(), {"--c1", "0.5"});
  if (algo == "sgd-l1" || algo == "adf" || algo == "ap" || algo == "pa" || algo == "arow" || algo == "l2sgd" ||
      algo == "mira")
    a.insert(a.end(), {"--epochs", "25"});
  else if (algo == "sag" || algo == "saga") a.insert(a.end(), {"--max-epochs", "25"});
  else if (algo == "two-stage") a.insert(a.end(), {"--sgd-epochs", "3", "--max-iterations", "40"});
  else if (algo == "bcd") a.insert(a.end(), {"--max-iterations", "4"});  // ~375 passes an iteration
  else a.insert(a.end(), {"--max-iterations", "40"});
  return a;
}

int log_rows(const std::string& log) {
  std::ifstream in(log);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n - 1;  // the header
}

/// crfx train with `args` (its stderr to the file `err` when given), sent SIGINT `delay_ms` after
/// `ready()` first holds (polled every millisecond, at most a minute); the exit status.
int train_signalled(const std::vector<std::string>& args, const std::function<bool()>& ready, int delay_ms = 0,
                    const std::string& err = "") {
  const std::string binary = test::crfx_binary();
  std::vector<std::string> all = {binary, "train"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL);
    if (!err.empty()) {
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) ::_exit(126);
      ::dup2(fd, 2);
    }
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 60000 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  ::kill(pid, SIGINT);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/// crfx train with `args`, sent SIGINT at its first report (a row in `log`); the exit status.
int train_interrupted(const std::vector<std::string>& args, const std::string& log) {
  return train_signalled(args, [&] { return log_rows(log) >= 1; });
}

/// The CRF trainers of the registry (on Maxent models: tests/test_maxent.cpp), a test each: ctest
/// spreads them over its jobs.
std::vector<std::string> crf_trainers() {
  std::vector<std::string> names;
  for (const TrainerInfo& info : trainer_registry())
    if (!info.maxent_only) names.push_back(info.name);
  return names;
}

class CliCheckpointEvery : public ::testing::TestWithParam<std::string> {};

TEST_P(CliCheckpointEvery, AlgorithmStoppedBySignalResumesToTheSameModel) {
  namespace fs = std::filesystem;
  const std::string algo = GetParam();
  const std::string dir = fresh_dir("resume-cli-" + algo);
  const std::string full = dir + "/full.model", stopped = dir + "/stopped.model", resumed = dir + "/resumed.model",
                    ckpt = dir + "/run.ckpt", log = dir + "/log.csv", log2 = dir + "/log2.csv";
  std::string args;
  for (const std::string& a : cli_run(algo)) args += " " + q(a);
  const std::string base = test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) + args;
  std::string out;
  ASSERT_EQ(test::run(base + " -q -m " + q(full) + " --log " + q(log2), &out), 0) << out;

  // A checkpoint at every iteration: a trainer whose iterations take over a second (bcd on a
  // loaded machine) is stopped inside the next one, whose pass is abandoned; its checkpoint is
  // the last iteration's (one written at the stop needs the stop at a report).
  std::vector<std::string> stop = {kTrain, "-t",  kTemplate, "-m", stopped, "--log", log, "--checkpoint", ckpt,
                                   "--checkpoint-every", "1", "-q"};
  for (const std::string& a : cli_run(algo)) stop.push_back(a);
  ASSERT_EQ(train_interrupted(stop, log), 3);
  const int done = log_rows(log);
  ASSERT_LT(done, log_rows(log2)) << "the run ended before the signal stopped it";
  ASSERT_TRUE(fs::exists(ckpt));

  ASSERT_EQ(test::run(base + " -m " + q(resumed) + " --log " + q(log) + " --resume " + q(ckpt), &out), 0) << out;
  // The stochastic trainers stop inside the epoch after the reported one, the others after it.
  EXPECT_TRUE(out.find("resuming: " + ckpt + ", after iteration " + std::to_string(done) + "\n") !=
                  std::string::npos ||
              out.find("resuming: " + ckpt + ", in epoch " + std::to_string(done + 1) + " after ") !=
                  std::string::npos)
      << out;
  EXPECT_EQ(read_bytes(resumed), read_bytes(full)) << "stopped after iteration " << done;
  // The log goes on from the checkpoint's rows: the uninterrupted run's iterations, each once.
  std::ifstream a(log), b(log2);
  std::string ra, rb;
  int rows = 0;
  while (std::getline(b, rb)) {
    ASSERT_TRUE(std::getline(a, ra));
    EXPECT_EQ(ra.substr(0, ra.find(',', ra.find(',') + 1)), rb.substr(0, rb.find(',', rb.find(',') + 1)));
    ++rows;
  }
  EXPECT_FALSE(std::getline(a, ra)) << "extra rows";
  EXPECT_GT(rows, done);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
}

INSTANTIATE_TEST_SUITE_P(Trainers, CliCheckpointEvery, ::testing::ValuesIn(crf_trainers()), [](const auto& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
});

/// crfx train with `args` (stderr to `err`), sent SIGINT `delay_ms` after it says "training:"
/// (its data read, the first epoch starting); the exit status.
int train_interrupted_early(const std::vector<std::string>& args, const std::string& err, int delay_ms) {
  return train_signalled(
      args, [&] { return read_bytes(err).find("training:") != std::string::npos; }, delay_ms, err);
}

/// A stochastic trainer with batch size 1 stopped by SIGINT while an epoch runs (sent shortly
/// after training starts, not at a report): it stops after the mini-batch in hand, says where,
/// writes no log row for the unfinished epoch, and --resume continues inside that epoch to the
/// uninterrupted run's model, byte for byte, and its log, each row once.
TEST(CliCheckpoint, StochasticTrainerStoppedInsideAnEpochResumesToTheSameModel) {
  for (const char* algo : {"sgd-l1", "sag"}) {
    SCOPED_TRACE(algo);
    const std::string dir = fresh_dir(std::string("resume-cli-within-") + algo);
    const std::string full = dir + "/full.model", stopped = dir + "/stopped.model", resumed = dir + "/resumed.model",
                      ckpt = dir + "/run.ckpt", log = dir + "/log.csv", log2 = dir + "/log2.csv", err = dir + "/err";
    std::vector<std::string> settings = {"--algo", algo, "--batch-size", "1", "--threads", "1", "--c1", "0.5"};
    if (std::string(algo) == "sgd-l1") {
      settings.insert(settings.end(), {"--line-search", "heuristic", "--epochs", "8"});
    } else {
      settings.insert(settings.end(), {"--epsilon", "0", "--max-epochs", "8"});
    }
    std::string args;
    for (const std::string& a : settings) args += " " + q(a);
    const std::string base = test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) + args;
    std::string out;
    ASSERT_EQ(test::run(base + " -q -m " + q(full) + " --log " + q(log2), &out), 0) << out;

    std::vector<std::string> stop = {kTrain, "-t", kTemplate, "-m", stopped, "--log", log, "--checkpoint", ckpt};
    stop.insert(stop.end(), settings.begin(), settings.end());
    // Inside an epoch unless the signal lands on an epoch's last sentence (1 in 300): then again.
    const std::regex within("crfx train: stopped by SIGINT in epoch ([0-9]+) after ([0-9]+) of 300 sentences; "
                            "model written to (.*); checkpoint written to (.*) \\(continue with --resume (.*)\\)\n$");
    std::smatch m;
    std::string message;
    for (int attempt = 0; attempt < 3; ++attempt) {
      ASSERT_EQ(train_interrupted_early(stop, err, 5), 3) << read_bytes(err);
      message = read_bytes(err);
      if (std::regex_search(message, m, within)) break;
    }
    ASSERT_TRUE(std::regex_search(message, m, within)) << message;
    const int epoch = std::stoi(m[1].str()), done = std::stoi(m[2].str());
    EXPECT_EQ(m[3].str(), stopped);
    EXPECT_EQ(m[4].str(), ckpt);
    EXPECT_EQ(m[5].str(), ckpt);
    EXPECT_GT(done, 0);
    EXPECT_LT(done, 300);
    EXPECT_EQ(log_rows(log), epoch - 1) << "a row for the unfinished epoch";
    ASSERT_LT(epoch, log_rows(log2)) << "the signal came too late";
    // The stopped model is a model (the weights brought up to date): it tags.
    ASSERT_EQ(test::run(test::crfx_binary() + " tag " + q(kTest) + " -m " + q(stopped) + " -q", &out), 0) << out;

    ASSERT_EQ(test::run(base + " -m " + q(resumed) + " --log " + q(log) + " --resume " + q(ckpt), &out), 0) << out;
    EXPECT_NE(out.find("resuming: " + ckpt + ", in epoch " + std::to_string(epoch) + " after " + std::to_string(done) +
                       " of 300 sentences\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(read_bytes(resumed), read_bytes(full)) << "stopped in epoch " << epoch << " after " << done;
    std::ifstream a(log), b(log2);
    std::string ra, rb;
    while (std::getline(b, rb)) {
      ASSERT_TRUE(std::getline(a, ra));
      EXPECT_EQ(ra.substr(0, ra.find(',', ra.find(',') + 1)), rb.substr(0, rb.find(',', rb.find(',') + 1)));
    }
    EXPECT_FALSE(std::getline(a, ra)) << "extra rows";
  }
}

TEST(CliCheckpoint, StoppedModelTagsAndTheMessageNamesTheCheckpoint) {
  const std::string dir = fresh_dir("resume-cli-stop");
  const std::string model = dir + "/m", ckpt = dir + "/c", log = dir + "/log.csv", err = dir + "/err";
  std::vector<std::string> args = {kTrain, "-t", kTemplate, "-m", model, "--log", log, "--checkpoint", ckpt,
                                    "--checkpoint-every", "1000", "--max-iterations", "200", "--delta", "0",
                                    "--epsilon", "0", "--threads", "1", "-q"};
  // stderr to a file: the message is checked below.
  const int saved = ::dup(2);
  const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  const int status = train_interrupted(args, log);
  ::dup2(saved, 2);
  ::close(fd);
  ::close(saved);
  ASSERT_EQ(status, 3);
  const int done = log_rows(log);
  EXPECT_EQ(read_bytes(err), "crfx train: stopped by SIGINT at iteration " + std::to_string(done) +
                                 "; model written to " + model + "; checkpoint written to " + ckpt +
                                 " (continue with --resume " + ckpt + ")\n");
  std::string out;
  ASSERT_EQ(test::run(test::crfx_binary() + " tag " + q(kTest) + " -m " + q(model) + " -q", &out), 0) << out;
  EXPECT_GT(out.size(), 1000u);
}

TEST(CliCheckpoint, ARunThatReachedItsLimitGoesOnWithAHigherOne) {
  // The stopping settings are not checkpoint keys: a run stopped at its limit, resumed with twice
  // the limit (and another improvement test), ends with the model of a run given that limit.
  struct Case {
    std::string algo, limit;
  } cases[] = {{"lbfgs", "--max-iterations"}, {"sgd-l1", "--epochs"}, {"sag", "--max-epochs"}, {"boost", "--max-iterations"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.algo);
    const std::string dir = fresh_dir("resume-cli-limit-" + c.algo);
    const std::string ckpt = dir + "/c", first = dir + "/first.model", resumed = dir + "/resumed.model",
                      whole = dir + "/whole.model";
    const std::string base = test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -q -a " + c.algo;
    std::string out;
    ASSERT_EQ(test::run(base + " " + c.limit + " 3 -m " + q(first) + " --checkpoint " + q(ckpt) +
                            " --checkpoint-every 1",
                        &out),
              0)
        << out;
    const std::string other_test = c.algo == "lbfgs" ? " --delta 1e-9 --period 4 --epsilon 1e-9" : "";
    ASSERT_EQ(test::run(base + " " + c.limit + " 6" + other_test + " -m " + q(resumed) + " --resume " + q(ckpt), &out),
              0)
        << out;
    ASSERT_EQ(test::run(base + " " + c.limit + " 6 -m " + q(whole), &out), 0) << out;
    EXPECT_EQ(read_bytes(resumed), read_bytes(whole));
    EXPECT_NE(read_bytes(first), read_bytes(whole));
  }
}

// The seconds a log reports leave out the reports' own time (the dev figure, the log, the
// checkpoints); a resumed run goes on from the checkpoint's row by no more than its own time,
// not by the reports' time before the checkpoint (which the trainer's clock, kept in the
// checkpoint, counts: its "report-seconds" note takes it back out).
TEST(CliCheckpoint, SecondsGoOnFromTheCheckpointWithoutTheReportsTime) {
  const std::string dir = fresh_dir("resume-cli-seconds");
  const std::string ckpt = dir + "/c", log = dir + "/log.csv", model = dir + "/m";
  // Boosting's rounds are short and each report scores the dev data and writes a checkpoint.
  const std::string base = test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) +
                           " -q -a boost --threads 1 --dev " + q(kTest) + " --dev-patience 0 -m " + q(model) +
                           " --log " + q(log) + " --checkpoint " + q(ckpt) + " --checkpoint-every 1";
  std::string out;
  ASSERT_EQ(test::run(base + " --max-iterations 300", &out), 0) << out;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(test::run(base + " --max-iterations 301 --resume " + q(ckpt), &out), 0) << out;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream in(log);
  std::string line;
  std::vector<double> seconds;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::size_t at = 0;
    for (int field = 0; field < 5; ++field) at = line.find(',', at) + 1;
    seconds.push_back(std::atof(line.c_str() + at));
  }
  ASSERT_EQ(seconds.size(), 301u);
  EXPECT_GE(seconds[300], seconds[299]);
  EXPECT_LE(seconds[300] - seconds[299], wall) << "the reports' time before the checkpoint counted again";
}

TEST(CliCheckpoint, ResumeRefusesAnotherRunNamingTheDifferences) {
  const std::string dir = fresh_dir("resume-cli-refused");
  const std::string ckpt = dir + "/c", model = dir + "/m", other = dir + "/other.txt";
  const std::string base = test::crfx_binary() + " train -t " + q(kTemplate) + " --max-iterations 3 -q";
  std::string out;
  ASSERT_EQ(test::run(base + " " + q(kTrain) + " -m " + q(model) + " --checkpoint " + q(ckpt) +
                          " --checkpoint-every 1",
                      &out),
            0)
      << out;
  write_bytes(model, "old model\n");
  EXPECT_EQ(test::run(base + " " + q(kTrain) + " -m " + q(model) + " --c2 0.5 --resume " + q(ckpt), &out), 1);
  EXPECT_NE(out.find("was made by another run; resume with the data, template and settings it was made with:\n"
                     "  --c2: 1 in the checkpoint, 0.5 now\n"),
            std::string::npos)
      << out;
  // Other data: its fingerprint (and here its size and features) named.
  const std::string text = read_bytes(kTrain);
  write_bytes(other, text.substr(0, text.size() / 2 + text.substr(text.size() / 2).find("\n\n") + 2));
  EXPECT_EQ(test::run(base + " " + q(other) + " -m " + q(model) + " --resume " + q(ckpt), &out), 1);
  EXPECT_NE(out.find("  training data: 300 sentences, "), std::string::npos) << out;
  EXPECT_EQ(read_bytes(model), "old model\n") << "a refused resume overwrote the model";
  // The same sentences in another order: the same sizes, so only the fingerprints tell (each a
  // 16-digit hash, different in the checkpoint and now).
  const std::size_t first = text.find("\n\n") + 2, second = text.find("\n\n", first) + 2;
  write_bytes(other, text.substr(first, second - first) + text.substr(0, first) + text.substr(second));
  EXPECT_EQ(test::run(base + " " + q(other) + " -m " + q(model) + " --resume " + q(ckpt), &out), 1) << out;
  const std::regex named("\n  training data: 300 sentences, ([0-9]+) tokens, fingerprint ([0-9a-f]{16}) in the "
                         "checkpoint, 300 sentences, \\1 tokens, fingerprint ([0-9a-f]{16}) now\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, named)) << out;
  EXPECT_NE(m[2].str(), m[3].str()) << out;
  EXPECT_EQ(read_bytes(model), "old model\n");
  // A damaged checkpoint fails before the data is read.
  std::string bytes = read_bytes(ckpt);
  bytes[bytes.size() / 3] ^= 1;
  write_bytes(ckpt, bytes);
  EXPECT_EQ(test::run(base + " " + q(kTrain) + " -m " + q(model) + " --resume " + q(ckpt), &out), 1);
  EXPECT_NE(out.find(ckpt + ": the checkpoint is damaged or incomplete (its checksum does not match)"),
            std::string::npos)
      << out;
  // Options that make no sense together.
  EXPECT_EQ(test::run(base + " " + q(kTrain) + " -m " + q(model) + " --checkpoint-every 2", &out), 2);
  EXPECT_NE(out.find("--checkpoint-every needs --checkpoint FILE"), std::string::npos) << out;
  EXPECT_EQ(test::run(base + " " + q(kTrain) + " -m " + q(model) + " --checkpoint " + q(kTrain), &out), 1) << out;
  EXPECT_NE(out.find("cannot write " + kTrain + ": it is an input of this run"), std::string::npos) << out;
  EXPECT_EQ(read_bytes(model), "old model\n");
}

}  // namespace
}  // namespace crfx
