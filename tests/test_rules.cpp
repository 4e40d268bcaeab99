// crfx — the generic element-rule layer (Backend::apply_rule, host/rules/rule_set.hpp) on the
// CPU backend: dense and sparse maps visit exactly their elements, sums are deterministic and
// independent of the thread count, a rule's memo never changes a value, and misuse is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "util/thread_pool.hpp"
#include "crfx/errors.hpp"
#include "rules/rule_set.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

TEST(ElementRules, SumsDoNotDependOnTheThreadCount) {
  // Long enough for several kReduceBlock blocks; the penalty terms of a sparse SGD-L1 step.
  const std::size_t n = 3 * kReduceBlock + 123;
  const auto w0 = test::random_weights(n, 2.0, 5);
  const auto g0 = test::random_weights(n, 1.0, 6);
  double first = 0;
  std::vector<double> first_w;
  for (unsigned threads : {1u, 2u, 3u}) {
    CpuBackend b(test::vector_dims(n), threads);
    auto w = to_backend(b, w0), g = to_backend(b, g0), pg = b.vector(n);
    // A dense rule (no term), then a summing one over every index.
    map(b, OwlqnPseudoGradientRule{0.25}, {*w, *g, *pg});
    const double sum = map_reduce(b, SgdL1Rule{0.1, 0.0, 0.3, 0.2, false}, {*pg, nullptr});
    if (threads == 1) {
      first = sum;
      first_w = to_host(b, *pg);
      // The blocked order of a dense sum: per block 8 interleaved lanes (element i of the block in
      // lane i mod 8, a tail shorter than 8 in lane 0) added in order, blocks combined in order.
      double want = 0;
      for (std::size_t b0 = 0; b0 < n; b0 += kReduceBlock) {
        const std::size_t e = std::min(n, b0 + kReduceBlock);
        double lane[8] = {};
        std::size_t i = b0;
        for (; i + 8 <= e; i += 8)
          for (std::size_t l = 0; l < 8; ++l) lane[l] += penalty_term(first_w[i + l], 0.3, 0.2);
        for (; i < e; ++i) lane[0] += penalty_term(first_w[i], 0.3, 0.2);
        double s = 0;
        for (double l : lane) s += l;
        want += s;
      }
      EXPECT_EQ(sum, want);
    } else {
      EXPECT_EQ(sum, first) << threads << " threads";
      EXPECT_EQ(to_host(b, *pg), first_w) << threads << " threads";
    }
  }
}

TEST(ElementRules, SparseMapsVisitExactlyTheirEntries) {
  auto p = test::random_problem(3, 20, 2, 10, 4, 11);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  const std::vector<std::uint32_t> ids = {2, 7};
  auto g = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).support(*corpus, {ids.data(), ids.size()}, *g);
  const std::size_t n = p.dims.num_weights();
  ASSERT_GT(g->nnz(), 0u);
  ASSERT_LT(g->nnz(), n);
  auto count = b.vector(n), w = b.vector(n), rate = b.vector(n);
  b.fill(*rate, 0.5);
  map(b, AdfStepRule{}, {*w, *rate, *count}, g.get());
  map(b, AdfStepRule{}, {*w, *rate, *count}, g.get());
  // count is 2 on the support, 0 elsewhere; the support's values are 0, so w did not move.
  auto sup = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).sparse_copy(*g, *sup);
  sparse_gradients(b).gather(*count, *sup);
  EXPECT_EQ(sparse_gradients(b).sparse_penalty(*sup, 1.0, 0.0), 2.0 * double(g->nnz()));
  EXPECT_EQ(b.norm1(*count), 2.0 * double(g->nnz()));
  EXPECT_EQ(b.norm1(*w), 0.0);
}

TEST(ElementRules, TheMemoNeverChangesAValue) {
  // Per-weight rates and stamps that change every few elements, so the memo hits and misses.
  const std::size_t n = 1000;
  std::vector<double> w0(n), s0(n), r0(n);
  for (std::size_t i = 0; i < n; ++i) {
    w0[i] = std::sin(double(i)) * 3.0;
    s0[i] = double((i / 3) % 5);
    r0[i] = 0.01 * double(1 + (i / 7) % 4);
  }
  CpuBackend b(test::vector_dims(n), 2);
  auto w = to_backend(b, w0), st = to_backend(b, s0), rt = to_backend(b, r0);
  map(b, LazyDecayRule{6.0, 0.5}, {*w, *st, *rt});
  const auto wr = to_host(b, *w), sr = to_host(b, *st);
  for (std::size_t i = 0; i < n; ++i) {
    const double want = w0[i] * lazy_decay_factor(6.0 - s0[i], &r0[i], 0.5);
    ASSERT_EQ(wr[i], want) << i;  // bit for bit: the memo returns what it would recompute
    ASSERT_EQ(sr[i], 6.0) << i;
  }
}

// iRprop− by hand: the step grows while the sign holds (capped), a flip shrinks it (floored),
// rests the weight and forgets the gradient; with L1 a move across zero stops at zero.
TEST(ElementRules, RpropStepsBySign) {
  CpuBackend b(test::vector_dims(6), 1);
  //                          grow    flip    first   cap     floor   L1 cross
  auto w = to_backend(b, {1.0, 1.0, 1.0, 1.0, 1.0, 0.05});
  auto g = to_backend(b, {2.0, -2.0, 3.0, 1.0, -1.0, 1.0});
  auto last = to_backend(b, {1.0, 1.0, 0.0, 1.0, 1.0, 0.0});
  auto step = to_backend(b, {0.1, 0.1, 0.1, 45.0, 1.5e-8, 0.1});
  RpropRule r;
  map(b, r, {*w, *g, *last, *step});
  EXPECT_EQ(to_host(b, *step), (std::vector<double>{0.1 * 1.2, 0.05, 0.1, 50.0, 1e-8, 0.1}));
  const auto wr = to_host(b, *w);
  EXPECT_EQ(wr[0], 1.0 - 0.1 * 1.2);
  EXPECT_EQ(wr[1], 1.0);  // flipped: no move
  EXPECT_EQ(wr[2], 1.0 - 0.1);
  EXPECT_EQ(wr[3], 1.0 - 50.0);
  EXPECT_EQ(wr[4], 1.0);  // flipped (floor), no move
  EXPECT_EQ(wr[5], 0.05 - 0.1);  // crosses zero: L1 off, so it does
  EXPECT_EQ(to_host(b, *last), (std::vector<double>{2.0, 0.0, 3.0, 1.0, 0.0, 1.0}));
  auto w1 = to_backend(b, {0.05, -0.05, 0.0, 0.0, 0.3, 0.0});
  auto g1 = to_backend(b, {1.0, -1.0, 1.0, 0.0, 1.0, -1.0});
  auto l1 = b.vector(6), s1 = to_backend(b, std::vector<double>(6, 0.1));
  r.l1 = true;
  map(b, r, {*w1, *g1, *l1, *s1});
  EXPECT_EQ(to_host(b, *w1), (std::vector<double>{0.0, 0.0, -0.1, 0.0, 0.3 - 0.1, 0.1}));
}

TEST(ElementRules, MisuseIsRefused) {
  const std::size_t n = 8;
  CpuBackend b(test::vector_dims(n), 1);
  auto w = b.vector(n), q = b.vector(n), shorter = b.vector(n - 1);
  // Wrong operand count, operands of different sizes, a missing first operand.
  EXPECT_THROW(map(b, SgdL1Rule{}, {*w}), Error);
  EXPECT_THROW(map(b, SgdL1Rule{}, {*w, *shorter}), Error);
  EXPECT_THROW(map(b, SgdL1Rule{}, {nullptr, *q}), Error);
  EXPECT_THROW(map(b, AdfStepRule{}, {*w, nullptr, *q}), Error);  // a required operand absent
  EXPECT_NO_THROW(map(b, LazyDecayRule{}, {*w, *q, nullptr}));     // an optional one
  // A rule id outside the set.
  MapRule unknown = make_map_rule(SgdL1Rule{});
  unknown.id = 9999;
  MapOperands ops;
  ops.v[0] = w.get();
  EXPECT_THROW(b.apply_rule(unknown, ops, nullptr, false), Error);
  // A sparse vector reaching beyond the operands.
  auto p = test::random_problem(2, 5, 2, 6, 3, 4);
  CpuBackend big(p.dims, 1);
  auto corpus = big.upload(p.corpus);
  auto g = sparse_gradients(big).sparse_vector();
  sparse_gradients(big).support(*corpus, all_sentences(*corpus), *g);
  auto tiny = big.vector(1);
  EXPECT_THROW(map(big, SgdL1Rule{}, {*tiny, nullptr}, g.get()), Error);
}

}  // namespace
}  // namespace crfx
