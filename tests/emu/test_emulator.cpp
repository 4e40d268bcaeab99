// The emulated device's own checks (label gpu-emu): it must refuse what the hardware refuses or
// leaves undefined, name the kernel when it does, and expose the bugs it exists to find (a missing
// barrier, a shuffle outside its mask, a write past an allocation). Each kernel below is small and
// written for the check; the backend's kernels are covered by tests/gpu.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <set>
#include <string>
#include <vector>

#include "common.cuh"
#include "emu/emu_launch.hpp"
#include "launch.cuh"

namespace {

using crfx::CudaError;

__global__ void neighbour_kernel(bool barrier, double* out) {
  CRFX_DYNAMIC_SHARED(double, s);
  s[threadIdx.x] = threadIdx.x;
  if (barrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

/// Two groups of 64 threads, each on its own named barrier (crfx::cuda::detail::group_barrier):
/// group g passes its barrier g + 1 times, reading its neighbour's slot after each (rounds: the
/// groups need not wait for each other). Without the barrier the reads race.
__global__ void group_neighbour_kernel(bool barrier, unsigned count, double* out) {
  CRFX_DYNAMIC_SHARED(double, s);
  const unsigned g = threadIdx.x / 64, t = threadIdx.x % 64;
  double v = t;
  for (unsigned round = 0; round <= g; ++round) {
    s[threadIdx.x] = v + 100 * round;
    if (barrier) crfx::cuda::detail::group_barrier(1 + g, count);
    v = s[g * 64 + (t + 1) % 64];
    if (barrier) crfx::cuda::detail::group_barrier(1 + g, count);
  }
  out[threadIdx.x] = v;
}

__global__ void early_exit_kernel(double* out) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void two_barriers_kernel(double* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void shuffle_kernel(unsigned mask, int src, double* out) {
  const double v = threadIdx.x;
  out[threadIdx.x] = __shfl_sync(mask, v, src);
}

__global__ void half_warp_shuffle_kernel(double* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, double(threadIdx.x), 15 - int(threadIdx.x));
}

__global__ void vote_kernel(unsigned* out) {
  const bool odd = threadIdx.x & 1u;
  const unsigned b = __ballot_sync(0xffffffffu, odd);
  const bool any = __any_sync(0xffffffffu, threadIdx.x == 7);
  const bool all = __all_sync(0xffffffffu, threadIdx.x < 32);
  if (threadIdx.x == 0) {
    out[0] = b;
    out[1] = any;
    out[2] = all;
  }
}

__global__ void block_sum_kernel(const double* x, double* out) {
  using BlockReduce = cub::BlockReduce<double, 128>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const double r = BlockReduce(tmp).Sum(x[threadIdx.x]);
  if (threadIdx.x == 0) out[0] = r;
}

__global__ void write_kernel(double* p, std::size_t i) {
  if (threadIdx.x == 0) p[i] = 1.0;
}

__global__ void grid_kernel(unsigned* out) {
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[b * blockDim.x + threadIdx.x] = b * 1000 + threadIdx.x;
}

/// Device buffer of n doubles, freed at the end of the test.
struct Buffer {
  explicit Buffer(std::size_t n) : n(n) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(double)), cudaSuccess); }
  ~Buffer() { cudaFree(p); }
  std::vector<double> read() const {
    std::vector<double> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  std::size_t n;
  double* p = nullptr;
};

/// The message of the sticky error a faulty launch left (then cleared, so the test goes on).
std::string sticky_error() {
  const cudaError_t err = cudaDeviceSynchronize();
  std::string msg = err == cudaSuccess ? "" : cudaGetErrorString(err);
  crfx::emu::clear_sticky_error();
  return msg;
}

TEST(Emulator, MissingBarrierShowsAsScheduleDependentResult) {
  Buffer out(64);
  std::set<std::vector<double>> with, without;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    crfx::emu::set_schedule_seed(seed);
    CRFX_LAUNCH(neighbour_kernel, 1, 64, 64 * sizeof(double), nullptr, true, out.p);
    with.insert(out.read());
    CRFX_LAUNCH(neighbour_kernel, 1, 64, 64 * sizeof(double), nullptr, false, out.p);
    without.insert(out.read());
  }
  crfx::emu::set_schedule_seed(1);
  ASSERT_EQ(with.size(), 1u);
  const std::vector<double> good = *with.begin();
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(good[i], double((i + 1) % 64));
  EXPECT_GT(without.size(), 1u) << "a missing barrier must change the result with the schedule";
}

TEST(Emulator, BarrierNotReachedByEveryThreadIsReported) {
  Buffer out(64);
  CRFX_LAUNCH(early_exit_kernel, 1, 64, 0, nullptr, out.p);
  const std::string msg = sticky_error();
  EXPECT_NE(msg.find("early_exit_kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exited without reaching it"), std::string::npos) << msg;

  CRFX_LAUNCH(two_barriers_kernel, 1, 64, 0, nullptr, out.p);
  const std::string msg2 = sticky_error();
  EXPECT_NE(msg2.find("different __syncthreads"), std::string::npos) << msg2;
}

TEST(Emulator, NamedBarriersSyncTheirGroupAlone) {
  Buffer out(128);
  std::set<std::vector<double>> with, without;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    crfx::emu::set_schedule_seed(seed);
    CRFX_LAUNCH(group_neighbour_kernel, 1, 128, 128 * sizeof(double), nullptr, true, 64u, out.p);
    with.insert(out.read());
    CRFX_LAUNCH(group_neighbour_kernel, 1, 128, 128 * sizeof(double), nullptr, false, 64u, out.p);
    without.insert(out.read());
  }
  crfx::emu::set_schedule_seed(1);
  ASSERT_EQ(with.size(), 1u);
  const std::vector<double> good = *with.begin();
  for (std::size_t t = 0; t < 64; ++t) {
    EXPECT_EQ(good[t], double((t + 1) % 64)) << t;                 // group 0: one round
    EXPECT_EQ(good[64 + t], double((t + 2) % 64 + 100)) << t;  // group 1: two rounds
  }
  EXPECT_GT(without.size(), 1u) << "a missing barrier must change the result with the schedule";

  CRFX_LAUNCH(group_neighbour_kernel, 1, 128, 128 * sizeof(double), nullptr, true, 48u, out.p);
  const std::string partial = sticky_error();
  EXPECT_NE(partial.find("named barrier"), std::string::npos) << partial;
  EXPECT_NE(partial.find("whole warps"), std::string::npos) << partial;
  CRFX_LAUNCH(group_neighbour_kernel, 1, 128, 128 * sizeof(double), nullptr, true, 96u, out.p);
  const std::string never = sticky_error();
  EXPECT_NE(never.find("deadlock"), std::string::npos) << never;
  EXPECT_NE(never.find("of count 96"), std::string::npos) << never;
}

TEST(Emulator, ShufflesFollowTheirMask) {
  Buffer out(32);
  CRFX_LAUNCH(shuffle_kernel, 1, 32, 0, nullptr, 0xffffffffu, 5, out.p);
  for (double v : out.read()) EXPECT_EQ(v, 5.0);
  CRFX_LAUNCH(half_warp_shuffle_kernel, 1, 32, 0, nullptr, out.p);
  const auto h = out.read();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h[i], double(15 - i));

  // A source lane outside the mask; a mask naming lanes the block does not have.
  CRFX_LAUNCH(shuffle_kernel, 1, 32, 0, nullptr, 0xffffffffu, 5, out.p);
  CRFX_LAUNCH(half_warp_shuffle_kernel, 1, 32, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Buffer small(16);
  CRFX_LAUNCH(shuffle_kernel, 1, 16, 0, nullptr, 0xffffffffu, 3, small.p);
  const std::string msg = sticky_error();
  EXPECT_NE(msg.find("shuffle_kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not have"), std::string::npos) << msg;
}

__global__ void outside_mask_kernel(double* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, double(threadIdx.x), 20);
}

TEST(Emulator, ShuffleReadingOutsideItsMaskIsReported) {
  Buffer out(32);
  CRFX_LAUNCH(outside_mask_kernel, 1, 16, 0, nullptr, out.p);
  const std::string msg = sticky_error();
  EXPECT_NE(msg.find("outside the mask"), std::string::npos) << msg;
}

TEST(Emulator, VotesAndCubBlockReduce) {
  unsigned* v = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&v), 3 * sizeof(unsigned)), cudaSuccess);
  CRFX_LAUNCH(vote_kernel, 1, 32, 0, nullptr, v);
  unsigned h[3];
  ASSERT_EQ(cudaMemcpy(h, v, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[0], 0xaaaaaaaau);
  EXPECT_EQ(h[1], 1u);
  EXPECT_EQ(h[2], 1u);
  cudaFree(v);

  // CUB's order: per warp, shuffle-down at offsets 1…16, then the warp aggregates in order.
  std::vector<double> x(128);
  for (int i = 0; i < 128; ++i) x[i] = 1.0 / (i + 1) * (i % 3 ? 1 : -1e10);
  Buffer dx(128), out(1);
  ASSERT_EQ(cudaMemcpy(dx.p, x.data(), 128 * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  CRFX_LAUNCH(block_sum_kernel, 1, 128, 0, nullptr, dx.p, out.p);
  double expect = 0;
  for (int w = 0; w < 4; ++w) {
    std::vector<double> lane(x.begin() + 32 * w, x.begin() + 32 * w + 32);
    for (int off = 1; off < 32; off <<= 1)
      for (int l = 0; l + off < 32; ++l) lane[l] = lane[l] + lane[l + off];  // reads the old lane[l + off]
    expect = w == 0 ? lane[0] : expect + lane[0];
  }
  EXPECT_EQ(out.read()[0], expect);
}

TEST(Emulator, LaunchLimitsAreTheHardwares) {
  Buffer out(2048);
  auto refused = [](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << " was accepted";
    } catch (const CudaError& e) {
      EXPECT_NE(std::string(e.what()).find("neighbour_kernel"), std::string::npos) << e.what();
    }
  };
  refused([&] { CRFX_LAUNCH(neighbour_kernel, 1, 1025, 1025 * 8, nullptr, true, out.p); }, "1025 threads");
  refused([&] { CRFX_LAUNCH(neighbour_kernel, dim3(1, 65536), 32, 32 * 8, nullptr, true, out.p); }, "grid.y 65536");
  refused([&] { CRFX_LAUNCH(neighbour_kernel, 1, 32, 48 * 1024 + 8, nullptr, true, out.p); },
          "49 KB of shared memory without the attribute");
  ASSERT_EQ(cudaFuncSetAttribute(neighbour_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024),
            cudaSuccess);
  CRFX_LAUNCH(neighbour_kernel, 1, 32, 100 * 1024, nullptr, true, out.p);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(neighbour_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the last error is cleared once read

  // Every block of a 3-D grid runs once, whatever the block order.
  unsigned* g = nullptr;
  const dim3 grid(5, 3, 2);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&g), 30 * 64 * sizeof(unsigned)), cudaSuccess);
  CRFX_LAUNCH(grid_kernel, grid, 64, 0, nullptr, g);
  std::vector<unsigned> h(30 * 64);
  ASSERT_EQ(cudaMemcpy(h.data(), g, h.size() * sizeof(unsigned), cudaMemcpyDeviceToHost), cudaSuccess);
  for (unsigned b = 0; b < 30; ++b)
    for (unsigned t = 0; t < 64; ++t) ASSERT_EQ(h[b * 64 + t], b * 1000 + t);
  cudaFree(g);
}

TEST(Emulator, WriteOutsideAnAllocationIsCaught) {
  Buffer buf(10);
#if defined(__SANITIZE_ADDRESS__)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CRFX_LAUNCH(write_kernel, 1, 32, 0, nullptr, buf.p, 10);
        cudaDeviceSynchronize();
      },
      "AddressSanitizer");
#else
  CRFX_LAUNCH(write_kernel, 1, 32, 0, nullptr, buf.p, 10);
  const std::string msg = sticky_error();
  EXPECT_NE(msg.find("write_kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outside a device allocation"), std::string::npos) << msg;
#endif
}

TEST(Emulator, MemoryBudgetAndInjectedFailures) {
  crfx::emu::set_memory_budget(1 << 20);
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  EXPECT_EQ(total_b, std::size_t(1) << 20);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 2 << 20), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  crfx::emu::fail_allocation(2);
  void* a = nullptr;
  void* b = nullptr;
  EXPECT_EQ(cudaMalloc(&a, 64), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, 64), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&b, 64), cudaSuccess);
  cudaFree(a);
  cudaFree(b);
  cudaGetLastError();
  crfx::emu::set_memory_budget(0);
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  EXPECT_EQ(total_b, std::size_t(80) * 1000 * 1000 * 1000);
}

TEST(Emulator, AsynchronousWorkRunsAtTheSynchronisationPoint) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Buffer buf(4);
  std::vector<double> h{1, 2, 3, 4};
  ASSERT_EQ(cudaMemcpyAsync(buf.p, h.data(), 4 * sizeof(double), cudaMemcpyHostToDevice, s), cudaSuccess);
  h[0] = 99;  // a host buffer reused before the stream is synchronised: the copy sees 99
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(buf.read()[0], 99.0);
  // Copies that name a device range outside every allocation are refused at the call.
  EXPECT_EQ(cudaMemcpyAsync(buf.p + 2, h.data(), 4 * sizeof(double), cudaMemcpyHostToDevice, s),
            cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Two streams ordered by events (the double buffering of a streamed corpus): work queued on a
// stream after cudaStreamWaitEvent runs after the work recorded before the event on the other
// stream, even when only the waiting stream is synchronised; without a wait, nothing orders them.
TEST(Emulator, StreamWaitEventOrdersTwoStreams) {
  cudaStream_t copy = nullptr, compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t copied = nullptr, never = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&never), cudaSuccess);
  Buffer a(4), b(4);
  std::vector<double> h{1, 2, 3, 4}, out(4, 0);
  ASSERT_EQ(cudaMemcpyAsync(a.p, h.data(), 4 * sizeof(double), cudaMemcpyHostToDevice, copy), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(copied, copy), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(compute, never, 0), cudaSuccess);  // never recorded: no wait
  ASSERT_EQ(cudaStreamWaitEvent(compute, copied, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b.p, a.p, 4 * sizeof(double), cudaMemcpyDeviceToDevice, compute), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), b.p, 4 * sizeof(double), cudaMemcpyDeviceToHost, compute), cudaSuccess);
  // Queued on the copy stream after the record: the wait does not run it.
  std::vector<double> later{9, 9, 9, 9};
  ASSERT_EQ(cudaMemcpyAsync(a.p, later.data(), 4 * sizeof(double), cudaMemcpyHostToDevice, copy), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  EXPECT_EQ(out, h);
  ASSERT_EQ(cudaStreamSynchronize(copy), cudaSuccess);
  EXPECT_EQ(a.read()[0], 9.0);
  EXPECT_EQ(cudaEventDestroy(copied), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(never), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(copy), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(compute), cudaSuccess);
}

}  // namespace
