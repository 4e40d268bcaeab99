// crfx — the stochastic trainers' runs at batch size 1 (SparseGradients::gradient_steps: sgd-l1,
// its line search, adf, l2sgd; perceptron_steps: ap; issue 37) against the steps one at a time
// through the primitives (the trainers' own path: the support's catch-up, evaluate_sparse_gradient,
// the step's rule; perceptron_step), bit for bit, on the GPU and on the emulated device; and the
// trainers' models against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_steps.hpp"
#include "gpu_check.hpp"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_search.hpp"

namespace crfx::test {
namespace {

struct RunCase {
  bool adf;
  bool stamp;  // L2: the lazy catch-up
  bool q;      // sgd-l1 with c1: the penalties received
  bool axpy = false;  // l2sgd: w −= η·g, the NLLs summed
};

/// The state after `ids.size()` steps from w0: on the primitives one at a time, or in runs.
std::vector<std::vector<double>> run_steps(const RandomProblem& p, const std::vector<double>& w0, const RunCase& k,
                                           const std::vector<std::uint32_t>& ids, bool runs) {
  DeviceStart d(p, w0);
  Backend& b = *d.b;
  const std::size_t nw = w0.size(), steps = ids.size();
  VectorPtr q = b.vector(nw), rate = b.vector(nw), count = b.vector(nw), stamp = b.vector(nw);
  b.fill(*rate, 0.1);
  map(b, AdfRateRule{4.0, 0.95, 0.6}, {*rate, *count});  // (all at 0.095: rates not all the initial)
  // The host's scalars, as the trainers make them: a decaying rate, the L1 penalty so far, the
  // lazy decay's clock (Λ's log-sum; adf: the step count).
  const double N = 50, c1 = 0.3, c2 = 0.5, coef = k.adf ? 2 * c2 / N : 0.0;
  std::vector<double> clock(steps), eta(steps), u(steps);
  double Lambda = 0, pen = 0;
  for (std::size_t i = 0; i < steps; ++i) {
    eta[i] = 0.2 * std::pow(0.9, double(i) / N);
    clock[i] = k.adf ? double(i) : Lambda;
    pen += eta[i] * c1 / N;
    u[i] = pen;
    Lambda += std::log1p(-2.0 * eta[i] * c2 / N);
  }
  GradientSteps s;
  s.adf = k.adf;
  s.axpy = k.axpy;
  VectorPtr sum = to_backend(b, std::vector<double>{0.25});
  s.loss_sum = k.axpy ? sum.get() : nullptr;
  s.coef = coef;
  s.q = k.q ? q.get() : nullptr;
  s.rate = k.adf ? rate.get() : nullptr;
  s.count = k.adf ? count.get() : nullptr;
  s.stamp = k.stamp ? stamp.get() : nullptr;
  s.clock = clock.data();
  s.eta = eta.data();
  s.u = u.data();
  SparseGradients& sg = d.sg();
  double host_sum = 0.25;
  if (runs) {
    EXPECT_TRUE(sg.gradient_steps(*d.corpus, SentenceSpan{ids.data(), steps}, *d.w, s));
    host_sum = to_host(b, *sum)[0];
  } else {
    SparseVector& g = *d.delta;
    for (std::size_t i = 0; i < steps; ++i) {
      const SentenceSpan span{&ids[i], 1};
      if (k.stamp) {
        sg.support(*d.corpus, span, g);
        map(b, LazyDecayRule{clock[i], coef}, {*d.w, *stamp, k.adf ? rate.get() : nullptr}, &g);
      }
      if (k.axpy) {  // l2sgd's step (host/optim/l2sgd.cpp)
        const double nll = sg.evaluate_sparse(*d.corpus, *d.w, span, g, 1.0, k.stamp, SequenceLoss::seq_log);
        host_sum += nll;
        sg.sparse_axpy(-eta[i], g, *d.w);
        continue;
      }
      sg.evaluate_sparse_gradient(*d.corpus, *d.w, span, g, 1.0, k.stamp, SequenceLoss::seq_log);
      if (k.adf)
        map(b, AdfStepRule{}, {*d.w, *rate, *count}, &g);
      else
        map(b, SgdL1Rule{eta[i], u[i], 0.0, 0.0, false}, {*d.w, s.q}, &g);
    }
  }
  return {to_host(b, *d.w), to_host(b, *q), to_host(b, *rate), to_host(b, *count), to_host(b, *stamp), {host_sum}};
}

// The runs are the steps one at a time bit for bit — w and every operand the rules write — for
// sgd-l1 (with and without L1's penalties and L2's catch-up) and adf (with and without the
// catch-up), both weight layouts, with and without edge features, from zero and random weights,
// a run that repeats sentences and one of two launches (600 steps).
TEST(CudaRuns, GradientRunsEqualTheStepsOneByOne) {
  REQUIRE_GPU();
  const RunCase cases[] = {{false, false, false}, {false, true, true}, {false, false, true}, {true, false, false},
                           {true, true, false},   {false, true, false, true}, {false, false, false, true}};
  const char* names[] = {"w", "q", "rate", "count", "stamp", "the NLLs' sum"};
  std::size_t index = 0;
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : {Layout::dense, Layout::observed})
      for (double scale : {0.0, 0.4}) {
        const RandomProblem p = with_layout(random_problem(4, 15, E, 12, 7, 95), layout);
        const std::vector<double> w0 = random_weights(p.dims.num_weights(), scale, 8);
        const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
        for (const RunCase& k : cases)
          for (const std::size_t steps : {std::size_t(40), std::size_t(600)}) {
            if (steps == 600 && scale == 0.0) continue;  // (two launches: once a case is enough)
            if (!schedule_share(index++)) continue;      // (the schedule seeds share the cases)
            SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout << " w0 scale " << scale << " "
                                              << (k.adf ? "adf" : k.axpy ? "l2sgd" : "sgd-l1") << " stamp=" << k.stamp
                                              << " q=" << k.q << ", " << steps << " steps");
            std::vector<std::uint32_t> ids(steps);
            std::uint32_t x = 5151;
            for (std::uint32_t& id : ids) id = ((x = x * 1103515245u + 12345u) >> 8 & 0xffff) % n;
            const auto one = run_steps(p, w0, k, ids, false), run = run_steps(p, w0, k, ids, true);
            for (std::size_t v = 0; v < one.size(); ++v) EXPECT_TRUE(run[v] == one[v]) << names[v];
            double moved = 0;
            for (std::size_t j = 0; j < w0.size(); ++j) moved += std::abs(run[0][j] - w0[j]);
            EXPECT_GT(moved, 0.0) << "the steps left w as it was";
          }
      }
  // L = 40: the forward-backward on the block's first 64 threads (the block kernels' group).
  {
    const RandomProblem p = with_layout(random_problem(40, 15, 3, 12, 7, 96), Layout::observed);
    const std::vector<double> w0 = random_weights(p.dims.num_weights(), 0.4, 8);
    std::vector<std::uint32_t> ids(60);
    std::uint32_t x = 5353;
    for (std::uint32_t& id : ids) id = ((x = x * 1103515245u + 12345u) >> 8 & 0xffff) % 12;
    for (const RunCase& k : {cases[1], cases[4], cases[5]}) {
      SCOPED_TRACE(::testing::Message() << "L = 40 " << (k.adf ? "adf" : k.axpy ? "l2sgd" : "sgd-l1"));
      const auto one = run_steps(p, w0, k, ids, false), run = run_steps(p, w0, k, ids, true);
      for (std::size_t v = 0; v < one.size(); ++v) EXPECT_TRUE(run[v] == one[v]) << names[v];
    }
  }
  // Where the backend has no run (no transitions; a loss but seq-log's): false, nothing done.
  RandomProblem e = random_problem(4, 15, 0, 12, 7, 93);
  e.dims.transitions = false;
  for (int refused = 0; refused < 2; ++refused) {
    const RandomProblem& r = refused == 0 ? e : random_problem(4, 15, 0, 12, 7, 93);
    BackendPtr b = gpu_backend(r.dims);
    auto corpus = b->upload(r.corpus);
    auto w = b->vector(r.dims.num_weights());
    const std::uint32_t one = 0;
    const double zero = 0;
    GradientSteps s;
    s.eta = s.u = s.clock = &zero;
    if (refused == 1) s.loss = SequenceLoss::seq_exp;
    EXPECT_FALSE(b->sparse()->gradient_steps(*corpus, SentenceSpan{&one, 1}, *w, s)) << refused;
    EXPECT_TRUE(to_host(*b, *w) == std::vector<double>(r.dims.num_weights(), 0.0));
  }
}

/// sgd-l1 with its heuristic line search: w, q, the stamps and (u, Λ) after the steps, one at a
/// time (sgd_l1_search_step) or in runs.
std::vector<std::vector<double>> run_search_steps(const RandomProblem& p, const std::vector<double>& w0, bool l1,
                                                  bool l2, const std::vector<std::uint32_t>& ids, bool runs) {
  DeviceStart d(p, w0);
  Backend& b = *d.b;
  const std::size_t nw = w0.size(), steps = ids.size();
  VectorPtr q = b.vector(nw), stamp = b.vector(nw), scalars = to_backend(b, std::vector<double>{0.01, -0.002});
  const double N = 50, c1 = l1 ? 0.3 : 0.0, c2 = l2 ? 0.5 : 0.0;
  std::vector<SgdL1StepParams> search(steps);
  for (std::size_t i = 0; i < steps; ++i)
    search[i] = sgd_l1_step_params(0.2 * std::pow(0.9, double(i) / N), c1, c2, N, SequenceLoss::seq_log);
  SparseGradients& sg = d.sg();
  Vector* qv = l1 ? q.get() : nullptr;
  Vector* sv = l2 ? stamp.get() : nullptr;
  if (runs) {
    GradientSteps s;
    s.line_search = true;
    s.search = search.data();
    s.scalars = scalars.get();
    s.q = qv;
    s.stamp = sv;
    s.c1 = c1;
    s.N = N;
    EXPECT_TRUE(sg.gradient_steps(*d.corpus, SentenceSpan{ids.data(), steps}, *d.w, s));
  } else {
    SparseVectorPtr saved = sg.sparse_vector();
    for (std::size_t i = 0; i < steps; ++i)
      EXPECT_TRUE(sg.sgd_l1_search_step(*d.corpus, SentenceSpan{&ids[i], 1}, search[i], *d.w, qv, sv, *scalars,
                                        *d.delta, *saved));
  }
  return {to_host(b, *d.w), to_host(b, *q), to_host(b, *stamp), to_host(b, *scalars)};
}

// sgd-l1's heuristic line search in runs (the gradient, the penalty and each trial's by
// reduce_on_device's passes taken one after another, the forward-only trials, the search in
// shared memory) is sgd_l1_search_step one step at a time bit for bit: w, q, the stamps, u and Λ;
// with and without L1 and L2, both layouts, edge features, 40 and 600 steps.
TEST(CudaRuns, SgdSearchRunsEqualTheStepsOneByOne) {
  REQUIRE_GPU();
  const char* names[] = {"w", "q", "stamp", "u and Λ"};
  std::size_t index = 0;
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : {Layout::dense, Layout::observed})
      for (const auto& [l1, l2] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
        const RandomProblem p = with_layout(random_problem(4, 15, E, 12, 7, 97), layout);
        const std::vector<double> w0 = random_weights(p.dims.num_weights(), 0.4, 9);
        const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
        for (const std::size_t steps : {std::size_t(40), std::size_t(600)}) {
          if (steps == 600 && !(l1 && l2)) continue;  // (two launches: once a layout is enough)
          if (!schedule_share(index++)) continue;      // (the schedule seeds share the cases)
          SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout << " l1=" << l1 << " l2=" << l2 << ", "
                                            << steps << " steps");
          std::vector<std::uint32_t> ids(steps);
          std::uint32_t x = 6161;
          for (std::uint32_t& id : ids) id = ((x = x * 1103515245u + 12345u) >> 8 & 0xffff) % n;
          const auto one = run_search_steps(p, w0, l1, l2, ids, false), run = run_search_steps(p, w0, l1, l2, ids, true);
          for (std::size_t v = 0; v < one.size(); ++v) EXPECT_TRUE(run[v] == one[v]) << names[v];
          EXPECT_TRUE(one[3] != (std::vector<double>{0.01, -0.002})) << "u and Λ as they were";
        }
      }
  // L = 40: the forward-backward (and the trials' forward passes) on the block's first 64 threads.
  const RandomProblem p = with_layout(random_problem(40, 15, 3, 12, 7, 98), Layout::observed);
  const std::vector<double> w0 = random_weights(p.dims.num_weights(), 0.4, 9);
  std::vector<std::uint32_t> ids(60);
  std::uint32_t x = 6363;
  for (std::uint32_t& id : ids) id = ((x = x * 1103515245u + 12345u) >> 8 & 0xffff) % 12;
  const auto one = run_search_steps(p, w0, true, true, ids, false), run = run_search_steps(p, w0, true, true, ids, true);
  for (std::size_t v = 0; v < one.size(); ++v) EXPECT_TRUE(run[v] == one[v]) << "L = 40: " << names[v];
}

// The trainers at batch size 1 in runs (sgd-l1 with L1 and L2, with and without its line search;
// adf; l2sgd, its calibration included): the device's model is the CPU backend's to the GPU
// suite's tolerance, and two device runs agree bit for bit.
TEST(CudaRuns, GradientRunTrainersReachTheCpuModel) {
  REQUIRE_GPU();
  const RandomProblem p = with_layout(random_problem(5, 30, 3, 60, 10, 63), Layout::observed);
  for (const char* algo : {"sgd-l1", "sgd-l1-ls", "adf", "l2sgd"}) {
    SCOPED_TRACE(algo);
    const bool ls = std::string(algo) == "sgd-l1-ls";
    TrainOptions o;
    o.epochs = 3;
    o.seed = 4;
    if (ls) o.line_search = LineSearch::heuristic;
    const auto w = cpu_and_two_device_models(p, ls ? "sgd-l1" : algo, o, 0.2, 0.5);
    expect_close_vec(w[1], w[0], kGradTol, "the weights");
    EXPECT_TRUE(w[1] == w[2]) << "two device runs: weights not bitwise equal";
    std::size_t nonzero = 0;
    for (double x : w[1]) nonzero += x != 0;
    EXPECT_GT(nonzero, w[1].size() / 10) << "the model learned little";
  }
}

// ap's steps at batch size 1 in runs (perceptron_steps: one launch of one block for up to
// kRunIds steps) are the steps one at a time (perceptron_step, u scaled by t0 + i and not
// updated where that is 0) bit for bit: w and u, both weight layouts, with and without edge
// features, from zero weights and from random ones, a run that repeats sentences and one of two
// launches (600 steps).
TEST(CudaRuns, PerceptronRunsEqualTheStepsOneByOne) {
  REQUIRE_GPU();
  std::size_t index = 0;
  for (std::uint32_t E : {0u, 3u})
  for (Layout layout : {Layout::dense, Layout::observed})
    for (double scale : {0.0, 0.4}) {
      if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
      SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout << " w0 scale " << scale);
      const RandomProblem p = with_layout(random_problem(4, 15, E, 12, 7, 93), layout);
      const std::vector<double> w0 = random_weights(p.dims.num_weights(), scale, 6);
      const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
      for (const std::size_t steps : {std::size_t(40), std::size_t(600)})
        for (const double t0 : {0.0, 7.0}) {
          SCOPED_TRACE(::testing::Message() << steps << " steps after " << t0);
          std::vector<std::uint32_t> ids(steps);
          std::uint32_t x = 4242;
          for (std::uint32_t& id : ids) id = (x = x * 1103515245u + 12345u) >> 8 & 0xffff;
          for (std::uint32_t& id : ids) id %= n;
          std::vector<double> got[2][2];  // [one by one, run][w, u]
          for (int run = 0; run < 2; ++run) {
            DeviceStart d(p, w0);
            if (run) {
              ASSERT_TRUE(d.sg().perceptron_steps(*d.corpus, SentenceSpan{ids.data(), steps}, *d.w, d.u.get(), t0));
            } else {
              for (std::size_t i = 0; i < steps; ++i)
                ASSERT_TRUE(d.sg().perceptron_step(*d.corpus, SentenceSpan{&ids[i], 1}, *d.w,
                                                   t0 + double(i) > 0 ? d.u.get() : nullptr, t0 + double(i), *d.delta));
            }
            got[run][0] = to_host(*d.b, *d.w);
            got[run][1] = to_host(*d.b, *d.u);
          }
          EXPECT_TRUE(got[1][0] == got[0][0]) << "w";
          EXPECT_TRUE(got[1][1] == got[0][1]) << "u";
          double moved = 0;
          for (std::size_t k = 0; k < w0.size(); ++k) moved += std::abs(got[1][0][k] - w0[k]);
          EXPECT_GT(moved, 0.0) << "no step had a mistake";
        }
    }
  // Where the backend has no run (a model without transitions): false, nothing done.
  RandomProblem e = random_problem(4, 15, 0, 12, 7, 93);
  e.dims.transitions = false;
  BackendPtr b = gpu_backend(e.dims);
  auto corpus = b->upload(e.corpus);
  auto w = b->vector(e.dims.num_weights());
  const std::uint32_t one = 0;
  EXPECT_FALSE(b->sparse()->perceptron_steps(*corpus, SentenceSpan{&one, 1}, *w, nullptr, 0.0));
  EXPECT_TRUE(to_host(*b, *w) == std::vector<double>(e.dims.num_weights(), 0.0));
}

}  // namespace
}  // namespace crfx::test
