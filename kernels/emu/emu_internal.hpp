// crfx — what the emulated runtime (runtime.cpp) and the block scheduler (scheduler.cpp) share.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace crfx::emu::detail {

/// One queued kernel launch.
struct LaunchJob {
  std::string name;
  dim3 grid, block;
  std::size_t smem = 0;
  std::uint64_t seed = 0;  // the schedule seed of this launch
  std::function<void()> body;
};

/// Runs every block of `job` (seeded block order; per block the threads as fibers in a seeded
/// order between synchronisation points). Returns "" or what went wrong, naming the kernel, the
/// block and the thread where one is to blame.
std::string execute_launch(const LaunchJob& job);

}  // namespace crfx::emu::detail
