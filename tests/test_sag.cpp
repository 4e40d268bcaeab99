// SAG / SAGA (seed 004): the stored-marginal backend primitives against explicit per-sentence
// gradients, convergence to the L-BFGS / OWL-QN optimum, determinism, option errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"
#include "sag_check.hpp"

namespace crfx {
namespace {

using test::random_problem;

struct Result {
  std::vector<double> w;
  double f = 0;
  double passes = 0;
  int epochs = 0;
};

Result run_trainer(const char* algo, const test::RandomProblem& p, double c1, double c2,
                   unsigned threads, const TrainOptions& o) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, c1, c2);
  auto w = b.vector(p.dims.num_weights());
  Result r;
  r.f = find_trainer(algo).make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    r.epochs = pr.iteration;
    return true;
  });
  r.passes = obj.passes();
  r.w = to_host(b, *w);
  return r;
}

TrainOptions sag_options(const char* sampling) {
  TrainOptions o;
  o.sampling = parse_sampling(sampling);
  o.epsilon = 1e-8;  // ‖d/n + λw‖∞ in seed units (F = f/n)
  o.max_epochs = 400;
  o.seed = 3;
  return o;
}

TrainOptions lbfgs_tight() {
  TrainOptions o;
  o.epsilon = 1e-11;
  o.delta = 0;
  o.period = 0;
  o.max_iterations = 2000;
  o.max_linesearch = 40;
  return o;
}

using test::max_abs_diff;

// ---- the primitives: stored marginals + lazy steps == explicit gradients + dense steps ------

void check_against_explicit(std::uint32_t E, bool with_coef, unsigned threads, bool tiny_a = false) {
  auto p = random_problem(3, 12, E, 9, 6, 21 + E);
  CpuBackend b(p.dims, threads);
  test::check_sag_against_explicit(b, p, with_coef, tiny_a);
}

TEST(Sag, StoredMarginalsEqualExplicitGradients) { check_against_explicit(0, false, 1); }
TEST(Sag, StoredMarginalsEqualExplicitGradientsWithEdgesAndSagaTerm) {
  check_against_explicit(3, true, 3);
}
TEST(Sag, StoredMarginalsEqualExplicitGradientsThroughInternalFlushes) {
  check_against_explicit(2, false, 2, true);
}

TEST(Sag, RefusedSpansLeaveNothingHalfDone) {
  for (std::uint32_t E : {0u, 3u}) {
    auto p = random_problem(3, 12, E, 9, 6, 31 + E);
    CpuBackend b(p.dims, 2);
    test::check_refused_spans(b, p);
  }
}

TEST(Sag, SearchEqualsThePrimitivesItStandsFor) {
  for (std::uint32_t E : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "E=" << E);
    auto p = random_problem(3, 12, E, 9, 6, 41 + E);
    CpuBackend b(p.dims, 2);
    test::check_search_equals_primitives(b, p);
  }
}

TEST(Sag, LazyProximalStepWithoutSignChangeIsExact) {
  auto p = random_problem(3, 6, 0, 4, 4, 2);
  CpuBackend b(p.dims, 1);
  test::check_sag_lazy_prox(b, p);
}

// ---- the trainers ----------------------------------------------------------------------------

class SagSampling : public ::testing::TestWithParam<const char*> {};

TEST_P(SagSampling, ReachesLbfgsOptimum) {
  auto p = random_problem(4, 30, 2, 40, 8, 7);
  const double c2 = 1.0;
  auto ref = run_trainer("lbfgs", p, 0.0, c2, 1, lbfgs_tight());
  auto r = run_trainer("sag", p, 0.0, c2, 1, sag_options(GetParam()));
  EXPECT_LT(r.epochs, 400) << "did not meet the stopping test";
  EXPECT_NEAR(r.f, ref.f, 1e-7 * ref.f);
  EXPECT_LT(max_abs_diff(r.w, ref.w), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Sag, SagSampling, ::testing::Values("uniform", "lipschitz", "mixed"));

TEST(Sag, SagaReachesLbfgsOptimum) {
  auto p = random_problem(4, 30, 2, 40, 8, 8);
  const double c2 = 1.0;
  auto ref = run_trainer("lbfgs", p, 0.0, c2, 1, lbfgs_tight());
  for (const char* s : {"uniform", "mixed"}) {
    auto r = run_trainer("saga", p, 0.0, c2, 1, sag_options(s));
    EXPECT_LT(r.epochs, 400) << s;
    EXPECT_NEAR(r.f, ref.f, 1e-7 * ref.f) << s;
    EXPECT_LT(max_abs_diff(r.w, ref.w), 1e-5) << s;
  }
}

TEST(Sag, MiniBatchesReachLbfgsOptimum) {
  auto p = random_problem(4, 30, 0, 40, 8, 9);
  const double c2 = 1.0;
  auto ref = run_trainer("lbfgs", p, 0.0, c2, 1, lbfgs_tight());
  auto o = sag_options("mixed");
  o.batch_size = 4;
  auto r = run_trainer("sag", p, 0.0, c2, 2, o);
  EXPECT_NEAR(r.f, ref.f, 1e-7 * ref.f);
  EXPECT_LT(max_abs_diff(r.w, ref.w), 1e-5);
}

TEST(Sag, L1KeepsExactZerosAndReachesOwlqnObjective) {
  auto p = random_problem(4, 40, 2, 40, 8, 9);
  const double c1 = 0.8, c2 = 0.5;
  auto ref = run_trainer("owlqn", p, c1, c2, 1, lbfgs_tight());
  for (const char* algo : {"sag", "saga"}) {
    auto r = run_trainer(algo, p, c1, c2, 1, sag_options("mixed"));
    EXPECT_NEAR(r.f, ref.f, 1e-6 * ref.f) << algo;
    std::size_t zeros = 0, ref_zeros = 0, agree = 0;
    for (std::size_t j = 0; j < r.w.size(); ++j) {
      zeros += r.w[j] == 0.0;
      ref_zeros += ref.w[j] == 0.0;
      agree += (r.w[j] == 0.0) == (ref.w[j] == 0.0);
    }
    EXPECT_GT(zeros, r.w.size() / 4) << algo << ": L1 should leave exact zeros";
    EXPECT_GE(double(agree), 0.98 * double(r.w.size())) << algo;
    EXPECT_LT(max_abs_diff(r.w, ref.w), 1e-4) << algo;
  }
}

TEST(Sag, SameSeedSameModelOtherSeedOtherPath) {
  auto p = random_problem(4, 30, 2, 30, 8, 11);
  auto o = sag_options("mixed");
  o.max_epochs = 3;
  auto r1 = run_trainer("sag", p, 0.0, 0.5, 1, o);
  auto r2 = run_trainer("sag", p, 0.0, 0.5, 1, o);
  EXPECT_EQ(r1.w, r2.w);
  o.seed = 4;
  auto r3 = run_trainer("sag", p, 0.0, 0.5, 1, o);
  EXPECT_NE(r1.w, r3.w);
}

TEST(Sag, IdenticalForAnyThreadCount) {
  auto p = random_problem(5, 40, 3, 40, 10, 12);
  for (const char* algo : {"sag", "saga"}) {
    auto o = sag_options("mixed");
    o.max_epochs = 3;
    o.batch_size = 3;
    auto r1 = run_trainer(algo, p, 0.2, 0.5, 1, o);
    auto r3 = run_trainer(algo, p, 0.2, 0.5, 3, o);
    EXPECT_EQ(r1.w, r3.w) << algo;
  }
}

TEST(Sag, CountsPassesAndReportsEveryEpoch) {
  auto p = random_problem(4, 20, 0, 20, 6, 13);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, 0.0, 0.5);
  auto w = b.vector(p.dims.num_weights());
  auto o = sag_options("uniform");
  o.max_epochs = 5;
  o.epsilon = 0;
  std::vector<Progress> log;
  find_trainer("sag").make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    log.push_back(pr);
    return true;
  });
  ASSERT_EQ(log.size(), 5u);
  for (std::size_t e = 0; e < log.size(); ++e) {
    EXPECT_EQ(log[e].iteration, int(e + 1));
    // One forward-backward per sentence and epoch, plus the line-search forward passes; the
    // monitoring pass is not counted.
    EXPECT_GE(log[e].passes, double(e + 1) - 1e-12);
    EXPECT_LT(log[e].passes, 3.0 * double(e + 1));
    if (e > 0) {
      EXPECT_LT(log[e].objective, log[0].objective);
    }
  }
  EXPECT_DOUBLE_EQ(obj.passes(), log.back().passes);
}

TEST(Sag, RejectsBadOptions) {
  auto p = random_problem(3, 10, 0, 5, 4, 14);
  auto expect_error = [&](TrainOptions o, const char* what) {
    try {
      run_trainer("sag", p, 0.0, 0.5, 1, o);
      FAIL() << "expected an error mentioning " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  try {  // names are parsed where they are read (the CLI): an unknown one is refused, named
    parse_sampling("importance");
    ADD_FAILURE() << "no error for sampling 'importance'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown sampling 'importance'"), std::string::npos) << e.what();
  }
  TrainOptions o;
  o.batch_size = 0;
  expect_error(o, "batch_size");
  o = TrainOptions();
  o.max_epochs = 0;
  expect_error(o, "max_epochs");
}

}  // namespace
}  // namespace crfx
