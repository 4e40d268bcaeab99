// The gradient rule's exact lines (host/optim/boost_line.cpp): H along a state weight as a sum of
// exponentials from the polynomial forward pass, and along a transition from the cached
// emissions, both against enumeration of every label sequence of tiny problems; the cases where
// the polynomial does not apply; and the trainer's rounds with the exact lines against the same
// rounds with the line search's forward-pass trials (same features, same steps within tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/boost.hpp"
#include "boost_brute.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"
#include "util/thread_pool.hpp"

namespace crfx {
namespace {

using test::RandomProblem;
using namespace test::boost_brute;

/// A tiny problem without edge attributes whose state values are integers: 1, and 2 for every
/// fourth item (an attribute listed twice at a token also counts 2).
RandomProblem integer_problem(std::uint32_t L, std::uint64_t seed, int layout) {
  RandomProblem p = test::random_problem(L, 4, 0, 6, 4, seed, /*binary=*/true);
  p.corpus.state_values.assign(p.corpus.state_ids.size(), 1.0);
  for (std::size_t i = 0; i < p.corpus.state_values.size(); i += 4) p.corpus.state_values[i] = 2.0;
  if (layout == 1) p.dims.layout = std::make_shared<const WeightLayout>(observed_layout(p.corpus, p.dims));
  return p;
}

double brute_phi(const RandomProblem& p, const std::vector<double>& w, std::size_t k, double d, double h) {
  std::vector<double> y = w;
  y[k] += d;
  return std::log(brute_round(p, y).h / h);
}

TEST(BoostLine, StateLineIsTheLossAlongTheWeight) {
  for (std::uint32_t L : {2u, 3u})
    for (int layout : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "L " << L << ", layout " << layout);
      const RandomProblem p = integer_problem(L, 7 + L, layout);
      const std::vector<double> w = test::random_weights(p.dims.num_weights(), 0.7, 3 + L);
      const double h = brute_round(p, w).h;
      const WeightGroups wg = p.dims.groups();
      const boost::SentenceIndex index(p.corpus, p.dims);
      const boost::LineScores scores(p.dims, w);
      boost::Emissions em(p.dims);
      em.compute(p.corpus, w, {nullptr, p.corpus.num_sentences()});
      int checked = 0;
      for (std::size_t k = 0; k < wg.begin(wg.transitions()); ++k) {
        const std::uint32_t a = index.group(k), l = wg.slot(k, a);
        bool all = false;
        const SentenceSpan span = index.sentences(k, all);
        boost::ExpSum part, whole;
        ASSERT_TRUE(boost::state_line(p.corpus, scores, em, a, l, span, std::log(h), part));
        ASSERT_TRUE(boost::state_line(p.corpus, scores, em, a, l, {nullptr, p.corpus.num_sentences()},
                                      std::log(h), whole));
        whole.whole = true;
        EXPECT_NEAR(whole.total, 1.0, 1e-12);  // the sentences' 1/p_i sum to H
        EXPECT_LE(part.total, 1.0 + 1e-12);
        for (const double d : {-3.0, -0.7, 0.0, 0.4, 2.5}) {
          const double want = brute_phi(p, w, k, d, h);
          EXPECT_NEAR(part.phi(d), want, 1e-11 * (1 + std::abs(want))) << "weight " << k << ", Δ " << d;
          EXPECT_NEAR(whole.phi(d), want, 1e-11 * (1 + std::abs(want))) << "weight " << k << ", Δ " << d;
        }
        ++checked;
      }
      EXPECT_GT(checked, 4);
    }
}

TEST(BoostLine, TransitionLineIsTheLossAlongTheTransition) {
  for (std::uint32_t L : {2u, 3u})
    for (int layout : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << "L " << L << ", layout " << layout);
      const RandomProblem p = integer_problem(L, 17 + L, layout);
      const std::vector<double> w = test::random_weights(p.dims.num_weights(), 0.7, 5 + L);
      const double h = brute_round(p, w).h;
      const WeightGroups wg = p.dims.groups();
      const boost::LineScores scores(p.dims, w);
      boost::Emissions em(p.dims);
      em.compute(p.corpus, w, {nullptr, p.corpus.num_sentences()});
      int checked = 0;
      for_each_weight(wg, wg.transitions(), [&](std::size_t k, std::size_t slot) {
        boost::TransitionLine along(p.corpus, scores, em, slot, std::log(h));
        for (const double d : {-2.0, -0.3, 0.0, 0.8, 3.0}) {
          const double want = brute_phi(p, w, k, d, h);
          EXPECT_NEAR(along.phi(d), want, 1e-11 * (1 + std::abs(want))) << "weight " << k << ", Δ " << d;
        }
        EXPECT_EQ(along.passes, 5);
        ++checked;
      });
      EXPECT_GT(checked, 1);
    }
}

TEST(BoostLine, StateLineRefusesValuesThatAreNotCountsAndEdgeAttributes) {
  RandomProblem p = integer_problem(3, 41, 0);
  const std::vector<double> w = test::random_weights(p.dims.num_weights(), 0.5, 2);
  const std::uint32_t a = p.corpus.state_ids[0];
  const SentenceSpan all{nullptr, p.corpus.num_sentences()};
  boost::ExpSum line;
  for (const double v : {0.5, -5.0}) {  // (a token lists an attribute at most 4 times)
    RandomProblem q = p;
    q.corpus.state_values[0] = v;
    boost::Emissions em(q.dims);
    em.compute(q.corpus, w, all);
    EXPECT_FALSE(boost::state_line(q.corpus, boost::LineScores(q.dims, w), em, a, 0, all, 0.0, line)) << v;
  }
  const RandomProblem e = tiny(3, 41);  // edge attributes: the trials, not the polynomial
  const std::vector<double> we(e.dims.num_weights(), 0.0);
  boost::Emissions em(e.dims);
  em.compute(e.corpus, we, all);
  EXPECT_FALSE(boost::state_line(e.corpus, boost::LineScores(e.dims, we), em, 0, 0, all, 0.0, line));
}

/// The weights after each of `rounds` gradient-rule rounds, with exact lines or trials, and the passes.
std::vector<std::vector<double>> gradient_rounds(const RandomProblem& p, bool exact, int rounds,
                                                 std::vector<double>& passes) {
  boost::RoundPolicy policy;
  policy.exact_line = exact;
  Rounds run = run_rounds(p, policy, rounds, BoostRule::gradient);
  passes = std::move(run.passes);
  return std::move(run.w);
}

TEST(BoostLine, RoundsWithExactLinesTakeTheTrialsStepsWithinTheirTolerance) {
  for (std::uint32_t L : {3u, 4u}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    const RandomProblem p = integer_problem(L, 53 + L, 1);
    std::vector<double> pe, pt;
    const auto exact = gradient_rounds(p, true, 25, pe), trials = gradient_rounds(p, false, 25, pt);
    ASSERT_EQ(exact.size(), 25u);
    ASSERT_EQ(trials.size(), 25u);
    std::vector<double> prev_e(exact[0].size(), 0.0), prev_t = prev_e;
    int compared = 0;
    for (std::size_t r = 0; r < exact.size(); ++r) {
      std::size_t moved_e = 0, moved_t = 0;
      for (std::size_t k = 0; k < prev_e.size(); ++k) {
        if (exact[r][k] != prev_e[k]) moved_e = k + 1;
        if (trials[r][k] != prev_t[k]) moved_t = k + 1;
      }
      if (moved_e != moved_t) {  // only where the two are tied up to rounding; the paths part there
        const BruteRound at = brute_round(p, prev_t);
        ASSERT_TRUE(moved_e > 0 && moved_t > 0) << "round " << r + 1;
        EXPECT_NEAR(std::abs(at.r[moved_e - 1]), std::abs(at.r[moved_t - 1]), 1e-9 * std::abs(at.r[moved_t - 1]))
            << "round " << r + 1 << ": another feature";
        break;
      }
      ++compared;
      ASSERT_GT(moved_e, 0u);
      const std::size_t k = moved_e - 1;
      const double step = trials[r][k] - prev_t[k];
      EXPECT_NEAR(exact[r][k] - prev_e[k], step, 2 * boost::kStepTolerance * std::abs(step) + 1e-9)
          << "round " << r + 1;
      prev_e = exact[r];
      prev_t = trials[r];
    }
    EXPECT_GE(compared, 10);
    EXPECT_LT(pe[compared - 1], pt[compared - 1]);  // fewer passes' worth of work
  }
}

// The lines at label counts the enumeration cannot reach (the matrix products in blocks of 16
// labels and a tail of each size: L = 5 … 35): against the CPU backend's seq-exp loss H at the
// moved weights, phi(Δ) = log(H(w + Δe_k)/H(w)).
TEST(BoostLine, LinesAgreeWithTheBackendAtLargerLabelCounts) {
  for (std::uint32_t L : {5u, 9u, 16u, 22u, 35u}) {
    SCOPED_TRACE(::testing::Message() << "L " << L);
    RandomProblem p = test::random_problem(L, 8, 0, 14, 7, 90 + L, /*binary=*/true);
    p.corpus.state_values.assign(p.corpus.state_ids.size(), 1.0);
    const std::vector<double> w = test::random_weights(p.dims.num_weights(), 0.4, L);
    CpuBackend b(p.dims, 1);
    const auto corpus = b.upload(p.corpus);
    const SentenceSpan all{nullptr, p.corpus.num_sentences()};
    auto h_at = [&](std::size_t k, double d) {
      std::vector<double> y = w;
      y[k] += d;
      const VectorPtr v = b.vector(y.size());
      b.write(*v, y.data());
      return b.evaluate(*corpus, *v, all, nullptr, 1.0, SequenceLoss::seq_exp);
    };
    const double h = h_at(0, 0.0), log_h = std::log(h);
    const boost::LineScores scores(p.dims, w);
    boost::Emissions em(p.dims);
    em.compute(p.corpus, w, all);
    const WeightGroups wg = p.dims.groups();
    const boost::SentenceIndex index(p.corpus, p.dims);
    for (std::size_t k : {std::size_t(1), std::size_t(L + 2)}) {  // state weights of two attributes
      const std::uint32_t a = index.group(k), l = wg.slot(k, a);
      boost::ExpSum line;
      ASSERT_TRUE(boost::state_line(p.corpus, scores, em, a, l, all, log_h, line));
      line.whole = true;
      for (const double d : {-0.9, 0.6}) {
        const double want = std::log(h_at(k, d) / h);
        EXPECT_NEAR(line.phi(d), want, 1e-11 * (1 + std::abs(want))) << "weight " << k << ", Δ " << d;
      }
    }
    for (std::size_t slot : {std::size_t(0), std::size_t(L * L - 2)}) {
      const std::size_t k = wg.find(wg.transitions(), std::uint32_t(slot));
      ASSERT_NE(k, WeightGroups::kNoWeight);
      boost::TransitionLine along(p.corpus, scores, em, slot, log_h);
      for (const double d : {-0.9, 0.6}) {
        const double want = std::log(h_at(k, d) / h);
        EXPECT_NEAR(along.phi(d), want, 1e-11 * (1 + std::abs(want))) << "transition " << slot << ", Δ " << d;
      }
    }
  }
}

// The exact lines' sentences on a pool's threads (the trainer's, on the backend's host threads):
// the same bits as on one thread — the emissions, a state line's coefficients, a transition line's
// values — over enough sentences for several blocks of 64, and the trainer's rounds too.
TEST(BoostLine, ThreadsGiveTheSameBits) {
  RandomProblem p = test::random_problem(4, 12, 0, 300, 9, 61, /*binary=*/true);
  p.corpus.state_values.assign(p.corpus.state_ids.size(), 1.0);
  const std::vector<double> w = test::random_weights(p.dims.num_weights(), 0.6, 8);
  const SentenceSpan all{nullptr, p.corpus.num_sentences()};
  ThreadPool pool(3);
  boost::Emissions one(p.dims), three(p.dims);
  one.compute(p.corpus, w, all);
  three.compute(p.corpus, w, all, &pool);
  EXPECT_EQ(three.e, one.e);
  EXPECT_EQ(three.m, one.m);
  EXPECT_EQ(three.gold, one.gold);
  const double log_h = 40.0;  // (any scale: the lines' values are relative to it)
  const boost::LineScores scores(p.dims, w);
  const WeightGroups wg = p.dims.groups();
  const boost::SentenceIndex index(p.corpus, p.dims);
  int lines = 0;
  for (std::size_t k = 0; k < wg.begin(wg.transitions()); k += 5) {
    const std::uint32_t a = index.group(k), l = wg.slot(k, a);
    bool whole = false;
    for (const SentenceSpan span : {index.sentences(k, whole), all}) {
      boost::ExpSum a1, a3;
      ASSERT_TRUE(boost::state_line(p.corpus, scores, one, a, l, span, log_h, a1));
      ASSERT_TRUE(boost::state_line(p.corpus, scores, three, a, l, span, log_h, a3, &pool));
      EXPECT_EQ(a3.low, a1.low) << "weight " << k;
      EXPECT_EQ(a3.coef, a1.coef) << "weight " << k;
      EXPECT_EQ(a3.total, a1.total) << "weight " << k;
      ++lines;
    }
  }
  EXPECT_GT(lines, 6);
  for_each_weight(wg, wg.transitions(), [&](std::size_t k, std::size_t slot) {
    if (slot % 3 != 0) return;
    boost::TransitionLine t1(p.corpus, scores, one, slot, log_h), t3(p.corpus, scores, three, slot, log_h, &pool);
    for (const double d : {-1.5, 0.0, 0.6}) EXPECT_EQ(t3.phi(d), t1.phi(d)) << "weight " << k << ", Δ " << d;
  });
  // The trainer's rounds on a backend of 3 threads (its lines on 3 too) against 1.
  boost::RoundPolicy policy;
  const Rounds r1 = run_rounds(p, policy, 30, BoostRule::gradient, 1);
  const Rounds r3 = run_rounds(p, policy, 30, BoostRule::gradient, 3);
  ASSERT_EQ(r1.w.size(), 30u);
  EXPECT_EQ(r3.w, r1.w);
  EXPECT_EQ(r3.objective, r1.objective);
}

}  // namespace
}  // namespace crfx
