// crfx — sgd-l1's (no line search) and adf's steps at batch size 1 in runs on the emulated device
// (SparseGradients::gradient_steps; issue 37): one launch of one block for up to kRunIds steps,
// bitwise the steps one at a time through the primitives (the trainers' own path: the support's
// catch-up, evaluate_sparse_gradient, the step's rule), and an epoch that launches as many kernels
// for 300 steps as for 30.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_search.hpp"
#include "stochastic_counts.hpp"

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
TEST(StochasticShape, GradientRunsEqualTheStepsOneByOne) {
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
TEST(StochasticShape, SgdSearchRunsEqualTheStepsOneByOne) {
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
TEST(StochasticShape, GradientRunTrainersReachTheCpuModel) {
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

// The trainers at batch size 1 (sgd-l1 with and without its line search, adf, l2sgd): an epoch of
// 300 steps launches as many kernels as one of 30 (the epoch's runs and its report's), copies and
// waits as often; adf's windows each end a run.
TEST(StochasticShape, GradientRunsLaunchPerEpochNotPerStep) {
  REQUIRE_GPU();
  const std::function<void(TrainOptions&)> heuristic = [](TrainOptions& o) { o.line_search = LineSearch::heuristic; },
                                            none;
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const char* algo : {"sgd-l1", "sgd-l1-ls", "adf", "l2sgd"})
    for (std::uint32_t E : {0u, 3u}) {
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << algo << " E=" << E);
      const bool ls = std::string(algo) == "sgd-l1-ls";
      const char* trainer = ls ? "sgd-l1" : algo;
      const EpochCounts small = count_epochs(trainer, 30, 1, 0.1, E, Sampling::mixed, ls ? heuristic : none);
      const EpochCounts large = count_epochs(trainer, 300, 1, 0.1, E, Sampling::mixed, ls ? heuristic : none);
      // l2sgd's first epoch holds its calibration, whose trials (each a run over the first
      // sentences, then a flush and a norm) depend on the data: bounded by the trials, not the steps.
      const bool calibrated = std::string(algo) == "l2sgd";
      for (int e = calibrated ? 1 : 0; e < 2; ++e) {
        SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
        expect_same_host_counts(small, large, e);
        EXPECT_EQ(small.epoch[e].launches, large.epoch[e].launches) << "kernel launches";
      }
      if (calibrated) {
        EXPECT_LE(large.epoch[0].launches, 10u * 20u) << "10 a calibration trial, at most 20";
        EXPECT_LE(large.epoch[0].syncs, 5u * 20u) << "host synchronisations, calibration included";
      }
      const std::string key = std::string(algo) + "_E" + std::to_string(E);
      RecordProperty(key + "_launches_per_epoch", std::to_string(large.epoch[1].launches));
      RecordProperty(key + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_copies_per_epoch", std::to_string(large.epoch[1].to_device));
    }
}

}  // namespace
}  // namespace crfx::test
