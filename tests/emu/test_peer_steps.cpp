// crfx — pa's and arow's steps on the emulated device (issue 37; the counts as in
// test_stochastic_steps.cpp, stochastic_counts.hpp):
//   - a sentence's step — decode, Δ over the sentence's plan made once, w·Δ and ‖Δ‖² (arow:
//     Σ Δ_j²·Σ_jj) reduced on the device, τ (α) and ℓ by one thread with the host's formulas, the
//     updates gated there (SparseGradients::peer_step) — leaves nothing for the host to wait for:
//     an epoch of 300 steps copies and waits as one of 30, where each step waited four times;
//   - (that step is bitwise the primitives', and the runs the steps one at a time: the GPU suite's
//     tests/gpu/test_cuda_peer_steps.cpp);
//   - the trainer's epoch loss (read back once, at the epoch's end) is the one it stops on, and a
//     checkpoint inside the epoch saves the sum so far (read back there).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "checkpoint_check.hpp"
#include "rules/peer_update.hpp"
#include "rules/rule_set.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

// pa (averaged, the default; edge features), arow (none) and mira at batch size 1: the copies to
// and from the device, the host's waits and the launches of an epoch do not grow with its steps
// (its steps in runs: one launch for up to 512). An epoch
// reads its loss back (and the first makes the sentences' plans); mira's also puts its bounds and
// counts on the device and takes them back.
TEST(StochasticShape, PeerCopiesAndWaitsPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  struct Case {
    const char* algo;
    std::uint32_t E;
    std::size_t extra;  // mira's copies and waits of its state
  };
  for (const Case& c : {Case{"pa", 3, 0}, Case{"arow", 0, 0}, Case{"mira", 3, 2}}) {
    SCOPED_TRACE(::testing::Message() << c.algo << " E=" << c.E);
    const EpochCounts small = count_epochs(c.algo, 30, 1, 0.0, c.E);
    const EpochCounts large = count_epochs(c.algo, 300, 1, 0.0, c.E);
    for (int e = 0; e < 2; ++e) {
      SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
      expect_same_host_counts(small, large, e);
      EXPECT_LE(large.epoch[e].syncs, (e == 0 ? 5u : 4u) + c.extra)
          << "host synchronisations of an epoch of " << large.steps << " steps";
      EXPECT_LE(large.epoch[e].to_device, (e == 0 ? 16u : 4u) + c.extra);
      EXPECT_LE(large.epoch[e].to_host, 4u + c.extra);
      EXPECT_LE(large.epoch[e].launches, 20 * large.steps) << "launches per step bounded";
      // The steps go in runs (peer_steps): 30 and 300 steps launch as many kernels.
      EXPECT_EQ(large.epoch[e].launches, small.epoch[e].launches) << "a run";
    }
    const std::string key = std::string(c.algo) + "_E" + std::to_string(c.E);
    RecordProperty(key + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
    RecordProperty(key + "_copies_per_epoch", std::to_string(large.epoch[1].to_device));
    RecordProperty(key + "_launches_per_epoch", std::to_string(large.epoch[1].launches));
  }
}

/// The mean loss of epoch 1 read from a trainer's stop reason ("the mean loss of epoch 1, X, …").
double stopping_loss(const std::string& reason) {
  const std::size_t at = reason.find("epoch 1, ");
  double x = -1;
  if (at == std::string::npos || std::sscanf(reason.c_str() + at + 9, "%lg", &x) != 1) ADD_FAILURE() << reason;
  return x;
}

// The trainer stops on the loss the device summed over the epoch (read back at its end): with
// an --epsilon above it, after epoch 1, at the CPU backend's mean loss.
TEST(StochasticShape, PeerTrainersStopOnTheDevicesEpochLoss) {
  REQUIRE_GPU();
  const RandomProblem p = with_layout(random_problem(5, 30, 3, 60, 10, 61), Layout::observed);
  for (const char* algo : {"pa", "arow"}) {
    SCOPED_TRACE(algo);
    TrainOptions o;
    o.epochs = 5;
    o.epsilon = 1e9;
    o.seed = 9;
    double loss[2];
    for (int k = 0; k < 2; ++k) {
      BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 1)) : gpu_backend(p.dims);
      auto corpus = b->upload(p.corpus);
      Objective obj(*b, *corpus, 0.0, 0.0);
      auto wv = b->vector(p.dims.num_weights());
      auto trainer = find_trainer(algo).make();
      trainer->train(obj, *wv, o, nullptr);
      loss[k] = stopping_loss(trainer->stop_reason());
    }
    EXPECT_GT(loss[0], 0.0);
    EXPECT_NEAR(loss[1], loss[0], 1e-5 * loss[0]) << "the device's epoch loss";
  }
}

// mira on the device shrinks as on the host: with --shrinking-size 1 the sentences it skips (read
// from the device's counts at each epoch's end) give the CPU backend's passes, report by report,
// and its model.
TEST(StochasticShape, MiraTrainerOnTheDeviceShrinksAsTheCpu) {
  REQUIRE_GPU();
  const RandomProblem p = with_layout(random_problem(5, 30, 3, 60, 10, 61), Layout::observed);
  TrainOptions o;
  o.epochs = 6;
  o.shrinking_size = 1;
  std::vector<double> w[2], passes[2];
  for (int k = 0; k < 2; ++k) {
    BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 1)) : gpu_backend(p.dims);
    auto corpus = b->upload(p.corpus);
    Objective obj(*b, *corpus, 0.0, 0.0);
    auto wv = b->vector(p.dims.num_weights());
    find_trainer("mira").make()->train(obj, *wv, o, [&](const Progress& pr, const Vector&) {
      passes[k].push_back(pr.passes);
      return true;
    });
    w[k] = to_host(*b, *wv);
  }
  EXPECT_TRUE(passes[1] == passes[0]) << "the sentences decoded, epoch by epoch";
  ASSERT_GE(passes[0].size(), 3u);
  EXPECT_LT(passes[0][2] - passes[0][1], 1.0) << "no sentence skipped: the shrinking untested";
  expect_close_vec(w[1], w[0], kGradTol, "mira's weights");
}

// Stopped inside epoch 1 and resumed there, the trainer stops after it on the uninterrupted run's
// loss (its stop reason prints it): the checkpoint took the device's sum so far, and the resumed
// run's steps add to it there; one sentence a step and batches of 3.
TEST(StochasticShape, PeerTrainersResumeTheDevicesLossInsideAnEpoch) {
  REQUIRE_GPU();
  const RandomProblem p = with_layout(random_problem(4, 24, 2, 17, 8, 43), Layout::observed);
  const auto make = [](const Dims& d) { return gpu_backend(d); };
  for (const char* algo : {"pa", "arow"})
    for (std::size_t batch : {1u, 3u}) {
      SCOPED_TRACE(::testing::Message() << algo << " batch " << batch);
      const TrainerInfo& info = find_trainer(algo);
      TrainOptions o = resume_options(algo);
      o.epochs = 2;
      o.epsilon = 1e9;  // stops after epoch 1, its mean loss in the reason
      o.batch_size = batch;
      const std::string path = temp_path(std::string("peer-within-") + algo + ".ckpt");
      const StoppedRun full = train_stopped(make, p, info, o, 0, path, false);
      EXPECT_NE(full.stop_reason.find("mean loss of epoch 1"), std::string::npos) << full.stop_reason;
      // after the first step, one in the middle and the epoch's last but one (17 sentences)
      for (std::size_t k : batch == 1 ? std::vector<std::size_t>{1, 9, 16} : std::vector<std::size_t>{1, 3, 5}) {
        SCOPED_TRACE(::testing::Message() << "stopped after step " << k);
        const StoppedRun first = train_stopped(make, p, info, o, k, path, false);
        ASSERT_EQ(first.within.size(), 1u);
        const StoppedRun rest = train_stopped(make, p, info, o, 0, path, true);
        EXPECT_EQ(rest.stop_reason, full.stop_reason);
        EXPECT_TRUE(bitwise_equal(rest.w, full.w));
      }
    }
}

}  // namespace
}  // namespace crfx::test
