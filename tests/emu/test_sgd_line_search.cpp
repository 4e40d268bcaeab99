// crfx — sgd-l1's heuristic line search (Zhou et al. 2011, Algorithm 1) decided on the device at
// batch size 1 (issue 37; SparseGradients::sgd_l1_search_step, kernels/backend_sgd_search.cu): an
// epoch waits for the device as often for 300 steps as for 30 — a few times, at its ends — where
// each step waited 8 times (the batch's NLL, the initial penalty, each trial's penalty and loss:
// 244 / 2404 waits an epoch at n = 30 / 300). The step's bitwise checks: tests/gpu/
// test_cuda_sgd_search.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../gpu/gpu_check.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

TEST(StochasticShape, SgdLineSearchWaitsAFewTimesPerEpoch) {
  REQUIRE_GPU();
  // L1 and L2: the lazy decay's catch-up reads Λ on the device too.
  const auto heuristic = [](TrainOptions& o) { o.line_search = LineSearch::heuristic; };
  const EpochCounts small = count_epochs("sgd-l1", 30, 1, 0.1, 3, Sampling::mixed, heuristic);
  const EpochCounts large = count_epochs("sgd-l1", 300, 1, 0.1, 3, Sampling::mixed, heuristic);
  for (int e = 0; e < 2; ++e) {
    expect_same_host_counts(small, large, e);
    // u and Λ written to the device at the epoch's first step, read back at its end.
    EXPECT_LE(large.epoch[e].syncs, 8u) << "host synchronisations, epoch " << e + 1;
    EXPECT_LE(large.epoch[e].launches, 50 * large.steps) << "launches per step bounded";
  }
  EXPECT_LE(large.epoch[1].to_device, 5u);
  RecordProperty("sgd_l1_heuristic_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
  RecordProperty("sgd_l1_heuristic_copies_per_epoch", std::to_string(large.epoch[1].to_device));
  RecordProperty("sgd_l1_heuristic_launches_per_step",
                 std::to_string(double(large.epoch[1].launches) / double(large.steps)));
}

}  // namespace
}  // namespace crfx::test
