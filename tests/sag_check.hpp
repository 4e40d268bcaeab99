// The SAG / SAGA backend primitives (seed 004) against the explicit algorithm, for any backend:
// shared by the CPU tests (test_sag.cpp) and the GPU tests (gpu/test_cuda_backend.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "rules/sag_update.hpp"
#include "random_problem.hpp"

namespace crfx::test {

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

/// Runs a fixed sequence of spans through the SAG primitives and, side by side, the explicit
/// algorithm (per-sentence gradients from evaluate(), dense d and w). Compares d and w.
inline void check_sag_against_explicit(Backend& b, const RandomProblem& p, bool with_coef, bool tiny_a) {
  auto corpus = b.upload(p.corpus);
  const std::size_t W = p.dims.num_weights(), n = p.corpus.num_sentences();
  auto state = incremental_gradients(b).incremental_create(*corpus);
  auto w = to_backend(b, test::random_weights(W, 0.3, 5));
  auto d = b.vector(W);
  std::vector<double> we = to_host(b, *w), de(W, 0.0);
  std::vector<std::vector<double>> stored(n, std::vector<double>(W, 0.0));

  const std::vector<std::vector<std::uint32_t>> spans = {
      {0}, {3, 1}, {0}, {5}, {2, 4, 8}, {1}, {6, 7}, {0, 3}, {8}, {4}, {2}, {7, 5, 1}};
  for (std::size_t k = 0; k < spans.size(); ++k) {
    const auto& sp = spans[k];
    const SentenceSpan span{sp.data(), sp.size()};
    incremental_gradients(b).incremental_sync(*state, span, *w, *d);
    double g2 = 0;
    const double loss = incremental_gradients(b).incremental_evaluate(*state, *w, &g2);

    // Explicit: per-sentence gradients at the explicit (dense) w.
    auto wv = to_backend(b, we);
    double loss_e = 0;
    std::vector<double> gsum(W, 0.0);
    std::vector<std::vector<double>> gi;
    for (std::uint32_t s : sp) {
      auto g = b.vector(W);
      loss_e += b.evaluate(*corpus, *wv, SentenceSpan{&s, 1}, g.get(), 1.0);
      gi.push_back(to_host(b, *g));
      for (std::size_t j = 0; j < W; ++j) gsum[j] += gi.back()[j];
    }
    double g2e = 0;
    for (double x : gsum) g2e += x * x;
    EXPECT_NEAR(loss, loss_e, 1e-10 * std::max(1.0, loss_e)) << "step " << k;
    EXPECT_NEAR(g2, g2e, 1e-9 * std::max(1.0, g2e)) << "step " << k;

    // The line-search trial point restores bit-exactly.
    const auto before = to_host(b, *w);
    incremental_gradients(b).incremental_trial(*state, *w, 0.37);
    const auto moved = to_host(b, *w);
    for (std::size_t j = 0; j < W; ++j) EXPECT_NEAR(moved[j], before[j] - 0.37 * gsum[j], 1e-12);
    incremental_gradients(b).incremental_restore(*state, *w);
    const auto after = to_host(b, *w);
    EXPECT_EQ(std::memcmp(before.data(), after.data(), W * sizeof(double)), 0);

    std::vector<double> coef(sp.size(), 0.0);
    for (std::size_t i = 0; i < sp.size(); ++i) coef[i] = with_coef ? 0.05 * double(i + 1) : 0.0;
    incremental_gradients(b).incremental_commit(*state, *d, *w, with_coef ? coef.data() : nullptr);
    for (std::size_t i = 0; i < sp.size(); ++i) {
      auto& old = stored[sp[i]];
      for (std::size_t j = 0; j < W; ++j) {
        const double delta = gi[i][j] - old[j];
        de[j] += delta;
        we[j] -= coef[i] * delta;
      }
      old = gi[i];
    }
    // tiny_a drives P = Π a below 1e-150 so that incremental_step flushes by itself mid-sequence.
    const double a = tiny_a ? 1e-40 : 1.0 - 0.01 * double(k % 3), bb = 0.02 + 0.01 * double(k % 2);
    incremental_gradients(b).incremental_step(*state, a, bb, 0.0, *w, *d);
    for (std::size_t j = 0; j < W; ++j) we[j] = a * we[j] - bb * de[j];
  }
  incremental_gradients(b).incremental_flush(*state, *w, *d);
  EXPECT_LT(max_abs_diff(to_host(b, *d), de), 1e-10);
  EXPECT_LT(max_abs_diff(to_host(b, *w), we), 1e-10);
}

/// incremental_search against the primitives it stands for (incremental_evaluate, then the
/// trials of SagLineSearch through incremental_trial / evaluate / incremental_restore, each loss
/// read by the host): two states stepped side by side, one through each, must give the same L,
/// the same number of trials and, after the commit and a step, bitwise the same w and d. L0 from
/// tiny (many doublings: several of a device's rounds) to large (the first trial accepted), and
/// spans of one sentence (the CUDA backend's device path) and of several (its host path).
inline void check_search_equals_primitives(Backend& b, const RandomProblem& p) {
  auto corpus = b.upload(p.corpus);
  const std::size_t W = p.dims.num_weights();
  IncrementalGradients& ig = incremental_gradients(b);
  auto sa = ig.incremental_create(*corpus), sb = ig.incremental_create(*corpus);
  auto wa = to_backend(b, test::random_weights(W, 0.3, 5)), wb = to_backend(b, to_host(b, *wa));
  auto da = b.vector(W), db = b.vector(W);
  const std::vector<std::vector<std::uint32_t>> spans = {{0}, {3}, {2, 4}, {0}, {5}, {1, 6, 7}, {3}, {8}};
  const double starts[] = {1e-6, 1e3, 0.25, 1e-3, 1.0, 1e-9, 2.0, 1e-4};
  unsigned most = 0;
  for (std::size_t k = 0; k < spans.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << "step " << k << " L0 " << starts[k]);
    const SentenceSpan span{spans[k].data(), spans[k].size()};
    ig.incremental_sync(*sa, span, *wa, *da);
    ig.incremental_sync(*sb, span, *wb, *db);
    const LipschitzFound found = ig.incremental_search(*sa, *wa, starts[k]);
    double g2 = 0;
    const double f = ig.incremental_evaluate(*sb, *wb, &g2);  // before g2 is read
    SagLineSearch ls(f, g2, double(span.count), starts[k]);
    while (!ls.done) {
      ig.incremental_trial(*sb, *wb, ls.step());
      ls.tried(b.evaluate(*corpus, *wb, span, nullptr, 1.0));
      ig.incremental_restore(*sb, *wb);
    }
    EXPECT_EQ(found.L, ls.L);
    EXPECT_EQ(found.trials, ls.trials);
    most = std::max(most, found.trials);
    EXPECT_TRUE(to_host(b, *wa) == to_host(b, *wb)) << "w after the search: not restored alike";
    const double alpha = 1.0 / (found.L + 0.01);
    ig.incremental_commit(*sa, *da, *wa, nullptr);
    ig.incremental_commit(*sb, *db, *wb, nullptr);
    ig.incremental_step(*sa, 1.0 - alpha * 0.01, alpha / 9, 0.0, *wa, *da);
    ig.incremental_step(*sb, 1.0 - alpha * 0.01, alpha / 9, 0.0, *wb, *db);
  }
  ig.incremental_flush(*sa, *wa, *da);
  ig.incremental_flush(*sb, *wb, *db);
  EXPECT_TRUE(to_host(b, *wa) == to_host(b, *wb)) << "w: not bitwise equal";
  EXPECT_TRUE(to_host(b, *da) == to_host(b, *db)) << "d: not bitwise equal";
  EXPECT_GE(most, 6u) << "no search needed several rounds of trials";
}

/// One group lagging several steps with soft-thresholding (τ > 0): weights that stay on one side
/// of 0 (or stay at 0) get exactly the step-by-step prox.
inline void check_sag_lazy_prox(Backend& b, const RandomProblem& p) {
  auto corpus = b.upload(p.corpus);
  const std::size_t W = p.dims.num_weights();
  auto state = incremental_gradients(b).incremental_create(*corpus);
  std::vector<double> w0(W);
  for (std::size_t j = 0; j < W; ++j) w0[j] = (j % 3 == 0) ? 0.0 : (j % 2 ? 5.0 : -5.0);
  auto w = to_backend(b, w0);
  std::vector<double> dh(W);
  for (std::size_t j = 0; j < W; ++j) dh[j] = 0.01 * double(int(j % 7) - 3);
  auto d = to_backend(b, dh);
  std::vector<double> we = w0;
  for (int k = 0; k < 6; ++k) {
    const double a = 0.99, bb = 0.1, tau = 0.05;
    incremental_gradients(b).incremental_step(*state, a, bb, tau, *w, *d);
    for (std::size_t j = 0; j < W; ++j) {
      const double x = a * we[j] - bb * dh[j];
      we[j] = std::fabs(x) > tau ? std::copysign(std::fabs(x) - tau, x) : 0.0;
    }
  }
  incremental_gradients(b).incremental_flush(*state, *w, *d);
  EXPECT_LT(max_abs_diff(to_host(b, *w), we), 1e-12);
}

/// A span the backend refuses (an id beyond the corpus, a repeated sentence) throws from
/// incremental_sync and leaves no current span: incremental_evaluate then throws too, rather than working on a
/// half-made plan; the next good sync works as if nothing had happened. Likewise support() and
/// evaluate_sparse() leave nothing behind that would shrink a later support.
inline void check_refused_spans(Backend& b, const RandomProblem& p) {
  auto corpus = b.upload(p.corpus);
  const std::size_t W = p.dims.num_weights(), n = p.corpus.num_sentences();
  auto state = incremental_gradients(b).incremental_create(*corpus);
  auto w = to_backend(b, test::random_weights(W, 0.3, 5));
  auto d = b.vector(W);
  const std::vector<std::uint32_t> good = {2, 0}, beyond = {1, std::uint32_t(n)}, repeated = {3, 1, 3};
  incremental_gradients(b).incremental_sync(*state, {good.data(), good.size()}, *w, *d);
  double g2_first = 0;
  const double loss_first = incremental_gradients(b).incremental_evaluate(*state, *w, &g2_first);
  for (const auto* bad : {&beyond, &repeated}) {
    EXPECT_THROW(incremental_gradients(b).incremental_sync(*state, {bad->data(), bad->size()}, *w, *d), Error);
    double g2 = 0;
    EXPECT_THROW(incremental_gradients(b).incremental_evaluate(*state, *w, &g2), Error);
    EXPECT_THROW(incremental_gradients(b).incremental_trial(*state, *w, 0.1), Error);
  }
  incremental_gradients(b).incremental_sync(*state, {good.data(), good.size()}, *w, *d);
  double g2 = 0;
  EXPECT_EQ(incremental_gradients(b).incremental_evaluate(*state, *w, &g2), loss_first);
  EXPECT_EQ(g2, g2_first);

  auto s = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).support(*corpus, {good.data(), good.size()}, *s);
  const std::size_t whole = s->nnz();
  EXPECT_THROW(sparse_gradients(b).support(*corpus, {beyond.data(), beyond.size()}, *s), Error);
  EXPECT_THROW(sparse_gradients(b).evaluate_sparse(*corpus, *w, {beyond.data(), beyond.size()}, *s, 1.0, false), Error);
  sparse_gradients(b).support(*corpus, {good.data(), good.size()}, *s);
  EXPECT_EQ(s->nnz(), whole);
}

}  // namespace crfx::test
