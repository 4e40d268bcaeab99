// crfx — Viterbi decoding on the device (kernels/decode_kernels.cu): the inputs both decoding
// kernels read, the parameters of the best-path and the n-best kernels, and their launchers.
// CPU twins: viterbi() and viterbi_nbest() in host/cpu/chain.cpp.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "common.cuh"

namespace crfx::cuda::detail {

/// What both Viterbi kernels read: the chunk and its scores.
struct DecodeInputs {
  int L;
  const std::size_t* sent_off;
  const std::size_t* edge_off;
  ChunkView ch;
  const double* S;      // [rows][L]
  const double* trans;  // [L][L]
  const double* edge;   // [rows][L][L] or null
  bool independent;     // no transitions, no edges: the arg-max per position (FbParams::independent)
};

struct ViterbiParams : DecodeInputs {
  double* d;            // [rows][L] best path score ending in (t, y)
  std::uint32_t* back;  // [rows][L] argmax predecessor
  std::uint32_t* out;   // [rows] labels
  double* score;        // [chunk sentences] best path score, or null
};

struct NbestParams : DecodeInputs {
  unsigned n;
  double* d;            // [rows][L][n] score of the k-th best partial path ending in (t, y)
  std::uint32_t* back;  // [rows][L][n] its predecessor yp·n + k
  std::uint32_t* out;   // [rows·n] labels: the sentence at slot r0 from out + n·r0, path r at + r·T
  double* score;        // [chunk sentences][n]
};

/// Viterbi's step for label yc: the best of dp[yp] + M[yp·L + yc] over yp in order, strict
/// comparisons (ties keep the smallest label id; −∞ and arg 0 where none is greater than −∞) — the
/// CPU's loop (viterbi() in host/cpu/chain.cpp), shared by the decoding kernels.
__device__ inline void best_predecessor(const double* dp, const double* M, int L, int yc, double& best,
                                        std::uint32_t& arg) {
  best = -CUDART_INF;
  arg = 0;
  for (int yp = 0; yp < L; ++yp) {
    const double v = dp[yp] + M[std::size_t(yp) * L + yc];
    if (v > best) {
      best = v;
      arg = std::uint32_t(yp);
    }
  }
}

/// The end of Viterbi (one thread): the best label of the last row `last` (strict comparisons:
/// ties to the smallest id), then the path back through back [T][L] into out [T]; returns its score.
__device__ inline double backtrack(const double* last, const std::uint32_t* back, int L, std::size_t T,
                                   std::uint32_t* out) {
  double best = -CUDART_INF;
  std::uint32_t arg = 0;
  for (int y = 0; y < L; ++y)
    if (last[y] > best) {
      best = last[y];
      arg = std::uint32_t(y);
    }
  out[T - 1] = arg;
  for (std::size_t t = T - 1; t > 0; --t) {
    arg = back[t * L + arg];
    out[t - 1] = arg;
  }
  return best;
}

/// Best path of each of the chunk's n sentences (block per sentence, `threads` over labels).
void launch_viterbi(const ViterbiParams& p, std::size_t n, int threads, cudaStream_t s);
/// The p.n best paths of each of the chunk's m sentences (block per sentence, `threads` over
/// labels).
void launch_viterbi_nbest(const NbestParams& p, std::size_t m, int threads, cudaStream_t s);

}  // namespace crfx::cuda::detail
