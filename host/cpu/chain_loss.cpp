// crfx — the label-sequence losses of chain_loss.hpp and their gradients.
//
// Notation: F(y) the path score, p(y) = exp(F(y))/Z, μ_t(y) the node marginals, P_t(y', y) the
// pairwise marginals (both from chain.cpp's forward_backward), f any score's indicator (1[y_u = y]
// for s_u(y), 1[y_{u−1} = y', y_u = y] for τ_u(y', y)), so ∂F/∂score = f and ∂log Z/∂score = E[f].
//
// Sequence losses. ∂(log Z − F(y*)) = E[f] − f(y*) = μ − gold indicators; seq-exp = exp of that
// loss, so its gradient is the same times the loss. One forward_backward.
//
// Pointwise losses. ∂μ_t(y*_t) = μ_t(y*_t)·(E[f | y_t = y*_t] − E[f]), hence for
// point-log (w_t = 1) and point-exp (w_t = 1/μ_t(y*_t))
//   ∂loss = Σ_t w_t·(E[f] − E[f | y_t = y*_t]) = W·E[f] − Σ_t w_t·E[f | y_t = y*_t],  W = Σ_t w_t.
// (This is Cov(f, g) for g(y) = Σ_t c_t·1[y_t = y*_t], c_t = w_t/μ_t(y*_t), the hint's form,
// written with conditional probabilities so that nothing exceeds W.) The posterior is a Markov
// chain in both directions, with kernels
//   K_u(y', y) = p(y_u = y | y_{u−1} = y') = P_u(y', y)/μ_{u−1}(y'),
//   R_u(y, y') = p(y_{u−1} = y' | y_u = y) = P_u(y', y)/μ_u(y),
// so the weighted conditional marginals split at u into the positions before and from u:
//   A_u(y) = Σ_{t<u} w_t p(y_u = y | y_t = y*_t) = Σ_y' (A_{u−1}(y') + w_{u−1}·1[y' = y*_{u−1}]) K_u(y', y)
//   B_u(y) = Σ_{t≥u} w_t p(y_u = y | y_t = y*_t) = w_u·1[y = y*_u] + Σ_y'' B_{u+1}(y'') R_{u+1}(y'', y)
// and, for a pair, p(y_{u−1}, y_u | y_t) is p(y_{u−1} | y_t)·K_u for t < u and p(y_u | y_t)·R_u for
// t ≥ u. With ρ_{u−1}(y') = (A_{u−1}(y') + w_{u−1}·1[y' = y*_{u−1}])/μ_{u−1}(y') and
// κ_u(y) = B_u(y)/μ_u(y) (both E[part of g | one label], bounded by Σ c_t):
//   ∂loss/∂s_u(y)      = W·μ_u(y) − A_u(y) − B_u(y)
//   ∂loss/∂τ_u(y', y)  = P_u(y', y)·(W − ρ_{u−1}(y') − κ_u(y))
// A forward sweep (A, ρ) and a backward sweep (B, κ and the pair gradients) over P: 2·L² per
// position besides forward_backward — O(T·L²), where one forward-backward per position (the
// paper's route, after Kakade et al. 2002) is O(T²·L²).
//
// Numerics. The sweeps use forward_backward's marginals, accurate relative to themselves down to
// ~1e-58 on its scaled path (α̂β̂ = μ·z_t with z_t ≥ 1e-250 stays normal) and to 1e-300 on its
// log-space path. A sentence whose gold marginal is below kGoldFloor = 1e-50, or whose weights
// c_t would exceed kMaxLossWeight, is recomputed on this file's exact log-space path: the same
// recursions on log α, log β, log A, log B (all of them sums of non-negative terms, so log space
// is exact), the gradient formed as differences exp(a) − exp(b) that never give NaN.
#include "cpu/chain_loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "crfx/errors.hpp"
#include "crfx/internal/host_device.hpp"

namespace crfx {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kExpSafe = 700;       // exp(a) is finite for a below this

double log_sum_exp(const double* v, std::size_t n) {
  const double m = *std::max_element(v, v + n);
  if (m == kNegInf) return kNegInf;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
  return m + std::log(s);
}

/// log(exp(a) + exp(b)).
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

/// exp(a) − exp(b), never NaN: ±inf only where the difference itself exceeds the double range.
double exp_diff(double a, double b) {
  const double m = std::max(a, b);
  if (m == kNegInf) return 0.0;
  if (m < kExpSafe) return std::exp(a) - std::exp(b);
  const double d = std::exp(a - m) - std::exp(b - m);
  if (d == 0) return 0.0;
  return std::copysign(std::exp(m + std::log(std::fabs(d))), d);
}

LossValue log_loss_value(double v) { return {v, v > 0 ? std::log(v) : kNegInf}; }

// ---- the sequence losses ---------------------------------------------------------------------

LossValue sequence_level(bool exp_loss, const ChainScores& x, const std::uint32_t* gold,
                         const LossGradient& out, LossScratch& sc, bool log_only) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const bool grad = out.node || out.pair_sum || out.pair_at;
  double log_z;
  if (!grad) {
    log_z = log_partition(x, sc.chain, log_only);
  } else {
    double* pair_sum = nullptr;
    if (out.pair_sum) {
      sc.pair.assign(LL, 0.0);
      pair_sum = sc.pair.data();
    }
    log_z = forward_backward(x, ChainOutputs{out.node, pair_sum, out.pair_at}, sc.chain, log_only);
    ++sc.chain_calls;
  }
  const double nll = log_z - path_score(x, gold);
  const LossValue v = exp_loss ? LossValue{std::exp(nll), nll} : log_loss_value(nll);
  if (!grad) return v;

  // Everything below is factor·(marginal − gold indicator); factor = 1 for seq-log at scale 1,
  // which leaves μ − 1 exactly as the backend's NLL gradient has it.
  const double lf = (exp_loss ? nll : 0.0) + out.log_scale;
  const double f = std::exp(lf);
  if (out.node)
    for (std::size_t t = 0; t < T; ++t) {
      double* d = out.node + t * L;
      d[gold[t]] -= 1.0;
      for (std::size_t y = 0; y < L; ++y) d[y] = exp_scaled(lf, f, d[y]);
    }
  if (out.pair_at) {
    std::fill(out.pair_at, out.pair_at + LL, 0.0);
    for (std::size_t t = 1; t < T; ++t) {
      double* d = out.pair_at + t * LL;
      d[gold[t - 1] * L + gold[t]] -= 1.0;
      for (std::size_t j = 0; j < LL; ++j) d[j] = exp_scaled(lf, f, d[j]);
    }
  }
  if (out.pair_sum) {
    for (std::size_t t = 1; t < T; ++t) sc.pair[gold[t - 1] * L + gold[t]] -= 1.0;
    for (std::size_t j = 0; j < LL; ++j) out.pair_sum[j] += exp_scaled(lf, f, sc.pair[j]);
  }
  return v;
}

// ---- the pointwise losses, exact log-space path -----------------------------------------------

/// log α, log β and log μ [T][L] (sc.la, sc.lb, sc.lmu) by the log-space recursions; returns log Z.
double log_space_marginals(const ChainScores& x, LossScratch& sc) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  sc.la.resize(T * L);
  sc.lb.resize(T * L);
  sc.lmu.resize(T * L);
  sc.tmp.resize(L);
  double* la = sc.la.data();
  double* lb = sc.lb.data();
  double* tmp = sc.tmp.data();
  const double* s = x.state;
  std::copy(s, s + L, la);
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = x.trans_at(t);
    for (std::size_t y = 0; y < L; ++y) {
      for (std::size_t yp = 0; yp < L; ++yp) tmp[yp] = la[(t - 1) * L + yp] + M[yp * L + y];
      la[t * L + y] = s[t * L + y] + log_sum_exp(tmp, L);
    }
    sc.steps += LL;
  }
  const double log_z = log_sum_exp(la + (T - 1) * L, L);
  std::fill(lb + (T - 1) * L, lb + T * L, 0.0);
  for (std::size_t t = T - 1; t-- > 0;) {
    const double* M = x.trans_at(t + 1);
    for (std::size_t yp = 0; yp < L; ++yp) {
      for (std::size_t y = 0; y < L; ++y) tmp[y] = M[yp * L + y] + s[(t + 1) * L + y] + lb[(t + 1) * L + y];
      lb[t * L + yp] = log_sum_exp(tmp, L);
    }
    sc.steps += LL;
  }
  for (std::size_t i = 0; i < T * L; ++i) sc.lmu[i] = la[i] + lb[i] - log_z;
  return log_z;
}

/// The forward sweep in log space: log A_u [T][L] (sc.fwd) and log ρ_{u−1} [T−1][L] (sc.rho), from
/// the marginals and the weights log w_t (sc.lw).
void log_space_forward_sweep(const ChainScores& x, const std::uint32_t* gold, double log_z, LossScratch& sc) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const double *la = sc.la.data(), *lb = sc.lb.data(), *lmu = sc.lmu.data(), *lw = sc.lw.data(), *s = x.state;
  double* tmp = sc.tmp.data();
  sc.fwd.resize(T * L);
  sc.rho.resize(T * L);
  double* lA = sc.fwd.data();
  double* lrho = sc.rho.data();
  std::fill(lA, lA + L, kNegInf);
  for (std::size_t u = 1; u < T; ++u) {
    const double* M = x.trans_at(u);
    double* r = lrho + (u - 1) * L;
    for (std::size_t yp = 0; yp < L; ++yp) {
      const double own = yp == gold[u - 1] ? lw[u - 1] : kNegInf;
      const double m = lmu[(u - 1) * L + yp];
      r[yp] = m == kNegInf ? kNegInf : log_add(lA[(u - 1) * L + yp], own) - m;
    }
    for (std::size_t y = 0; y < L; ++y) {
      for (std::size_t yp = 0; yp < L; ++yp) tmp[yp] = r[yp] + la[(u - 1) * L + yp] + M[yp * L + y];
      lA[u * L + y] = s[u * L + y] + lb[u * L + y] - log_z + log_sum_exp(tmp, L);
    }
    sc.steps += LL;
  }
}

/// The backward sweep in log space: log B_u, log κ_u, and the gradients into `out`. Each entry is
/// a difference of two terms of order W: formed relative to W (exp_diff(a − lW, b − lW), no
/// overflow), pair_sum's sums over positions too, and only then multiplied by W = exp(lW) — so a
/// W beyond the double range gives ±inf where the result is, never inf − inf.
void log_space_backward_sweep(const ChainScores& x, const std::uint32_t* gold, double log_z, double lW,
                              const LossGradient& out, LossScratch& sc) {
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const double *la = sc.la.data(), *lb = sc.lb.data(), *lmu = sc.lmu.data(), *lw = sc.lw.data(), *s = x.state;
  const double *lA = sc.fwd.data(), *lrho = sc.rho.data();
  const double eW = std::exp(lW);
  sc.bwd.resize(3 * L);
  double* lB = sc.bwd.data();
  double* lBn = lB + L;
  double* lk = lB + 2 * L;
  for (std::size_t y = 0; y < L; ++y) lB[y] = y == gold[T - 1] ? lw[T - 1] : kNegInf;
  if (out.pair_at) std::fill(out.pair_at, out.pair_at + LL, 0.0);
  double* psum = nullptr;
  if (out.pair_sum) sc.tmp.assign(L + LL, 0.0);
  double* tmp = sc.tmp.data();
  if (out.pair_sum) psum = tmp + L;
  auto node_gradient = [&](std::size_t u) {
    if (!out.node) return;
    for (std::size_t y = 0; y < L; ++y)
      out.node[u * L + y] = exp_scaled(lW, eW, exp_diff(lmu[u * L + y], log_add(lA[u * L + y], lB[y]) - lW));
  };
  for (std::size_t u = T - 1; u > 0; --u) {
    const double* M = x.trans_at(u);
    for (std::size_t y = 0; y < L; ++y) {
      const double m = lmu[u * L + y];
      lk[y] = m == kNegInf ? kNegInf : lB[y] - m;
    }
    node_gradient(u);
    const double* r = lrho + (u - 1) * L;
    for (std::size_t yp = 0; yp < L; ++yp) {
      const double head = la[(u - 1) * L + yp] - log_z;
      double* dst = out.pair_at ? out.pair_at + u * LL + yp * L : nullptr;
      for (std::size_t y = 0; y < L; ++y) {
        const double lp = head + M[yp * L + y] + s[u * L + y] + lb[u * L + y];  // log P_u(y', y)
        tmp[y] = lp + lk[y];
        const double g = exp_diff(lp, log_add(lp + r[yp], tmp[y]) - lW);  // ∂loss/∂τ_u / W
        if (dst) dst[y] = exp_scaled(lW, eW, g);
        if (psum) psum[yp * L + y] += g;
      }
      lBn[yp] = log_add(yp == gold[u - 1] ? lw[u - 1] : kNegInf, log_sum_exp(tmp, L));
    }
    std::swap(lB, lBn);
    sc.steps += LL;
  }
  node_gradient(0);
  if (psum)
    for (std::size_t j = 0; j < LL; ++j) out.pair_sum[j] += exp_scaled(lW, eW, psum[j]);
}

LossValue pointwise_log_space(bool exp_loss, const ChainScores& x, const std::uint32_t* gold,
                              const LossGradient& out, LossScratch& sc) {
  const std::size_t T = x.T, L = x.L;
  ++sc.log_space_paths;
  const double log_z = log_space_marginals(x, sc);
  const double* lmu = sc.lmu.data();
  // The loss, and log w_t + log_scale.
  sc.lw.resize(T);
  double* lw = sc.lw.data();
  LossValue v;
  if (exp_loss) {
    for (std::size_t t = 0; t < T; ++t) lw[t] = -lmu[t * L + gold[t]];
    v.log_value = log_sum_exp(lw, T);
    v.value = std::exp(v.log_value);
  } else {
    double sum = 0;
    for (std::size_t t = 0; t < T; ++t) sum -= lmu[t * L + gold[t]];
    v = log_loss_value(sum);
    std::fill(lw, lw + T, 0.0);
  }
  if (!out.node && !out.pair_sum && !out.pair_at) return v;
  for (std::size_t t = 0; t < T; ++t) lw[t] += out.log_scale;
  const double lW = log_sum_exp(lw, T);
  log_space_forward_sweep(x, gold, log_z, sc);
  log_space_backward_sweep(x, gold, log_z, lW, out, sc);
  return v;
}

// ---- the pointwise losses, scaled path ----------------------------------------------------------

/// The forward sweep: A_u [T][L] (sc.fwd) and ρ_{u−1} [T−1][L] (sc.rho), from the marginals μ
/// [T][L], P [T][L][L] and the weights w_t (sc.lw).
void forward_sweep(std::size_t T, std::size_t L, const std::uint32_t* gold, const double* mu, const double* P,
                   LossScratch& sc) {
  const std::size_t LL = L * L;
  const double* w = sc.lw.data();
  sc.fwd.resize(T * L);
  sc.rho.resize(T * L);
  double* A = sc.fwd.data();
  double* rho = sc.rho.data();
  std::fill(A, A + L, 0.0);
  for (std::size_t u = 1; u < T; ++u) {
    double* r = rho + (u - 1) * L;
    const double* m = mu + (u - 1) * L;
    const double* Ap = A + (u - 1) * L;
    for (std::size_t yp = 0; yp < L; ++yp) {
      const double a = Ap[yp] + (yp == gold[u - 1] ? w[u - 1] : 0.0);
      r[yp] = m[yp] > 0 ? a / m[yp] : 0.0;
    }
    double* Au = A + u * L;
    std::fill(Au, Au + L, 0.0);
    const double* Pu = P + u * LL;
    for (std::size_t yp = 0; yp < L; ++yp) {  // A_u += ρ(y')·P_u[y'][·]
      const double c = r[yp];
      const double* row = Pu + yp * L;
      for (std::size_t y = 0; y < L; ++y) Au[y] += c * row[y];
    }
    sc.steps += LL;
  }
}

/// The backward sweep: B_u, κ_u, and the gradients into `out`, written over μ (= out.node) and P
/// (= out.pair_at, where the caller has them) as each entry is last read.
void backward_sweep(std::size_t T, std::size_t L, const std::uint32_t* gold, const double* mu, double* P, double W,
                    const LossGradient& out, LossScratch& sc) {
  const std::size_t LL = L * L;
  const double *w = sc.lw.data(), *A = sc.fwd.data(), *rho = sc.rho.data();
  sc.bwd.resize(3 * L);
  double* B = sc.bwd.data();
  double* Bn = B + L;
  double* k = B + 2 * L;
  for (std::size_t y = 0; y < L; ++y) B[y] = y == gold[T - 1] ? w[T - 1] : 0.0;
  auto node_gradient = [&](std::size_t u) {
    if (!out.node) return;
    double* d = out.node + u * L;  // = μ_u
    for (std::size_t y = 0; y < L; ++y) d[y] = W * d[y] - A[u * L + y] - B[y];
  };
  for (std::size_t u = T - 1; u > 0; --u) {
    const double* m = mu + u * L;
    for (std::size_t y = 0; y < L; ++y) k[y] = m[y] > 0 ? B[y] / m[y] : 0.0;
    node_gradient(u);
    const double* r = rho + (u - 1) * L;
    double* Pu = P + u * LL;
    for (std::size_t yp = 0; yp < L; ++yp) {
      double* row = Pu + yp * L;
      double b = yp == gold[u - 1] ? w[u - 1] : 0.0;
      const double Wr = W - r[yp];
      for (std::size_t y = 0; y < L; ++y) {
        const double p = row[y];
        b += p * k[y];
        const double g = p * (Wr - k[y]);
        if (out.pair_at) row[y] = g;  // row is out.pair_at's
        if (out.pair_sum) out.pair_sum[yp * L + y] += g;
      }
      Bn[yp] = b;
    }
    std::swap(B, Bn);
    sc.steps += LL;
  }
  node_gradient(0);
  if (out.pair_at) std::fill(out.pair_at, out.pair_at + LL, 0.0);
}

LossValue pointwise(bool exp_loss, const ChainScores& x, const std::uint32_t* gold, const LossGradient& out,
                    LossScratch& sc, bool log_only) {
  if (log_only) return pointwise_log_space(exp_loss, x, gold, out, sc);
  const std::size_t T = x.T, L = x.L, LL = L * L;
  const bool grad = out.node || out.pair_sum || out.pair_at;
  // μ and P go straight into the caller's buffers where it has them (the gradients overwrite
  // them in place, each entry after its last read).
  double* mu = out.node;
  if (!mu) {
    sc.node.resize(T * L);
    mu = sc.node.data();
  }
  double* P = nullptr;
  if (grad) {
    P = out.pair_at;
    if (!P) {
      sc.pair.resize(T * LL);
      P = sc.pair.data();
    }
  }
  forward_backward(x, ChainOutputs{mu, nullptr, P}, sc.chain);
  ++sc.chain_calls;

  double sum = 0;
  for (std::size_t t = 0; t < T; ++t) {
    const double m = mu[t * L + gold[t]];
    if (!(m >= kGoldFloor)) return pointwise_log_space(exp_loss, x, gold, out, sc);
    sum += exp_loss ? 1.0 / m : -std::log(m);
  }
  const LossValue v = exp_loss ? LossValue{sum, std::log(sum)} : log_loss_value(sum);
  if (!grad) return v;

  // w_t·exp(log_scale), W and Σ c_t.
  sc.lw.resize(T);
  double* w = sc.lw.data();
  double W = 0, c_sum = 0;
  for (std::size_t t = 0; t < T; ++t) {
    const double m = mu[t * L + gold[t]];
    w[t] = std::exp(out.log_scale - (exp_loss ? std::log(m) : 0.0));
    W += w[t];
    c_sum += w[t] / m;
  }
  if (!(c_sum <= kMaxLossWeight)) return pointwise_log_space(exp_loss, x, gold, out, sc);
  forward_sweep(T, L, gold, mu, P, sc);
  backward_sweep(T, L, gold, mu, P, W, out, sc);
  return v;
}

}  // namespace

LossValue sequence_loss(SequenceLoss loss, const ChainScores& x, const std::uint32_t* gold,
                        const LossGradient& out, LossScratch& scratch, bool log_space_only) {
  for (std::size_t t = 0; t < x.T; ++t)
    if (gold[t] >= x.L)
      throw Error("sequence_loss: gold label " + std::to_string(gold[t]) + " at position " + std::to_string(t) +
                  " is not below the number of labels " + std::to_string(x.L));
  const bool exp_loss = loss == SequenceLoss::seq_exp || loss == SequenceLoss::point_exp;
  if (x.T == 0) {  // p(empty path) = 1: seq-exp is 1, every other loss 0
    if (loss == SequenceLoss::seq_exp) return {1.0, 0.0};
    return {0.0, kNegInf};
  }
  switch (loss) {
    case SequenceLoss::seq_log:
    case SequenceLoss::seq_exp:
      return sequence_level(exp_loss, x, gold, out, scratch, log_space_only);
    case SequenceLoss::point_log:
    case SequenceLoss::point_exp:
      return pointwise(exp_loss, x, gold, out, scratch, log_space_only);
  }
  throw Error("internal: unknown SequenceLoss value");
}

}  // namespace crfx
