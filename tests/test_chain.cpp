// Forward-backward, log Z, marginals and Viterbi against brute-force enumeration of every label
// sequence on tiny chains (L ≤ 4, T ≤ 6), with ordinary and extreme weights, on both numerical
// paths (scaled exp-space and log-space).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "chain_check.hpp"
#include "cpu/chain.hpp"

namespace crfx {
namespace {

constexpr double kTol = 1e-9;  // absolute, on probabilities; relative on log Z

using test::Chain;
using test::random_chain;

struct Brute {
  double log_z;
  std::vector<double> node;  // [T][L]
  std::vector<double> pair;  // [T][L][L]
  double best;
};

Brute brute_force(const ChainScores& x) {
  const std::size_t T = x.T, L = x.L;
  std::size_t n = 1;
  for (std::size_t t = 0; t < T; ++t) n *= L;
  std::vector<std::uint32_t> y(T);
  std::vector<double> scores(n);
  double m = -INFINITY;
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t r = k;
    for (std::size_t t = 0; t < T; ++t) {
      y[t] = std::uint32_t(r % L);
      r /= L;
    }
    scores[k] = path_score(x, y.data());
    m = std::max(m, scores[k]);
  }
  double s = 0;
  for (double v : scores) s += std::exp(v - m);
  Brute b{m + std::log(s), std::vector<double>(T * L, 0.0), std::vector<double>(T * L * L, 0.0), m};
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t r = k;
    for (std::size_t t = 0; t < T; ++t) {
      y[t] = std::uint32_t(r % L);
      r /= L;
    }
    const double p = std::exp(scores[k] - b.log_z);
    for (std::size_t t = 0; t < T; ++t) {
      b.node[t * L + y[t]] += p;
      if (t > 0) b.pair[(t * L + y[t - 1]) * L + y[t]] += p;
    }
  }
  return b;
}

/// Returns how many times the scaled path fell back to log space.
std::size_t check_against_brute(std::size_t T, std::size_t L, double scale, bool edges, bool log_only,
                                std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "T=" << T << " L=" << L << " scale=" << scale
                                    << " edges=" << edges << " log_only=" << log_only
                                    << " seed=" << seed);
  std::mt19937_64 rng(seed);
  Chain c = random_chain(T, L, scale, edges, rng);
  ChainScores x = c.scores();
  Brute ref = brute_force(x);
  ChainScratch scratch;
  std::vector<double> node(T * L, -1), pair_at(T * L * L, -1), pair_sum(L * L, 0.0);
  ChainOutputs out{node.data(), pair_sum.data(), pair_at.data()};
  const double log_z = forward_backward(x, out, scratch, log_only);
  EXPECT_NEAR(log_z, ref.log_z, kTol * std::max(1.0, std::fabs(ref.log_z)));
  EXPECT_NEAR(log_partition(x, scratch, log_only), ref.log_z, kTol * std::max(1.0, std::fabs(ref.log_z)));
  for (std::size_t i = 0; i < T * L; ++i) EXPECT_NEAR(node[i], ref.node[i], kTol) << "node " << i;
  for (std::size_t t = 1; t < T; ++t)
    for (std::size_t j = 0; j < L * L; ++j)
      EXPECT_NEAR(pair_at[t * L * L + j], ref.pair[t * L * L + j], kTol) << "pair t=" << t << " j=" << j;
  for (std::size_t j = 0; j < L * L; ++j) {
    double s = 0;
    for (std::size_t t = 1; t < T; ++t) s += ref.pair[t * L * L + j];
    EXPECT_NEAR(pair_sum[j], s, kTol * T);
  }
  // The backend's configuration: pair_sum only (no per-position buffer) and, without edge
  // matrices, the caller's precomputed E = exp(τ − τ_max) and its transpose.
  {
    double tmax = -INFINITY;
    for (std::size_t j = 0; j < L * L; ++j) tmax = std::max(tmax, x.trans[j]);
    std::vector<double> E(L * L), Et(L * L);
    for (std::size_t yp = 0; yp < L; ++yp)
      for (std::size_t yc = 0; yc < L; ++yc) {
        E[yp * L + yc] = std::exp(x.trans[yp * L + yc] - tmax);
        Et[yc * L + yp] = E[yp * L + yc];
      }
    ChainScores xf = x;
    xf.exp_trans = E.data();
    xf.exp_trans_t = Et.data();
    xf.trans_max = tmax;
    std::vector<double> node2(T * L, -1), sum2(L * L, 0.0);
    ChainOutputs out2{node2.data(), sum2.data(), nullptr};
    ChainScratch scratch2;
    EXPECT_NEAR(forward_backward(xf, out2, scratch2, log_only), ref.log_z,
                kTol * std::max(1.0, std::fabs(ref.log_z)));
    for (std::size_t i = 0; i < T * L; ++i) EXPECT_NEAR(node2[i], ref.node[i], kTol) << "node (fast) " << i;
    for (std::size_t j = 0; j < L * L; ++j) EXPECT_NEAR(sum2[j], pair_sum[j], kTol * T) << "pair_sum (fast) " << j;
  }
  std::vector<std::uint32_t> y(T);
  const double best = viterbi(x, y.data(), scratch);
  EXPECT_NEAR(best, ref.best, 1e-12 * std::max(1.0, std::fabs(ref.best)));
  EXPECT_NEAR(path_score(x, y.data()), ref.best, 1e-12 * std::max(1.0, std::fabs(ref.best)));
  return scratch.log_space_fallbacks;
}

TEST(Chain, MatchesBruteForceOrdinaryWeights) {
  std::uint64_t seed = 1;
  std::size_t fallbacks = 0;
  for (std::size_t L = 1; L <= 4; ++L)
    for (std::size_t T = 1; T <= 6; ++T)
      for (bool edges : {false, true})
        for (bool log_only : {false, true})
          fallbacks += check_against_brute(T, L, 1.0, edges, log_only, seed++);
  EXPECT_EQ(fallbacks, 0u) << "ordinary weights must stay on the scaled fast path";
}

TEST(Chain, MatchesBruteForceLargeMagnitudes) {
  // Weights of size 30 and 400: exp-space products underflow, the fallback must take over.
  std::uint64_t seed = 100;
  std::size_t fallbacks = 0;
  for (double scale : {30.0, 400.0})
    for (std::size_t L = 2; L <= 4; ++L)
      for (std::size_t T = 1; T <= 6; ++T)
        for (bool edges : {false, true})
          for (bool log_only : {false, true})
            fallbacks += check_against_brute(T, L, scale, edges, log_only, seed++);
  EXPECT_GT(fallbacks, 0u) << "these weights should exercise the log-space fallback";
}

TEST(Chain, UnderflowingChainStillExact) {
  // A chain built so that the scaled recursion underflows: α_0 sits on label 0 (label 1 is
  // e^-800 behind) and every transition out of label 0 costs e^-800 relative to label 1's.
  Chain c{3, 2, {0, -800, 0, 0, 0, 0}, {-800, -800, 0, 0}, {}, {}};
  ChainScores x = c.scores();
  Brute ref = brute_force(x);
  ChainScratch scratch;
  std::vector<double> node(6);
  ChainOutputs out{node.data(), nullptr, nullptr};
  EXPECT_NEAR(forward_backward(x, out, scratch), ref.log_z, kTol * std::fabs(ref.log_z));
  EXPECT_EQ(scratch.log_space_fallbacks, 1u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(node[i], ref.node[i], kTol);
}

TEST(Chain, ViterbiTiesGoToSmallestLabel) {
  Chain zero{4, 3, std::vector<double>(12, 0.0), std::vector<double>(9, 0.0), {}, {}};
  ChainScores x = zero.scores();
  ChainScratch scratch;
  std::vector<std::uint32_t> y(4, 9);
  viterbi(x, y.data(), scratch);
  EXPECT_EQ(y, (std::vector<std::uint32_t>{0, 0, 0, 0}));
  // Labels 1 and 2 tie everywhere and beat 0: the smallest of the tied ids wins.
  Chain tie{3, 3, {0, 5, 5, 0, 5, 5, 0, 5, 5}, std::vector<double>(9, 0.0), {}, {}};
  x = tie.scores();
  viterbi(x, y.data(), scratch);
  EXPECT_EQ(std::vector<std::uint32_t>(y.begin(), y.begin() + 3), (std::vector<std::uint32_t>{1, 1, 1}));
}

/// Every path of a tiny chain with its score (path_score), best first; ties in the n-best order
/// are not resolved here (random weights have none).
std::vector<std::pair<double, std::vector<std::uint32_t>>> all_paths(const ChainScores& x) {
  std::vector<std::pair<double, std::vector<std::uint32_t>>> out;
  std::vector<std::uint32_t> y(x.T, 0);
  while (true) {
    out.emplace_back(path_score(x, y.data()), y);
    std::size_t t = x.T;
    while (t > 0 && ++y[t - 1] == x.L) y[--t] = 0;
    if (t == 0) break;
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

TEST(Chain, NbestMatchesEnumeration) {
  std::mt19937_64 rng(31);
  for (std::size_t L = 1; L <= 4; ++L)
    for (std::size_t T = 1; T <= 5; ++T)
      for (bool edges : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "L " << L << " T " << T << " edges " << edges);
        Chain c = random_chain(T, L, 1.0, edges, rng);
        ChainScores x = c.scores();
        const auto ref = all_paths(x);
        ChainScratch scratch;
        std::vector<std::uint32_t> best(T);
        const double vbest = viterbi(x, best.data(), scratch);
        for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(7), std::size_t(40),
                              ref.size(), ref.size() + 2}) {
          std::vector<std::uint32_t> y(n * T, 99);
          std::vector<double> score(n, 0.0);
          const std::size_t found = viterbi_nbest(x, n, y.data(), score.data(), scratch);
          ASSERT_EQ(found, std::min(n, ref.size())) << n;
          for (std::size_t r = 0; r < found; ++r) {
            const std::vector<std::uint32_t> path(y.begin() + r * T, y.begin() + (r + 1) * T);
            const double tol = 1e-12 * std::max(1.0, std::fabs(ref[r].first));
            EXPECT_NEAR(score[r], ref[r].first, tol) << "rank " << r;
            EXPECT_EQ(path, ref[r].second) << "rank " << r;
            EXPECT_NEAR(path_score(x, path.data()), score[r], tol) << "rank " << r;
          }
          for (std::size_t r = found; r < n; ++r) {
            EXPECT_EQ(score[r], -INFINITY) << r;
            for (std::size_t t = 0; t < T; ++t) EXPECT_EQ(y[r * T + t], 0u);
          }
          // Path 0 is Viterbi's, score bit for bit.
          EXPECT_EQ(std::vector<std::uint32_t>(y.begin(), y.begin() + T), best);
          EXPECT_EQ(score[0], vbest);
        }
      }
}

TEST(Chain, NbestTiesFollowTheStatedOrder) {
  // All 8 paths of T = 3, L = 2 score 0. The rule (ties to the smaller predecessor index, at the
  // end to the smaller label·n + rank) lists them by (y2, y1, y0) ascending.
  Chain zero{3, 2, std::vector<double>(6, 0.0), std::vector<double>(4, 0.0), {}, {}};
  ChainScores x = zero.scores();
  ChainScratch scratch;
  std::vector<std::uint32_t> expected = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0,
                                         0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1};
  for (std::size_t n : {std::size_t(8), std::size_t(20)}) {  // both ways of merging (≤ 16, > 16)
    std::vector<std::uint32_t> y(n * 3, 7);
    std::vector<double> score(n);
    ASSERT_EQ(viterbi_nbest(x, n, y.data(), score.data(), scratch), 8u) << n;
    expected.resize(n * 3, 0u);  // missing paths: labels 0
    EXPECT_EQ(y, expected) << n;
    for (std::size_t r = 0; r < n; ++r) EXPECT_EQ(score[r], r < 8 ? 0.0 : -INFINITY) << n << " " << r;
  }
}

TEST(Chain, EmptySentence) {
  ChainScores x;
  x.T = 0;
  x.L = 3;
  ChainScratch scratch;
  EXPECT_EQ(forward_backward(x, {}, scratch), 0.0);
}

}  // namespace
}  // namespace crfx
