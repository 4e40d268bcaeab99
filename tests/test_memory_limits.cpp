// The memory budget of a run is the least of the free memory and the process's limits: a run
// under `ulimit -v` (RLIMIT_AS) that the limit cannot hold is refused before anything of its size
// is allocated, naming the limit, with no model written.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <string>

#include "crfx/internal/backend.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

TEST(MemoryLimits, TheAddressSpaceLimitIsTheBudget) {
  const std::string model = test::temp_path("limited.model");
  std::string out;
  // Every attribute × label pair of the 300-sentence slice: an estimated 81 MB; 60 MB of address
  // space leaves far less than that once the program is loaded.
  const int status = test::run("ulimit -v 60000; " + test::crfx_binary() + " train " +
                                   test::data_path("conll2000.train300.txt") + " -t " +
                                   test::data_path("chunking.template") +
                                   " --features all --device cpu --threads 2 -m " + model,
                               &out);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("crfx train: this training run needs an estimated "), std::string::npos) << out;
  EXPECT_NE(out.find("(the address-space limit, ulimit -v)"), std::string::npos) << out;
  EXPECT_EQ(out.find("out of memory"), std::string::npos) << out;
  EXPECT_NE(test::run("test -e " + model), 0) << "a model was written";
}

/// The process's mapped size now (VmSize), in bytes.
std::size_t mapped_bytes() {
  std::string out;
  test::run("awk '/^VmSize:/ { print $2 }' /proc/" + std::to_string(getpid()) + "/status", &out);
  return std::stoull(out) * 1024;
}

TEST(MemoryLimits, HostMemoryNamesTheLimitThatDecides) {
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  const std::size_t room = std::size_t(50) << 20;
  struct rlimit tight = old;
  tight.rlim_cur = mapped_bytes() + room;  // 50 MB more than this process maps
  if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < tight.rlim_cur) GTEST_SKIP() << "a lower limit is set";
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  const HostMemory limited = host_memory();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  // (The process's mapped size moves a little between the two reads: a margin of 1 MB.)
  EXPECT_LE(limited.bytes, room + (std::size_t(1) << 20));
  EXPECT_GT(limited.bytes, room / 2);
  EXPECT_EQ(limited.limit, "the address-space limit, ulimit -v");
  EXPECT_EQ(host_memory_available() > room, true) << "the limit lifted, the free memory again";
}

}  // namespace
}  // namespace crfx
