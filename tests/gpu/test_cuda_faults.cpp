// The CUDA backend under faults and limits, against the CPU backend: a span naming a sentence twice,
// small device memory, a caught CUDA error, allocations that fail on the emulated device (label
// gpu; gpu-emu there). Helpers and tolerances: gpu_check.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "gpu_check.hpp"
#include "random_problem.hpp"
#include "sag_check.hpp"

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif
#ifdef CRFX_EMULATED_CUDA
#include "emu/emu_launch.hpp"
#endif

namespace crfx {
namespace {

using namespace test;

// A span may name a sentence twice, as on the CPU: decoding returns it twice, evaluate counts it
// twice. (The CUDA backend cannot put a sentence twice in one chunk — two blocks would share its
// token slots — so a repeat starts a new chunk; the ids below repeat within and across chunks.)
TEST(CudaBackend, RepeatedSentencesAgreeWithCpu) {
  REQUIRE_GPU();
  auto p = test::random_problem(6, 40, 2, 12, 9, 17);
  BothBackends both(p, 1, 0.7, 3, /*max_chunk_tokens=*/20);
  auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
  const std::vector<std::uint32_t> ids{3, 1, 3, 3, 0, 1};
  const SentenceSpan span{ids.data(), ids.size()};
  std::size_t tokens = 0;
  for (auto s : ids) tokens += p.corpus.length(s);
  std::vector<std::uint32_t> yc(tokens), yg(tokens, 7);
  cpu.viterbi(*cc, *wc, span, yc.data(), nullptr);
  gpu->viterbi(*gc, *wg, span, yg.data(), nullptr);
  EXPECT_EQ(yg, yc);
  std::vector<double> mc(tokens * 6), mg(tokens * 6);
  cpu.marginals(*cc, *wc, span, mc.data(), nullptr);
  gpu->marginals(*gc, *wg, span, mg.data(), nullptr);
  expect_close_vec(mg, mc, kMargTol, "marginals");
  std::vector<std::uint32_t> nc(tokens * 3), ng(tokens * 3);
  std::vector<double> pc(ids.size() * 3), pg(ids.size() * 3);
  cpu.viterbi_nbest(*cc, *wc, span, 3, nc.data(), pc.data());
  gpu->viterbi_nbest(*gc, *wg, span, 3, ng.data(), pg.data());
  EXPECT_EQ(ng, nc);
  auto gcv = cpu.vector(w.size());
  auto ggv = gpu->vector(w.size());
  const double lc = cpu.evaluate(*cc, *wc, span, gcv.get(), 1.0);
  const double lg = gpu->evaluate(*gc, *wg, span, ggv.get(), 1.0);
  EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc))) << "loss";
  expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), kGradTol, "gradient");
  {  // evaluate_sparse: the entries evaluate adds, so the repeats count twice there too
    auto sc = cpu.sparse_vector(), sg = gpu->sparse()->sparse_vector();
    const double sl_c = cpu.evaluate_sparse(*cc, *wc, span, *sc, 1.0, false);
    const double sl_g = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *sg, 1.0, false);
    EXPECT_NEAR(sl_g, sl_c, kLossRel * std::max(1.0, std::fabs(sl_c))) << "evaluate_sparse loss";
    EXPECT_NEAR(sl_c, lc, kLossRel * std::max(1.0, std::fabs(lc))) << "evaluate_sparse against evaluate";
    auto dg = gpu->vector(w.size()), dc = cpu.vector(w.size());
    gpu->sparse()->sparse_axpy(1.0, *sg, *dg);
    cpu.sparse_axpy(1.0, *sc, *dc);
    expect_close_vec(to_host(*gpu, *dg), to_host(cpu, *dc), kGradTol, "evaluate_sparse gradient");
    expect_close_vec(to_host(cpu, *dc), to_host(cpu, *gcv), kGradTol, "evaluate_sparse against evaluate");
  }
  // … and equals the sum of the distinct sentences' losses, each weighted by its count.
  const std::vector<std::uint32_t> once{0, 1, 3};
  double weighted = 0;
  for (std::uint32_t s : once) {
    const std::uint32_t one[] = {s};
    const double ls = gpu->evaluate(*gc, *wg, SentenceSpan{one, 1}, nullptr, 1.0);
    weighted += ls * double(std::count(ids.begin(), ids.end(), s));
  }
  EXPECT_NEAR(lg, weighted, 1e-10 * std::max(1.0, std::fabs(lg))) << "loss of the repeats";
}

#ifdef CRFX_EMULATED_CUDA
// The emulated device's memory budget and injected allocation failures drive the paths a real GPU
// reaches only when it is full.

/// Sets the emulated device's budget for the scope (0 = the simulated H100's 80 GB).
struct Budget {
  explicit Budget(std::size_t bytes) { emu::set_memory_budget(bytes); }
  ~Budget() {
    emu::set_memory_budget(0);
    emu::fail_allocation(0);
  }
};

// A workspace larger than the device's free memory is cut into chunks of whole sentences, a corpus
// whose copy does not fit is streamed, with the CPU's results; a budget below what one sentence
// needs is refused at upload with the amount.
TEST(CudaBackend, SmallDeviceMemoryChunksOrRefusesClearly) {
  REQUIRE_GPU();
  auto p = test::random_problem(7, 60, 3, 120, 30, 5);
  {
    Budget b(600 * 1024);  // the corpus fits, the workspace holds a few sentences
    compare_primitives(p, 0.6, 9, 0, false, /*with_nbest=*/false);
  }
  {
    // Room for the copy but not for a workspace beside it: the corpus is streamed
    // (kernels/backend_stream.cu), its whole-corpus pass the CPU's.
    const std::size_t copy = gpu_backend(p.dims)->upload_bytes(p.corpus);
    Budget b(copy + 8 * 1024);
    BackendPtr gpu = gpu_backend(p.dims);
    auto gc = gpu->upload(p.corpus);
    EXPECT_NE(gpu->corpus_note(*gc).find("streamed"), std::string::npos);
    CpuBackend cpu(p.dims, 1);
    auto cc = cpu.upload(p.corpus);
    const auto w = random_weights(p.dims.num_weights(), 0.6, 9);
    auto wg = to_backend(*gpu, w), wc = to_backend(cpu, w);
    const double lg = gpu->evaluate(*gc, *wg, all_sentences(*gc), nullptr, 1.0);
    const double lc = cpu.evaluate(*cc, *wc, all_sentences(*cc), nullptr, 1.0);
    EXPECT_NEAR(lg, lc, kLossRel * std::fabs(lc));
  }
  {
    // Too small even for one sentence's chunk: refused with the figures.
    Budget b(12 * 1024);
    BackendPtr gpu = gpu_backend(p.dims);
    try {
      gpu->upload(p.corpus);
      FAIL() << "upload within 12 KiB must fail";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
      EXPECT_NE(msg.find("MiB"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
    }
  }
}

// A failed allocation is reported once, where it happened: the runtime's last error is cleared
// when it is thrown, so the next launch does not report it again.
TEST(CudaBackend, CaughtCudaErrorDoesNotResurface) {
  REQUIRE_GPU();
  Dims d;
  d.L = 3;
  d.A = 10;
  BackendPtr gpu = gpu_backend(d);
  Budget b(0);
  emu::fail_allocation(1);
  EXPECT_THROW(gpu->vector(100), Error);
  auto v = gpu->vector(100);
  gpu->fill(*v, 2.0);  // launches, then checks cudaGetLastError
  EXPECT_EQ(gpu->norm1(*v), 200.0);
}

// n-best's tables are two allocations: when the second fails, a retry must not find a half-grown
// workspace (it launched with a null back-pointer table before), and the backend stays usable.
TEST(CudaBackend, NbestRetryAfterFailedAllocation) {
  REQUIRE_GPU();
  auto p = test::random_problem(5, 30, 0, 10, 8, 13);
  BothBackends both(p, 1, 0.5, 4);
  auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
  std::vector<std::uint32_t> ids(10);
  for (std::uint32_t i = 0; i < 10; ++i) ids[i] = i;
  const SentenceSpan span{ids.data(), ids.size()};
  const std::size_t tokens = p.corpus.num_tokens(), n = 4;
  std::vector<std::uint32_t> nc(tokens * n), ng(tokens * n);
  std::vector<double> pc(10 * n), pg(10 * n);
  cpu.viterbi_nbest(*cc, *wc, span, n, nc.data(), pc.data());
  Budget b(0);
  for (std::size_t k : {2, 1, 3, 4}) {  // each of the n-best allocations in turn
    emu::fail_allocation(k);
    EXPECT_THROW(gpu->viterbi_nbest(*gc, *wg, span, n, ng.data(), pg.data()), Error) << "allocation " << k;
    emu::fail_allocation(0);
    gpu->viterbi_nbest(*gc, *wg, span, n, ng.data(), pg.data());
    EXPECT_EQ(ng, nc) << "after a failed allocation " << k;
    gpu = gpu_backend(p.dims);  // a fresh backend: its n-best tables grow again
    gc = gpu->upload(p.corpus);
    wg = to_backend(*gpu, w);
  }
}

// SAG's lazy-step history on the device is three buffers that grow together: when one allocation
// of a growth fails, the retry regrows all three and uploads the whole history again.
TEST(CudaBackend, LazyStepHistoryRegrowthRetryAfterFailedAllocation) {
  REQUIRE_GPU();
  auto p = test::random_problem(3, 10, 0, 6, 5, 19);
  const auto w0 = test::random_weights(p.dims.num_weights(), 0.5, 8);
  const auto d0 = test::random_weights(p.dims.num_weights(), 0.1, 9);
  std::vector<double> result[2];
  for (int k = 0; k < 2; ++k) {
    BackendPtr b = k == 0 ? BackendPtr(std::make_unique<CpuBackend>(p.dims, 1)) : gpu_backend(p.dims);
    auto corpus = b->upload(p.corpus);
    auto state = b->incremental()->incremental_create(*corpus);
    auto w = to_backend(*b, w0);
    auto d = to_backend(*b, d0);
    const std::uint32_t id = 2;
    b->incremental()->incremental_sync(*state, SentenceSpan{&id, 1}, *w, *d);  // the span's plan buffers exist from here
    for (int step = 0; step < 70000; ++step) b->incremental()->incremental_step(*state, 0.99999, 1e-6, 0.0, *w, *d);  // > 2^16 steps
    if (k == 1) {
      Budget bud(0);
      for (int attempt = 0; attempt < 2; ++attempt) {  // the second, then the third buffer fails
        emu::fail_allocation(2);
        EXPECT_THROW(b->incremental()->incremental_sync(*state, SentenceSpan{&id, 1}, *w, *d), Error) << "attempt " << attempt;
      }
    }
    b->incremental()->incremental_sync(*state, SentenceSpan{&id, 1}, *w, *d);
    b->incremental()->incremental_flush(*state, *w, *d);
    result[k] = to_host(*b, *w);
  }
  expect_close_vec(result[1], result[0], 1e-12, "weights after the catch-up");
}
#endif

}  // namespace
}  // namespace crfx
