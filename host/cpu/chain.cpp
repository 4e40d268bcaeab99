// crfx — forward-backward, marginals and Viterbi for one sentence (double precision).
//
// Fast path: the scaled exp-space recursion (Rabiner's scaling, as CRFsuite's crf1d_context):
//   S_t(y)   = exp(s_t(y) − max_y s_t(y))                     [T][L], L exps per position
//   E_t      = exp(τ_t − max τ_t)                             [L][L], once (or per edge position)
//   u_t(y)   = Σ_y' α_{t−1}(y') E_t(y', y)                    α normalised: Σ_y α_t(y) = 1
//   α_t(y)   = u_t(y) S_t(y) / n_t,    log Z = Σ_t (max s_t + max τ_t + log n_t)
//   β_t(y')  = Σ_y E_{t+1}(y', y) S_{t+1}(y) β_{t+1}(y) / m_t  (own normalisation m_t)
//   p_t(y)   = α_t(y) β_t(y) / z_t,                  z_t = Σ_y α_t(y) β_t(y)
//   p_t(y',y)= α_{t−1}(y') E_t(y',y) S_t(y) β_t(y) / q_t,  q_t = the sum of the numerators
// Every quantity is a per-position rescaling of the exact one, so normalising per position gives
// exact marginals. When a normaliser n_t, m_t, z_t or q_t drops below kTinySum (weights so extreme that
// exp-space products underflow), the whole sentence is recomputed in log space, which is exact
// but costs L² exps per position. The mass lost to underflow on the fast path is below
// L²·1e-308 / kTinySum relative, i.e. nothing.
#include "cpu/chain.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "crfx/internal/host_device.hpp"

namespace crfx {

bool cpu_simd_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = [] {
    const char* env = std::getenv("CRFX_SIMD");
    if (env && std::strcmp(env, "baseline") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
#else
  return false;
#endif
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr std::size_t kVec = kChainLanes;

double log_sum_exp(const double* v, std::size_t n) {
  double m = *std::max_element(v, v + n);
  if (m == kNegInf) return kNegInf;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
  return m + std::log(s);
}

// ---- the scaled path -------------------------------------------------------------------------
// Its O(L²) work per position is three matrix-vector products: u = α_{t−1}ᵀ·E (forward),
// β_t = E·v (backward) and, for pair_sum, the rows of O = Σ_t (α_t/q_t) ⊗ v_t. They run on rows
// padded with zeros to chain_stride(L) (a multiple of kVec doubles), a block of output lanes in
// registers while the rows stream past, rather than as axpy updates of a row in memory (a load,
// add and store per element and row, each row's updates waiting on the last's stores). Every
// output lane is still its sum over the rows in row order, from 0.0, with one rounding per
// multiply and per add (-ffp-contract=off): bit for bit the axpy loops' results. The padding
// lanes hold zeros (S, α, β, v and the factors' pad columns) and feed no real lane.
//
// The lanes are GCC/Clang vector extensions: 4 doubles (an AVX register) or 2 (an SSE2 or NEON
// one). On x86-64 the forward and backward passes are compiled twice, for the baseline ISA with 2
// and for AVX2 with 4, and the AVX2 copy runs where the CPU has it (cpu_simd_avx2(), chain.hpp:
// CRFX_SIMD=baseline forces the other). Both copies do the same operations on the same values in
// the same order, so they give the same bits; only the instructions differ.

#define CRFX_INLINE inline __attribute__((always_inline))

using v2d = double __attribute__((vector_size(2 * sizeof(double))));
using v4d = double __attribute__((vector_size(4 * sizeof(double))));
// The same, at any double's address, for loads and stores of whole vectors. (A memcpy of the
// accumulators may be merged into one copy loop of 16-byte moves, whose result a 32-byte load
// cannot take from the store buffer: it waits for the stores to reach the cache.)
template <class V> struct Unaligned;
template <> struct Unaligned<v2d> {
  typedef double type __attribute__((vector_size(2 * sizeof(double)), aligned(sizeof(double)), may_alias));
};
template <> struct Unaligned<v4d> {
  typedef double type __attribute__((vector_size(4 * sizeof(double)), aligned(sizeof(double)), may_alias));
};

/// out[0, n·NV) = Σ_{r < rows} x[r·xs] · M[r·ms + (0, n·NV)] for vectors V of n doubles, each lane
/// summed in r order.
template <class V, int NV>
CRFX_INLINE void matvec_block(const double* x, std::size_t xs, const double* M, std::size_t ms,
                              std::size_t rows, double* out) {
  using U = typename Unaligned<V>::type;
  constexpr std::size_t n = sizeof(V) / sizeof(double);
  V acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = V{};
  for (std::size_t r = 0; r < rows; ++r) {
    const double xr = x[r * xs];
    V w;
    for (std::size_t i = 0; i < n; ++i) w[i] = xr;
    const double* row = M + r * ms;
    for (int k = 0; k < NV; ++k) acc[k] += w * V(*reinterpret_cast<const U*>(row + n * k));
  }
  for (int k = 0; k < NV; ++k) *reinterpret_cast<U*>(out + n * k) = acc[k];
}

/// matvec_block<V, nv> for the last 0 < nv ≤ N vectors of a row.
template <class V, int N>
CRFX_INLINE void matvec_tail(std::size_t nv, const double* x, std::size_t xs, const double* M, std::size_t ms,
                             std::size_t rows, double* out) {
  if constexpr (N > 0) {
    if (nv == N) return matvec_block<V, N>(x, xs, M, ms, rows, out);
    matvec_tail<V, N - 1>(nv, x, xs, M, ms, rows, out);
  }
}

/// out[0, P) = Σ_{r < rows} x[r·xs] · M[r·ms + (0, P)] (P a multiple of kVec), NV vectors of
/// lanes at a time: as many as the registers hold besides the row being read.
template <class V, int NV>
CRFX_INLINE void matvec(const double* x, std::size_t xs, const double* M, std::size_t ms, std::size_t rows,
                        std::size_t P, double* out) {
  constexpr std::size_t n = sizeof(V) / sizeof(double);
  static_assert(kVec % n == 0, "rows are padded to whole vectors");
  std::size_t y0 = 0;
  for (; y0 + n * NV <= P; y0 += n * NV) matvec_block<V, NV>(x, xs, M + y0, ms, rows, out + y0);
  matvec_tail<V, NV - 1>((P - y0) / n, x, xs, M + y0, ms, rows, out + y0);
}

/// E = exp(M − max M) [L][L] into rows of stride P, and its transpose Et; zero pad columns.
/// Returns max M (0 when not finite).
double exp_padded(const double* M, std::size_t L, std::size_t P, double* E, double* Et) {
  double m = *std::max_element(M, M + L * L);
  if (!std::isfinite(m)) m = 0;
  for (std::size_t i = 0; i < L; ++i) {
    for (std::size_t j = 0; j < L; ++j) Et[j * P + i] = E[i * P + j] = std::exp(M[i * L + j] - m);
    std::fill(E + i * P + L, E + i * P + P, 0.0);
    std::fill(Et + i * P + L, Et + i * P + P, 0.0);
  }
  return m;
}

/// Transition factors at position t: E = exp(τ_t − max τ_t) [L][P], its transpose, the shift.
struct TransFactor {
  const double* E;
  const double* Et;
  double shift;
  bool base;  // the position-independent matrix
};

class Scaled {
 public:
  Scaled(const ChainScores& x, ChainScratch& sc) : x_(x), sc_(sc), T_(x.T), L_(x.L), P_(chain_stride(x.L)) {
    const std::size_t LP = L_ * P_;
    sc_.S.resize(T_ * P_);
    sc_.a.resize(T_ * P_);
    if (sc_.E.size() < 4 * LP) sc_.E.resize(4 * LP);  // [base E | base Eᵀ | position E | position Eᵀ]
    double* E = sc_.E.data();
    if (x_.exp_trans_padded) {
      base_ = {x_.exp_trans_padded, x_.exp_trans_padded + LP, x_.trans_max, true};
    } else if (x_.exp_trans && x_.exp_trans_t) {
      for (std::size_t i = 0; i < L_; ++i) {
        std::copy(x_.exp_trans + i * L_, x_.exp_trans + (i + 1) * L_, E + i * P_);
        std::copy(x_.exp_trans_t + i * L_, x_.exp_trans_t + (i + 1) * L_, E + LP + i * P_);
        std::fill(E + i * P_ + L_, E + (i + 1) * P_, 0.0);
        std::fill(E + LP + i * P_ + L_, E + LP + (i + 1) * P_, 0.0);
      }
      base_ = {E, E + LP, x_.trans_max, true};
    } else {
      const double m = exp_padded(x_.trans, L_, P_, E, E + LP);
      base_ = {E, E + LP, m, true};
    }
  }

  TransFactor factor(std::size_t t) {
    if (x_.edge && x_.edge[t]) {
      const std::size_t LP = L_ * P_;
      double* buf = sc_.E.data() + 2 * LP;
      const double m = exp_padded(x_.edge[t], L_, P_, buf, buf + LP);
      return {buf, buf + LP, m, false};
    }
    return base_;
  }

  std::size_t length() const { return T_; }
  double log_z() const { return log_z_; }

  /// Forward pass: forward_step(t) for t = 0 … T−1 (log Z accumulates in log_z()); false when a
  /// normaliser underflows. V, NV: the matvecs' vectors, how many.
  template <class V, int NV>
  CRFX_INLINE bool forward_step(std::size_t t) {
    if (t == 0) log_z_ = 0;
    const double* s = x_.state + t * L_;
    double* St = sc_.S.data() + t * P_;
    double ms = *std::max_element(s, s + L_);  // S_t = exp(s_t − max s_t)
    if (!std::isfinite(ms)) ms = 0;
    for (std::size_t y = 0; y < L_; ++y) St[y] = std::exp(s[y] - ms);
    std::fill(St + L_, St + P_, 0.0);
    double* at = sc_.a.data() + t * P_;
    double shift = 0;
    if (t == 0) {
      std::copy(St, St + P_, at);
    } else {
      TransFactor f = factor(t);
      shift = f.shift;
      matvec<V, NV>(at - P_, 1, f.E, P_, L_, P_, at);  // u = Σ_y' α_{t−1}(y') · E[y'][·]
      for (std::size_t y = 0; y < P_; ++y) at[y] *= St[y];
    }
    double n = 0;
    for (std::size_t y = 0; y < L_; ++y) n += at[y];
    if (!(n > kTinySum) || !std::isfinite(n)) return false;
    const double inv = 1.0 / n;
    for (std::size_t y = 0; y < P_; ++y) at[y] *= inv;
    log_z_ += ms + shift + std::log(n);
    return true;
  }

  template <class V, int NV>
  CRFX_INLINE bool forward() {
    for (std::size_t t = 0; t < T_; ++t)
      if (!forward_step<V, NV>(t)) return false;
    return true;
  }

  /// Backward pass and marginals (after forward()): backward_begin, backward_step(t) for
  /// t = T−2 … 0, backward_end; false when a normaliser underflows.
  ///   pair_at requested: p_t(y', y) written per position (and added to pair_sum);
  ///   pair_sum only: positions using the shared matrix keep their rows α_t/q_t and v_t, and
  ///     pair_sum += E ∘ O once at the end, O(y', ·) = Σ_t (α_t(y')/q_t) · v_t over them (t
  ///     descending, as the backward pass meets them): one matvec per label, not L² updates in
  ///     memory per position.
  CRFX_INLINE bool backward_begin(const ChainOutputs& out) {
    const std::size_t P = P_;
    sc_.b.resize(T_ * P);
    sc_.v.resize(P);
    double* b = sc_.b.data();
    outer_ = out.pair_sum && !out.pair_at;
    recorded_ = 0;
    if (outer_ && sc_.outer.size() < 2 * T_ * P) sc_.outer.resize(2 * T_ * P);  // [positions][2][P]: α_t/q_t, v_t
    std::fill(b + (T_ - 1) * P, b + (T_ - 1) * P + L_, 1.0);
    std::fill(b + (T_ - 1) * P + L_, b + T_ * P, 0.0);
    return node(T_ - 1, out) > kTinySum;
  }

  template <class V, int NV>
  CRFX_INLINE bool backward_step(std::size_t t, const ChainOutputs& out) {
    const std::size_t LL = L_ * L_, P = P_;
    double* v = sc_.v.data();
    TransFactor f = factor(t + 1);
    const double* St1 = sc_.S.data() + (t + 1) * P;
    const double* bt1 = sc_.b.data() + (t + 1) * P;
    double* bt = sc_.b.data() + t * P;
    for (std::size_t y = 0; y < P; ++y) v[y] = St1[y] * bt1[y];
    matvec<V, NV>(v, 1, f.Et, P, L_, P, bt);  // β_t = Σ_y v(y) · Eᵀ[y][·]
    const double* at = sc_.a.data() + t * P;
    double m = 0, q = 0;  // q = Σ_{y',y} α_t(y') E(y',y) v(y), the pairwise normaliser
    for (std::size_t yp = 0; yp < L_; ++yp) {
      m += bt[yp];
      q += at[yp] * bt[yp];
    }
    if (!(m > kTinySum) || !std::isfinite(m) || !(q > kTinySum) || !std::isfinite(q)) return false;
    // Pairwise marginals at t+1: α_t(y') E(y',y) v(y) / q (each factor ≤ 1: no overflow).
    const double inv = 1.0 / q;
    if (outer_ && f.base) {
      double* w = sc_.outer.data() + recorded_ * 2 * P;
      for (std::size_t yp = 0; yp < P; ++yp) w[yp] = at[yp] * inv;
      std::copy(v, v + P, w + P);
      ++recorded_;
    } else if (out.pair_sum || out.pair_at) {
      double* dst;
      if (out.pair_at) {
        dst = out.pair_at + (t + 1) * LL;
      } else {
        sc_.pair_pos.resize(LL);
        dst = sc_.pair_pos.data();
      }
      for (std::size_t yp = 0; yp < L_; ++yp) {
        const double w = at[yp] * inv;
        const double* row = f.E + yp * P;
        double* d = dst + yp * L_;
        for (std::size_t y = 0; y < L_; ++y) d[y] = w * row[y] * v[y];
      }
      if (out.pair_sum)
        for (std::size_t j = 0; j < LL; ++j) out.pair_sum[j] += dst[j];
    }
    const double inv_m = 1.0 / m;
    for (std::size_t y = 0; y < P; ++y) bt[y] *= inv_m;
    return node(t, out) > kTinySum;
  }

  template <class V, int NV>
  CRFX_INLINE void backward_end(const ChainOutputs& out) {
    if (!outer_) return;
    const std::size_t P = P_;
    const double* rec = sc_.outer.data();
    double* o = sc_.v.data();  // row y' of O
    for (std::size_t yp = 0; yp < L_; ++yp) {
      matvec<V, NV>(rec + yp, 2 * P, rec + P, 2 * P, recorded_, P, o);
      const double* E = base_.E + yp * P;
      double* sum = out.pair_sum + yp * L_;
      for (std::size_t y = 0; y < L_; ++y) sum[y] += E[y] * o[y];
    }
  }

  template <class V, int NV>
  CRFX_INLINE bool backward(const ChainOutputs& out) {
    if (!backward_begin(out)) return false;
    for (std::size_t t = T_ - 1; t-- > 0;)
      if (!backward_step<V, NV>(t, out)) return false;
    backward_end<V, NV>(out);
    return true;
  }

 private:
  /// Node marginals at t; returns z_t.
  CRFX_INLINE double node(std::size_t t, const ChainOutputs& out) {
    const double* at = sc_.a.data() + t * P_;
    const double* bt = sc_.b.data() + t * P_;
    double z = 0;
    for (std::size_t y = 0; y < L_; ++y) z += at[y] * bt[y];
    if (out.node && z > kTinySum) {
      const double inv = 1.0 / z;
      double* p = out.node + t * L_;
      for (std::size_t y = 0; y < L_; ++y) p[y] = at[y] * bt[y] * inv;
    }
    return std::isfinite(z) ? z : 0.0;
  }

  const ChainScores& x_;
  ChainScratch& sc_;
  std::size_t T_, L_, P_;
  TransFactor base_{};
  double log_z_ = 0;
  bool outer_ = false;        // backward: pair_sum only, through O
  std::size_t recorded_ = 0;  // backward: positions whose rows O takes
};

/// Viterbi's recursion for t = 1 … T − 1: d_t(y) = max_y' (d_{t−1}(y') + M_t(y', y)) + s_t(y) and
/// back_t(y) = the first y' (the smallest id) that attains the maximum. The rows y' run in order
/// with the labels y as vector lanes: per lane the same sums and the same strict comparisons as a
/// loop over y' per label, without its branch (`scratch`: 2L doubles, the running maxima and
/// their rows).
CRFX_INLINE void viterbi_recursion(const ChainScores& x, double* __restrict d, std::uint32_t* __restrict back,
                                   double* __restrict scratch) {
  const std::size_t T = x.T, L = x.L;
  double* __restrict best = scratch;
  double* __restrict arg = scratch + L;  // the row as a double: exact, and as wide as the maxima
  for (std::size_t t = 1; t < T; ++t) {
    const double* __restrict M = x.trans_at(t);
    const double* __restrict dp = d + (t - 1) * L;
    for (std::size_t yc = 0; yc < L; ++yc) {
      best[yc] = kNegInf;
      arg[yc] = 0;
    }
    for (std::size_t yp = 0; yp < L; ++yp) {
      const double a = dp[yp], row_id = double(yp);
      const double* __restrict row = M + yp * L;
      for (std::size_t yc = 0; yc < L; ++yc) {
        const double v = a + row[yc];
        const bool higher = v > best[yc];  // strict: ties keep the smallest label id
        best[yc] = higher ? v : best[yc];
        arg[yc] = higher ? row_id : arg[yc];
      }
    }
    const double* s = x.state + t * L;
    for (std::size_t yc = 0; yc < L; ++yc) {
      d[t * L + yc] = best[yc] + s[yc];
      back[t * L + yc] = static_cast<std::uint32_t>(arg[yc]);
    }
  }
}

// The passes and Viterbi's recursion, compiled for each instruction set (see above), with as many
// vectors of lanes per matvec as the 16 registers hold besides the row's: 8 of AVX2's 4 doubles,
// 12 of SSE2's (and NEON's) 2.
#define CRFX_CHAIN_PASSES(ISA, ATTR, V, NV)                                                          \
  ATTR bool forward_##ISA(Scaled& s) { return s.forward<V, NV>(); }                                 \
  ATTR bool backward_##ISA(Scaled& s, const ChainOutputs& out) { return s.backward<V, NV>(out); }   \
  ATTR void viterbi_##ISA(const ChainScores& x, double* d, std::uint32_t* back, double* scratch) {  \
    viterbi_recursion(x, d, back, scratch);                                                          \
  }
#if defined(__x86_64__) && defined(__GNUC__)
#define CRFX_CHAIN_AVX2 1
CRFX_CHAIN_PASSES(avx2, __attribute__((target("avx2"))), v4d, 8)
#endif
CRFX_CHAIN_PASSES(baseline, , v2d, 12)

bool scaled_forward(Scaled& s) {
#ifdef CRFX_CHAIN_AVX2
  if (cpu_simd_avx2()) return forward_avx2(s);
#endif
  return forward_baseline(s);
}

bool scaled_backward(Scaled& s, const ChainOutputs& out) {
#ifdef CRFX_CHAIN_AVX2
  if (cpu_simd_avx2()) return backward_avx2(s, out);
#endif
  return backward_baseline(s, out);
}

void viterbi_steps(const ChainScores& x, double* d, std::uint32_t* back, double* scratch) {
#ifdef CRFX_CHAIN_AVX2
  if (cpu_simd_avx2()) return viterbi_avx2(x, d, back, scratch);
#endif
  viterbi_baseline(x, d, back, scratch);
}

/// Exact log-space recursions. Returns log Z; fills outputs when asked.
double log_space(const ChainScores& x, const ChainOutputs* out, ChainScratch& sc) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  sc.a.resize(T * L);
  sc.u.resize(L);
  double* la = sc.a.data();  // [T][L] log α
  double* tmp = sc.u.data();
  std::copy(x.state, x.state + L, la);
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = x.trans_at(t);
    for (std::size_t y = 0; y < L; ++y) {
      for (std::size_t yp = 0; yp < L; ++yp) tmp[yp] = la[(t - 1) * L + yp] + M[yp * L + y];
      la[t * L + y] = x.state[t * L + y] + log_sum_exp(tmp, L);
    }
  }
  const double log_z = log_sum_exp(la + (T - 1) * L, L);
  if (!out || (!out->node && !out->pair_sum && !out->pair_at)) return log_z;

  sc.b.resize(T * L);
  double* lb = sc.b.data();  // [T][L] log β
  std::fill(lb + (T - 1) * L, lb + T * L, 0.0);
  for (std::size_t t = T - 1; t-- > 0;) {
    const double* M = x.trans_at(t + 1);
    for (std::size_t yp = 0; yp < L; ++yp) {
      for (std::size_t y = 0; y < L; ++y)
        tmp[y] = M[yp * L + y] + x.state[(t + 1) * L + y] + lb[(t + 1) * L + y];
      lb[t * L + yp] = log_sum_exp(tmp, L);
    }
  }
  for (std::size_t t = 0; t < T; ++t) {
    if (out->node)
      for (std::size_t y = 0; y < L; ++y)
        out->node[t * L + y] = std::exp(la[t * L + y] + lb[t * L + y] - log_z);
    if (t == 0 || (!out->pair_sum && !out->pair_at)) continue;
    const double* M = x.trans_at(t);
    for (std::size_t yp = 0; yp < L; ++yp)
      for (std::size_t y = 0; y < L; ++y) {
        const double p = std::exp(la[(t - 1) * L + yp] + M[yp * L + y] + x.state[t * L + y] +
                                  lb[t * L + y] - log_z);
        if (out->pair_at) out->pair_at[t * LL + yp * L + y] = p;
        if (out->pair_sum) out->pair_sum[yp * L + y] += p;
      }
  }
  return log_z;
}

/// Independent positions (ChainScores::independent): per position t the softmax of s_t, shifted
/// by its maximum (so nothing underflows as a whole: the largest term is 1). Returns log Z, or NaN
/// when a score is not finite (the caller then takes the general path). `out` may be null (log Z).
double independent(const ChainScores& x, const ChainOutputs* out, ChainScratch& sc) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const bool pairs = out && (out->pair_sum || out->pair_at);
  double* p = nullptr;  // [T][L] node marginals, where needed
  if (out && out->node) {
    p = out->node;
  } else if (pairs) {
    sc.a.resize(T * L);
    p = sc.a.data();
  }
  sc.u.resize(L);
  double log_z = 0;
  for (std::size_t t = 0; t < T; ++t) {
    const double* s = x.state + t * L;
    const double m = *std::max_element(s, s + L);
    if (!std::isfinite(m)) return std::numeric_limits<double>::quiet_NaN();
    double* e = p ? p + t * L : sc.u.data();
    double z = 0;
    for (std::size_t y = 0; y < L; ++y) z += e[y] = std::exp(s[y] - m);
    log_z += m + std::log(z);
    if (!p) continue;
    const double inv = 1.0 / z;
    for (std::size_t y = 0; y < L; ++y) e[y] *= inv;
  }
  if (pairs)
    for (std::size_t t = 1; t < T; ++t) {  // p(y_{t−1} = y', y_t = y) = p_{t−1}(y') p_t(y)
      const double* a = p + (t - 1) * L;
      const double* b = p + t * L;
      for (std::size_t yp = 0; yp < L; ++yp)
        for (std::size_t y = 0; y < L; ++y) {
          const double v = a[yp] * b[y];
          if (out->pair_at) out->pair_at[t * LL + yp * L + y] = v;
          if (out->pair_sum) out->pair_sum[yp * L + y] += v;
        }
    }
  return log_z;
}

}  // namespace

double forward_backward(const ChainScores& x, const ChainOutputs& out, ChainScratch& scratch,
                        bool log_space_only) {
  if (x.T == 0) return 0.0;
  if (x.independent && !log_space_only) {
    const double log_z = independent(x, &out, scratch);
    if (!std::isnan(log_z)) return log_z;
  }
  if (!log_space_only) {
    Scaled scaled(x, scratch);
    // pair_sum is accumulated (+=): collect into scratch and add only once the fast path has
    // succeeded, so a fallback to log space cannot count a position twice.
    if (scaled_forward(scaled)) {
      const std::size_t LL = x.L * x.L;
      ChainOutputs local = out;
      if (out.pair_sum) {
        scratch.pair.assign(LL, 0.0);
        local.pair_sum = scratch.pair.data();
      }
      if (scaled_backward(scaled, local)) {
        if (out.pair_sum)
          for (std::size_t i = 0; i < LL; ++i) out.pair_sum[i] += scratch.pair[i];
        return scaled.log_z();
      }
    }
    ++scratch.log_space_fallbacks;
  }
  return log_space(x, &out, scratch);
}

double log_partition(const ChainScores& x, ChainScratch& scratch, bool log_space_only) {
  if (x.T == 0) return 0.0;
  if (x.independent && !log_space_only) {
    const double log_z = independent(x, nullptr, scratch);
    if (!std::isnan(log_z)) return log_z;
  }
  if (!log_space_only) {
    Scaled scaled(x, scratch);
    if (scaled_forward(scaled)) return scaled.log_z();
    ++scratch.log_space_fallbacks;
  }
  return log_space(x, nullptr, scratch);
}

double path_score(const ChainScores& x, const std::uint32_t* y) {
  double score = 0;
  for (std::size_t t = 0; t < x.T; ++t) {
    score += x.state[t * x.L + y[t]];
    if (t > 0) score += x.trans_at(t)[y[t - 1] * x.L + y[t]];
  }
  return score;
}

double viterbi(const ChainScores& x, std::uint32_t* y, ChainScratch& sc) {
  const std::size_t T = x.T, L = x.L;
  if (T == 0) return 0.0;
  if (x.independent) {  // the arg-max per position (ties → the smallest label id); the same sum
    double score = 0;
    for (std::size_t t = 0; t < T; ++t) {
      const double* s = x.state + t * L;
      std::uint32_t arg = 0;
      for (std::size_t yc = 1; yc < L; ++yc)
        if (s[yc] > s[arg]) arg = static_cast<std::uint32_t>(yc);
      y[t] = arg;
      score += s[arg];
    }
    return score;
  }
  sc.a.resize(T * L);
  sc.back.resize(T * L);
  sc.u.resize(2 * L);
  double* d = sc.a.data();  // [T][L] best score of a path ending in (t, y)
  std::uint32_t* back = sc.back.data();
  std::copy(x.state, x.state + L, d);
  viterbi_steps(x, d, back, sc.u.data());
  double best = kNegInf;
  std::uint32_t arg = 0;
  for (std::size_t yc = 0; yc < L; ++yc)
    if (d[(T - 1) * L + yc] > best) {
      best = d[(T - 1) * L + yc];
      arg = static_cast<std::uint32_t>(yc);
    }
  y[T - 1] = arg;
  for (std::size_t t = T - 1; t > 0; --t) y[t - 1] = back[t * L + y[t]];
  return best;
}

namespace {
/// The n-best order: higher score first, ties to the smaller index.
bool nbest_before(const std::pair<double, std::uint32_t>& a, const std::pair<double, std::uint32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

/// Merges L lists of n entries into the first n of the n-best order, in `best` (returns how
/// many). List yp holds the candidates value(yp·n + k), k = 0 … n − 1, already in that order
/// (scores not increasing, −∞ at the end): a (t−1) list plus one transition score keeps its order,
/// since rounding is monotonic and equal sums fall back to k. So the lists are merged into a sorted
/// buffer, and a list whose entry does not beat the buffer's last (when full) is left there. The
/// result is the sequence a full sort of all L·n candidates would give, whichever way it is
/// merged: for n ≤ kInsertNbest entry by entry (insertion, cheapest for short lists), above that
/// a list at a time — a forward count of how many of each run make the first n, then a backward
/// in-place merge — which stays O(L·n) where insertion would be O(L·n²). The CUDA kernel uses the
/// second way for every n.
constexpr std::size_t kInsertNbest = 16;

template <class Value>
std::size_t merge_best(std::size_t L, std::size_t n, Value value, std::pair<double, std::uint32_t>* best) {
  std::size_t m = 0;
  if (n <= kInsertNbest) {
    for (std::size_t yp = 0; yp < L; ++yp) {
      for (std::size_t k = 0; k < n; ++k) {
        const std::uint32_t j = std::uint32_t(yp * n + k);
        const std::pair<double, std::uint32_t> c(value(j), j);
        if (c.first == kNegInf) break;                       // the list's missing entries
        if (m == n && !nbest_before(c, best[n - 1])) break;  // nor will the rest of the list
        std::size_t i = m < n ? m++ : n - 1;                 // the buffer's last place
        for (; i > 0 && nbest_before(c, best[i - 1]); --i) best[i] = best[i - 1];
        best[i] = c;
      }
    }
    return m;
  }
  for (std::size_t yp = 0; yp < L; ++yp) {
    const std::uint32_t base = std::uint32_t(yp * n);
    auto list = [&](std::size_t k) { return std::pair<double, std::uint32_t>(value(base + k), base + std::uint32_t(k)); };
    const auto head = list(0);
    if (head.first == kNegInf || (m == n && !nbest_before(head, best[n - 1]))) continue;
    std::size_t a = 0, b = 0;  // how many of the buffer and of the list are among the first n
    while (a + b < n) {
      if (b < n) {
        const auto c = list(b);
        if (c.first != kNegInf && (a == m || nbest_before(c, best[a]))) {
          ++b;
          continue;
        }
      }
      if (a == m) break;
      ++a;
    }
    const std::size_t total = a + b;
    for (std::size_t out = total; b > 0;) {  // backward, in place: out > a − 1 throughout
      const auto c = list(b - 1);
      if (a > 0 && nbest_before(c, best[a - 1])) {
        best[--out] = best[--a];
      } else {
        best[--out] = c;
        --b;
      }
    }
    m = total;
  }
  return m;
}
}  // namespace

std::size_t viterbi_nbest(const ChainScores& x, std::size_t n, std::uint32_t* y, double* score,
                          ChainScratch& sc) {
  const std::size_t T = x.T, L = x.L;
  std::fill(score, score + n, kNegInf);
  std::fill(y, y + n * T, 0u);
  if (T == 0 || n == 0) return 0;
  const std::size_t LK = L * n;
  sc.a.assign(T * LK, kNegInf);  // [T][L][n] score of the k-th best path ending in (t, y)
  sc.back.assign(T * LK, 0);     // [T][L][n] its predecessor yp·n + k
  double* d = sc.a.data();
  std::uint32_t* back = sc.back.data();
  for (std::size_t yc = 0; yc < L; ++yc) d[yc * n] = x.state[yc];
  std::vector<std::pair<double, std::uint32_t>> best(n);
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = x.trans_at(t);
    const double* dp = d + (t - 1) * LK;
    for (std::size_t yc = 0; yc < L; ++yc) {
      const std::size_t m =
          merge_best(L, n, [&](std::uint32_t j) { return dp[j] + M[(j / n) * L + yc]; }, best.data());
      for (std::size_t r = 0; r < m; ++r) {
        d[t * LK + yc * n + r] = best[r].first + x.state[t * L + yc];
        back[t * LK + yc * n + r] = best[r].second;
      }
    }
  }
  const double* dl = d + (T - 1) * LK;
  const std::size_t m = merge_best(L, n, [&](std::uint32_t j) { return dl[j]; }, best.data());
  for (std::size_t r = 0; r < m; ++r) {
    score[r] = best[r].first;
    std::uint32_t* path = y + r * T;
    std::uint32_t j = best[r].second;  // label · n + rank at position t
    for (std::size_t t = T; t-- > 0;) {
      path[t] = std::uint32_t(j / n);
      if (t > 0) j = back[t * LK + j];
    }
  }
  return m;
}

}  // namespace crfx
