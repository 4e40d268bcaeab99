// crfx tests — a SAG-NUS sampler's state over arrays it owns (host/rules/sag_sampler.hpp), nothing
// seen yet: what the sampler tests draw with, on the host and on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rules/sag_sampler.hpp"

namespace crfx {

/// A sampler's state on n sentences, its arrays owned.
struct SamplerState {
  SagSamplerScalars sc{};
  std::vector<double> sum, max;
  std::vector<char> seen;
  SamplerState(std::size_t n, SamplerMode mode, std::uint64_t seed) : seen(n, 0) {
    sc.rng.seed(seed);
    sc.n = n;
    sc.leaves = 1;
    while (sc.leaves < n) sc.leaves *= 2;
    sc.mode = mode;
    sum.assign(2 * sc.leaves, 0.0);
    max.assign(2 * sc.leaves, 0.0);
  }
  SagSamplerRef ref() { return {&sc, sum.data(), max.data(), seen.data()}; }
};

}  // namespace crfx
