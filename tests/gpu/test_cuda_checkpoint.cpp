// Checkpoints on the CUDA backend: every trainer stopped at a reported iteration and resumed from
// its checkpoint ends with the weights of the uninterrupted GPU run, bit for bit — its vectors,
// and SAG's stored marginals, read from and written back to the device — on the dense and the
// observed-pair layouts; and the stochastic trainers stopped inside an epoch (SAG's lazy steps and
// stamps on the device). (On the emulated device in CI, label gpu-emu.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "gpu_check.hpp"

namespace crfx {
namespace {

using namespace test;

// Under the emulation the schedule seeds share the runs (schedule_share).
TEST(CudaCheckpoint, EveryTrainerResumesBitExact) {
  REQUIRE_GPU();
  std::size_t index = 0;
  for (Layout layout : {Layout::dense, Layout::observed}) {
    const auto p = test::with_layout(test::random_problem(4, 24, 2, 24, 8, 41), layout);
    for (const TrainerInfo& info : trainer_registry()) {
      if (info.cpu_only) continue;  // gis, iis, scgis, cd: CPU only (tests/test_maxent.cpp)
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << info.name << " " << layout);
      TrainOptions o = test::resume_options(info.name);
      o.max_iterations = 6;
      o.epochs = o.max_epochs = 3;
      o.sgd_epochs = 1;
      test::check_resume_is_exact([](const Dims& d) { return test::gpu_backend(d); }, p, info, o, 2);
    }
  }
}

/// The stochastic trainers stopped by their poll inside an epoch and resumed there on the device:
/// sgd-l1's, adf's and l2sgd's stamps, ap's sums (at batch size 1 in runs), pa's and arow's loss
/// summed on the device (their steps there at batch size 1 and on batches of 3 and 5), mira's
/// weights beside its host-side bounds, and SAG's lazy-step history and per-group stamps (kept on
/// the device, saved and restored by incremental_save / incremental_load) and stored marginals —
/// under uniform sampling with its steps queued there. Under the emulation the schedule seeds share the runs (schedule_share).
TEST(CudaCheckpoint, StochasticTrainersStopInsideAnEpochAndResumeBitExact) {
  REQUIRE_GPU();
  std::size_t index = 0;
  for (Layout layout : {Layout::dense, Layout::observed}) {
    const auto p = test::with_layout(test::random_problem(4, 24, 2, 17, 8, 43), layout);
    const std::size_t n = p.corpus.num_sentences();
    struct Case {
      const char* algo;
      std::size_t batch;
      Sampling sampling;
    };
    for (const Case& c : {Case{"sag", 1, Sampling::mixed}, Case{"sag", 3, Sampling::uniform},
                          Case{"saga", 1, Sampling::uniform},  // queued on the device (incremental_schedule)
                          Case{"saga", 2, Sampling::lipschitz}, Case{"sgd-l1", 2, Sampling::mixed},
                          Case{"adf", 3, Sampling::mixed}, Case{"ap", 2, Sampling::mixed},
                          Case{"sgd-l1", 1, Sampling::mixed},  // runs (gradient_steps), taken at the stop
                          Case{"adf", 1, Sampling::mixed},     // and at each window's end,
                          Case{"ap", 1, Sampling::mixed},  // runs (perceptron_steps), taken at the stop
                          Case{"l2sgd", 1, Sampling::mixed}, Case{"mira", 1, Sampling::mixed},
                          Case{"pa", 1, Sampling::mixed},  // the step and its loss sum on the device (peer_step)
                          Case{"arow", 1, Sampling::mixed}, Case{"pa", 3, Sampling::mixed},  // and a batch's
                          Case{"arow", 5, Sampling::mixed}}) {
      if (!schedule_share(index++)) continue;
      SCOPED_TRACE(::testing::Message() << c.algo << " batch " << c.batch << " " << name_of(c.sampling) << " "
                                        << layout);
      TrainOptions o = test::resume_options(c.algo);
      o.batch_size = c.batch;
      o.sampling = c.sampling;
      o.epochs = o.max_epochs = 2;
      o.adf_windows = 3;
      std::vector<std::size_t> stops = test::within_stops(c.algo, o, n);
      // l2sgd decays before its step: after its first sentence from w = 0 no decay is pending on a
      // weight that moved, and the model is the working weights (tests/test_l2sgd.cpp).
      if (std::string(c.algo) == "l2sgd") stops.front() = 2;
      test::check_stop_within_is_exact([](const Dims& d) { return test::gpu_backend(d); }, p, find_trainer(c.algo),
                                       o, stops);
    }
  }
}

}  // namespace
}  // namespace crfx
