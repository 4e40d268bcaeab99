// Checkpoints on the CUDA backend: every trainer stopped at a reported iteration and resumed from
// its checkpoint ends with the weights of the uninterrupted GPU run, bit for bit — its vectors,
// and SAG's stored marginals, read from and written back to the device — on the dense and the
// observed-pair layouts. (On the emulated device in CI, label gpu-emu.)
#include <gtest/gtest.h>

#include "checkpoint_check.hpp"
#include "gpu_check.hpp"

namespace crfx {
namespace {

using namespace test;

TEST(CudaCheckpoint, EveryTrainerResumesBitExact) {
  REQUIRE_GPU();
  for (Layout layout : {Layout::dense, Layout::observed}) {
    const auto p = test::with_layout(test::random_problem(4, 24, 2, 24, 8, 41), layout);
    for (const TrainerInfo& info : trainer_registry()) {
      if (info.cpu_only) continue;  // gis, iis, scgis, cd: CPU only (tests/test_maxent.cpp)
      SCOPED_TRACE(::testing::Message() << info.name << " " << layout);
      TrainOptions o = test::resume_options(info.name);
      o.max_iterations = 6;
      o.epochs = o.max_epochs = 3;
      o.sgd_epochs = 1;
      test::check_resume_is_exact([](const Dims& d) { return test::gpu_backend(d); }, p, info, o, 2);
    }
  }
}

}  // namespace
}  // namespace crfx
