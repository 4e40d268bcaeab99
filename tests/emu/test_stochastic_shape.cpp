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

namespace crfx::test {
namespace {

struct EpochCounts {
  emu::HostCounters create;    // incremental_create's (a trainer's first step included)
  emu::HostCounters epoch[2];  // each of two epochs
  std::size_t steps = 0;       // steps per epoch
};

/// Two epochs of `algo` at batch size `batch` on n sentences, counted per epoch from the
/// progress reports (each epoch's count ends with its monitoring pass and report).
EpochCounts count_epochs(const char* algo, std::size_t n, std::size_t batch, double c1, std::uint32_t E) {
  const auto p = random_problem(5, 30, E, std::uint32_t(n), 12, 71);
  TrainOptions o;
  o.c1 = c1;
  o.c2 = 0.5;
  o.epsilon = 0;
  o.max_epochs = 2;  // sag, saga
  o.epochs = 2;      // sgd-l1, adf
  o.batch_size = batch;
  o.seed = 5;
  BackendPtr b = gpu_backend(p.dims);
  auto corpus = b->upload(p.corpus);
  Objective obj(*b, *corpus, o.c1, o.c2);
  auto w = b->vector(p.dims.num_weights());
  EpochCounts out;
  out.steps = (n + batch - 1) / batch;
  emu::reset_host_counters();
  int reports = 0;
  find_trainer(algo).make()->train(obj, *w, o, [&](const Progress&, const Vector&) {
    out.epoch[reports++] = emu::host_counters();
    emu::reset_host_counters();
    return true;
  });
  EXPECT_EQ(reports, 2);
  return out;
}

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
  for (const Case& k : {Case{"sag", 0.0, 0}, Case{"saga", 0.0, 0}, Case{"sag", 0.1, 3}, Case{"saga", 0.1, 3}}) {
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
      EXPECT_EQ(small.epoch[e].to_device, large.epoch[e].to_device) << "host → device copies, epoch " << e + 1;
      EXPECT_EQ(small.epoch[e].syncs, large.epoch[e].syncs) << "host synchronisations, epoch " << e + 1;
      EXPECT_EQ(small.epoch[e].to_host, large.epoch[e].to_host) << "device → host copies, epoch " << e + 1;
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

// The line search decided on the device (incremental_search: SagLineSearch in one-thread
// kernels) at batch size 1: a step waits for the device once — its search's result — and once
// more where its first trial fails (about a third of the steps here), and launches a bounded
// number of kernels; an epoch adds a few of each (the flush, the monitoring pass, the norms).
// Before, a step waited 3.3 times on average (its loss, ‖g‖², each trial's loss). The waits per
// epoch still grow with its steps: the sampler, whose next draw depends on the L found, is the
// host's (issue 37).
TEST(StochasticShape, SagWaitsForTheDeviceOncePerStep) {
  REQUIRE_GPU();
  for (const char* algo : {"sag", "saga"}) {
    SCOPED_TRACE(algo);
    for (std::size_t n : {30u, 300u}) {
      SCOPED_TRACE(::testing::Message() << n << " sentences");
      const EpochCounts c = count_epochs(algo, n, 1, 0.0, 3);
      for (int e = 0; e < 2; ++e) {
        EXPECT_GE(c.epoch[e].syncs, c.steps) << "epoch " << e + 1;  // the count is the one meant
        EXPECT_LE(c.epoch[e].syncs, c.steps + c.steps / 2 + 8) << "epoch " << e + 1;
        EXPECT_LE(c.epoch[e].launches, 40 * c.steps + 60) << "epoch " << e + 1;
      }
      RecordProperty(std::string(algo) + "_n" + std::to_string(n) + "_syncs_epoch2",
                     std::to_string(c.epoch[1].syncs));
      RecordProperty(std::string(algo) + "_n" + std::to_string(n) + "_launches_epoch2",
                     std::to_string(c.epoch[1].launches));
    }
  }
}

}  // namespace
}  // namespace crfx::test
