// The NCCL device sum (kernels/nccl/, built with -DCRFX_NCCL=ON; label gpu, never on the emulated
// device): one rank's data-parallel backend summing its gradient on the device gives the host
// path's gradient bit for bit (one rank's ncclAllReduce is a copy) and the same model. With
// several GPUs, `mpirun -np N crfx train --device cuda` against CRFX_NCCL=0 is the check of the
// sum itself (README, "Training on several processes").
#ifdef CRFX_HAVE_NCCL
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../kernels/nccl/nccl_sum.hpp"
#include "crfx/internal/collective.hpp"
#include "crfx/train.hpp"
#include "gpu_check.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

const DeviceSumMaker kNccl{cuda::nccl_usable, cuda::make_nccl_sum};

TEST(Nccl, OneRankGradientIsTheHostPaths) {
  REQUIRE_GPU();
  const auto p = test::random_problem(5, 30, 3, 50, 10, 21);
  const auto w = test::random_weights(p.dims.num_weights(), 0.2, 22);
  auto one = single_process();
  std::vector<double> g[2], f(2);
  for (int device : {0, 1}) {
    BackendPtr b = distributed_backend(test::gpu_backend(p.dims), *one, device ? kNccl : DeviceSumMaker{});
    EXPECT_EQ(b->name().find("summed by NCCL") != std::string::npos, device == 1) << b->name();
    auto c = b->upload(p.corpus);
    auto bw = to_backend(*b, w);
    auto bg = b->vector(w.size());
    f[device] = b->evaluate(*c, *bw, all_sentences(*c), bg.get(), 1.0);
    g[device] = to_host(*b, *bg);
  }
  EXPECT_EQ(f[0], f[1]);
  EXPECT_EQ(g[0], g[1]);
}

TEST(Nccl, OneRankTrainsTheHostPathsModel) {
  REQUIRE_GPU();
  auto one = single_process();
  std::vector<double> weights[2];
  double objective[2] = {};
  for (int device : {0, 1}) {
    TrainConfig config;
    config.templ = FeatureTemplate::load(test::data_path("chunking.template"));
    config.options.max_iterations = 10;
    config.backend.device = DeviceKind::cuda;
    config.collective = one.get();
    if (device) config.device_sum = kNccl;
    TrainingRun run(config);
    run.compile(std::vector<std::string>{test::data_path("conll2000.train300.txt")});
    TrainResult r = run.run();
    objective[device] = r.objective;
    weights[device] = r.model.weights;
    EXPECT_EQ(r.device.find("summed by NCCL") != std::string::npos, device == 1) << r.device;
  }
  EXPECT_NEAR(objective[1], objective[0], 1e-9 * std::fabs(objective[0]));
  EXPECT_EQ(weights[1], weights[0]);
}

}  // namespace
}  // namespace crfx
#endif
