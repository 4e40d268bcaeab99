// Training with seed 002's four losses (issue 16 item 3): `crfx train --loss seq-log | seq-exp |
// point-log | point-exp`. The CPU backend's evaluate and evaluate_sparse against the sum of
// chain_loss.hpp's sequence_loss over the sentences (values, and gradients mapped to the weights),
// with and without edge features, chunked and threaded; the Objective against central finite
// differences; L-BFGS, OWL-QN, RPROP, SGD-L1, two-stage and ADF with each loss lowering it; the
// refusals (sag, saga, ap) with their messages; the memory estimate; checkpoints resuming exactly
// with a loss; crfx train --loss end to end. (The CUDA backend's: tests/gpu/test_cuda_losses.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "cpu/chain_loss.hpp"
#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/loss.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::random_problem;
using test::random_weights;
using test::RandomProblem;

constexpr SequenceLoss kAll[] = {SequenceLoss::seq_log, SequenceLoss::seq_exp, SequenceLoss::point_log,
                                 SequenceLoss::point_exp};

/// The reference: Σ_i sequence_loss over `ids` at w (dense layout), its gradient mapped to the
/// weights the way the backend's marginal reduction maps marginals, times `scale`.
double reference(const RandomProblem& p, const std::vector<double>& w, const std::vector<std::uint32_t>& ids,
                 SequenceLoss loss, double scale, std::vector<double>& grad) {
  const Dims& d = p.dims;
  const Corpus& c = p.corpus;
  const std::size_t L = d.L, LL = L * L, A = d.A;
  grad.assign(d.num_weights(), 0.0);
  const double* trans = w.data() + d.transition_offset();
  LossScratch scratch;
  double total = 0;
  for (std::uint32_t s : ids) {
    const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
    std::vector<double> state(T * L, 0.0), edge(T * LL, 0.0);
    std::vector<const double*> edge_ptr(T, nullptr);
    bool any = false;
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k)
        for (std::size_t y = 0; y < L; ++y) state[t * L + y] += c.state_value(k) * w[c.state_ids[k] * L + y];
      if (t == 0 || c.edge_offsets[tok0 + t] == c.edge_offsets[tok0 + t + 1]) continue;
      double* M = edge.data() + t * LL;
      std::copy(trans, trans + LL, M);
      for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k)
        for (std::size_t j = 0; j < LL; ++j) M[j] += c.edge_value(k) * w[d.edge_offset() + c.edge_ids[k] * LL + j];
      edge_ptr[t] = M;
      any = true;
    }
    ChainScores x;
    x.T = T;
    x.L = L;
    x.state = state.data();
    x.trans = trans;
    if (any) x.edge = edge_ptr.data();
    std::vector<double> node(T * L), pair(LL, 0.0), pair_at(T * LL);
    LossGradient g{node.data(), pair.data(), pair_at.data()};
    total += sequence_loss(loss, x, c.labels.data() + tok0, g, scratch, true).value;
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k)
        for (std::size_t y = 0; y < L; ++y)
          grad[c.state_ids[k] * L + y] += scale * c.state_value(k) * node[t * L + y];
      if (t == 0) continue;
      for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k)
        for (std::size_t j = 0; j < LL; ++j)
          grad[d.edge_offset() + c.edge_ids[k] * LL + j] += scale * c.edge_value(k) * pair_at[t * LL + j];
    }
    for (std::size_t j = 0; j < LL; ++j) grad[A * L + j] += scale * pair[j];
  }
  return total;
}

void expect_close(double a, double b, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), rel * std::max(1.0, std::fabs(b))) << what << ": " << a << " vs " << b;
}

std::vector<std::uint32_t> all_ids(const RandomProblem& p) {
  std::vector<std::uint32_t> ids(p.corpus.num_sentences());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::uint32_t(i);
  return ids;
}

TEST(Losses, EvaluateIsTheSumOfSequenceLoss) {
  for (std::uint32_t E : {0u, 2u})
    for (SequenceLoss loss : kAll)
      for (unsigned threads : {1u, 3u}) {
        SCOPED_TRACE(std::string(sequence_loss_name(loss)) + (E ? " with edges" : " without edges") +
                     ", threads " + std::to_string(threads));
        const RandomProblem p = random_problem(4, 7, E, 17, 7, 11 + E);
        const std::vector<double> w = random_weights(p.dims.num_weights(), 0.6, 5);
        std::vector<double> want;
        const double value = reference(p, w, all_ids(p), loss, 0.5, want);
        for (std::size_t chunk : {std::size_t(1000), std::size_t(6)}) {
          CpuBackend b(p.dims, threads);
          b.set_chunk_tokens(chunk);
          auto corpus = b.upload(p.corpus);
          auto wv = to_backend(b, w);
          auto g = b.vector(w.size());
          const double got = b.evaluate(*corpus, *wv, all_sentences(*corpus), g.get(), 0.5, loss);
          expect_close(got, value, 1e-11, "loss");
          const std::vector<double> gh = to_host(b, *g);
          for (std::size_t k = 0; k < w.size(); ++k) expect_close(gh[k], want[k], 1e-10, "weight " + std::to_string(k));
          // Loss only: the same value.
          expect_close(b.evaluate(*corpus, *wv, all_sentences(*corpus), nullptr, 1.0, loss), value, 1e-11,
                       "loss without gradient");
          // Sparse: the same entries on the span's support, for a span naming a sentence twice.
          const std::vector<std::uint32_t> ids = {3, 0, 9, 3};
          std::vector<double> want_span;
          const double span_value = reference(p, w, ids, loss, 0.25, want_span);
          auto sg = sparse_gradients(b).sparse_vector();
          const double sparse = sparse_gradients(b).evaluate_sparse(*corpus, *wv, SentenceSpan{ids.data(), ids.size()}, *sg, 0.25,
                                                  false, loss);
          expect_close(sparse, span_value, 1e-11, "sparse loss");
          auto dense = b.vector(w.size());
          sparse_gradients(b).sparse_axpy(1.0, *sg, *dense);
          const std::vector<double> sh = to_host(b, *dense);
          for (std::size_t k = 0; k < w.size(); ++k)
            expect_close(sh[k], want_span[k], 1e-10, "sparse weight " + std::to_string(k));
        }
      }
}

TEST(Losses, SeqLogIsTodaysEvaluateBitForBit) {
  const RandomProblem p = random_problem(5, 9, 2, 20, 8, 3);
  const std::vector<double> w = random_weights(p.dims.num_weights(), 0.5, 9);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  auto wv = to_backend(b, w);
  auto g1 = b.vector(w.size()), g2 = b.vector(w.size());
  const double f1 = b.evaluate(*corpus, *wv, all_sentences(*corpus), g1.get(), 1.0);
  const double f2 = b.evaluate(*corpus, *wv, all_sentences(*corpus), g2.get(), 1.0, SequenceLoss::seq_log);
  EXPECT_EQ(std::memcmp(&f1, &f2, sizeof f1), 0);
  EXPECT_TRUE(test::bitwise_equal(to_host(b, *g1), to_host(b, *g2)));
}

/// The gradient `g` the Objective gave at w against central differences of obj.value, for every
/// `stride`-th weight.
void expect_finite_differences(Backend& b, Objective& obj, const std::vector<double>& w, const Vector& g,
                               std::size_t stride) {
  const std::vector<double> gh = to_host(b, g);
  for (std::size_t k = 0; k < w.size(); k += stride) {
    const double h = 1e-5;
    std::vector<double> wp = w, wm = w;
    wp[k] += h;
    wm[k] -= h;
    auto vp = to_backend(b, wp), vm = to_backend(b, wm);
    const double fd = (obj.value(*vp) - obj.value(*vm)) / (2 * h);
    EXPECT_NEAR(gh[k], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << "weight " << k;
  }
}

TEST(Losses, ObjectiveGradientMatchesFiniteDifferences) {
  for (SequenceLoss loss : kAll) {
    SCOPED_TRACE(sequence_loss_name(loss));
    const RandomProblem p = random_problem(3, 4, 1, 6, 5, 21);
    const std::vector<double> w = random_weights(p.dims.num_weights(), 0.4, 2);
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    Objective obj(b, *corpus, 0.0, 0.1, loss);
    EXPECT_EQ(obj.loss(), loss);
    auto wv = to_backend(b, w);
    auto g = b.vector(w.size());
    const double f = obj.value_and_gradient(*wv, *g);
    EXPECT_EQ(obj.value(*wv), f);
    expect_finite_differences(b, obj, w, *g, 1);
  }
}

/// log Σ_i e^{v_i} of the reference's per-sentence seq-log values: log H from chain_loss alone.
double reference_log_h(const RandomProblem& p, const std::vector<double>& w) {
  std::vector<double> nll, unused;
  double top = -HUGE_VAL;
  for (std::uint32_t i = 0; i < p.corpus.num_sentences(); ++i) {
    nll.push_back(reference(p, w, {i}, SequenceLoss::seq_log, 1.0, unused));
    top = std::max(top, nll.back());
  }
  double sum = 0;
  for (double v : nll) sum += std::exp(v - top);
  return top + std::log(sum);
}

TEST(Losses, SeqExpObjectiveIsTheLogOfHPlusTheL2Term) {
  // Without c1 the Objective's seq-exp is h = log(H + c2‖w‖²), ∇h = (∇H + 2·c2·w)/(H + c2‖w‖²):
  // against the backend's plain seq-exp evaluate (H, ∇H) and chain_loss's per-sentence values.
  const RandomProblem p = random_problem(3, 5, 1, 8, 6, 17);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  for (double c2 : {0.0, 0.3}) {
    SCOPED_TRACE(::testing::Message() << "c2 " << c2);
    const std::vector<double> w = random_weights(p.dims.num_weights(), 0.5, 4);
    auto wv = to_backend(b, w);
    auto raw = b.vector(w.size());
    const double H = b.evaluate(*corpus, *wv, all_sentences(*corpus), raw.get(), 1.0, SequenceLoss::seq_exp);
    double R = 0;
    for (double x : w) R += c2 * x * x;
    Objective obj(b, *corpus, 0.0, c2, SequenceLoss::seq_exp);
    ASSERT_TRUE(obj.log_scale());
    auto g = b.vector(w.size());
    const double h = obj.value_and_gradient(*wv, *g);
    EXPECT_NEAR(h, std::log(H + R), 1e-12 * std::fabs(h));
    EXPECT_NEAR(obj.value(*wv), h, 1e-13 * std::fabs(h));
    if (c2 == 0) {
      EXPECT_NEAR(h, reference_log_h(p, w), 1e-12 * std::fabs(h));
    }
    const std::vector<double> gh = to_host(b, *g), rh = to_host(b, *raw);
    for (std::size_t k = 0; k < w.size(); ++k)
      EXPECT_NEAR(gh[k], (rh[k] + 2 * c2 * w[k]) / (H + R), 1e-12) << "weight " << k;
  }
  // With c1 the L1 term cannot go inside the log: H itself.
  const std::vector<double> w = random_weights(p.dims.num_weights(), 0.5, 5);
  auto wv = to_backend(b, w);
  Objective l1(b, *corpus, 0.1, 0.3, SequenceLoss::seq_exp);
  EXPECT_FALSE(l1.log_scale());
  double R = 0;
  for (double x : w) R += 0.3 * x * x;
  const double H = b.evaluate(*corpus, *wv, all_sentences(*corpus), nullptr, 1.0, SequenceLoss::seq_exp);
  EXPECT_NEAR(l1.value(*wv), H + R, 1e-12 * (H + R));
  EXPECT_FALSE(Objective(b, *corpus, 0.0, 0.3, SequenceLoss::seq_log).log_scale());
}

TEST(Losses, SeqExpObjectiveWhereHOverflows) {
  const RandomProblem p = test::beyond_the_doubles();
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  for (double scale : {0.0, 0.05}) {
    SCOPED_TRACE(::testing::Message() << "weights ±" << scale);
    const std::vector<double> w = random_weights(p.dims.num_weights(), scale, 6);
    auto wv = to_backend(b, w);
    ASSERT_FALSE(std::isfinite(b.evaluate(*corpus, *wv, all_sentences(*corpus), nullptr, 1.0, SequenceLoss::seq_exp)));
    Objective obj(b, *corpus, 0.0, 0.2, SequenceLoss::seq_exp);
    auto g = b.vector(w.size());
    const double h = obj.value_and_gradient(*wv, *g);
    // H > 1e300 dwarfs c2‖w‖²: h = log H.
    EXPECT_NEAR(h, reference_log_h(p, w), 1e-12 * std::fabs(h));
    EXPECT_EQ(obj.value(*wv), h);
    expect_finite_differences(b, obj, w, *g, 7);
  }
}

TEST(Losses, LbfgsOnSeqExpFindsTheStationaryPointOfHItself) {
  // L-BFGS minimises log(H + c2‖w‖²); its result must be a stationary point of H + c2‖w‖² as the
  // backend's plain seq-exp evaluate computes it — also where H is beyond the doubles at w = 0.
  const RandomProblem small = random_problem(3, 10, 1, 25, 6, 8), large = test::beyond_the_doubles();
  for (const RandomProblem* p : {&small, &large}) {
    CpuBackend b(p->dims, 2);
    auto corpus = b.upload(p->corpus);
    TrainOptions o;
    o.c2 = 0.05;
    o.loss = SequenceLoss::seq_exp;
    o.max_iterations = 3000;
    o.epsilon = 1e-7;
    o.period = 0;
    Objective obj(b, *corpus, 0.0, o.c2, o.loss);
    auto w = b.vector(p->dims.num_weights());
    const auto trainer = find_trainer("lbfgs").make();
    trainer->train(obj, *w, o, [](const Progress&, const Vector&) { return true; });
    SCOPED_TRACE(trainer->stop_reason());
    auto g = b.vector(p->dims.num_weights());
    const double H = b.evaluate(*corpus, *w, all_sentences(*corpus), g.get(), 1.0, SequenceLoss::seq_exp);
    ASSERT_TRUE(std::isfinite(H));
    const double f = H + o.c2 * b.norm2sq(*w);
    b.axpy(2 * o.c2, *w, *g);  // ∇(H + c2‖w‖²)
    b.scale(1 / f, *g);
    // The trainer's own test, ‖∇h‖ ≤ 1e-7·max(1, ‖w‖), on the relative gradient of H + c2‖w‖².
    const double norm_w = std::sqrt(b.norm2sq(*w));
    EXPECT_LE(std::sqrt(b.norm2sq(*g)), 1.01e-7 * std::max(1.0, norm_w)) << "H + c2‖w‖² = " << f;
    EXPECT_GT(norm_w, 0.1);  // it moved
  }
}

TEST(Losses, OwlqnOnSeqExpFromWhereHOverflowsMeetsTheOptimalityConditions) {
  // seq-exp with c1: L-BFGS on log(H + c2‖w‖²) first, then OWL-QN on H + c2‖w‖² + c1‖w‖₁ itself
  // (owlqn.cpp). The result against the subgradient conditions of that objective, from the
  // backend's plain seq-exp evaluate: ∂_j(H + c2‖w‖²) = −c1·sign(w_j) where w_j ≠ 0, within ±c1
  // where w_j = 0.
  const RandomProblem p = test::beyond_the_doubles();
  for (const char* algo : {"owlqn", "lbfgs", "rprop"}) {
    SCOPED_TRACE(algo);
    const bool rprop = algo == std::string("rprop");
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    TrainOptions o;
    o.c1 = 0.5;
    o.c2 = 0.05;
    o.loss = SequenceLoss::seq_exp;
    o.epsilon = 1e-9;
    o.period = 0;
    if (rprop) o.max_iterations = 1500;  // RPROP's steps approach the optimum slowly: not to 1e-9
    Objective obj(b, *corpus, o.c1, o.c2, o.loss);
    ASSERT_FALSE(obj.log_scale());
    auto w = b.vector(p.dims.num_weights());
    const auto trainer = find_trainer(algo).make();
    std::vector<double> objectives;
    trainer->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
      objectives.push_back(pr.objective);
      return true;
    });
    const std::string why = trainer->stop_reason();
    SCOPED_TRACE(why);
    if (rprop) {
      EXPECT_NE(why.find("--max-iterations 1500 reached"), std::string::npos);
    }
    EXPECT_EQ(why.find(std::string(rprop ? "RPROP" : "OWL-QN") +
                       " on H + c2‖w‖² + c1‖w‖₁ from iteration "),
              0u);
    ASSERT_GE(objectives.size(), 3u);
    EXPECT_GT(objectives.front(), 600);  // log H at the first report: H beyond the doubles
    auto g = b.vector(p.dims.num_weights());
    const double H = b.evaluate(*corpus, *w, all_sentences(*corpus), g.get(), 1.0, SequenceLoss::seq_exp);
    ASSERT_TRUE(std::isfinite(H));
    b.axpy(2 * o.c2, *w, *g);
    const std::vector<double> gh = to_host(b, *g), wh = to_host(b, *w);
    std::size_t zeros = 0, bad = 0;
    for (std::size_t j = 0; j < wh.size(); ++j) {
      // Where double precision leaves OWL-QN's line search; RPROP after its iterations.
      const double tol = (rprop ? 5e-2 : 1e-3) * o.c1;
      const bool ok = wh[j] == 0 ? std::fabs(gh[j]) <= o.c1 + tol
                                 : std::fabs(gh[j] + o.c1 * (wh[j] > 0 ? 1 : -1)) <= tol;
      zeros += wh[j] == 0;
      if (!ok && ++bad <= 5) ADD_FAILURE() << "weight " << j << " = " << wh[j] << ", gradient " << gh[j];
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_GT(zeros, 0u) << "L1 made no weight zero";
    EXPECT_LT(zeros, wh.size());
  }
}

TEST(Losses, StochasticSeqExpThatOverflowsSaysWhy) {
  // SGD has no log space (log Σ_i is not a sum over sentences): from w = 0 a step on a sentence
  // with 1/p = 12^300 overflows, and the error says why and what trains it.
  const RandomProblem p = test::beyond_the_doubles();
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  TrainOptions o;
  o.loss = SequenceLoss::seq_exp;
  o.epochs = 2;
  Objective obj(b, *corpus, 0.0, 0.1, o.loss);
  auto w = b.vector(p.dims.num_weights());
  try {
    find_trainer("sgd-l1").make()->train(obj, *w, o, nullptr);
    FAIL() << "sgd-l1 trained seq-exp where 1/p overflows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the weights overflowed (--loss seq-exp weighs a sentence by 1/p, L^T at w = 0"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lbfgs and owlqn minimise it in log space"), std::string::npos) << e.what();
  }
}

TEST(Losses, OwlqnOnSeqExpResumesExactlyInEitherPhase) {
  const RandomProblem p = random_problem(3, 8, 1, 12, 6, 31);
  auto make = [](const Dims& d) -> BackendPtr { return std::make_unique<CpuBackend>(d, 2); };
  TrainOptions o = test::resume_options("owlqn");
  ASSERT_GT(o.c1, 0);
  o.loss = SequenceLoss::seq_exp;
  o.max_iterations = 60;
  o.delta = 1e-4;
  // Both phases run within the limit (phase 1 ends at about a third of it), so the stops spread
  // over the run fall in each.
  {
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    Objective obj(b, *corpus, o.c1, o.c2, o.loss);
    auto w = b.vector(p.dims.num_weights());
    const auto trainer = find_trainer("owlqn").make();
    int reports = 0;
    trainer->train(obj, *w, o, [&](const Progress&, const Vector&) { return ++reports > 0; });
    const std::string why = trainer->stop_reason();
    const std::string phase2 = "OWL-QN on H + c2‖w‖² + c1‖w‖₁ from iteration ";
    ASSERT_EQ(why.find(phase2), 0u) << why;
    const int k1 = std::atoi(why.c_str() + phase2.size()) - 1;
    EXPECT_GT(k1, 3) << why;
    EXPECT_LT(k1, reports - 3) << why;
  }
  test::check_resume_is_exact(make, p, find_trainer("owlqn"), o, 8);

  // A stop by the caller in phase 1 returns phase 1's objective as reported (the log); a run
  // resumed in phase 2 with a limit below phase 1's end restores that state and stops there.
  const std::string path = test::temp_path("owlqn-seq-exp.ckpt");
  const test::Run stopped = test::train_run(make, p, find_trainer("owlqn"), o, 2, path, false);
  EXPECT_EQ(stopped.stop_reason, stop_by_caller());
  ASSERT_EQ(stopped.reports.size(), 2u);
  EXPECT_EQ(stopped.f, stopped.reports.back().objective);
  const test::Run full = test::train_run(make, p, find_trainer("owlqn"), o, 0, path, false);
  ASSERT_GT(full.reports.size(), 20u);
  const int late = full.reports.back().iteration - 2;  // in phase 2
  const test::Run at_late = test::train_run(make, p, find_trainer("owlqn"), o, late, path, false);
  TrainOptions lower = o;
  lower.max_iterations = 3;
  const test::Run resumed = test::train_run(make, p, find_trainer("owlqn"), lower, 0, path, true);
  EXPECT_NE(resumed.stop_reason.find("): --max-iterations 3 reached"), std::string::npos) << resumed.stop_reason;
  EXPECT_TRUE(resumed.reports.empty());
  EXPECT_EQ(resumed.f, full.reports[std::size_t(late) - 1].objective);
  EXPECT_TRUE(test::bitwise_equal(resumed.w, at_late.w));
}

/// Trains `algo` with `loss` on a small problem; returns the objective before and after and the
/// last reported gradient norm.
struct Trained {
  double before, after, last_gradient_norm;
  std::string stop_reason;
};
Trained train(const std::string& algo, SequenceLoss loss, const TrainOptions& base) {
  const RandomProblem p = random_problem(3, 10, 1, 25, 6, 8);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  TrainOptions o = base;
  o.loss = loss;
  Objective obj(b, *corpus, o.c1, o.c2, loss);
  auto w = b.vector(p.dims.num_weights());
  Trained t{obj.value(*w), 0, 0, ""};
  const auto trainer = find_trainer(algo).make();
  trainer->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    t.last_gradient_norm = pr.gradient_norm;
    return true;
  });
  t.after = obj.value(*w);
  t.stop_reason = trainer->stop_reason();
  return t;
}

TEST(Losses, LbfgsLowersEveryLossAndConverges) {
  // Random labels: nothing near zero loss, a stationary point to find (the point losses are not
  // convex, and converge more slowly).
  TrainOptions o;
  o.c2 = 0.05;
  o.max_iterations = 3000;
  o.epsilon = 1e-5;
  o.period = 0;  // stop on the gradient test (or a line search that cannot improve in double precision)
  for (SequenceLoss loss : kAll) {
    SCOPED_TRACE(sequence_loss_name(loss));
    const Trained t = train("lbfgs", loss, o);
    EXPECT_LT(t.after, 0.95 * t.before);
    EXPECT_LE(t.last_gradient_norm, 1e-3) << t.stop_reason;
    EXPECT_EQ(t.stop_reason.find("max-iterations"), std::string::npos) << t.stop_reason;
  }
}

TEST(Losses, OwlqnRpropSgdAndAdfLowerEveryLoss) {
  TrainOptions o;
  o.c2 = 0.05;
  o.c1 = 0.01;
  o.max_iterations = 40;
  o.epochs = 8;
  o.batch_size = 3;
  for (const char* algo : {"owlqn", "rprop", "sgd-l1", "two-stage", "adf"})
    for (SequenceLoss loss : kAll) {
      SCOPED_TRACE(std::string(algo) + " " + sequence_loss_name(loss));
      TrainOptions oa = o;
      if (std::string(algo) == "adf") oa.c1 = 0;
      // The exponential losses' gradients are 1/p times the log-losses' (exponential in the
      // sentence length): plain SGD needs a far smaller rate, or the weights overflow.
      if (loss == SequenceLoss::seq_exp) oa.eta0 = 2e-5;
      if (loss == SequenceLoss::point_exp) oa.eta0 = 1e-3;
      const Trained t = train(algo, loss, oa);
      EXPECT_TRUE(std::isfinite(t.after));
      EXPECT_LT(t.after, (std::string(algo) == "owlqn" || std::string(algo) == "rprop" ? 0.95 : 1.0) * t.before);
    }
}

TEST(Losses, TrainersThatCannotTakeALossSaySo) {
  EXPECT_EQ(loss_refusal(find_trainer("sag"), SequenceLoss::point_log),
            "sag stores each sentence's gradient as the marginals of the log-loss, so it trains --loss seq-log "
            "only, not point-log; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss");
  EXPECT_EQ(loss_refusal(find_trainer("saga"), SequenceLoss::seq_exp),
            "saga stores each sentence's gradient as the marginals of the log-loss, so it trains --loss seq-log "
            "only, not seq-exp; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss");
  EXPECT_EQ(loss_refusal(find_trainer("ap"), SequenceLoss::point_exp),
            "ap minimises no loss (the perceptron updates on its Viterbi mistakes): --loss point-exp does not "
            "apply; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss");
  for (const auto& t : trainer_registry()) {
    EXPECT_EQ(loss_refusal(t, SequenceLoss::seq_log), "") << t.name;
    const std::string name = t.name;
    const bool any = name == "lbfgs" || name == "owlqn" || name == "rprop" || name == "sgd-l1" ||
                     name == "two-stage" || name == "adf";
    for (SequenceLoss loss : kAll) {
      if (loss != SequenceLoss::seq_log) {
        EXPECT_EQ(loss_refusal(t, loss).empty(), any) << t.name;
      }
    }
  }
  // The trainers themselves refuse (library use).
  const RandomProblem p = random_problem(3, 5, 0, 4, 4, 1);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  for (const char* algo : {"sag", "saga", "ap"}) {
    Objective obj(b, *corpus, 0.0, 1.0, SequenceLoss::point_log);
    auto w = b.vector(p.dims.num_weights());
    TrainOptions o;
    o.loss = SequenceLoss::point_log;
    try {
      find_trainer(algo).make()->train(obj, *w, o, [](const Progress&, const Vector&) { return true; });
      ADD_FAILURE() << algo << " trained with point-log";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), loss_refusal(find_trainer(algo), SequenceLoss::point_log));
    }
  }
}

TEST(Losses, NamesAndSetting) {
  for (SequenceLoss loss : kAll) EXPECT_EQ(parse_sequence_loss(sequence_loss_name(loss)), loss);
  EXPECT_EQ(sequence_loss_names(), "seq-log, seq-exp, point-log, point-exp");
  const OptionSpec* spec = find_option("loss");
  ASSERT_NE(spec, nullptr);
  TrainOptions o;
  EXPECT_EQ(spec->get(o), "seq-log");
  spec->set(o, "point-exp");
  EXPECT_EQ(o.loss, SequenceLoss::point_exp);
  try {
    spec->set(o, "hinge");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown loss 'hinge' (known: seq-log, seq-exp, point-log, point-exp)");
  }
  EXPECT_TRUE(find_trainer("lbfgs").takes("loss"));
  EXPECT_TRUE(find_trainer("sgd-l1").takes("loss"));
  EXPECT_FALSE(find_trainer("ap").takes("loss"));
}

TEST(Losses, WorkspaceCountsThePointwiseBuffers) {
  const RandomProblem p = random_problem(6, 8, 0, 30, 9, 4);
  CpuBackend b(p.dims, 2);
  const std::size_t L = 6, LL = L * L;
  const std::size_t base = b.workspace_bytes(p.corpus);
  EXPECT_EQ(b.workspace_bytes(p.corpus, SequenceLoss::seq_log), base);
  EXPECT_GT(b.workspace_bytes(p.corpus, SequenceLoss::seq_exp), base);
  // A pairwise marginal per token at least.
  EXPECT_GE(b.workspace_bytes(p.corpus, SequenceLoss::point_log), base + p.corpus.num_tokens() * LL * sizeof(double));
}

TEST(Losses, LbfgsResumesExactlyWithALoss) {
  const RandomProblem p = random_problem(3, 8, 1, 12, 6, 31);
  auto make = [](const Dims& d) -> BackendPtr { return std::make_unique<CpuBackend>(d, 2); };
  for (SequenceLoss loss : {SequenceLoss::seq_exp, SequenceLoss::point_log}) {
    SCOPED_TRACE(sequence_loss_name(loss));
    TrainOptions o = test::resume_options("lbfgs");
    o.loss = loss;
    test::check_resume_is_exact(make, p, find_trainer("lbfgs"), o, 4);
  }
}

// ---- crfx train --loss ---------------------------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }
const std::string kTrain = test::data_path("conll2000.train300.txt");
const std::string kTemplate = test::data_path("chunking.template");

TEST(LossesCli, TrainSeqExpEndToEnd) {
  // From w = 0 the exponential loss of a 50-token sentence with 23 labels is ~1e68: L-BFGS works
  // on log(H + c2‖w‖²) and converges on the gradient test (85 iterations, under 1 s).
  const std::string m = test::temp_path("seq-exp.model"), tagged = test::temp_path("seq-exp.tagged");
  std::string out;
  ASSERT_EQ(test::run(test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m) +
                          " --loss seq-exp --c2 0.1 --threads 2",
                      &out),
            0)
      << out;
  EXPECT_NE(out.find("training: lbfgs, c1 = 0, c2 = 0.1, loss seq-exp (minimised as log(H + c2·‖w‖²)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("stopped: ‖g‖ / max(1, ‖w‖)"), std::string::npos) << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " tag " + q(kTrain) + " -m " + q(m) + " -o " + q(tagged) + " --quiet",
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " eval " + q(tagged), &out), 0) << out;
  // The training data is fitted.
  const std::size_t at = out.find("accuracy:");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_GE(std::atof(out.c_str() + at + 9), 99.0) << out;
  // The seq-log default is the model of a run without --loss, byte for byte.
  const std::string a = test::temp_path("default.model"), b = test::temp_path("seq-log.model");
  const std::string common = " train " + q(kTrain) + " -t " + q(kTemplate) + " --max-iterations 5 --quiet -m ";
  ASSERT_EQ(test::run(test::crfx_binary() + common + q(a), &out), 0) << out;
  ASSERT_EQ(test::run(test::crfx_binary() + common + q(b) + " --loss seq-log", &out), 0) << out;
  EXPECT_EQ(test::read_text(a), test::read_text(b));
}

TEST(LossesCli, Refusals) {
  const std::string m = test::temp_path("refused.model");
  const std::string base = test::crfx_binary() + " train " + q(kTrain) + " -t " + q(kTemplate) + " -m " + q(m);
  struct Case {
    std::string args, message;
  } cases[] = {
      {" -a sag --loss point-log",
       "--loss: sag stores each sentence's gradient as the marginals of the log-loss, so it trains --loss seq-log "
       "only, not point-log; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss"},
      {" -a ap --loss seq-exp",
       "--loss: ap minimises no loss (the perceptron updates on its Viterbi mistakes): --loss seq-exp does not "
       "apply; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss"},
      {" -a ap --loss seq-log", "--loss is not a setting of ap"},
      {" --loss hinge", "--loss: unknown loss 'hinge' (known: seq-log, seq-exp, point-log, point-exp)"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_NE(test::run(base + c.args, &out), 0) << c.args;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(out.find("data:"), std::string::npos) << "refused only after reading the data: " << out;
  }
}

TEST(LossesCli, AlgoListShowsTheLoss) {
  std::string out;
  ASSERT_EQ(test::run(test::crfx_binary() + " train --algo list", &out), 0) << out;
  EXPECT_NE(out.find("--c1 0 --c2 1 --loss seq-log"), std::string::npos) << out;
  ASSERT_EQ(test::run(test::crfx_binary() + " train --help", &out), 0) << out;
  EXPECT_NE(out.find("--loss"), std::string::npos) << out;
  EXPECT_NE(out.find("not convex"), std::string::npos) << out;
}

}  // namespace
}  // namespace crfx
