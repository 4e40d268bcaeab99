// crfx — what the emulated device can say about the mistake-driven trainers' steps without a GPU
// (issue 37; the counts as in test_stochastic_shape.cpp, stochastic_counts.hpp):
//   - ap decodes, takes Δ = f(y) − f(ŷ) over the sentences' plans made once and updates w and
//     u on the device, gated there by the path's mistakes (SparseGradients::perceptron_step; a
//     batch's chunk plan written from launch parameters): an epoch of 300 steps copies and waits
//     as one of 30 — at its end — where each step read its path back, copied Δ up and waited
//     twice;
//   - that step is bitwise the primitives' (viterbi → feature_difference → sparse_axpy);
//   - at batch size 1 the steps go in runs, one launch for hundreds (perceptron_steps), bitwise
//     the steps one at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

// ap at batch sizes 1, 8 and 64, with and without edge features: the copies to and from the
// device and the host's waits of an epoch do not grow with its steps (a batch's chunk plan is
// written from launch parameters, its Δ summed on the device); a step launches a bounded number
// of kernels per sentence (the chunk front, Viterbi, the support, the difference, the updates).
TEST(StochasticShape, PerceptronCopiesAndWaitsPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  for (std::size_t batch : {1u, 8u, 64u})
    for (std::uint32_t E : {0u, 3u}) {
      SCOPED_TRACE(::testing::Message() << "batch " << batch << " E=" << E);
      const std::size_t n = batch == 1 ? 30 : 2 * batch;  // and ten times as many
      const EpochCounts small = count_epochs("ap", n, batch, 0.0, E);
      const EpochCounts large = count_epochs("ap", 10 * n, batch, 0.0, E);
      for (int e = 0; e < 2; ++e) {
        SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
        expect_same_host_counts(small, large, e);
        EXPECT_LE(large.epoch[e].syncs, 4u) << "host synchronisations of an epoch of " << large.steps << " steps";
        // The first epoch makes and copies the sentences' plans (a dozen copies, once per corpus).
        EXPECT_LE(large.epoch[e].to_device, e == 0 ? 16u : 4u);
        EXPECT_LE(large.epoch[e].launches, (4 * batch + 12) * large.steps) << "launches per step bounded";
        // At batch size 1 the steps go in runs (perceptron_steps): 30 and 300 steps, one run each,
        // launch as many kernels (the epoch's report's).
        if (batch == 1) { EXPECT_EQ(large.epoch[e].launches, small.epoch[e].launches) << "a run"; }
      }
      const std::string key = "ap_B" + std::to_string(batch) + "_E" + std::to_string(E);
      RecordProperty(key + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_launches_per_step",
                     std::to_string(double(large.epoch[1].launches) / double(large.steps)));
    }
}

/// w and u after `steps` perceptron steps on sentences drawn from a fixed sequence, from the
/// weights w0: on the device (perceptron_step) or through the primitives, as ap took them before.
struct PerceptronRun {
  std::vector<double> w, u, delta;
  std::size_t mistaken = 0;  // steps whose path had a mistake (the primitives' count)
};
PerceptronRun run_perceptron(const RandomProblem& p, const std::vector<double>& w0, bool on_device, std::size_t steps,
                             std::size_t batch = 1) {
  DeviceStart d(p, w0);
  Backend* b = d.b.get();
  BackendCorpus* corpus = d.corpus.get();
  SparseGradients& sg = d.sg();
  Vector *w = d.w.get(), *u = d.u.get();
  SparseVector* delta = d.delta.get();
  std::vector<std::uint32_t> labels(p.corpus.num_tokens());
  const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
  PerceptronRun out;
  std::uint32_t x = 777;
  std::vector<std::uint32_t> ids(n);
  for (std::uint32_t i = 0; i < n; ++i) ids[i] = i;
  for (std::size_t t = 1; t <= steps; ++t) {
    // `batch` distinct sentences: the first of a shuffle (a partial Fisher–Yates).
    for (std::size_t i = 0; i < batch; ++i) {
      x = x * 1103515245u + 12345u;
      std::swap(ids[i], ids[i + (x >> 8) % (n - i)]);
    }
    const SentenceSpan span{ids.data(), batch};
    Vector* ut = t > 1 ? u : nullptr;
    const double a = double(t) * 0.75 - 0.5;  // not an integer: u's products round
    if (on_device) {
      EXPECT_TRUE(sg.perceptron_step(*corpus, span, *w, ut, a, *delta)) << "no device path for one sentence";
      continue;
    }
    b->viterbi(*corpus, *w, span, labels.data(), nullptr);
    if (!sg.feature_difference(*corpus, span, labels.data(), *delta, 1.0)) continue;
    ++out.mistaken;
    sg.sparse_axpy(1.0, *delta, *w);
    if (ut) sg.sparse_axpy(a, *delta, *ut);
  }
  out.w = to_host(*b, *w);
  out.u = to_host(*b, *u);
  if (batch == 1) {  // the last step's Δ (a batch's is the backend's scratch)
    auto dense = b->vector(w0.size());
    sg.sparse_axpy(1.0, *delta, *dense);
    out.delta = to_host(*b, *dense);
  }
  return out;
}

// The device's step is the primitives' bit for bit — w, u and the last Δ — in every weight
// layout, with and without edge features and transitions, from zero weights (mistakes at first)
// and from random ones (paths right and wrong).
TEST(StochasticShape, PerceptronStepOnTheDeviceEqualsThePrimitives) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (bool transitions : {true, false})
      for (Layout layout : kAllLayouts)
        for (double scale : {0.0, 0.4}) {
          SCOPED_TRACE(::testing::Message() << "E=" << E << " transitions=" << transitions << " " << layout
                                            << " w0 scale " << scale);
          RandomProblem base = random_problem(4, 15, E, 12, 7, 91 + E);
          base.dims.transitions = transitions;
          const RandomProblem p = with_layout(base, layout);
          const std::vector<double> w0 = random_weights(p.dims.num_weights(), scale, 5);
          for (std::size_t batch : {1u, 5u}) {
            SCOPED_TRACE(::testing::Message() << "batch " << batch);
            const PerceptronRun prim = run_perceptron(p, w0, false, 40, batch);
            const PerceptronRun dev = run_perceptron(p, w0, true, 40, batch);
            EXPECT_GT(prim.mistaken, 0u);
            if (batch == 1) { EXPECT_LT(prim.mistaken, 40u); }  // and steps whose path was right: the gate
            EXPECT_TRUE(dev.w == prim.w) << "w";
            EXPECT_TRUE(dev.u == prim.u) << "u";
            EXPECT_TRUE(dev.delta == prim.delta) << "the last step's Δ";
          }
        }
}

// The trainer: ap's model on the device at batch sizes 1, 8 and 64 is the CPU backend's (Viterbi
// and the differences are bitwise the CPU's; the updates may contract into FMAs on a GPU), and
// two device runs agree bit for bit.
TEST(StochasticShape, PerceptronTrainerOnTheDeviceReachesTheCpuModel) {
  REQUIRE_GPU();
  const RandomProblem p = with_layout(random_problem(5, 30, 3, 150, 10, 61), Layout::observed);
  for (std::size_t batch : {1u, 8u, 64u}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    TrainOptions o;
    o.epochs = 3;
    o.batch_size = batch;
    o.seed = 9;
    const auto w = cpu_and_two_device_models(p, "ap", o, 0.0, 0.0);
    expect_close_vec(w[1], w[0], kGradTol, "ap's averaged weights");
    EXPECT_TRUE(w[1] == w[2]) << "two device runs: weights not bitwise equal";
    double norm = 0;
    for (double x : w[1]) norm += x * x;
    EXPECT_GT(norm, 0.0) << "the model learned something";
  }
}

}  // namespace
}  // namespace crfx::test
