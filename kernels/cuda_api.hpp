// crfx — the CUDA library's host-facing API. Plain C++: the factory (factory/backend_factory.cpp)
// includes this, never a CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "crfx/internal/backend.hpp"

namespace crfx {
struct SagSamplerRef;  // host/rules/sag_sampler.hpp
struct SagDraw;
}  // namespace crfx

namespace crfx::cuda {

/// Number of CUDA devices this process can use; 0 with the reason in `why` when none (no driver,
/// no device, or a runtime error).
int device_count(std::string* why);
/// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)".
std::string device_description(int device);
/// Runs a small kernel on `device` and checks its result on the host; false with the reason in
/// `why` when the device cannot run this build's kernels (e.g. no code for its architecture).
bool self_test(int device, std::string* why);

/// Tests (issue 37): `count` one-sentence steps of SAG-NUS's sampler (host/rules/sag_sampler.hpp)
/// run by the queue's one-thread kernels on `device` — the draw, then the end of the search, whose
/// L `search(sentence, L0)` gives from the host — from the state `sampler` points to (host arrays),
/// left there as the device leaves it; per step the draw and the step size α for lip_mult and λ.
void sag_sampler_steps_on_device(int device, const SagSamplerRef& sampler, std::size_t count,
                                 const std::function<double(std::uint32_t, double)>& search, double lip_mult,
                                 double lambda, SagDraw* draws, double* alpha);

/// Settings of the CUDA backend.
struct CudaBackendConfig {
  int device = 0;
  /// Host threads for the host's share of an upload (the gradients' transposes); 0 = all cores.
  unsigned host_threads = 0;
  /// Upper bound on the tokens one chunk of evaluate()/viterbi()/marginals() holds (0 = as many
  /// as the device memory budget allows; then the environment variable CRFX_CHUNK_TOKENS, where
  /// set, gives it: the CLI tests and benchmarks). Tests lower it to exercise chunking; the
  /// results do not depend on it except through the order of the gradient additions between
  /// chunks.
  std::size_t max_chunk_tokens = 0;
  /// Forward-backward at L ≤ 32: `fused` (a warp a sentence, the marginals inside its backward
  /// loop), `split` (the recursions on two warps a sentence, then the marginals a warp per
  /// segment of positions: a long sentence's serial chain holds only the recursions), `scan`
  /// (split, and a sentence of 256 positions or more gets its recursions as a scan over its
  /// segments), or `automatic`: split for a chunk whose longest sentence has 128 positions or
  /// more, its sentences of 256 or more scanned (H200: 1.55x / 1.38x the serial recursions' pass
  /// on CoNLL-2002 Spanish / Dutch, equal elsewhere). At L > 32 several sentences share a block
  /// (and one copy of E) where they fit, except under `block` (a block a sentence; at L ≤ 32
  /// `block` is `automatic` without the scan).
  /// Under `automatic` the environment variable CRFX_FB=fused|split|scan|block|auto decides.
  enum class ForwardBackward { automatic, fused, split, scan, block };
  ForwardBackward forward_backward = ForwardBackward::automatic;
  /// Tests: when set, evaluate() counts here what its gradient gathers did — the work, to check
  /// that it does not grow with the number of chunks, and the serial work of one warp, to check
  /// that it does not grow with an attribute's frequency. Costs two atomics per warp.
  struct GatherCounters {
    std::uint64_t visits = 0;           // occurrences (attribute, token) scanned, added up
    std::uint64_t longest_walk = 0;     // the most occurrences one warp walked in turn (maximum)
    std::uint64_t longest_combine = 0;  // the most partial rows one thread added in turn (maximum)
    std::uint64_t longest_chain = 0;    // the most positions one warp's recursion walked in turn (split
                                        // and scanned forward-backward; maximum)
  };
  GatherCounters* gather_counters = nullptr;
  /// The most device memory the run may use (0: what is free): the corpus's copy and the
  /// workspace within it, beside what Backend::set_memory_limits reserves for the run's vectors.
  /// A corpus whose copy does not fit is streamed: cut into chunks of whole sentences held in
  /// pinned host memory and copied to the device chunk by chunk, overlapped with the compute
  /// (kernels/backend_stream.cu, "Streaming"). set_memory_limits' limit, where given, replaces it.
  std::size_t max_device_memory = 0;
  /// Host memory the pinned copy of a streamed corpus may take (0: what the host has free).
  std::size_t max_host_memory = 0;
  /// Tests and benchmarks: stream every corpus, whatever fits (the chunks then follow the
  /// workspace as a resident corpus's do, so results are bitwise the same as resident ones with
  /// the same max_chunk_tokens). The environment variable CRFX_STREAM=1 sets it.
  bool always_stream = false;
  /// SAG / SAGA's queued steps at batch size 1 in runs (launch_sag_run: a launch takes 256 steps)
  /// where the layout allows them (transitions on, L ≤ 64, a resident corpus). Tests: false
  /// keeps them on their ~30 launches a step (what other layouts take), to check both paths.
  bool sag_runs = true;
};


/// The CUDA backend (double precision, deterministic). Throws Error when the device cannot be
/// used or the model does not fit (e.g. more than 4096 labels).
std::unique_ptr<Backend> make_cuda_backend(const Dims& dims, const CudaBackendConfig& config = {});

}  // namespace crfx::cuda
