// crfx — Viterbi decoding on the device (kernels/decode_kernels.cu): the inputs both decoding
// kernels read, the parameters of the best-path and the n-best kernels, and their launchers.
// CPU twins: viterbi() and viterbi_nbest() in host/cpu/chain.cpp.
#pragma once

#include <cuda_runtime.h>

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

/// Best path of each of the chunk's n sentences (block per sentence, `threads` over labels).
void launch_viterbi(const ViterbiParams& p, std::size_t n, int threads, cudaStream_t s);
/// The p.n best paths of each of the chunk's m sentences (block per sentence, `threads` over
/// labels).
void launch_viterbi_nbest(const NbestParams& p, std::size_t m, int threads, cudaStream_t s);

}  // namespace crfx::cuda::detail
