// crfx — the AVX-512 row code of the observed-pair layout (sparse_rows.hpp).
#include "cpu/sparse_rows.hpp"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "crfx/errors.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CRFX_ROWS_X86 1
#endif

namespace crfx {

bool cpu_rows_avx512() {
#ifdef CRFX_ROWS_X86
  static const bool on = [] {
    const char* env = std::getenv("CRFX_SIMD");
    if (env && (std::strcmp(env, "baseline") == 0 || std::strcmp(env, "avx2") == 0)) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  }();
  return on;
#else
  return false;
#endif
}

std::vector<std::uint64_t> row_lane_masks(const WeightGroups& wg) {
  if (wg.dense() || wg.L > kRowMaxLabels) throw Error("internal: lane masks need sparse rows of at most 64 labels");
  std::vector<std::uint64_t> masks(wg.A, 0);
  for (std::uint32_t a = 0; a < wg.A; ++a)
    for (std::size_t k = wg.offsets[a]; k < wg.offsets[a + 1]; ++k) masks[a] |= std::uint64_t(1) << wg.slots[k];
  return masks;
}

#ifdef CRFX_ROWS_X86
namespace {

#define CRFX_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"), always_inline)) inline

CRFX_AVX512 void prefetch_rows(const SparseRows& r, const void* rows, std::size_t k, std::size_t end) {
  if (k + 2 * kPrefetchItems < end) {
    __builtin_prefetch(r.offsets + r.ids[k + 2 * kPrefetchItems]);
    __builtin_prefetch(r.masks + r.ids[k + 2 * kPrefetchItems]);
  }
  if (k + kPrefetchItems < end) {
    const std::uint32_t a = r.ids[k + kPrefetchItems];
    const std::size_t b = r.offsets[a], n = std::size_t(__builtin_popcountll(r.masks[a]));
    const double* row = static_cast<const double*>(rows) + b;
    __builtin_prefetch(row);
    __builtin_prefetch(row + n - 1);
  }
}

/// Lanes 8g … 8g + 7 of a row of L: all, or the last group's L mod 8.
template <int NG>
CRFX_AVX512 __mmask8 group_lanes(int g, std::size_t L) {
  return g + 1 < NG || L % 8 == 0 ? __mmask8(0xff) : __mmask8((1u << (L % 8)) - 1);
}

template <int NG, bool kValues>
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"))) void emissions(const SparseRows& r, std::size_t tok0,
                                                                            std::size_t T, const double* W,
                                                                            double* state) {
  const std::size_t L = r.L, end = r.item_offsets[tok0 + T];
  for (std::size_t t = 0; t < T; ++t) {
    __m512d acc[NG];
    for (int g = 0; g < NG; ++g) acc[g] = _mm512_setzero_pd();
    for (std::size_t k = r.item_offsets[tok0 + t]; k < r.item_offsets[tok0 + t + 1]; ++k) {
      prefetch_rows(r, W, k, end);
      const std::uint32_t a = r.ids[k];
      const std::uint64_t mask = r.masks[a];
      const double* row = W + r.offsets[a];
      for (int g = 0; g < NG; ++g) {
        const __mmask8 m = __mmask8(mask >> (8 * g));
        const __m512d w = _mm512_maskz_expandloadu_pd(m, row);  // lanes without a weight: +0.0
        acc[g] = _mm512_add_pd(acc[g], kValues ? _mm512_maskz_mul_pd(m, _mm512_set1_pd(r.values[k]), w) : w);
        row += __builtin_popcount(unsigned(m));
      }
    }
    double* st = state + t * L;
    for (int g = 0; g < NG; ++g) _mm512_mask_storeu_pd(st + 8 * g, group_lanes<NG>(g, L), acc[g]);
  }
}

/// d's lanes idx (< 8·NG) from the registers d[0 … NG).
template <int NG>
CRFX_AVX512 __m512d pick(const __m512d* d, __m512i idx) {
  if constexpr (NG == 1) {
    return _mm512_maskz_permutexvar_pd(0xff, idx, d[0]);
  } else {
    constexpr int NP = (NG + 1) / 2;  // pairs of registers: 16 lanes each
    __m512d p[NP];
    for (int i = 0; i < NG / 2; ++i) p[i] = _mm512_permutex2var_pd(d[2 * i], idx, d[2 * i + 1]);
    if constexpr (NG % 2 == 1) p[NP - 1] = _mm512_maskz_permutexvar_pd(0xff, idx, d[NG - 1]);
    if constexpr (NP == 1) {
      return p[0];
    } else {
      const __mmask8 b4 = _mm512_test_epi64_mask(idx, _mm512_set1_epi64(16));
      const __m512d q0 = _mm512_mask_blend_pd(b4, p[0], p[1]);
      if constexpr (NP == 2) {
        return q0;
      } else {
        const __m512d q1 = NP == 3 ? p[2] : _mm512_mask_blend_pd(b4, p[2], p[NP - 1]);
        return _mm512_mask_blend_pd(_mm512_test_epi64_mask(idx, _mm512_set1_epi64(32)), q0, q1);
      }
    }
  }
}

template <int NG, bool kValues>
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"))) void reduce(const SparseRows& r, std::size_t tok0,
                                                                         std::size_t T, std::size_t first,
                                                                         std::size_t last, const double* d,
                                                                         double scale, std::uint32_t lo,
                                                                         std::uint32_t hi, double* G) {
  const std::size_t L = r.L;
  std::size_t e = first;
  for (std::size_t t = 0; t < T; ++t) {
    __m512d dt[NG];
    for (int g = 0; g < NG; ++g) dt[g] = _mm512_maskz_loadu_pd(group_lanes<NG>(g, L), d + t * L + 8 * g);
    const std::size_t b = e;
    e = r.counts ? b + r.counts[tok0 + t] : r.item_offsets[tok0 + t + 1];
    for (std::size_t k = b; k < e; ++k) {
      const std::uint32_t a = r.ids[k];
      if (a < lo || a >= hi) continue;
      prefetch_rows(r, G, k, last);
      const __m512d f = _mm512_set1_pd(kValues ? scale * r.values[k] : scale);
      const std::size_t j1 = r.offsets[a + 1];
      for (std::size_t j = r.offsets[a]; j < j1; j += 8) {
        const __mmask8 m = j1 - j >= 8 ? __mmask8(0xff) : __mmask8((1u << (j1 - j)) - 1);
        const __m512i idx = _mm512_maskz_cvtepu32_epi64(m, _mm256_maskz_loadu_epi32(m, r.slots + j));
        const __m512d x = _mm512_mul_pd(f, pick<NG>(dt, idx));
        _mm512_mask_storeu_pd(G + j, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, G + j), x));
      }
    }
  }
}

/// f(std::integral_constant<int, NG>) for NG = ⌈L/8⌉, 1 … 8.
template <class F>
void by_groups(std::size_t L, F&& f) {
  switch ((L + 7) / 8) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: throw Error("internal: the AVX-512 row code takes 1 to 64 labels");
  }
}

}  // namespace

void row_emissions_avx512(const SparseRows& r, std::size_t tok0, std::size_t T, const double* W, double* state) {
  by_groups(r.L, [&](auto ng) {
    constexpr int NG = decltype(ng)::value;
    r.values ? emissions<NG, true>(r, tok0, T, W, state) : emissions<NG, false>(r, tok0, T, W, state);
  });
}

void row_reduce_avx512(const SparseRows& r, std::size_t tok0, std::size_t T, std::size_t first, std::size_t last,
                       const double* d, double scale, std::uint32_t lo, std::uint32_t hi, double* G) {
  by_groups(r.L, [&](auto ng) {
    constexpr int NG = decltype(ng)::value;
    r.values ? reduce<NG, true>(r, tok0, T, first, last, d, scale, lo, hi, G)
             : reduce<NG, false>(r, tok0, T, first, last, d, scale, lo, hi, G);
  });
}

#else  // not x86-64: cpu_rows_avx512() is false and these are never called

void row_emissions_avx512(const SparseRows&, std::size_t, std::size_t, const double*, double*) {
  throw Error("internal: the AVX-512 row code is not built for this CPU");
}
void row_reduce_avx512(const SparseRows&, std::size_t, std::size_t, std::size_t, std::size_t, const double*, double,
                       std::uint32_t, std::uint32_t, double*) {
  throw Error("internal: the AVX-512 row code is not built for this CPU");
}

#endif

}  // namespace crfx
