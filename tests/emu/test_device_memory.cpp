// crfx — the CUDA backend's device memory against its estimate: what `crfx train` prints and checks
// before anything is allocated (upload_bytes, the corpus's copy; workspace_bytes, the chunk
// buffers) is what the backend then allocates for a pass — within 20%, never below — as the
// emulated device counts every cudaMalloc. With and without edge features, for the log-loss and a
// pointwise loss (its per-position pairwise marginals), and for a corpus of sentences long enough
// to run the split forward-backward.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "../gpu/gpu_check.hpp"
#include "crfx/internal/loss.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {
namespace {

TEST(DeviceMemory, TheEstimateIsWhatAPassAllocates) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (SequenceLoss loss : {SequenceLoss::seq_log, SequenceLoss::point_log})
      for (std::size_t max_len : {std::size_t(30), std::size_t(300)}) {
        SCOPED_TRACE(::testing::Message() << "E=" << E << " " << sequence_loss_name(loss) << " max_len=" << max_len);
        const auto p = random_problem(22, 200, E, 9000 / max_len, max_len, 11 + E + max_len);
        BackendPtr gpu = gpu_backend(p.dims);
        const std::size_t estimate = gpu->upload_bytes(p.corpus) + gpu->workspace_bytes(p.corpus, loss);
        const std::size_t base = emu::memory_in_use();  // the backend's own (E, Eᵀ, reduction partials)
        auto gc = gpu->upload(p.corpus);
        const std::size_t W = p.dims.num_weights();
        auto w = to_backend(*gpu, random_weights(W, 0.3, 5));
        auto g = gpu->vector(W);
        gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0, loss);
        const std::size_t used = emu::memory_in_use() - base - 2 * W * sizeof(double);
        EXPECT_LE(used, estimate);
        EXPECT_GE(double(used), 0.8 * double(estimate)) << "used " << used << " of " << estimate << " estimated";
        RecordProperty("used_over_estimate_E" + std::to_string(E) + "_" + sequence_loss_name(loss) + "_T" +
                           std::to_string(max_len),
                       std::to_string(double(used) / double(estimate)));
      }
}

// A corpus streamed under a device limit below its copy: what the memory check is told
// (upload_bytes, workspace_bytes) is within the limit, and what the upload and a pass allocate —
// the gather plans, the workspace, the two stream slots — within that estimate.
TEST(DeviceMemory, AStreamedCorpusStaysWithinItsLimit) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "E=" << E);
    const auto p = random_problem(22, 200, E, 400, 30, 41 + E);
    const std::size_t copy = gpu_backend(p.dims)->upload_bytes(p.corpus);
    cuda::CudaBackendConfig cfg;
    cfg.max_device_memory = copy * 3 / 4;
    BackendPtr gpu = cuda::make_cuda_backend(p.dims, cfg);
    const std::size_t estimate = gpu->upload_bytes(p.corpus) + gpu->workspace_bytes(p.corpus);
    EXPECT_LE(estimate, cfg.max_device_memory);
    const std::size_t base = emu::memory_in_use();
    auto gc = gpu->upload(p.corpus);
    ASSERT_NE(gpu->corpus_note(*gc).find("streamed"), std::string::npos) << "the copy is over the limit";
    const std::size_t W = p.dims.num_weights();
    auto w = to_backend(*gpu, random_weights(W, 0.3, 5));
    auto g = gpu->vector(W);
    gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0);
    const std::size_t used = emu::memory_in_use() - base - 2 * W * sizeof(double);
    EXPECT_LE(used, estimate);
    RecordProperty("streamed_used_over_limit_E" + std::to_string(E),
                   std::to_string(double(used) / double(cfg.max_device_memory)));
  }
}

}  // namespace
}  // namespace crfx::test
