// Maxent models (crfx train --type maxent) and seed 001's trainers gis, iis, scgis and cd
// (host/optim/maxent_problem.hpp): the problem's objective, gradient and S_w/T_w bookkeeping
// against brute force; every trainer at the optimum of a tight L-BFGS; determinism; resume; the
// refusals (CRF models, L1, negative values, --device cuda); the CPU backend's independent-position
// path; the model file's type; the CLI end to end.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "optim/maxent_problem.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::RandomProblem;

const char* const kMaxentAlgos[] = {"gis", "iis", "scgis", "cd"};

/// A random Maxent problem: random_problem without edges, transitions off; `observed`: the
/// observed-pair layout (crfx train's default) instead of every pair.
RandomProblem maxent_problem(std::uint32_t L, std::uint32_t A, std::size_t sentences, std::size_t max_len,
                             std::uint64_t seed, bool binary, bool observed) {
  RandomProblem p = test::random_problem(L, A, 0, sentences, max_len, seed, binary);
  p.dims.transitions = false;
  if (observed) p.dims.layout = std::make_shared<const WeightLayout>(observed_layout(p.corpus, p.dims));
  return p;
}

/// Random weights on the state rows, zero on the (unused) transition block.
std::vector<double> state_weights(const Dims& d, double scale, std::uint64_t seed) {
  std::vector<double> w = test::random_weights(d.num_weights(), scale, seed);
  for (std::size_t k = d.transition_offset(); k < d.edge_offset(); ++k) w[k] = 0;
  return w;
}

/// Per token: the scores s(y) = Σ_items v·w[a, y] (a pair the layout lacks scores 0).
std::vector<double> token_scores(const RandomProblem& p, const std::vector<double>& w, std::size_t i) {
  const std::size_t L = p.dims.L;
  const std::vector<double> wd = p.dims.dense() ? w : test::dense_weights(p.dims, w);
  std::vector<double> s(L, 0.0);
  for (std::size_t k = p.corpus.state_offsets[i]; k < p.corpus.state_offsets[i + 1]; ++k)
    for (std::size_t y = 0; y < L; ++y) s[y] += p.corpus.state_value(k) * wd[std::size_t(p.corpus.state_ids[k]) * L + y];
  return s;
}

/// Brute force: Σ_i −log softmax(s_i)(y_i) + c2·‖w‖², and its gradient (every pair, dense).
double brute_objective(const RandomProblem& p, const std::vector<double>& w, double c2, std::vector<double>* grad) {
  const std::size_t L = p.dims.L, N = p.corpus.num_tokens();
  Dims dense = p.dims;
  dense.layout = nullptr;
  std::vector<double> gd(dense.num_weights(), 0.0);
  double f = 0;
  for (std::size_t i = 0; i < N; ++i) {
    const std::vector<double> s = token_scores(p, w, i);
    double m = s[0];
    for (double x : s) m = std::max(m, x);
    double z = 0;
    for (double x : s) z += std::exp(x - m);
    f += m + std::log(z) - s[p.corpus.labels[i]];
    for (std::size_t k = p.corpus.state_offsets[i]; k < p.corpus.state_offsets[i + 1]; ++k)
      for (std::size_t y = 0; y < L; ++y)
        gd[std::size_t(p.corpus.state_ids[k]) * L + y] +=
            p.corpus.state_value(k) * (std::exp(s[y] - m) / z - (y == p.corpus.labels[i] ? 1.0 : 0.0));
  }
  for (double x : w) f += c2 * x * x;
  if (grad) {
    grad->assign(w.size(), 0.0);
    const std::vector<std::size_t> index = test::dense_index(p.dims);
    for (std::size_t k = 0; k < w.size(); ++k)
      if (k < p.dims.transition_offset()) (*grad)[k] = gd[index[k]] + 2 * c2 * w[k];
  }
  return f;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(1.0, std::fabs(b)); }

struct Trained {
  std::vector<double> w;
  double f = 0;  // the objective at w, from the backend (the CRF machinery)
  int iterations = 0;
  std::string stop;
};

Trained train(const RandomProblem& p, const std::string& algo, const TrainOptions& o, unsigned threads = 2) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, o.c1, o.c2);
  auto w = b.vector(p.dims.num_weights());
  auto trainer = find_trainer(algo).make();
  Trained r;
  trainer->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    EXPECT_EQ(pr.iteration, r.iterations + 1);
    EXPECT_TRUE(std::isfinite(pr.objective));
    EXPECT_NE(pr.state, nullptr);
    r.iterations = pr.iteration;
    return true;
  });
  r.w = to_host(b, *w);
  r.f = obj.value(*w);
  r.stop = trainer->stop_reason();
  return r;
}

/// Tight settings: no improvement test, a gradient test near double precision.
TrainOptions tight(double c2) {
  TrainOptions o;
  o.c2 = c2;
  o.period = 0;
  o.epsilon = 1e-11;
  o.max_iterations = 20000;
  return o;
}

// ---- the problem ---------------------------------------------------------------------------

TEST(MaxentProblem, ObjectiveAndGradientMatchBruteForceAndTheBackend) {
  for (bool binary : {false, true})
    for (bool observed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "binary " << binary << " observed " << observed);
      const RandomProblem p = maxent_problem(4, 12, 10, 6, 3 + binary + 2 * observed, binary, observed);
      const double c2 = 0.3;
      const std::vector<double> w = state_weights(p.dims, 0.7, 11);
      MaxentProblem mp("test", p.corpus, p.dims, c2);
      std::vector<double> E, g, want;
      mp.refresh(w, &E);
      mp.gradient(w, E, g);
      const double f = mp.objective(w);
      const double f_brute = brute_objective(p, w, c2, &want);
      EXPECT_LT(rel(f, f_brute), 1e-13) << f << " vs " << f_brute;
      ASSERT_EQ(g.size(), want.size());
      for (std::size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(g[k], want[k], 1e-12) << k;
      // The CRF machinery with transitions off (the backend's objective) agrees.
      CpuBackend b(p.dims, 2);
      auto corpus = b.upload(p.corpus);
      Objective obj(b, *corpus, 0.0, c2);
      auto wv = to_backend(b, w);
      auto gv = b.vector(w.size());
      EXPECT_LT(rel(obj.value_and_gradient(*wv, *gv), f_brute), 1e-13);
      const std::vector<double> gb = to_host(b, *gv);
      for (std::size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(gb[k], want[k], 1e-12) << k;
      // Empirical counts: the gradient at w = 0 without L2 is E − P̃.
      const std::vector<double> zero(w.size(), 0.0);
      mp.refresh(zero, &E);
      std::vector<double> g0;
      brute_objective(p, zero, 0.0, &g0);
      for (std::size_t k = 0; k < p.dims.transition_offset(); ++k)
        EXPECT_NEAR(E[k] - mp.empirical()[k], g0[k], 1e-13) << k;
    }
}

TEST(MaxentProblem, FeatureSumsAndOccurrencesMergeRepeatedAttributes) {
  RandomProblem p = maxent_problem(3, 4, 1, 1, 1, false, false);
  // One token naming attribute 2 twice (values 0.5 and 0.75) and attribute 1 once (0.0: dropped).
  p.corpus = Corpus();
  p.corpus.state_ids = {2, 1, 2};
  p.corpus.state_values = {0.5, 0.0, 0.75};
  p.corpus.state_offsets = {0, 3};
  p.corpus.edge_offsets = {0, 0};
  p.corpus.labels = {1};
  p.corpus.sentence_offsets = {0, 1};
  p.corpus.source_lines = {1};
  MaxentProblem mp("test", p.corpus, p.dims, 0.0);
  EXPECT_EQ(mp.occurrence_end(2) - mp.occurrence_begin(2), 1u);
  EXPECT_EQ(mp.value(mp.occurrence_begin(2)), 1.25);
  EXPECT_EQ(mp.occurrence_end(1) - mp.occurrence_begin(1), 0u);
  EXPECT_EQ(mp.max_value(2), 1.25);
  EXPECT_EQ(mp.empirical()[2 * 3 + 1], 1.25);
  EXPECT_EQ(mp.empirical()[2 * 3 + 0], 0.0);
  const std::vector<double> f = mp.feature_sums();
  EXPECT_EQ(f, (std::vector<double>{1.25, 1.25, 1.25}));
  EXPECT_EQ(mp.nonzeros(), 3.0);  // one occurrence × the row's 3 labels
}

TEST(MaxentProblem, BookkeepingFollowsMovesAsRecomputation) {
  for (bool binary : {false, true})
    for (bool observed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "binary " << binary << " observed " << observed);
      const RandomProblem p = maxent_problem(5, 9, 12, 7, 21 + binary + 2 * observed, binary, observed);
      MaxentProblem mp("test", p.corpus, p.dims, 0.1);
      std::vector<double> w = state_weights(p.dims, 0.5, 5);
      mp.refresh(w);
      std::mt19937_64 rng(99);
      std::uniform_int_distribution<std::uint32_t> attr(0, p.dims.A - 1);
      std::normal_distribution<double> step(0.0, 1.0);
      const WeightGroups wg = p.dims.groups();
      // Small and huge steps (e^{±60}: rescaling, T̃ summed afresh, S̃ underflow to 0).
      for (int m = 0; m < 400; ++m) {
        const std::uint32_t a = attr(rng);
        if (wg.size(a) == 0) continue;
        const std::size_t q = wg.begin(a) + rng() % wg.size(a);
        const double z = m % 50 == 49 ? (m % 100 == 49 ? 60.0 : -60.0) : step(rng);
        w[q] += z;
        mp.shift_weight(a, wg.slot(q, a), z, w);
        if (m % 100 == 99) mp.resync(w);
      }
      MaxentProblem fresh("test", p.corpus, p.dims, 0.1);
      fresh.refresh(w);
      for (std::size_t i = 0; i < mp.instances(); ++i)
        for (std::uint32_t y = 0; y < mp.labels(); ++y)
          EXPECT_NEAR(mp.p(i, y), fresh.p(i, y), 1e-12) << "token " << i << " label " << y;
      EXPECT_LT(rel(mp.objective(w), brute_objective(p, w, 0.1, nullptr)), 1e-12);
      mp.resync(w);
      for (std::size_t i = 0; i < mp.instances(); ++i) {
        double sum = 0, top = 0;
        for (std::uint32_t y = 0; y < mp.labels(); ++y) {
          sum += mp.scaled_S()[i * mp.labels() + y];
          top = std::max(top, mp.scaled_S()[i * mp.labels() + y]);
          EXPECT_NEAR(mp.p(i, y), fresh.p(i, y), 1e-12);
        }
        EXPECT_EQ(mp.scaled_T()[i], sum);  // T̃ = Σ S̃ exactly after a resync
        EXPECT_GE(top, 0.5);
        EXPECT_LT(top, 1.0 + 1e-15);
      }
    }
}

TEST(MaxentProblem, SafeguardedNewtonSolvesIncreasingFunctions) {
  std::size_t evaluations = 0;
  // e^{3z} − 20 + 0.2·z (GIS's A′ with a tiny E: plain Newton from 0 would overshoot far).
  const double z = solve_increasing(
      [](double x, double& d) {
        d = 3 * 1e-6 * std::exp(3 * x) + 0.2;
        return 1e-6 * std::exp(3 * x) - 20 + 0.2 * x;
      },
      step_cap(3), evaluations);
  EXPECT_NEAR(1e-6 * std::exp(3 * z) - 20 + 0.2 * z, 0.0, 1e-9);
  EXPECT_LT(evaluations, 100u);
  // No root: the side of the cap.
  evaluations = 0;
  const double far = solve_increasing(
      [](double x, double& d) {
        d = std::exp(x);
        return std::exp(x);
      },
      10.0, evaluations);
  EXPECT_NEAR(far, -10.0, 1e-9);
}

// ---- the trainers --------------------------------------------------------------------------

TEST(MaxentTrainers, EachReachesTheOptimumOfATightLbfgs) {
  for (bool binary : {true, false})
    for (bool observed : {true, false}) {
      const RandomProblem p = maxent_problem(3, 10, 15, 5, 41 + binary + 2 * observed, binary, observed);
      const double c2 = 0.3;
      TrainOptions ref = tight(c2);
      ref.epsilon = 1e-13;
      const Trained lbfgs = train(p, "lbfgs", ref);
      for (const char* algo : kMaxentAlgos) {
        SCOPED_TRACE(::testing::Message() << algo << " binary " << binary << " observed " << observed);
        const Trained t = train(p, algo, tight(c2));
        EXPECT_LT(rel(t.f, lbfgs.f), 1e-9) << t.f << " vs " << lbfgs.f << " after " << t.iterations
                                          << " iterations: " << t.stop;
        EXPECT_NE(t.stop.find("epsilon"), std::string::npos) << t.stop;
        for (std::size_t k = 0; k < t.w.size(); ++k) EXPECT_NEAR(t.w[k], lbfgs.w[k], 1e-4) << k;
      }
    }
}

TEST(MaxentTrainers, ObjectiveDecreasesEveryIteration) {
  const RandomProblem p = maxent_problem(4, 15, 20, 6, 7, false, true);
  for (const char* algo : kMaxentAlgos) {
    SCOPED_TRACE(algo);
    CpuBackend b(p.dims, 1);
    auto corpus = b.upload(p.corpus);
    TrainOptions o;
    o.c2 = 0.2;
    o.max_iterations = 30;
    o.period = 0;
    Objective obj(b, *corpus, 0, o.c2);
    auto w = b.vector(p.dims.num_weights());
    double last = brute_objective(p, std::vector<double>(p.dims.num_weights(), 0.0), o.c2, nullptr);
    double passes = 0;
    find_trainer(algo).make()->train(obj, *w, o, [&](const Progress& pr, const Vector& wv) {
      EXPECT_LT(pr.objective, last + 1e-12 * last) << "iteration " << pr.iteration;  // each is a descent method
      // The reported objective is L(w) at the reported weights (the backend's, to rounding).
      EXPECT_LT(rel(pr.objective, brute_objective(p, to_host(b, wv), o.c2, nullptr)), 1e-12);
      EXPECT_GT(pr.passes, passes);
      EXPECT_EQ(pr.active_features, b.count_nonzero(wv));
      passes = pr.passes;
      last = pr.objective;
      return true;
    });
  }
}

TEST(MaxentTrainers, DeterministicForAnyThreadCount) {
  const RandomProblem p = maxent_problem(4, 20, 20, 6, 17, false, true);
  TrainOptions o;
  o.c2 = 0.1;
  o.max_iterations = 15;
  for (const char* algo : kMaxentAlgos) {
    SCOPED_TRACE(algo);
    const Trained a = train(p, algo, o, 1), b = train(p, algo, o, 3);
    EXPECT_TRUE(test::bitwise_equal(a.w, b.w));
    EXPECT_EQ(a.iterations, b.iterations);
  }
}

TEST(MaxentTrainers, ResumeIsExact) {
  for (bool observed : {true, false}) {
    const RandomProblem p = maxent_problem(4, 24, 24, 8, 43 + observed, false, observed);
    for (const char* algo : kMaxentAlgos) {
      SCOPED_TRACE(::testing::Message() << algo << " observed " << observed);
      test::check_resume_is_exact([](const Dims& d) { return std::make_unique<CpuBackend>(d, 2); }, p,
                                  find_trainer(algo), test::resume_options(algo), 100);
    }
  }
}

TEST(MaxentTrainers, ASettingTheyDoNotListChangesNothing) {
  const RandomProblem p = maxent_problem(3, 12, 12, 6, 21, false, true);
  TrainOptions base;
  base.c2 = 0.2;
  base.max_iterations = 4;
  for (const char* algo : kMaxentAlgos) {
    const TrainerInfo& t = find_trainer(algo);
    const std::vector<double> want = train(p, algo, base).w;
    for (const OptionSpec& s : trainer_options()) {
      if (t.takes(s.name)) continue;
      TrainOptions o = base;
      const std::string kind = s.kind;
      s.set(o, s.name == std::string("eta0") ? "0.0123"
               : s.name == std::string("line-search") ? "heuristic"
               : s.name == std::string("sampling")    ? "uniform"
               : kind == "integer" || kind == "seed"  ? "3"
               : kind.find(" | ") != std::string::npos ? kind.substr(kind.rfind(" | ") + 3)  // a choice: the last
                                                      : "0.5");
      EXPECT_EQ(train(p, algo, o).w, want) << algo << " changed with --" << s.name;
    }
  }
}

TEST(MaxentTrainers, FullRowsTrainTheDenseModel) {
  // A sparse layout listing every slot of every state row: the dense layout's weights, bit for bit.
  RandomProblem dense = maxent_problem(3, 10, 12, 6, 71, false, false), full = dense;
  full.dims.layout = test::random_layout(full.dims, 1.0, 1);
  TrainOptions o;
  o.c2 = 0.1;
  o.max_iterations = 6;
  for (const char* algo : kMaxentAlgos) {
    SCOPED_TRACE(algo);
    const std::vector<double> a = train(dense, algo, o).w, b = train(full, algo, o).w;
    EXPECT_TRUE(test::bitwise_equal(test::dense_weights(full.dims, b), a));
  }
}

TEST(MaxentTrainers, OverflowingValuesNeverGiveNonFiniteWeightsOrReports) {
  int errors = 0, finished = 0;
  for (double big : {1e300, 1e150, 1e20}) {
    RandomProblem p = maxent_problem(3, 20, 30, 6, 5, false, true);
    p.corpus.state_values[3] = big;
    for (const char* algo : kMaxentAlgos) {
      SCOPED_TRACE(::testing::Message() << algo << " value " << big);
      TrainOptions o;
      o.max_iterations = 30;
      o.c2 = 1.0;
      try {
        const Trained t = train(p, algo, o);
        for (double x : t.w) ASSERT_TRUE(std::isfinite(x));
        ++finished;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(algo) + ": the objective is "), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("the weights overflowed"), std::string::npos) << e.what();
        ++errors;
      }
    }
  }
  EXPECT_EQ(errors + finished, 12);
}

TEST(MaxentTrainers, RefuseCrfModelsAndL1) {
  const RandomProblem crf = test::random_problem(3, 10, 0, 10, 5, 1);  // transitions
  RandomProblem edges = test::random_problem(3, 10, 2, 10, 5, 2);        // edge attributes only
  edges.dims.transitions = false;
  for (const char* algo : kMaxentAlgos) {
    SCOPED_TRACE(algo);
    for (const RandomProblem* p : {&crf, static_cast<const RandomProblem*>(&edges)}) {
      try {
        train(*p, algo, TrainOptions{});
        ADD_FAILURE() << "trained a CRF";
      } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(std::string(algo) + " trains Maxent models (crfx train --type maxent), and this model is a CRF"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find(p == &crf ? "label transitions" : "2 edge attributes"), std::string::npos) << m;
      }
    }
    TrainOptions l1;
    l1.c1 = 0.5;
    try {
      train(maxent_problem(3, 10, 10, 5, 3, true, true), algo, l1);
      ADD_FAILURE() << "trained with c1";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("L1) is not supported; use owlqn"), std::string::npos) << e.what();
    }
  }
}

TEST(MaxentTrainers, IterativeScalingRefusesNegativeValuesAndCdTakesThem) {
  RandomProblem p = maxent_problem(3, 10, 10, 5, 8, false, true);
  // The first negative value: sentence 3, its second token, second item.
  const std::size_t token = p.corpus.sentence_offsets[2] + 1;
  ASSERT_LT(token, p.corpus.sentence_offsets[3]);
  const std::size_t item = p.corpus.state_offsets[token] + (p.corpus.state_offsets[token + 1] - p.corpus.state_offsets[token] > 1);
  p.corpus.state_values[item] = -0.25;
  p.corpus.state_values.back() = -3;  // a later one
  p.corpus.source_lines[2] = 57;
  for (const char* algo : {"gis", "iis", "scgis"}) {
    SCOPED_TRACE(algo);
    try {
      train(p, algo, TrainOptions{});
      ADD_FAILURE() << "trained on negative values";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(algo) + ": iterative scaling needs non-negative feature values, and token 2 of sentence 3, "
                                    "which starts at line 57, has attribute #" +
                    std::to_string(p.corpus.state_ids[item]) +
                    " with the value -0.25 (the first negative one): train with -a cd or lbfgs, which take any value");
    }
  }
  const Trained cd = train(p, "cd", tight(0.3));
  TrainOptions ref = tight(0.3);
  ref.epsilon = 1e-13;
  EXPECT_LT(rel(cd.f, train(p, "lbfgs", ref).f), 1e-9);
}

TEST(MaxentTrainers, RegisteredAsMaxentOnlyAndCpuOnly) {
  for (const char* algo : kMaxentAlgos) {
    const TrainerInfo& t = find_trainer(algo);
    EXPECT_TRUE(t.maxent_only);
    ASSERT_NE(t.cpu_only, nullptr);
    EXPECT_EQ(std::string(t.cpu_only), "iterative scaling and coordinate descent are sequential: CPU only");
    EXPECT_NE(std::string(t.summary).find("CPU only"), std::string::npos);
    EXPECT_TRUE(t.takes("c2"));
    EXPECT_TRUE(t.takes("max-iterations"));
    EXPECT_EQ(t.takes("max-linesearch"), std::string(algo) == "cd");
  }
  for (const char* crf_trainer : {"lbfgs", "owlqn", "sag", "ap"}) {
    EXPECT_FALSE(find_trainer(crf_trainer).maxent_only);
    EXPECT_EQ(find_trainer(crf_trainer).cpu_only, nullptr);
  }
}

TEST(MaxentTrainers, CrfTrainersTrainMaxentModelsThroughTheBackend) {
  const RandomProblem p = maxent_problem(4, 15, 20, 6, 29, true, false);  // dense: the transition block exists
  TrainOptions o;
  o.c2 = 0.2;
  o.max_iterations = 10;
  o.epochs = o.max_epochs = 3;
  for (const char* algo : {"lbfgs", "owlqn", "rprop", "sgd-l1", "sag", "saga", "adf", "ap"}) {
    SCOPED_TRACE(algo);
    TrainOptions oa = o;
    oa.c1 = std::string(algo) == "owlqn" ? 0.1 : 0.0;
    const Trained t = train(p, algo, oa);
    EXPECT_TRUE(std::isfinite(t.f));
    for (std::size_t k = p.dims.transition_offset(); k < p.dims.edge_offset(); ++k)
      ASSERT_EQ(t.w[k], 0.0) << "a transition weight moved";
  }
}

// ---- the CPU backend without transitions: O(L) per position ---------------------------------

TEST(MaxentBackend, IndependentPositionsMatchTheLogSpaceReference) {
  for (bool observed : {false, true}) {
    const RandomProblem p = maxent_problem(6, 14, 12, 9, 61 + observed, false, observed);
    const std::vector<double> w = state_weights(p.dims, 1.5, 3);
    CpuBackend fast(p.dims, 2), ref(p.dims, 2, /*log_space_only=*/true);
    auto cf = fast.upload(p.corpus);
    auto cr = ref.upload(p.corpus);
    auto wf = to_backend(fast, w), wr = to_backend(ref, w);
    auto gf = fast.vector(w.size()), gr = ref.vector(w.size());
    const SentenceSpan all = all_sentences(*cf);
    EXPECT_LT(rel(fast.evaluate(*cf, *wf, all, gf.get(), 1.0), ref.evaluate(*cr, *wr, all, gr.get(), 1.0)), 1e-13);
    const std::vector<double> a = to_host(fast, *gf), b = to_host(ref, *gr);
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-12) << k;
    const std::size_t N = p.corpus.num_tokens(), S = p.corpus.num_sentences(), L = p.dims.L;
    std::vector<double> mf(N * L), mr(N * L), zf(S), zr(S), zonly(S);
    fast.marginals(*cf, *wf, all, mf.data(), zf.data());
    ref.marginals(*cr, *wr, all, mr.data(), zr.data());
    fast.marginals(*cf, *wf, all, nullptr, zonly.data());
    for (std::size_t k = 0; k < mf.size(); ++k) EXPECT_NEAR(mf[k], mr[k], 1e-13);
    for (std::size_t s = 0; s < S; ++s) {
      EXPECT_LT(rel(zf[s], zr[s]), 1e-13);
      EXPECT_EQ(zf[s], zonly[s]);
    }
    // Viterbi is the arg-max per token (ties to the smallest label), its score the sum of maxima.
    std::vector<std::uint32_t> labels(N);
    std::vector<double> best(S);
    fast.viterbi(*cf, *wf, all, labels.data(), best.data());
    for (std::size_t s = 0; s < S; ++s) {
      double score = 0;
      for (std::size_t i = p.corpus.sentence_offsets[s]; i < p.corpus.sentence_offsets[s + 1]; ++i) {
        const std::vector<double> sc = token_scores(p, w, i);
        std::uint32_t arg = 0;
        for (std::uint32_t y = 1; y < L; ++y)
          if (sc[y] > sc[arg]) arg = y;
        EXPECT_EQ(labels[i], arg) << "token " << i;
        score += sc[arg];
      }
      EXPECT_NEAR(best[s], score, 1e-12);
    }
    // n-best (the general list Viterbi): path 0 is Viterbi's.
    std::vector<std::uint32_t> nb(3 * N);
    std::vector<double> ns(3 * S);
    fast.viterbi_nbest(*cf, *wf, all, 3, nb.data(), ns.data());
    std::size_t offset = 0;
    for (std::size_t s = 0; s < S; ++s) {
      const std::size_t T = p.corpus.length(s);
      for (std::size_t t = 0; t < T; ++t) EXPECT_EQ(nb[3 * offset + t], labels[offset + t]);
      EXPECT_NEAR(ns[3 * s], best[s], 1e-12);
      offset += T;
    }
  }
}

// ---- the model file ------------------------------------------------------------------------

Model maxent_model() {
  Model m;
  FeatureSpace& fs = m.features;
  fs.type = ModelType::maxent;
  fs.format = InputFormat::conll;
  fs.feature_columns = 2;
  fs.templ = FeatureTemplate::parse("U00:%x[0,0]\nU01:%x[0,1]\nB\nB01:%x[0,1]\n", "t");
  for (const char* l : {"B-NP", "I-NP", "O"}) fs.labels.add(l);
  for (const char* a : {"U00:the", "U00:dog", "U01:NN"}) fs.state_attrs.add(a);
  fs.labels.freeze();
  fs.state_attrs.freeze();
  fs.edge_attrs.freeze();
  m.weights = test::random_weights(fs.dims().num_weights(), 1.0, 4);
  const Dims d = fs.dims();
  for (std::size_t k = d.transition_offset(); k < d.edge_offset(); ++k) m.weights[k] = 0;
  return m;
}

void put_u32(std::string& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = char((v >> (8 * i)) & 0xff);
}

/// Writes the CRC section's checksum again over the patched bytes.
void reseal(std::string& b) {
  const std::size_t crc_at = b.size() - 16;
  put_u32(b, b.size() - 4,
          std::uint32_t(::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data()), uInt(crc_at))));
}

std::string load_error(const std::string& bytes) {
  const std::string path = test::temp_path("patched.model");
  test::write_text(path, bytes);
  try {
    load_model(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(MaxentModel, FileRecordsTheTypeAndRoundTrips) {
  const Model m = maxent_model();
  EXPECT_FALSE(m.features.dims().transitions);  // despite the template's B line
  EXPECT_EQ(m.features.dims().E, 0u);
  const std::string path = test::temp_path("maxent.model");
  save_model(m, path);
  const Model back = load_model(path);
  EXPECT_EQ(back.features.type, ModelType::maxent);
  EXPECT_FALSE(back.features.dims().transitions);
  EXPECT_EQ(back.weights, m.weights);
  EXPECT_EQ(serialize_model(back), test::read_text(path));
  const std::string dump = dump_model(back);
  EXPECT_NE(dump.find("MODEL = {\n  type: maxent\n  format: conll\n"), std::string::npos) << dump;
  EXPECT_NE(dump.find("  transitions: no\n"), std::string::npos) << dump;
  EXPECT_NE(dump.find("TRANSITIONS = {\n}\n"), std::string::npos) << dump;

  // A CRF's file has no TYPE section (its bytes are what they were before model types).
  Model crf = m;
  crf.features.type = ModelType::crf;
  ASSERT_TRUE(crf.features.dims().transitions);
  const std::string crf_bytes = serialize_model(crf);
  EXPECT_EQ(crf_bytes.find("TYPE"), std::string::npos);
  EXPECT_NE(dump_model(crf).find("MODEL = {\n  type: crf\n"), std::string::npos);
  EXPECT_NE(test::read_text(path).find("TYPE"), std::string::npos);
  EXPECT_EQ(fingerprint(crf.features) == fingerprint(m.features), false);
}

TEST(MaxentModel, DamagedTypeSectionsAreRefused) {
  const std::string good = serialize_model(maxent_model());
  const std::size_t type_at = good.find("TYPE");
  ASSERT_NE(type_at, std::string::npos);
  std::string b = good;
  put_u32(b, type_at + 12, 7);
  reseal(b);
  EXPECT_NE(load_error(b).find("section TYPE: unknown model type 7"), std::string::npos) << load_error(b);
  // HEAD: magic 8, version 4, tag 4, length 8, format 4, columns 8, L, A, E 4 each, transitions.
  b = good;
  put_u32(b, 8 + 4 + 12 + 4 + 8 + 12, 1);
  reseal(b);
  EXPECT_NE(load_error(b).find("section TYPE: a Maxent model with transitions"), std::string::npos) << load_error(b);
}

// ---- crfx train --type maxent ----------------------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }
const std::string kTrain = test::data_path("conll2000.train300.txt");
const std::string kTest = test::data_path("conll2000.test100.txt");
const std::string kTemplate = test::data_path("chunking.template");

double f1_of(const std::string& eval_output) {
  const auto pos = eval_output.find("FB1:");
  return pos == std::string::npos ? -1 : std::stod(eval_output.substr(pos + 4));
}

TEST(MaxentCli, TrainTagEvalDump) {
  const std::string crfx = test::crfx_binary();
  for (const char* algo : {"lbfgs", "cd"}) {
    SCOPED_TRACE(algo);
    const std::string m = test::temp_path(std::string(algo) + ".model"), tagged = test::temp_path("t.tagged");
    std::string out;
    ASSERT_EQ(test::run(crfx + " train " + q(kTrain) + " -t " + q(kTemplate) + " --type maxent -a " + algo +
                            " --c2 0.05 --threads 2 --max-iterations 40 -m " + q(m),
                        &out),
              0)
        << out;
    EXPECT_NE(out.find("crfx train: note: a Maxent model ignores the template's B line (it has no "
                       "transitions and no edge features)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(" 0 edge attributes, "), std::string::npos) << out;
    ASSERT_EQ(test::run(crfx + " tag " + q(kTest) + " -m " + q(m) + " -q -o " + q(tagged), &out), 0) << out;
    ASSERT_EQ(test::run(crfx + " eval " + q(tagged), &out), 0) << out;
    // Maxent on 300 sentences: about 88 (L-BFGS at its optimum: 88.23; the CRF: 89.07).
    EXPECT_GT(f1_of(out), 86.5) << out;
    EXPECT_LT(f1_of(out), 90.0) << out;
    ASSERT_EQ(test::run(crfx + " dump " + q(m), &out), 0);
    EXPECT_NE(out.find("MODEL = {\n  type: maxent\n"), std::string::npos) << out.substr(0, 300);
    EXPECT_NE(out.find("  transitions: no\n"), std::string::npos);
    EXPECT_NE(out.find("TRANSITIONS = {\n}\n"), std::string::npos);
    // p(ŷ | x) and n-best work on it too.
    ASSERT_EQ(test::run(crfx + " tag " + q(kTest) + " -m " + q(m) + " -q -p -n 2 | head -3", &out), 0) << out;
    EXPECT_EQ(out.rfind("# 0 ", 0), 0u) << out;
  }
}

TEST(MaxentCli, CheckpointAndResumeGiveTheUninterruptedModel) {
  const std::string crfx = test::crfx_binary();
  for (const char* algo : {"gis", "cd"}) {
    SCOPED_TRACE(algo);
    const std::string base = crfx + " train " + q(kTrain) + " -t " + q(kTemplate) + " --type maxent -a " + algo +
                             " --c2 0.05 --threads 2 -q";
    const std::string full = test::temp_path("full.model"), part = test::temp_path("part.model"),
                      resumed = test::temp_path("resumed.model"), ckpt = test::temp_path("run.ckpt");
    std::string out;
    ASSERT_EQ(test::run(base + " --max-iterations 8 -m " + q(full), &out), 0) << out;
    ASSERT_EQ(test::run(base + " --max-iterations 8 --checkpoint " + q(ckpt) + " --checkpoint-every 3 -m " + q(part),
                        &out),
              0)
        << out;
    // The checkpoint of iteration 6 continues to the same model.
    ASSERT_EQ(test::run(base + " --max-iterations 8 --resume " + q(ckpt) + " -m " + q(resumed), &out), 0) << out;
    EXPECT_EQ(test::read_text(resumed), test::read_text(full));
    // A checkpoint of a CRF run is refused for a Maxent run (the features differ).
    ASSERT_EQ(test::run(crfx + " train " + q(kTrain) + " -t " + q(kTemplate) + " --max-iterations 2 -q --checkpoint " +
                            q(ckpt) + " --checkpoint-every 1 -m " + q(part),
                        &out),
              0)
        << out;
    EXPECT_EQ(test::run(base + " --max-iterations 8 --resume " + q(ckpt) + " -m " + q(resumed), &out), 1) << out;
    EXPECT_NE(out.find("--algo"), std::string::npos) << out;
  }
}

TEST(MaxentCli, CrfsuiteDataAndTheDefaultType) {
  const std::string crfx = test::crfx_binary();
  const std::string m = test::temp_path("cs.model"), tagged = test::temp_path("cs.tagged");
  std::string out;
  ASSERT_EQ(test::run(crfx + " train " + q(test::data_path("conll2000.train60.crfsuite.txt")) +
                          " --format crfsuite --type maxent -a scgis --c2 0.05 --max-iterations 10 -q -m " + q(m),
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(crfx + " dump " + q(m) + " | head -4", &out), 0);
  EXPECT_EQ(out, "MODEL = {\n  type: maxent\n  format: crfsuite\n  labels: 14\n") << out;
  ASSERT_EQ(test::run(crfx + " tag " + q(test::data_path("conll2000.test30.crfsuite.txt")) + " -m " + q(m) +
                          " -q -o " + q(tagged),
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(crfx + " eval " + q(tagged), &out), 0) << out;
  EXPECT_GT(f1_of(out), 70) << out;
  // --type crf is the default: a CRF with transitions.
  ASSERT_EQ(test::run(crfx + " train " + q(test::data_path("conll2000.train60.crfsuite.txt")) +
                          " --format crfsuite --max-iterations 3 -q -m " + q(m),
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(crfx + " dump " + q(m) + " | head -2", &out), 0);
  EXPECT_EQ(out, "MODEL = {\n  type: crf\n") << out;
}

TEST(MaxentCli, RefusalsAndTheAlgorithmList) {
  const std::string crfx = test::crfx_binary();
  const std::string base = crfx + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(test::temp_path("x.model"));
  std::string out;
  EXPECT_EQ(test::run(base + " -a cd", &out), 2);
  EXPECT_EQ(out, "crfx train: -a cd trains Maxent models: add --type maxent (or use lbfgs, owlqn, … for a CRF)\n");
  EXPECT_EQ(test::run(base + " --type maxent -a gis --device cuda", &out), 2);
  EXPECT_EQ(out,
            "crfx train: -a gis: iterative scaling and coordinate descent are sequential: CPU only; use --device cpu "
            "(or auto)\n");
  EXPECT_EQ(test::run(base + " --type hmm", &out), 2);
  EXPECT_EQ(out, "crfx train: --type: unknown model type 'hmm' (known: crf, maxent)\n");
  EXPECT_EQ(test::run(base + " --type maxent -a iis --c1 1", &out), 1);
  EXPECT_NE(out.find("iis minimises NLL + c2·‖w‖² (the objective of Huang, Hsieh, Chang & Lin 2009): c1 = 1 (L1) "
                     "is not supported; use owlqn"),
            std::string::npos)
      << out;
  // CRFsuite attributes with a negative value: named by iterative scaling, taken by cd.
  const std::string data = test::temp_path("neg.txt");
  test::write_text(data, "B-NP\ta\tb:2\nI-NP\ta:0.5\tc\n\nO\tb\nB-NP\ta\tc:-1.5\n\n");
  const std::string cs = crfx + " train " + q(data) + " --format crfsuite --type maxent -q -m " + q(test::temp_path("n.model"));
  EXPECT_EQ(test::run(cs + " -a gis", &out), 1);
  EXPECT_EQ(out,
            "crfx train: gis: iterative scaling needs non-negative feature values, and token 2 of sentence 2, which "
            "starts at line 4, has attribute #2 with the value -1.5 (the first negative one): train with -a cd or "
            "lbfgs, which take any value\n");
  EXPECT_EQ(test::run(cs + " -a cd", &out), 0) << out;
  EXPECT_EQ(test::run(crfx + " train --algo list", &out), 0);
  for (const char* algo : kMaxentAlgos)
    EXPECT_NE(out.find("  " + std::string(algo) + "\tMaxent (--type maxent): "), std::string::npos) << algo << "\n" << out;
  EXPECT_NE(out.find("CPU only: iterative scaling and coordinate descent are sequential\n    settings: "
                     "--max-iterations 0 --period 10 --delta 1e-05 --epsilon 1e-05 --max-linesearch 20\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace crfx
