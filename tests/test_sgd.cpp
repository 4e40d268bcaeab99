// The stochastic trainers (sgd-l1, two-stage, adf, ap) and their sparse backend primitives:
// sparse gradients against the dense evaluate(), the cumulative-penalty clipping, the lazy L2
// decay and the ADF rate rule against their formulas, perceptron averaging against a naive
// running sum, convergence to the quasi-Newton optimum, determinism, option validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "rules/rule_set.hpp"
#include "optim/sgd_l1.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

using test::random_problem;

TrainOptions quasi_newton_tight() {
  TrainOptions o;
  o.epsilon = 1e-10;
  o.delta = 0;
  o.period = 0;
  o.max_iterations = 2000;
  o.max_linesearch = 40;
  return o;
}

struct Result {
  std::vector<double> w;
  double f = 0;
  std::vector<Progress> log;
};

Result run(const char* algo, const test::RandomProblem& p, double c1, double c2, const TrainOptions& o,
        unsigned threads = 1) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, c1, c2);
  auto w = b.vector(p.dims.num_weights());
  Result r;
  r.f = find_trainer(algo).make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    r.log.push_back(pr);
    return true;
  });
  r.w = to_host(b, *w);
  return r;
}

/// Full objective Σ NLL + c1‖w‖₁ + c2‖w‖² at w, on a fresh backend.
double full_objective(const test::RandomProblem& p, const std::vector<double>& w, double c1, double c2) {
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto wv = to_backend(b, w);
  double f = b.evaluate(*corpus, *wv, all_sentences(*corpus), nullptr, 1.0);
  for (double x : w) f += c1 * std::fabs(x) + c2 * x * x;
  return f;
}

/// Host copy of a sparse vector: scatter onto `fill` everywhere else.
std::vector<double> dense(Backend& b, const SparseVector& x, std::size_t n, double fill = 0.0) {
  auto v = b.vector(n);
  b.fill(*v, fill);
  sparse_gradients(b).scatter(x, *v);
  return to_host(b, *v);
}

/// The support S(span) computed on the host from its definition (backend.hpp).
std::set<std::size_t> expected_support(const test::RandomProblem& p, const std::vector<std::uint32_t>& ids) {
  const Corpus& c = p.corpus;
  const std::size_t L = p.dims.L, LL = L * L;
  std::set<std::size_t> s;
  for (auto id : ids) {
    for (std::size_t t = c.sentence_offsets[id]; t < c.sentence_offsets[id + 1]; ++t) {
      for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
        for (std::size_t y = 0; y < L; ++y) s.insert(std::size_t(c.state_ids[k]) * L + y);
      for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k)
        for (std::size_t j = 0; j < LL; ++j) s.insert(p.dims.edge_offset() + c.edge_ids[k] * LL + j);
    }
  }
  if (!ids.empty() && p.dims.transitions)
    for (std::size_t j = 0; j < LL; ++j) s.insert(p.dims.transition_offset() + j);
  return s;
}

/// f(x, y) of the sentences `ids` with labels `y` (span order) added with weight `scale` to `out`.
void add_features(const test::RandomProblem& p, const std::vector<std::uint32_t>& ids,
                  const std::uint32_t* y, double scale, std::vector<double>& out) {
  const Corpus& c = p.corpus;
  const std::size_t L = p.dims.L, LL = L * L;
  std::size_t pos = 0;
  for (auto id : ids) {
    const std::size_t t0 = c.sentence_offsets[id];
    for (std::size_t t = t0; t < c.sentence_offsets[id + 1]; ++t, ++pos) {
      for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
        out[std::size_t(c.state_ids[k]) * L + y[pos]] += scale * c.state_value(k);
      if (t == t0) continue;
      const std::size_t pair = std::size_t(y[pos - 1]) * L + y[pos];
      out[p.dims.transition_offset() + pair] += scale;
      for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k)
        out[p.dims.edge_offset() + c.edge_ids[k] * LL + pair] += scale * c.edge_value(k);
    }
  }
}

// ---- primitives -------------------------------------------------------------------------------

TEST(SgdPrimitives, EvaluateSparseEqualsDenseOnSupport) {
  auto p = random_problem(4, 25, 3, 20, 7, 11);
  for (unsigned threads : {1u, 3u}) {
    CpuBackend b(p.dims, threads);
    auto corpus = b.upload(p.corpus);
    const std::size_t n = p.dims.num_weights();
    auto w = to_backend(b, test::random_weights(n, 0.7, 12));
    const std::vector<std::uint32_t> ids = {5, 2, 17, 9};
    const SentenceSpan span{ids.data(), ids.size()};
    auto g = b.vector(n);
    const double loss = b.evaluate(*corpus, *w, span, g.get(), 0.7);
    const auto gd = to_host(b, *g);
    auto gs = sparse_gradients(b).sparse_vector();
    const double loss_s = sparse_gradients(b).evaluate_sparse(*corpus, *w, span, *gs, 0.7, false);
    EXPECT_EQ(loss, loss_s);
    const auto sup = expected_support(p, ids);
    EXPECT_EQ(gs->nnz(), sup.size());
    const auto got = dense(b, *gs, n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i], gd[i]) << i;  // same code path: bitwise
      if (!sup.count(i)) {
        EXPECT_EQ(gd[i], 0.0) << i;
      }
    }
    // The indices are exactly S(span): mark them through gather of i + 1.
    std::vector<double> iota(n);
    for (std::size_t i = 0; i < n; ++i) iota[i] = double(i + 1);
    auto iv = to_backend(b, iota);
    sparse_gradients(b).gather(*iv, *gs);
    const auto marks = dense(b, *gs, n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(marks[i] != 0.0, sup.count(i) == 1) << i;
    // support() gives the same indices with zero values.
    auto s2 = sparse_gradients(b).sparse_vector();
    sparse_gradients(b).support(*corpus, span, *s2);
    EXPECT_EQ(s2->nnz(), sup.size());
    sparse_gradients(b).gather(*iv, *s2);
    EXPECT_EQ(dense(b, *s2, n), marks);
    // The scratch is left all-zero: a second, different span is not polluted by the first.
    const std::vector<std::uint32_t> ids2 = {1};
    auto g2 = b.vector(n);
    b.evaluate(*corpus, *w, {ids2.data(), 1}, g2.get(), 1.0);
    sparse_gradients(b).evaluate_sparse(*corpus, *w, {ids2.data(), 1}, *gs, 1.0, false);
    EXPECT_EQ(dense(b, *gs, n), to_host(b, *g2));
    // With the support given (support() of the same span, as adf and sgd-l1 call it before the
    // lazy decay): the same loss and the same entries, bit for bit; values stale from an earlier
    // use of the vector are overwritten.
    auto given = sparse_gradients(b).sparse_vector();
    sparse_gradients(b).support(*corpus, span, *given);
    sparse_gradients(b).gather(*iv, *given);  // stale values
    EXPECT_EQ(sparse_gradients(b).evaluate_sparse(*corpus, *w, span, *given, 0.7, true), loss);
    EXPECT_EQ(given->nnz(), sup.size());
    EXPECT_EQ(dense(b, *given, n), gd);
  }
}

TEST(SgdPrimitives, ARefusedSpanLeavesLaterSupportsWhole) {
  auto p = random_problem(4, 25, 3, 20, 7, 13);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::vector<std::uint32_t> good = {5, 2, 17}, bad = {5, 2, 999};  // 999: no such sentence
  auto s = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).support(*corpus, {good.data(), good.size()}, *s);
  const std::size_t whole = s->nnz();
  ASSERT_EQ(whole, expected_support(p, good).size());
  EXPECT_THROW(sparse_gradients(b).support(*corpus, {bad.data(), bad.size()}, *s), Error);
  auto g = sparse_gradients(b).sparse_vector();
  EXPECT_THROW(sparse_gradients(b).evaluate_sparse(*corpus, *to_backend(b, std::vector<double>(p.dims.num_weights())),
                                 {bad.data(), bad.size()}, *g, 1.0, false),
               Error);
  sparse_gradients(b).support(*corpus, {good.data(), good.size()}, *s);
  EXPECT_EQ(s->nnz(), whole);  // no attribute left marked by the refused spans
}

TEST(SgdPrimitives, FeatureDifferenceIsGoldMinusPredicted) {
  auto p = random_problem(3, 15, 2, 12, 6, 21);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  const std::size_t n = p.dims.num_weights();
  const std::vector<std::uint32_t> ids = {3, 0, 7};
  std::vector<std::uint32_t> gold, pred;
  for (auto id : ids)
    for (std::size_t t = p.corpus.sentence_offsets[id]; t < p.corpus.sentence_offsets[id + 1]; ++t)
      gold.push_back(p.corpus.labels[t]);
  pred = gold;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < pred.size(); i += 2) {
    pred[i] = (pred[i] + 1) % p.dims.L;
    ++wrong;
  }
  std::vector<double> expect(n, 0.0);
  add_features(p, ids, gold.data(), 2.0, expect);
  add_features(p, ids, pred.data(), -2.0, expect);
  auto d = sparse_gradients(b).sparse_vector();
  EXPECT_EQ(sparse_gradients(b).feature_difference(*corpus, {ids.data(), ids.size()}, pred.data(), *d, 2.0), wrong);
  const auto got = dense(b, *d, n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], expect[i], 1e-12) << i;
  // A correct prediction gives exact zeros.
  EXPECT_EQ(sparse_gradients(b).feature_difference(*corpus, {ids.data(), ids.size()}, gold.data(), *d, 1.0), 0u);
  for (double x : dense(b, *d, n)) EXPECT_EQ(x, 0.0);
}

/// A one-token corpus with attribute 0 and L = 2: S = {0, 1} ∪ transitions {4 … 7}.
test::RandomProblem tiny() {
  test::RandomProblem p;
  p.dims.L = 2;
  p.dims.A = 2;
  p.dims.E = 0;
  Corpus& c = p.corpus;
  c.state_ids = {0};
  c.state_values = {1.0};
  c.state_offsets.push_back(1);
  c.edge_offsets.push_back(0);
  c.labels = {0};
  c.sentence_offsets.push_back(1);
  c.source_lines = {1};
  return p;
}

TEST(SgdPrimitives, CumulativePenaltyClippingEqualsFormula) {
  auto p = tiny();
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t n = p.dims.num_weights();  // 8
  auto g = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).support(*corpus, all_sentences(*corpus), *g);
  ASSERT_EQ(g->nnz(), 6u);
  // Gradient values on the support {0, 1, 4, 5, 6, 7}; weights 2, 3 are untouched.
  const std::vector<double> gv = {1.0, -2.0, 0, 0, 0.5, -0.25, 3.0, 0.0};
  sparse_gradients(b).gather(*to_backend(b, gv), *g);
  const std::vector<double> w0 = {0.3, -0.1, 9.0, -9.0, 0.05, 0.2, 0.0, -0.4};
  const std::vector<double> q0 = {-0.02, 0.01, 0.5, 0.5, 0.0, 0.03, 0.0, -0.1};
  const double eta = 0.1, u = 0.07;
  auto w = to_backend(b, w0), q = to_backend(b, q0);
  // A line-search trial (keep_q): the same weights and penalty, q untouched bit for bit.
  auto wt = to_backend(b, w0), qt = to_backend(b, q0);
  const double pen_trial = map_reduce(b, SgdL1Rule{eta, u, 0.3, 0.2, true}, {*wt, *qt}, g.get());
  EXPECT_EQ(to_host(b, *qt), q0);
  const double pen = map_reduce(b, SgdL1Rule{eta, u, 0.3, 0.2, false}, {*w, *q}, g.get());
  const auto wr = to_host(b, *w), qr = to_host(b, *q);
  EXPECT_EQ(to_host(b, *wt), wr);
  EXPECT_EQ(pen_trial, pen);
  EXPECT_NE(qr, q0);  // the real step does move q
  // The returned penalty is gather + sparse_penalty over g's entries at the new weights, bit for bit.
  auto at = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).sparse_copy(*g, *at);
  sparse_gradients(b).gather(*w, *at);
  EXPECT_EQ(pen, sparse_gradients(b).sparse_penalty(*at, 0.3, 0.2));
  double want_pen = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double wi = w0[i], qi = q0[i];
    if (i != 2 && i != 3) {
      wi -= eta * gv[i];
      const double z = wi;
      if (wi > 0) wi = std::max(0.0, wi - (u + qi));
      else if (wi < 0) wi = std::min(0.0, wi + (u - qi));
      qi += wi - z;
    }
    EXPECT_EQ(wr[i], wi) << i;
    EXPECT_EQ(qr[i], qi) << i;
    if (i != 2 && i != 3) want_pen += 0.3 * std::fabs(wi) + 0.2 * wi * wi;
  }
  EXPECT_NEAR(pen, want_pen, 1e-15);
  EXPECT_GT(pen, 0.0);
  // Hand-checked values: w0 = 0.3 − 0.1 = 0.2 → max(0, 0.2 − (0.07 − 0.02)) = 0.15;
  // w4 = 0.05 − 0.05 = 0 stays 0 (no clipping, q unchanged); w6 = −0.3 → min(0, −0.3 + 0.07) = −0.23.
  EXPECT_NEAR(wr[0], 0.15, 1e-15);
  EXPECT_EQ(wr[4], 0.0);
  EXPECT_EQ(qr[4], 0.0);
  EXPECT_NEAR(wr[6], -0.23, 1e-15);
  EXPECT_NEAR(qr[6], 0.07, 1e-15);
  // w1 = −0.1 + 0.2 = 0.1 → max(0, 0.1 − (0.07 + 0.01)) = 0.02; w5 = 0.2 + 0.025 = 0.225 → 0.125.
  EXPECT_NEAR(wr[1], 0.02, 1e-15);
  EXPECT_NEAR(wr[5], 0.125, 1e-15);
  // Clipping to exactly zero: a large penalty.
  EXPECT_EQ(map_reduce(b, SgdL1Rule{0.0, 10.0, 1.0, 1.0, false}, {*w, *q}, g.get()), 0.0);  // all clipped: no penalty
  for (std::size_t i : {0, 1, 4, 5, 6, 7}) EXPECT_EQ(to_host(b, *w)[i], 0.0) << i;
  EXPECT_EQ(to_host(b, *w)[2], 9.0);
  // q == nullptr: plain step.
  auto w2 = to_backend(b, w0);
  EXPECT_EQ(map_reduce(b, SgdL1Rule{eta, 5.0, 0.0, 0.0, false}, {*w2, nullptr}, g.get()), 0.0);
  EXPECT_EQ(to_host(b, *w2)[1], -0.1 + eta * 2.0);
}

TEST(SgdPrimitives, LazyDecayAndGatherScatterRestoreExactly) {
  auto p = tiny();
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto sup = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).support(*corpus, all_sentences(*corpus), *sup);
  const std::vector<double> w0 = {0.3, -0.1, 9.0, -9.0, 0.05, 0.2, 0.0, -0.4};
  const std::vector<double> s0 = {0, -0.5, 0, 0, -1, -2, -3, -0.25};
  auto w = to_backend(b, w0), st = to_backend(b, s0);
  // Global log-decay clock.
  map(b, LazyDecayRule{-0.5, 0.0}, {*w, *st, nullptr}, sup.get());
  auto wr = to_host(b, *w), sr = to_host(b, *st);
  for (std::size_t i = 0; i < 8; ++i) {
    const bool in = i != 2 && i != 3;
    EXPECT_DOUBLE_EQ(wr[i], in ? w0[i] * std::exp(-0.5 - s0[i]) : w0[i]) << i;
    EXPECT_EQ(sr[i], in ? -0.5 : s0[i]) << i;
  }
  EXPECT_EQ(wr[1], w0[1]);  // stamp == clock: bitwise unchanged
  // Per-weight rates, step clock, flush of every weight.
  const std::vector<double> rates = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
  auto rv = to_backend(b, rates);
  auto w1 = to_backend(b, w0), st1 = b.vector(8);
  map(b, LazyDecayRule{3.0, 0.5}, {*w1, *st1, *rv});
  wr = to_host(b, *w1);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(wr[i], w0[i] * std::pow(1 - 0.5 * rates[i], 3.0)) << i;
  // gather → modify → scatter restores bit for bit.
  auto saved = sparse_gradients(b).sparse_vector();
  sparse_gradients(b).sparse_copy(*sup, *saved);
  sparse_gradients(b).gather(*w1, *saved);
  map(b, SgdL1Rule{0.123456789, 0.0, 0.0, 0.0, false}, {*w1, nullptr}, saved.get());
  sparse_gradients(b).scatter(*saved, *w1);
  EXPECT_EQ(to_host(b, *w1), wr);
  // sparse_penalty over the support's values.
  double expect = 0;
  for (std::size_t i : {0, 1, 4, 5, 6, 7}) expect += 0.3 * std::fabs(wr[i]) + 0.2 * wr[i] * wr[i];
  EXPECT_NEAR(sparse_gradients(b).sparse_penalty(*saved, 0.3, 0.2), expect, 1e-15);
}

TEST(AdfPrimitives, RatesFollowTheFormulaOnAHandBuiltCase) {
  // Three sentences: attribute 0 in all, attribute 1 only in the second.
  test::RandomProblem p;
  p.dims.L = 2;
  p.dims.A = 3;
  Corpus& c = p.corpus;
  for (int s = 0; s < 3; ++s) {
    c.state_ids.push_back(0);
    c.state_values.push_back(1.0);
    if (s == 1) {
      c.state_ids.push_back(1);
      c.state_values.push_back(1.0);
    }
    c.state_offsets.push_back(c.state_ids.size());
    c.edge_offsets.push_back(0);
    c.labels.push_back(1);
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(s + 1);
  }
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t n = p.dims.num_weights();  // 3·2 + 4 = 10
  auto w = b.vector(n), rate = b.vector(n), count = b.vector(n);
  b.fill(*rate, 0.1);
  auto g = sparse_gradients(b).sparse_vector();
  std::vector<double> w_expect(n, 0.0);
  for (std::uint32_t s = 0; s < 3; ++s) {
    const std::vector<std::uint32_t> ids = {s};
    sparse_gradients(b).evaluate_sparse(*corpus, *w, {ids.data(), 1}, *g, 1.0, false);
    const auto gd = dense(b, *g, n);
    for (std::size_t i = 0; i < n; ++i) w_expect[i] -= 0.1 * gd[i];
    map(b, AdfStepRule{}, {*w, *rate, *count}, g.get());
    auto wh = to_host(b, *w);
    for (std::size_t i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(wh[i], w_expect[i]) << i;
  }
  EXPECT_EQ(to_host(b, *count), (std::vector<double>{3, 3, 1, 1, 0, 0, 3, 3, 3, 3}));
  const double a = 0.995, be = 0.6;
  map(b, AdfRateRule{3.0, a, be}, {*rate, *count});
  const double frequent = 0.1 * be;                              // u = 1
  const double rare = 0.1 * (a - (1.0 / 3.0) * (a - be));        // u = 1/3
  const double unseen = 0.1 * a;                                 // u = 0
  const auto r = to_host(b, *rate);
  const std::vector<double> expect = {frequent, frequent, rare, rare, unseen, unseen,
                                      frequent, frequent, frequent, frequent};
  for (std::size_t i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(r[i], expect[i]) << i;
  EXPECT_EQ(to_host(b, *count), std::vector<double>(n, 0.0));
}

// ---- trainers: optimality ----------------------------------------------------------------------

TEST(SgdL1, ReachesTheOwlqnOptimumAndKeepsExactZeros) {
  auto p = random_problem(3, 20, 0, 30, 6, 31);
  const double c1 = 0.5, c2 = 0.1;
  const Result ref = run("owlqn", p, c1, c2, quasi_newton_tight());
  TrainOptions o;
  o.epochs = 150;
  o.eta0 = 0.5;
  o.alpha = 0.97;
  const Result r = run("sgd-l1", p, c1, c2, o);
  const double f = full_objective(p, r.w, c1, c2);
  EXPECT_NEAR(r.f, f, 1e-9 * f);  // the reported objective is f(w) of the returned weights
  EXPECT_LT((f - ref.f) / ref.f, 1e-4) << f << " vs " << ref.f;
  std::size_t zeros = 0, ref_zeros = 0, agree = 0;
  for (double x : r.w) zeros += x == 0.0;
  for (double x : ref.w) ref_zeros += x == 0.0;
  for (std::size_t j = 0; j < r.w.size(); ++j) agree += (r.w[j] == 0.0) == (ref.w[j] == 0.0);
  EXPECT_GT(ref_zeros, r.w.size() / 10);
  EXPECT_GT(zeros, 0u);
  // Exact zeros where OWL-QN has them (the cumulative penalty clips to 0, not near it).
  EXPECT_GE(double(agree), 0.95 * double(r.w.size())) << zeros << " zeros vs " << ref_zeros;
  ASSERT_EQ(r.log.size(), 150u);
  EXPECT_EQ(r.log.back().iteration, 150);
  EXPECT_NEAR(r.log.back().passes, 150.0, 1e-9);  // one forward-backward per sentence; monitoring free
  EXPECT_EQ(r.log.back().active_features, r.w.size() - zeros);
}

TEST(SgdL1, L2OnlyReachesTheLbfgsOptimumWithMiniBatches) {
  auto p = random_problem(3, 20, 2, 30, 6, 32);
  const double c2 = 0.5;
  const Result ref = run("lbfgs", p, 0.0, c2, quasi_newton_tight());
  for (std::size_t batch : {1u, 4u}) {
    TrainOptions o;
    // A batch of 4 takes 4× fewer steps per epoch (mean gradient): more epochs, slower decay.
    o.epochs = batch == 1 ? 150 : 600;
    o.eta0 = batch == 1 ? 0.5 : 1.0;
    o.alpha = batch == 1 ? 0.97 : 0.99;
    o.batch_size = batch;
    const Result r = run("sgd-l1", p, 0.0, c2, o);
    const double f = full_objective(p, r.w, 0.0, c2);
    EXPECT_NEAR(r.f, f, 1e-9 * f);  // lazy L2 decay flushed before reporting
    EXPECT_LT((f - ref.f) / ref.f, 1e-4) << "batch " << batch << ": " << f << " vs " << ref.f;
  }
}

TEST(SgdL1, LazyL2DecayEqualsEagerDecay) {
  // Host reference with the same shuffles: per batch w ← w − η_k·(1/m)·Σ∇NLL, then every weight
  // decays by d_k = 1 − 2·η_k·c2/N (the order the lazy scheme implements).
  auto p = random_problem(3, 20, 2, 13, 6, 39);
  const double c2 = 0.8;
  TrainOptions o;
  o.epochs = 3;
  o.eta0 = 0.3;
  o.alpha = 0.9;
  o.batch_size = 3;
  const Result r = run("sgd-l1", p, 0.0, c2, o);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t n = p.dims.num_weights(), S = p.corpus.num_sentences();
  std::vector<double> w(n, 0.0);
  EpochShuffler shuffler(S, o.seed);
  std::size_t k = 0;
  for (int e = 0; e < o.epochs; ++e) {
    const auto perm = shuffler.next();
    for (std::size_t start = 0; start < S; start += o.batch_size) {
      const std::size_t m = std::min(o.batch_size, S - start);
      const double eta = *o.eta0 * std::pow(o.alpha, double(k) / double(S));
      auto wv = to_backend(b, w);
      auto g = b.vector(n);
      b.evaluate(*corpus, *wv, {perm.data() + start, m}, g.get(), 1.0 / double(m));
      const auto gh = to_host(b, *g);
      const double d = 1.0 - 2.0 * eta * c2 / double(S);
      for (std::size_t i = 0; i < n; ++i) w[i] = d * (w[i] - eta * gh[i]);
      k += m;
    }
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(r.w[i], w[i], 1e-12 * (1 + std::fabs(w[i]))) << i;
}

TEST(SgdL1, HeuristicLineSearchConvergesAndCountsPasses) {
  auto p = random_problem(3, 20, 0, 30, 6, 33);
  const double c1 = 0.5, c2 = 0.1;
  const Result ref = run("owlqn", p, c1, c2, quasi_newton_tight());
  TrainOptions o;
  o.epochs = 100;
  o.eta0 = 0.5;
  o.alpha = 0.95;
  o.line_search = LineSearch::heuristic;
  const Result r = run("sgd-l1", p, c1, c2, o);
  const double f = full_objective(p, r.w, c1, c2);
  EXPECT_NEAR(r.f, f, 1e-9 * f);
  EXPECT_LT((f - ref.f) / ref.f, 1e-3) << f << " vs " << ref.f;
  // Per sentence: one forward-backward + 3 forward-only trials.
  EXPECT_NEAR(r.log.back().passes, 4.0 * o.epochs, 1e-9);
  // A bad η₀ (far too small) is rescued by the search growing the rate; plain SGD is not.
  TrainOptions small = o;
  small.eta0 = 0.005;
  small.epochs = 10;
  const Result with = run("sgd-l1", p, c1, c2, small);
  small.line_search = LineSearch::none;
  const Result without = run("sgd-l1", p, c1, c2, small);
  EXPECT_LT(with.f, without.f);
}

TEST(TwoStage, ReachesTheOwlqnObjectiveWithOneProgressStream) {
  auto p = random_problem(4, 30, 2, 40, 8, 34);
  const double c1 = 0.8, c2 = 0.05;
  const Result ref = run("owlqn", p, c1, c2, quasi_newton_tight());
  TrainOptions o = quasi_newton_tight();
  o.sgd_epochs = 3;
  const Result r = run("two-stage", p, c1, c2, o);
  EXPECT_NEAR(r.f, ref.f, 1e-7 * ref.f);
  EXPECT_NEAR(full_objective(p, r.w, c1, c2), r.f, 1e-9 * r.f);
  ASSERT_GT(r.log.size(), 4u);
  for (std::size_t i = 0; i < r.log.size(); ++i) {
    EXPECT_EQ(r.log[i].iteration, int(i + 1));
    if (i) {
      EXPECT_GT(r.log[i].passes, r.log[i - 1].passes);
      EXPECT_GE(r.log[i].seconds, r.log[i - 1].seconds);
    }
  }
  EXPECT_NEAR(r.log[2].passes, 3 * 4.0, 1e-9);  // stage 1: heuristic line search, 4 passes/epoch
  std::size_t zeros = 0;
  for (double x : r.w) zeros += x == 0.0;
  EXPECT_GT(zeros, 0u);
}

TEST(Adf, ReachesTheLbfgsOptimumWithSlowRateDecay) {
  auto p = random_problem(3, 20, 0, 30, 6, 35);
  const double c2 = 0.5;
  const Result ref = run("lbfgs", p, 0.0, c2, quasi_newton_tight());
  TrainOptions o;
  o.epochs = 200;
  o.eta0 = 0.5;
  o.adf_alpha = 0.999;
  o.adf_beta = 0.97;
  o.adf_windows = 2;
  const Result r = run("adf", p, 0.0, c2, o);
  const double f = full_objective(p, r.w, 0.0, c2);
  EXPECT_NEAR(r.f, f, 1e-9 * f);
  EXPECT_LT((f - ref.f) / ref.f, 1e-4) << f << " vs " << ref.f;
  EXPECT_NEAR(r.log.back().passes, 200.0, 1e-9);
  // Defaults (β = 0.6 per window) freeze the frequent features early: worse, but still a descent.
  TrainOptions d;
  d.epochs = 5;
  const Result r2 = run("adf", p, 0.0, c2, d);
  EXPECT_LT(r2.f, full_objective(p, std::vector<double>(r.w.size(), 0.0), 0.0, c2));
}

// ---- trainers: the perceptron ------------------------------------------------------------------

TEST(Perceptron, AveragingEqualsNaiveRunningSum) {
  auto p = random_problem(3, 15, 2, 25, 6, 36, /*binary=*/true);  // integer weights: exact
  TrainOptions o;
  o.epochs = 4;
  o.seed = 77;
  const Result r = run("ap", p, 0.0, 0.0, o);
  // Naive: the same shuffles, w after every sentence summed explicitly.
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  const std::size_t n = p.dims.num_weights();
  std::vector<double> w(n, 0.0), sum(n, 0.0);
  EpochShuffler shuffler(p.corpus.num_sentences(), o.seed);
  double T = 0;
  std::size_t updates = 0;
  for (int e = 0; e < o.epochs; ++e) {
    for (std::uint32_t id : shuffler.next()) {
      const std::vector<std::uint32_t> ids = {id};
      std::vector<std::uint32_t> pred(p.corpus.length(id));
      b.viterbi(*corpus, *to_backend(b, w), {ids.data(), 1}, pred.data(), nullptr);
      const std::uint32_t* gold = p.corpus.labels.data() + p.corpus.sentence_offsets[id];
      if (!std::equal(pred.begin(), pred.end(), gold)) ++updates;
      add_features(p, ids, gold, 1.0, w);
      add_features(p, ids, pred.data(), -1.0, w);
      for (std::size_t i = 0; i < n; ++i) sum[i] += w[i];
      T += 1;
    }
  }
  EXPECT_GT(updates, 5u);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(r.w[i], sum[i] / T, 1e-12) << i;
  EXPECT_NEAR(r.f, full_objective(p, r.w, 0.0, 0.0), 1e-9 * r.f);
  EXPECT_NEAR(r.log.back().passes, 4.0, 1e-9);  // one Viterbi (forward-only) per sentence
}

// ---- determinism and validation ----------------------------------------------------------------

TrainOptions stochastic_options(const char* algo) {
  TrainOptions o;
  o.epochs = 3;
  o.sgd_epochs = 2;
  o.max_iterations = 5;
  o.batch_size = 2;
  if (std::string(algo) == "sgd-l1") o.line_search = LineSearch::heuristic;
  return o;
}

TEST(SgdDeterminism, SameSeedSameModelAnyThreadCount) {
  auto p = random_problem(4, 30, 3, 30, 7, 37);
  for (const char* algo : {"sgd-l1", "two-stage", "adf", "ap"}) {
    TrainOptions o = stochastic_options(algo);
    const Result a = run(algo, p, 0.3, 0.2, o, 1);
    const Result b = run(algo, p, 0.3, 0.2, o, 1);
    const Result c = run(algo, p, 0.3, 0.2, o, 3);
    EXPECT_EQ(a.w, b.w) << algo;
    EXPECT_EQ(a.w, c.w) << algo;
    EXPECT_EQ(a.f, c.f) << algo;
    o.seed = 2;
    const Result d = run(algo, p, 0.3, 0.2, o, 1);
    EXPECT_NE(a.w, d.w) << algo << ": the seed must matter";
  }
}

TEST(SgdDeterminism, ShufflerIsAFixedPermutationSequence) {
  EpochShuffler s(10, 5), t(10, 5);
  const auto a = s.next();
  EXPECT_EQ(a, t.next());
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 10; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(a, s.next());  // epochs differ
}

TEST(SgdOptions, InvalidOptionsThrow) {
  auto p = random_problem(3, 10, 0, 8, 4, 38);
  // Each refusal must name the option at fault.
  auto bad = [&](const char* algo, const char* option, auto edit) {
    TrainOptions o;
    o.epochs = 1;
    edit(o);
    try {
      run(algo, p, 0.1, 0.1, o);
      ADD_FAILURE() << algo << ": no error for a bad " << option;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << algo << ": " << e.what();
    }
  };
  for (const char* algo : {"sgd-l1", "two-stage"}) {
    bad(algo, "eta0", [](TrainOptions& o) { o.eta0 = 0; });
    bad(algo, "eta0", [](TrainOptions& o) { o.eta0 = -1; });
    bad(algo, "alpha", [](TrainOptions& o) { o.alpha = 0; });
    bad(algo, "alpha", [](TrainOptions& o) { o.alpha = 1.5; });
    bad(algo, "batch", [](TrainOptions& o) { o.batch_size = 0; });
  }
  bad("sgd-l1", "epochs", [](TrainOptions& o) { o.epochs = 0; });
  try {  // names are parsed where they are read (the CLI): an unknown one is refused, named
    parse_line_search("wolfe");
    ADD_FAILURE() << "no error for line search 'wolfe'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown line search 'wolfe'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_line_search("heuristic"), LineSearch::heuristic);
  EXPECT_EQ(parse_line_search("none"), LineSearch::none);
  bad("sgd-l1", "eta0", [](TrainOptions& o) { o.eta0 = 1e6; });  // L2 decay factor ≤ 0
  bad("two-stage", "sgd_epochs", [](TrainOptions& o) { o.sgd_epochs = 0; });
  bad("adf", "eta0", [](TrainOptions& o) { o.eta0 = 0; });
  bad("adf", "adf_alpha", [](TrainOptions& o) { o.adf_alpha = 0; });
  bad("adf", "adf_alpha", [](TrainOptions& o) { o.adf_alpha = 1.01; });
  bad("adf", "adf_beta", [](TrainOptions& o) { o.adf_beta = -0.5; });
  bad("adf", "adf_windows", [](TrainOptions& o) { o.adf_windows = 0; });
  bad("adf", "epochs", [](TrainOptions& o) { o.epochs = 0; });
  bad("ap", "epochs", [](TrainOptions& o) { o.epochs = 0; });
  bad("ap", "batch", [](TrainOptions& o) { o.batch_size = 0; });
  for (const char* algo : {"sgd-l1", "two-stage", "adf", "ap"}) EXPECT_STREQ(find_trainer(algo).name, algo);
}

}  // namespace
}  // namespace crfx
