// CRFsuite's l2sgd (host/optim/l2sgd.cpp): two epochs on one sentence against a hand computation
// (paths enumerated); whole runs, calibration included, against CRFsuite's train_l2sgd.c written
// plainly (w = decay·v as CRFsuite keeps it, dense gradients, the same shuffles) — from zero and
// from a warm start whose first decay factor is negative; the L-BFGS optimum of the same objective
// reached; the model is the best epoch's; bit-exact resume at epoch reports and inside epochs;
// same seed, same model; settings refused; `crfx learn -a l2sgd` with CRFsuite's -p settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/sgd_l1.hpp"
#include "random_problem.hpp"
#include "trainer_check.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::expect_close;
using test::learnable;
using test::random_problem;
using test::two_tokens;

BackendPtr cpu(const Dims& d) { return std::make_unique<CpuBackend>(d, 2); }

struct Trained {
  std::vector<double> w;
  double f = 0;
  std::vector<Progress> reports;
  std::vector<std::vector<double>> weights;  // handed to each report
  std::string stop_reason;
};

/// `algo` trained on p from w0 (zeros when empty) with c1, c2 and `o`, on the CPU with `threads`.
Trained train(const char* algo, const test::RandomProblem& p, double c1, double c2, const TrainOptions& o,
              const std::vector<double>& w0 = {}, unsigned threads = 1) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, c1, c2);
  auto w = w0.empty() ? b.vector(p.dims.num_weights()) : to_backend(b, w0);
  auto trainer = find_trainer(algo).make();
  Trained r;
  r.f = trainer->train(obj, *w, o, [&](const Progress& pr, const Vector& x) {
    r.reports.push_back(pr);
    r.weights.push_back(to_host(b, x));
    return true;
  });
  r.w = to_host(b, *w);
  r.stop_reason = trainer->stop_reason();
  return r;
}

/// Σ NLL + c2‖w‖² at w, on a fresh backend.
double objective(const test::RandomProblem& p, const std::vector<double>& w, double c2) {
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  double f = b.evaluate(*corpus, *to_backend(b, w), all_sentences(*corpus), nullptr, 1.0);
  for (double x : w) f += c2 * x * x;
  return f;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// ---- CRFsuite's train_l2sgd.c, written plainly ----------------------------------------------

struct Naive {
  std::vector<double> w;  // the best epoch's
  double t0 = 0, f = 0;   // the calibrated offset, the best epoch's loss
  std::vector<double> losses;  // every epoch's
};

/// CRFsuite's l2sgd_calibration and l2sgd on the host, as train_l2sgd.c writes them: the weights
/// kept as decay·v, decay ← decay·(1 − η·λ) then gain = η/decay, the gradient (the backend's dense
/// evaluate, one sentence) at decay·v, v folded at the epoch's end; crfx's shuffles (EpochShuffler:
/// one for the calibration, one per epoch). From w0 (CRFsuite: zero).
Naive naive(const test::RandomProblem& p, const TrainOptions& o, double c2, const std::vector<double>& w0 = {}) {
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t K = p.dims.num_weights(), n = p.corpus.num_sentences();
  const double N = double(n), lambda = 2.0 * c2 / N;
  const std::vector<double> start = w0.empty() ? std::vector<double>(K, 0.0) : w0;
  auto norm2 = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return s;
  };
  auto nll = [&](const std::vector<double>& x, std::uint32_t id, std::vector<double>* g) {
    auto xv = to_backend(b, x);
    auto gv = b.vector(K);
    const double f = b.evaluate(*corpus, *xv, {&id, 1}, g ? gv.get() : nullptr, 1.0);
    if (g) *g = to_host(b, *gv);
    return f;
  };
  // One call of CRFsuite's l2sgd() loop body over m sentences: Σ loss, v folded.
  auto pass = [&](std::vector<double>& v, const std::uint32_t* ids, std::size_t m, double t0, double& t) {
    double decay = 1, sum = 0;
    std::vector<double> x(K), g;
    for (std::size_t i = 0; i < m; ++i) {
      const double eta = 1 / (lambda * (t0 + t));
      decay *= (1.0 - eta * lambda);
      const double gain = eta / decay;
      for (std::size_t k = 0; k < K; ++k) x[k] = decay * v[k];
      sum += nll(x, ids[i], &g);
      for (std::size_t k = 0; k < K; ++k) v[k] -= gain * g[k];
      t += 1;
    }
    for (double& y : v) y *= decay;
    return sum;
  };
  EpochShuffler shuffler(n, o.seed);
  const std::vector<std::uint32_t> cal = shuffler.next();
  const std::size_t S = std::min(n, std::size_t(o.calibration_samples));
  double init = 0;
  for (std::size_t i = 0; i < S; ++i) init += nll(start, cal[i], nullptr);
  init += 0.5 * lambda * norm2(start) * double(S);
  int num = o.calibration_candidates, trials = 1;
  bool dec = false;
  double eta = o.calibration_eta, best_eta = eta, best_loss = DBL_MAX;
  while (num > 0 || !dec) {
    std::vector<double> v = start;
    double t = 0;
    double loss = pass(v, cal.data(), S, 1.0 / (lambda * eta), t);
    loss += 0.5 * lambda * norm2(v) * double(S);
    const bool ok = std::isfinite(loss) && loss < init;
    if (ok) --num;
    if (std::isfinite(loss) && loss < best_loss) {
      best_loss = loss;
      best_eta = eta;
    }
    if (!dec) {
      if (ok && 0 < num) {
        eta *= o.calibration_rate;
      } else {
        dec = true;
        num = o.calibration_candidates;
        eta = o.calibration_eta / o.calibration_rate;
      }
    } else {
      eta /= o.calibration_rate;
    }
    ++trials;
    if (o.calibration_max_trials <= trials) break;
  }
  Naive r;
  r.t0 = 1.0 / (lambda * best_eta);
  std::vector<double> v = start, pf(std::size_t(std::max(o.period, 1)));
  double t = 0;
  r.f = DBL_MAX;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const std::vector<std::uint32_t> perm = shuffler.next();
    double loss = pass(v, perm.data(), n, r.t0, t);
    loss += 0.5 * lambda * norm2(v) * N;
    r.losses.push_back(loss);
    if (loss < r.f) {
      r.f = loss;
      r.w = v;
    }
    const double improvement =
        o.period > 0 && o.period < epoch ? (pf[std::size_t((epoch - 1) % o.period)] - loss) / loss : o.delta;
    if (o.period > 0) pf[std::size_t((epoch - 1) % o.period)] = loss;
    if (improvement < o.delta) break;
  }
  return r;
}

// ---- two steps by hand -----------------------------------------------------------------------

/// −log p((1, 1)) of two_tokens at w and its gradient E[f] − f(gold), from the four paths.
double hand_nll(const std::vector<double>& w, std::vector<double>& g) {
  double score[2][2], z = 0;
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      score[a][c] = w[std::size_t(a)] + w[std::size_t(2 + c)] + w[std::size_t(4 + 2 * a + c)];
      z += std::exp(score[a][c]);
    }
  g.assign(8, 0.0);
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 2; ++c) {
      const double pr = std::exp(score[a][c]) / z;
      g[std::size_t(a)] += pr;
      g[std::size_t(2 + c)] += pr;
      g[std::size_t(4 + 2 * a + c)] += pr;
    }
  g[1] -= 1;
  g[3] -= 1;
  g[7] -= 1;
  return std::log(z) - score[1][1];
}

TEST(L2sgd, TwoStepsEqualTheHandComputation) {
  const auto p = two_tokens();
  // N = 1, c2 = 0.5: λ = 2·c2/N = 1. One calibration trial (max_trials 2: CRFsuite runs one) at
  // η = 0.25 gives t0 = 1/(λ·η) = 4; step t (epoch t + 1) has η_t = 1/(t0 + t) and decays by
  // 1 − η_t: epoch 1 η = 1/4, factor 3/4; epoch 2 η = 1/5, factor 4/5.
  const std::vector<double> w0 = {0.5, -0.2, 0.3, 0.1, 0.1, -0.4, 0.2, 0.05};
  TrainOptions o;
  o.epochs = 2;
  o.calibration_eta = 0.25;
  o.calibration_max_trials = 2;
  o.period = 0;
  const Trained r = train("l2sgd", p, 0.0, 0.5, o, w0);
  std::vector<double> w = w0, g;
  double best = DBL_MAX;
  std::vector<double> best_w;
  const double etas[2] = {0.25, 0.2};
  for (int e = 0; e < 2; ++e) {
    for (double& x : w) x *= 1.0 - etas[e];
    const double loss = hand_nll(w, g);
    for (std::size_t j = 0; j < 8; ++j) w[j] -= etas[e] * g[j];
    double norm2 = 0;
    for (double x : w) norm2 += x * x;
    const double f = loss + 0.5 * norm2;  // the epoch's loss: its NLL + c2·‖w‖²
    ASSERT_EQ(r.reports.size(), 2u);
    EXPECT_NEAR(r.reports[std::size_t(e)].objective, f, 1e-14) << "epoch " << e + 1;
    EXPECT_NEAR(r.reports[std::size_t(e)].step, etas[e], 1e-16);
    for (std::size_t j = 0; j < 8; ++j) EXPECT_NEAR(r.weights[std::size_t(e)][j], w[j], 1e-15) << "epoch " << e + 1;
    if (f < best) {
      best = f;
      best_w = w;
    }
  }
  EXPECT_EQ(r.f, r.reports[r.reports[1].objective < r.reports[0].objective ? 1 : 0].objective);
  for (std::size_t j = 0; j < 8; ++j) EXPECT_NEAR(r.w[j], best_w[j], 1e-15) << "the best epoch's weight " << j;
  EXPECT_EQ(r.stop_reason, "--epochs 2 reached; the rate calibrated to eta 0.25 (t0 4)");
  // Passes: the calibration's L0 and its trial (one sentence each), then one per epoch.
  EXPECT_DOUBLE_EQ(r.reports[0].passes, 3.0);
  EXPECT_DOUBLE_EQ(r.reports[1].passes, 4.0);
}

// ---- whole runs against CRFsuite's algorithm -------------------------------------------------

TEST(L2sgd, RunsEqualCrfsuitesAlgorithmWrittenPlainly) {
  const auto p = learnable(4, 25, 2, 30, 8, 51);
  struct Case {
    double c2;
    int samples, period;
    double delta;
  };
  // All the data in the calibration, or its first 12 sentences; stopped by the epochs, or by the
  // delta test over 2 epochs.
  for (const Case& k : {Case{0.5, 1000, 10, 1e-6}, Case{2.0, 12, 10, 1e-6}, Case{0.5, 1000, 2, 0.06}}) {
    SCOPED_TRACE(::testing::Message() << "c2 " << k.c2 << " samples " << k.samples << " period " << k.period
                                      << " delta " << k.delta);
    TrainOptions o;
    o.epochs = 8;
    o.seed = 7;
    o.calibration_samples = k.samples;
    o.period = k.period;
    o.delta = k.delta;
    const Naive want = naive(p, o, k.c2);
    const Trained got = train("l2sgd", p, 0.0, k.c2, o);
    ASSERT_EQ(got.reports.size(), want.losses.size());
    for (std::size_t e = 0; e < want.losses.size(); ++e)
      EXPECT_NEAR(got.reports[e].objective, want.losses[e], 1e-10 * want.losses[e]) << "epoch " << e + 1;
    EXPECT_NEAR(got.f, want.f, 1e-10 * want.f);
    expect_close(got.w, want.w, 1e-10);
    EXPECT_NE(got.stop_reason.find("(t0 " + number(want.t0) + ")"), std::string::npos)
        << got.stop_reason << " vs t0 " << want.t0;
    if (k.period == 2) {
      EXPECT_LT(want.losses.size(), 8u) << "the delta test should stop this run";
      EXPECT_NE(got.stop_reason.find("over the last 2 iterations, less than --delta 0.06"), std::string::npos)
          << got.stop_reason;
    }
  }
}

TEST(L2sgd, AWarmStartWithANegativeFirstFactorEqualsCrfsuitesArithmetic) {
  // One trial at η = 2/λ: t0 = 0.5, so the first step's factor 1 − η·λ is −1 (CRFsuite's decay
  // turns negative), applied to every weight at once; then 1 − 1/1.5 and on, lazily.
  const auto p = random_problem(3, 15, 1, 20, 6, 53);
  const double c2 = 0.4, lambda = 2 * c2 / 20.0;
  TrainOptions o;
  o.epochs = 3;
  o.calibration_eta = 2 / lambda;
  o.calibration_max_trials = 1;
  o.period = 0;
  const std::vector<double> w0 = test::random_weights(p.dims.num_weights(), 0.3, 5);
  const Naive want = naive(p, o, c2, w0);
  EXPECT_EQ(want.t0, 0.5);
  const Trained got = train("l2sgd", p, 0.0, c2, o, w0);
  ASSERT_EQ(got.reports.size(), 3u);
  for (std::size_t e = 0; e < 3; ++e)
    EXPECT_NEAR(got.reports[e].objective, want.losses[e], 1e-10 * want.losses[e]) << "epoch " << e + 1;
  expect_close(got.w, want.w, 1e-10);
}

TEST(L2sgd, ReachesTheLbfgsOptimumOfTheSameObjective) {
  const auto p = learnable(4, 30, 2, 40, 8, 55);
  const double c2 = 1.0;
  TrainOptions tight;
  tight.epsilon = 1e-10;
  tight.delta = 0;
  tight.period = 0;
  tight.max_iterations = 2000;
  tight.max_linesearch = 40;
  const Trained ref = train("lbfgs", p, 0.0, c2, tight);
  TrainOptions o;
  o.epochs = 300;
  o.delta = 1e-7;  // CRFsuite's test over 10 epochs
  const Trained r = train("l2sgd", p, 0.0, c2, o);
  // Within 1e-4 of the optimum, relatively (5.5e-6 when written: the delta test stops it after
  // 134 epochs).
  const double f = objective(p, r.w, c2);
  RecordProperty("relative_gap", number((f - ref.f) / ref.f));
  RecordProperty("epochs", int(r.reports.size()));
  EXPECT_LT((f - ref.f) / ref.f, 1e-4) << f << " vs the L-BFGS optimum " << ref.f << " after "
                                       << r.reports.size() << " epochs; " << r.stop_reason;
  std::printf("l2sgd: %.10g after %zu epochs, L-BFGS %.10g: relative gap %.3g; %s\n", f, r.reports.size(), ref.f,
              (f - ref.f) / ref.f, r.stop_reason.c_str());
  // Its loss (each sentence's NLL when its step saw it) is near the objective at the end.
  EXPECT_NEAR(r.f, f, 1e-2 * f);
}

TEST(L2sgd, TheModelIsTheBestEpochs) {
  // With c1 the reported loss grows with ‖w‖₁ while the steps ignore it: a late epoch is worse.
  const auto p = random_problem(4, 25, 2, 30, 8, 57);
  TrainOptions o;
  o.epochs = 6;
  o.period = 0;
  const Trained r = train("l2sgd", p, 5.0, 0.5, o);
  ASSERT_EQ(r.reports.size(), 6u);
  std::size_t best = 0;
  for (std::size_t e = 1; e < 6; ++e)
    if (r.reports[e].objective < r.reports[best].objective) best = e;
  ASSERT_NE(best, 5u) << "the last epoch is the best: no test of the choice";
  EXPECT_EQ(r.f, r.reports[best].objective);
  EXPECT_TRUE(test::bitwise_equal(r.w, r.weights[best]));
}

// ---- checkpoints and determinism ---------------------------------------------------------------

TEST(L2sgd, ResumesBitExactAtEpochsAndInsideThem) {
  const auto p = random_problem(4, 30, 2, 23, 8, 17);
  const std::size_t n = p.corpus.num_sentences();
  struct Case {
    double c1;
    int period;
    double delta;
  };
  // The last epoch the best (its weights are w's at its report), or an earlier one (c1: the
  // best epoch's weights saved apart); the run ended by --epochs, or by the delta test.
  for (const Case& k : {Case{0, 0, 0}, Case{5.0, 0, 0}, Case{0, 1, 0.3}}) {
    SCOPED_TRACE(::testing::Message() << "c1 " << k.c1 << " period " << k.period << " delta " << k.delta);
    TrainOptions o;
    o.c1 = k.c1;
    o.c2 = 0.3;
    o.epochs = 4;
    o.period = k.period;
    o.delta = k.delta;
    test::check_resume_is_exact(cpu, p, find_trainer("l2sgd"), o, 5);
    if (k.period != 0) continue;  // (check_stop_within_is_exact expects every epoch to run)
    // Not after the first sentence: the decay comes before a step, so from w = 0 no weight the
    // step moved has a decay pending there, and the model is the working weights (which the check
    // takes for a model left without its decay).
    std::vector<std::size_t> stops = test::within_stops("l2sgd", o, n);
    ASSERT_EQ(stops.front(), 1u);
    stops.front() = 2;
    test::check_stop_within_is_exact(cpu, p, find_trainer("l2sgd"), o, stops);
  }
}

TEST(L2sgd, SameSeedSameModelAnyThreadCountAndTheSeedMatters) {
  const auto p = random_problem(4, 30, 3, 30, 7, 37);
  TrainOptions o;
  o.epochs = 3;
  const Trained a = train("l2sgd", p, 0.0, 1.0, o, {}, 1), b = train("l2sgd", p, 0.0, 1.0, o, {}, 1),
                c = train("l2sgd", p, 0.0, 1.0, o, {}, 3);
  EXPECT_TRUE(test::bitwise_equal(a.w, b.w));
  EXPECT_TRUE(test::bitwise_equal(a.w, c.w));
  EXPECT_EQ(a.f, c.f);
  o.seed = 2;
  EXPECT_NE(train("l2sgd", p, 0.0, 1.0, o).w, a.w) << "the seed must matter";
}

// ---- settings --------------------------------------------------------------------------------

TEST(L2sgd, BadSettingsAndLossesAreRefused) {
  const auto p = random_problem(3, 10, 0, 8, 5, 3);
  auto error = [&](double c2, const TrainOptions& o, SequenceLoss loss = SequenceLoss::seq_log) {
    return test::error_text([&] {
      CpuBackend b(p.dims, 1);
      auto corpus = b.upload(p.corpus);
      Objective obj(b, *corpus, 0.0, c2, loss);
      auto w = b.vector(p.dims.num_weights());
      find_trainer("l2sgd").make()->train(obj, *w, o, nullptr);
    });
  };
  const TrainOptions d;
  EXPECT_NE(error(0.0, d).find("l2sgd: c2 must be a finite number > 0"), std::string::npos);
  TrainOptions o = d;
  o.epochs = 0;
  EXPECT_EQ(error(1.0, o), "l2sgd: the number of epochs must be ≥ 1 (got 0)");
  o = d;
  o.calibration_eta = -1;
  EXPECT_EQ(error(1.0, o), "l2sgd: calibration_eta must be a finite number > 0 (got -1)");
  o = d;
  o.calibration_rate = 0;
  EXPECT_EQ(error(1.0, o), "l2sgd: calibration_rate must be a finite number > 0 (got 0)");
  o = d;
  o.calibration_samples = 0;
  EXPECT_EQ(error(1.0, o), "l2sgd: calibration_samples must be ≥ 1 (got 0)");
  o = d;
  o.calibration_candidates = 0;
  EXPECT_EQ(error(1.0, o), "l2sgd: calibration_candidates must be ≥ 1 (got 0)");
  o = d;
  o.calibration_max_trials = 0;
  EXPECT_EQ(error(1.0, o), "l2sgd: calibration_max_trials must be ≥ 1 (got 0)");
  EXPECT_EQ(error(1.0, d, SequenceLoss::point_log), loss_refusal(find_trainer("l2sgd"), SequenceLoss::point_log));
  EXPECT_NE(loss_refusal(find_trainer("l2sgd"), SequenceLoss::seq_exp).find("--loss seq-log only, not seq-exp"),
            std::string::npos);
  // The settings as crfx train names them, with CRFsuite's defaults.
  for (const char* name : {"calibration-eta", "calibration-rate", "calibration-samples", "calibration-candidates",
                           "calibration-max-trials"}) {
    EXPECT_TRUE(find_trainer("l2sgd").takes(name)) << name;
    EXPECT_FALSE(find_trainer("sgd-l1").takes(name)) << name;
  }
  EXPECT_EQ(find_option("calibration-eta")->get(d), "0.1");
  EXPECT_EQ(find_option("calibration-rate")->get(d), "2");
  EXPECT_EQ(find_option("calibration-samples")->get(d), "1000");
  EXPECT_EQ(find_option("calibration-candidates")->get(d), "10");
  EXPECT_EQ(find_option("calibration-max-trials")->get(d), "20");
  EXPECT_THROW(find_option("calibration-rate")->set(o, "0"), Error);
  EXPECT_THROW(find_option("calibration-max-trials")->set(o, "0"), Error);
}

// ---- the command line ------------------------------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(L2sgd, CrfsuiteLearnTrainsL2sgdWithItsSettings) {
  const std::string data = test::temp_path("l2sgd-learn.crfsuite");
  test::write_text(data,
                   "B-NP\tw=He\tpos=PRP\nB-VP\tw=reckons\tpos=VBZ\nB-NP\tw=the\tpos=DT\nI-NP\tw=deficit\tpos=NN\n\n"
                   "B-NP\tw=She\tpos=PRP\nB-VP\tw=sees\tpos=VBZ\nB-NP\tw=a\tpos=DT\nI-NP\tw=cat\tpos=NN\n\n");
  const std::string model = test::temp_path("l2sgd-learn.model");
  std::string out;
  ASSERT_EQ(test::run(test::crfx_binary() + " learn " + q(data) + " -m " + q(model) +
                          " -a l2sgd -p c2=0.5 -p calibration.eta=0.2 -p calibration.rate=3 -p calibration.samples=1 "
                          "-p calibration.candidates=2 -p calibration.max_trials=4 -p max_iterations=3 -p period=2 "
                          "-p delta=1e-6",
                      &out),
            0)
      << out;
  for (const char* note : {"-p calibration.eta=0.2 is --calibration-eta 0.2", "-p calibration.rate=3 is "
                           "--calibration-rate 3", "-p calibration.samples=1 is --calibration-samples 1",
                           "-p calibration.candidates=2 is --calibration-candidates 2", "-p calibration.max_trials=4 "
                           "is --calibration-max-trials 4", "-p max_iterations=3 is --epochs 3", "-p period=2 is "
                           "--period 2"})
    EXPECT_NE(out.find(note), std::string::npos) << note << "\n" << out;
  EXPECT_EQ(out.find("by default (CRFsuite's l2sgd"), std::string::npos) << out;
  // CRFsuite's defaults differ from crfx's: said in a note.
  ASSERT_EQ(test::run(test::crfx_binary() + " learn " + q(data) + " -m " + q(model) + " -a l2sgd -p epsilon=1 2>&1",
                      &out),
            2)
      << out;  // epsilon is not l2sgd's
  ASSERT_EQ(test::run(test::crfx_binary() + " learn " + q(data) + " -m " + q(model) + " -a l2sgd", &out), 0) << out;
  EXPECT_NE(out.find("-a l2sgd runs --epochs 30 by default (CRFsuite's l2sgd: max_iterations=1000)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("-a l2sgd stops at --delta 1e-05 by default (CRFsuite's l2sgd: delta=1e-6)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("the rate calibrated to eta"), std::string::npos) << out;
  // The list names it and its settings.
  ASSERT_EQ(test::run(test::crfx_binary() + " train --algo list", &out), 0) << out;
  for (const char* name : {"l2sgd", "calibration-eta", "calibration-max-trials"})
    EXPECT_NE(out.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace crfx
