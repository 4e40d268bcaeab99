// crfx — sgd-l1's and adf's batches on the emulated device (issue 37; the counts as in
// test_stochastic_shape.cpp, stochastic_counts.hpp): at batch size 8, an epoch of 40 steps copies
// to the device and waits as one of 4 — S(batch) built on the device from the sentences' plans
// made once, the chunk plan written from launch parameters, the loss left there — where each step
// planned its span on the host, copied it and waited about three times. That step is bitwise the
// span plan's: tests/gpu/test_cuda_sparse_batch.cpp. pa's and arow's batches likewise (their step
// bitwise the primitives': test_peer_steps.cpp). Every one of them launches as many kernels a step
// at batch size 64 as at 8: a batch's gradient or Δ, and ap's update, one launch each over S(batch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

// sgd-l1 (c1 = 0.1; with L2, so support() first, and without) and adf at batch size 8, with and
// without edge features: 4 and 40 steps an epoch copy up and wait as often, a few times.
TEST(StochasticShape, SparseBatchCopiesAndWaitsPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  const std::size_t batch = 8;
  for (const char* algo : {"sgd-l1", "adf", "sgd-l1 c2=0"})
    for (std::uint32_t E : {0u, 3u}) {
      const std::string name = algo;
      SCOPED_TRACE(::testing::Message() << name << " E=" << E);
      const bool plain = name == "sgd-l1 c2=0";
      const auto tweak = [&](TrainOptions& o) {
        if (plain) o.c2 = 0;
      };
      const char* trainer = plain ? "sgd-l1" : algo;
      const EpochCounts small = count_epochs(trainer, 4 * batch, batch, 0.1, E, Sampling::mixed, tweak);
      const EpochCounts large = count_epochs(trainer, 40 * batch, batch, 0.1, E, Sampling::mixed, tweak);
      for (int e = 0; e < 2; ++e) {
        SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
        expect_same_host_counts(small, large, e);
        EXPECT_LE(large.epoch[e].syncs, 6u) << "host synchronisations of an epoch of " << large.steps << " steps";
        // The first epoch makes and copies the sentences' plans (a dozen copies, once per corpus).
        EXPECT_LE(large.epoch[e].to_device, e == 0 ? 16u : 4u);
        EXPECT_LE(large.epoch[e].launches, 16 * large.steps) << "launches per step bounded";
      }
      const std::string key = (plain ? std::string("sgd-l1_c2_0") : name) + "_B8_E" + std::to_string(E);
      RecordProperty(key + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_copies_per_epoch", std::to_string(large.epoch[1].to_device));
      RecordProperty(key + "_launches_per_step",
                     std::to_string(double(large.epoch[1].launches) / double(large.steps)));
    }
}

// pa (averaged, the default) and arow at batch sizes 8 and 64, with and without edge features: 4
// and 40 steps an epoch copy up and wait as often (peer_step on a batch: ap's decode and Δ, S(batch)
// built on the device, the loss summed there and read back at the epoch's end), where each step
// waited for its support and Δ, its w·Δ and ‖Δ‖².
TEST(StochasticShape, PeerBatchCopiesAndWaitsPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const char* algo : {"pa", "arow"})
    for (std::size_t batch : {8u, 64u})
      for (std::uint32_t E : {0u, 3u}) {
        if (!schedule_share(index++)) continue;
        SCOPED_TRACE(::testing::Message() << algo << " batch " << batch << " E=" << E);
        const EpochCounts small = count_epochs(algo, 4 * batch, batch, 0.0, E);
        const EpochCounts large = count_epochs(algo, 40 * batch, batch, 0.0, E);
        for (int e = 0; e < 2; ++e) {
          SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
          expect_same_host_counts(small, large, e);
          EXPECT_LE(large.epoch[e].syncs, e == 0 ? 5u : 4u) << "host synchronisations of an epoch of " << large.steps
                                                             << " steps";
          // The first epoch makes and copies the sentences' plans (a dozen copies, once per corpus).
          EXPECT_LE(large.epoch[e].to_device, e == 0 ? 16u : 4u);
          EXPECT_LE(large.epoch[e].to_host, 4u);
          EXPECT_LE(large.epoch[e].launches, 22 * large.steps) << "launches per step bounded";
        }
        const std::string key = std::string(algo) + "_B" + std::to_string(batch) + "_E" + std::to_string(E);
        RecordProperty(key + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
        RecordProperty(key + "_copies_per_epoch", std::to_string(large.epoch[1].to_device));
        RecordProperty(key + "_launches_per_step",
                       std::to_string(double(large.epoch[1].launches) / double(large.steps)));
      }
}

// sgd-l1 (c1 = 0.1) and adf at batch sizes 8 and 64, with and without edge features: a step
// launches no more kernels at 64 than at 8 (an epoch of 4 steps, its flush, norm, monitoring pass
// and report shared out), where the gradient took one launch a sentence (77 a step at 64).
TEST(StochasticShape, SparseBatchLaunchesDoNotGrowWithBatchSize) {
  REQUIRE_GPU();
  for (const char* algo : {"sgd-l1", "adf"})
    for (std::uint32_t E : {0u, 3u}) {
      SCOPED_TRACE(::testing::Message() << algo << " E=" << E);
      double per_step[2];
      for (int k = 0; k < 2; ++k) {
        const std::size_t batch = k == 0 ? 8 : 64;
        const EpochCounts c = count_epochs(algo, 4 * batch, batch, 0.1, E);
        per_step[k] = double(c.epoch[1].launches) / double(c.steps);
      }
      EXPECT_LE(per_step[1], per_step[0] + 0.5) << "launches a step at batch size 64 and at 8";
      EXPECT_LE(per_step[0], 20.0) << "launches a step at batch size 8";
      const std::string key = std::string(algo) + "_E" + std::to_string(E);
      RecordProperty(key + "_B8_launches_a_step", std::to_string(per_step[0]));
      RecordProperty(key + "_B64_launches_a_step", std::to_string(per_step[1]));
    }
}

/// The most kernels one step of `algo` (ap: perceptron_step; pa, arow: peer_step) launched on
/// `batch` distinct sentences, counted by the emulation step by step over three steps, each on
/// other sentences, after a first (which makes the sentences' plans and the scratch).
std::size_t launches_per_step(const std::string& algo, std::size_t batch, std::uint32_t E) {
  const auto p = random_problem(5, 30, E, std::uint32_t(4 * batch), 12, 71);
  BackendPtr b = gpu_backend(p.dims);
  auto corpus = b->upload(p.corpus);
  SparseGradients& sg = *b->sparse();
  auto w = b->vector(p.dims.num_weights());
  auto u = b->vector(p.dims.num_weights());
  auto variance = b->vector(p.dims.num_weights());
  b->fill(*variance, 0.7);
  auto delta = sg.sparse_vector();
  PeerStep step;
  step.arow = algo == "arow";
  if (step.arow) step.variance = variance.get();
  std::vector<std::uint32_t> ids(4 * batch);
  std::iota(ids.begin(), ids.end(), 0u);
  std::size_t most = 0;
  for (std::size_t t = 0; t < 4; ++t) {
    const SentenceSpan span{ids.data() + t * batch, batch};
    emu::reset_host_counters();
    const bool on_device = algo == "ap" ? sg.perceptron_step(*corpus, span, *w, u.get(), 1.5, *delta)
                                        : sg.peer_step(*corpus, span, step, *w, step.arow ? nullptr : u.get(), 1.5,
                                                       *delta);
    EXPECT_TRUE(on_device) << "no device path for the batch";
    if (t > 0) most = std::max(most, emu::host_counters().launches);
  }
  return most;
}

// ap, pa and arow at batch sizes 8 and 64, with and without edge features: a step launches no
// more kernels at 64 than at 8, a few dozen at most (before: two a sentence for Δ and its
// mistakes, ap one more for its update — 146 a step of pa at 64).
TEST(StochasticShape, MistakeDrivenBatchLaunchesDoNotGrowWithBatchSize) {
  REQUIRE_GPU();
  for (const char* algo : {"ap", "pa", "arow"})
    for (std::uint32_t E : {0u, 3u}) {
      SCOPED_TRACE(::testing::Message() << algo << " E=" << E);
      const std::size_t at8 = launches_per_step(algo, 8, E), at64 = launches_per_step(algo, 64, E);
      EXPECT_LE(at64, at8) << "launches a step at batch size 64 and at 8";
      EXPECT_LE(at8, 24u) << "launches a step at batch size 8";
      const std::string key = std::string(algo) + "_E" + std::to_string(E);
      RecordProperty(key + "_B8_launches_a_step", std::to_string(at8));
      RecordProperty(key + "_B64_launches_a_step", std::to_string(at64));
    }
}

}  // namespace
}  // namespace crfx::test
