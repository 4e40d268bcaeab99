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

/// `steps` scheduled steps of SAG or SAGA on sentences from a fixed sequence, queued (the CUDA
/// backend's incremental_schedule, its scalars read every `read_every` steps: in runs, or each
/// step on its launches) or one by one on the host's primitives (IncrementalGradients' default),
/// then flushed: w, d and the scalars.
struct ScheduledRun {
  std::vector<double> w, d;
  SagScalars scalars;
};
enum class Scheduled { host, launches, runs };
ScheduledRun run_scheduled(const RandomProblem& p, Scheduled how, const SagStepParams& params, double L0,
                           std::size_t steps, std::size_t read_every) {
  cuda::CudaBackendConfig cfg;
  cfg.sag_runs = how == Scheduled::runs;
  BackendPtr b = gpu_backend(p.dims, cfg);
  const bool queued = how != Scheduled::host;
  auto corpus = b->upload(p.corpus);
  IncrementalGradients& ig = *b->incremental();
  auto state = ig.incremental_create(*corpus);
  auto w = b->vector(p.dims.num_weights()), d = b->vector(p.dims.num_weights());
  ig.incremental_set_scalars(*state, SagScalars{L0, 0.0, 0});
  const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
  std::uint32_t x = 12345;
  for (std::size_t t = 0; t < steps; ++t) {
    x = x * 1103515245u + 12345u;
    const std::uint32_t sid = (x >> 8) % n;
    const SentenceSpan span{&sid, 1};
    if (queued)
      ig.incremental_schedule(*state, span, params, *w, *d);
    else
      schedule_on_host(ig, *state, span, params, *w, *d);
    if ((t + 1) % read_every == 0) ig.incremental_scalars(*state);
  }
  ScheduledRun out;
  out.scalars = ig.incremental_scalars(*state);
  ig.incremental_flush(*state, *w, *d);
  out.w = to_host(*b, *w);
  out.d = to_host(*b, *d);
  return out;
}

// The queue's model is the host's step by step, bit for bit: SAG and SAGA, with and without L1,
// read back at once or rarely, and with the halts — a start at L = 1e-3, whose first searches
// need more trials than a step queues, and an L2 coefficient so large that P_k underflows every
// few steps (a flush between two steps).
TEST(StochasticShape, QueuedSagStepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (bool saga : {false, true})
    for (double mu1 : {0.0, 0.01})
      for (double lambda : {0.02, 400.0})
        for (double L0 : {1.0, 1e-3})
          for (std::size_t read_every : {1000u, 7u}) {
            if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
            SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " mu1=" << mu1 << " lambda=" << lambda
                                              << " L0=" << L0 << " read every " << read_every);
            SagStepParams params{lambda, mu1, saga ? 3.0 : 1.0, 1.0, nd, 7.0, 1.0 / nd, 0.97, saga};
            const ScheduledRun host = run_scheduled(p, Scheduled::host, params, L0, 90, read_every);
            for (Scheduled how : {Scheduled::launches, Scheduled::runs}) {
              SCOPED_TRACE(how == Scheduled::runs ? "in runs" : "a step's launches");
              const ScheduledRun queue = run_scheduled(p, how, params, L0, 90, read_every);
              EXPECT_TRUE(queue.w == host.w) << "w";
              EXPECT_TRUE(queue.d == host.d) << "d";
              EXPECT_EQ(queue.scalars.L, host.scalars.L);
              EXPECT_EQ(queue.scalars.alpha, host.scalars.alpha);
              EXPECT_EQ(queue.scalars.trials, host.scalars.trials);
            }
            EXPECT_GT(host.scalars.trials, 0u);
          }
  // In runs at L > 32 (the forward-backward on a group of the block), and over 1,000 steps: the
  // queue's cap grows to 512, so that one wait takes two runs (the first launched at 256 steps).
  struct Long {
    std::uint32_t L;
    std::size_t steps;
  };
  for (const Long& k : {Long{40, 60}, Long{4, 1000}}) {
    if (!schedule_share(index++)) continue;
    SCOPED_TRACE(::testing::Message() << "L=" << k.L << ", " << k.steps << " steps");
    const auto q = random_problem(k.L, 20, 2, 25, 9, 17);
    const double n = double(q.corpus.num_sentences());
    const SagStepParams params{0.02, 0.01, 1.0, 1.0, n, 7.0, 1.0 / n, 0.97, false};
    const ScheduledRun host = run_scheduled(q, Scheduled::host, params, 1e-3, k.steps, 1000000);
    const ScheduledRun runs = run_scheduled(q, Scheduled::runs, params, 1e-3, k.steps, 1000000);
    EXPECT_TRUE(runs.w == host.w) << "w";
    EXPECT_TRUE(runs.d == host.d) << "d";
    EXPECT_EQ(runs.scalars.L, host.scalars.L);
    EXPECT_EQ(runs.scalars.trials, host.scalars.trials);
  }
}

/// `steps` drawn steps of SAG-NUS (incremental_schedule_drawn: queued on the CUDA backend, in runs
/// or on each step's launches, or one by one on its primitives, schedule_drawn_on_host) from a sampler whose every sentence is seen
/// with L_i = Li (read back every `read_every` steps), then flushed: w, d, the scalars, the sampler.
struct DrawnRun {
  std::vector<double> w, d, sum, max;
  std::vector<char> seen;
  SagScalars scalars;
  std::uint64_t m = 0, next = 0;  // sentences seen; the generator's next output
};
DrawnRun run_drawn(const RandomProblem& p, Scheduled how, const SagStepParams& params, SamplerMode mode, double Li,
                   std::size_t steps, std::size_t read_every) {
  cuda::CudaBackendConfig cfg;
  cfg.sag_runs = how == Scheduled::runs;
  BackendPtr b = gpu_backend(p.dims, cfg);
  const bool queued = how != Scheduled::host;
  auto corpus = b->upload(p.corpus);
  IncrementalGradients& ig = *b->incremental();
  auto state = ig.incremental_create(*corpus);
  auto w = b->vector(p.dims.num_weights()), d = b->vector(p.dims.num_weights());
  ig.incremental_set_scalars(*state, SagScalars{1.0, 0.0, 0});
  const std::size_t n = p.corpus.num_sentences();
  DrawnRun out;
  SagSamplerScalars sc{};
  sc.rng.seed(5);
  sc.n = n;
  sc.leaves = 1;
  while (sc.leaves < n) sc.leaves *= 2;
  sc.mode = mode;
  out.sum.assign(2 * sc.leaves, 0.0);
  out.max.assign(2 * sc.leaves, 0.0);
  out.seen.assign(n, 1);
  const SagSamplerRef r{&sc, out.sum.data(), out.max.data(), out.seen.data()};
  for (std::size_t i = 0; i < n; ++i) r.set(i, Li);
  sc.m = n;
  for (std::size_t t = 0; t < steps; ++t) {
    if (queued)
      ig.incremental_schedule_drawn(*state, r, params, *w, *d);
    else
      schedule_drawn_on_host(ig, *state, r, params, *w, *d);
    if ((t + 1) % read_every == 0) ig.incremental_scalars(*state);
  }
  out.scalars = ig.incremental_scalars(*state);
  ig.incremental_flush(*state, *w, *d);
  out.w = to_host(*b, *w);
  out.d = to_host(*b, *d);
  out.m = sc.m;
  out.next = sc.rng();
  return out;
}

// The drawn queue's model and sampler are the host's step by step, bit for bit: SAG and SAGA
// under mixed and lipschitz sampling, read back at once or rarely, and with the halts — every
// L_i at 1e-3 (searches that need more trials than a step queues) and an L2 coefficient so large
// that P_k underflows every few steps (L_i restored on the device, the step ended on the host).
TEST(StochasticShape, QueuedDrawnStepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (bool saga : {false, true})
    for (SamplerMode mode : {SamplerMode::mixed, SamplerMode::lipschitz})
      for (double lambda : {0.02, 400.0})
        for (double Li : {1.0, 1e-3})
          for (std::size_t read_every : {1000u, 7u}) {
            if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
            SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " mode=" << int(mode)
                                              << " lambda=" << lambda << " Li=" << Li << " read every "
                                              << read_every);
            const SagStepParams params{lambda, 0.01, saga ? 3.0 : 1.0, 1.0, nd, 0.0, 0.0, 1.0, saga};
            const DrawnRun host = run_drawn(p, Scheduled::host, params, mode, Li, 90, read_every);
            for (Scheduled how : {Scheduled::launches, Scheduled::runs}) {
              SCOPED_TRACE(how == Scheduled::runs ? "in runs" : "a step's launches");
              const DrawnRun queue = run_drawn(p, how, params, mode, Li, 90, read_every);
              EXPECT_TRUE(queue.w == host.w) << "w";
              EXPECT_TRUE(queue.d == host.d) << "d";
              EXPECT_TRUE(queue.sum == host.sum && queue.max == host.max) << "the L_i";
              EXPECT_EQ(queue.next, host.next) << "the generators";
              EXPECT_EQ(queue.scalars.alpha, host.scalars.alpha);
              EXPECT_EQ(queue.scalars.trials, host.scalars.trials);
            }
            EXPECT_GT(host.scalars.trials, 0u);
          }
  // In runs over 1,000 steps (two runs a wait once the queue's cap reaches 512) and at L = 40.
  struct Long {
    std::uint32_t L;
    std::size_t steps;
  };
  for (const Long& k : {Long{40, 60}, Long{4, 1000}}) {
    if (!schedule_share(index++)) continue;
    SCOPED_TRACE(::testing::Message() << "L=" << k.L << ", " << k.steps << " steps");
    const auto q = random_problem(k.L, 20, 2, 25, 9, 17);
    const SagStepParams params{0.02, 0.01, 1.0, 1.0, double(q.corpus.num_sentences()), 0.0, 0.0, 1.0, false};
    const DrawnRun host = run_drawn(q, Scheduled::host, params, SamplerMode::mixed, 1e-3, k.steps, 1000000);
    const DrawnRun runs = run_drawn(q, Scheduled::runs, params, SamplerMode::mixed, 1e-3, k.steps, 1000000);
    EXPECT_TRUE(runs.w == host.w) << "w";
    EXPECT_TRUE(runs.d == host.d) << "d";
    EXPECT_TRUE(runs.sum == host.sum && runs.max == host.max) << "the L_i";
    EXPECT_EQ(runs.next, host.next) << "the generators";
    EXPECT_EQ(runs.scalars.trials, host.scalars.trials);
  }
}

}  // namespace
}  // namespace crfx::test
