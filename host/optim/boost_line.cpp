// crfx — the gradient rule's line search (host/optim/boost.cpp, "The gradient rule"; declared in
// boost.hpp): Brent's minimisation of the smoothed loss along one weight, and the exact loss along
// a state weight that makes its trials free.
//
// For a state weight k = (attribute a, label l) and z = e^Δ, sentence i's partition function along
// e_k is a polynomial in z: every path y scores exp⟨w, Φ(y)⟩·z^{c(y)}, c(y) = Σ_t n_t·[y_t = l],
// n_t the (integer) value of a at position t, so
//     Z_i(w + Δe_k) = Σ_c a_{i,c} z^c,   deg ≤ Σ_t n_t,
// and 1/p_i = Z_i / exp(gold score) = Σ_c a_{i,c} e^{(c − g_i)Δ} / exp⟨w, Φ(y_i)⟩ (g_i = the gold
// path's c). The coefficients come from one forward pass in the semiring of polynomials in z (a
// row of L labels per power; scaled per position like the backends' exp-space forward), so the
// whole curve H(w + Δe_k) = Σ_e C_e e^{eΔ} is known after one pass over the feature's sentences
// and every trial of the line search costs O(degree) instead of a forward pass. The powers of a
// position are its running count: a position costs L² per power reached so far (CoNLL-2000's
// attributes: 1–3 occurrences a sentence, a few for the POS attributes).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "optim/boost.hpp"
#include "util/thread_pool.hpp"

namespace crfx::boost {

namespace {

constexpr int kMaxDegree = 64;  // per sentence; beyond it the line search keeps its trials

/// The count n_t of attribute a at token t (the sum of its values there), or −1 where a value is
/// not a non-negative integer.
int count_at(const Corpus& c, std::size_t t, std::uint32_t a) {
  double n = 0;
  for (std::size_t i = c.state_offsets[t]; i < c.state_offsets[t + 1]; ++i)
    if (c.state_ids[i] == a) n += c.state_value(i);
  return n >= 0 && n <= kMaxDegree && n == std::floor(n) ? int(n) : -1;
}

/// Labels [y0, y0 + N) of times_matrix: their sums held in registers over the rows.
template <std::size_t N>
inline void times_columns(const double* __restrict from, const double* __restrict E, std::size_t L, std::size_t y0,
                          double* __restrict to) {
  double acc[N] = {};
  for (std::size_t yp = 0; yp < L; ++yp) {
    const double f = from[yp];
    if (f == 0) continue;
    const double* row = E + yp * L + y0;
    for (std::size_t j = 0; j < N; ++j) acc[j] += f * row[j];
  }
  for (std::size_t j = 0; j < N; ++j) to[y0 + j] = acc[j];
}

/// to[y] = Σ_{y'} from[y']·E[y'][y] for the L labels y (E row-major, L × L), each sum in y' order
/// from 0 — the plain loop's bits (a zero from[y'] adds nothing: E's entries are finite) — 16
/// labels at a time, then the rest in one go, their sums in registers (not stored and reloaded
/// every row; enough independent sums to keep the adds busy).
inline void times_matrix(const double* __restrict from, const double* __restrict E, std::size_t L,
                         double* __restrict to) {
  using Columns = void (*)(const double*, const double*, std::size_t, std::size_t, double*);
  static constexpr Columns kTail[16] = {
      nullptr,           times_columns<1>,  times_columns<2>,  times_columns<3>,  times_columns<4>,
      times_columns<5>,  times_columns<6>,  times_columns<7>,  times_columns<8>,  times_columns<9>,
      times_columns<10>, times_columns<11>, times_columns<12>, times_columns<13>, times_columns<14>,
      times_columns<15>};
  std::size_t y0 = 0;
  for (; y0 + 16 <= L; y0 += 16) times_columns<16>(from, E, L, y0, to);
  if (y0 < L) kTail[L - y0](from, E, L, y0, to);
}

/// The lines' sentences go to the pool (run_blocks) in blocks of this many.
constexpr std::size_t kLineBlock = 64;

/// Brent's minimisation (parabolic steps, golden sections where they fail) of f on [lo, hi] from x,
/// f(x) < f(lo) and f(x) ≤ f(hi); until the bracket around x is within tolerance·|x|.
template <class F>
double brent(F&& f, double lo, double flo, double hi, double fhi, double x, double& fx, double tolerance,
             int trials) {
  constexpr double kGolden = 0.3819660112501051;
  // The bracket's ends are the first parabola's other two points.
  double w = lo, v = hi, fw = flo, fv = fhi, d = 0, e = hi - lo;
  for (int it = 0; it < trials; ++it) {
    const double mid = 0.5 * (lo + hi), tol1 = tolerance * std::abs(x) + 1e-12, tol2 = 2 * tol1;
    if (std::abs(x - mid) <= tol2 - 0.5 * (hi - lo)) break;
    bool golden = true;
    if (std::abs(e) > tol1) {  // the parabola through (x, w, v)
      const double r = (x - w) * (fx - fv);
      double q = (x - v) * (fx - fw), p = (x - v) * q - (x - w) * r;
      q = 2 * (q - r);
      if (q > 0) p = -p;
      q = std::abs(q);
      const double before = e;
      e = d;
      if (std::abs(p) < std::abs(0.5 * q * before) && p > q * (lo - x) && p < q * (hi - x)) {
        d = p / q;
        // The parabola's minimum within the tolerance of x, from points near x: done.
        if (std::abs(d) <= tol1 && std::max(std::abs(x - w), std::abs(x - v)) <= 0.5 * std::abs(x)) break;
        if (x + d - lo < tol2 || hi - x - d < tol2) d = std::copysign(tol1, mid - x);
        golden = false;
      }
    }
    if (golden) {
      e = x >= mid ? lo - x : hi - x;
      d = kGolden * e;
    }
    const double u = std::abs(d) >= tol1 ? x + d : x + std::copysign(tol1, d);
    const double fu = f(u);
    if (fu <= fx) {
      (u >= x ? lo : hi) = x;
      v = w, fv = fw, w = x, fw = fx, x = u, fx = fu;
    } else {
      (u < x ? lo : hi) = u;
      if (fu <= fw || w == x) {
        v = w, fv = fw, w = u, fw = fu;
      } else if (fu <= fv || v == x || v == w) {
        v = u, fv = fu;
      }
    }
  }
  return x;
}

}  // namespace

LineMinimum smoothed_minimum(const std::function<double(double)>& phi, double slope, double smoothing,
                             double tolerance) {
  constexpr int kTrials = 60;
  LineMinimum out;
  if (!(slope != 0) || !std::isfinite(slope)) return out;
  const double dir = slope < 0 ? 1.0 : -1.0;  // f falls along x = dir·Δ ≥ 0
  auto f = [&](double x) {
    ++out.trials;
    const double d = dir * x, v = phi(d) + smoothing * (std::expm1(d) + std::expm1(-d));
    return std::isnan(v) ? std::numeric_limits<double>::infinity() : v;
  };
  // A bracket a < b < c with f(b) < f(a) and f(b) ≤ f(c), from f(0) = 0.
  double a = 0, fa = 0, b = 1, fb = f(b), c = b, fc = fb;
  if (fb < 0) {
    c = 4 * b;
    fc = f(c);
    while (fc < fb && out.trials < kTrials) {
      a = b, fa = fb, b = c, fb = fc, c = 4 * b;
      fc = f(c);
    }
  } else {
    while (out.trials < kTrials) {
      b = c / 4;
      fb = f(b);
      if (fb < 0) break;
      c = b, fc = fb;
    }
    if (!(fb < 0)) return out;
  }
  const double x = fc < fb ? c : brent(f, a, fa, c, fc, b, fb, tolerance, kTrials - out.trials);
  out.value = fc < fb ? fc : fb;
  out.delta = dir * x;
  return out;
}

double ExpSum::phi(double delta) const {
  if (!whole) {  // the span's change against H: log(1 + Σ_e C_e (e^{eΔ} − 1))
    double s = 0;
    for (std::size_t i = 0; i < coef.size(); ++i)
      if (coef[i] > 0) s += coef[i] * std::expm1(double(int(i) + low) * delta);
    return std::log1p(s);
  }
  // All of H: log(Σ_e C_e e^{eΔ} / Σ_e C_e), shifted by the largest term.
  double top = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < coef.size(); ++i)
    if (coef[i] > 0) top = std::max(top, std::log(coef[i]) + double(int(i) + low) * delta);
  double s = 0;
  for (std::size_t i = 0; i < coef.size(); ++i)
    if (coef[i] > 0) s += std::exp(std::log(coef[i]) + double(int(i) + low) * delta - top);
  return top + std::log(s) - std::log(total);
}

LineScores::LineScores(const Dims& dims, const std::vector<double>& w)
    : wg(dims.groups()), L(dims.L), edges(dims.E > 0) {
  std::vector<double> tau(L * L, 0.0);
  for_each_weight(wg, wg.transitions(), [&](std::size_t k, std::size_t slot) { tau[slot] = w[k]; });
  tau_max = *std::max_element(tau.begin(), tau.end());
  exp_trans.resize(L * L);
  for (std::size_t j = 0; j < L * L; ++j) exp_trans[j] = std::exp(tau[j] - tau_max);
  trans.swap(tau);
}

void Emissions::compute(const Corpus& c, const std::vector<double>& w, SentenceSpan span, ThreadPool* pool) {
  if (e.empty()) {
    e.assign(c.num_tokens() * L, 0.0);
    m.assign(c.num_tokens(), 0.0);
    gold.assign(c.num_sentences(), 0.0);
  }
  run_blocks(pool, span.count, kLineBlock, [&](std::size_t first, std::size_t last, unsigned) {
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t s = span[i], t0 = c.sentence_offsets[s];
      double g = 0;
      for (std::size_t t = t0; t < t0 + c.length(s); ++t) {
        double* row = e.data() + t * L;
        std::fill(row, row + L, 0.0);
        for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k) {
          const double v = c.state_value(k);
          for_each_weight(wg, c.state_ids[k], [&](std::size_t j, std::size_t slot) { row[slot] += v * w[j]; });
        }
        g += row[c.labels[t]];
        m[t] = *std::max_element(row, row + L);
        for (std::size_t y = 0; y < L; ++y) row[y] = std::exp(row[y] - m[t]);
      }
      gold[s] = g;
    }
  });
}

namespace {

/// The gold path's transition score of sentence s and its count of the transition `slot` (y'·L + y).
double gold_transitions(const Corpus& c, const LineScores& x, std::size_t s, std::size_t slot, int& count) {
  const std::size_t t0 = c.sentence_offsets[s];
  double g = 0;
  count = 0;
  for (std::size_t t = t0 + 1; t < t0 + c.length(s); ++t) {
    const std::size_t pair = c.labels[t - 1] * x.L + c.labels[t];
    g += x.trans[pair];
    count += pair == slot;
  }
  return g;
}

/// One sentence's terms (see the top), appended to `terms`: per power p ≤ `degree` its coefficient
/// of z^p over H (0 where no path reaches the power); `g` the gold path's count. False where a
/// count is not an integer in [0, kMaxDegree] or the sentence's degree passes kMaxDegree.
bool sentence_powers(const Corpus& c, const LineScores& x, const Emissions& em, std::uint32_t a, std::uint32_t l,
                     std::size_t s, double log_h, int& g, int& degree, std::vector<double>& terms,
                     std::vector<double>& alpha, std::vector<double>& next) {
  const std::size_t L = x.L, t0 = c.sentence_offsets[s], T = c.length(s);
  int unused = 0;
  degree = 0;
  g = 0;
  const double gold = em.gold[s] + gold_transitions(c, x, s, L * L, unused);
  double log_scale = 0;
  alpha.assign(L, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    const int n = count_at(c, t0 + t, a);
    if (n < 0 || degree + n > kMaxDegree) return false;
    if (c.labels[t0 + t] == l) g += n;
    const double* state = em.e.data() + (t0 + t) * L;
    // next[c][y] = Σ_{y'} alpha[c][y']·E[y'][y] (t > 0), then the emission, then label l's powers + n.
    next.assign(std::size_t(degree + n + 1) * L, 0.0);
    if (t == 0) {
      std::copy(state, state + L, next.begin());
    } else {
      for (int p = 0; p <= degree; ++p) {
        double* to = next.data() + std::size_t(p) * L;
        times_matrix(alpha.data() + std::size_t(p) * L, x.exp_trans.data(), L, to);
        for (std::size_t y = 0; y < L; ++y) to[y] *= state[y];
      }
      log_scale += x.tau_max;
    }
    if (n > 0)
      for (int p = degree; p >= 0; --p) {
        next[std::size_t(p + n) * L + l] = next[std::size_t(p) * L + l];
        next[std::size_t(p) * L + l] = 0;
      }
    degree += n;
    const double top = *std::max_element(next.begin(), next.end());
    if (!(top > 0) || !std::isfinite(top)) return false;
    for (double& v : next) v /= top;
    log_scale += em.m[t0 + t] + std::log(top);
    alpha.swap(next);
  }
  for (int p = 0; p <= degree; ++p) {
    double sum = 0;
    for (std::size_t y = 0; y < L; ++y) sum += alpha[std::size_t(p) * L + y];
    terms.push_back(sum > 0 ? std::exp(std::log(sum) + log_scale - gold - log_h) : 0.0);
  }
  return true;
}

/// Adds a sentence's terms (sentence_powers) to `out`: powers e = c − g in [−g, degree − g], out.coef
/// covering [out.low, out.low + size). (A term of 0 adds nothing: the coefficients are ≥ +0.)
void add_powers(ExpSum& out, int g, int degree, const double* terms) {
  if (out.coef.empty()) out.low = -g;
  const int low = std::min(out.low, -g), high = std::max(out.low + int(out.coef.size()) - 1, degree - g);
  out.coef.insert(out.coef.begin(), std::size_t(out.low - low), 0.0);
  out.low = low;
  out.coef.resize(std::size_t(high - low + 1), 0.0);
  for (int p = 0; p <= degree; ++p) out.coef[std::size_t(p - g - out.low)] += terms[p];
}

}  // namespace

bool state_line(const Corpus& c, const LineScores& x, const Emissions& em, std::uint32_t a, std::uint32_t l,
                SentenceSpan span, double log_h, ExpSum& out, ThreadPool* pool) {
  out = ExpSum();
  if (x.edges) return false;
  // The sentences' terms on the threads, a block of sentences each; added to `out` in span order.
  struct Block {
    bool ok = true;
    std::vector<int> g, degree;
    std::vector<double> terms;
  };
  std::vector<Block> blocks((span.count + kLineBlock - 1) / kLineBlock);
  std::vector<std::vector<double>> alpha(pool ? pool->size() : 1), next(alpha.size());
  run_blocks(pool, span.count, kLineBlock, [&](std::size_t first, std::size_t last, unsigned worker) {
    Block& block = blocks[first / kLineBlock];
    for (std::size_t i = first; i < last && block.ok; ++i) {
      int g = 0, degree = 0;
      block.ok = sentence_powers(c, x, em, a, l, span[i], log_h, g, degree, block.terms, alpha[worker], next[worker]);
      block.g.push_back(g);
      block.degree.push_back(degree);
    }
  });
  for (const Block& block : blocks) {
    if (!block.ok) return false;
    const double* terms = block.terms.data();
    for (std::size_t i = 0; i < block.g.size(); ++i) {
      add_powers(out, block.g[i], block.degree[i], terms);
      terms += block.degree[i] + 1;
    }
  }
  out.total = 0;
  for (const double v : out.coef) out.total += v;
  return std::isfinite(out.total);
}

TransitionLine::TransitionLine(const Corpus& c, const LineScores& x, const Emissions& em, std::size_t slot,
                               double log_h, ThreadPool* pool)
    : c_(c), x_(x), em_(em), slot_(slot), log_h_(log_h), pool_(pool), base_(c.num_sentences()),
      count_(c.num_sentences()), terms_(c.num_sentences()), scratch_(pool ? pool->size() : 1) {
  for (std::size_t s = 0; s < c.num_sentences(); ++s)
    base_[s] = em.gold[s] + gold_transitions(c, x, s, slot, count_[s]);
  log_s0_ = log_sum(0.0);
}

double TransitionLine::sentence_term(std::size_t s, const std::vector<double>& e, double delta,
                                     std::vector<double>& scratch) const {
  const std::size_t L = x_.L, t0 = c_.sentence_offsets[s], T = c_.length(s);
  scratch.resize(2 * L);
  double* alpha = scratch.data();
  double* next = alpha + L;
  const double* state = em_.e.data() + t0 * L;
  std::copy(state, state + L, alpha);
  double log_z = em_.m[t0], scale = 1;  // the scales' product, its log taken when it nears the limits
  for (std::size_t t = 1; t < T; ++t) {
    state += L;
    times_matrix(alpha, e.data(), L, next);
    double mx = 0;
    for (std::size_t y = 0; y < L; ++y) mx = std::max(mx, next[y] *= state[y]);
    if (!(mx > 0) || !std::isfinite(mx)) return std::numeric_limits<double>::quiet_NaN();
    const double inv = 1 / mx;
    for (std::size_t y = 0; y < L; ++y) alpha[y] = next[y] * inv;
    log_z += em_.m[t0 + t] + x_.tau_max;
    scale *= mx;
    if (scale < 1e-200 || scale > 1e200) {
      log_z += std::log(scale);
      scale = 1;
    }
  }
  log_z += std::log(scale);
  double z = 0;
  for (std::size_t y = 0; y < L; ++y) z += alpha[y];
  return log_z + std::log(z) - base_[s] - delta * count_[s] - log_h_;
}

double TransitionLine::log_sum(double delta) {
  std::vector<double> e = x_.exp_trans;
  e[slot_] *= std::exp(delta);
  // The sentences' terms on the threads; their log-sum-exp in sentence order (the same bits on
  // any number of threads). A scale that is not finite makes the sum NaN.
  run_blocks(pool_, c_.num_sentences(), kLineBlock, [&](std::size_t first, std::size_t last, unsigned worker) {
    for (std::size_t s = first; s < last; ++s) terms_[s] = sentence_term(s, e, delta, scratch_[worker]);
  });
  double top = -std::numeric_limits<double>::infinity(), sum = 0;  // Σ exp(term − top)
  for (const double term : terms_) {
    if (term > top) {
      sum = sum * std::exp(top - term) + 1;
      top = term;
    } else {
      sum += std::exp(term - top);
    }
  }
  return top + std::log(sum);
}

double TransitionLine::phi(double delta) {
  ++passes;
  return log_sum(delta) - log_s0_;
}

}  // namespace crfx::boost
