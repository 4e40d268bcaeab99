// crfx — SAG / SAGA's sampler (seed 004 §5, SAG-NUS*; the rules in host/optim/sag.cpp's header) as
// code the host and the CUDA backend's one-thread kernels both compile: MT19937-64 equal to
// std::mt19937_64 output for output, our 53-bit uniform draw, the complete binary tree of the
// per-sentence Lipschitz estimates L_i (sums and maxima), the draws and their probabilities, the
// visits' L_i rules and the step size α from L̄ and L_max — written once, so that the draws made on
// a device are the host's by construction (issue 37). Every product is mul_rn (host_device.hpp):
// nvcc would otherwise contract a product and the sum after it into one FMA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <sstream>

#include "crfx/internal/host_device.hpp"

namespace crfx {

/// MT19937-64 (Matsumoto & Nishimura; Nishimura 2000) with the parameters and seeding the C++
/// standard fixes for std::mt19937_64 ([rand.eng.mers], [rand.predef]), so its outputs are the
/// standard engine's; the state words and their position as libstdc++ keeps them (x, p), so the
/// textual state converts both ways (to_std, from_std). Trivially copyable: it crosses to and
/// from the device as bytes.
struct Mt19937_64 {
  static constexpr unsigned kN = 312, kM = 156;
  std::uint64_t x[kN];
  std::uint64_t p;  // the next word to temper; kN: twist first

  CRFX_HOST_DEVICE void seed(std::uint64_t s) {
    x[0] = s;
    for (unsigned i = 1; i < kN; ++i) x[i] = 6364136223846793005ULL * (x[i - 1] ^ (x[i - 1] >> 62)) + i;
    p = kN;
  }
  CRFX_HOST_DEVICE std::uint64_t operator()() {
    if (p >= kN) twist();
    std::uint64_t z = x[p++];
    z ^= (z >> 29) & 0x5555555555555555ULL;
    z ^= (z << 17) & 0x71d67fffeda60000ULL;
    z ^= (z << 37) & 0xfff7eee000000000ULL;
    return z ^ (z >> 43);
  }

 private:
  CRFX_HOST_DEVICE static std::uint64_t mix(std::uint64_t hi, std::uint64_t lo, std::uint64_t far) {
    const std::uint64_t y = (hi & ~0ULL << 31) | (lo & ~(~0ULL << 31));
    return far ^ (y >> 1) ^ ((y & 1) ? 0xb5026f5aa96619e9ULL : 0ULL);
  }
  CRFX_HOST_DEVICE void twist() {
    for (unsigned k = 0; k < kN - kM; ++k) x[k] = mix(x[k], x[k + 1], x[k + kM]);
    for (unsigned k = kN - kM; k < kN - 1; ++k) x[k] = mix(x[k], x[k + 1], x[k + kM - kN]);
    x[kN - 1] = mix(x[kN - 1], x[0], x[kM - 1]);
    p = 0;
  }
};

/// The standard engine in the state of `e` (and back): through the textual state, which for
/// libstdc++ is the words x and the position p (tests/test_sag.cpp checks both directions).
inline void to_std(const Mt19937_64& e, std::mt19937_64& out) {
  std::ostringstream os;
  for (std::uint64_t v : e.x) os << v << ' ';
  os << e.p;
  std::istringstream is(os.str());
  is >> out;
}
inline bool from_std(const std::mt19937_64& e, Mt19937_64& out) {
  std::ostringstream os;
  os << e;
  std::istringstream is(os.str());
  for (std::uint64_t& v : out.x) is >> v;
  is >> out.p;
  return bool(is) && out.p <= Mt19937_64::kN;
}

/// How a sentence is drawn (crfx::Sampling's order; the trainer maps it).
enum class SamplerMode : std::uint32_t { uniform, lipschitz, mixed };

/// The sampler's scalars: the RNG, the number of sentences n, the tree's leaves (a power of two
/// ≥ n), the count m of sentences seen, the mode. Trivially copyable.
struct SagSamplerScalars {
  Mt19937_64 rng;
  std::uint64_t n, leaves, m;
  SamplerMode mode;
};

/// One draw: the sentence and the probability it was drawn with.
struct SagDraw {
  std::uint32_t id;
  double prob;
};

/// The sampler over its arrays — host vectors (SagSampler, host/optim/sag.cpp) or device buffers
/// (the CUDA backend's queue): sum and max [2·leaves] (tree node k's children 2k, 2k + 1; leaf i at
/// leaves + i; an unseen sentence's L_i is 0), seen [n].
struct SagSamplerRef {
  SagSamplerScalars* s;
  double* sum;
  double* max;
  char* seen;

  // ---- the RNG's draws: our mapping of mt19937_64's output (no std::*_distribution)
  /// Uniform on [0, 1): the top 53 bits.
  CRFX_HOST_DEVICE double uniform() const { return double(s->rng() >> 11) * 0x1.0p-53; }
  CRFX_HOST_DEVICE std::uint64_t below(std::uint64_t n) const {
    const std::uint64_t i = std::uint64_t(mul_rn(uniform(), double(n)));
    return i < n - 1 ? i : n - 1;
  }

  // ---- the tree of L_i
  CRFX_HOST_DEVICE double get(std::uint64_t i) const { return sum[s->leaves + i]; }
  CRFX_HOST_DEVICE double total() const { return sum[1]; }
  CRFX_HOST_DEVICE double largest() const { return max[1]; }
  CRFX_HOST_DEVICE void set(std::uint64_t i, double v) const {
    std::uint64_t k = s->leaves + i;
    sum[k] = max[k] = v;
    for (k /= 2; k >= 1; k /= 2) {
      sum[k] = sum[2 * k] + sum[2 * k + 1];
      max[k] = max[2 * k] < max[2 * k + 1] ? max[2 * k + 1] : max[2 * k];  // std::max's choice
    }
  }
  /// The i with Σ_{j<i} L_j ≤ u·total < Σ_{j≤i} L_j (a seen sentence).
  CRFX_HOST_DEVICE std::uint64_t sample(double u) const {
    double target = mul_rn(u, total());
    std::uint64_t k = 1;
    while (k < s->leaves) {
      if (target < sum[2 * k] || sum[2 * k + 1] <= 0) {
        k = 2 * k;
      } else {
        target = target - sum[2 * k];
        k = 2 * k + 1;
      }
    }
    return k - s->leaves < s->n - 1 ? k - s->leaves : s->n - 1;
  }

  // ---- the draws (seed 004 §5; sag.cpp's header)
  /// Whether the draw is uniform over all n whatever u (uniform sampling, or nothing seen yet).
  CRFX_HOST_DEVICE bool all_uniform() const {
    return s->mode == SamplerMode::uniform || s->m == 0 || !(total() > 0);
  }
  /// The probability of the ∝ L_i part: ½ (mixed), or m/n (lipschitz).
  CRFX_HOST_DEVICE double q() const {
    return s->mode == SamplerMode::mixed ? 0.5 : double(s->m) / double(s->n);
  }
  /// The draw probability of sentence j under the current distribution.
  CRFX_HOST_DEVICE double probability(std::uint64_t j) const {
    const double nd = double(s->n);
    if (all_uniform()) return 1.0 / nd;
    const double seen_l = seen[j] ? get(j) : 0.0, qq = q();
    return (1.0 - qq) / nd + mul_rn(qq, seen_l) / total();
  }
  CRFX_HOST_DEVICE std::uint64_t draw() const {
    if (all_uniform()) return below(s->n);
    const double qq = q(), u = uniform();
    if (u >= qq) return below(s->n);
    return sample(uniform());
  }
  /// A visit of sentence j (after the span's draws): a first one sets L_i (½·L̄ of the seen ones
  /// under mixed sampling, else 1) and counts it; a revisit lowers L_i (×0.9 mixed, ×½
  /// lipschitz), so that the line search may find it smaller again.
  CRFX_HOST_DEVICE void visit(std::uint64_t j) const {
    const bool nus = s->mode != SamplerMode::uniform;
    if (!seen[j]) {
      double Li = 1.0;
      if (s->mode == SamplerMode::mixed && s->m > 0) Li = mul_rn(0.5, total()) / double(s->m);
      seen[j] = 1;
      ++s->m;
      if (nus) set(j, Li);
    } else if (nus) {
      set(j, mul_rn(get(j), s->mode == SamplerMode::mixed ? 0.9 : 0.5));
    }
  }
  /// A span of one sentence (batch size 1): its draw, probability and visit.
  CRFX_HOST_DEVICE SagDraw draw_one() const {
    const std::uint64_t j = draw();
    const SagDraw out{std::uint32_t(j), probability(j)};
    visit(j);
    return out;
  }

  /// A span of `count` distinct sentences (a repeat is redrawn) and the probability each was
  /// drawn with, then their visits in span order (a batch of SAG at batch size > 1).
  CRFX_HOST_DEVICE void draw_span(std::uint32_t* ids, double* prob, std::size_t count) const {
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t j;
      bool repeat;
      do {
        j = draw();
        repeat = false;
        for (std::size_t k = 0; k < i && !repeat; ++k) repeat = ids[k] == j;
      } while (repeat);
      ids[i] = std::uint32_t(j);
      prob[i] = probability(j);
    }
    for (std::size_t i = 0; i < count; ++i) visit(ids[i]);
  }

  // ---- the line search's L and the step (NUS: lipschitz, mixed)
  /// The line search's starting L: the span's mean L_i.
  CRFX_HOST_DEVICE double span_lipschitz(const std::uint32_t* ids, std::size_t count) const {
    double L0 = 0;
    for (std::size_t i = 0; i < count; ++i) L0 += get(ids[i]);
    return L0 / double(count);
  }
  /// The search found Lb from L0: the span's L_i scaled alike.
  CRFX_HOST_DEVICE void found(const std::uint32_t* ids, std::size_t count, double L0, double Lb) const {
    if (Lb == L0) return;
    const double factor = Lb / L0;
    for (std::size_t i = 0; i < count; ++i) set(ids[i], mul_rn(get(ids[i]), factor));
  }
  /// α for L multiplied by lip_mult (3 for SAGA) and the L2 coefficient λ: ½(1/(L_max + λ) +
  /// 1/(L̄ + λ)) mixed, 1/(L_max + λ) lipschitz.
  CRFX_HOST_DEVICE double step_size(double lip_mult, double lambda) const {
    const double at_max = 1.0 / (mul_rn(lip_mult, largest()) + lambda);
    if (s->mode != SamplerMode::mixed) return at_max;
    const double Lbar = total() / double(s->m);
    return 0.5 * (at_max + 1.0 / (mul_rn(lip_mult, Lbar) + lambda));
  }
};

}  // namespace crfx
