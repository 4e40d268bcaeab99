// The crfx tool end to end on the emulated GPU: crfx_emu is apps/crfx.cpp linked with the CUDA
// backend built against kernels/emu, so `--device cuda` goes through the factory, the device
// self-test and every kernel of training and tagging, and must give what the CPU gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crfx/model.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::data_path;
using test::run;
using test::temp_path;

std::string q(const std::string& s) { return "'" + s + "'"; }

const std::string kTrain = data_path("conll2000.train60.crfsuite.txt");
const std::string kTest = data_path("conll2000.test30.crfsuite.txt");

TEST(EmulatedGpuCli, TrainAndTagAgreeWithTheCpu) {
  const std::string gpu_model = temp_path("gpu.model"), cpu_model = temp_path("cpu.model");
  const std::string train = " train " + q(kTrain) + " --format crfsuite --max-iterations 8 --threads 1";
  std::string out;
  ASSERT_EQ(run(q(CRFX_EMU_BINARY) + train + " --device cuda -m " + q(gpu_model), &out), 0) << out;
  EXPECT_NE(out.find("emulated on the CPU"), std::string::npos) << "the device it ran on:\n" << out;
  ASSERT_EQ(run(q(test::crfx_binary()) + train + " --device cpu -m " + q(cpu_model), &out), 0) << out;

  // Eight L-BFGS iterations from the same start: the same path up to rounding.
  const Model g = load_model(gpu_model), c = load_model(cpu_model);
  ASSERT_EQ(g.weights.size(), c.weights.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < c.weights.size(); ++i) {
    worst = std::max(worst, std::fabs(g.weights[i] - c.weights[i]));
    scale = std::max(scale, std::fabs(c.weights[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 1e-7 * scale) << "weights trained on the emulated GPU and on the CPU";

  // Tagging with one model: labels exactly, and n-best with probabilities (six decimals).
  for (const std::string opts : {"", " -n 3 -p"}) {
    std::string on_gpu, on_cpu;
    const std::string tag = " tag " + q(kTest) + " -m " + q(cpu_model) + " --quiet" + opts;
    ASSERT_EQ(run(q(CRFX_EMU_BINARY) + tag + " --device cuda", &on_gpu), 0) << on_gpu;
    ASSERT_EQ(run(q(test::crfx_binary()) + tag + " --device cpu", &on_cpu), 0) << on_cpu;
    EXPECT_EQ(on_gpu, on_cpu) << "crfx tag" << opts;
  }
}

}  // namespace
}  // namespace crfx
