// CRF++'s MIRA (host/optim/mira.cpp): steps against a hand computation — the step, its clipping by
// the bound C, the bound summed across epochs, no step where the Viterbi path leads by the errors
// (CRF++'s sign); whole runs against CRF++'s runMIRA written plainly (its float bounds, byte
// shrinking counts and convergence count), shrinking included; bit-exact resume at epoch reports,
// at the stopping epoch and inside epochs; the same model on every run and thread count; settings
// refused; CoNLL-2000 F1 next to ap's; crfx train's -a MIRA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"
#include "trainer_check.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::random_problem;
using test::add_path;
using test::conll_f1;
using test::expect_close;
using test::learnable;
using test::Trained;
using test::two_tokens;

/// mira trained on p from w0 (zeros when empty) with `o`, on the CPU with `threads` threads.
Trained train(const test::RandomProblem& p, const TrainOptions& o, const std::vector<double>& w0 = {},
              unsigned threads = 1) {
  return test::train_on_cpu("mira", p, o, w0, threads);
}

BackendPtr cpu(const Dims& d) { return std::make_unique<CpuBackend>(d, 2); }

/// CRF++'s runMIRA (encoder.cpp, lines 95–189) with collins() and eval() (tagger.cpp) written
/// plainly, in its types: a dense difference, float C and bounds, unsigned char counts, corpus order.
struct Plain {
  std::vector<double> w;
  int epochs = 0;
  std::vector<std::size_t> visited;  // per epoch: the sentences decoded (CRF++'s act)
  std::vector<int> resets;           // the epochs (0-based) whose K ≤ 0 reset the shrinking
};

Plain crfpp_mira(const test::RandomProblem& p, const TrainOptions& o) {
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t nw = p.dims.num_weights(), n = p.corpus.num_sentences();
  const float C = float(o.mira_c);
  std::vector<double> alpha(nw, 0.0);
  std::vector<unsigned char> shrink(n, 0);
  std::vector<float> upper_bound(n, 0.0f);
  int converge = 0;
  Plain r;
  for (int itr = 0; itr < o.epochs; ++itr) {
    std::size_t active_set = 0;
    double max_kkt_violation = 0.0;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (shrink[i] >= o.shrinking_size) continue;
      ++active_set;
      std::vector<std::uint32_t> result(p.corpus.length(i));
      b.viterbi(*corpus, *to_backend(b, alpha), {&i, 1}, result.data(), nullptr);
      const std::uint32_t* answer = p.corpus.labels.data() + p.corpus.sentence_offsets[i];
      int error_num = 0;
      for (std::size_t t = 0; t < result.size(); ++t) error_num += answer[t] != result[t];
      if (error_num == 0) {
        ++shrink[i];
        continue;
      }
      shrink[i] = 0;
      std::vector<double> expected(nw, 0.0);
      add_path(p, i, answer, 1.0, expected);
      add_path(p, i, result.data(), -1.0, expected);
      double score_answer_minus_result = 0, s = 0;
      for (std::size_t k = 0; k < nw; ++k) {
        score_answer_minus_result += alpha[k] * expected[k];
        s += expected[k] * expected[k];
      }
      const double cost_diff = -score_answer_minus_result;  // collins(): return -s
      double mu = std::max(0.0, (error_num - cost_diff) / s);
      if (upper_bound[i] + mu > C) {
        mu = C - upper_bound[i];
      } else {
        max_kkt_violation = std::max(error_num - cost_diff, max_kkt_violation);
      }
      if (mu > 1e-10) {
        upper_bound[i] += mu;
        upper_bound[i] = std::min(C, upper_bound[i]);
        for (std::size_t k = 0; k < nw; ++k) alpha[k] += mu * expected[k];
      }
    }
    r.visited.push_back(active_set);
    r.epochs = itr + 1;
    if (max_kkt_violation <= 0.0) {
      std::fill(shrink.begin(), shrink.end(), 0);
      ++converge;
      r.resets.push_back(itr);
    } else {
      converge = 0;
    }
    if (converge == 2) break;
  }
  r.w = alpha;
  return r;
}

// ---- steps by hand -------------------------------------------------------------------------

// Δ = f(y) − f(ŷ) for ŷ = (0, 0), y = (1, 1): +1 at 1, 3, 7 and −1 at 0, 2, 4; ‖Δ‖² = 6.
const std::vector<double> kDelta = {-1, 1, -1, 1, -1, 0, 0, 1};

TEST(Mira, OneStepEqualsTheHandComputationAndCIsItsBound) {
  const auto p = two_tokens();
  // w0 scores the paths (0,0) 0.5 + 0.3 + 0.1 = 0.9, (0,1) 0.5, (1,0) 0.3, (1,1) 0: Viterbi (0,0),
  // d = 2, cost_diff = 0.9: μ = (2 − 0.9)/6 = 0.18333… below C = 1; at C = 0.1 the step is C.
  const std::vector<double> w0 = {0.5, 0, 0.3, 0, 0.1, 0, 0, 0};
  struct Case {
    double c, mu;
  };
  for (const Case& k : {Case{1.0, 1.1 / 6}, Case{0.5, 1.1 / 6}, Case{0.1, double(0.1f)}}) {
    SCOPED_TRACE(::testing::Message() << "C " << k.c);
    TrainOptions o;
    o.epochs = 1;
    o.mira_c = k.c;
    const Trained r = train(p, o, w0);
    for (std::size_t j = 0; j < 8; ++j) EXPECT_NEAR(r.w[j], w0[j] + k.mu * kDelta[j], 1e-15) << "weight " << j;
  }
}

TEST(Mira, NoStepWhereTheViterbiPathLeadsByItsErrorsOrMore) {
  // CRF++'s sign: μ = max(0, (d − cost_diff)/‖Δ‖²). (0,0) scores 1.5 + 1.0 = 2.5 over the gold path's
  // 0 with d = 2 mislabeled tokens: μ = 0, where the paper's d + cost_diff would step by 4.5/6.
  const auto p = two_tokens();
  const std::vector<double> w0 = {1.5, 0, 1.0, 0, 0, 0, 0, 0};
  TrainOptions o;
  o.epochs = 3;
  const Trained r = train(p, o, w0);
  EXPECT_EQ(r.w, w0);
  // No step and no KKT violation (d − cost_diff < 0): CRF++'s test stops after the second epoch.
  EXPECT_EQ(r.reports.size(), 2u);
  EXPECT_NE(r.stop_reason.find("no KKT violation in epochs 1 and 2"), std::string::npos) << r.stop_reason;
}

TEST(Mira, TheBoundSumsASentencesStepsAcrossEpochs) {
  const auto p = two_tokens();
  // (0,0) scores 1.0 + 0.8 + 0.1 = 1.9: epoch 1 steps by μ₁ = (2 − 1.9)/6 (B = μ₁ < C = 0.03), which
  // leaves (0,0) the Viterbi path (1.85 over (0,1) 1.0, (1,0) 0.8, (1,1) 0.05) with cost_diff 1.8;
  // epoch 2's μ = 0.2/6 would take B past C: the step is C − B, in single precision as CRF++'s
  // float bounds; epoch 3's is C − C = 0. Epochs 2 and 3 clip their one step and so have no
  // KKT violation: CRF++'s test stops after epoch 3.
  const std::vector<double> w0 = {1.0, 0, 0.8, 0, 0.1, 0, 0, 0};
  TrainOptions o;
  o.epochs = 10;
  o.mira_c = 0.03;
  const Trained r = train(p, o, w0);
  const double mu1 = (2.0 - (1.0 + 0.8 + 0.1)) / 6.0;
  const float b1 = float(mu1);
  const double mu2 = 0.03f - b1;  // CRF++: mu = C - upper_bound[i], a float difference
  for (std::size_t j = 0; j < 8; ++j) EXPECT_NEAR(r.w[j], w0[j] + (mu1 + mu2) * kDelta[j], 1e-15) << "weight " << j;
  ASSERT_EQ(r.reports.size(), 3u);
  EXPECT_NE(r.stop_reason.find("no KKT violation in epochs 2 and 3"), std::string::npos) << r.stop_reason;
  // A larger C lets epoch 2 take its whole step.
  o.mira_c = 1;
  o.epochs = 2;
  const Trained free = train(p, o, w0);
  for (std::size_t j = 0; j < 8; ++j)
    EXPECT_NEAR(free.w[j], w0[j] + (mu1 + 0.2 / 6) * kDelta[j], 1e-12) << "weight " << j;
}

// ---- whole runs against CRF++'s algorithm --------------------------------------------------

TEST(Mira, RunsEqualCrfppsAlgorithmWrittenPlainly) {
  struct Case {
    double c;
    int shrinking_size;
    bool learnable;
  };
  for (const Case& k : {Case{1.0, 20, false}, Case{0.05, 20, false}, Case{1.0, 1, true}, Case{0.2, 2, true},
                        Case{100.0, 1, false}}) {
    SCOPED_TRACE(::testing::Message() << "C " << k.c << " shrinking " << k.shrinking_size << " learnable "
                                      << k.learnable);
    const auto p = k.learnable ? learnable(4, 25, 0, 30, 8, 41) : random_problem(4, 25, 2, 30, 8, 41);
    TrainOptions o;
    o.epochs = 12;
    o.mira_c = k.c;
    o.shrinking_size = k.shrinking_size;
    const Trained r = train(p, o);
    const Plain plain = crfpp_mira(p, o);
    // The bounds are floats (CRF++'s): a μ that differs in its last bit (w·Δ and ‖Δ‖² summed over
    // the support here, densely there) can round B_i to the neighbouring float, and a later clipped
    // step C − B_i then differs by that float's ulp, ~C·6e-8.
    expect_close(r.w, plain.w, 1e-6);
    ASSERT_EQ(int(r.reports.size()), plain.epochs);
    // A decode is a pass of 1/N: the reports' passes count the sentences shrinking left in.
    double passes = 0;
    for (std::size_t e = 0; e < r.reports.size(); ++e) {
      passes += double(plain.visited[e]) / double(p.corpus.num_sentences());
      EXPECT_NEAR(r.reports[e].passes, passes, 1e-12) << "epoch " << e + 1;
    }
  }
}

TEST(Mira, ShrinkingSkipsSentencesRightNEpochsRunningUntilAnEpochWithoutViolation) {
  const auto p = learnable(4, 25, 0, 40, 8, 7);
  const std::size_t n = p.corpus.num_sentences();
  TrainOptions o;
  o.epochs = 30;
  o.mira_c = 0.5;
  o.shrinking_size = 2;
  const Plain plain = crfpp_mira(p, o);
  // The run shows all three: sentences skipped, a reset by an epoch without violation before the
  // last one, and the stop two such epochs running.
  std::size_t skipping = 0;
  for (std::size_t e = 0; e < plain.visited.size(); ++e) skipping += plain.visited[e] < n;
  EXPECT_GT(skipping, 0u);
  ASSERT_GE(plain.resets.size(), 2u);
  ASSERT_LT(plain.epochs, o.epochs);
  const Trained r = train(p, o);
  ASSERT_EQ(r.reports.size(), plain.visited.size());
  std::vector<std::size_t> decoded;  // per epoch, from the passes (1/N a decode)
  double before = 0;
  for (std::size_t e = 0; e < r.reports.size(); ++e) {
    decoded.push_back(std::size_t(std::lround((r.reports[e].passes - before) * double(n))));
    EXPECT_EQ(decoded.back(), plain.visited[e]) << "epoch " << e + 1;
    before = r.reports[e].passes;
  }
  // After an epoch without violation every sentence is decoded again; before one, what shrinking
  // skipped stays skipped.
  for (int e : plain.resets) {
    if (std::size_t(e) + 1 < decoded.size()) {
      EXPECT_EQ(decoded[std::size_t(e) + 1], n) << "after epoch " << e + 1;
    }
  }
  expect_close(r.w, plain.w, 1e-6);  // (float bounds, as above)
  EXPECT_NE(r.stop_reason.find("CRF++'s MIRA test: no KKT violation in epochs " + std::to_string(plain.epochs - 1) +
                               " and " + std::to_string(plain.epochs)),
            std::string::npos)
      << r.stop_reason;
  // Shrinking after one right epoch skips more than after two, and changes the run.
  o.shrinking_size = 1;
  const Trained eager = train(p, o);
  EXPECT_NE(eager.w, r.w);
  expect_close(eager.w, crfpp_mira(p, o).w, 1e-6);
}

// ---- checkpoints, determinism --------------------------------------------------------------

/// Stops the run by its poll after every sentence (skipped ones included: the poll is asked after
/// each), resumes each time from the checkpoint of that point and checks the uninterrupted run's
/// weights, objective, stop reason and reports, bit for bit. (checkpoint_check's plan assumes every
/// decode adds a pass, which shrinking does not.)
void check_every_stop_within(const test::RandomProblem& p, const TrainOptions& o) {
  const TrainerInfo& info = find_trainer("mira");
  const std::string path = test::temp_path("mira-within.ckpt");
  const test::StoppedRun full = test::train_stopped(cpu, p, info, o, 0, path, false);
  ASSERT_GT(full.polls, 0u);
  for (std::size_t k = 1; k <= full.polls; ++k) {
    SCOPED_TRACE(::testing::Message() << "stopped at poll " << k);
    const test::StoppedRun first = test::train_stopped(cpu, p, info, o, k, path, false);
    ASSERT_EQ(first.within.size(), 1u);
    const test::StoppedRun rest = test::train_stopped(cpu, p, info, o, 0, path, true);
    EXPECT_EQ(first.polls + rest.polls, full.polls);
    EXPECT_TRUE(test::bitwise_equal(rest.w, full.w)) << "the resumed run ends with other weights";
    EXPECT_EQ(rest.stop_reason, full.stop_reason);
    ASSERT_EQ(first.reports.size() + rest.reports.size(), full.reports.size());
    for (std::size_t i = 0; i < rest.reports.size(); ++i) {
      const test::Report &r = rest.reports[i], &e = full.reports[first.reports.size() + i];
      EXPECT_EQ(r.iteration, e.iteration);
      EXPECT_EQ(r.passes, e.passes);
      EXPECT_TRUE(test::bitwise_equal({r.objective}, {e.objective})) << "iteration " << r.iteration;
    }
  }
}

TEST(Mira, ResumesBitExactAtEpochsAtTheStopAndInsideEpochs) {
  const auto random = random_problem(4, 30, 2, 23, 8, 17);
  const auto fits = learnable(4, 25, 0, 23, 8, 19);
  struct Case {
    const test::RandomProblem* p;
    double c;
    int shrinking_size;
    int epochs;
  };
  for (const Case& k : {Case{&random, 1.0, 20, 4}, Case{&random, 0.05, 1, 4}, Case{&fits, 0.2, 1, 30},
                        Case{&fits, 1.0, 2, 30}}) {
    SCOPED_TRACE(::testing::Message() << "C " << k.c << " shrinking " << k.shrinking_size << " epochs " << k.epochs);
    TrainOptions o;
    o.epochs = k.epochs;
    o.mira_c = k.c;
    o.shrinking_size = k.shrinking_size;
    // Resumed at every report: the bounds, the counts and CRF++'s convergence count carry over,
    // and a resume from the report where its test fires stops there too.
    test::check_resume_is_exact(cpu, *k.p, find_trainer("mira"), o, 100);
    check_every_stop_within(*k.p, o);
  }
  // Without shrinking in 3 epochs, checkpoint_check's plan holds: the shared check.
  TrainOptions o;
  o.epochs = 3;
  test::check_stop_within_is_exact(cpu, random, find_trainer("mira"), o,
                                   test::within_stops("mira", o, random.corpus.num_sentences()));
}

TEST(Mira, TheSameModelEveryRunAnyThreadCountAndNoSeed) {
  const auto p = random_problem(4, 30, 3, 30, 7, 37);
  TrainOptions o;
  o.epochs = 5;
  o.mira_c = 0.3;
  o.shrinking_size = 2;
  const Trained a = train(p, o, {}, 1), b = train(p, o, {}, 1), c = train(p, o, {}, 3);
  EXPECT_TRUE(test::bitwise_equal(a.w, b.w));
  EXPECT_TRUE(test::bitwise_equal(a.w, c.w));
  o.seed = 2;  // corpus order, as CRF++: the seed takes no part
  EXPECT_TRUE(test::bitwise_equal(train(p, o).w, a.w));
  EXPECT_FALSE(find_trainer("mira").takes("seed"));
}

TEST(Mira, BadSettingsAndLossesAreRefused) {
  const auto p = two_tokens();
  TrainOptions o;
  o.mira_c = 1e-60;  // > 0, but 0 in single precision, where CRF++ keeps C
  EXPECT_NE(test::error_text([&] { train(p, o); }).find("mira: --mira-c must be a number > 0 that single precision"),
            std::string::npos);
  o.mira_c = 1e300;
  EXPECT_NE(test::error_text([&] { train(p, o); }).find("--mira-c"), std::string::npos);
  o = TrainOptions{};
  o.shrinking_size = 0;
  EXPECT_EQ(test::error_text([&] { train(p, o); }), "mira: --shrinking-size must be ≥ 1, as CRF++'s -H (got 0)");
  EXPECT_NE(loss_refusal(find_trainer("mira"), SequenceLoss::seq_exp).find("mira minimises no loss"),
            std::string::npos);
  const OptionSpec* c = find_option("mira-c");
  ASSERT_NE(c, nullptr);
  TrainOptions t;
  EXPECT_EQ(c->get(t), "1");  // CRF++'s -c default
  EXPECT_NE(test::error_text([&] { c->set(t, "0"); }).find("must be > 0"), std::string::npos);
  const OptionSpec* h = find_option("shrinking-size");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->get(t), "20");  // CRF++'s -H default
  EXPECT_NE(test::error_text([&] { h->set(t, "0"); }).find("must be between 1 and"), std::string::npos);
}

// ---- CoNLL-2000 and the command line -------------------------------------------------------

TEST(Mira, ConllF1NextToTheAveragedPerceptronAndCrfppsSpellings) {
  const double ap = conll_f1("mira-ap", "-a ap --epochs 10");
  std::string err;
  // CRF++'s spelling, its -c and -H as crfx names them, every attribute × label pair as CRF++'s.
  const double mira = conll_f1("mira-mira", "-a MIRA --mira-c 1 --shrinking-size 20 --features all", &err);
  RecordProperty("f1_ap", std::to_string(ap));
  RecordProperty("f1_mira", std::to_string(mira));
  std::printf("CoNLL-2000 slice F1: ap (10 epochs) %.2f, mira %.2f\n", ap, mira);
  EXPECT_GT(mira, ap - 4.0);
  // Without --epochs crfx train says its default is not crf_learn's.
  EXPECT_NE(err.find("crfx train: note: -a mira runs at most --epochs 30 by default (CRF++'s crf_learn -m 100000"),
            std::string::npos)
      << err;
  std::string out;
  conll_f1("mira-lower", "-a mira --epochs 3", &out);
  EXPECT_EQ(out.find("note: -a mira"), std::string::npos) << out;
  // pa's setting is pa's: mira refuses it, naming its own.
  EXPECT_EQ(test::run(test::crfx_binary() + " train " + test::quoted(test::data_path("conll2000.train300.txt")) + " -t " +
                          test::quoted(test::data_path("chunking.template")) + " -q -a mira --pa-c 2 -m " +
                          test::quoted(test::temp_path("mira-refused.model")),
                      &out),
            2);
  EXPECT_NE(out.find("--pa-c is not a setting of mira"), std::string::npos) << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " train --algo list", &out), 0) << out;
  EXPECT_NE(out.find("  mira\tCRF++'s MIRA"), std::string::npos) << out;
  EXPECT_NE(out.find("settings: --mira-c 1 --shrinking-size 20 --epochs 30"), std::string::npos) << out;
}

}  // namespace
}  // namespace crfx
