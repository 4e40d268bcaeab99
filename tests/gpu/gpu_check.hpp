// crfx — what the GPU suites share (label gpu, and gpu-emu on the emulated device): the tolerances,
// the device check and REQUIRE_GPU, the CUDA backend under test, and the comparison of every
// batch primitive with the CPU double reference.
//
// Tolerances (named, double precision on both sides):
//   kLossRel   1e-9   relative, loss / log Z
//   kGradTol   1e-9   absolute on each gradient entry, scaled by max(1, |g_cpu|)
//   kMargTol   1e-9   absolute on node marginals (probabilities)
//   kVecRel    1e-12  dot products and norms, relative to Σ|terms| (different summation order);
//              element-wise vector ops 1e-14 (the GPU may contract a·x + y into an FMA)
//   Viterbi labels are compared exactly (emissions and Viterbi arithmetic are bitwise the CPU's).
//
// Weight layouts (corpus.hpp): the suites run the primitives on the dense layout and on sparse
// ones (Layout, with_layout), with the same tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "random_problem.hpp"

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif

namespace crfx::test {

inline constexpr double kLossRel = 1e-9;
inline constexpr double kGradTol = 1e-9;
inline constexpr double kMargTol = 1e-9;
inline constexpr double kVecRel = 1e-12;

/// Why no GPU test can run here ("" when a device is usable): the library's own answer
/// (gpu_unavailable, as --device auto and cuda use it). Every GPU test skips through this one
/// function (REQUIRE_GPU, or a test's own check calling it), so all give the same reason —
/// "no NVIDIA driver on this machine", not the CUDA runtime's "driver version is insufficient".
inline std::string no_gpu_reason() { return gpu_unavailable(); }

// On the emulated device (label gpu-emu) nothing may skip: a missing device is a failure there.
#ifdef CRFX_EMULATED_CUDA
#define REQUIRE_GPU()                                                      \
  do {                                                                     \
    const std::string reason_ = ::crfx::test::no_gpu_reason();             \
    if (!reason_.empty()) FAIL() << "the emulated device is unusable: " << reason_; \
  } while (0)
#else
#define REQUIRE_GPU()                                          \
  do {                                                         \
    const std::string reason_ = ::crfx::test::no_gpu_reason(); \
    if (!reason_.empty()) GTEST_SKIP() << reason_;             \
  } while (0)
#endif

/// Whether this run takes case `index` of a long test's cases. The emulated suite runs three times in
/// CI, under schedule seeds 1, 2 and 3 (CRFX_EMU_SEED; seed 3 in the sanitizer pass,
/// scripts/test-emu-sanitize.sh, where a case costs 3–4 times as much). A real GPU, or the
/// emulation without the variable, takes every case; under the emulation seed 1 takes the even
/// cases, seed 2 the odd ones and seed 3 every eighth (index ≡ 3 mod 8: the fourth case of a test
/// of four): every case runs in the plain pass, an eighth of them also under the sanitizers. The
/// tests that do not share run under all three seeds. CRFX_EMU_SHARE=K takes every K-th case
/// instead (the one whose index ≡ seed mod K).
inline bool schedule_share(std::size_t index) {
  const char* schedule = std::getenv("CRFX_EMU_SEED");
  const char* share = std::getenv("CRFX_EMU_SHARE");
  if (!schedule && !share) return true;
  const unsigned long seed = schedule ? std::strtoul(schedule, nullptr, 10) : 1;
  if (share) {
    const unsigned long k = std::max(1ul, std::strtoul(share, nullptr, 10));
    return index % k == seed % k;
  }
  return seed < 3 ? index % 2 == seed % 2 : index % 8 == 3;
}

/// Built with AddressSanitizer (the sanitizer pass): the heaviest tests take smaller problems there.
/// What it looks for — an access out of bounds, a read of freed or poisoned memory — shows on a
/// small shape as on a large one, and the plain passes keep the large ones.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// The suite runs on the emulated device (label gpu-emu): the optimum tests take smaller problems
/// there, where a launch costs what a thousand do on a GPU; a real GPU runs the full ones.
#ifdef CRFX_EMULATED_CUDA
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

/// The weight layouts the GPU suites cover: dense (every attribute × label pair), observed
/// (CRFsuite's default: the pairs of the problem's corpus, observed_layout) and random (each slot
/// of every row with probability 1/2, test::random_layout: gold pairs may have no weight).
enum class Layout { dense, observed, random };
inline constexpr Layout kAllLayouts[] = {Layout::dense, Layout::observed, Layout::random};
inline std::ostream& operator<<(std::ostream& os, Layout l) {
  return os << (l == Layout::dense ? "dense" : l == Layout::observed ? "observed" : "random");
}

/// `p` with `layout` over its dims as they are now (set dims.transitions first). An observed
/// layout needs a corpus without edge items at a sentence's first token (add those after).
inline RandomProblem with_layout(RandomProblem p, Layout layout, std::uint64_t seed = 7) {
  p.dims.layout = nullptr;
  if (layout == Layout::observed)
    p.dims.layout = std::make_shared<const WeightLayout>(observed_layout(p.corpus, p.dims));
  else if (layout == Layout::random)
    p.dims.layout = random_layout(p.dims, 0.5, seed);
  return p;
}

inline BackendPtr gpu_backend(const Dims& dims, std::size_t max_chunk_tokens = 0) {
#ifdef CRFX_HAVE_CUDA
  cuda::CudaBackendConfig cfg;
  cfg.max_chunk_tokens = max_chunk_tokens;
  return cuda::make_cuda_backend(dims, cfg);
#else
  (void)dims;
  (void)max_chunk_tokens;
  throw Error("built without CUDA");
#endif
}

#ifdef CRFX_HAVE_CUDA
inline BackendPtr gpu_backend(const Dims& dims, const cuda::CudaBackendConfig& cfg) {
  return cuda::make_cuda_backend(dims, cfg);
}
#endif

/// The CPU reference and the GPU backend on one problem, the same random weights on each (for a
/// test's `auto& [cpu, gpu, cc, gc, w, wc, wg] = both;`).
struct BothBackends {
  CpuBackend cpu;
  BackendPtr gpu;
  BackendCorpusPtr cc, gc;
  std::vector<double> w;
  VectorPtr wc, wg;
  BothBackends(const RandomProblem& p, unsigned cpu_threads, double weight_scale, std::uint64_t seed,
               std::size_t max_chunk_tokens = 0, bool log_space_reference = false)
      : cpu(p.dims, cpu_threads, log_space_reference),
        gpu(gpu_backend(p.dims, max_chunk_tokens)),
        cc(cpu.upload(p.corpus)),
        gc(gpu->upload(p.corpus)),
        w(random_weights(p.dims.num_weights(), weight_scale, seed)),
        wc(to_backend(cpu, w)),
        wg(to_backend(*gpu, w)) {}
};

inline void expect_close_vec(const std::vector<double>& gpu, const std::vector<double>& cpu, double tol,
                      const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    if (!(std::fabs(gpu[i] - cpu[i]) <= tol * std::max(1.0, std::fabs(cpu[i])))) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << " cpu " << cpu[i];
    }
  EXPECT_EQ(bad, 0u) << what << ": entries beyond tolerance " << tol;
}

/// Every batch primitive of both backends on the same problem, weights (both.w) and span.
inline void compare_primitives_on(BothBackends& both, const RandomProblem& p, bool with_nbest = true) {
  auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
  // A permuted span (every other sentence reversed, then the rest) exercises span order.
  std::vector<std::uint32_t> ids;
  const std::size_t S = p.corpus.num_sentences();
  for (std::size_t s = S; s-- > 0;)
    if (s % 2 == 0) ids.push_back(std::uint32_t(s));
  for (std::size_t s = 0; s < S; ++s)
    if (s % 2 == 1) ids.push_back(std::uint32_t(s));
  const SentenceSpan span{ids.data(), ids.size()};

  auto gcv = cpu.vector(w.size());
  auto ggv = gpu->vector(w.size());
  const double scale = 0.75;
  const double lc = cpu.evaluate(*cc, *wc, span, gcv.get(), scale);
  const double lg = gpu->evaluate(*gc, *wg, span, ggv.get(), scale);
  EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc))) << "loss";
  expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), kGradTol, "gradient");
  const double lg_only = gpu->evaluate(*gc, *wg, span, nullptr, 1.0);
  EXPECT_NEAR(lg_only, lg, 1e-12 * std::max(1.0, std::fabs(lg))) << "loss-only mode";

  std::size_t tokens = 0;
  for (auto s : ids) tokens += p.corpus.length(s);
  const std::size_t L = p.dims.L;
  std::vector<double> mc(tokens * L), mg(tokens * L), zc(ids.size()), zg(ids.size());
  cpu.marginals(*cc, *wc, span, mc.data(), zc.data());
  gpu->marginals(*gc, *wg, span, mg.data(), zg.data());
  expect_close_vec(mg, mc, kMargTol, "node marginals");
  expect_close_vec(zg, zc, kLossRel, "log Z");

  std::vector<std::uint32_t> yc(tokens), yg(tokens, 12345);
  std::vector<double> sc(ids.size()), sg(ids.size(), -1.0);
  cpu.viterbi(*cc, *wc, span, yc.data(), sc.data());
  gpu->viterbi(*gc, *wg, span, yg.data(), sg.data());
  EXPECT_EQ(yg, yc) << "viterbi";
  expect_close_vec(sg, sc, kLossRel, "viterbi path scores");

  // n-best (tag --nbest): the same lists; missing paths (−∞, labels 0) in the same places.
  if (!with_nbest) return;
  for (std::size_t n : {std::size_t(1), std::size_t(4), std::size_t(20)}) {
    std::vector<std::uint32_t> nc(tokens * n), ng(tokens * n, 12345);
    std::vector<double> pc(ids.size() * n), pg(ids.size() * n, -1.0);
    cpu.viterbi_nbest(*cc, *wc, span, n, nc.data(), pc.data());
    gpu->viterbi_nbest(*gc, *wg, span, n, ng.data(), pg.data());
    EXPECT_EQ(ng, nc) << "viterbi_nbest labels, n = " << n;
    for (std::size_t j = 0; j < pc.size(); ++j) {
      ASSERT_EQ(std::isinf(pg[j]), std::isinf(pc[j])) << "viterbi_nbest missing path " << j;
      if (std::isinf(pc[j])) pc[j] = pg[j] = 0.0;
    }
    expect_close_vec(pg, pc, kLossRel, "viterbi_nbest scores");
  }
}

/// compare_primitives_on with random weights of the given scale.
inline void compare_primitives(const RandomProblem& p, double weight_scale, std::uint64_t seed,
                               std::size_t max_chunk_tokens = 0, bool log_space_reference = false,
                               bool with_nbest = true) {
  BothBackends both(p, 2, weight_scale, seed, max_chunk_tokens, log_space_reference);
  compare_primitives_on(both, p, with_nbest);
}

}  // namespace crfx::test
