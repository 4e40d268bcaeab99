// crfx — sgd-l1's, adf's and l2sgd's steps at batch size 1 in runs (SparseGradients::gradient_steps;
// issue 37) on the emulated device: an epoch launches as many kernels for 300 steps as for 30.
// (The runs' bitwise checks are the GPU suite's: tests/gpu/test_cuda_runs.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "../gpu/gpu_check.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

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
