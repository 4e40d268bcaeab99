// SAG-NUS's sampler on the device (issue 37): the one-thread kernels the queued steps draw with
// (launch_sag_draw, launch_sag_found over host/rules/sag_sampler.hpp) against the host's run of
// the same code — the sentences, probabilities, step sizes and the state left, bit for bit. On a
// GPU this is what catches nvcc's own arithmetic (an FMA contracted where the host rounds twice).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "../kernels/cuda_api.hpp"
#include "gpu_check.hpp"
#include "rules/sag_sampler.hpp"
#include "../sampler_state.hpp"

namespace crfx {
namespace {

/// The line search's L: L0 doubled up to a constant of the sentence's (1 … 5, a Lipschitz
/// constant), as Algorithm 2's doublings find it.
double search(std::uint32_t id, double L0) {
  if (!(L0 > 0)) return L0;  // uniform sampling keeps no L_i: nothing found to scale
  double L = L0;
  while (L < double(1 + id % 5)) L *= 2.0;
  return L;
}

TEST(CudaSagSampler, DeviceDrawsAsTheHost) {
  REQUIRE_GPU();
  for (SamplerMode mode : {SamplerMode::mixed, SamplerMode::lipschitz, SamplerMode::uniform}) {
    for (std::size_t n : {std::size_t(7), std::size_t(300)}) {
      SCOPED_TRACE(::testing::Message() << "mode " << int(mode) << ", n = " << n);
      const std::size_t steps = 3 * n;
      SamplerState host(n, mode, 11), dev(n, mode, 11);
      std::vector<SagDraw> hd(steps), dd(steps);
      std::vector<double> ha(steps), da(steps);
      const SagSamplerRef r = host.ref();
      for (std::size_t t = 0; t < steps; ++t) {
        hd[t] = r.draw_one();
        const double L0 = r.get(hd[t].id);
        r.found(&hd[t].id, 1, L0, search(hd[t].id, L0));
        ha[t] = r.step_size(3.0, 1e-3);
      }
#ifdef CRFX_HAVE_CUDA  // a build without CUDA has skipped at REQUIRE_GPU: no device code to call
      cuda::sag_sampler_steps_on_device(0, dev.ref(), steps, search, 3.0, 1e-3, dd.data(), da.data());
#endif
      std::size_t differ = 0;
      for (std::size_t t = 0; t < steps; ++t) {
        differ += hd[t].id != dd[t].id || hd[t].prob != dd[t].prob;
        if (mode != SamplerMode::uniform) differ += ha[t] != da[t];
      }
      EXPECT_EQ(differ, 0u) << "of " << steps << " steps";
      EXPECT_EQ(dev.sum, host.sum);
      EXPECT_EQ(dev.max, host.max);
      EXPECT_EQ(dev.seen, host.seen);
      EXPECT_EQ(dev.sc.m, host.sc.m);
      EXPECT_EQ(std::memcmp(&dev.sc.rng, &host.sc.rng, sizeof host.sc.rng), 0) << "the generators' states";
    }
  }
}

}  // namespace
}  // namespace crfx
