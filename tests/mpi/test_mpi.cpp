// crfx under mpirun, end to end (ctest label `mpi`, built where MPI is found; issue 39): CPU ranks
// and emulated-GPU ranks (crfx_emu --device cuda: the emulated device's gradient read, summed
// through MPI, written back) against the one-process run — the objective within 1e-9 relative,
// the same test F1, one rank bit for bit the one process's model — and bitwise equal run to run;
// the trainers that may not run on several ranks refused; a killed rank ends the job with no
// model; --resume with another process count refused naming both. Each run is short (the
// tests/data slices, a few iterations) and oversubscribes the 2-core CI machine on purpose.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "test_util.hpp"

namespace crfx {
namespace {

using test::data_path;
using test::read_text;
using test::run;

/// The test's own folder (made once per test by the fixture) and a path in it.
std::string g_dir;
std::string temp_path(const std::string& name) { return g_dir + "/" + name; }
class Mpi : public ::testing::Test {
 protected:
  void SetUp() override { g_dir = test::temp_dir(); }
};

std::string q(const std::string& s) { return "'" + s + "'"; }
const std::string kTrain = data_path("conll2000.train300.txt");
const std::string kTest = data_path("conll2000.test100.txt");
const std::string kTemplate = data_path("chunking.template");

/// `np` processes of `binary` under mpirun, as root where the tests run as root, oversubscribed.
std::string mpirun(int np, const std::string& binary) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + q(CRFX_MPIEXEC) +
         " --oversubscribe --bind-to none -np " + std::to_string(np) + " " + q(binary);
}

/// The objective of the log's last row (--log: iteration,passes,objective,…; %.17g).
double last_objective(const std::string& log) {
  const std::string text = read_text(log);
  const std::size_t row = text.rfind('\n', text.size() - 2);
  const std::size_t a = text.find(',', row + 1), b = text.find(',', a + 1), c = text.find(',', b + 1);
  return std::stod(text.substr(b + 1, c - b - 1));
}

/// crfx eval's report of `model` tagging the test slice.
std::string test_scores(const std::string& model) {
  const std::string tagged = model + ".tagged";
  std::string out;
  EXPECT_EQ(run(q(CRFX_BINARY) + " tag " + q(kTest) + " -m " + q(model) + " -o " + q(tagged) + " --quiet", &out), 0)
      << out;
  EXPECT_EQ(run(q(CRFX_BINARY) + " eval " + q(tagged), &out), 0) << out;
  return out;
}

/// Trains with `prefix` (the program, under mpirun or not) and `args`; the model and --log
/// paths are `name`.model and `name`.log. Returns the output; the exit status must be 0.
std::string train(const std::string& prefix, const std::string& args, const std::string& name) {
  std::string out;
  const int rc = run(prefix + " train " + args + " -m " + q(temp_path(name + ".model")) + " --log " +
                         q(temp_path(name + ".log")) + " --threads 1",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

void expect_close(double a, double b, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), 1e-9 * std::fabs(b)) << what << ": " << a << " against " << b;
}

const std::string kChunking = q(kTrain) + " -t " + q(kTemplate) + " --max-iterations 25";

TEST_F(Mpi, CpuRanksMatchOneProcessAndRepeatBitwise) {
  train(q(CRFX_BINARY), kChunking, "one");
  const std::string one = temp_path("one.model");
  const std::string scores = test_scores(one);
  for (int np : {1, 2, 3}) {
    const std::string name = "np" + std::to_string(np);
    const std::string out = train(mpirun(np, CRFX_BINARY), kChunking, name);
    const std::string model = temp_path(name + ".model");
    SCOPED_TRACE(name);
    // Rank 0 alone reports and writes: one "done" line, one model, its shard named.
    EXPECT_NE(out.find(std::to_string(np) + (np == 1 ? " process;" : " processes;")), std::string::npos) << out;
    EXPECT_EQ(out.find("model written"), out.rfind("model written")) << out;
    expect_close(last_objective(temp_path(name + ".log")), last_objective(temp_path("one.log")), name);
    EXPECT_EQ(test_scores(model), scores);
    if (np == 1) {  // one rank: the summing backend adds nothing, so the model is the one process's
      EXPECT_EQ(read_text(model), read_text(one));
    }
    train(mpirun(np, CRFX_BINARY), kChunking, name + "-again");
    EXPECT_EQ(read_text(temp_path(name + "-again.model")), read_text(model)) << "run to run";
  }
}

// The other full-batch trainers and what they take: OWL-QN (L1), RPROP, a Maxent model, the
// sequential exp-loss (its log objective) — the same objective as one process, within 1e-9.
TEST_F(Mpi, EveryDistributedTrainerMatchesOneProcess) {
  const std::string runs[][2] = {{"owlqn", "-a owlqn --c1 0.5"},
                                 {"rprop", "-a rprop"},
                                 {"maxent", "--type maxent"},
                                 {"seqexp", "--loss seq-exp"}};
  for (const auto& [name, args] : runs) {
    SCOPED_TRACE(name);
    const std::string a = q(kTrain) + " -t " + q(kTemplate) + " --max-iterations 15 " + args;
    train(q(CRFX_BINARY), a, name + "-one");
    train(mpirun(2, CRFX_BINARY), a, name + "-np2");
    expect_close(last_objective(temp_path(name + "-np2.log")), last_objective(temp_path(name + "-one.log")), name);
    EXPECT_EQ(test_scores(temp_path(name + "-np2.model")), test_scores(temp_path(name + "-one.model")));
  }
}

#ifdef CRFX_EMU_BINARY
// Ranks on the emulated GPU: each rank's gradient is read from its device, summed in rank order
// through MPI and written back; against one emulated process and against the CPU.
TEST_F(Mpi, EmulatedGpuRanksMatchOneProcess) {
  const std::string a = q(data_path("conll2000.train60.crfsuite.txt")) + " --format crfsuite --max-iterations 4";
  train(q(CRFX_BINARY), a, "emu-cpu");
  train(q(CRFX_EMU_BINARY), a + " --device cuda", "emu-one");
  const std::string out = train(mpirun(2, CRFX_EMU_BINARY), a + " --device cuda", "emu-np2");
  EXPECT_NE(out.find("emulated"), std::string::npos) << out;
  const double two = last_objective(temp_path("emu-np2.log"));
  expect_close(two, last_objective(temp_path("emu-one.log")), "emulated, 2 ranks against 1 process");
  expect_close(two, last_objective(temp_path("emu-cpu.log")), "emulated, 2 ranks against the CPU");
}
#endif

TEST_F(Mpi, OneProcessTrainersAreRefused) {
  for (const char* algo : {"sgd-l1", "sag", "ap"}) {
    SCOPED_TRACE(algo);
    const std::string model = temp_path(std::string(algo) + ".model");
    std::string out;
    EXPECT_NE(run(mpirun(2, CRFX_BINARY) + " train " + q(kTrain) + " -t " + q(kTemplate) + " -a " + algo + " -m " +
                      q(model),
                  &out),
              0);
    EXPECT_NE(out.find(std::string("the algorithm ") + algo + " runs in one process only; across 2 processes"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("lbfgs, owlqn, rprop"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(model));
  }
}

// A checkpoint records the process count; a resume on another is refused naming both, and one
// on the same continues to the uninterrupted run's model, bit for bit.
TEST_F(Mpi, ResumeNeedsTheSameProcessCount) {
  const std::string ck = temp_path("ranks.ckpt");
  const std::string a = q(kTrain) + " -t " + q(kTemplate);
  train(mpirun(2, CRFX_BINARY), a + " --max-iterations 6 --checkpoint " + q(ck) + " --checkpoint-every 3", "part");
  ASSERT_TRUE(std::filesystem::exists(ck));
  std::string out;
  EXPECT_NE(run(mpirun(3, CRFX_BINARY) + " train " + a + " --resume " + q(ck) + " -m " + q(temp_path("x.model")), &out),
            0);
  EXPECT_NE(out.find("was made by a run on 2 processes, this run has 3"), std::string::npos) << out;
  EXPECT_NE(run(q(CRFX_BINARY) + " train " + a + " --resume " + q(ck) + " -m " + q(temp_path("x.model")), &out), 0);
  EXPECT_NE(out.find("was made by a run on 2 processes, this run has 1"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(temp_path("x.model")));
  train(mpirun(2, CRFX_BINARY), a + " --max-iterations 10 --resume " + q(ck), "resumed");
  train(mpirun(2, CRFX_BINARY), a + " --max-iterations 10", "straight");
  EXPECT_EQ(read_text(temp_path("resumed.model")), read_text(temp_path("straight.model")));
}

// crfx tag under mpirun: input i to process i mod N, each output written by its process; the
// outputs are one process's, byte for byte (5 inputs over 3 processes, and over 7: two idle).
TEST_F(Mpi, TaggingSharesTheInputs) {
  train(q(CRFX_BINARY), q(kTrain) + " -t " + q(kTemplate) + " --max-iterations 10", "tagger");
  const std::string model = q(temp_path("tagger.model"));
  const std::string text = read_text(kTest);
  std::string inputs;
  for (int i = 1; i <= 5; ++i) {  // the first 20·i sentences of the test slice
    std::size_t at = 0;
    for (int k = 0; k < 20 * i && at != std::string::npos; ++k) at = text.find("\n\n", at + 1);
    const std::string in = temp_path("in" + std::to_string(i) + ".txt");
    test::write_text(in, text.substr(0, at == std::string::npos ? text.size() : at + 2));
    inputs += q(in) + " ";
  }
  std::string out;
  ASSERT_EQ(run(q(CRFX_BINARY) + " tag -m " + model + " " + inputs + "-O " + q(temp_path("one")), &out), 0) << out;
  for (int np : {3, 7}) {
    const std::string dir = temp_path("np" + std::to_string(np));
    ASSERT_EQ(run(mpirun(np, CRFX_BINARY) + " tag -m " + model + " " + inputs + "-O " + q(dir), &out), 0) << out;
    EXPECT_NE(out.find("crfx tag: 5 inputs"), std::string::npos) << out;  // the first process's sum of all
    for (int i = 1; i <= 5; ++i) {
      const std::string name = "/in" + std::to_string(i) + ".txt";
      EXPECT_EQ(read_text(dir + name), read_text(temp_path("one") + name)) << np << name;
    }
  }
  EXPECT_NE(run(mpirun(2, CRFX_BINARY) + " tag -m " + model + " " + inputs, &out), 0);
  EXPECT_NE(out.find("across 2 processes each input needs an output of its own: -O DIR"), std::string::npos) << out;
}

// A rank killed mid-training (SIGKILL: no handler runs) ends the whole job with a failure status
// and mpirun's message naming the rank, and no model (nor a temporary of one) is left.
TEST_F(Mpi, KilledRankEndsTheJobWithoutAModel) {
  std::string files;  // 20 × 300 sentences: iterations of a fifth of a second, time to kill one
  for (int i = 0; i < 20; ++i) files += q(kTrain) + " ";
  const std::string dir = g_dir;
  const std::string model = dir + "/model", err = dir + "/err";
  const std::string script = mpirun(2, CRFX_BINARY) + " train " + files + " -t " + q(kTemplate) + " -m " + q(model) +
                             " --threads 1 --max-iterations 500 --delta 0 2> " + q(err) +
                             " & job=$!; for i in $(seq 600); do grep -q '^iter    2 ' " + q(err) +
                             " && break; sleep 0.05; done; kill -9 $(pgrep -P $job | tail -n 1); wait $job";
  test::write_text(dir + "/kill.sh", script + "\n");
  std::string out;
  const int rc = run("bash " + q(dir + "/kill.sh"), &out);
  const std::string log = read_text(err);
  EXPECT_NE(rc, 0) << out << log;
  EXPECT_NE(log.find("iter    2 "), std::string::npos) << log;  // it was killed while training
  EXPECT_NE(log.find("exited on signal 9"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(model));
  EXPECT_TRUE(test::temporaries(dir).empty());
}

}  // namespace
}  // namespace crfx
