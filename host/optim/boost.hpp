// crfx — sequence boosting (`crfx train -a boost`; Altun, Hofmann & Johnson 2002, seed 002 §5.2):
// the pieces of host/optim/boost.cpp that its tests check against brute force (tests/test_boost.cpp).
// The derivation is at the top of boost.cpp.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/corpus.hpp"

namespace crfx {
class ThreadPool;  // (util/thread_pool.hpp)
}

namespace crfx::boost {

/// Schapire & Singer's (1999) smoothing ε of the step: Δ = log((a·W₋ + ε)/(b·W₊ + ε))/(U − L)
/// (bound_step), so that a feature whose bound has its minimum at infinity (L = 0, U = 0, or r at a
/// bound) gets a finite step, |Δ| ≤ log(1 + 1/ε)/(U − L). The trainer's ε is theirs, of order 1/m:
/// 1/(number of sentences) (with 1e-6 a feature that always predicts the gold label steps by
/// ~13.8/(U − L); on CoNLL-2000 1/m gave the better test F1 — boost.cpp, "Smoothing").
inline double smoothing(std::size_t sentences) { return 1.0 / double(sentences > 0 ? sentences : 1); }
/// The rounds of a run with --max-iterations 0 (unset).
inline constexpr int kDefaultRounds = 1000;

/// Per weight k the exact range [lower_k, upper_k] of ψ_k(i, y) = Φ_k(x_i, y) − Φ_k(x_i, y_i) over
/// every sentence i and every label sequence y of its length (lower ≤ 0 ≤ upper: y = y_i gives 0).
/// Weights that no sentence can move (transitions of a model without them, a one-label model)
/// get [0, 0]. Throws Error for an unlabeled token.
struct Bounds {
  std::vector<double> upper, lower;
};
Bounds feature_bounds(const Corpus& corpus, const Dims& dims);

/// max and min over label sequences y of a chain of `length` tokens with `labels` labels of
/// Σ_t v_t·[y_{t−1} = a, y_t = b] for the (t, v_t) pairs in `fires` (1 ≤ t < length, t ascending,
/// each t once): an exact DP over the classes {a, b, any other label}.
std::pair<double, double> bigram_range(const std::vector<std::pair<std::size_t, double>>& fires, std::size_t a,
                                       std::size_t b, std::size_t labels);

/// The step on one feature: r = E_D[ψ_k], ψ_k ∈ [lower, upper]. `delta` minimises (with the
/// smoothing ε) the convexity bound E_D[e^{Δψ}] ≤ W₋e^{ΔL} + W₊e^{ΔU}, W₊ = (r − L)/(U − L),
/// W₋ = (U − r)/(U − L); `decrease` = 1 − that bound at delta (≥ 0; 0 for a feature that cannot
/// move: U = L). Never infinite or NaN.
struct Step {
  double delta = 0;
  double decrease = 0;
};
Step bound_step(double r, double upper, double lower, double smoothing);

/// The feature with the largest decrease (ties: the smallest index) among those with decrease
/// > 0, or `none` (feature == SIZE_MAX) when no step lowers the bound.
struct Choice {
  std::size_t feature = static_cast<std::size_t>(-1);
  Step step;
};
Choice choose(const std::vector<double>& r, const Bounds& bounds, double smoothing);

/// The gradient rule's choice (Gauss–Southwell): among the weights that can move (upper > lower)
/// the one with the largest |r_k|, r = ∇H/H (ties: the smallest index); SIZE_MAX where all those
/// r_k are 0 (or not finite).
std::size_t steepest(const std::vector<double>& r, const Bounds& bounds);

/// The gradient rule's step: the minimiser over Δ of f(Δ) = φ(Δ) + ε·(e^Δ + e^{−Δ} − 2), φ convex
/// with φ(0) = 0 and φ′(0) = `slope` (the trainer's φ(Δ) = log(H(w + Δe_k)/H(w)), so slope = r_k).
/// The ε term is Schapire & Singer's smoothing moved into the loss: it keeps the step finite where
/// H falls without end along e_k (a feature that only ever counts for, or only against, the gold
/// sequences). On log H it caps no step while H falls by many orders of magnitude (the first
/// rounds, one sentence dominating H), and is H's own relative ε later (log H ≈ H/H₀ − 1 there).
/// Brackets the minimum from Δ = ±1 (×4 or ÷4 a trial), then Brent's parabolic and golden-section
/// search until the step is within tolerance·|Δ|. `value` = f(delta) < 0, or delta = 0 where no
/// trial lowered f (slope 0, or rounding). A φ that is not finite counts as +∞.
struct LineMinimum {
  double delta = 0;
  double value = 0;
  int trials = 0;
};
inline constexpr double kStepTolerance = 1e-2;
LineMinimum smoothed_minimum(const std::function<double(double)>& phi, double slope, double smoothing,
                             double tolerance = kStepTolerance);

/// The exact loss along a state weight (boost_line.cpp): H_S(w + Δe_k)/H = Σ_e C_e·e^{eΔ} over
/// the integer powers e in [low, low + coef.size()), the C_e ≥ 0 relative to H = e^{log_h}.
/// `whole`: the sentences are all of H, and phi is log(Σ C_e e^{eΔ} / Σ C_e); otherwise phi is
/// log(1 + Σ C_e (e^{eΔ} − 1)), the rest of H constant. phi(0) = 0 either way.
struct ExpSum {
  int low = 0;
  std::vector<double> coef;
  double total = 0;  // Σ C_e: H_S(w)/H
  bool whole = false;
  double phi(double delta) const;
};

/// The transition scores of w, shared by state_line's sentences.
struct LineScores {
  LineScores(const Dims& dims, const std::vector<double>& w);
  WeightGroups wg;
  std::size_t L;
  bool edges;                                // edge attributes: state_line does not apply
  std::vector<double> trans, exp_trans;      // [L][L] τ and exp(τ − tau_max)
  double tau_max = 0;
};

/// The corpus's state scores at w in exp space, kept by the gradient rule between rounds: per token
/// m_t = max_y s_t(y) and e_t(y) = exp(s_t(y) − m_t), per sentence the gold path's state score.
/// compute() (re)does the sentences of `span` (all of them first, then those of each stepped state
/// weight): a function of w alone, so a resumed run rebuilds the same bits. `pool` (optional)
/// spreads the sentences over its threads (each writes its own rows: the same bits).
struct Emissions {
  explicit Emissions(const Dims& dims) : wg(dims.groups()), L(dims.L) {}
  void compute(const Corpus& c, const std::vector<double>& w, SentenceSpan span, ThreadPool* pool = nullptr);
  WeightGroups wg;
  std::size_t L;
  std::vector<double> e, m, gold;  // [N][L], [N], [S]
};

/// The ExpSum of state weight (attribute a, label l) over `span` at the weights w (their
/// Emissions `em`), from one forward pass a sentence in the semiring of polynomials in e^Δ
/// (boost_line.cpp). False where it does not apply: edge attributes, a value of a that is not a
/// non-negative integer, more than 64 occurrences in a sentence, a score that is not finite.
/// `pool` (optional) runs the sentences' passes on its threads; their coefficients are added in
/// span order, so `out` has the same bits on any number of threads.
bool state_line(const Corpus& c, const LineScores& x, const Emissions& em, std::uint32_t a, std::uint32_t l,
                SentenceSpan span, double log_h, ExpSum& out, ThreadPool* pool = nullptr);

/// The loss along the transition `slot` (y'·L + y) over the whole corpus: phi(Δ) = log(H(w +
/// Δe_k)/H(w)), each call a forward pass over the corpus on the cached emissions (only the
/// transition matrix changes along e_k; no state score is recomputed). NaN where a scale is not
/// finite. `pool` (optional) runs the sentences' passes on its threads; their terms are summed in
/// sentence order, so phi has the same bits on any number of threads.
class TransitionLine {
 public:
  TransitionLine(const Corpus& c, const LineScores& x, const Emissions& em, std::size_t slot, double log_h,
                 ThreadPool* pool = nullptr);
  double phi(double delta);
  int passes = 0;  // calls of phi

 private:
  double log_sum(double delta);  // log Σ_i 1/p_i(w + Δe_k) − log_h
  /// Sentence s's term of log_sum: log(1/p_s) − log_h along the transition matrix `e` (NaN where a
  /// scale is not finite); `scratch` a worker's.
  double sentence_term(std::size_t s, const std::vector<double>& e, double delta, std::vector<double>& scratch) const;
  const Corpus& c_;
  const LineScores& x_;
  const Emissions& em_;
  std::size_t slot_;
  double log_h_, log_s0_ = 0;
  ThreadPool* pool_;
  std::vector<double> base_;   // [S] the gold path's score at w
  std::vector<int> count_;     // [S] its count of the transition
  std::vector<double> terms_;  // [S] log_sum's terms
  std::vector<std::vector<double>> scratch_;  // [workers] a forward pass's two rows
};

/// Per weight the sentences whose 1/p_i (and gradient contribution) depend on it — those where the
/// weight's feature can fire: a state weight (attribute a, label l): the sentences where a occurs;
/// an edge weight: those where its edge attribute occurs at some t ≥ 1; a transition: none listed
/// (`full` is set: its rounds are full passes). Built once from the host corpus (CSR per weight
/// group; sentence ids ascending).
class SentenceIndex {
 public:
  SentenceIndex(const Corpus& corpus, const Dims& dims);
  /// The sentences of weight k; `full` = true for a transition (every sentence with ≥ 2 tokens).
  SentenceSpan sentences(std::size_t k, bool& full) const;
  /// The group of weight k (WeightGroups: a state attribute below A).
  std::uint32_t group(std::size_t k) const { return group_of_[k]; }

 private:
  std::vector<std::uint32_t> group_of_;  // [weights] the weight's group
  std::uint32_t transitions_ = 0;
  std::vector<std::size_t> offsets_;     // [groups + 1]
  std::vector<std::uint32_t> ids_;
};

/// How the trainer keeps H and ∇H between rounds (boost.cpp, "Incremental rounds"). The defaults
/// are the trainer's; tests switch `incremental` off to compare with full rounds.
struct RoundPolicy {
  bool incremental = true;       // re-evaluate only the sentences of the stepped feature
  double refresh_ratio = 1e6;    // full pass when the mass since the last one exceeds ratio·H
  int refresh_period = 1000;     // and at least every this many rounds
  bool exact_line = true;        // gradient rule: a state weight's line from state_line, not trials
};
RoundPolicy& round_policy();

}  // namespace crfx::boost
