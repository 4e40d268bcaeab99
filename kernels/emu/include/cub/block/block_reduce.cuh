// crfx — the emulated build's cub::BlockReduce: CUB's interface and CUB's reduction order for its
// default algorithm (BLOCK_REDUCE_WARP_REDUCTIONS with full warps): each warp folds its lanes by
// shuffle-down at offsets 1, 2, 4, 8, 16 (op(own, from lane + offset)), lane 0 of each warp stores
// the warp's aggregate, and thread 0 folds the aggregates in warp order. The result is valid in
// thread 0 only, as in CUB. Built on the emulation's shuffles and barrier, so it is scheduled and
// checked like any kernel code.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace cub {

struct Sum {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a + b;
  }
};

template <class T, int BLOCK_DIM_X, int ALGORITHM = 0, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
class BlockReduce {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int kWarps = (kThreads + 31) / 32;
  static_assert(kThreads % 32 == 0, "the emulated cub::BlockReduce supports full warps only");

 public:
  struct TempStorage {
    T warp_aggregates[kWarps];
  };
  explicit BlockReduce(TempStorage& storage) : storage_(storage) {
    if (int(blockDim.x * blockDim.y * blockDim.z) != kThreads) {
      std::fprintf(stderr, "crfx emulated device: cub::BlockReduce<%d threads> used in a block of %u threads\n",
                   kThreads, blockDim.x * blockDim.y * blockDim.z);
      std::abort();
    }
  }
  template <class Op>
  T Reduce(T input, Op op) {
    const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned lane = tid & 31u, warp = tid >> 5;
    for (int offset = 1; offset < 32; offset <<= 1) {
      const T other = __shfl_down_sync(0xffffffffu, input, offset);
      if (lane + unsigned(offset) < 32u) input = op(input, other);
    }
    if (lane == 0) storage_.warp_aggregates[warp] = input;
    __syncthreads();
    if (tid == 0)
      for (int w = 1; w < kWarps; ++w) input = op(input, storage_.warp_aggregates[w]);
    return input;
  }
  T Sum(T input) { return Reduce(input, cub::Sum{}); }

 private:
  TempStorage& storage_;
};

}  // namespace cub
