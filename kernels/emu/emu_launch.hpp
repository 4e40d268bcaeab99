// crfx — the emulated launch and the emulated device's controls (tests and debugging only).
//
// launch() checks the configuration as the hardware does (reported by cudaGetLastError, as a real
// launch error is) and queues the kernel on its stream; the stream runs it at its next
// synchronisation point: blocks one after another in a seeded order, each block's threads as
// fibers (kernels/emu/scheduler.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>

namespace crfx::emu {

namespace detail {
/// Checks the configuration and queues `body` (one thread's work: the kernel with its copied
/// arguments) on `stream`. Returns the launch error (also recorded as the last error).
cudaError_t enqueue_launch(const char* name, const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                           cudaStream_t stream, std::function<void()> body);
/// The current block's dynamic shared memory (exactly the launch's size, canaries around it).
void* dynamic_shared_memory();
}  // namespace detail

/// The emulated kernel<<<grid, block, smem, stream>>>(args…).
template <class... Params>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
            cudaStream_t stream, Params... args) {
  detail::enqueue_launch(name, reinterpret_cast<const void*>(kernel), grid, block, smem, stream,
                         [kernel, params = std::make_tuple(std::move(args)...)]() {
                           std::apply([kernel](const Params&... p) { kernel(p...); }, params);
                         });
}

template <class T>
T* dynamic_shared() {
  return static_cast<T*>(detail::dynamic_shared_memory());
}

// ---- controls ------------------------------------------------------------------------------------

/// Device memory the emulated device offers (cudaMemGetInfo's total and the allocation limit);
/// 0 restores the simulated H100's 80 GB. Also set by the environment (CRFX_EMU_MEMORY, bytes).
void set_memory_budget(std::size_t bytes);
std::size_t memory_budget();
/// Bytes currently allocated with cudaMalloc.
std::size_t memory_in_use();
/// The `n`-th cudaMalloc from now fails with cudaErrorMemoryAllocation (1 = the next); 0 disarms.
void fail_allocation(std::size_t n);

/// Seed of the thread and block order (also CRFX_EMU_SEED). Same seed, same schedule.
void set_schedule_seed(std::uint64_t seed);
std::uint64_t schedule_seed();

/// What the host asked of the device since the last reset — the counts that decide a GPU pass's
/// overhead whatever the device's speed: kernel launches, host synchronisations (stream, device
/// and event synchronisations, and the blocking cudaMemcpy / cudaMemset), copies each way, and
/// device allocations (cudaMalloc calls of at least a byte; each cudaFree also synchronises).
struct HostCounters {
  std::size_t launches = 0, syncs = 0, to_host = 0, to_device = 0, allocations = 0;
  std::size_t to_host_bytes = 0, to_device_bytes = 0;  // what those copies moved
};
HostCounters host_counters();
void reset_host_counters();

/// Kernel name → launches executed since the last reset (for the coverage list).
std::map<std::string, std::size_t> launch_counts();
void reset_launch_counts();

/// Clears a sticky execution error (as cudaDeviceReset does), so a test that provoked one on
/// purpose can go on.
void clear_sticky_error();

}  // namespace crfx::emu
