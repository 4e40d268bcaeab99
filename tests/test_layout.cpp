// The weight layouts (corpus.hpp WeightGroups): the observed-pair layout of a training corpus,
// and the CPU backend on a sparse layout against the dense layout with the absent pairs at zero —
// loss, gradient, Viterbi, n-best and marginals bit for bit, the gradient against finite
// differences, SAG's stored-marginal primitives, and every trainer on full rows giving the dense
// model exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/sparse_rows.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"
#include "sag_check.hpp"

namespace crfx {
namespace {

using test::random_layout;
using test::random_problem;
using test::random_weights;

/// A sparse-layout problem and the same problem with the dense layout.
struct Pair {
  test::RandomProblem sparse, dense;
};

Pair layout_pair(std::uint32_t L, std::uint32_t A, std::uint32_t E, bool transitions, double density,
                 std::uint64_t seed, bool binary = false) {
  Pair p;
  p.dense = random_problem(L, A, E, 10, 5, seed, binary);
  p.dense.dims.transitions = transitions;
  p.sparse = p.dense;
  p.sparse.dims.layout = random_layout(p.dense.dims, density, seed + 1);
  p.sparse.dims.check_layout();
  return p;
}

TEST(ObservedLayout, RowsAreTheTrainingPairs) {
  // Two sentences over labels {0, 1, 2}: tokens (attributes; label) — (0, 1; 2) (1; 0) | (1; 2) (0; 2).
  Corpus c;
  c.sentence_offsets = {0, 2, 4};
  c.state_offsets = {0, 2, 3, 4, 5};
  c.state_ids = {0, 1, 1, 1, 0};
  c.labels = {2, 0, 2, 2};
  c.edge_offsets = {0, 0, 1, 1, 2};
  c.edge_ids = {1, 1};  // edge attribute 1 at the second token of each sentence
  c.source_lines = {1, 4};
  Dims d;
  d.L = 3;
  d.A = 2;
  d.E = 2;
  const WeightLayout w = observed_layout(c, d);
  // state 0: labels {2}; state 1: {0, 2}; transitions: 2→0 (6), 2→2 (8); edge 0: none; edge 1: {6, 8}.
  EXPECT_EQ(w.offsets, (std::vector<std::size_t>{0, 1, 3, 5, 5, 7}));
  EXPECT_EQ(w.slots, (std::vector<std::uint32_t>{2, 0, 2, 6, 8, 6, 8}));
  d.transitions = false;
  EXPECT_EQ(observed_layout(c, d).offsets, (std::vector<std::size_t>{0, 1, 3, 3, 3, 5}));
  d.transitions = true;
  const WeightLayout all_states = observed_layout(c, d, true, false);
  EXPECT_EQ(all_states.slots, (std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2, 6, 8, 6, 8}));
  const WeightLayout all_pairs = observed_layout(c, d, false, true);
  EXPECT_EQ(all_pairs.offsets.back(), 3u + 9u + 2u * 9u);
  Dims check = d;
  check.layout = std::make_shared<WeightLayout>(w);
  EXPECT_NO_THROW(check.check_layout());
  EXPECT_EQ(check.num_weights(), 7u);
  EXPECT_EQ(check.groups().find(1, 2), 2u);
  EXPECT_EQ(check.groups().find(1, 1), WeightGroups::kNoWeight);
  EXPECT_EQ(check.groups().find(2, 8), 4u);

  c.labels[1] = Corpus::kNoLabel;
  EXPECT_THROW(observed_layout(c, d), Error);
}

// observed_layout takes each row's distinct slots from a bitset where it is no larger than the
// sorted items (many items an id, few slots) and sorts them otherwise (few items, wide rows):
// both against a set of each id's slots, over label counts and corpus sizes that take each path
// for the state rows and the edge rows.
TEST(ObservedLayout, RowsAreEachIdsDistinctSlotsOnBothPaths) {
  struct Case {
    std::uint32_t L, A, E;
    std::size_t sentences;
  };
  for (const Case k : {Case{3, 4, 2, 40}, Case{22, 30, 3, 200}, Case{200, 40, 2, 60}, Case{200, 2000, 50, 6},
                       Case{65, 5, 1, 300}}) {
    SCOPED_TRACE(::testing::Message() << "L=" << k.L << " A=" << k.A << " E=" << k.E);
    const auto p = random_problem(k.L, k.A, k.E, k.sentences, 12, 900 + k.L + k.A);
    const Corpus& c = p.corpus;
    std::vector<std::set<std::uint32_t>> state(k.A), edge(k.E);
    for (std::size_t s = 0; s < c.num_sentences(); ++s)
      for (std::size_t t = c.sentence_offsets[s]; t < c.sentence_offsets[s + 1]; ++t) {
        for (std::size_t j = c.state_offsets[t]; j < c.state_offsets[t + 1]; ++j) state[c.state_ids[j]].insert(c.labels[t]);
        for (std::size_t j = c.edge_offsets[t]; j < c.edge_offsets[t + 1]; ++j)
          edge[c.edge_ids[j]].insert(c.labels[t - 1] * k.L + c.labels[t]);
      }
    std::vector<std::uint32_t> slots;
    std::vector<std::size_t> offsets{0};
    auto add = [&](const std::set<std::uint32_t>& row) {
      slots.insert(slots.end(), row.begin(), row.end());
      offsets.push_back(slots.size());
    };
    for (const auto& row : state) add(row);
    std::set<std::uint32_t> bigrams;
    for (std::size_t s = 0; s < c.num_sentences(); ++s)
      for (std::size_t t = c.sentence_offsets[s] + 1; t < c.sentence_offsets[s + 1]; ++t)
        bigrams.insert(c.labels[t - 1] * k.L + c.labels[t]);
    add(bigrams);
    for (const auto& row : edge) add(row);
    const WeightLayout w = observed_layout(c, p.dims);
    EXPECT_EQ(w.offsets, offsets);
    EXPECT_EQ(w.slots, slots);
  }
}

// On several threads each part of the tokens sets bits of its own, or'ed together by ranges of
// words: the same layout as one thread's, on a corpus of 2.3 M state items (7 parts of its state
// rows, 3 of its edge rows) and L = 70 (rows of two words).
TEST(ObservedLayout, TheSameLayoutOnEveryThreadCount) {
  for (const std::uint32_t L : {9u, 70u}) {
    const auto p = random_problem(L, 3000, 20, 60000, 30, 77 + L, true);
    ASSERT_GT(p.corpus.state_ids.size(), std::size_t(7) << 18);
    ASSERT_GT(p.corpus.edge_ids.size(), std::size_t(3) << 18);
    const WeightLayout one = observed_layout(p.corpus, p.dims, false, false, 1);
    for (const unsigned threads : {2u, 7u}) {
      SCOPED_TRACE(::testing::Message() << "L=" << L << ", " << threads << " threads");
      const WeightLayout w = observed_layout(p.corpus, p.dims, false, false, threads);
      EXPECT_EQ(w.offsets, one.offsets);
      EXPECT_EQ(w.slots, one.slots);
    }
  }
}

// The items grouped by id (the CUDA backend's gradient transposes): each id's tokens in token
// order with their values, skipped tokens left out — the same arrays on 1 and 5 threads (several
// parts of ≥ 2^16 items each) as a direct grouping.
TEST(ItemTranspose, GroupsTheItemsByIdInTokenOrderOnAnyThreadCount) {
  for (const bool binary : {false, true}) {
    const auto p = random_problem(7, 300, 0, 60000, 12, 31 + binary, binary);
    const Corpus& c = p.corpus;
    std::vector<std::uint8_t> skip(c.num_tokens(), 0);
    for (std::size_t t = 0; t < skip.size(); t += 7) skip[t] = 1;
    ASSERT_GT(c.state_ids.size(), std::size_t(5) << 16);
    std::vector<std::vector<std::pair<std::uint32_t, double>>> want(300);
    for (std::size_t t = 0; t < c.num_tokens(); ++t)
      if (!skip[t])
        for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
          want[c.state_ids[k]].emplace_back(std::uint32_t(t), c.state_value(k));
    for (const unsigned threads : {1u, 5u}) {
      SCOPED_TRACE(::testing::Message() << "threads=" << threads << " binary=" << binary);
      const ItemTranspose r = transpose_items(300, c.state_offsets, c.state_ids, c.state_values, &skip, threads);
      ASSERT_EQ(r.off.size(), 301u);
      EXPECT_EQ(r.val.size(), binary ? 0u : r.tok.size());
      for (std::size_t a = 0; a < 300; ++a) {
        ASSERT_EQ(r.off[a + 1] - r.off[a], want[a].size()) << "id " << a;
        for (std::size_t j = 0; j < want[a].size(); ++j) {
          ASSERT_EQ(r.tok[r.off[a] + j], want[a][j].first) << "id " << a;
          if (!binary) {
            ASSERT_EQ(r.val[r.off[a] + j], want[a][j].second) << "id " << a;
          }
        }
      }
    }
  }
}

TEST(ObservedLayout, MalformedLayoutsAreRefused) {
  Dims d;
  d.L = 3;
  d.A = 1;
  d.E = 0;
  auto refused = [&](std::vector<std::size_t> offsets, std::vector<std::uint32_t> slots, const char* needle) {
    auto w = std::make_shared<WeightLayout>();
    w->offsets = std::move(offsets);
    w->slots = std::move(slots);
    d.layout = w;
    try {
      d.check_layout();
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused({0, 1}, {0}, "row offsets");                    // one row for two groups
  refused({0, 2, 3}, {1, 0, 4}, "out of order");          // state row not ascending
  refused({0, 1, 2}, {3, 4}, "beyond 2");                 // label 3 of 3 labels
  refused({0, 1, 2}, {0, 9}, "beyond 8");                 // pair 9 of 9
  refused({0, 1, 3}, {0, 4}, "do not span");              // offsets past the slots
  d.transitions = false;
  refused({0, 1, 2}, {0, 4}, "without transitions");
}

/// Loss, gradient, Viterbi (labels and scores), n-best and marginals of the sparse layout equal,
/// bit for bit, the dense layout's with the absent weights at zero (adding x·0 changes no sum).
void check_sparse_equals_dense(const Pair& p, std::uint64_t seed) {
  CpuBackend bs(p.sparse.dims, 2), bd(p.dense.dims, 2);
  auto cs = bs.upload(p.sparse.corpus), cd = bd.upload(p.dense.corpus);
  const auto w = random_weights(p.sparse.dims.num_weights(), 1.0, seed);
  auto ws = to_backend(bs, w);
  auto wd = to_backend(bd, test::dense_weights(p.sparse.dims, w));
  auto gs = bs.vector(w.size());
  auto gd = bd.vector(p.dense.dims.num_weights());
  const SentenceSpan all = all_sentences(*cs);
  EXPECT_EQ(bs.evaluate(*cs, *ws, all, gs.get(), 0.5), bd.evaluate(*cd, *wd, all, gd.get(), 0.5));
  const auto g_sparse = to_host(bs, *gs), g_dense = to_host(bd, *gd);
  const auto index = test::dense_index(p.sparse.dims);
  for (std::size_t k = 0; k < g_sparse.size(); ++k) EXPECT_EQ(g_sparse[k], g_dense[index[k]]) << "weight " << k;

  const std::size_t N = p.sparse.corpus.num_tokens(), S = p.sparse.corpus.num_sentences(), L = p.sparse.dims.L;
  std::vector<std::uint32_t> ls(N), ld(N);
  std::vector<double> ss(S), sd(S);
  bs.viterbi(*cs, *ws, all, ls.data(), ss.data());
  bd.viterbi(*cd, *wd, all, ld.data(), sd.data());
  EXPECT_EQ(ls, ld);
  EXPECT_EQ(ss, sd);
  const std::size_t n = 3;
  std::vector<std::uint32_t> ns(n * N), nd(n * N);
  std::vector<double> nss(n * S), nsd(n * S);
  bs.viterbi_nbest(*cs, *ws, all, n, ns.data(), nss.data());
  bd.viterbi_nbest(*cd, *wd, all, n, nd.data(), nsd.data());
  EXPECT_EQ(ns, nd);
  EXPECT_EQ(nss, nsd);
  std::vector<double> ms(N * L), md(N * L), zs(S), zd(S);
  bs.marginals(*cs, *ws, all, ms.data(), zs.data());
  bd.marginals(*cd, *wd, all, md.data(), zd.data());
  EXPECT_EQ(ms, md);
  EXPECT_EQ(zs, zd);
}

TEST(SparseLayout, EqualsDenseWithAbsentPairsAtZero) {
  for (double density : {0.5, 1.0})
    for (bool transitions : {true, false})
      for (bool binary : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "density " << density << " transitions " << transitions << " binary "
                                          << binary);
        check_sparse_equals_dense(layout_pair(4, 9, 3, transitions, density, 31, binary), 32);
      }
}

TEST(SparseLayout, EqualsDenseForEveryWidthOfTheVectorRowCode) {
  // On CPUs with AVX-512 the state rows go through sparse_rows.hpp, a token's L lanes in ⌈L/8⌉
  // registers (1 to 8; beyond 64 labels the scalar loops): label counts at and around the
  // register boundaries, rows of every length, values and binary attributes, two threads (each
  // reducing its own attribute range) and small chunks.
  for (std::uint32_t L : {1u, 7u, 8u, 9u, 22u, 37u, 64u, 65u})
    for (bool binary : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "L " << L << " binary " << binary << " vector rows "
                                        << (cpu_rows_avx512() && L <= kRowMaxLabels));
      check_sparse_equals_dense(layout_pair(L, 11, 2, true, 0.4, 61 + L, binary), 62 + L);
    }
}

TEST(SparseLayout, ObservedPairsOfTheCorpus) {
  Pair p = layout_pair(5, 12, 2, true, 1.0, 41);
  p.sparse.dims.layout = std::make_shared<WeightLayout>(observed_layout(p.sparse.corpus, p.sparse.dims));
  ASSERT_LT(p.sparse.dims.num_weights(), p.dense.dims.num_weights());
  check_sparse_equals_dense(p, 42);
}

TEST(SparseLayout, GradientMatchesFiniteDifferences) {
  const Pair p = layout_pair(3, 5, 2, true, 0.6, 51);
  CpuBackend b(p.sparse.dims, 2);
  auto corpus = b.upload(p.sparse.corpus);
  const double c2 = 0.3;
  const auto w = random_weights(p.sparse.dims.num_weights(), 1.0, 52);
  Objective obj(b, *corpus, 0.0, c2);
  auto wv = to_backend(b, w);
  auto gv = b.vector(w.size());
  obj.value_and_gradient(*wv, *gv);
  const auto g = to_host(b, *gv);
  auto f = [&](const std::vector<double>& x) {
    auto xv = to_backend(b, x);
    return obj.value(*xv);
  };
  const double eps = 1e-5;
  for (std::size_t i = 0; i < w.size(); ++i) {
    auto wp = w, wm = w;
    wp[i] += eps;
    wm[i] -= eps;
    const double fd = (f(wp) - f(wm)) / (2 * eps);
    EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << "weight " << i;
  }
}

TEST(SparseLayout, SagStoredMarginalsEqualExplicitGradients) {
  for (std::uint32_t E : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "E " << E);
    Pair p = layout_pair(3, 12, E, true, 0.5, 61 + E);
    CpuBackend b(p.sparse.dims, 2);
    test::check_sag_against_explicit(b, p.sparse, E > 0, false);
  }
}

/// Every trainer on full rows (a sparse layout listing every slot) trains exactly the dense
/// layout's model: each primitive a trainer uses (gradients, supports, SAG groups, lazy decay,
/// rates, the perceptron's differences) sees the same weights in the same order.
TEST(SparseLayout, FullRowsTrainTheDenseModelWithEveryTrainer) {
  const Pair p = layout_pair(3, 10, 2, true, 1.0, 71);
  for (const TrainerInfo& info : trainer_registry()) {
    if (info.maxent_only) continue;  // on Maxent models: tests/test_maxent.cpp
    SCOPED_TRACE(info.name);
    TrainOptions o;
    o.c1 = std::string(info.name) == "owlqn" || std::string(info.name) == "two-stage" ? 0.2 : 0.0;
    o.c2 = 0.1;
    o.max_iterations = 6;
    o.epochs = 2;
    o.sgd_epochs = 1;
    o.max_epochs = 2;
    std::vector<double> result[2];
    for (int dense = 0; dense < 2; ++dense) {
      const test::RandomProblem& q = dense ? p.dense : p.sparse;
      CpuBackend b(q.dims, 2);
      auto corpus = b.upload(q.corpus);
      Objective obj(b, *corpus, o.c1, o.c2);
      auto w = b.vector(q.dims.num_weights());
      info.make()->train(obj, *w, o, [](const Progress&, const Vector&) { return true; });
      result[dense] = to_host(b, *w);
    }
    EXPECT_EQ(test::dense_weights(p.sparse.dims, result[0]), result[1]);
  }
}

}  // namespace
}  // namespace crfx
