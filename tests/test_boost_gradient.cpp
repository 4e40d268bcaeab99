// Sequence boosting's gradient rule (`--boost-rule gradient`; host/optim/boost.cpp):
// the choice (the largest |∂H/∂w_k|) on a hand-made case against the bound rule's, the smoothed
// line minimum on convex sums of exponentials against a dense grid, and every round of the trainer
// against brute force: the steepest weight by enumeration, and the minimiser of H along it by
// enumerating every label sequence at each trial step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/boost.hpp"
#include "boost_brute.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::RandomProblem;
using namespace test::boost_brute;

/// The minimiser of f on [lo, hi] by a grid of n points, then golden sections around the best one
/// (f convex): the brute-force answer the line search is checked against.
template <class F>
double grid_minimum(F&& f, double lo, double hi, int n = 400) {
  double best = lo, fbest = f(lo);
  const double h = (hi - lo) / n;
  for (int i = 1; i <= n; ++i)
    if (const double v = f(lo + i * h); v < fbest) fbest = v, best = lo + i * h;
  double a = best - h, b = best + h;
  for (int i = 0; i < 200; ++i) {
    const double m1 = a + (b - a) * 0.381966, m2 = b - (b - a) * 0.381966;
    (f(m1) < f(m2) ? b : a) = f(m1) < f(m2) ? m2 : m1;
  }
  return 0.5 * (a + b);
}

double smoothing_term(double eps, double d) { return eps * (std::expm1(d) + std::expm1(-d)); }

/// f at a step off the minimiser `want` by twice the line search's tolerance, the worse side: what
/// f(step) may be at most.
template <class F>
double within_tolerance(F&& f, double want) {
  const double off = 2 * boost::kStepTolerance * std::abs(want) + 1e-9;
  return std::max(f(want - off), f(want + off));
}

TEST(BoostGradient, SteepestTakesTheLargestGradientWhereTheBoundTakesARareFeature) {
  // Weight 0: frequent (ranges ±8), r = −0.6, the loss's steepest direction. Weight 1: rare and
  // one-sided (L = 0: it only ever counts against the gold sequence), r = 0.05 — the bound rule's
  // choice, its bound falling to the smoothing's floor. Weight 2 cannot move (U = L), whatever r.
  boost::Bounds bounds;
  bounds.upper = {8, 1, 0, 3};
  bounds.lower = {-8, 0, 0, -3};
  const std::vector<double> r = {-0.6, 0.05, 5.0, 0.6};
  EXPECT_EQ(boost::steepest(r, bounds), 0u);  // |−0.6| = |0.6|: the smaller index
  const double eps = 1e-4;
  const boost::Choice bound = boost::choose(r, bounds, eps);
  EXPECT_EQ(bound.feature, 1u);
  EXPECT_GT(bound.step.decrease, boost::bound_step(r[0], 8, -8, eps).decrease);
  EXPECT_EQ(boost::steepest({0.0, 0.0, 5.0, 0.0}, bounds), boost::Choice().feature);
  EXPECT_EQ(boost::steepest({0.0, std::nan(""), 5.0, 0.0}, bounds), boost::Choice().feature);
}

TEST(BoostGradient, SmoothedMinimumMatchesAGridOnSumsOfExponentials) {
  // φ(Δ) = log(Σ_j a_j e^{b_j Δ} / Σ_j a_j): convex, φ(0) = 0; a minimum inside, far out, and one
  // at infinity (every b_j ≤ 0: only the smoothing stops the step).
  struct Case {
    std::vector<double> a, b;
    double eps;
  };
  const Case cases[] = {{{1, 2, 0.5}, {-1, 0.5, 2}, 1e-3},
                        {{1e6, 1}, {-3, 2}, 1e-4},
                        {{3, 1, 1}, {-1, -2, 0}, 1e-2},
                        {{1, 1}, {1, 0}, 0.1},
                        {{0.2, 5}, {7, -0.3}, 1e-3}};
  for (const Case& c : cases) {
    double sum = 0, slope = 0;
    for (std::size_t j = 0; j < c.a.size(); ++j) sum += c.a[j], slope += c.a[j] * c.b[j];
    slope /= sum;
    int calls = 0;
    auto phi = [&](double d) {
      ++calls;
      double v = 0;
      for (std::size_t j = 0; j < c.a.size(); ++j) v += c.a[j] * std::exp(c.b[j] * d);
      return std::log(v / sum);
    };
    const boost::LineMinimum m = boost::smoothed_minimum(phi, slope, c.eps);
    EXPECT_EQ(m.trials, calls);
    auto f = [&](double d) { return phi(d) + smoothing_term(c.eps, d); };
    const double want = grid_minimum(f, -40, 40, 4000);
    SCOPED_TRACE(::testing::Message() << "minimiser " << want);
    EXPECT_NEAR(m.delta, want, 2 * boost::kStepTolerance * std::abs(want) + 1e-9);
    EXPECT_NEAR(m.value, f(m.delta), 1e-12 * (1 + std::abs(m.value)));
    EXPECT_LT(m.value, 0);
    EXPECT_LE(m.value, within_tolerance(f, want));
    EXPECT_LE(m.trials, 40);
  }
  // No slope: no step, no trial.
  const boost::LineMinimum none = boost::smoothed_minimum([](double) { return 0.0; }, 0.0, 1e-3);
  EXPECT_EQ(none.delta, 0.0);
  EXPECT_EQ(none.trials, 0);
}

TEST(BoostGradient, EveryRoundMovesTheSteepestWeightToTheMinimumOfTheLossAlongIt) {
  for (std::uint32_t L : {2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    const RandomProblem p = tiny(L, 31 + L, 1);
    CpuBackend b(p.dims, 1);
    auto corpus = b.upload(p.corpus);
    const boost::Bounds bounds = brute_bounds(p);
    const double eps = boost::smoothing(p.corpus.num_sentences());
    TrainOptions o;
    o.max_iterations = 20;
    o.delta = 0;
    o.boost_rule = BoostRule::gradient;
    std::vector<double> prev(p.dims.num_weights(), 0.0);
    int rounds = 0;
    std::vector<double> w;
    train_boost(b, *corpus, w, o, [&](const Progress& pr, const std::vector<double>& x) {
      ++rounds;
      const BruteRound before = brute_round(p, prev);
      std::size_t moved = x.size(), changed = 0;
      for (std::size_t k = 0; k < x.size(); ++k)
        if (x[k] != prev[k]) ++changed, moved = k;
      ASSERT_EQ(changed, 1u) << "round " << rounds;
      // The steepest by enumeration (ties within rounding: with L = 2, (a, 0) and (a, 1) are ±).
      double top = 0;
      for (std::size_t k = 0; k < x.size(); ++k)
        if (bounds.upper[k] > bounds.lower[k]) top = std::max(top, std::abs(before.r[k]));
      EXPECT_GE(std::abs(before.r[moved]), top * (1 - 1e-9)) << "round " << rounds;
      // The step: the minimiser of log H(prev + Δe_k)/H(prev) + ε(e^Δ + e^{−Δ} − 2), H enumerated.
      auto f = [&](double d) {
        std::vector<double> y = prev;
        y[moved] += d;
        return std::log(brute_round(p, y).h / before.h) + smoothing_term(eps, d);
      };
      const double want = grid_minimum(f, -30, 30, 600), got = x[moved] - prev[moved];
      EXPECT_NEAR(got, want, 2 * boost::kStepTolerance * std::abs(want) + 1e-9) << "round " << rounds;
      EXPECT_LE(f(got), within_tolerance(f, want)) << "round " << rounds;
      const double h = brute_round(p, x).h;
      EXPECT_NEAR(pr.objective, h, 1e-10 * h) << "round " << rounds;
      EXPECT_LT(h, before.h) << "round " << rounds;
      prev = x;
    });
    EXPECT_EQ(rounds, 20);
  }
}

}  // namespace
}  // namespace crfx
