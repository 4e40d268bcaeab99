// crfx — Wapiti's bcd (host/optim/bcd.cpp; Lavergne, Cappé & Yvon 2010 §3.2): the CPU backend's
// block statistics against the full gradient and the node marginals, one iteration's block
// updates against the steps computed by hand on the two-token problem, convergence to OWL-QN's
// optimum of the same elastic-net objective, determinism across thread counts, and its refusals.
// Resuming from every iteration bit for bit: tests/test_checkpoint.cpp (every trainer).
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/train.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"
#include "trainer_check.hpp"

namespace crfx {
namespace {

using test::random_problem;
using test::RandomProblem;

/// `algo` on p with the elastic net of `o` in the objective, from zero weights.
test::Trained train_with_penalty(const char* algo, const RandomProblem& p, const TrainOptions& o,
                                 unsigned threads = 1, double* f = nullptr) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, o.c1, o.c2);
  auto w = b.vector(p.dims.num_weights());
  auto trainer = find_trainer(algo).make();
  test::Trained r;
  const double last = trainer->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    r.reports.push_back(pr);
    return true;
  });
  if (f) *f = last;
  r.w = to_host(b, *w);
  r.stop_reason = trainer->stop_reason();
  return r;
}

TEST(Bcd, BlockStatisticsAreTheGradientAndWapitisCurvature) {
  for (const bool sparse : {false, true}) {
    RandomProblem p = random_problem(3, 12, 3, 15, 6, 41);
    if (sparse) p.dims.layout = test::random_layout(p.dims, 0.6, 42);
    SCOPED_TRACE(sparse ? "sparse layout" : "dense layout");
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    auto w = to_backend(b, test::random_weights(p.dims.num_weights(), 0.7, 43));
    auto g = b.vector(p.dims.num_weights());
    b.evaluate(*corpus, *w, all_sentences(*corpus), g.get(), 1.0);
    const std::vector<double> full = to_host(b, *g);
    std::vector<double> node(p.corpus.num_tokens() * p.dims.L);
    b.marginals(*corpus, *w, all_sentences(*corpus), node.data(), nullptr);
    std::vector<std::size_t> offsets;
    std::vector<std::uint32_t> index;
    b.block_index(*corpus, offsets, index);
    const WeightGroups wg = p.dims.groups();
    ASSERT_EQ(offsets.size(), wg.count() + 1);
    for (std::uint32_t group = 0; group < wg.count(); ++group) {
      const std::size_t n = wg.size(group), begin = wg.begin(group);
      std::vector<double> grad(n, 9.0), curv(n, 9.0), expect_curv(n, 0.0);
      b.block_statistics(*corpus, *w, {index.data() + offsets[group], offsets[group + 1] - offsets[group]}, group,
                         grad.data(), curv.data());
      // The block's sentences hold all of its gradient: the full gradient's slice.
      for (std::size_t k = 0; k < n; ++k) EXPECT_NEAR(grad[k], full[begin + k], 1e-12) << "group " << group;
      for (double h : curv) EXPECT_GE(h, 0.0);
      if (group >= p.dims.A) continue;
      // A state row: Σ_t x_t²·p_t(y)·(1 − p_t(y)) from the node marginals, over the tokens it fires at.
      for (std::size_t t = 0; t < p.corpus.num_tokens(); ++t) {
        double x = 0;
        for (std::size_t k = p.corpus.state_offsets[t]; k < p.corpus.state_offsets[t + 1]; ++k)
          if (p.corpus.state_ids[k] == group) x += p.corpus.state_value(k);
        for (std::size_t k = begin; k < begin + n; ++k) {
          const double e = node[t * p.dims.L + wg.slot(k, group)];
          expect_curv[k - begin] += x * x * e * (1 - e);
        }
      }
      for (std::size_t k = 0; k < n; ++k) EXPECT_NEAR(curv[k], expect_curv[k], 1e-12) << "group " << group;
    }
  }
}

TEST(Bcd, BlockIndexListsEachBlocksSentencesOnce) {
  const RandomProblem p = random_problem(2, 6, 2, 12, 5, 7);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  std::vector<std::size_t> offsets;
  std::vector<std::uint32_t> index;
  b.block_index(*corpus, offsets, index);
  const Corpus& c = p.corpus;
  for (std::uint32_t g = 0; g < p.dims.groups().count(); ++g) {
    std::vector<std::uint32_t> want;
    for (std::uint32_t s = 0; s < c.num_sentences(); ++s) {
      bool active = g == p.dims.A && c.length(s) >= 2;
      for (std::size_t t = c.sentence_offsets[s]; t < c.sentence_offsets[s + 1]; ++t) {
        for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k) active |= c.state_ids[k] == g;
        for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k)
          active |= p.dims.A + 1 + c.edge_ids[k] == g;
      }
      if (active) want.push_back(s);
    }
    EXPECT_EQ(std::vector<std::uint32_t>(index.begin() + offsets[g], index.begin() + offsets[g + 1]), want)
        << "group " << g;
  }
}

double soft(double z, double r) { return z > r ? z - r : z < -r ? z + r : 0.0; }

/// Two tokens, L = 2, gold (1, 1); blocks in order: attribute 0 (token 1), attribute 1 (token 2),
/// the transitions. From w = 0 each block's step by hand: g = p − 1(gold), h = p·(1 − p),
/// h ← κ·max(1, max|g/h|)·h, w ← soft(h·w − g, c1) / (h + 2·c2).
TEST(Bcd, OneIterationsBlockStepsAreTheHandComputedOnes) {
  const RandomProblem p = test::two_tokens();
  TrainOptions o;
  o.c1 = 0.1;
  o.c2 = 0.05;
  o.bcd_kappa = 1.5;
  o.max_iterations = 1;
  const test::Trained r = train_with_penalty("bcd", p, o);
  const double rho1 = o.c1, rho2 = 2 * o.c2, kappa = o.bcd_kappa;
  // Attribute 0 at w = 0: p = (½, ½), g = (½, −½), h = ¼, a = 2, h = κ·2·¼ = 0.75.
  const double h0 = kappa * 2 * 0.25;
  const double u = soft(0.5, rho1) / (h0 + rho2);  // = 0.4 / 0.85
  EXPECT_NEAR(r.w[0], -u, 1e-15);
  EXPECT_NEAR(r.w[1], u, 1e-15);
  // Attribute 1: τ = 0, so token 2 is independent of token 1: again p = (½, ½), the same step.
  EXPECT_NEAR(r.w[2], -u, 1e-15);
  EXPECT_NEAR(r.w[3], u, 1e-15);
  // The transitions: p(y', y) = p₁(y')·p₂(y), p_t(1) = σ(2u) at both tokens.
  const double q1 = 1 / (1 + std::exp(-2 * u)), q[2] = {1 - q1, q1};
  double g[4], h[4], a = 1;
  for (int j = 0; j < 4; ++j) {
    const double e = q[j / 2] * q[j % 2];
    g[j] = e - (j == 3 ? 1.0 : 0.0);
    h[j] = e * (1 - e);
    a = std::max(a, std::fabs(g[j] / h[j]));
  }
  for (int j = 0; j < 4; ++j) {
    const double hj = kappa * a * h[j];
    EXPECT_NEAR(r.w[4 + j], soft(-g[j], rho1) / (hj + rho2), 1e-14) << "transition " << j;
  }
  ASSERT_EQ(r.reports.size(), 1u);
  EXPECT_EQ(r.stop_reason, "--max-iterations 1 reached");
}

TEST(Bcd, ConvergesToOwlqnsOptimumOfTheElasticNet) {
  const RandomProblem p = test::learnable(3, 10, 2, 30, 6, 17);
  TrainOptions o;
  o.c1 = 0.3;
  o.c2 = 0.1;
  o.epsilon = 1e-10;
  o.delta = 0;
  o.max_iterations = 1000;
  double f_owlqn = 0, f_bcd = 0;
  const test::Trained ref = train_with_penalty("owlqn", p, o, 1, &f_owlqn);
  o.max_iterations = 400;
  o.stop_window = 0;  // no error-rate stop: run to the iteration limit
  const test::Trained bcd = train_with_penalty("bcd", p, o, 1, &f_bcd);
  // Stated tolerance: the objective within 1e-8 relative, each weight within 1e-4 (of the
  // largest), and the same weights at zero up to those within 1e-4 of it.
  EXPECT_NEAR(f_bcd, f_owlqn, 1e-8 * std::fabs(f_owlqn));
  EXPECT_GE(f_bcd, f_owlqn - 1e-8 * std::fabs(f_owlqn));
  test::expect_close(bcd.w, ref.w, 1e-4);
  std::size_t zeros = 0;
  for (std::size_t k = 0; k < ref.w.size(); ++k) {
    if (std::fabs(ref.w[k]) > 1e-4) {
      EXPECT_NE(bcd.w[k], 0.0) << "weight " << k;
    }
    if (ref.w[k] == 0.0) zeros += bcd.w[k] == 0.0;
  }
  EXPECT_GT(zeros, 0u) << "c1 = 0.3 zeroes weights";
  // The objective never rises from one iteration to the next (each block step decreases the bound).
  for (std::size_t i = 1; i < bcd.reports.size(); ++i)
    EXPECT_LE(bcd.reports[i].objective, bcd.reports[i - 1].objective * (1 + 1e-14)) << "iteration " << i + 1;
}

TEST(Bcd, SameModelBytesForAnyThreadCountAndStopsOnWapitisErrorWindow) {
  const RandomProblem p = test::learnable(4, 20, 3, 40, 8, 23);
  TrainOptions o;
  o.c1 = 0.2;
  o.c2 = 0.05;
  o.max_iterations = 50;
  const test::Trained one = train_with_penalty("bcd", p, o, 1), three = train_with_penalty("bcd", p, o, 3);
  EXPECT_TRUE(one.w == three.w);
  // The error rate settles within the default window of 5 iterations long before 50.
  EXPECT_LT(one.reports.size(), 50u);
  EXPECT_TRUE(std::regex_match(one.stop_reason, std::regex("the training error rate of the last 5 iterations spread "
                                                           "[0-9.e-]+ points, less than --stop-epsilon 0.02")))
      << one.stop_reason;
}

TEST(Bcd, BadSettingsAreRefused) {
  TrainOptions o;
  const auto set = [&](const char* name, const char* value) {
    return test::error_text([&] { find_option(name)->set(o, value); });
  };
  EXPECT_EQ(set("bcd-kappa", "0"), "must be > 0, got 0");
  EXPECT_EQ(set("bcd-kappa", "-1.5"), "must be > 0, got -1.5");
  EXPECT_EQ(set("bcd-kappa", "x"), "'x' is not a finite number");
  EXPECT_EQ(set("stop-window", "-1"), "must be between 0 and 2147483647, got -1");
  EXPECT_EQ(set("stop-epsilon", "-0.1"), "must be ≥ 0, got -0.1");
  EXPECT_EQ(set("bcd-kappa", "2.5"), "(no error)");
  EXPECT_EQ(o.bcd_kappa, 2.5);
  // Another loss than the NLL, and a GPU: refused before any data is read.
  TrainConfig c;
  c.algorithm = "bcd";
  c.options.loss = SequenceLoss::seq_exp;
  EXPECT_NE(test::error_text([&] { TrainingRun run(c); }).find("loss: bcd"), std::string::npos);
  c.options.loss = SequenceLoss::seq_log;
  c.backend.device = DeviceKind::cuda;
  EXPECT_EQ(test::error_text([&] { TrainingRun run(c); }),
            "the algorithm bcd: its block statistics exist on the CPU backend only; use the CPU");
  std::string out;
  EXPECT_EQ(test::run(test::crfx_binary() + " train " + test::data_path("conll2000.train300.txt") + " -t " +
                          test::data_path("chunking.template") + " -a bcd --device cuda -m " +
                          test::temp_path("bcd-cuda.model"),
                      &out),
            2);
  EXPECT_NE(out.find("-a bcd: its block statistics exist on the CPU backend only; use --device cpu"),
            std::string::npos)
      << out;
}

/// crfx train -a bcd end to end on the CoNLL-2000 slices (observed pairs, the CLI's settings, the
/// model file, tagging): 4 iterations with Wapiti's ρ1 = 0.5, ρ2 = 1e-4 gave F1 88.45 here.
TEST(Bcd, TrainsAChunkerFromTheCommandLine) {
  std::string err;
  const double f1 = test::conll_f1("bcd", "-a bcd --c1 0.5 --c2 0.00005 --max-iterations 4", &err);
  EXPECT_GT(f1, 86.0) << err;
}

}  // namespace
}  // namespace crfx
