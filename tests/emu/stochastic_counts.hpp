// crfx — what the emulated device counts of a stochastic trainer's epochs (issue 37): the
// copies, synchronisations and launches the host asks of the device per epoch, for
// test_stochastic_shape.cpp and test_stochastic_batches.cpp (the step tests' start, DeviceStart, is
// tests/gpu/device_steps.hpp's).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "../gpu/device_steps.hpp"
#include "../gpu/gpu_check.hpp"
#include "crfx/internal/trainer.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {

struct EpochCounts {
  emu::HostCounters epoch[2];  // each of two epochs
  std::size_t steps = 0;       // steps per epoch
};

/// Two epochs of `algo` at batch size `batch` on n sentences, counted per epoch from the
/// progress reports (each epoch's count ends with its monitoring pass and report); `tweak` sets
/// further options.
inline EpochCounts count_epochs(const char* algo, std::size_t n, std::size_t batch, double c1, std::uint32_t E,
                                Sampling sampling = Sampling::mixed,
                                const std::function<void(TrainOptions&)>& tweak = nullptr) {
  const auto p = random_problem(5, 30, E, std::uint32_t(n), 12, 71);
  TrainOptions o;
  o.sampling = sampling;
  o.c1 = c1;
  o.c2 = 0.5;
  o.epsilon = 0;
  o.max_epochs = 2;  // sag, saga
  o.epochs = 2;      // sgd-l1, adf, ap, pa, arow, mira
  o.batch_size = batch;
  o.seed = 5;
  if (tweak) tweak(o);
  BackendPtr b = gpu_backend(p.dims);
  auto corpus = b->upload(p.corpus);
  Objective obj(*b, *corpus, o.c1, o.c2);
  auto w = b->vector(p.dims.num_weights());
  EpochCounts out;
  out.steps = (n + batch - 1) / batch;
  emu::reset_host_counters();
  int reports = 0;
  find_trainer(algo).make()->train(obj, *w, o, [&](const Progress&, const Vector&) {
    if (reports < 2) out.epoch[reports] = emu::host_counters();
    ++reports;
    emu::reset_host_counters();
    return true;
  });
  EXPECT_EQ(reports, 2) << algo;
  return out;
}

/// Epoch e of the two runs asked the same of the host: copies each way and synchronisations
/// (what must not grow with the number of steps).
inline void expect_same_host_counts(const EpochCounts& small, const EpochCounts& large, int e) {
  EXPECT_EQ(small.epoch[e].to_device, large.epoch[e].to_device) << "host → device copies, epoch " << e + 1;
  EXPECT_EQ(small.epoch[e].to_host, large.epoch[e].to_host) << "device → host copies, epoch " << e + 1;
  EXPECT_EQ(small.epoch[e].syncs, large.epoch[e].syncs) << "host synchronisations, epoch " << e + 1;
}

}  // namespace crfx::test
