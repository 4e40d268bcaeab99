// crfx — the CUDA backend's device memory against its estimate: what `crfx train` prints and checks
// before anything is allocated (upload_bytes, the corpus's copy; workspace_bytes, the chunk
// buffers) is what the backend then allocates for a pass — within 20%, never below — as the
// emulated device counts every cudaMalloc. With and without edge features, for the log-loss and a
// pointwise loss (its per-position pairwise marginals), and for a corpus of sentences long enough
// to run the split forward-backward.
#include <gtest/gtest.h>

#include <cstdint>

#include "../gpu/gpu_check.hpp"
#include "crfx/loss.hpp"
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

}  // namespace
}  // namespace crfx::test
