// The numerics' constants and per-position formulas that both backends use are defined once, in
// include/crfx/internal/host_device.hpp: a second definition in a backend — the way the CPU's and the
// GPU's log-space thresholds once drifted apart (1e-250 against 1e-200) — fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "crfx/internal/host_device.hpp"

namespace crfx {
namespace {

namespace fs = std::filesystem;

/// The file's text without its // comments (the constants' values may be named in prose).
std::string code_of(const fs::path& p) {
  std::ifstream in(p);
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.find("//")) + "\n";
  return out;
}

TEST(Numerics, BackendsUseTheSharedConstantsOnly) {
  const fs::path root = fs::path(CRFX_TEST_DATA) / ".." / "..";
  // A literal of a shared constant, or a backend's own threshold, in code.
  const std::regex own(R"((\b1e-250\b|\b1e-200\b|\b1e-50\b|\b1e300\b|constexpr\s+double\s+kTiny\b|\bdouble\s+scaled\s*\())");
  std::vector<std::string> found;
  std::size_t files = 0;
  bool cpu_uses = false, gpu_uses = false;
  for (const char* dir : {"host/cpu", "kernels"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || e.path().string().find("/emu/") != std::string::npos) continue;
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      const std::string code = code_of(e.path());
      if (std::regex_search(code, own)) found.push_back(fs::relative(e.path(), root).string());
      if (code.find("kTinySum") != std::string::npos) (std::string(dir) == "kernels" ? gpu_uses : cpu_uses) = true;
    }
  EXPECT_GT(files, 20u);
  EXPECT_TRUE(found.empty()) << "a constant of include/crfx/internal/host_device.hpp defined again in: " << found.front();
  EXPECT_TRUE(cpu_uses) << "the CPU chain's log-space threshold is not kTinySum";
  EXPECT_TRUE(gpu_uses) << "the GPU chain's log-space threshold is not kTinySum";
}

TEST(Numerics, ExpScaledStaysFiniteWhereTheFactorOverflows) {
  EXPECT_EQ(exp_scaled(std::log(3.0), 3.0, 2.0), 6.0);
  const double lf = 800;  // exp(800) overflows; exp(800) · 1e-300 does not
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(exp_scaled(lf, inf, 1e-300) / std::exp(800 - 300 * std::log(10.0)), 1.0, 1e-12);
  EXPECT_EQ(exp_scaled(lf, inf, 0.0), 0.0);  // not inf · 0
  EXPECT_LT(exp_scaled(lf, inf, -1e-300), 0.0);
}

}  // namespace
}  // namespace crfx
