// crfx — the stochastic step tests' start on the GPU backend (DeviceStart) and the trainers'
// CPU-agreement models, shared by the GPU suite and the emulated device's own tests.
#pragma once

#include <memory>
#include <vector>

#include "crfx/internal/trainer.hpp"
#include "gpu_check.hpp"

namespace crfx::test {

/// The step tests' start on the GPU (or the emulated device): the problem uploaded, w = w0,
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

/// `algo`'s weights trained from zero on the CPU backend (2 threads), then twice on the GPU
/// backend (the trainers' CPU-agreement and run-to-run checks).
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

}  // namespace crfx::test
