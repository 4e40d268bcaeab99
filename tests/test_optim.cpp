// The quasi-Newton trainers: optimality at the end, L1 sparsity and optimality conditions,
// the stopping test, and determinism across thread counts.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/quasi_newton.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

using test::random_problem;

TrainOptions tight() {
  TrainOptions o;
  o.epsilon = 1e-11;
  o.delta = 0;
  o.period = 0;
  o.max_iterations = 2000;
  o.max_linesearch = 40;
  return o;
}

std::vector<double> train(const char* algo, const test::RandomProblem& p, double c1, double c2,
                          unsigned threads, const TrainOptions& o, double* f_out = nullptr) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, c1, c2);
  auto w = b.vector(p.dims.num_weights());
  const double f = find_trainer(algo).make()->train(obj, *w, o, nullptr);
  if (f_out) *f_out = f;
  return to_host(b, *w);
}

/// Smooth part h and its gradient at w, on a fresh backend.
double smooth(const test::RandomProblem& p, const std::vector<double>& w, double c2,
              std::vector<double>* grad) {
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, 0.0, c2);
  auto wv = to_backend(b, w);
  auto g = b.vector(w.size());
  const double h = obj.value_and_gradient(*wv, *g);
  if (grad) *grad = to_host(b, *g);
  return h;
}

double l1(const std::vector<double>& w) {
  double s = 0;
  for (double x : w) s += std::fabs(x);
  return s;
}

using Vec = std::vector<double>;

/// −H·q by the two-loop recursion over `pairs` (s, y), oldest first, in plain doubles.
Vec two_loop(const std::vector<std::pair<Vec, Vec>>& pairs, const Vec& q) {
  auto dot = [](const Vec& a, const Vec& b) {
    double t = 0;
    for (std::size_t i = 0; i < a.size(); ++i) t += a[i] * b[i];
    return t;
  };
  Vec r = q;
  std::vector<double> alpha(pairs.size());
  for (std::size_t k = pairs.size(); k-- > 0;) {
    const auto& [s, y] = pairs[k];
    alpha[k] = dot(s, r) / dot(y, s);
    for (std::size_t i = 0; i < r.size(); ++i) r[i] -= alpha[k] * y[i];
  }
  if (!pairs.empty()) {
    const auto& [s, y] = pairs.back();
    for (double& v : r) v *= dot(y, s) / dot(y, y);
  }
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const auto& [s, y] = pairs[k];
    const double beta = dot(y, r) / dot(y, s);
    for (std::size_t i = 0; i < r.size(); ++i) r[i] += (alpha[k] - beta) * s[i];
  }
  for (double& v : r) v = -v;
  return r;
}

TEST(LbfgsHistory, TwoLoopAndPairsWithoutCurvature) {
  Dims dims;
  dims.L = 1;
  dims.A = 4;  // 5 weights
  CpuBackend b(dims, 1);
  const std::size_t n = 5;
  auto zero = b.vector(n);
  const Vec q = {0.3, -1.2, 0.7, 2.0, -0.4};
  const std::pair<Vec, Vec> p1{{1, 0, 0.5, 0, 0}, {2, 0.1, 0.4, 0, 0}},
      p2{{0, 1, 0, -0.5, 0.2}, {0.3, 1.5, 0, -0.2, 0.1}}, p3{{0.2, 0, 0, 0, 1}, {0, 0.1, 0.3, 0.2, 3}},
      bad{{1, 1, 0, 0, 0}, {-1, -1, 0, 0, 0}};  // sᵀy < 0
  auto push = [&](LbfgsHistory& h, const std::pair<Vec, Vec>& pr) {
    auto s = to_backend(b, pr.first);
    auto y = to_backend(b, pr.second);
    h.push(*s, *zero, *y, *zero);
  };
  auto direction = [&](LbfgsHistory& h) {
    auto qv = to_backend(b, q);
    auto d = b.vector(n);
    h.direction(*qv, *d);
    return to_host(b, *d);
  };
  auto expect_near = [](const Vec& a, const Vec& e) {
    ASSERT_EQ(a.size(), e.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-12 * (1 + std::fabs(e[i]))) << i;
  };
  LbfgsHistory h(b, n, 2);
  EXPECT_EQ(h.size(), 0);
  expect_near(direction(h), two_loop({}, q));  // −q
  push(h, p1);
  push(h, p2);
  expect_near(direction(h), two_loop({p1, p2}, q));
  push(h, p3);  // full: p1 goes
  EXPECT_EQ(h.size(), 2);
  expect_near(direction(h), two_loop({p2, p3}, q));
  // A pair without curvature is not kept; it was computed in p2's slot, so p2 goes as well.
  push(h, bad);
  EXPECT_EQ(h.size(), 1);
  expect_near(direction(h), two_loop({p3}, q));
  push(h, p1);
  EXPECT_EQ(h.size(), 2);
  expect_near(direction(h), two_loop({p3, p1}, q));
  // Not full: the pair is simply not kept.
  LbfgsHistory h3(b, n, 3);
  push(h3, p1);
  push(h3, bad);
  EXPECT_EQ(h3.size(), 1);
  expect_near(direction(h3), two_loop({p1}, q));
}

TEST(Lbfgs, ReachesStationaryPoint) {
  auto p = random_problem(4, 30, 3, 40, 8, 7);
  auto w = train("lbfgs", p, 0.0, 0.5, 2, tight());
  std::vector<double> g;
  smooth(p, w, 0.5, &g);
  double gmax = 0;
  for (double x : g) gmax = std::max(gmax, std::fabs(x));
  EXPECT_LT(gmax, 1e-6);
}

TEST(Lbfgs, StopsOnImprovementTest) {
  auto p = random_problem(4, 30, 0, 40, 8, 8);
  TrainOptions o;  // CRFsuite defaults: period 10, delta 1e-5
  int iterations = 0;
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, 0.0, 1.0);
  auto w = b.vector(p.dims.num_weights());
  std::vector<double> fs;
  find_trainer("lbfgs").make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    iterations = pr.iteration;
    fs.push_back(pr.objective);
    return true;
  });
  ASSERT_GT(iterations, 11);
  ASSERT_GE(fs.size(), 12u);
  const std::size_t k = fs.size() - 1;
  EXPECT_LT((fs[k - 10] - fs[k]) / fs[k], 1e-5);           // stopped because the test held …
  EXPECT_GE((fs[k - 11] - fs[k - 1]) / fs[k - 1], 1e-5);   // … and not one iteration earlier
  EXPECT_GT(obj.passes(), double(iterations));             // evaluations are counted
}

TEST(Owlqn, SparseAndOptimal) {
  auto p = random_problem(4, 40, 3, 40, 8, 9);
  const double c1 = 0.8, c2 = 0.05;
  double f_owl = 0;
  auto w = train("owlqn", p, c1, c2, 2, tight(), &f_owl);
  std::vector<double> g;
  const double h = smooth(p, w, c2, &g);
  EXPECT_NEAR(f_owl, h + c1 * l1(w), 1e-9 * f_owl);
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) {
      ++zeros;
      EXPECT_LE(std::fabs(g[i]), c1 + 1e-6) << i;  // 0 ∈ ∂f_i
    } else {
      // OWL-QN stops where double precision no longer resolves a decrease (kNoProgress), which
      // leaves the pseudo-gradient near 1e-6·c1, not at 1e-9.
      EXPECT_NEAR(g[i] + c1 * (w[i] > 0 ? 1 : -1), 0.0, 1e-5) << i;
    }
  }
  EXPECT_GT(zeros, w.size() / 4) << "L1 should zero out many weights";
  // Its objective is no worse than that of the L2-only optimum, measured with the L1 term.
  auto w2 = train("lbfgs", p, 0.0, c2, 2, tight());
  EXPECT_LE(f_owl, smooth(p, w2, c2, nullptr) + c1 * l1(w2));
  // lbfgs with c1 > 0 runs OWL-QN.
  auto w3 = train("lbfgs", p, c1, c2, 2, tight());
  EXPECT_EQ(w3, w);
}

// RPROP reaches the tight L-BFGS optimum (L2) and the OWL-QN optimum (L1 + L2) of the same
// problem, only by following gradient signs with per-weight steps.
TEST(Rprop, ReachesTheQuasiNewtonOptima) {
  auto p = random_problem(4, 40, 3, 40, 8, 9);
  TrainOptions o = tight();
  o.max_iterations = 4000;
  double f_lbfgs = 0, f_rprop = 0;
  const auto w_lbfgs = train("lbfgs", p, 0.0, 0.2, 2, tight(), &f_lbfgs);
  const auto w_rprop = train("rprop", p, 0.0, 0.2, 2, o, &f_rprop);
  EXPECT_NEAR(f_rprop, f_lbfgs, 1e-9 * f_lbfgs);
  double dmax = 0;
  for (std::size_t i = 0; i < w_lbfgs.size(); ++i) dmax = std::max(dmax, std::fabs(w_rprop[i] - w_lbfgs[i]));
  EXPECT_LT(dmax, 1e-4);
  const double c1 = 0.8, c2 = 0.05;
  double f_owl = 0;
  const auto w_owl = train("owlqn", p, c1, c2, 2, tight(), &f_owl);
  const auto w_l1 = train("rprop", p, c1, c2, 2, o, &f_rprop);
  EXPECT_NEAR(f_rprop, f_owl, 1e-6 * f_owl);
  EXPECT_NEAR(f_rprop, smooth(p, w_l1, c2, nullptr) + c1 * l1(w_l1), 1e-9 * f_rprop);
  std::size_t zeros = 0, zeros_owl = 0;
  for (std::size_t i = 0; i < w_l1.size(); ++i) {
    zeros += w_l1[i] == 0;
    zeros_owl += w_owl[i] == 0;
  }
  EXPECT_GT(zeros, w_l1.size() / 4) << "L1 should zero out many weights";
  EXPECT_NEAR(double(zeros), double(zeros_owl), 0.02 * double(w_l1.size()));
}

TEST(Trainers, IdenticalForAnyThreadCount) {
  // ~1,650 tokens, so the parallel marginal reduction (from 1,024 tokens) is in play.
  auto p = random_problem(5, 50, 4, 300, 10, 10);
  TrainOptions o;
  o.max_iterations = 30;
  for (const char* algo : {"lbfgs", "owlqn", "rprop"}) {
    auto w1 = train(algo, p, algo[0] != 'l' ? 0.5 : 0.0, 0.2, 1, o);
    auto w3 = train(algo, p, algo[0] != 'l' ? 0.5 : 0.0, 0.2, 3, o);
    EXPECT_EQ(w1, w3) << algo;
  }
}

TEST(Trainers, RegistryListsAndRejects) {
  EXPECT_GE(trainer_registry().size(), 2u);
  EXPECT_STREQ(find_trainer("owlqn").name, "owlqn");
  try {
    find_trainer("nope");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("lbfgs"), std::string::npos);
  }
}

}  // namespace
}  // namespace crfx
