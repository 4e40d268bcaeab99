// The CUDA backend against the CPU backend (the double-precision reference), on fresh random
// problems. Label `gpu`: every test skips with the reason when no CUDA device is usable (and in
// a CPU-only build, where the file still compiles).
//
// Helpers and tolerances: gpu_check.hpp. Faults, memory limits and repeated sentences:
// test_cuda_faults.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "fused_check.hpp"
#include "gpu_check.hpp"
#include "rules/rule_set.hpp"
#include "random_problem.hpp"
#include "sag_check.hpp"

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif

namespace crfx {
namespace {

using namespace test;

/// `count` sentences of exactly T tokens (else as test::random_problem).
test::RandomProblem fixed_length_problem(std::uint32_t L, std::uint32_t A, std::uint32_t E, std::size_t count,
                                         std::size_t T, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> label(0, L - 1), attr(0, A - 1), edge(0, E ? E - 1 : 0);
  std::uniform_int_distribution<std::size_t> items(1, 4), eitems(0, 2);
  std::uniform_real_distribution<double> value(0.5, 1.5);
  test::RandomProblem p;
  p.dims.L = L;
  p.dims.A = A;
  p.dims.E = E;
  Corpus& c = p.corpus;
  for (std::size_t s = 0; s < count; ++s) {
    for (std::size_t t = 0; t < T; ++t) {
      const std::size_t k = items(rng);
      for (std::size_t i = 0; i < k; ++i) {
        c.state_ids.push_back(attr(rng));
        c.state_values.push_back(value(rng));
      }
      c.state_offsets.push_back(c.state_ids.size());
      if (E > 0 && t > 0)
        for (std::size_t i = 0, ke = eitems(rng); i < ke; ++i) {
          c.edge_ids.push_back(edge(rng));
          c.edge_values.push_back(value(rng));
        }
      c.edge_offsets.push_back(c.edge_ids.size());
      c.labels.push_back(label(rng));
    }
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(s + 1);
  }
  return p;
}

struct Shape {
  std::uint32_t L;
  std::size_t T, B;
  std::uint32_t E;
};

// The emulated device runs one thread at a time on one core: there the largest shapes (up to 5e8
// label pairs, minutes of emulation) give way to ones of at most 3e7 pairs, and batches of 5,000-token
// sentences to one (each is scanned, L times a serial recursion's work: three of them took half the
// test's time); lengths of 5,000 and 20,000 tokens stay covered (LongSentencesKeepFullPrecision),
// and batches of long scanned sentences (CudaFbSplit.AScanIsAsAccurateAsTheSerialRecursions).
#ifdef CRFX_EMULATED_CUDA
constexpr double kMaxShapePairs = kSanitized ? 1e6 : 3e7;  // 1e6: the sanitizer pass (kSanitized)
constexpr std::size_t kMaxShapeTokens = 10000;
#else
constexpr double kMaxShapePairs = 5e8;
constexpr std::size_t kMaxShapeTokens = 40000;
#endif

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (std::uint32_t L : {2u, 5u, 23u, 45u, 128u, 300u})
    for (std::size_t T : {1, 2, 17, 300, 5000})
      for (std::size_t B : {1, 3, 8})
        for (std::uint32_t E : {0u, 3u}) {
          // Keep the CPU reference affordable: ≤ 5e8 label pairs in all, edge runs ≤ 2e7
          // (the CPU keeps a [T][L][L] buffer per chunk).
          const double pairs = double(L) * L * double(T) * double(B);
          if (pairs > kMaxShapePairs || (E && pairs > 2e7) || T * B > kMaxShapeTokens) continue;
          out.push_back({L, T, B, E});
        }
  return out;
}

// Under the emulation the schedule seeds share the shapes (schedule_share).
TEST(CudaBackend, PrimitivesMatchCpuOverShapes) {
  REQUIRE_GPU();
  std::uint64_t seed = 1000;
  std::size_t sparse_runs = 0, index = 0;
  for (const Shape& s : shapes()) {
    // The sparse layouts, observed and random in turn, on the shapes of up to 1e6 label pairs (the
    // larger ones add time, not kernel paths).
    const bool sparse = double(s.L) * s.L * double(s.T) * double(s.B) <= 1e6;
    if (!schedule_share(index++)) {  // another seed's shape: its seeds and turn pass
      ++seed;
      sparse_runs += sparse;
      continue;
    }
    SCOPED_TRACE(::testing::Message() << "L=" << s.L << " T=" << s.T << " B=" << s.B << " E=" << s.E);
    auto p = fixed_length_problem(s.L, 40, s.E, s.B, s.T, ++seed);
    compare_primitives(p, 0.5, seed + 1);
    if (HasFatalFailure()) return;
    if (!sparse) continue;
    const Layout layout = sparse_runs++ % 2 ? Layout::random : Layout::observed;
    SCOPED_TRACE(::testing::Message() << layout);
    compare_primitives(with_layout(p, layout), 0.5, seed + 1);
    if (HasFatalFailure()) return;
  }
}

// Label counts at the edges of the kernels' thread mappings: one label, a partial warp (33), a full
// block of 128, 1,000 (threads loop over labels) and the largest supported, 4,096 (512 threads, no
// room for E in shared memory). Under the emulation the schedule seeds share the runs
// (schedule_share).
TEST(CudaBackend, LabelCountsFromOneTo4096) {
  REQUIRE_GPU();
  std::size_t index = 0;
  struct Case {
    std::uint32_t L;
    std::size_t T, B;
    std::uint32_t E;
  };
  for (const Case& k : {Case{1, 30, 3, 0}, Case{1, 12, 2, 2}, Case{2, 30, 3, 2}, Case{33, 25, 3, 0},
                        Case{33, 9, 2, 3}, Case{128, 12, 3, 0}, Case{1000, 4, 2, 0}, Case{4096, 2, 1, 0}}) {
    const auto p = fixed_length_problem(k.L, 30, k.E, k.B, k.T, 500 + k.L + k.E);
    for (Layout layout : kAllLayouts) {
      if (layout == Layout::random && k.L > 1000) continue;  // half of 4096² transition slots: too big
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << "L=" << k.L << " T=" << k.T << " B=" << k.B << " E=" << k.E << " "
                                        << layout);
      compare_primitives(with_layout(p, layout), 0.5, 600 + k.L, 0, false, /*with_nbest=*/k.L <= 128);
      if (HasFatalFailure()) return;
    }
  }
}

// The forward-backward kernel keeps every stored log normalised per position, so its marginals are
// as accurate at 20,000 tokens as at 20 (the CPU chain's error, not T·ε·|log Z|).
TEST(CudaBackend, LongSentencesKeepFullPrecision) {
  REQUIRE_GPU();
  for (std::size_t T : {std::size_t(5000), std::size_t(20000)})
    for (std::uint32_t E : {0u, 2u}) {
      if (kSanitized && T > 5000) continue;  // the sanitizer pass: the same kernels at 5,000
      SCOPED_TRACE(::testing::Message() << "T=" << T << " E=" << E);
      auto p = fixed_length_problem(5, 20, E, 1, T, 70 + T + E);
      BothBackends both(p, 1, 1.0, 71);
      auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
      const std::uint32_t id = 0;
      const SentenceSpan span{&id, 1};
      std::vector<double> mc(T * 5), mg(T * 5);
      double zc = 0, zg = 0;
      cpu.marginals(*cc, *wc, span, mc.data(), &zc);
      gpu->marginals(*gc, *wg, span, mg.data(), &zg);
      EXPECT_GT(std::fabs(zc), 1000.0);  // |log Z| grows with T: the case the normalisation is for
      EXPECT_NEAR(zg, zc, 1e-12 * std::fabs(zc)) << "log Z";
      double worst = 0;
      for (std::size_t j = 0; j < mc.size(); ++j) worst = std::max(worst, std::fabs(mg[j] - mc[j]));
      EXPECT_LE(worst, 1e-12) << "node marginals";
      char figure[32];  // in the XML report (--gtest_output=xml), for RESULTS.md
      std::snprintf(figure, sizeof figure, "%.3g", worst);
      RecordProperty("node_marginal_error_T" + std::to_string(T) + "_E" + std::to_string(E), figure);
      auto gcv = cpu.vector(w.size());
      auto ggv = gpu->vector(w.size());
      cpu.evaluate(*cc, *wc, span, gcv.get(), 1.0);
      gpu->evaluate(*gc, *wg, span, ggv.get(), 1.0);
      // Gradient entries are sums over up to 20,000 positions: 1e-12 of the position count.
      expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), 1e-12 * double(T), "gradient");
    }
}

// The gradient gathers scan each attribute's occurrences in the corpus. A chunk of consecutive
// sentences (what evaluate over the whole corpus gives, chunked when it exceeds the device
// memory) scans only its own: the work of a pass is the same for 1 chunk as for K. Any other
// chunk (a shuffled span) scans them all, K times per pass: the fallback, counted too. The
// gradients are the CPU's either way.
#ifdef CRFX_HAVE_CUDA
TEST(CudaBackend, GatherWorkDoesNotGrowWithChunks) {
  REQUIRE_GPU();
  // The dense layout, and the observed one (rows of their own lengths: fewer column blocks).
  for (Layout layout : {Layout::dense, Layout::observed}) {
    SCOPED_TRACE(::testing::Message() << layout);
    const auto p = with_layout(test::random_problem(5, 40, 3, 120, 30, 88), layout);
    CpuBackend cpu(p.dims, 1);
    auto cc = cpu.upload(p.corpus);
    const auto w = test::random_weights(p.dims.num_weights(), 0.5, 89);
    auto wc = to_backend(cpu, w);
    const std::size_t N = p.corpus.num_tokens(), S = p.corpus.num_sentences();
    std::vector<std::uint32_t> shuffled(S);
    for (std::size_t i = 0; i < S; ++i) shuffled[i] = std::uint32_t((i * 37) % S);  // 37 coprime to 120
    std::uint64_t one_chunk = 0;
    if (layout == Layout::dense) RecordProperty("tokens", std::to_string(N));
    for (std::size_t max_tokens : {std::size_t(0), N / 4, N / 16, std::size_t(40)})
      for (bool in_order : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "max_chunk_tokens=" << max_tokens << " in_order=" << in_order);
        cuda::CudaBackendConfig::GatherCounters counters;
        cuda::CudaBackendConfig cfg;
        cfg.max_chunk_tokens = max_tokens;
        cfg.gather_counters = &counters;
        BackendPtr gpu = cuda::make_cuda_backend(p.dims, cfg);
        auto gc = gpu->upload(p.corpus);
        auto wg = to_backend(*gpu, w);
        const SentenceSpan span = in_order ? all_sentences(*gc) : SentenceSpan{shuffled.data(), S};
        auto gcv = cpu.vector(w.size());
        auto ggv = gpu->vector(w.size());
        cpu.evaluate(*cc, *wc, span, gcv.get(), 1.0);
        gpu->evaluate(*gc, *wg, span, ggv.get(), 1.0);
        expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), kGradTol, "gradient");
        const std::uint64_t visits = counters.visits;
        if (max_tokens == 0 && in_order) one_chunk = visits;
        ASSERT_GT(one_chunk, 0u);
        char figure[64];  // for RESULTS.md, via --gtest_output=xml
        std::snprintf(figure, sizeof figure, "%llu (%.2f x one chunk)", (unsigned long long)visits,
                      double(visits) / double(one_chunk));
        RecordProperty("gather_visits_max" + std::to_string(max_tokens) + (in_order ? "_in_order" : "_shuffled") +
                           (layout == Layout::dense ? "" : "_observed"),
                       figure);
        if (in_order || max_tokens == 0)
          EXPECT_EQ(visits, one_chunk) << "consecutive chunks scan only their own occurrences";
        else
          EXPECT_GT(visits, 2 * one_chunk) << "the fallback scans the corpus per chunk";
      }
  }
}
#endif

// Under the emulation the schedule seeds share the cases (schedule_share).
TEST(CudaBackend, MixedLengthsTransitionsOffAndChunking) {
  REQUIRE_GPU();
  std::size_t index = 0;
  for (std::uint32_t E : {0u, 4u})
    for (bool binary : {false, true})  // binary: no values stored (as CoNLL data compiles)
      for (Layout layout : kAllLayouts) {
        if (!schedule_share(index++)) continue;
        SCOPED_TRACE(::testing::Message() << "E=" << E << " binary=" << binary << " " << layout);
        auto p = test::random_problem(7, 60, E, 90, 40, 77 + E, binary);
        const auto q = with_layout(p, layout);
        compare_primitives(q, 0.8, 5);
        compare_primitives(q, 0.8, 6, /*max_chunk_tokens=*/45);  // many chunks
        p.dims.transitions = false;  // a sparse layout then has no transition row
        compare_primitives(with_layout(p, layout), 0.8, 7);
      }
}

TEST(CudaBackend, ExtremeWeightsMatchLogSpaceReference) {
  REQUIRE_GPU();
  for (std::uint32_t L : {3u, 23u})
    for (Layout layout : kAllLayouts) {
      SCOPED_TRACE(::testing::Message() << "L=" << L << " " << layout);
      auto p = with_layout(test::random_problem(L, 20, 2, 12, 30, 300 + L), layout);
      compare_primitives(p, 60.0, 8, 0, /*log_space_reference=*/true);
    }
}

// A transition row far below the others (τ(0, ·) ≈ −800: its exp-space sum underflows, so the
// backward step and the pair marginals take that row exactly) on the label that emissions make
// every path take (+900 an item): the exact row carries the pair marginals' mass. At L = 45 the
// block kernels defer the factored rows' products to the end of the sentence (fb_device.cuh's
// pairwise_deferred) and add the exact rows' entries as they come.
TEST(CudaBackend, AnUnderflowingTransitionRowOnTheLikelyPathMatchesTheCpu) {
  REQUIRE_GPU();
  for (std::uint32_t L : {3u, 45u}) {
    SCOPED_TRACE(::testing::Message() << "L=" << L);
    const auto p = test::random_problem(L, 12, 0, 10, 20, 700 + L);
    BothBackends both(p, 2, 1.0, 71, 0, /*log_space_reference=*/true);
    const std::size_t tr = p.dims.transition_offset();
    for (std::size_t a = 0; a < p.dims.A; ++a) both.w[a * L] += 900;
    for (std::size_t y = 0; y < L; ++y) both.w[tr + y] -= 800;
    both.wc = to_backend(both.cpu, both.w);
    both.wg = to_backend(*both.gpu, both.w);
    compare_primitives_on(both, p);
  }
}

TEST(CudaBackend, ViterbiTiesGoToSmallestLabel) {
  REQUIRE_GPU();
  for (Layout layout : kAllLayouts) {
    SCOPED_TRACE(::testing::Message() << layout);
    auto p = with_layout(test::random_problem(6, 10, 2, 20, 15, 91), layout);
    CpuBackend cpu(p.dims, 1);
    BackendPtr gpu = gpu_backend(p.dims);
    auto cc = cpu.upload(p.corpus);
    auto gc = gpu->upload(p.corpus);
    // All-zero weights: every path ties → label 0 everywhere. Small integers: many exact ties.
    std::vector<double> w(p.dims.num_weights(), 0.0);
    for (int round = 0; round < 2; ++round) {
      auto wc = to_backend(cpu, w);
      auto wg = to_backend(*gpu, w);
      std::vector<std::uint32_t> yc(p.corpus.num_tokens()), yg(p.corpus.num_tokens());
      cpu.viterbi(*cc, *wc, all_sentences(*cc), yc.data(), nullptr);
      gpu->viterbi(*gc, *wg, all_sentences(*gc), yg.data(), nullptr);
      EXPECT_EQ(yg, yc);
      if (round == 0) {
        EXPECT_EQ(yg, std::vector<std::uint32_t>(yg.size(), 0u));
      }
      std::mt19937_64 rng(5);
      for (auto& x : w) x = double(int(rng() % 3) - 1);
    }
  }
}

TEST(CudaBackend, VectorAlgebraAndOwlqnMatchCpu) {
  REQUIRE_GPU();
  Dims d;
  d.L = 3;
  d.A = 5;
  CpuBackend cpu(d, 2);
  BackendPtr gpu = gpu_backend(d);
  for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(300001)}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    auto a = test::random_weights(n, 1.0, 1), b = test::random_weights(n, 1.0, 2);
    for (std::size_t i = 0; i < n; i += 3) a[i] = 0.0;  // zeros for OWL-QN and count_nonzero
    auto ac = to_backend(cpu, a), bc = to_backend(cpu, b), cc = cpu.vector(n);
    auto ag = to_backend(*gpu, a), bg = to_backend(*gpu, b), cg = gpu->vector(n);
    // Sums in different orders: relative to the sum of |terms|.
    double abs_ab = 0, abs_aa = 0;
    for (std::size_t i = 0; i < n; ++i) {
      abs_ab += std::fabs(a[i] * b[i]);
      abs_aa += a[i] * a[i];
    }
    auto close = [](double x, double y, double mag) { return std::fabs(x - y) <= kVecRel * std::max(1.0, mag); };
    EXPECT_TRUE(close(gpu->dot(*ag, *bg), cpu.dot(*ac, *bc), abs_ab));
    EXPECT_TRUE(close(gpu->norm1(*ag), cpu.norm1(*ac), cpu.norm1(*ac)));
    EXPECT_TRUE(close(gpu->norm2sq(*ag), cpu.norm2sq(*ac), abs_aa));
    EXPECT_EQ(gpu->norm_inf(*ag), cpu.norm_inf(*ac));
    EXPECT_EQ(gpu->count_nonzero(*ag), cpu.count_nonzero(*ac));
    // Element-wise ops (the GPU may fuse a·x + y into one FMA: compare to 1e-14).
    cpu.axpby(0.3, *ac, -1.7, *bc);
    gpu->axpby(0.3, *ag, -1.7, *bg);
    cpu.axpy(2.5, *ac, *bc);
    gpu->axpy(2.5, *ag, *bg);
    cpu.scale(-0.5, *bc);
    gpu->scale(-0.5, *bg);
    cpu.sub(*ac, *bc, *cc);
    gpu->sub(*ag, *bg, *cg);
    expect_close_vec(to_host(*gpu, *cg), to_host(cpu, *cc), 1e-14, "vector ops");
    map(cpu, OwlqnPseudoGradientRule{0.4}, {*ac, *bc, *cc});
    map(*gpu, OwlqnPseudoGradientRule{0.4}, {*ag, *bg, *cg});
    expect_close_vec(to_host(*gpu, *cg), to_host(cpu, *cc), 1e-14, "pseudo-gradient");
    cpu.copy(*bc, *ac);
    gpu->copy(*bg, *ag);
    map(cpu, OwlqnConstrainRule{}, {*cc, *ac});
    map(*gpu, OwlqnConstrainRule{}, {*cg, *ag});
    map(cpu, OwlqnProjectRule{}, {*bc, *cc, *ac});
    map(*gpu, OwlqnProjectRule{}, {*bg, *cg, *ag});
    expect_close_vec(to_host(*gpu, *ag), to_host(cpu, *ac), 1e-14, "OWL-QN direction/projection");
    gpu->fill(*ag, 2.0);
    EXPECT_EQ(gpu->norm1(*ag), 2.0 * double(n));
    test::check_fused_equals_unfused(*gpu, n);  // the quasi-Newton fused forms, bit for bit
  }
}

/// The stochastic trainers' sparse primitives (evaluate_sparse, supports, the element rules over
/// them, feature differences, gather / scatter) against the CPU on one problem in `layout`.
void check_sparse_primitives(Layout layout) {
  auto p = with_layout(test::random_problem(5, 50, 3, 30, 12, 17), layout);
  BothBackends both(p, 2, 0.5, 3);
  auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
  std::vector<std::uint32_t> ids = {4, 9, 1, 22};
  const SentenceSpan span{ids.data(), ids.size()};
  auto sc = cpu.sparse_vector(), sg = gpu->sparse()->sparse_vector();
  const double lc = cpu.evaluate_sparse(*cc, *wc, span, *sc, 0.5, false);
  const double lg = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *sg, 0.5, false);
  EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc)));
  ASSERT_EQ(sg->nnz(), sc->nnz());
  {  // the support given (support() first, stale values in it): the same on the GPU
    auto given = gpu->sparse()->sparse_vector();
    gpu->sparse()->support(*gc, span, *given);
    gpu->sparse()->gather(*wg, *given);
    const double lgiven = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *given, 0.5, true);
    EXPECT_EQ(lgiven, lg);
    ASSERT_EQ(given->nnz(), sc->nnz());
    auto dg = gpu->vector(w.size()), dc = cpu.vector(w.size());
    gpu->sparse()->sparse_axpy(1.0, *given, *dg);
    cpu.sparse_axpy(1.0, *sc, *dc);
    expect_close_vec(to_host(*gpu, *dg), to_host(cpu, *dc), kGradTol, "evaluate_sparse, support given");
    auto other = gpu->sparse()->sparse_vector();  // a support of another span is refused
    const std::uint32_t one = 7;
    gpu->sparse()->support(*gc, {&one, 1}, *other);
    EXPECT_THROW(gpu->sparse()->evaluate_sparse(*gc, *wg, span, *other, 0.5, true), Error);
  }
  // Apply the sparse gradient through both backends and compare the dense results.
  auto qc = cpu.vector(w.size()), qg = gpu->vector(w.size());
  {  // a line-search trial (keep_q) moves w as the step does and leaves q alone
    auto wt = to_backend(*gpu, w), qt = to_backend(*gpu, std::vector<double>(w.size(), 0.01));
    auto wct = to_backend(cpu, w), qct = to_backend(cpu, std::vector<double>(w.size(), 0.01));
    const double pt = map_reduce(*gpu, SgdL1Rule{0.1, 0.01, 0.3, 0.2, true}, {*wt, *qt}, sg.get());
    const double pct = map_reduce(cpu, SgdL1Rule{0.1, 0.01, 0.3, 0.2, true}, {*wct, qct.get()}, sc.get());
    EXPECT_NEAR(pt, pct, 1e-10 * std::max(1.0, pct)) << "SgdL1Rule trial penalty";
    expect_close_vec(to_host(*gpu, *wt), to_host(cpu, *wct), kGradTol, "SgdL1Rule trial w");
    EXPECT_EQ(to_host(*gpu, *qt), std::vector<double>(w.size(), 0.01)) << "a trial wrote q";
  }
  const double pc = map_reduce(cpu, SgdL1Rule{0.1, 0.01, 0.3, 0.2, false}, {*wc, qc.get()}, sc.get());
  const double pg = map_reduce(*gpu, SgdL1Rule{0.1, 0.01, 0.3, 0.2, false}, {*wg, qg.get()}, sg.get());
  EXPECT_NEAR(pg, pc, 1e-10 * std::max(1.0, pc)) << "SgdL1Rule penalty";
  map(cpu, SgdL1Rule{0.05, 0.02, 0.0, 0.0, false}, {*wc, qc.get()}, sc.get());
  map(*gpu, SgdL1Rule{0.05, 0.02, 0.0, 0.0, false}, {*wg, qg.get()}, sg.get());
  expect_close_vec(to_host(*gpu, *wg), to_host(cpu, *wc), kGradTol, "SgdL1Rule w");
  expect_close_vec(to_host(*gpu, *qg), to_host(cpu, *qc), kGradTol, "SgdL1Rule q");
  const double pen = cpu.sparse_penalty(*sc, 0.3, 0.2);
  EXPECT_NEAR(gpu->sparse()->sparse_penalty(*sg, 0.3, 0.2), pen, 1e-10 * std::max(1.0, pen));
  cpu.sparse_axpy(-2.0, *sc, *wc);
  gpu->sparse()->sparse_axpy(-2.0, *sg, *wg);
  auto rc = to_backend(cpu, std::vector<double>(w.size(), 0.1)), nc = cpu.vector(w.size());
  auto rg = to_backend(*gpu, std::vector<double>(w.size(), 0.1)), ng = gpu->vector(w.size());
  map(cpu, AdfStepRule{}, {*wc, *rc, *nc}, sc.get());
  map(*gpu, AdfStepRule{}, {*wg, *rg, *ng}, sg.get());
  map(cpu, AdfRateRule{3.0, 0.995, 0.6}, {*rc, *nc});
  map(*gpu, AdfRateRule{3.0, 0.995, 0.6}, {*rg, *ng});
  expect_close_vec(to_host(*gpu, *rg), to_host(cpu, *rc), 1e-14, "adf rates");
  auto tc = cpu.vector(w.size()), tg = gpu->vector(w.size());
  map(cpu, LazyDecayRule{-0.3, 0.0}, {*wc, *tc, nullptr}, sc.get());
  map(*gpu, LazyDecayRule{-0.3, 0.0}, {*wg, *tg, nullptr}, sg.get());
  map(cpu, LazyDecayRule{-0.5, 0.0}, {*wc, *tc, nullptr});
  map(*gpu, LazyDecayRule{-0.5, 0.0}, {*wg, *tg, nullptr});
  // Per-weight rates (ADF's decay, the memo's case): rows share rate and stamp after the step.
  map(cpu, LazyDecayRule{2.0, 0.5}, {*wc, *tc, *rc}, sc.get());
  map(*gpu, LazyDecayRule{2.0, 0.5}, {*wg, *tg, *rg}, sg.get());
  map(cpu, LazyDecayRule{5.0, 0.5}, {*wc, *tc, *rc});
  map(*gpu, LazyDecayRule{5.0, 0.5}, {*wg, *tg, *rg});
  expect_close_vec(to_host(*gpu, *wg), to_host(cpu, *wc), kGradTol, "adf/lazy_decay w");
  // Perceptron difference, gather / scatter round trip, copy.
  std::size_t tokens = 0;
  for (auto s : ids) tokens += p.corpus.length(s);
  std::vector<std::uint32_t> pred(tokens);
  gpu->viterbi(*gc, *wg, span, pred.data(), nullptr);
  auto dc = cpu.sparse_vector(), dg = gpu->sparse()->sparse_vector();
  EXPECT_EQ(gpu->sparse()->feature_difference(*gc, span, pred.data(), *dg, 1.0),
            cpu.feature_difference(*cc, span, pred.data(), *dc, 1.0));
  auto zc = cpu.vector(w.size()), zg = gpu->vector(w.size());
  cpu.sparse_axpy(1.0, *dc, *zc);
  gpu->sparse()->sparse_axpy(1.0, *dg, *zg);
  EXPECT_EQ(to_host(*gpu, *zg), to_host(cpu, *zc));
  auto kg = gpu->sparse()->sparse_vector(), kg2 = gpu->sparse()->sparse_vector();
  gpu->sparse()->sparse_copy(*sg, *kg);
  gpu->sparse()->gather(*wg, *kg);
  gpu->fill(*wg, 0.0);
  gpu->sparse()->scatter(*kg, *wg);  // restores exactly the support's weights
  gpu->sparse()->sparse_copy(*kg, *kg2);
  gpu->sparse()->gather(*wg, *kg2);
  EXPECT_EQ(gpu->sparse()->sparse_penalty(*kg2, 0.0, 1.0), gpu->sparse()->sparse_penalty(*kg, 0.0, 1.0));
  auto sup = cpu.sparse_vector();
  cpu.support(*cc, span, *sup);
  EXPECT_EQ(sup->nnz(), kg->nnz());
}

TEST(CudaBackend, SparsePrimitivesMatchCpu) {
  REQUIRE_GPU();
  for (Layout layout : kAllLayouts) {
    SCOPED_TRACE(::testing::Message() << layout);
    check_sparse_primitives(layout);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaBackend, SparseGradientMatchesCpuWithChunksAndWithoutTransitions) {
  REQUIRE_GPU();
  // evaluate_sparse through span plans: spans split over chunks (12 tokens), transitions on and
  // off, edge features on; values compared entry by entry through sparse_axpy into zeros.
  for (std::size_t chunk : {std::size_t(0), std::size_t(12)})
    for (bool transitions : {true, false})
      for (Layout layout : kAllLayouts) {
        SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " transitions " << transitions << " " << layout);
        auto p = test::random_problem(6, 40, 3, 30, 12, 29);
        p.dims.transitions = transitions;
        p = with_layout(p, layout);  // before the hand-made item below (observed_layout refuses it)
        // An edge item at sentence 0's first position (hand-made: compiled corpora have none there):
        // its block belongs to S(span) although no edge factor sits at t = 0.
        Corpus& c = p.corpus;
        c.edge_ids.insert(c.edge_ids.begin(), 2u);
        c.edge_values.insert(c.edge_values.begin(), 1.0);
        for (std::size_t t = 1; t < c.edge_offsets.size(); ++t) ++c.edge_offsets[t];
        BothBackends both(p, 2, 0.5, 11, chunk);
        auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
        const std::vector<std::vector<std::uint32_t>> spans = {{3}, {7, 0, 21, 12}, {29, 1, 2, 3, 4, 5, 6}, {}};
        for (const auto& ids : spans) {
          const SentenceSpan span{ids.data(), ids.size()};
          auto sc = cpu.sparse_vector(), sg = gpu->sparse()->sparse_vector();
          const double lc = cpu.evaluate_sparse(*cc, *wc, span, *sc, 0.25, false);
          const double lg = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *sg, 0.25, false);
          EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc)));
          ASSERT_EQ(sg->nnz(), sc->nnz());
          auto support = cpu.sparse_vector();
          cpu.support(*cc, span, *support);
          EXPECT_EQ(support->nnz(), sg->nnz()) << "S(span)";
          auto zc = cpu.vector(w.size()), zg = gpu->vector(w.size());
          cpu.sparse_axpy(1.0, *sc, *zc);
          gpu->sparse()->sparse_axpy(1.0, *sg, *zg);
          expect_close_vec(to_host(*gpu, *zg), to_host(cpu, *zc), kGradTol, "sparse gradient");
        }
      }
}

TEST(CudaBackend, EveryTrainerReachesTheCpuResult) {
  REQUIRE_GPU();
  // The dense layout and the observed one (crfx train's default). Under the emulation the schedule
  // seeds share the runs (schedule_share).
  std::size_t index = 0;
  for (Layout layout : {Layout::dense, Layout::observed})
    for (const TrainerInfo& info : trainer_registry()) {
      if (info.cpu_only) continue;  // gis, iis, scgis, cd: CPU only (tests/test_maxent.cpp)
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << info.name << " " << layout);
      const auto p = with_layout(test::random_problem(4, 30, 2, 40, 10, 23), layout);
      TrainOptions o;
      o.c2 = 0.5;
      o.max_iterations = 60;
      o.epochs = 3;
      o.max_epochs = 3;
      o.sgd_epochs = 2;
      double f[2];
      std::vector<double> w[2];
      for (int k = 0; k < 2; ++k) {
        BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 2)) : gpu_backend(p.dims);
        auto corpus = b->upload(p.corpus);
        Objective obj(*b, *corpus, 0.0, o.c2);
        auto wv = b->vector(p.dims.num_weights());
        f[k] = info.make()->train(obj, *wv, o, nullptr);
        w[k] = to_host(*b, *wv);
      }
      // Same algorithm, same seed: the runs differ only by rounding in sums.
      EXPECT_NEAR(f[1], f[0], 1e-6 * std::max(1.0, std::fabs(f[0])));
    }
}

TEST(CudaBackend, LbfgsReachesCpuOptimumAndRunsAreBitwiseEqual) {
  REQUIRE_GPU();
  // 150 sentences on a GPU, 80 under the emulation, 30 under its sanitizers (kEmulated, kSanitized).
  auto p = test::random_problem(9, 200, 3, kSanitized ? 30 : kEmulated ? 80 : 150, 25, 41);
  TrainOptions o;
  o.c2 = 0.5;
  o.epsilon = 1e-10;
  o.delta = 0;
  o.period = 0;
  o.max_iterations = 1000;
  std::vector<double> w[3];
  double f[3];
  for (int k = 0; k < 3; ++k) {
    BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 2)) : gpu_backend(p.dims);
    auto corpus = b->upload(p.corpus);
    Objective obj(*b, *corpus, 0.0, o.c2);
    auto wv = b->vector(p.dims.num_weights());
    f[k] = find_trainer("lbfgs").make()->train(obj, *wv, o, nullptr);
    w[k] = to_host(*b, *wv);
  }
  EXPECT_NEAR(f[1], f[0], 1e-9 * std::fabs(f[0])) << "optimum";
  expect_close_vec(w[1], w[0], 1e-5, "optimal weights");
  EXPECT_EQ(f[1], f[2]) << "two GPU runs";
  EXPECT_TRUE(w[1] == w[2]) << "two GPU runs: weights not bitwise equal";
}

TEST(CudaBackend, SagPrimitivesEqualExplicitGradients) {
  REQUIRE_GPU();
  // Stored marginals on the device + lazy steps against per-sentence gradients and dense steps:
  // without and with edge features (then with the SAGA term), through internal flushes, with
  // spans split over several chunks (chunks of 6 tokens), and with transitions off.
  // Each in every weight layout.
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : kAllLayouts) {
      SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout);
      auto base = test::random_problem(3, 12, E, 9, 6, 21 + E);
      const auto p = with_layout(base, layout);
      test::check_sag_against_explicit(*gpu_backend(p.dims), p, E > 0, false);
      test::check_sag_against_explicit(*gpu_backend(p.dims), p, false, true);
      test::check_sag_against_explicit(*gpu_backend(p.dims, 6), p, E > 0, false);
      base.dims.transitions = false;
      const auto q = with_layout(base, layout);
      test::check_sag_against_explicit(*gpu_backend(q.dims), q, E > 0, false);
    }
  for (Layout layout : kAllLayouts) {
    SCOPED_TRACE(::testing::Message() << layout);
    auto p = with_layout(test::random_problem(3, 6, 0, 4, 4, 2), layout);
    test::check_sag_lazy_prox(*gpu_backend(p.dims), p);  // the soft-threshold branch (τ > 0)
    for (std::uint32_t E : {0u, 3u}) {  // refused spans leave no half-made plan or stale marks
      auto q = with_layout(test::random_problem(3, 12, E, 9, 6, 31 + E), layout);
      test::check_refused_spans(*gpu_backend(q.dims), q);
    }
  }
}

// incremental_search decides a one-sentence span's line search on the device (one-thread
// kernels, rounds that do nothing once it is done): the same L, trials, w and d as the
// primitives with every loss read by the host. Several spans of one sentence need many rounds.
TEST(CudaBackend, SagSearchOnTheDeviceEqualsThePrimitives) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : kAllLayouts) {
      SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout);
      const auto p = with_layout(test::random_problem(3, 12, E, 9, 6, 41 + E), layout);
      test::check_search_equals_primitives(*gpu_backend(p.dims), p);
    }
}

TEST(CudaBackend, SagReachesCpuOptimumAndRunsAreBitwiseEqual) {
  REQUIRE_GPU();
  // The problem and settings of the CPU test Sag/SagSampling.ReachesLbfgsOptimum (where SAG,
  // SAGA and mini-batch SAG all meet the stopping test within 60 epochs).
  auto p = test::random_problem(4, 30, 2, 40, 8, 7);
  struct Run {
    const char* algo;
    std::size_t batch;
    Sampling sampling;
  };
  // Uniform sampling at batch size 1: the steps queued on the device (incremental_schedule).
  // Under the emulation the schedule seeds share the runs (schedule_share).
  std::size_t index = 0;
  for (const Run& run : {Run{"sag", 1, Sampling::mixed}, Run{"saga", 1, Sampling::mixed},
                         Run{"sag", 4, Sampling::mixed}, Run{"saga", 1, Sampling::uniform}}) {
    if (!schedule_share(index++)) continue;
    SCOPED_TRACE(::testing::Message() << run.algo << " batch " << run.batch << " " << name_of(run.sampling));
    TrainOptions o;
    o.c2 = 1.0;
    o.sampling = run.sampling;
    o.epsilon = 1e-8;
    o.max_epochs = 400;
    o.seed = 3;
    o.batch_size = run.batch;
    std::vector<double> w[3];
    double f[3];
    int epochs[3] = {0, 0, 0};
    for (int k = 0; k < 3; ++k) {
      BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 2)) : gpu_backend(p.dims);
      auto corpus = b->upload(p.corpus);
      Objective obj(*b, *corpus, 0.0, o.c2);
      auto wv = b->vector(p.dims.num_weights());
      f[k] = find_trainer(run.algo).make()->train(obj, *wv, o, [&](const Progress& pr, const Vector&) {
        epochs[k] = pr.iteration;
        return true;
      });
      w[k] = to_host(*b, *wv);
      EXPECT_LT(epochs[k], o.max_epochs) << "run " << k << " did not meet the stopping test";
    }
    // CPU and GPU differ by rounding (their line searches may branch differently), so they are
    // compared at the optimum; two GPU runs must agree bit for bit.
    EXPECT_NEAR(f[1], f[0], 1e-7 * std::fabs(f[0])) << "optimum";
    expect_close_vec(w[1], w[0], 1e-5, "optimal weights");
    EXPECT_EQ(f[1], f[2]) << "two GPU runs";
    EXPECT_TRUE(w[1] == w[2]) << "two GPU runs: weights not bitwise equal";
  }
}

TEST(CudaBackend, EvaluateIsBitwiseReproducible) {
  REQUIRE_GPU();
  for (Layout layout : {Layout::dense, Layout::observed}) {
    SCOPED_TRACE(::testing::Message() << layout);
    const auto p = with_layout(test::random_problem(23, 500, 5, 300, 40, 55), layout);
    const auto w = test::random_weights(p.dims.num_weights(), 0.5, 9);
    std::vector<double> g[2];
    double loss[2];
    for (int k = 0; k < 2; ++k) {
      BackendPtr b = gpu_backend(p.dims);
      auto corpus = b->upload(p.corpus);
      auto wv = to_backend(*b, w);
      auto gv = b->vector(w.size());
      loss[k] = b->evaluate(*corpus, *wv, all_sentences(*corpus), gv.get(), 1.0);
      g[k] = to_host(*b, *gv);
    }
    EXPECT_EQ(loss[0], loss[1]);
    EXPECT_TRUE(g[0] == g[1]) << "gradients differ between two runs";
  }
}

// A sparse layout whose rows list every slot (observed_layout with possible states and
// transitions) holds the dense layout's weights in the dense order, so the sparse paths — the
// emission and edge sums by find, τ scattered from the transition row, the gathers and the
// transition tree by row position, the SAG kernels by slot — give the dense paths' results bit
// for bit. With transitions off the sparse layout has no transition row (the dense one keeps a
// zero block): weights are compared through the dense index of each sparse weight.
TEST(CudaBackend, FullRowsGiveTheDenseResultsBitwise) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (bool transitions : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "E=" << E << " transitions=" << transitions);
      auto dense = test::random_problem(5, 30, E, 25, 12, 140 + E);
      dense.dims.transitions = transitions;
      auto full = dense;
      full.dims.layout = std::make_shared<const WeightLayout>(observed_layout(full.corpus, full.dims, true, true));
      const WeightGroups fg = full.dims.groups(), dg = dense.dims.groups();
      const std::size_t Wd = dense.dims.num_weights(), Wf = full.dims.num_weights();
      ASSERT_EQ(Wf, Wd - (transitions ? 0 : std::size_t(5) * 5));
      std::vector<std::size_t> index(Wf);  // the dense index of each sparse weight
      for (std::uint32_t g = 0; g < fg.count(); ++g)
        for (std::size_t k = fg.begin(g); k < fg.begin(g) + fg.size(g); ++k) index[k] = dg.begin(g) + fg.slot(k, g);
      std::vector<double> wd = test::random_weights(Wd, 0.7, 5 + E), wf(Wf);
      if (!transitions) std::fill(wd.begin() + dg.begin(dg.A), wd.begin() + dg.begin(dg.A + 1), 0.0);
      for (std::size_t k = 0; k < Wf; ++k) wf[k] = wd[index[k]];
      // The sparse vector's weights spread over the dense layout (zero where it has none).
      auto spread = [&](const std::vector<double>& x) {
        std::vector<double> out(Wd, 0.0);
        for (std::size_t k = 0; k < Wf; ++k) out[index[k]] = x[k];
        return out;
      };
      BackendPtr bd = gpu_backend(dense.dims), bf = gpu_backend(full.dims);
      auto cd = bd->upload(dense.corpus), cf = bf->upload(full.corpus);
      auto wdv = to_backend(*bd, wd), wfv = to_backend(*bf, wf);
      std::vector<std::uint32_t> permuted;  // token slots in the gathers (not consecutive)
      for (std::uint32_t s = 25; s-- > 0;) permuted.push_back(s);
      for (const SentenceSpan span : {all_sentences(*cd), SentenceSpan{permuted.data(), permuted.size()}}) {
        auto gd = bd->vector(Wd), gf = bf->vector(Wf);
        const double ld = bd->evaluate(*cd, *wdv, span, gd.get(), 0.75);
        EXPECT_EQ(bf->evaluate(*cf, *wfv, span, gf.get(), 0.75), ld) << "loss";
        EXPECT_TRUE(spread(to_host(*bf, *gf)) == to_host(*bd, *gd)) << "gradient";
        EXPECT_EQ(bf->evaluate(*cf, *wfv, span, nullptr, 1.0), bd->evaluate(*cd, *wdv, span, nullptr, 1.0));
        std::size_t tokens = 0;
        for (std::size_t i = 0; i < span.count; ++i) tokens += dense.corpus.length(span[i]);
        std::vector<double> md(tokens * 5), mf(tokens * 5), zd(span.count), zf(span.count);
        bd->marginals(*cd, *wdv, span, md.data(), zd.data());
        bf->marginals(*cf, *wfv, span, mf.data(), zf.data());
        EXPECT_TRUE(mf == md && zf == zd) << "marginals";
        std::vector<std::uint32_t> yd(tokens * 4, 12345), yf(tokens * 4, 12345);  // room for the 4-best
        std::vector<double> sd(span.count * 4), sf(span.count * 4);
        bd->viterbi(*cd, *wdv, span, yd.data(), sd.data());
        bf->viterbi(*cf, *wfv, span, yf.data(), sf.data());
        EXPECT_TRUE(yf == yd && sf == sd) << "viterbi";
        bd->viterbi_nbest(*cd, *wdv, span, 4, yd.data(), sd.data());
        bf->viterbi_nbest(*cf, *wfv, span, 4, yf.data(), sf.data());
        EXPECT_TRUE(yf == yd && sf == sd) << "viterbi_nbest";
      }
      // evaluate_sparse (span plans) and SAG's span gradient, commit and lazy steps.
      const std::vector<std::uint32_t> ids = {7, 2, 19};
      const SentenceSpan span{ids.data(), ids.size()};
      auto xd = bd->sparse()->sparse_vector(), xf = bf->sparse()->sparse_vector();
      EXPECT_EQ(bf->sparse()->evaluate_sparse(*cf, *wfv, span, *xf, 0.5, false),
                bd->sparse()->evaluate_sparse(*cd, *wdv, span, *xd, 0.5, false));
      auto zd = bd->vector(Wd), zf = bf->vector(Wf);
      bd->sparse()->sparse_axpy(1.0, *xd, *zd);
      bf->sparse()->sparse_axpy(1.0, *xf, *zf);
      EXPECT_TRUE(spread(to_host(*bf, *zf)) == to_host(*bd, *zd)) << "evaluate_sparse";
      auto sd = bd->incremental()->incremental_create(*cd), sf = bf->incremental()->incremental_create(*cf);
      auto dd = bd->vector(Wd), df = bf->vector(Wf);
      for (const SentenceSpan sp : {span, SentenceSpan{ids.data() + 1, 1}}) {
        bd->incremental()->incremental_sync(*sd, sp, *wdv, *dd);
        bf->incremental()->incremental_sync(*sf, sp, *wfv, *df);
        double g2d = 0, g2f = 0;
        EXPECT_EQ(bf->incremental()->incremental_evaluate(*sf, *wfv, &g2f), bd->incremental()->incremental_evaluate(*sd, *wdv, &g2d));
        EXPECT_EQ(g2f, g2d);
        const double coef[3] = {0.1, 0.2, 0.3};
        bd->incremental()->incremental_commit(*sd, *dd, *wdv, coef);
        bf->incremental()->incremental_commit(*sf, *df, *wfv, coef);
        bd->incremental()->incremental_step(*sd, 0.9, 0.05, 0.01, *wdv, *dd);
        bf->incremental()->incremental_step(*sf, 0.9, 0.05, 0.01, *wfv, *df);
      }
      bd->incremental()->incremental_flush(*sd, *wdv, *dd);
      bf->incremental()->incremental_flush(*sf, *wfv, *df);
      EXPECT_TRUE(spread(to_host(*bf, *df)) == to_host(*bd, *dd)) << "SAG d";
      EXPECT_TRUE(spread(to_host(*bf, *wfv)) == to_host(*bd, *wdv)) << "SAG w";
    }
}

// The kernels index by a sparse layout's offsets and slots unchecked: the constructor refuses a
// layout that Dims::check_layout refuses (here a state row listing a label beyond L).
TEST(CudaBackend, MalformedLayoutIsRefused) {
  REQUIRE_GPU();
  auto p = test::random_problem(4, 6, 0, 5, 6, 3);
  auto layout = std::make_shared<WeightLayout>(observed_layout(p.corpus, p.dims));
  p.dims.layout = layout;
  EXPECT_NO_THROW(gpu_backend(p.dims));
  std::uint32_t a = 0;  // a state row with weights
  while (layout->offsets[a + 1] == layout->offsets[a]) ++a;
  layout->slots[layout->offsets[a + 1] - 1] = 4;  // its last slot: label 4 of 0 … 3
  EXPECT_THROW(gpu_backend(p.dims), Error);
}

TEST(CudaBackend, TooLargeForTheDeviceSaysHowMuchMemory) {
  REQUIRE_GPU();
  // L = 4096 with edge features: a 2000-token sentence needs 2000 · 4096² · 8 B ≈ 250 GiB.
  auto p = fixed_length_problem(4096, 3, 1, 1, 2000, 3);
  BackendPtr gpu = gpu_backend(p.dims);
  try {
    gpu->upload(p.corpus);
    FAIL() << "upload must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, FactorySelectsTheGpu) {
  REQUIRE_GPU();
  Dims d;
  d.L = 3;
  d.A = 2;
  BackendOptions o;
  o.device = DeviceKind::cuda;
  std::string note;
  auto b = make_backend(d, o, &note);
  EXPECT_NE(b->name().find("cuda:0"), std::string::npos) << b->name();
  o.device = DeviceKind::auto_select;
  b = make_backend(d, o, &note);
  EXPECT_NE(note.find("cuda"), std::string::npos) << note;
}

}  // namespace
}  // namespace crfx
