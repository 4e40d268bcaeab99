// Which kernels each test of the emulated GPU suite launched: with CRFX_EMU_KERNEL_LOG=FILE set,
// every test appends "TestSuite.Test<TAB>kernel<TAB>launches" lines to FILE when it ends.
// scripts/emu-kernel-coverage.sh runs the suite so and lists every kernel the backend launches
// with the tests that execute it (benchmarks/RESULTS.md keeps the list).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "emu/emu_launch.hpp"

namespace {

class KernelLog : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { crfx::emu::reset_launch_counts(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const char* path = std::getenv("CRFX_EMU_KERNEL_LOG");
    if (!path || !*path) return;
    std::FILE* f = std::fopen(path, "a");
    if (!f) return;
    for (const auto& [name, count] : crfx::emu::launch_counts())
      std::fprintf(f, "%s.%s\t%s\t%zu\n", info.test_suite_name(), info.name(), name.c_str(), count);
    std::fclose(f);
  }
};

const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new KernelLog);
  return true;
}();

}  // namespace
