// Sequence boosting (`-a boost`, host/optim/boost.cpp): the feature bounds, the step, the round's
// r = ∇H/H and log H, and the whole trainer's rounds against brute-force enumeration of every
// label sequence of tiny problems; determinism; the overflow path; the incremental rounds (the
// sentence index, against full rounds, the cancellation case, checkpoints); the CLI end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/boost.hpp"
#include "optim/exp_loss.hpp"
#include "boost_brute.hpp"
#include "checkpoint_check.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::RandomProblem;
using test::random_problem;
using namespace test::boost_brute;

// ---- the pieces --------------------------------------------------------------------------------

TEST(Boost, FeatureBoundsAreTheExtremesOverEveryLabelSequence) {
  for (std::uint32_t L : {2u, 3u})
    for (int layout : {0, 1, 2})
      for (std::uint64_t seed : {1u, 2u, 3u}) {
        SCOPED_TRACE(::testing::Message() << "L " << L << " layout " << layout << " seed " << seed);
        const RandomProblem p = tiny(L, seed, layout);
        const boost::Bounds got = boost::feature_bounds(p.corpus, p.dims), want = brute_bounds(p);
        ASSERT_EQ(got.upper.size(), want.upper.size());
        std::size_t moving = 0;
        for (std::size_t k = 0; k < want.upper.size(); ++k) {
          EXPECT_NEAR(got.upper[k], want.upper[k], 1e-12) << "weight " << k;
          EXPECT_NEAR(got.lower[k], want.lower[k], 1e-12) << "weight " << k;
          moving += want.upper[k] > want.lower[k];
        }
        EXPECT_GT(moving, want.upper.size() / 3);
      }
}

TEST(Boost, BigramRangeMatchesEnumeration) {
  // Longer chains than the tiny problems have, several firing patterns, l′ = l and l′ ≠ l.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> v(-1.5, 1.5);
  for (std::size_t L : {2u, 3u, 4u})
    for (std::size_t T : {2u, 4u, 6u})
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<std::pair<std::size_t, double>> fires;
        for (std::size_t t = 1; t < T; ++t)
          if (rng() % 3) fires.emplace_back(t, trial == 0 ? 1.0 : v(rng));
        for (std::size_t a = 0; a < L; ++a)
          for (std::size_t b = 0; b < L; ++b) {
            double mx = fires.empty() ? 0 : -1e300, mn = fires.empty() ? 0 : 1e300;
            if (!fires.empty())
              each_sequence(T, L, [&](const std::vector<std::size_t>& y) {
                double s = 0;
                for (const auto& [t, x] : fires) s += (y[t - 1] == a && y[t] == b) ? x : 0.0;
                mx = std::max(mx, s);
                mn = std::min(mn, s);
              });
            const auto [gx, gn] = boost::bigram_range(fires, a, b, L);
            EXPECT_NEAR(gx, mx, 1e-12) << "L " << L << " T " << T << " (" << a << "," << b << ")";
            EXPECT_NEAR(gn, mn, 1e-12) << "L " << L << " T " << T << " (" << a << "," << b << ")";
          }
      }
}

TEST(Boost, StepMinimisesTheBoundAndStaysFinite) {
  const double kEps = 1e-6;  // the smoothing ε (any small one)
  // Interior: Δ is the bound's minimiser log(−L(U−r)/(U(r−L)))/(U−L) up to the smoothing.
  const double cases[][3] = {{0.3, 2.0, -1.0}, {-0.5, 1.0, -3.0}, {1.5, 4.0, -0.5}, {0.0, 1.0, -1.0}};
  for (const auto& c : cases) {
    const double r = c[0], U = c[1], L = c[2];
    const boost::Step s = boost::bound_step(r, U, L, kEps);
    const double exact = std::log(-L * (U - r) / (U * (r - L))) / (U - L);
    EXPECT_NEAR(s.delta, exact, 1e-5) << r << " in [" << L << ", " << U << "]";
    auto bound = [&](double d) { return ((U - r) * std::exp(d * L) + (r - L) * std::exp(d * U)) / (U - L); };
    EXPECT_NEAR(1 - s.decrease, bound(s.delta), 1e-14);
    for (double h : {-1e-3, 1e-3}) EXPECT_LE(bound(s.delta), bound(s.delta + h) + 1e-15);
    if (r == 0) {
      EXPECT_EQ(s.delta, 0);
      EXPECT_EQ(s.decrease, 0);
    }
  }
  // Degenerate: U = 0, L = 0, r at a bound, U = L, r outside by rounding: finite steps, the right
  // direction, never NaN; the step is at most log(1 + 1/ε)/(U − L).
  const double cap = std::log1p(1 / kEps);
  const boost::Step u0 = boost::bound_step(-0.5, 0.0, -2.0, kEps);
  EXPECT_GT(u0.delta, 0);
  EXPECT_LE(u0.delta, cap / 2.0);
  EXPECT_GT(u0.decrease, 0.2);  // the bound → 1 − r/L = 0.75 as Δ → ∞
  EXPECT_LT(u0.decrease, 0.25);
  const boost::Step l0 = boost::bound_step(0.5, 2.0, 0.0, kEps);
  EXPECT_LT(l0.delta, 0);
  EXPECT_GE(l0.delta, -cap / 2.0);
  const boost::Step at_lower = boost::bound_step(-1.0, 1.0, -1.0, kEps);
  EXPECT_GT(at_lower.delta, 0);
  EXPECT_LE(at_lower.delta, cap / 2.0);
  EXPECT_GT(at_lower.decrease, 0.99);
  for (const auto& s : {boost::bound_step(1.0, 1.0, 1.0, kEps), boost::bound_step(0.0, 0.0, 0.0, kEps)}) {
    EXPECT_EQ(s.delta, 0);
    EXPECT_EQ(s.decrease, 0);
  }
  const boost::Step out = boost::bound_step(1.0 + 1e-15, 1.0, -1.0, kEps);
  EXPECT_TRUE(std::isfinite(out.delta));
  EXPECT_LT(out.delta, 0);
}

// ---- a round against brute force --------------------------------------------------------------

TEST(Boost, RoundMatchesBruteForceOnBothPaths) {
  for (std::uint32_t L : {2u, 3u})
    for (int layout : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "L " << L << " layout " << layout);
      const RandomProblem p = tiny(L, 11 + L, layout);
      const double eps = boost::smoothing(p.corpus.num_sentences());
      CpuBackend b(p.dims, 2);
      auto corpus = b.upload(p.corpus);
      std::vector<double> wh = test::random_weights(p.dims.num_weights(), 0.4, 3);
      for (std::size_t k = 0; k < wh.size(); k += 2) wh[k] = 0;
      auto w = to_backend(b, wh);
      const BruteRound want = brute_round(p, wh);
      for (bool per_sentence : {false, true}) {
        auto r = b.vector(wh.size());
        double passes = 0;
        const LogExpLoss ev = log_seq_exp(b, *corpus, *w, r.get(), passes, per_sentence);
        EXPECT_FALSE(ev.overflowed);
        EXPECT_GT(passes, 0);
        EXPECT_NEAR(ev.log_h, std::log(want.h), 1e-12);
        const std::vector<double> got = to_host(b, *r);
        for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want.r[k], 1e-10) << "weight " << k;
      }
      // The choice, its step, and the bound it promises, against the brute-force figures.
      const boost::Bounds bounds = brute_bounds(p);
      boost::Choice expect;
      for (std::size_t k = 0; k < wh.size(); ++k) {
        const boost::Step s = boost::bound_step(want.r[k], bounds.upper[k], bounds.lower[k], eps);
        if (s.decrease > expect.step.decrease + 1e-12) expect = {k, s};
      }
      auto r = b.vector(wh.size());
      double passes = 0;
      log_seq_exp(b, *corpus, *w, r.get(), passes);
      const boost::Choice got = boost::choose(to_host(b, *r), boost::feature_bounds(p.corpus, p.dims), eps);
      ASSERT_EQ(got.feature, expect.feature);
      EXPECT_NEAR(got.step.delta, expect.step.delta, 1e-9);
      EXPECT_NEAR(got.step.decrease, expect.step.decrease, 1e-9);
      std::vector<double> next = wh;
      next[got.feature] += got.step.delta;
      const double h_new = brute_round(p, next).h;
      EXPECT_LE(h_new, want.h * (1 - got.step.decrease) * (1 + 1e-12)) << "the bound does not bound H";
      EXPECT_LT(h_new, want.h);
    }
}

TEST(Boost, EveryRoundTakesTheBruteForceStepAndLowersTheLoss) {
  for (std::uint32_t L : {2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    const RandomProblem p = tiny(L, 21 + L, 1);
    CpuBackend b(p.dims, 1);
    auto corpus = b.upload(p.corpus);
    const boost::Bounds bounds = brute_bounds(p);
    TrainOptions o;
    o.max_iterations = 25;
    o.delta = 0;  // no improvement test
    o.boost_rule = BoostRule::bound;
    std::vector<double> prev(p.dims.num_weights(), 0.0);
    double h_prev = brute_round(p, prev).h;
    std::size_t active_prev = 0;
    int rounds = 0;
    std::vector<double> w;
    train_boost(b, *corpus, w, o, [&](const Progress& pr, const std::vector<double>& x) {
      ++rounds;
      EXPECT_EQ(pr.iteration, rounds);
      // The step brute force takes from the previous weights: the largest decrease (with L = 2,
      // (a, 0) and (a, 1) tie exactly — ψ of one is −ψ of the other — and rounding picks one).
      const BruteRound before = brute_round(p, prev);
      std::vector<boost::Step> steps(prev.size());
      double most = 0;
      for (std::size_t k = 0; k < prev.size(); ++k) {
        steps[k] = boost::bound_step(before.r[k], bounds.upper[k], bounds.lower[k],
                                     boost::smoothing(p.corpus.num_sentences()));
        most = std::max(most, steps[k].decrease);
      }
      ASSERT_GT(most, 0);
      std::size_t changed = 0, best = 0;
      for (std::size_t k = 0; k < x.size(); ++k)
        if (x[k] != prev[k]) {
          ++changed;
          best = k;
          EXPECT_GE(steps[k].decrease, most * (1 - 1e-9)) << "round " << rounds << ": weight " << k;
          EXPECT_NEAR(x[k] - prev[k], steps[k].delta, 1e-8) << "round " << rounds;
        }
      EXPECT_EQ(changed, 1u) << "round " << rounds;
      const boost::Step step = steps[best];
      const double h = brute_round(p, x).h;
      EXPECT_NEAR(pr.objective, h, 1e-10 * h) << "round " << rounds;
      EXPECT_LT(h, h_prev) << "round " << rounds;
      EXPECT_LE(h, h_prev * (1 - step.decrease) * (1 + 1e-12)) << "round " << rounds;
      EXPECT_LE(pr.active_features, active_prev + 1);
      EXPECT_GE(pr.active_features, std::size_t(1));
      EXPECT_TRUE(std::isfinite(pr.gradient_norm));
      EXPECT_NEAR(pr.step, x[best] - prev[best], 1e-12);
      active_prev = pr.active_features;
      h_prev = h;
      prev = x;
    });
    EXPECT_EQ(rounds, 25);
  }
}

TEST(Boost, SameModelForAnyThreadCountAndSparseByConstruction) {
  const RandomProblem p = random_problem(4, 60, 2, 120, 12, 9);
  for (const BoostRule rule : {BoostRule::gradient, BoostRule::bound}) {
    SCOPED_TRACE(name_of(rule));
    TrainOptions o;
    o.max_iterations = 60;
    o.boost_rule = rule;
    std::vector<double> w[2];
    std::vector<std::size_t> active[2];
    std::vector<double> objective[2];
    int incremental = 0;  // the bound rule's rounds that re-evaluated only some sentences (under a pass)
    for (unsigned threads : {1u, 2u}) {
      CpuBackend b(p.dims, threads);
      auto corpus = b.upload(p.corpus);
      double passes = 0;
      train_boost(b, *corpus, w[threads - 1], o, [&](const Progress& pr, const std::vector<double>&) {
        active[threads - 1].push_back(pr.active_features);
        objective[threads - 1].push_back(pr.objective);
        if (threads == 2 && pr.passes - passes < 1) ++incremental;
        passes = pr.passes;
      });
    }
    if (rule == BoostRule::bound) { EXPECT_GT(incremental, 20); }
    ASSERT_EQ(w[0].size(), w[1].size());
    EXPECT_EQ(std::memcmp(w[0].data(), w[1].data(), w[0].size() * sizeof(double)), 0);
    EXPECT_EQ(objective[0], objective[1]);
    ASSERT_EQ(active[0].size(), 60u);
    for (std::size_t k = 1; k < active[0].size(); ++k) {
      EXPECT_LE(active[0][k], active[0][k - 1] + 1);
      EXPECT_LT(objective[0][k], objective[0][k - 1]);
    }
    EXPECT_LE(active[0].back(), 60u);
    EXPECT_GT(active[0].back(), 10u);  // it does add features
    EXPECT_LT(active[0].back(), p.dims.num_weights() / 4);
  }
}

TEST(Boost, StopsOnTheImprovementTestAndByDefaultAfterItsRounds) {
  const RandomProblem p = random_problem(3, 10, 0, 20, 5, 4);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  TrainOptions o;  // max_iterations 0: kDefaultRounds, unless the improvement test ends it
  o.delta = 0;
  int rounds = 0;
  std::vector<double> w;
  std::string reason;
  train_boost(b, *corpus, w, o, [&](const Progress&, const std::vector<double>&) { ++rounds; }, &reason);
  EXPECT_EQ(rounds, boost::kDefaultRounds);
  EXPECT_EQ(reason, stop_at_limit("max-iterations", boost::kDefaultRounds));
  o.delta = 1e-3;
  rounds = 0;
  train_boost(b, *corpus, w, o, [&](const Progress&, const std::vector<double>&) { ++rounds; }, &reason);
  EXPECT_LT(rounds, boost::kDefaultRounds);
  EXPECT_NE(reason.find("--delta"), std::string::npos) << reason;
}

TEST(Boost, StopsWhenNoFeatureCanLowerTheBound) {
  // One label: every Φ is the gold one (ψ ≡ 0, all bounds [0, 0]): nothing to add, no report.
  const RandomProblem p = random_problem(1, 6, 1, 10, 4, 3);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const boost::Bounds bounds = boost::feature_bounds(p.corpus, p.dims);
  for (std::size_t k = 0; k < bounds.upper.size(); ++k) ASSERT_EQ(bounds.upper[k] - bounds.lower[k], 0.0);
  for (const BoostRule rule : {BoostRule::gradient, BoostRule::bound}) {
    int rounds = 0;
    std::vector<double> w;
    std::string reason;
    TrainOptions o;
    o.boost_rule = rule;
    const double f = train_boost(b, *corpus, w, o, [&](const Progress&, const std::vector<double>&) { ++rounds; },
                                 &reason);
    EXPECT_EQ(rounds, 0);
    EXPECT_NEAR(f, 10.0, 1e-12);  // H = Σ 1/p = n at p = 1
    EXPECT_EQ(reason, rule == BoostRule::bound ? "no feature lowers the bound on the loss (round 1)"
                                               : "no feature lowers the loss (round 1)");
    for (double x : w) EXPECT_EQ(x, 0.0);
  }
}

// ---- H beyond the doubles ----------------------------------------------------------------------

TEST(Boost, LossBeyondTheDoublesIsHandledInLogSpace) {
  // 12 labels, sentences of up to 320 tokens: at w = 0, 1/p = 12^T reaches e^795 > DBL_MAX.
  RandomProblem p = random_problem(12, 30, 0, 8, 320, 17, true);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  auto w = b.vector(p.dims.num_weights());
  auto r = b.vector(p.dims.num_weights());
  double passes = 0;
  const LogExpLoss ev = log_seq_exp(b, *corpus, *w, r.get(), passes);
  ASSERT_TRUE(ev.overflowed) << "the problem does not overflow: make the sentences longer";
  // At w = 0: −log p_i = T_i·log 12, and r_k = Σ_i D(i)·(E_p[Φ_k] − Φ_k(gold)) with the uniform p.
  const Corpus& c = p.corpus;
  const std::size_t n = c.num_sentences(), L = p.dims.L;
  std::vector<double> nll(n);
  double top = -1e300;
  for (std::size_t i = 0; i < n; ++i) top = std::max(top, nll[i] = double(c.length(i)) * std::log(12.0));
  double sum = 0;
  for (double x : nll) sum += std::exp(x - top);
  const double log_h = top + std::log(sum);
  EXPECT_NEAR(ev.log_h, log_h, 1e-9 * log_h);
  EXPECT_GT(log_h, std::log(DBL_MAX));
  std::vector<double> want(p.dims.num_weights(), 0.0);
  const WeightGroups wg = p.dims.groups();
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::exp(nll[i] - log_h);
    const std::size_t t0 = c.sentence_offsets[i], T = c.length(i);
    for (std::size_t t = t0; t < t0 + T; ++t) {
      for (std::size_t j = c.state_offsets[t]; j < c.state_offsets[t + 1]; ++j)
        for (std::size_t y = 0; y < L; ++y)
          want[wg.find(c.state_ids[j], std::uint32_t(y))] += d * ((1.0 / L) - (y == c.labels[t] ? 1.0 : 0.0));
      if (t > t0)
        for (std::size_t j = 0; j < L * L; ++j)
          want[wg.find(wg.transitions(), std::uint32_t(j))] +=
              d * ((1.0 / (L * L)) - (j == c.labels[t - 1] * L + c.labels[t] ? 1.0 : 0.0));
    }
  }
  const std::vector<double> got = to_host(b, *r);
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-9) << "weight " << k;
  // Training from there: finite weights, the log-space rounds reported as DBL_MAX, no gradient
  // norm, and H (once finite) still falling.
  // The gradient rule's line search runs in log space there: its first step brings H within range.
  for (const BoostRule rule : {BoostRule::bound, BoostRule::gradient}) {
    SCOPED_TRACE(name_of(rule));
    TrainOptions o;
    o.max_iterations = 40;
    o.boost_rule = rule;
    std::vector<double> wh;
    int capped = 0, finite = 0;
    double last = DBL_MAX;
    train_boost(b, *corpus, wh, o, [&](const Progress& pr, const std::vector<double>&) {
      EXPECT_LE(pr.objective, last);
      if (pr.objective < DBL_MAX) { EXPECT_LT(pr.objective, last); }
      last = pr.objective;
      if (pr.objective == DBL_MAX) {
        ++capped;
        EXPECT_TRUE(std::isnan(pr.gradient_norm));
      } else {
        ++finite;
      }
    });
    EXPECT_GT(rule == BoostRule::bound ? capped : finite, 0);
    for (double x : wh) ASSERT_TRUE(std::isfinite(x));
  }
}

// ---- incremental rounds ------------------------------------------------------------------------

/// Appends one sentence of T tokens (2 state attributes a token, an edge attribute every third
/// position, random gold labels) to a non-binary random problem.
void append_sentence(RandomProblem& p, std::size_t T, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Corpus& c = p.corpus;
  for (std::size_t t = 0; t < T; ++t) {
    for (int i = 0; i < 2; ++i) {
      c.state_ids.push_back(std::uint32_t(rng() % p.dims.A));
      c.state_values.push_back(0.5 + double(rng() % 1000) / 1000.0);
    }
    c.state_offsets.push_back(c.state_ids.size());
    if (p.dims.E > 0 && t > 0 && t % 3 == 0) {
      c.edge_ids.push_back(std::uint32_t(rng() % p.dims.E));
      c.edge_values.push_back(1.0);
    }
    c.edge_offsets.push_back(c.edge_ids.size());
    c.labels.push_back(std::uint32_t(rng() % p.dims.L));
  }
  c.sentence_offsets.push_back(c.labels.size());
  c.source_lines.push_back(c.source_lines.size() + 1);
}

TEST(Boost, SentenceIndexListsExactlyTheSentencesAWeightMoves) {
  // Every weight: the sentences not listed keep their loss bit for bit when the weight moves,
  // every listed one contains the weight's attribute (state, edge), a transition is a full pass.
  for (int layout : {0, 1, 2}) {
    SCOPED_TRACE(::testing::Message() << "layout " << layout);
    const RandomProblem p = tiny(3, 40 + layout, layout);
    const boost::SentenceIndex index(p.corpus, p.dims);
    const WeightGroups wg = p.dims.groups();
    CpuBackend b(p.dims, 1);
    auto corpus = b.upload(p.corpus);
    const std::vector<double> w0 = test::random_weights(p.dims.num_weights(), 0.5, 3);
    auto w = to_backend(b, w0);
    const std::size_t n = p.corpus.num_sentences();
    std::vector<double> base(n);
    for (std::uint32_t i = 0; i < n; ++i)
      base[i] = b.evaluate(*corpus, *w, SentenceSpan{&i, 1}, nullptr, 1.0, SequenceLoss::seq_exp);
    std::size_t listed_total = 0;
    for (std::uint32_t g = 0; g < wg.count(); ++g)
      for_each_weight(wg, g, [&](std::size_t k, std::size_t) {
        bool full = false;
        const SentenceSpan span = index.sentences(k, full);
        EXPECT_EQ(full, g == wg.transitions()) << "weight " << k;
        if (full) return;
        std::vector<char> listed(n, 0);
        for (std::size_t i = 0; i < span.count; ++i) {
          if (i > 0) {
            EXPECT_LT(span[i - 1], span[i]);
          }
          listed[span[i]] = 1;
        }
        listed_total += span.count;
        std::vector<double> w1 = w0;
        w1[k] += 0.7;
        auto wv = to_backend(b, w1);
        for (std::uint32_t i = 0; i < n; ++i) {
          // The attribute occurs in sentence i?
          const Corpus& c = p.corpus;
          bool occurs = false;
          for (std::size_t t = c.sentence_offsets[i]; t < c.sentence_offsets[i + 1]; ++t) {
            if (g < wg.A)
              for (std::size_t j = c.state_offsets[t]; j < c.state_offsets[t + 1]; ++j)
                occurs |= c.state_ids[j] == g;
            if (g > wg.A && t > c.sentence_offsets[i])
              for (std::size_t j = c.edge_offsets[t]; j < c.edge_offsets[t + 1]; ++j)
                occurs |= wg.edge(c.edge_ids[j]) == g;
          }
          EXPECT_EQ(bool(listed[i]), occurs) << "weight " << k << ", sentence " << i;
          if (!listed[i]) {
            const double v = b.evaluate(*corpus, *wv, SentenceSpan{&i, 1}, nullptr, 1.0, SequenceLoss::seq_exp);
            EXPECT_EQ(v, base[i]) << "weight " << k << " moves unlisted sentence " << i;
          }
        }
      });
    EXPECT_GT(listed_total, 0u);
  }
}

/// Checks incremental rounds against full ones and against a fresh evaluation at each round's
/// weights; returns the number of incremental rounds (those that cost less than the full round).
int expect_incremental_matches_full(const RandomProblem& p, int rounds, double ratio, int period, BoostRule rule) {
  boost::RoundPolicy inc;
  inc.refresh_ratio = ratio;
  inc.refresh_period = period;
  boost::RoundPolicy off;
  off.incremental = false;
  const Rounds a = run_rounds(p, inc, rounds, rule), f = run_rounds(p, off, rounds, rule);
  EXPECT_EQ(a.objective.size(), std::size_t(rounds));
  EXPECT_EQ(f.objective.size(), std::size_t(rounds));
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto r = b.vector(p.dims.num_weights());
  int incremental = 0;
  for (std::size_t k = 0; k < std::min(a.objective.size(), f.objective.size()); ++k) {
    // The same feature chosen, the same step up to rounding.
    std::size_t moved_a = 0, moved_f = 0;
    for (std::size_t j = 0; j < a.w[k].size(); ++j) {
      const double prev_a = k ? a.w[k - 1][j] : 0.0, prev_f = k ? f.w[k - 1][j] : 0.0;
      if (a.w[k][j] != prev_a) moved_a = j + 1;
      if (f.w[k][j] != prev_f) moved_f = j + 1;
      EXPECT_NEAR(a.w[k][j], f.w[k][j], 1e-9 * (1 + std::fabs(f.w[k][j]))) << "round " << k + 1 << ", weight " << j;
    }
    EXPECT_EQ(moved_a, moved_f) << "round " << k + 1 << ": another feature";
    EXPECT_NEAR(a.objective[k], f.objective[k], 1e-9 * f.objective[k]) << "round " << k + 1;
    EXPECT_NEAR(a.gnorm[k], f.gnorm[k], 1e-8 * f.gnorm[k]) << "round " << k + 1;
    // H and r of the incremental path against a fresh full evaluation at its own weights.
    auto wv = to_backend(b, a.w[k]);
    double passes = 0;
    const LogExpLoss ev = log_seq_exp(b, *corpus, *wv, r.get(), passes);
    EXPECT_FALSE(ev.overflowed);
    const double h = std::exp(ev.log_h);
    EXPECT_NEAR(a.objective[k], h, 1e-10 * h) << "round " << k + 1;
    EXPECT_NEAR(a.gnorm[k], h * std::sqrt(b.norm2sq(*r)), 1e-9 * a.gnorm[k]) << "round " << k + 1;
    // Incremental: cheaper than the same round with full passes (the bound rule's: under 1 pass).
    const double cost = a.passes[k] - (k ? a.passes[k - 1] : 0.0), full = f.passes[k] - (k ? f.passes[k - 1] : 0.0);
    if (cost < full) ++incremental;
  }
  return incremental;
}

TEST(Boost, IncrementalRoundsMatchFullRounds) {
  // Random problems: features fire in about a quarter of the sentences.
  for (std::uint64_t seed : {5u, 6u})
    for (const BoostRule rule : {BoostRule::gradient, BoostRule::bound}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed << ", rule " << name_of(rule));
    const RandomProblem p = random_problem(4, 60, 2, 120, 12, seed);
    // The trainer's own policy, then no refreshes but the bound's (the longest runs of
    // incremental rounds).
    const int defaults = expect_incremental_matches_full(p, 150, boost::RoundPolicy().refresh_ratio,
                                                         boost::RoundPolicy().refresh_period, rule);
    EXPECT_GT(defaults, 75) << "too few incremental rounds: the test does not test them";
    const int stretched = expect_incremental_matches_full(p, 150, 1e6, 1 << 30, rule);
    EXPECT_GT(stretched, 75);
  }
}

TEST(Boost, IncrementalRoundsStayExactWhereOneSentenceDominates) {
  // A 30-token sentence among 200 short ones: 4^30 ≈ 1e18 against Σ_i 4^T_i ≈ 1e6: at first H is
  // that one sentence, so subtracting its old 1/p cancels nearly all of H (the rest lies below
  // its last bit), and once it is fitted the rest is lost; the refresh rule must catch it. No
  // transitions and no edge attributes (their rounds are full passes, which would refresh H anyway).
  RandomProblem p = random_problem(4, 60, 0, 200, 8, 11);
  p.dims.transitions = false;
  append_sentence(p, 30, 12);
  for (const BoostRule rule : {BoostRule::gradient, BoostRule::bound}) {
    SCOPED_TRACE(name_of(rule));
    const int incremental = expect_incremental_matches_full(p, 200, boost::RoundPolicy().refresh_ratio,
                                                            boost::RoundPolicy().refresh_period, rule);
    EXPECT_GT(incremental, 20);
  }
  // Without the refresh rule (ratio unbounded) the cancellation shows: the rule is what keeps it.
  boost::RoundPolicy reckless;
  reckless.refresh_ratio = 1e300;
  reckless.refresh_period = 1 << 30;
  const Rounds a = run_rounds(p, reckless, 200, BoostRule::bound);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto r = b.vector(p.dims.num_weights());
  double worst = 0;
  for (std::size_t k = 0; k < a.objective.size(); ++k) {
    auto wv = to_backend(b, a.w[k]);
    double passes = 0;
    const double h = std::exp(log_seq_exp(b, *corpus, *wv, r.get(), passes).log_h);
    worst = std::max(worst, std::fabs(a.objective[k] - h) / h);
  }
  EXPECT_GT(worst, 1e-8) << "the problem does not cancel: make the long sentence longer";
}

TEST(Boost, ResumesBitExactBetweenIncrementalRounds) {
  // Checkpoints inside runs of incremental rounds (H, the mass since the last full pass, the
  // count, ∇H and r are saved): the resumed run is the uninterrupted one bit for bit.
  const RandomProblem p = random_problem(4, 60, 2, 120, 12, 5);
  TrainOptions o;
  o.max_iterations = 40;
  o.delta = 0;
  // The trainer's policy, then refreshes by the mass (ratio 30) and by the period (7) within
  // the run, so that a state restored without either changes the rounds.
  for (const BoostRule rule : {BoostRule::gradient, BoostRule::bound})
    for (const auto& [ratio, period] : {std::pair<double, int>{1e6, 1000}, {30.0, 1000}, {1e6, 7}}) {
    SCOPED_TRACE(::testing::Message() << "rule " << name_of(rule) << ", refresh ratio " << ratio << ", period " << period);
    o.boost_rule = rule;
    boost::RoundPolicy policy;
    policy.refresh_ratio = ratio;
    policy.refresh_period = period;
    PolicyGuard guard(policy);
    test::check_resume_is_exact([](const Dims& d) { return BackendPtr(new CpuBackend(d, 2)); }, p,
                                find_trainer("boost"), o, 13);
  }
}

// ---- settings and the command line -------------------------------------------------------------

TEST(Boost, RefusesOtherLossesAndTakesNoRegularisation) {
  const TrainerInfo& info = find_trainer("boost");
  EXPECT_FALSE(info.uses_objective);
  EXPECT_FALSE(info.takes("c1"));
  EXPECT_FALSE(info.takes("c2"));
  EXPECT_TRUE(info.takes("max-iterations"));
  for (SequenceLoss loss : {SequenceLoss::seq_exp, SequenceLoss::point_log, SequenceLoss::point_exp})
    EXPECT_NE(loss_refusal(info, loss).find("boost minimises the sequential exponential loss"), std::string::npos);
  const RandomProblem p = random_problem(3, 5, 0, 4, 4, 1);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, 0.0, 1.0, SequenceLoss::point_exp);
  auto w = b.vector(p.dims.num_weights());
  EXPECT_EQ(test::error_text([&] { info.make()->train(obj, *w, TrainOptions{}, nullptr); }),
            loss_refusal(info, SequenceLoss::point_exp));
}

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(Boost, CliTrainsTagsAndScores) {
  const std::string dir = test::temp_path("boost-cli");
  const std::string model = dir + ".model", log = dir + ".csv", tagged = dir + ".tagged";
  const std::string train = test::crfx_binary() + " train " + q(test::data_path("conll2000.train300.txt")) + " -t " +
                            q(test::data_path("chunking.template")) + " -a boost --threads 2";
  std::string out;
  ASSERT_EQ(test::run(train + " --max-iterations 300 -m " + q(model) + " --log " + q(log), &out), 0) << out;
  // The log: one row a round, active features growing by at most one, the loss falling.
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  {
    std::stringstream ss(line);
    for (std::string f; std::getline(ss, f, ',');) header.push_back(f);
  }
  const auto col = [&](const char* name) {
    return std::size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t c_obj = col("objective"), c_act = col("active_features");
  ASSERT_LT(c_obj, header.size()) << line;
  ASSERT_LT(c_act, header.size()) << line;
  int rows = 0;
  double prev_obj = DBL_MAX, prev_act = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    const double obj = std::stod(f.at(c_obj)), act = std::stod(f.at(c_act));
    EXPECT_LT(obj, prev_obj) << line;
    EXPECT_LE(act, prev_act + 1) << line;
    prev_obj = obj;
    prev_act = act;
    ++rows;
  }
  EXPECT_EQ(rows, 300);
  EXPECT_GT(prev_act, 100);
  ASSERT_EQ(test::run(test::crfx_binary() + " tag " + q(test::data_path("conll2000.test100.txt")) + " -m " + q(model) +
                          " -o " + q(tagged),
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " eval " + q(tagged), &out), 0) << out;
  const std::size_t at = out.find("FB1:");
  ASSERT_NE(at, std::string::npos) << out;
  const double f1 = std::stod(out.substr(at + 4));
  // 300 rounds (≤ 300 weights) on 300 sentences: 43.85 (accuracy 66.3%) when this was written; the
  // all-zero model tags every token B-NP.
  EXPECT_GT(f1, 40.0) << out;
  const std::size_t acc = out.find("accuracy:");
  ASSERT_NE(acc, std::string::npos) << out;
  EXPECT_GT(std::stod(out.substr(acc + 9)), 60.0) << out;
  // Settings boost does not take, named.
  EXPECT_NE(test::run(train + " --c2 1 -m " + q(model), &out), 0);
  EXPECT_NE(out.find("--c2 is not a setting of boost"), std::string::npos) << out;
  EXPECT_NE(test::run(train + " --loss seq-exp -m " + q(model), &out), 0);
  EXPECT_NE(out.find("takes no --loss"), std::string::npos) << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " train --algo list", &out), 0) << out;
  EXPECT_NE(out.find("  boost\t"), std::string::npos) << out;
  EXPECT_NE(out.find("but ap, pa, arow, mira, boost:"), std::string::npos) << out;
}

}  // namespace
}  // namespace crfx
