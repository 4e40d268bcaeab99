// crfx — what the emulated device counts of a stochastic trainer's epochs (issue 37): the
// copies, synchronisations and launches the host asks of the device per epoch, for
// test_stochastic_shape.cpp and test_stochastic_batches.cpp; the step tests' start (DeviceStart).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "crfx/internal/trainer.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {

/// The step tests' start on the emulated device: a GPU backend with the problem uploaded, w = w0,
/// u = 0, Σ's diagonal at 0.7 (arow's) and a sparse scratch.
struct DeviceStart {
  BackendPtr b;
  BackendCorpusPtr corpus;
  VectorPtr w, u, variance;
  SparseVectorPtr delta;
  DeviceStart(const RandomProblem& p, const std::vector<double>& w0)
      : b(gpu_backend(p.dims)), corpus(b->upload(p.corpus)), w(to_backend(*b, w0)), u(b->vector(w0.size())),
        variance(b->vector(w0.size())), delta(b->sparse()->sparse_vector()) {
    b->fill(*variance, 0.7);
  }
  SparseGradients& sg() { return *b->sparse(); }
};

/// `algo`'s weights trained from zero on the CPU backend (2 threads), then twice on the emulated
/// device (the trainers' CPU-agreement and run-to-run checks).
inline std::vector<std::vector<double>> cpu_and_two_device_models(const RandomProblem& p, const char* algo,
                                                                  const TrainOptions& o, double c1, double c2) {
  std::vector<std::vector<double>> w(3);
  for (int k = 0; k < 3; ++k) {
    BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 2)) : gpu_backend(p.dims);
    auto corpus = b->upload(p.corpus);
    Objective obj(*b, *corpus, c1, c2);
    auto wv = b->vector(p.dims.num_weights());
    find_trainer(algo).make()->train(obj, *wv, o, nullptr);
    w[k] = to_host(*b, *wv);
  }
  return w;
}

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
