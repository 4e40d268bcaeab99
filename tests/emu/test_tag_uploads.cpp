// crfx — the CUDA backend's uploads of tagging batches, on the emulated device (which counts every
// cudaMalloc): a batch's arrays go into those of the batch before it (grow-only), decoding builds
// no transposes or gather plans (the first gradient does), and the tags, marginals and gradients
// are the CPU backend's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {
namespace {

/// Decodes `p`'s corpus on both backends (uploaded afresh on the GPU one), the tags compared;
/// returns the device allocations of the GPU's upload and decoding.
std::size_t tag_batch(Backend& gpu, CpuBackend& cpu, const RandomProblem& p, const Vector& wg, const Vector& wc) {
  emu::reset_host_counters();
  BackendCorpusPtr gc = gpu.upload(p.corpus);
  const std::size_t N = p.corpus.num_tokens(), S = p.corpus.num_sentences();
  std::vector<std::uint32_t> tags(N), expected(N);
  gpu.viterbi(*gc, wg, all_sentences(*gc), tags.data(), nullptr);
  std::vector<double> log_z(S), expected_log_z(S);
  gpu.marginals(*gc, wg, all_sentences(*gc), nullptr, log_z.data());
  const std::size_t allocations = emu::host_counters().allocations;
  BackendCorpusPtr cc = cpu.upload(p.corpus);
  cpu.viterbi(*cc, wc, all_sentences(*cc), expected.data(), nullptr);
  cpu.marginals(*cc, wc, all_sentences(*cc), nullptr, expected_log_z.data());
  EXPECT_EQ(tags, expected);
  for (std::size_t s = 0; s < S; ++s) EXPECT_NEAR(log_z[s], expected_log_z[s], 1e-9 * (1 + std::abs(log_z[s])));
  return allocations;
}

TEST(TagUploads, BatchesReuseTheArraysAndDecodeWithoutGathers) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "E=" << E);
    // Batches of one model: the first the largest, values and none, edges or none.
    std::vector<RandomProblem> batches;
    for (std::size_t k = 0; k < 5; ++k) batches.push_back(random_problem(9, 120, E, 60 - 9 * k, 25, 70 + k, k % 2));
    const Dims dims = batches[0].dims;
    BackendPtr gpu = gpu_backend(dims);
    CpuBackend cpu(dims, 1);
    const std::vector<double> w = random_weights(dims.num_weights(), 0.3, 3);
    VectorPtr wg = to_backend(*gpu, w), wc = to_backend(cpu, w);
    const std::size_t before = emu::memory_in_use();
    const std::size_t first = tag_batch(*gpu, cpu, batches[0], *wg, *wc);
    EXPECT_GT(first, 0u);  // the arrays and the workspace
    const std::size_t held = emu::memory_in_use() - before;  // the workspace and the spare arrays
    for (std::size_t k = 1; k < batches.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "batch " << k);
      EXPECT_EQ(tag_batch(*gpu, cpu, batches[k], *wg, *wc), 0u) << "a smaller batch allocates nothing";
      EXPECT_EQ(emu::memory_in_use() - before, held);
    }
    // A gradient builds the gathers it reads (and then matches the CPU backend's).
    const RandomProblem& p = batches[1];
    BackendCorpusPtr gc = gpu->upload(p.corpus), cc = cpu.upload(p.corpus);
    VectorPtr gg = gpu->vector(dims.num_weights()), gcpu = cpu.vector(dims.num_weights());
    emu::reset_host_counters();
    const double loss = gpu->evaluate(*gc, *wg, all_sentences(*gc), gg.get(), 1.0);
    EXPECT_GT(emu::host_counters().allocations, 0u) << "the transposes and gather plans";
    EXPECT_NEAR(loss, cpu.evaluate(*cc, *wc, all_sentences(*cc), gcpu.get(), 1.0), 1e-9 * std::abs(loss));
    const std::vector<double> a = to_host(*gpu, *gg), b = to_host(cpu, *gcpu);
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-9 * (1 + std::abs(b[i]))) << i;
    // A larger batch than any before grows the arrays.
    const RandomProblem big = random_problem(9, 120, E, 90, 25, 99);
    EXPECT_GT(tag_batch(*gpu, cpu, big, *wg, *wc), 0u);
  }
}

}  // namespace
}  // namespace crfx::test
