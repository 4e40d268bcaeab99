// Which kernels each test of the emulated GPU suite launched: with CRFX_EMU_KERNEL_LOG=FILE set,
// every test appends "TestSuite.Test<TAB>kernel<TAB>launches" lines to FILE when it ends.
// scripts/emu-kernel-coverage.sh runs the suite so and lists every kernel the backend launches
// with the tests that execute it (benchmarks/RESULTS.md keeps the list); scripts/test.sh sets it
// for its ctest run and fails when a kernel was never launched.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "emu/emu_launch.hpp"

namespace {

class KernelLog : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { crfx::emu::reset_launch_counts(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const char* path = std::getenv("CRFX_EMU_KERNEL_LOG");
    if (!path || !*path) return;
    std::string lines;
    for (const auto& [name, count] : crfx::emu::launch_counts())
      lines += std::string(info.test_suite_name()) + "." + info.name() + "\t" + name + "\t" + std::to_string(count) + "\n";
    // One append a test: the tests of a parallel ctest run (scripts/test.sh) share the file.
    const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return;
    for (std::size_t done = 0; done < lines.size();) {
      const ssize_t n = ::write(fd, lines.data() + done, lines.size() - done);
      if (n <= 0) break;
      done += std::size_t(n);
    }
    ::close(fd);
  }
};

const bool registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new KernelLog);
  return true;
}();

}  // namespace
