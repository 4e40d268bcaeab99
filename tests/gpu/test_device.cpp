// GPU checks (ctest label `gpu`): skipped with the reason when no CUDA device is usable; the CPU
// twin of each check is in the CPU suites.
#include <gtest/gtest.h>

#include <string>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "gpu_check.hpp"  // REQUIRE_GPU, no_gpu_reason: the one skip reason of every GPU test

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif

namespace crfx {
namespace {

using test::no_gpu_reason;

TEST(Gpu, KernelLaunchSelfTest) {
  REQUIRE_GPU();
#ifdef CRFX_HAVE_CUDA
  std::string why;
  EXPECT_TRUE(cuda::self_test(0, &why)) << why;
  EXPECT_FALSE(cuda::device_description(0).empty());
#endif
}

// The device selection rules: `cuda` without a usable GPU fails with a message, `auto` falls back
// to the CPU and says so; with a GPU both select the CUDA backend.
TEST(DeviceSelection, CudaRequestFailsClearlyAndAutoFallsBack) {
  Dims d;
  d.L = 2;
  BackendOptions o;
  o.device = DeviceKind::cuda;
  EXPECT_THROW(parse_device("tpu"), Error);
  if (no_gpu_reason().empty()) {  // a usable GPU: both pick it (tests/gpu/test_cuda_backend.cpp)
    EXPECT_NE(make_backend(d, o, nullptr)->name().find("cuda"), std::string::npos);
    return;
  }
  try {
    make_backend(d, o, nullptr);
    FAIL() << "--device cuda must fail without a usable GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
  }
  o.device = DeviceKind::auto_select;
  std::string note;
  auto b = make_backend(d, o, &note);
  EXPECT_NE(note.find("using the CPU"), std::string::npos) << note;
  EXPECT_NE(b->name().find("cpu"), std::string::npos);
}

}  // namespace
}  // namespace crfx
