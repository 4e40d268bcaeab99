// crfx — what the emulated device can say about the stochastic trainers' steps without a GPU
// (issue 37): the copies, synchronisations and launches the host asks of the device per epoch of
// SAG / SAGA at batch size 1 (the default, and the case a host round trip per step makes slow).
//   - Plans made once: every sentence's span plan is made and copied by incremental_create, the
//     lazy-step history is appended on the device and the one-sentence chunk plan written there,
//     so an epoch copies to the device the same for 30 sentences (30 steps) as for 300.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "crfx/internal/trainer.hpp"
#include "emu/emu_launch.hpp"
#include "rules/sag_update.hpp"
#include "stochastic_counts.hpp"

namespace crfx::test {
namespace {

// SAG and SAGA (with and without L1, with and without edge features) at batch size 1: the host
// → device copies of an epoch do not grow with its steps — 30 steps and 300 copy the same, and
// the second epoch as the first after it. (Before plans were made once, each step copied its span
// plan, the lazy-step history, the chunk plan and SAGA's coefficient: ~16 copies a step.)
TEST(StochasticShape, SagCopiesPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  struct Case {
    const char* algo;
    double c1;
    std::uint32_t E;
  };
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const Case& k : {Case{"sag", 0.0, 0}, Case{"saga", 0.0, 0}, Case{"sag", 0.1, 3}, Case{"saga", 0.1, 3}}) {
    if (!schedule_share(index++)) continue;
    SCOPED_TRACE(::testing::Message() << k.algo << " c1=" << k.c1 << " E=" << k.E);
    const EpochCounts small = count_epochs(k.algo, 30, 1, k.c1, k.E);
    const EpochCounts large = count_epochs(k.algo, 300, 1, k.c1, k.E);
    for (int e = 0; e < 2; ++e) {
      SCOPED_TRACE(::testing::Message() << "epoch " << e + 1);
      EXPECT_EQ(small.epoch[e].to_device, large.epoch[e].to_device) << "host → device copies";
    }
    EXPECT_EQ(large.epoch[1].to_device, small.epoch[1].to_device);
    // An epoch's copies: its monitoring pass's chunk plan (3) at most — none per step.
    EXPECT_LE(large.epoch[1].to_device, 3u) << "host → device copies of an epoch of " << large.steps << " steps";
    RecordProperty(std::string(k.algo) + "_E" + std::to_string(k.E) + "_copies_per_epoch",
                   std::to_string(large.epoch[1].to_device));
    RecordProperty(std::string(k.algo) + "_E" + std::to_string(k.E) + "_syncs_per_step",
                   std::to_string(double(large.epoch[1].syncs) / double(large.steps)));
    RecordProperty(std::string(k.algo) + "_E" + std::to_string(k.E) + "_launches_per_step",
                   std::to_string(double(large.epoch[1].launches) / double(large.steps)));
  }
}

// sgd-l1 (with its L2 decay: support() each step; without its heuristic line search) and adf at
// batch size 1: evaluate_sparse and support on one sentence point into the plans made once and
// expand the support's indices on the device, and the loss neither reads
// (evaluate_sparse_gradient) stays there, so an epoch copies to the device and waits for it the
// same for 300 steps as for 30: a few times, at its end (before, each step copied its span plan
// and its support's indices, and waited for its loss).
TEST(StochasticShape, SparseTrainersCopiesAndWaitsPerEpochDoNotGrowWithSteps) {
  REQUIRE_GPU();
  for (const char* algo : {"sgd-l1", "adf"}) {
    SCOPED_TRACE(algo);
    const EpochCounts small = count_epochs(algo, 30, 1, 0.1, 3);
    const EpochCounts large = count_epochs(algo, 300, 1, 0.1, 3);
    for (int e = 0; e < 2; ++e) {
      expect_same_host_counts(small, large, e);
    }
    EXPECT_LE(large.epoch[1].to_device, 8u);
    EXPECT_LE(large.epoch[1].syncs, 8u) << "host synchronisations of an epoch of " << large.steps << " steps";
    EXPECT_LE(large.epoch[1].launches, 30 * large.steps) << "launches per step bounded";
    RecordProperty(std::string(algo) + "_copies_per_epoch", std::to_string(large.epoch[1].to_device));
    RecordProperty(std::string(algo) + "_syncs_per_epoch", std::to_string(large.epoch[1].syncs));
    RecordProperty(std::string(algo) + "_launches_per_step",
                   std::to_string(double(large.epoch[1].launches) / double(large.steps)));
  }
}

// SAG-NUS (mixed, the default, and lipschitz) at batch size 1 queued on the device with its sampler
// (incremental_schedule_drawn: each step's sentence drawn ∝ L_i on the device by the host's code,
// L_i, α, a, b, τ and SAGA's coefficient decided there): an epoch of 300 steps waits for the device
// as often as one of 30 — a few times, at its end (5 here, from 300 before) — where a step waited
// at least once before (the sampler's next draw needs the L found); and its steps go in runs of
// 256 (launch_sag_run: the draw, the search and the step's end on the device), so the epoch of 300
// launches at most one kernel more a 256 steps than the epoch of 30 (a step took ~46 before).
TEST(StochasticShape, QueuedNusWaitsAFewTimesPerEpoch) {
  REQUIRE_GPU();
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const char* algo : {"sag", "saga"}) {
    for (Sampling sampling : {Sampling::mixed, Sampling::lipschitz}) {
      if (!schedule_share(index++)) continue;
      const std::string key = std::string(algo) + (sampling == Sampling::mixed ? "_mixed" : "_lipschitz");
      SCOPED_TRACE(key);
      const EpochCounts small = count_epochs(algo, 30, 1, 0.0, 3, sampling);
      const EpochCounts large = count_epochs(algo, 300, 1, 0.0, 3, sampling);
      EXPECT_EQ(small.epoch[1].syncs, large.epoch[1].syncs) << "host synchronisations of the second epoch";
      EXPECT_LE(large.epoch[1].syncs, 10u) << "host synchronisations of an epoch of " << large.steps << " steps";
      EXPECT_LE(large.epoch[0].syncs, 20u) << "the first epoch (the queue grows from 64 steps)";
      EXPECT_LE(large.epoch[1].to_device, 4u) << "host → device copies (the sampler's only where it changed)";
      for (int e = 0; e < 2; ++e)
        EXPECT_LE(large.epoch[e].launches, small.epoch[e].launches + (large.steps + 255) / 256) << "epoch " << e + 1;
      RecordProperty(key + "_n300_syncs_epoch1", std::to_string(large.epoch[0].syncs));
      RecordProperty(key + "_n300_syncs_epoch2", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_n30_syncs_epoch2", std::to_string(small.epoch[1].syncs));
      RecordProperty(key + "_n300_copies_epoch2", std::to_string(large.epoch[1].to_device));
      RecordProperty(key + "_n300_launches_epoch2", std::to_string(large.epoch[1].launches));
      RecordProperty(key + "_n30_launches_epoch2", std::to_string(small.epoch[1].launches));
    }
  }
}

}  // namespace
}  // namespace crfx::test

namespace crfx::test {
namespace {

// Uniform sampling's steps queued on the device (incremental_schedule: L, α, a, b, τ and SAGA's
// coefficient decided there, the search looping there) at batch size 1: an epoch of 300 steps
// waits for the device as often as one of 30 — a few times, at its end — where a step waited at
// least once before; and its steps go in runs of 256 (launch_sag_run): the epoch of 300 launches
// at most one kernel more a 256 steps than the epoch of 30 (a step took ~30 launches before).
TEST(StochasticShape, QueuedSagWaitsAFewTimesPerEpoch) {
  REQUIRE_GPU();
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const char* algo : {"sag", "saga"}) {
    for (double c1 : {0.0, 0.1}) {
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << algo << " c1=" << c1);
      const EpochCounts small = count_epochs(algo, 30, 1, c1, 3, Sampling::uniform);
      const EpochCounts large = count_epochs(algo, 300, 1, c1, 3, Sampling::uniform);
      EXPECT_EQ(small.epoch[1].syncs, large.epoch[1].syncs) << "host synchronisations of the second epoch";
      EXPECT_LE(large.epoch[1].syncs, 10u) << "host synchronisations of an epoch of " << large.steps << " steps";
      EXPECT_LE(large.epoch[0].syncs, 20u) << "the first epoch (the queue grows from 64 steps; L from 1)";
      EXPECT_LE(large.epoch[1].to_device, 4u) << "host → device copies";
      for (int e = 0; e < 2; ++e)
        EXPECT_LE(large.epoch[e].launches, small.epoch[e].launches + (large.steps + 255) / 256) << "epoch " << e + 1;
      const std::string key = std::string(algo) + (c1 > 0 ? "_l1" : "");
      RecordProperty(key + "_n300_syncs_epoch1", std::to_string(large.epoch[0].syncs));
      RecordProperty(key + "_n300_syncs_epoch2", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_n30_syncs_epoch2", std::to_string(small.epoch[1].syncs));
      RecordProperty(key + "_n300_launches_epoch2", std::to_string(large.epoch[1].launches));
      RecordProperty(key + "_n30_launches_epoch2", std::to_string(small.epoch[1].launches));
    }
  }
}

// Batch steps queued on the device too (sag_enqueue_batch: S(batch) from the plans made once, the
// chunk plan from launch parameters or, SAG-NUS, the device's draws, the losses summed there): at
// batch size 8, an epoch of 40 steps waits for the device and copies to it as often as one of 4 —
// a few times, at its end — where each step planned its span on the host, copied it and waited
// for its loss, its ‖g‖² and each trial's loss (3–5 waits a step); its launches are a step's few
// dozen, whatever the batch's size.
TEST(StochasticShape, QueuedSagBatchesWaitAFewTimesPerEpoch) {
  REQUIRE_GPU();
  std::size_t index = 0;  // counts do not depend on the schedule: the schedule seeds share the cases
  for (const char* algo : {"sag", "saga"}) {
    for (const Sampling sampling : {Sampling::uniform, Sampling::mixed})
    for (std::uint32_t E : {0u, 3u}) {
      if (!schedule_share(index++)) continue;
      const bool nus = sampling == Sampling::mixed;
      SCOPED_TRACE(::testing::Message() << algo << (nus ? " mixed" : " uniform") << " E=" << E);
      const std::size_t batch = 8;
      const EpochCounts small = count_epochs(algo, 4 * batch, batch, 0.1, E, sampling);
      const EpochCounts large = count_epochs(algo, 40 * batch, batch, 0.1, E, sampling);
      EXPECT_EQ(small.epoch[1].syncs, large.epoch[1].syncs) << "host synchronisations of the second epoch";
      EXPECT_LE(large.epoch[1].syncs, 10u) << "host synchronisations of an epoch of " << large.steps << " steps";
      EXPECT_LE(large.epoch[0].syncs, 20u) << "the first epoch";
      EXPECT_EQ(small.epoch[1].to_device, large.epoch[1].to_device) << "host → device copies";
      EXPECT_LE(large.epoch[1].to_device, 4u) << "host → device copies of an epoch of " << large.steps << " steps";
      const double per_step = double(large.epoch[1].launches) / double(large.steps);
      EXPECT_LE(per_step, nus ? 56.0 : 40.0) << "launches a step (NUS: four rounds of the search queued, not two)";
      const EpochCounts wide = count_epochs(algo, 4 * 64, 64, 0.1, E, sampling);
      EXPECT_LE(wide.epoch[1].launches, small.epoch[1].launches) << "an epoch of 4 steps at batch size 64 and at 8";
      const std::string key = std::string(algo) + (nus ? "_mixed" : "_uniform") + "_B8_E" + std::to_string(E);
      RecordProperty(key + "_n320_syncs_epoch2", std::to_string(large.epoch[1].syncs));
      RecordProperty(key + "_n32_syncs_epoch2", std::to_string(small.epoch[1].syncs));
      RecordProperty(key + "_launches_per_step", std::to_string(per_step));
    }
  }
}

}  // namespace
}  // namespace crfx::test
