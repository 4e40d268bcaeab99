// SAG / SAGA's sampler as host and device share it (host/rules/sag_sampler.hpp, issue 37): its
// MT19937-64 against std::mt19937_64 (outputs and the textual state, both ways), and its draws,
// probabilities and L_i bookkeeping against the host-only sampler it replaced (kept here as the
// reference: std::mt19937_64, std::min / std::max, the formulas as they were written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "rules/sag_sampler.hpp"
#include "sampler_state.hpp"

namespace crfx {
namespace {

TEST(SagSampler, MersenneTwisterEqualsTheStandardEngine) {
  for (std::uint64_t seed : {std::uint64_t(5489), std::uint64_t(0), std::uint64_t(5), ~std::uint64_t(0),
                             std::uint64_t(0x0123456789abcdefULL)}) {
    SCOPED_TRACE(seed);
    std::mt19937_64 ref(seed);
    Mt19937_64 ours;
    ours.seed(seed);
    std::size_t differ = 0;
    for (int i = 0; i < 100000; ++i) differ += ours() != ref();
    EXPECT_EQ(differ, 0u);
  }
}

TEST(SagSampler, MersenneTwisterStateRoundTrips) {
  // Mid-stream (p ≠ 0, kN) and at a twist's edge (312 draws: p = kN), both directions.
  for (int advance : {0, 1, 777, 312, 624}) {
    SCOPED_TRACE(advance);
    std::mt19937_64 ref(42);
    for (int i = 0; i < advance; ++i) ref();
    Mt19937_64 ours{};
    ASSERT_TRUE(from_std(ref, ours));
    std::mt19937_64 back;
    to_std(ours, back);
    std::ostringstream a, b;
    a << ref;
    b << back;
    EXPECT_EQ(a.str(), b.str()) << "the textual state after the round trip";
    std::size_t differ = 0;
    for (int i = 0; i < 10000; ++i) {
      const std::uint64_t r = ref();
      differ += ours() != r;
      differ += back() != r;
    }
    EXPECT_EQ(differ, 0u);
  }
}

/// The sampler as host/optim/sag.cpp had it before it was shared (std::mt19937_64, the tree with
/// std::max and std::min): the reference the shared one must draw alike with.
struct OldSampler {
  std::size_t n, size = 1, m = 0;
  int mode;  // 0 uniform, 1 lipschitz, 2 mixed
  std::mt19937_64 gen;
  std::vector<double> sum, max;
  std::vector<char> seen;
  OldSampler(std::size_t n_, int mode_, std::uint64_t seed) : n(n_), mode(mode_), gen(seed), seen(n_, 0) {
    while (size < n) size *= 2;
    sum.assign(2 * size, 0.0);
    max.assign(2 * size, 0.0);
  }
  double uniform() { return double(gen() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t k) { return std::min(k - 1, std::size_t(uniform() * double(k))); }
  double get(std::size_t i) const { return sum[size + i]; }
  void set(std::size_t i, double v) {
    std::size_t k = size + i;
    sum[k] = max[k] = v;
    for (k /= 2; k >= 1; k /= 2) {
      sum[k] = sum[2 * k] + sum[2 * k + 1];
      max[k] = std::max(max[2 * k], max[2 * k + 1]);
    }
  }
  std::size_t sample(double u) const {
    double target = u * sum[1];
    std::size_t k = 1;
    while (k < size) {
      if (target < sum[2 * k] || sum[2 * k + 1] <= 0) {
        k = 2 * k;
      } else {
        target -= sum[2 * k];
        k = 2 * k + 1;
      }
    }
    return std::min(k - size, n - 1);
  }
  double q() const { return mode == 2 ? 0.5 : double(m) / double(n); }
  double probability(std::size_t j) const {
    const double seen_l = seen[j] ? get(j) : 0.0, tot = sum[1];
    if (mode == 0 || m == 0 || !(tot > 0)) return 1.0 / double(n);
    return (1.0 - q()) / double(n) + q() * seen_l / tot;
  }
  std::size_t draw() {
    if (mode == 0 || m == 0 || !(sum[1] > 0)) return below(n);
    const double u = uniform();
    if (u >= q()) return below(n);
    return sample(uniform());
  }
  void visit(std::size_t j) {
    if (!seen[j]) {
      double Li = 1.0;
      if (mode == 2 && m > 0) Li = 0.5 * sum[1] / double(m);
      seen[j] = 1;
      ++m;
      if (mode != 0) set(j, Li);
    } else if (mode != 0) {
      set(j, get(j) * (mode == 2 ? 0.9 : 0.5));
    }
  }
  double step_size(double lip_mult, double lambda) const {
    if (mode == 2) {
      const double Lbar = sum[1] / double(m);
      return 0.5 * (1.0 / (lip_mult * max[1] + lambda) + 1.0 / (lip_mult * Lbar + lambda));
    }
    return 1.0 / (lip_mult * max[1] + lambda);
  }
};

// Steps of batch size 1 as the trainer takes them — draw, probability, visit, the line search's
// L (here L0 doubled up to a pseudo-random constant) and α — on n = 1, 7 and 1000 sentences: the
// shared sampler's sentences, probabilities, L_i and α are the old one's, bit for bit.
TEST(SagSampler, DrawsAsTheHostSamplerDid) {
  for (SamplerMode mode : {SamplerMode::uniform, SamplerMode::lipschitz, SamplerMode::mixed}) {
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(1000)}) {
      SCOPED_TRACE(::testing::Message() << "mode " << int(mode) << ", n = " << n);
      OldSampler old(n, int(mode), 5);
      SamplerState shared(n, mode, 5);
      SagSamplerScalars& sc = shared.sc;
      const std::vector<double>&sum = shared.sum, &max = shared.max;
      const std::vector<char>& seen = shared.seen;
      const SagSamplerRef r = shared.ref();
      std::mt19937 found(9);  // the constants the "line search" finds
      std::size_t differ = 0;
      for (int step = 0; step < 5000; ++step) {
        const std::size_t j_old = old.draw();
        const double p_old = old.probability(j_old);
        old.visit(j_old);
        const SagDraw x = r.draw_one();
        differ += x.id != j_old || x.prob != p_old;
        if (mode == SamplerMode::uniform) continue;
        const std::uint32_t id = x.id;
        const double L0 = r.span_lipschitz(&id, 1);
        differ += L0 != old.get(j_old);
        double Lb = L0;  // doubled up to the sentence's "true" constant, as the line search does
        while (Lb < double(1 + (id + found()) % 5)) Lb *= 2.0;
        r.found(&id, 1, L0, Lb);
        if (Lb != L0) old.set(j_old, old.get(j_old) * (Lb / L0));
        differ += r.step_size(3.0, 1e-3) != old.step_size(3.0, 1e-3);
      }
      EXPECT_EQ(differ, 0u);
      EXPECT_EQ(sum, old.sum);
      EXPECT_EQ(max, old.max);
      EXPECT_EQ(sc.m, old.m);
      EXPECT_EQ(seen, old.seen);
    }
  }
}

// Batches of B distinct sentences (draw_span) as the trainer drew them before they were shared
// (SagSampler::draw_batch: a repeat redrawn by a flag per sentence, each probability at its draw,
// then the visits): on n = 9 and 1000 at B = 2, 5 and 9 (every sentence, n = 9), the same ids,
// probabilities, L_i and RNG, bit for bit.
TEST(SagSampler, SpansDrawAsTheHostSamplerDid) {
  for (SamplerMode mode : {SamplerMode::uniform, SamplerMode::lipschitz, SamplerMode::mixed}) {
    for (std::size_t n : {std::size_t(9), std::size_t(1000)}) {
      for (std::size_t B : {std::size_t(2), std::size_t(5), std::size_t(9)}) {
        SCOPED_TRACE(::testing::Message() << "mode " << int(mode) << ", n = " << n << ", B = " << B);
        OldSampler old(n, int(mode), 11);
        SamplerState shared(n, mode, 11);
        SagSamplerScalars& sc = shared.sc;
        std::vector<char> in_batch(n, 0);
        const SagSamplerRef r = shared.ref();
        std::vector<std::uint32_t> ids(B), ids_old(B);
        std::vector<double> prob(B), prob_old(B);
        std::size_t differ = 0, repeats = 0;
        for (int step = 0; step < 400; ++step) {
          for (std::size_t i = 0; i < B; ++i) {
            std::size_t j;
            for (j = old.draw(); in_batch[j]; j = old.draw()) ++repeats;
            in_batch[j] = 1;
            ids_old[i] = std::uint32_t(j);
            prob_old[i] = old.probability(j);
          }
          for (std::size_t i = 0; i < B; ++i) in_batch[ids_old[i]] = 0;
          for (std::size_t i = 0; i < B; ++i) old.visit(ids_old[i]);
          r.draw_span(ids.data(), prob.data(), B);
          differ += ids != ids_old || prob != prob_old;
        }
        EXPECT_EQ(differ, 0u);
        if (n == 9) EXPECT_GT(repeats, 0u) << "no repeat was redrawn";
        EXPECT_EQ(shared.sum, old.sum);
        EXPECT_EQ(sc.m, old.m);
        EXPECT_EQ(sc.rng(), old.gen()) << "the generators after the draws";
      }
    }
  }
}

}  // namespace
}  // namespace crfx
