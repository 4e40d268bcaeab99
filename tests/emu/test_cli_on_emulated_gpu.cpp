// The crfx tool end to end on the emulated GPU: crfx_emu is the apps/ sources linked with the CUDA
// backend built against kernels/emu, so `--device cuda` goes through the factory, the device
// self-test and every kernel of training and tagging, and must give what the CPU gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "../gpu/gpu_check.hpp"  // kSanitized
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

class EmulatedGpuCli : public ::testing::TestWithParam<std::string> {};

// Both weight layouts: observed pairs (the default) and every pair (--features all).
TEST_P(EmulatedGpuCli, TrainAndTagAgreeWithTheCpu) {
  const std::string gpu_model = temp_path("gpu.model"), cpu_model = temp_path("cpu.model");
  // Eight L-BFGS iterations (three in the sanitizer pass: the same kernels in fewer passes).
  const char* iterations = crfx::test::kSanitized ? "3" : "8";
  const std::string train = " train " + q(kTrain) + " --format crfsuite --max-iterations " + iterations +
                            " --threads 1 --features " + GetParam();
  std::string out;
  ASSERT_EQ(run(q(CRFX_EMU_BINARY) + train + " --device cuda -m " + q(gpu_model), &out), 0) << out;
  EXPECT_NE(out.find("emulated on the CPU"), std::string::npos) << "the device it ran on:\n" << out;
  ASSERT_EQ(run(q(test::crfx_binary()) + train + " --device cpu -m " + q(cpu_model), &out), 0) << out;

  // The same L-BFGS iterations from the same start: the same path up to rounding.
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
  std::string dump;
  ASSERT_EQ(run(q(test::crfx_binary()) + " dump " + q(gpu_model), &dump), 0) << dump;
  EXPECT_NE(dump.find(GetParam() == "all" ? "layout: all pairs" : "layout: observed pairs"), std::string::npos)
      << dump.substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmulatedGpuCli, ::testing::Values("observed", "all"),
                         [](const auto& info) { return info.param; });

// A run whose weights and optimizer state do not fit in the device's free memory is refused up
// front, with the estimate and what is free on the device (the emulated device offers 4 MB here).
TEST(EmulatedGpuCliMemory, RefusesARunBeyondTheDevicesMemory) {
  const std::string model = temp_path("refused.model");
  const std::string train = " train " + q(kTrain) + " --format crfsuite --max-iterations 2 --features all";
  std::string out;
  EXPECT_NE(run("CRFX_EMU_MEMORY=4000000 " + q(CRFX_EMU_BINARY) + train + " --device cuda -m " + q(model), &out), 0)
      << out;
  EXPECT_NE(out.find("this training run needs an estimated"), std::string::npos) << out;
  EXPECT_NE(out.find("is available on cuda"), std::string::npos) << out;
  EXPECT_FALSE(std::ifstream(model).good()) << "a refused run writes no model";
  // The same run fits in the default budget (a simulated 80 GB).
  ASSERT_EQ(run(q(CRFX_EMU_BINARY) + train + " --device cuda -m " + q(model), &out), 0) << out;
  EXPECT_NE(out.find(" available"), std::string::npos) << out;
}

// crfx train --max-device-memory below what the corpus's copy needs beside the weights, the
// optimizer state (and the dictionaries the memory check counts with them): the corpus is streamed
// from pinned host memory, and the model is the resident run's byte for byte when both are cut
// into the same chunks (CRFX_CHUNK_TOKENS, the backend's chunk cap). A malformed size is a usage
// error naming the option.
TEST(EmulatedGpuCliMemory, StreamedTrainingGivesTheResidentModel) {
  const std::string resident = temp_path("resident.model"), streamed = temp_path("streamed.model");
  // The training slice's first 25 sequences (~600 tokens: 21 chunks), one iteration (three passes):
  // the resident run in 50-token chunks is most of the test's time (each chunk's gather visits
  // every segment of the corpus: the time grows as the square of the corpus).
  const std::string text = test::read_text(kTrain), slice = temp_path("train25.txt");
  std::size_t end = 0;
  for (int n = 0; n < 25; ++n) end = text.find("\n\n", end) + 2;
  ASSERT_GT(end, 1u);
  test::write_text(slice, text.substr(0, end));
  const std::string train = " train " + q(slice) + " --format crfsuite --max-iterations 1 --threads 1 --device cuda";
  std::string out;
  ASSERT_EQ(run("CRFX_CHUNK_TOKENS=50 " + q(CRFX_EMU_BINARY) + train + " -m " + q(resident), &out), 0) << out;
  EXPECT_EQ(out.find("streamed"), std::string::npos) << out;
  // 1630K: between what the streamed run needs (~1.58 MB: the run's vectors and dictionaries, two
  // chunks' slots) and what would keep the corpus resident (~1.69 MB), where the 50-token cap, not
  // the slot's bytes, cuts the chunks (the same chunks as the resident run's).
  ASSERT_EQ(run("CRFX_CHUNK_TOKENS=50 " + q(CRFX_EMU_BINARY) + train + " --max-device-memory 1630K -m " + q(streamed),
                &out),
            0)
      << out;
  EXPECT_NE(out.find("the corpus is streamed from pinned host memory"), std::string::npos) << out;
  EXPECT_EQ(test::read_text(streamed), test::read_text(resident)) << "streamed and resident models differ";
  EXPECT_NE(run(q(CRFX_EMU_BINARY) + train + " --max-device-memory 3Q -m " + q(streamed), &out), 0);
  EXPECT_NE(out.find("--max-device-memory: '3Q' is not a size"), std::string::npos) << out;
}

// Many inputs in one run (crfx tag -O DIR): batches gathered across inputs, read and compiled on
// two worker threads while the emulated GPU's Viterbi and forward-backward decode them one at a
// time; every output the CPU's, byte for byte.
TEST(EmulatedGpuCliMany, ManyInputsTagAsOnTheCpu) {
  const std::string model = temp_path("many.model");
  std::string out;
  ASSERT_EQ(run(q(test::crfx_binary()) + " train " + q(kTrain) + " --format crfsuite --max-iterations 8 -q -m " +
                    q(model),
                &out),
            0)
      << out;
  // The test slice split into inputs of one, two and three sequences.
  const std::string text = test::read_text(kTest), dir = test::temp_dir();
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (int k = 0; at < text.size(); ++k) {
    std::size_t end = at;
    for (int n = 0; n < 1 + k % 3 && end < text.size(); ++n) {
      const std::size_t blank = text.find("\n\n", end);
      end = blank == std::string::npos ? text.size() : blank + 2;
    }
    parts.push_back(text.substr(at, end - at));
    at = end;
  }
  ASSERT_GE(parts.size(), 4u);
  std::string args;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string path = dir + "/part" + std::to_string(10 + i) + ".txt";
    test::write_text(path, parts[i]);
    args += " " + q(path);
  }
  for (const std::string opts : {"", " -n 2 -p", " --marginals"}) {
    const std::string gpu_dir = temp_path("gpu-out"), cpu_dir = temp_path("cpu-out");
    const std::string tag = " tag" + args + " -m " + q(model) + " -q --threads 2 --batch-tokens 50" + opts;
    ASSERT_EQ(run(q(CRFX_EMU_BINARY) + tag + " --device cuda -O " + q(gpu_dir), &out), 0) << out;
    ASSERT_EQ(run(q(test::crfx_binary()) + tag + " --device cpu -O " + q(cpu_dir), &out), 0) << out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::string name = "/part" + std::to_string(10 + i) + ".txt";
      const std::string g = test::read_text(gpu_dir + name), c = test::read_text(cpu_dir + name);
      EXPECT_FALSE(c.empty()) << name;
      EXPECT_EQ(g, c) << name << opts;
    }
  }
}

}  // namespace
}  // namespace crfx
