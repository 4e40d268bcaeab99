// The four label-sequence losses of host/cpu/chain_loss.hpp (seq-log, seq-exp, point-log,
// point-exp) on tiny chains (T ≤ 5, L ≤ 4, with and without per-position edge matrices): values
// and gradients against brute-force enumeration of all L^T paths and against central finite
// differences, on both numerical paths; seq-log against chain.cpp's NLL; extreme scores; the
// pointwise gradients' cost linear in T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chain_check.hpp"
#include "cpu/chain.hpp"
#include "cpu/chain_loss.hpp"
#include "crfx/errors.hpp"

namespace crfx {
namespace {

constexpr SequenceLoss kAll[] = {SequenceLoss::seq_log, SequenceLoss::seq_exp, SequenceLoss::point_log,
                                 SequenceLoss::point_exp};
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool is_exp(SequenceLoss l) { return l == SequenceLoss::seq_exp || l == SequenceLoss::point_exp; }
bool is_point(SequenceLoss l) { return l == SequenceLoss::point_log || l == SequenceLoss::point_exp; }

using test::Chain;

/// random_chain with an edge matrix at one position at least (when T ≥ 2 and edges).
Chain random_chain(std::size_t T, std::size_t L, double scale, bool edges, std::mt19937_64& rng) {
  return test::random_chain(T, L, scale, edges, rng, true);
}

/// Scores of ±magnitude, signs at random.
Chain extreme_chain(std::size_t T, std::size_t L, double magnitude, bool edges, std::mt19937_64& rng) {
  Chain c = random_chain(T, L, 1.0, edges, rng);
  auto flip = [&](std::vector<double>& v) {
    for (auto& e : v) e = (rng() % 2 ? magnitude : -magnitude);
  };
  flip(c.state);
  flip(c.trans);
  for (auto& m : c.pos) flip(m);
  return c;
}

std::vector<std::uint32_t> random_gold(std::size_t T, std::size_t L, std::mt19937_64& rng) {
  std::vector<std::uint32_t> y(T);
  for (auto& v : y) v = std::uint32_t(rng() % L);
  return y;
}

double log_sum_exp(const std::vector<double>& v) {
  double m = kNegInf;
  for (double e : v) m = std::max(m, e);
  if (m == kNegInf) return m;
  double s = 0;
  for (double e : v) s += std::exp(e - m);
  return m + std::log(s);
}

/// Loss and gradient (times exp(log_scale)) by enumerating every path, in log space: expectations
/// and conditional expectations are normalised sums over paths, the exponential factors formed
/// from their logs.
struct Reference {
  double value, log_value;
  std::vector<double> node;     // [T][L]
  std::vector<double> pair_at;  // [T][L][L], t = 0 zero
  double grad_max = 0;          // max |entry|
};

Reference brute_force(SequenceLoss loss, const ChainScores& x, const std::uint32_t* gold, double log_scale) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  std::size_t n = 1;
  for (std::size_t t = 0; t < T; ++t) n *= L;
  std::vector<std::vector<std::uint32_t>> paths(n, std::vector<std::uint32_t>(T));
  std::vector<double> F(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t r = k;
    for (std::size_t t = 0; t < T; ++t) {
      paths[k][t] = std::uint32_t(r % L);
      r /= L;
    }
    F[k] = path_score(x, paths[k].data());
  }
  // E[f] over the paths with weights exp(F − log norm), restricted by `keep`.
  auto expect = [&](auto keep, std::vector<double>& node, std::vector<double>& pair) {
    std::vector<double> lw;
    for (std::size_t k = 0; k < n; ++k)
      if (keep(paths[k])) lw.push_back(F[k]);
    const double lz = log_sum_exp(lw);
    node.assign(T * L, 0.0);
    pair.assign(T * LL, 0.0);
    for (std::size_t k = 0; k < n; ++k) {
      if (!keep(paths[k])) continue;
      const double p = std::exp(F[k] - lz);
      for (std::size_t t = 0; t < T; ++t) {
        node[t * L + paths[k][t]] += p;
        if (t > 0) pair[t * LL + paths[k][t - 1] * L + paths[k][t]] += p;
      }
    }
    return lz;
  };
  std::vector<double> en, ep;
  const double log_z = expect([](const std::vector<std::uint32_t>&) { return true; }, en, ep);
  Reference r{0, 0, std::vector<double>(T * L, 0.0), std::vector<double>(T * LL, 0.0), 0};
  auto add = [&](double log_factor, const std::vector<double>& node, const std::vector<double>& pair) {
    const double f = std::exp(log_factor + log_scale);  // ∂loss += f·(E[f] − E_cond[f])
    for (std::size_t i = 0; i < T * L; ++i) r.node[i] += f * (en[i] - node[i]);
    for (std::size_t i = LL; i < T * LL; ++i) r.pair_at[i] += f * (ep[i] - pair[i]);
  };
  if (!is_point(loss)) {
    const std::vector<std::uint32_t> y(gold, gold + T);
    std::vector<double> gn, gp;
    expect([&](const std::vector<std::uint32_t>& p) { return p == y; }, gn, gp);  // the indicators
    const double nll = log_z - path_score(x, gold);
    r.value = is_exp(loss) ? std::exp(nll) : nll;
    r.log_value = is_exp(loss) ? nll : std::log(nll);
    add(is_exp(loss) ? nll : 0.0, gn, gp);
  } else {
    std::vector<double> lmu(T);
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> cn, cp;
      lmu[t] = expect([&](const std::vector<std::uint32_t>& p) { return p[t] == gold[t]; }, cn, cp) - log_z;
      add(is_exp(loss) ? -lmu[t] : 0.0, cn, cp);
    }
    if (is_exp(loss)) {
      std::vector<double> inv(T);
      for (std::size_t t = 0; t < T; ++t) inv[t] = -lmu[t];
      r.log_value = log_sum_exp(inv);
      r.value = std::exp(r.log_value);
    } else {
      r.value = 0;
      for (double v : lmu) r.value -= v;
      r.log_value = std::log(r.value);
    }
  }
  for (double v : r.node) r.grad_max = std::max(r.grad_max, std::fabs(v));
  for (double v : r.pair_at) r.grad_max = std::max(r.grad_max, std::fabs(v));
  return r;
}

struct Computed {
  LossValue v, v_only;  // with the gradient, and without any output
  std::vector<double> node, pair_at, pair_sum, pair_sum_prefill;
};

/// sequence_loss with every output: node and pair_at prefilled with garbage (they must be
/// written, pair_at's t = 0 zeroed), pair_sum with values it must add to.
Computed run(SequenceLoss loss, const ChainScores& x, const std::uint32_t* gold, bool log_only,
             LossScratch& scratch, double log_scale = 0) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  Computed c{{}, {}, std::vector<double>(T * L, 7.5), std::vector<double>(T * LL, -3.25),
             std::vector<double>(LL), std::vector<double>(LL)};
  for (std::size_t j = 0; j < LL; ++j) c.pair_sum_prefill[j] = c.pair_sum[j] = 0.125 * double(j + 1);
  LossGradient g;
  g.node = c.node.data();
  g.pair_sum = c.pair_sum.data();
  g.pair_at = c.pair_at.data();
  g.log_scale = log_scale;
  c.v = sequence_loss(loss, x, gold, g, scratch, log_only);
  c.v_only = sequence_loss(loss, x, gold, LossGradient{}, scratch, log_only);
  return c;
}

void expect_matches(const Computed& c, const Reference& ref, const ChainScores& x, double tol) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const double vtol = tol * std::max(1.0, std::fabs(ref.value));
  if (std::isfinite(ref.value)) {
    EXPECT_NEAR(c.v.value, ref.value, vtol) << "value";
    EXPECT_NEAR(c.v_only.value, ref.value, vtol) << "value without gradient";
  }
  if (std::isfinite(ref.log_value)) {
    EXPECT_NEAR(c.v.log_value, ref.log_value, tol * std::max(1.0, std::fabs(ref.log_value))) << "log value";
    EXPECT_NEAR(c.v_only.log_value, ref.log_value, tol * std::max(1.0, std::fabs(ref.log_value)));
  }
  const double gtol = tol * std::max(1.0, ref.grad_max);
  for (std::size_t i = 0; i < T * L; ++i) EXPECT_NEAR(c.node[i], ref.node[i], gtol) << "node " << i;
  for (std::size_t j = 0; j < LL; ++j) EXPECT_EQ(c.pair_at[j], 0.0) << "pair_at at t = 0, " << j;
  for (std::size_t i = LL; i < T * LL; ++i) EXPECT_NEAR(c.pair_at[i], ref.pair_at[i], gtol) << "pair_at " << i;
  for (std::size_t j = 0; j < LL; ++j) {
    double s = c.pair_sum_prefill[j];
    for (std::size_t t = 1; t < T; ++t) s += ref.pair_at[t * LL + j];
    EXPECT_NEAR(c.pair_sum[j], s, gtol * double(T)) << "pair_sum " << j;
  }
}

TEST(ChainLoss, ValuesAndGradientsMatchBruteForce) {
  std::mt19937_64 rng(2003);
  LossScratch scratch;
  for (SequenceLoss loss : kAll)
    for (std::size_t L = 1; L <= 4; ++L)
      for (std::size_t T = 1; T <= 5; ++T)
        for (bool edges : {false, true})
          for (bool log_only : {false, true}) {
            SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << " L=" << L << " T=" << T
                                              << " edges=" << edges << " log_only=" << log_only);
            Chain ch = random_chain(T, L, 1.0, edges, rng);
            ChainScores x = ch.scores();
            const auto gold = random_gold(T, L, rng);
            const Computed c = run(loss, x, gold.data(), log_only, scratch);
            expect_matches(c, brute_force(loss, x, gold.data(), 0.0), x, 1e-9);
          }
  // The log_only runs of the point losses (2 losses × 4 L × 5 T × 2 edges), two calls each.
  EXPECT_EQ(scratch.log_space_paths, 2u * 4 * 5 * 2 * 2)
      << "ordinary scores must stay on the scaled path";
}

TEST(ChainLoss, GradientsMatchCentralDifferences) {
  std::mt19937_64 rng(77);
  LossScratch scratch;
  const double h = 1e-5;
  for (SequenceLoss loss : kAll)
    for (std::size_t L = 1; L <= 4; ++L)
      for (std::size_t T = 1; T <= 5; ++T)
        for (bool edges : {false, true}) {
          SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << " L=" << L << " T=" << T
                                            << " edges=" << edges);
          Chain ch = random_chain(T, L, 0.7, edges, rng);
          ChainScores x = ch.scores();
          const auto gold = random_gold(T, L, rng);
          const std::size_t LL = L * L;
          std::vector<double> node(T * L), pair_at(T * LL), pair_sum(LL, 0.0);
          const LossValue v = sequence_loss(loss, x, gold.data(), {node.data(), pair_sum.data(), pair_at.data()}, scratch);
          const double tol = 1e-6 * std::max(1.0, std::fabs(v.value));
          auto central = [&](double& score) {
            const double keep = score;
            score = keep + h;
            const double up = sequence_loss(loss, ch.scores(), gold.data(), {}, scratch).value;
            score = keep - h;
            const double down = sequence_loss(loss, ch.scores(), gold.data(), {}, scratch).value;
            score = keep;
            return (up - down) / (2 * h);
          };
          for (std::size_t i = 0; i < T * L; ++i) EXPECT_NEAR(central(ch.state[i]), node[i], tol) << "state " << i;
          // The shared matrix moves the positions without an edge matrix; an edge matrix its own.
          for (std::size_t j = 0; j < LL; ++j) {
            double expected = 0;
            for (std::size_t t = 1; t < T; ++t)
              if (!ch.has_edge(t)) expected += pair_at[t * LL + j];
            EXPECT_NEAR(central(ch.trans[j]), expected, tol) << "trans " << j;
            if (!edges) {
              EXPECT_NEAR(pair_sum[j], expected, 1e-12 * std::max(1.0, std::fabs(expected)));
            }
          }
          for (std::size_t t = 1; t < T; ++t) {
            if (!ch.has_edge(t)) continue;
            for (std::size_t j = 0; j < LL; ++j)
              EXPECT_NEAR(central(ch.pos[t][j]), pair_at[t * LL + j], tol) << "edge t=" << t << " " << j;
          }
        }
}

TEST(ChainLoss, SeqLogIsTheChainNll) {
  // Value and gradient exactly as the CPU backend forms the NLL from forward_backward.
  std::mt19937_64 rng(5);
  for (std::size_t L = 1; L <= 4; ++L)
    for (std::size_t T = 1; T <= 6; ++T)
      for (bool edges : {false, true})
        for (bool log_only : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "L=" << L << " T=" << T << " edges=" << edges << " log_only=" << log_only);
          Chain ch = random_chain(T, L, 2.0, edges, rng);
          ChainScores x = ch.scores();
          const auto gold = random_gold(T, L, rng);
          const std::size_t LL = L * L;
          ChainScratch cs;
          std::vector<double> node(T * L), pair(LL, 0.0), edge(T * LL);
          const double nll = forward_backward(x, {node.data(), pair.data(), edge.data()}, cs, log_only) -
                             path_score(x, gold.data());
          for (std::size_t t = 0; t < T; ++t) {
            node[t * L + gold[t]] -= 1.0;
            if (t == 0) continue;
            pair[gold[t - 1] * L + gold[t]] -= 1.0;
            edge[t * LL + gold[t - 1] * L + gold[t]] -= 1.0;
          }
          std::fill(edge.begin(), edge.begin() + LL, 0.0);
          LossScratch scratch;
          std::vector<double> gnode(T * L), gpair(LL, 0.0), gedge(T * LL);
          const LossValue v = sequence_loss(SequenceLoss::seq_log, x, gold.data(),
                                            {gnode.data(), gpair.data(), gedge.data()}, scratch, log_only);
          EXPECT_EQ(v.value, nll);
          EXPECT_EQ(sequence_loss(SequenceLoss::seq_log, x, gold.data(), {}, scratch, log_only).value, nll);
          EXPECT_EQ(gnode, node);
          EXPECT_EQ(gpair, pair);
          EXPECT_EQ(gedge, edge);
        }
}

TEST(ChainLoss, LengthOneAndOneLabel) {
  // T = 1: the pointwise losses are the sequence ones. L = 1: p = 1, nothing to learn.
  std::mt19937_64 rng(11);
  LossScratch scratch;
  for (std::size_t L = 1; L <= 4; ++L) {
    Chain ch = random_chain(1, L, 1.5, false, rng);
    ChainScores x = ch.scores();
    const auto gold = random_gold(1, L, rng);
    for (auto [seq, point] : {std::pair(SequenceLoss::seq_log, SequenceLoss::point_log),
                              std::pair(SequenceLoss::seq_exp, SequenceLoss::point_exp)}) {
      std::vector<double> a(L), b(L), pa(L * L, 1.0), pb(L * L, 1.0);
      const double va = sequence_loss(seq, x, gold.data(), {a.data(), pa.data(), nullptr}, scratch).value;
      const double vb = sequence_loss(point, x, gold.data(), {b.data(), pb.data(), nullptr}, scratch).value;
      EXPECT_NEAR(va, vb, 1e-14 * std::max(1.0, va)) << sequence_loss_name(point) << " L=" << L;
      for (std::size_t y = 0; y < L; ++y) EXPECT_NEAR(a[y], b[y], 1e-14 * std::max(1.0, va)) << y;
      EXPECT_EQ(pa, std::vector<double>(L * L, 1.0)) << "T = 1 has no transition";
      EXPECT_EQ(pb, std::vector<double>(L * L, 1.0));
    }
  }
  for (std::size_t T = 1; T <= 5; ++T) {
    Chain ch = random_chain(T, 1, 3.0, true, rng);
    ChainScores x = ch.scores();
    const std::vector<std::uint32_t> gold(T, 0);
    for (SequenceLoss loss : kAll)
      for (bool log_only : {false, true}) {
        std::vector<double> node(T, 9.0), pair_at(T, 9.0), pair_sum(1, 0.0);
        const LossValue v = sequence_loss(loss, x, gold.data(), {node.data(), pair_sum.data(), pair_at.data()},
                                          scratch, log_only);
        const double expected = loss == SequenceLoss::seq_exp ? 1.0 : loss == SequenceLoss::point_exp ? double(T) : 0.0;
        EXPECT_NEAR(v.value, expected, 1e-13) << sequence_loss_name(loss) << " T=" << T;
        for (std::size_t t = 0; t < T; ++t) {
          EXPECT_NEAR(node[t], 0.0, 1e-13) << sequence_loss_name(loss) << " T=" << T;
          EXPECT_NEAR(pair_at[t], 0.0, 1e-13);
        }
        EXPECT_NEAR(pair_sum[0], 0.0, 1e-13);
      }
  }
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}
bool any_nan(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double e) { return std::isnan(e); });
}

TEST(ChainLoss, ExtremeScoresStayFiniteAndExact) {
  // Scores of ±500 (and ±30, where the scaled path still runs): the gold marginals and p(y*) go
  // far below the double range. The log losses stay finite and exact; the exponential ones give
  // a finite log_value, a value that is +inf only beyond the double range, never NaN, and with
  // log_scale = −log_value a finite gradient that matches enumeration.
  std::mt19937_64 rng(500);
  LossScratch scratch;
  std::size_t overflowing = 0;
  for (double magnitude : {30.0, 500.0})
    for (SequenceLoss loss : kAll)
      for (std::size_t L = 2; L <= 4; ++L)
        for (std::size_t T = 1; T <= 5; ++T)
          for (bool edges : {false, true})
            for (bool log_only : {false, true}) {
              SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << " ±" << magnitude << " L=" << L
                                                << " T=" << T << " edges=" << edges << " log_only=" << log_only);
              Chain ch = extreme_chain(T, L, magnitude, edges, rng);
              ChainScores x = ch.scores();
              const auto gold = random_gold(T, L, rng);
              const Reference ref0 = brute_force(loss, x, gold.data(), 0.0);
              ASSERT_TRUE(std::isfinite(ref0.log_value) || !is_exp(loss));
              // Unscaled: exact where representable, never NaN.
              const Computed c = run(loss, x, gold.data(), log_only, scratch);
              EXPECT_FALSE(std::isnan(c.v.value));
              EXPECT_FALSE(any_nan(c.node) || any_nan(c.pair_at) || any_nan(c.pair_sum));
              if (!is_exp(loss) || ref0.log_value < 700) {
                EXPECT_TRUE(std::isfinite(c.v.value));
                EXPECT_TRUE(all_finite(c.node) && all_finite(c.pair_at) && all_finite(c.pair_sum));
                expect_matches(c, ref0, x, 1e-9);
              } else {
                ++overflowing;
                EXPECT_TRUE(std::isfinite(c.v.log_value));
                EXPECT_NEAR(c.v.log_value, ref0.log_value, 1e-9 * ref0.log_value);
                EXPECT_EQ(c.v.value, ref0.log_value > 710 ? INFINITY : std::exp(c.v.log_value));
              }
              if (!is_exp(loss)) continue;
              // Scaled by 1/loss: ∂log(loss), finite and exact.
              const double ls = -ref0.log_value;
              const Computed s = run(loss, x, gold.data(), log_only, scratch, ls);
              EXPECT_TRUE(all_finite(s.node) && all_finite(s.pair_at) && all_finite(s.pair_sum));
              expect_matches(s, brute_force(loss, x, gold.data(), ls), x, 1e-9);
            }
  EXPECT_GT(overflowing, 0u) << "±500 should drive some exponential losses beyond the double range";
  EXPECT_GT(scratch.log_space_paths, 100u) << "extreme scores should reach the log-space path";
}

TEST(ChainLoss, ExtremeScoresWithViterbiGoldAreFinite) {
  // With the best path as gold, p(y*) ≥ L^−T and every gold marginal ≥ p(y*): all four losses and
  // their unscaled gradients are finite however large the scores.
  std::mt19937_64 rng(501);
  LossScratch scratch;
  for (SequenceLoss loss : kAll)
    for (std::size_t L = 2; L <= 4; ++L)
      for (std::size_t T = 1; T <= 6; ++T) {
        SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << " L=" << L << " T=" << T);
        Chain ch = extreme_chain(T, L, 500.0, true, rng);
        ChainScores x = ch.scores();
        std::vector<std::uint32_t> gold(T);
        ChainScratch cs;
        viterbi(x, gold.data(), cs);
        const Computed c = run(loss, x, gold.data(), false, scratch);
        EXPECT_TRUE(std::isfinite(c.v.value));
        if (is_exp(loss)) {
          EXPECT_TRUE(std::isfinite(c.v.log_value));
        }
        EXPECT_LE(c.v.value, is_exp(loss) ? double(T) * std::pow(double(L), double(T)) : double(T) * T * std::log(L));
        EXPECT_TRUE(all_finite(c.node) && all_finite(c.pair_at) && all_finite(c.pair_sum));
      }
}

TEST(ChainLoss, PointwiseCostIsLinearInLength) {
  // One forward_backward and exactly 2·(T−1)·L² pair steps on the scaled path (4·(T−1)·L² on the
  // log-space one), for T up to 64: no per-position forward-backward (that would be T calls and
  // O(T²·L²) steps). Both paths agree on these long chains.
  std::mt19937_64 rng(64);
  for (SequenceLoss loss : {SequenceLoss::point_log, SequenceLoss::point_exp})
    for (std::size_t L = 1; L <= 4; ++L)
      for (std::size_t T = 1; T <= 64; T += (T < 8 ? 1 : 7)) {
        SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << " L=" << L << " T=" << T);
        Chain ch = random_chain(T, L, 0.5, true, rng);
        ChainScores x = ch.scores();
        const auto gold = random_gold(T, L, rng);
        const std::size_t LL = L * L;
        std::vector<double> node(T * L), pair_at(T * LL), pair_sum(LL, 0.0);
        std::vector<double> lnode(T * L), lpair_at(T * LL), lpair_sum(LL, 0.0);
        LossScratch fast, slow;
        const LossValue a = sequence_loss(loss, x, gold.data(), {node.data(), pair_sum.data(), pair_at.data()}, fast);
        EXPECT_EQ(fast.chain_calls, 1u);
        EXPECT_EQ(fast.steps, 2 * (T - 1) * LL);
        EXPECT_EQ(fast.log_space_paths, 0u);
        const LossValue b = sequence_loss(loss, x, gold.data(), {lnode.data(), lpair_sum.data(), lpair_at.data()},
                                          slow, true);
        EXPECT_EQ(slow.chain_calls, 0u);
        EXPECT_EQ(slow.steps, 4 * (T - 1) * LL);
        EXPECT_EQ(slow.log_space_paths, 1u);
        const double tol = 1e-9 * std::max(1.0, a.value);
        EXPECT_NEAR(a.value, b.value, tol);
        for (std::size_t i = 0; i < T * L; ++i) EXPECT_NEAR(node[i], lnode[i], tol) << i;
        for (std::size_t i = 0; i < T * LL; ++i) EXPECT_NEAR(pair_at[i], lpair_at[i], tol) << i;
        for (std::size_t j = 0; j < LL; ++j) EXPECT_NEAR(pair_sum[j], lpair_sum[j], tol * T) << j;
      }
}

TEST(ChainLoss, SequenceLossesMakeOneChainPass) {
  std::mt19937_64 rng(3);
  Chain ch = random_chain(9, 3, 1.0, true, rng);
  ChainScores x = ch.scores();
  const auto gold = random_gold(9, 3, rng);
  std::vector<double> node(27), pair_sum(9, 0.0);
  for (SequenceLoss loss : {SequenceLoss::seq_log, SequenceLoss::seq_exp}) {
    LossScratch scratch;
    sequence_loss(loss, x, gold.data(), {node.data(), pair_sum.data(), nullptr}, scratch);
    EXPECT_EQ(scratch.chain_calls, 1u);
    EXPECT_EQ(scratch.steps, 0u);
  }
}

TEST(ChainLoss, ParsesTheFourNames) {
  for (SequenceLoss loss : kAll) EXPECT_EQ(parse_sequence_loss(sequence_loss_name(loss)), loss);
  EXPECT_EQ(parse_sequence_loss("seq-log"), SequenceLoss::seq_log);
  EXPECT_EQ(parse_sequence_loss("seq-exp"), SequenceLoss::seq_exp);
  EXPECT_EQ(parse_sequence_loss("point-log"), SequenceLoss::point_log);
  EXPECT_EQ(parse_sequence_loss("point-exp"), SequenceLoss::point_exp);
  EXPECT_EQ(sequence_loss_names(), "seq-log, seq-exp, point-log, point-exp");
  for (const char* bad : {"nll", "", "seq_log", "Seq-Log", "point-exp "}) {
    try {
      parse_sequence_loss(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("seq-log, seq-exp, point-log, point-exp"), std::string::npos) << what;
    }
  }
}

TEST(ChainLoss, RejectsLabelsOutOfRangeAndHandlesEmptySentences) {
  std::mt19937_64 rng(9);
  Chain ch = random_chain(3, 3, 1.0, false, rng);
  ChainScores x = ch.scores();
  const std::vector<std::uint32_t> bad = {0, 3, 1};
  LossScratch scratch;
  for (SequenceLoss loss : kAll) EXPECT_THROW(sequence_loss(loss, x, bad.data(), {}, scratch), Error);
  ChainScores empty;
  empty.L = 3;
  double sum[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (SequenceLoss loss : kAll) {
    const LossValue v = sequence_loss(loss, empty, nullptr, {nullptr, sum, nullptr}, scratch);
    EXPECT_EQ(v.value, loss == SequenceLoss::seq_exp ? 1.0 : 0.0) << sequence_loss_name(loss);
  }
  for (double s : sum) EXPECT_EQ(s, 1.0);
}

}  // namespace
}  // namespace crfx
