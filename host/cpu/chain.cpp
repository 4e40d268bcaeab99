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
// exact marginals. When a normaliser n_t, m_t, z_t or q_t drops below kTiny (weights so extreme that
// exp-space products underflow), the whole sentence is recomputed in log space, which is exact
// but costs L² exps per position. The mass lost to underflow on the fast path is below
// L²·1e-308 / kTiny relative, i.e. nothing.
#include "cpu/chain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace crfx {
namespace {

constexpr double kTiny = 1e-250;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// E = exp(M − max M) over n entries; returns max M.
double exp_shifted(const double* M, std::size_t n, double* E) {
  double m = *std::max_element(M, M + n);
  if (!std::isfinite(m)) m = 0;
  for (std::size_t i = 0; i < n; ++i) E[i] = std::exp(M[i] - m);
  return m;
}

double log_sum_exp(const double* v, std::size_t n) {
  double m = *std::max_element(v, v + n);
  if (m == kNegInf) return kNegInf;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
  return m + std::log(s);
}

/// Transition factors at position t: E = exp(τ_t − max τ_t) [L][L], its transpose, the shift.
struct TransFactor {
  const double* E;
  const double* Et;
  double shift;
  bool base;  // the position-independent matrix
};

void transpose(const double* M, std::size_t L, double* Mt) {
  for (std::size_t i = 0; i < L; ++i)
    for (std::size_t j = 0; j < L; ++j) Mt[j * L + i] = M[i * L + j];
}

// Inner loops are written as axpy / outer-product updates over contiguous rows (no reductions
// across y inside a loop), which compilers vectorise without -ffast-math.
class Scaled {
 public:
  Scaled(const ChainScores& x, ChainScratch& sc) : x_(x), sc_(sc), T_(x.T), L_(x.L) {
    const std::size_t LL = L_ * L_;
    sc_.S.resize(T_ * L_);
    sc_.a.resize(T_ * L_);
    sc_.u.resize(L_);
    sc_.E.resize(4 * LL);  // [base E | base Eᵀ | position E | position Eᵀ]
    double* E = sc_.E.data();
    if (x_.exp_trans && x_.exp_trans_t) {
      base_ = {x_.exp_trans, x_.exp_trans_t, x_.trans_max, true};
    } else {
      const double m = exp_shifted(x_.trans, LL, E);
      transpose(E, L_, E + LL);
      base_ = {E, E + LL, m, true};
    }
  }

  TransFactor factor(std::size_t t) {
    if (x_.edge && x_.edge[t]) {
      const std::size_t LL = L_ * L_;
      double* buf = sc_.E.data() + 2 * LL;
      const double m = exp_shifted(x_.edge[t], LL, buf);
      transpose(buf, L_, buf + LL);
      return {buf, buf + LL, m, false};
    }
    return base_;
  }

  /// Forward pass; false when a normaliser underflows.
  bool forward(double& log_z) {
    double* S = sc_.S.data();
    double* a = sc_.a.data();
    log_z = 0;
    for (std::size_t t = 0; t < T_; ++t) {
      const double* s = x_.state + t * L_;
      double ms = exp_shifted(s, L_, S + t * L_);
      double* at = a + t * L_;
      const double* St = S + t * L_;
      double shift = 0;
      if (t == 0) {
        std::copy(St, St + L_, at);
      } else {
        TransFactor f = factor(t);
        shift = f.shift;
        double* u = sc_.u.data();
        std::fill(u, u + L_, 0.0);
        const double* ap = at - L_;
        for (std::size_t yp = 0; yp < L_; ++yp) {  // u += α_{t−1}(y') · E[y'][·]
          const double w = ap[yp];
          const double* row = f.E + yp * L_;
          for (std::size_t y = 0; y < L_; ++y) u[y] += w * row[y];
        }
        for (std::size_t y = 0; y < L_; ++y) at[y] = u[y] * St[y];
      }
      double n = 0;
      for (std::size_t y = 0; y < L_; ++y) n += at[y];
      if (!(n > kTiny) || !std::isfinite(n)) return false;
      const double inv = 1.0 / n;
      for (std::size_t y = 0; y < L_; ++y) at[y] *= inv;
      log_z += ms + shift + std::log(n);
    }
    return true;
  }

  /// Backward pass and marginals (after forward()); false when a normaliser underflows.
  ///   pair_at requested: p_t(y', y) written per position (and added to pair_sum);
  ///   pair_sum only: positions using the shared matrix accumulate the outer products
  ///     O += α_t ⊗ v / q, and pair_sum += E ∘ O once at the end (L² FMAs per position).
  bool backward(const ChainOutputs& out) {
    const std::size_t LL = L_ * L_;
    sc_.b.resize(T_ * L_);
    sc_.v.resize(L_);
    double* b = sc_.b.data();
    const double* a = sc_.a.data();
    const double* S = sc_.S.data();
    double* v = sc_.v.data();
    const bool outer = out.pair_sum && !out.pair_at;
    if (outer) sc_.outer.assign(LL, 0.0);
    std::fill(b + (T_ - 1) * L_, b + T_ * L_, 1.0);
    if (!(node(T_ - 1, out) > kTiny)) return false;
    for (std::size_t t = T_ - 1; t-- > 0;) {
      TransFactor f = factor(t + 1);
      const double* St1 = S + (t + 1) * L_;
      const double* bt1 = b + (t + 1) * L_;
      double* bt = b + t * L_;
      for (std::size_t y = 0; y < L_; ++y) v[y] = St1[y] * bt1[y];
      std::fill(bt, bt + L_, 0.0);
      for (std::size_t y = 0; y < L_; ++y) {  // β_t += v(y) · Eᵀ[y][·]
        const double w = v[y];
        const double* col = f.Et + y * L_;
        for (std::size_t yp = 0; yp < L_; ++yp) bt[yp] += w * col[yp];
      }
      const double* at = a + t * L_;
      double m = 0, q = 0;  // q = Σ_{y',y} α_t(y') E(y',y) v(y), the pairwise normaliser
      for (std::size_t yp = 0; yp < L_; ++yp) {
        m += bt[yp];
        q += at[yp] * bt[yp];
      }
      if (!(m > kTiny) || !std::isfinite(m) || !(q > kTiny) || !std::isfinite(q)) return false;
      // Pairwise marginals at t+1: α_t(y') E(y',y) v(y) / q (each factor ≤ 1: no overflow).
      const double inv = 1.0 / q;
      if (outer && f.base) {
        for (std::size_t yp = 0; yp < L_; ++yp) {
          const double w = at[yp] * inv;
          double* o = sc_.outer.data() + yp * L_;
          for (std::size_t y = 0; y < L_; ++y) o[y] += w * v[y];
        }
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
          const double* row = f.E + yp * L_;
          double* d = dst + yp * L_;
          for (std::size_t y = 0; y < L_; ++y) d[y] = w * row[y] * v[y];
        }
        if (out.pair_sum)
          for (std::size_t j = 0; j < LL; ++j) out.pair_sum[j] += dst[j];
      }
      const double inv_m = 1.0 / m;
      for (std::size_t y = 0; y < L_; ++y) bt[y] *= inv_m;
      if (!(node(t, out) > kTiny)) return false;
    }
    if (outer)
      for (std::size_t j = 0; j < LL; ++j) out.pair_sum[j] += base_.E[j] * sc_.outer[j];
    return true;
  }

 private:
  /// Node marginals at t; returns z_t.
  double node(std::size_t t, const ChainOutputs& out) {
    const double* at = sc_.a.data() + t * L_;
    const double* bt = sc_.b.data() + t * L_;
    double z = 0;
    for (std::size_t y = 0; y < L_; ++y) z += at[y] * bt[y];
    if (out.node && z > kTiny) {
      const double inv = 1.0 / z;
      double* p = out.node + t * L_;
      for (std::size_t y = 0; y < L_; ++y) p[y] = at[y] * bt[y] * inv;
    }
    return std::isfinite(z) ? z : 0.0;
  }

  const ChainScores& x_;
  ChainScratch& sc_;
  std::size_t T_, L_;
  TransFactor base_{};
};

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
    double log_z;
    // pair_sum is accumulated (+=): collect into scratch and add only once the fast path has
    // succeeded, so a fallback to log space cannot count a position twice.
    if (scaled.forward(log_z)) {
      const std::size_t LL = x.L * x.L;
      ChainOutputs local = out;
      if (out.pair_sum) {
        scratch.pair.assign(LL, 0.0);
        local.pair_sum = scratch.pair.data();
      }
      if (scaled.backward(local)) {
        if (out.pair_sum)
          for (std::size_t i = 0; i < LL; ++i) out.pair_sum[i] += scratch.pair[i];
        return log_z;
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
    double log_z;
    if (scaled.forward(log_z)) return log_z;
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
  double* d = sc.a.data();  // [T][L] best score of a path ending in (t, y)
  std::uint32_t* back = sc.back.data();
  std::copy(x.state, x.state + L, d);
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = x.trans_at(t);
    for (std::size_t yc = 0; yc < L; ++yc) {
      double best = kNegInf;
      std::uint32_t arg = 0;
      for (std::size_t yp = 0; yp < L; ++yp) {
        const double v = d[(t - 1) * L + yp] + M[yp * L + yc];
        if (v > best) {  // strict: ties keep the smallest label id
          best = v;
          arg = static_cast<std::uint32_t>(yp);
        }
      }
      d[t * L + yc] = best + x.state[t * L + yc];
      back[t * L + yc] = arg;
    }
  }
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
