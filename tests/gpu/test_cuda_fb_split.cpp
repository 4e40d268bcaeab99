// crfx — the split forward-backward (kernels/fb_split_kernels.cu: the recursions on two warps a
// sentence, then the marginals a warp per segment of 64 positions) against the fused kernel and
// the CPU reference:
//   - on sentences of one segment it gives the fused kernel's bits — losses, gradients, node
//     marginals and log Z of every loss — since every per-position value is the same arithmetic;
//   - on sentences of several segments (up to 300 positions), chunked or not, every primitive
//     and every loss but seq-exp (which overflows there on both backends) matches the CPU within
//     the suites' tolerances, and two runs give the same bits.
// CRFX_FB (read by the CUDA backend when it is made) picks the kernel.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "crfx/internal/loss.hpp"
#include "gpu_check.hpp"

namespace crfx::test {
namespace {

/// CRFX_FB set to `mode` for the scope's lifetime, then as it was.
class FbMode {
 public:
  explicit FbMode(const char* mode) {
    if (const char* old = std::getenv("CRFX_FB")) had_ = true, old_ = old;
    setenv("CRFX_FB", mode, 1);
  }
  ~FbMode() {
    if (had_) setenv("CRFX_FB", old_.c_str(), 1);
    else unsetenv("CRFX_FB");
  }
  FbMode(const FbMode&) = delete;
  FbMode& operator=(const FbMode&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

constexpr SequenceLoss kLosses[] = {SequenceLoss::seq_log, SequenceLoss::seq_exp, SequenceLoss::point_log,
                                    SequenceLoss::point_exp};

struct Outputs {
  std::vector<double> losses, gradients, marginals, log_z;
};

/// Every loss with its gradient (seq-exp only with `seq_exp`: exp(log Z − score) overflows on
/// sentences of hundreds of positions), then the node marginals and log Z, on a backend made
/// under CRFX_FB=mode.
Outputs run_gpu(const RandomProblem& p, const char* mode, std::size_t max_chunk_tokens = 0, bool seq_exp = true) {
  FbMode scope(mode);
  BackendPtr gpu = gpu_backend(p.dims, max_chunk_tokens);
  auto gc = gpu->upload(p.corpus);
  auto w = to_backend(*gpu, random_weights(p.dims.num_weights(), 0.5, 5));
  Outputs o;
  for (SequenceLoss loss : kLosses) {
    if (loss == SequenceLoss::seq_exp && !seq_exp) continue;
    auto g = gpu->vector(p.dims.num_weights());
    o.losses.push_back(gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0, loss));
    const std::vector<double> h = to_host(*gpu, *g);
    o.gradients.insert(o.gradients.end(), h.begin(), h.end());
  }
  o.marginals.resize(p.corpus.num_tokens() * p.dims.L);
  o.log_z.resize(p.corpus.num_sentences());
  gpu->marginals(*gc, *w, all_sentences(*gc), o.marginals.data(), o.log_z.data());
  return o;
}

TEST(CudaFbSplit, GivesTheFusedBitsOnSentencesOfOneSegment) {
  REQUIRE_GPU();
  std::uint64_t seed = 40;
  for (std::uint32_t L : {1u, 2u, 5u, 22u, 32u})
    for (std::uint32_t E : {0u, 3u})
      for (Layout layout : {Layout::dense, Layout::observed}) {
        SCOPED_TRACE(::testing::Message() << "L=" << L << " E=" << E << " " << layout);
        const auto p = with_layout(random_problem(L, 30, E, 24, 64, ++seed), layout);
        const Outputs fused = run_gpu(p, "fused"), split = run_gpu(p, "split");
        EXPECT_EQ(split.losses, fused.losses);
        EXPECT_EQ(split.gradients, fused.gradients);
        EXPECT_EQ(split.marginals, fused.marginals);
        EXPECT_EQ(split.log_z, fused.log_z);
      }
}

TEST(CudaFbSplit, MatchesTheCpuOnSentencesOfSeveralSegments) {
  REQUIRE_GPU();
  FbMode scope("split");
  std::uint64_t seed = 80;
  for (std::uint32_t L : {3u, 22u, 32u})
    for (std::uint32_t E : {0u, 2u})
      for (std::size_t chunk : {std::size_t(0), std::size_t(400)}) {
        SCOPED_TRACE(::testing::Message() << "L=" << L << " E=" << E << " chunk tokens " << chunk);
        const auto p = random_problem(L, 40, E, 10, 300, ++seed);
        compare_primitives(p, 0.5, seed, chunk, false, /*with_nbest=*/false);
        if (HasFatalFailure()) return;
        BothBackends both(p, 2, 0.5, seed, chunk);
        auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
        for (SequenceLoss loss : kLosses) {
          if (loss == SequenceLoss::seq_exp) continue;  // overflows at hundreds of positions (both sides)
          SCOPED_TRACE(sequence_loss_name(loss));
          auto gcv = cpu.vector(w.size());
          auto ggv = gpu->vector(w.size());
          const double lc = cpu.evaluate(*cc, *wc, all_sentences(*cc), gcv.get(), 1.0, loss);
          const double lg = gpu->evaluate(*gc, *wg, all_sentences(*gc), ggv.get(), 1.0, loss);
          EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc))) << "loss";
          expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), kGradTol, "gradient");
        }
      }
}

// The split run twice: the same bits (no atomics; the segments' sums in a fixed order).
TEST(CudaFbSplit, IsBitwiseReproducible) {
  REQUIRE_GPU();
  const auto p = random_problem(22, 40, 2, 12, 300, 91);
  const Outputs a = run_gpu(p, "split", 500, false), b = run_gpu(p, "split", 500, false);
  ASSERT_EQ(a.losses.size(), 3u);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.gradients, b.gradients);
  EXPECT_EQ(a.marginals, b.marginals);
}

TEST(CudaFbSplit, AnUnknownModeIsRefusedByName) {
  REQUIRE_GPU();
  FbMode scope("halved");
  Dims d;
  d.L = 3;
  d.A = 2;
  d.transitions = true;
  try {
    gpu_backend(d);
    FAIL() << "CRFX_FB=halved accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CRFX_FB: fused, split or auto, not \"halved\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crfx::test
