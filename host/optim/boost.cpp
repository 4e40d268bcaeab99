// crfx — sequence boosting (`crfx train -a boost`): Altun, Hofmann & Johnson (2002),
// "Discriminative learning for label sequences via boosting" (NIPS), as seed 002 §5.2 (Altun,
// Johnson & Hofmann 2003) describes it: coordinate-wise minimisation of an upper bound on the
// sequential exponential loss, one feature per round, AdaBoost-style weights over the sentences.
//
// Derivation. With Ψ_iy = Φ(x_i, y) − Φ(x_i, y_i) (y over the label sequences of sentence i's
// length, y_i its gold sequence), the sequential exp-loss is
//     H(w) = Σ_i Σ_y exp⟨w, Ψ_iy⟩ = Σ_i Z_i(w) / exp⟨w, Φ(x_i, y_i)⟩ = Σ_i 1/p(y_i | x_i; w),
// convex in w (a sum of exponentials of linear functions) — `--loss seq-exp`. Let
//     D(i, y) = exp⟨w, Ψ_iy⟩ / H(w) = D(i)·p(y | x_i; w),  D(i) = (1/p_i) / H
// (the sentence weights are AdaBoost's: the worst-fitted sentences weigh most). A step Δ on one
// weight k gives, with ψ = ψ_k(i, y) the k-th component of Ψ_iy,
//     H(w + Δe_k) / H(w) = E_D[exp(Δψ)].
// With U_k = max_{i,y} ψ, L_k = min_{i,y} ψ (L ≤ 0 ≤ U: y = y_i gives ψ = 0), convexity of the
// exponential on [L, U] gives exp(Δψ) ≤ ((U − ψ)e^{ΔL} + (ψ − L)e^{ΔU}) / (U − L), so with
// r_k = E_D[ψ_k] = (∂H/∂w_k) / H (∂H/∂w_k = Σ_i (1/p_i)(E_{p(y|x_i)}[Φ_k] − Φ_k(x_i, y_i)), the
// seq-exp gradient the backends compute),
//     H(w + Δe_k) ≤ H(w)·B_k(Δ),  B_k(Δ) = W₋e^{ΔL} + W₊e^{ΔU},
//     W₊ = (r − L)/(U − L),  W₋ = (U − r)/(U − L)   (W₊ + W₋ = 1, both in [0, 1]).
// B_k is convex with B_k(0) = 1; B′(Δ) = L·W₋e^{ΔL} + U·W₊e^{ΔU} = 0 at
//     e^{Δ(U − L)} = −L·W₋ / (U·W₊),  i.e.  Δ* = log(−L(U − r) / (U(r − L))) / (U − L)
// when L < 0 < U and L < r < U. Where the minimum is at infinity (U = 0 or L = 0 — a feature that
// only ever counts for or against the gold sequence — or r at a bound) the step is smoothed as
// Schapire & Singer (1999) do, with a = −L/(U − L), b = U/(U − L):
//     Δ = log((a·W₋ + ε) / (b·W₊ + ε)) / (U − L),   ε = 1/m, m the number of sentences (boost.hpp),
// applied to every feature (it moves Δ towards 0, never past Δ*, so B_k(Δ) ≤ 1 still), which
// keeps |Δ| ≤ log(1 + 1/ε)/(U − L). Each round: H and r = ∇H/H through the Backend (so it runs on
// the CPU and on CUDA; incrementally, see "Incremental rounds" below), then for every feature Δ and the bound's
// decrease 1 − B_k(Δ) (with expm1, which resolves decreases far below 1e-16), then the feature
// with the largest decrease (ties: the smallest index, so runs are deterministic) gets w_k += Δ.
// H falls every round (H_new ≤ H·B_k(Δ) < H), and a weight moves only when it is chosen: the model
// has at most one more non-zero weight per round (`active_features` in the log).
//
// The bounds U_k, L_k are exact per feature, from the data (feature_bounds):
//   · state feature (attribute a, label l), Φ = Σ_t v_ta·[y_t = l]: the labels of the positions
//     are independent, so max_y Φ = Σ_t max(v_ta, 0) and min_y Φ = Σ_t min(v_ta, 0) (with ≥ 2
//     labels), minus the gold count Σ_t v_ta·[y_i,t = l];
//   · transition (l′, l), Φ = #{t ≥ 1 : y_{t−1} = l′, y_t = l} (crfx has no start or stop
//     transitions: a chain of T tokens has T − 1 bigrams): max = T − 1 for l′ = l (all l),
//     ⌊T/2⌋ for l′ ≠ l (l′ l l′ l …), min = 0 (some other label), minus the gold count;
//   · edge feature (edge attribute e, bigram (l′, l)), Φ = Σ_t v_te·[y_{t−1} = l′, y_t = l] over
//     the positions t ≥ 1 where e fires: max and min by an exact DP over the label classes {l′, l,
//     any other} along the positions from the first firing one − 1 to the last (bigram_range).
// U_k is the maximum over the sentences of max − gold, L_k the minimum of min − gold.
//
// Numerics. At w = 0, 1/p_i = L^{T_i}: H is e^{3.1·T} for CoNLL-2000's 22 labels, finite up to
// sentences of ~229 tokens, and only falls from there (H decreases every round and bounds every
// 1/p_i). Everything the round uses is scale-free: log H and r = ∇H/H. Where the backend's seq-exp
// value or gradient overflows a double (longer sentences, more labels) the round is formed from
// the per-sentence NLLs instead, in log space: log H = logsumexp_i(−log p_i), D(i) =
// exp(−log p_i − log H), r = Σ_i D(i)·∇NLL_i (log_seq_exp, optim/exp_loss.hpp); the report then shows H as
// DBL_MAX, the gradient norm as NaN, and the improvement test waits for a finite H.
//
// Incremental rounds (seed 002 §5.2: "one can restrict the forward backward pass only to the
// training instances that contain the feature that is added to the ensemble in the last round").
// After w_k moves only the sentences where feature k can fire change their 1/p_i and their share
// of ∇H. The trainer keeps H (a double) and G = ∇H (a backend vector, unscaled) and, for a step
// on w_k, evaluates the span S_k of those sentences twice — at the old weights with scale −1 into
// G (Backend::evaluate adds scale·gradient), at the new ones with scale +1 — and sets
// H ← (H − H_S(old)) + H_S(new), r = G/H. S_k comes from SentenceIndex, built once from the host
// corpus: a state weight (a, l): the sentences where attribute a occurs; an edge weight: those
// where its edge attribute occurs; a transition: every sentence of ≥ 2 tokens, so a full pass.
// A full pass (exact H and G, the sums restarted) runs instead
//   · for a transition, and where the span holds half the corpus' tokens or more (two passes over
//     it would cost more than one over the corpus: CoNLL-2000's POS and bias-like attributes);
//   · while the previous round was a log-space one (overflow) — that path stays full;
//   · where a subset's value is not finite, or the new H is not > 0;
//   · by the refresh rule: with M = H at the last full pass + Σ over the incremental rounds since
//     of (H_before + H_S(old) + H_S(new)), each round's rounding error in H is ≲ u·(H_before +
//     H_S(old) + H_S(new)) (u the unit round-off, times the summation's few-ulp constant), and in
//     G_j ≲ u·(the same)·max|ψ_j|; so |error(H)|/H and |error(r_j)| stay ≲ c·u·M/H (·max|ψ_j|).
//     A full pass runs when M > refresh_ratio·H (RoundPolicy, 1e6: relative error ≲ 1e-10) and
//     at least every refresh_period = 1000 rounds. This is what catches cancellation: where one
//     sentence dominates H (22^T at w = 0) its old 1/p is subtracted from H and the rest of H,
//     below H's last bit, is lost once the sentence is fitted (the test
//     IncrementalRoundsStayExactWhereOneSentenceDominates shows a 2e-6 drift without the rule).
// The objective reported is this H: exact at a full pass, within the bound above otherwise (the
// tests check 1e-10 against a fresh evaluation every round). The state is checkpointed whole (H,
// M, the count since the last full pass, G and r), so a resumed run continues bit for bit; every
// primitive involved sums in fixed token chunks, so the result is the same for any thread count.
// On CoNLL-2000 about a quarter of the first 1,000 rounds still choose a transition or a frequent
// attribute (full passes; 296 passes in 1,000 rounds, 626 in 3,000); measured back to back on a
// busy 2-core machine (load ~3.5, --threads 2), the first 200 rounds took 34.4 s with a full pass
// every round and 16.9 s incrementally, the same rounds (H equal to 5e-13); later rounds gain more
// (3,894 rounds in 300 s of training: test F1 64.97, 3,033 active features; 1,000: 52.42, 727).
//
// Smoothing. ε = 1/m (m sentences), Schapire & Singer's order, not 1e-6: with 1e-6 a feature
// that always predicts the gold label (U = 0 or L = 0) steps by ~13.8/(U − L) and the round after
// round greed shows on held-out data. Measured on CoNLL-2000 (train.txt, chunking.template, 8,936
// sentences, ε = 1/8936 ≈ 1.1e-4 against 1e-6; test.txt F1 by crfx eval; --threads 2):
//     rounds   ε = 1e-6: F1 (active)   ε = 1/m: F1 (active)
//      1,000        50.96 (753)              52.42 (727)
//      3,000        62.26 (2,507)            62.35 (2,349)
// (H itself falls faster with 1e-6 — 3.1e35 against 2.4e36 at round 1,000 — and overfits it.)
//
// The gradient rule (--boost-rule gradient; the bound rule above stays the default, see RESULTS.md). The bound's ranges U_k − L_k are global:
// a frequent feature's range is its count in the longest sentence, so its bound is loose and its
// step small, while a rare feature with U = 0 or L = 0 gets the smoothed maximal step and the
// largest decrease of the bound — after a few sensible rounds the bound rule memorises the longest
// sentences' rare n-grams (CoNLL-2000: test F1 58.9 after 2,000 rounds). The paper's Line 4
// chooses "a function of the gradient"; this rule takes the gradient itself and the loss itself:
//   · choice (Gauss–Southwell): k = argmax |r_k| over the weights that can move (U > L) — the
//     largest |∂H/∂w_k| (boost::steepest);
//   · step: the minimiser of log(H(w + Δe_k)/H(w)) + ε·(e^Δ + e^{−Δ} − 2) (boost::smoothed_minimum).
//     log H along e_k is convex (a log-sum-exp of functions linear in Δ). The ε term is the
//     smoothing moved from the bound into the loss: where H falls without end along e_k (a
//     feature that only ever counts for, or only against, the gold sequences) it keeps the step
//     finite, about log(|r_k|/ε) at most. On log H it caps no step while H falls by orders of
//     magnitude (the first rounds, one sentence dominating H; on H/H₀ − 1 the same term stopped
//     every such step at H/H₀ ≈ ε and the rounds chose the same feature again and again).
//   · each trial of the line search is a forward pass (no gradient) over the sentences holding k,
//     H_S(w + Δe_k) − H_S(w) against H, or over the corpus where the round is a full pass, in log
//     space while H overflows, and where H_S is all but a sliver of H (H − H_S then rounding).
//     Brent's method after a bracket from Δ = ±1: about 6 trials a round on CoNLL-2000.
//   · exact lines (boost_line.cpp; RoundPolicy::exact_line, on where the model has no edge
//     attributes): the trials need no forward pass. The corpus's emissions are kept between rounds
//     (boost::Emissions, redone for the sentences of each stepped state weight). Along a state
//     weight (a, l) with integer counts, 1/p_i is a sum of e^{eΔ} over integer powers e (a ratio of
//     polynomials in e^Δ): one forward pass in the polynomial semiring over k's sentences gives every
//     trial in closed form (boost::state_line). Along a transition, whose degree is the sentence
//     length, each trial stays a forward pass over the corpus, but on the kept emissions (no state
//     score, no exp). The same trials as the passes would take, to rounding: the same rounds.
// The step then goes through step() like the bound rule's. The rounds cost more (the trials) and
// choose frequent features (their gradients add up over many sentences), so fewer of them are
// incremental; the model they give is far better at the same number of features (RESULTS.md).
//
// Settings: --boost-rule, --max-iterations (rounds; 0 = kDefaultRounds, 1000), --period/--delta (CRFsuite's
// improvement test on H). No regularisation: c1 and c2 are not boost's settings (crfx train refuses
// them; the library's Objective's are not read). boost minimises seq-exp by definition: an
// explicit --loss is refused (loss_refusal), the Objective's default seq-log is ignored.
#include "optim/boost.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "crfx/errors.hpp"
#include "optim/exp_loss.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/trainers.hpp"
#include "util/thread_pool.hpp"

namespace crfx {
namespace boost {

std::pair<double, double> bigram_range(const std::vector<std::pair<std::size_t, double>>& fires, std::size_t a,
                                       std::size_t b, std::size_t labels) {
  if (fires.empty()) return {0.0, 0.0};
  // Classes: 0 = label a, 1 = label b (the same class as a when a == b), 2 = any other label.
  const bool same = a == b;
  const std::size_t named = same ? 1 : 2;
  const bool other = labels > named;
  const int classes = same ? 1 : 2;
  const int cb = same ? 0 : 1;  // b's class
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double hi[3], lo[3];
  for (int c = 0; c < 3; ++c) {
    const bool exists = c < classes || (c == 2 && other);
    hi[c] = exists ? 0.0 : -kNone;
    lo[c] = exists ? 0.0 : kNone;
  }
  std::size_t j = 0;
  for (std::size_t t = fires.front().first; t <= fires.back().first; ++t) {
    double v = 0;
    if (j < fires.size() && fires[j].first == t) v = fires[j++].second;
    double nh[3], nl[3];
    for (int c = 0; c < 3; ++c) {
      nh[c] = -kNone;
      nl[c] = kNone;
      if (!std::isfinite(hi[c])) continue;  // the class does not exist
      for (int p = 0; p < 3; ++p) {
        if (!std::isfinite(hi[p])) continue;
        const double add = (p == 0 && c == cb) ? v : 0.0;
        nh[c] = std::max(nh[c], hi[p] + add);
        nl[c] = std::min(nl[c], lo[p] + add);
      }
    }
    std::copy(nh, nh + 3, hi);
    std::copy(nl, nl + 3, lo);
  }
  double mx = -kNone, mn = kNone;
  for (int c = 0; c < 3; ++c)
    if (std::isfinite(hi[c])) {
      mx = std::max(mx, hi[c]);
      mn = std::min(mn, lo[c]);
    }
  return {mx, mn};
}

Bounds feature_bounds(const Corpus& c, const Dims& dims) {
  const WeightGroups wg = dims.groups();
  const std::size_t W = dims.num_weights(), L = dims.L;
  Bounds out;
  out.upper.assign(W, 0.0);
  out.lower.assign(W, 0.0);
  if (L < 2) return out;  // one label: every Φ is the gold one, ψ ≡ 0
  auto widen = [&](std::size_t k, double hi, double lo) {
    out.upper[k] = std::max(out.upper[k], hi);
    out.lower[k] = std::min(out.lower[k], lo);
  };
  std::vector<double> pos(dims.A, 0.0), neg(dims.A, 0.0);
  std::vector<std::uint32_t> touched;
  std::vector<char> seen(dims.A, 0);
  std::vector<double> token_value(dims.A, 0.0);
  std::vector<std::uint32_t> in_token;
  std::unordered_map<std::uint64_t, double> gold;  // (attribute · L + label) → Σ v over gold positions
  std::vector<double> gold_pairs(L * L);
  std::map<std::uint32_t, std::vector<std::pair<std::size_t, double>>> edges;  // e → (t, v)
  for (std::size_t s = 0; s < c.num_sentences(); ++s) {
    const std::size_t t0 = c.sentence_offsets[s], T = c.length(s);
    if (T == 0) continue;
    for (std::size_t t = t0; t < t0 + T; ++t)
      if (c.labels[t] >= L)
        throw Error("boost: token " + std::to_string(t - t0 + 1) + " of sentence " + std::to_string(s + 1) +
                    " has no gold label");
    // State features.
    touched.clear();
    gold.clear();
    for (std::size_t t = t0; t < t0 + T; ++t) {
      // An attribute may occur more than once at a token: its value there is the sum.
      in_token.clear();
      for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k) {
        const std::uint32_t a = c.state_ids[k];
        if (token_value[a] == 0 && std::find(in_token.begin(), in_token.end(), a) == in_token.end())
          in_token.push_back(a);
        token_value[a] += c.state_value(k);
      }
      for (const std::uint32_t a : in_token) {
        const double v = token_value[a];
        token_value[a] = 0;
        if (!seen[a]) {
          seen[a] = 1;
          touched.push_back(a);
        }
        pos[a] += std::max(v, 0.0);
        neg[a] += std::min(v, 0.0);
        gold[std::uint64_t(a) * L + c.labels[t]] += v;
      }
    }
    for (const std::uint32_t a : touched) {
      for_each_weight(wg, a, [&](std::size_t k, std::size_t slot) {
        const auto it = gold.find(std::uint64_t(a) * L + slot);
        const double g = it == gold.end() ? 0.0 : it->second;
        widen(k, pos[a] - g, neg[a] - g);
      });
      pos[a] = neg[a] = 0;
      seen[a] = 0;
    }
    // Transitions: T − 1 bigrams, no start or stop.
    if (dims.transitions && T >= 2) {
      std::fill(gold_pairs.begin(), gold_pairs.end(), 0.0);
      for (std::size_t t = t0 + 1; t < t0 + T; ++t) gold_pairs[c.labels[t - 1] * L + c.labels[t]] += 1;
      for_each_weight(wg, wg.transitions(), [&](std::size_t k, std::size_t slot) {
        const double most = slot / L == slot % L ? double(T - 1) : double(T / 2);
        widen(k, most - gold_pairs[slot], -gold_pairs[slot]);
      });
    }
    // Edge features: the DP over the positions where each fires.
    if (dims.E > 0) {
      edges.clear();
      for (std::size_t t = t0 + 1; t < t0 + T; ++t)
        for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k) {
          auto& f = edges[c.edge_ids[k]];
          if (!f.empty() && f.back().first == t - t0)
            f.back().second += c.edge_value(k);
          else
            f.emplace_back(t - t0, c.edge_value(k));
        }
      for (const auto& [e, fires] : edges)
        for_each_weight(wg, wg.edge(e), [&](std::size_t k, std::size_t slot) {
          const std::size_t a = slot / L, b = slot % L;
          double g = 0;
          for (const auto& [t, v] : fires)
            if (c.labels[t0 + t - 1] == a && c.labels[t0 + t] == b) g += v;
          const auto [mx, mn] = bigram_range(fires, a, b, L);
          widen(k, mx - g, mn - g);
        });
    }
  }
  return out;
}

Step bound_step(double r, double upper, double lower, double smoothing) {
  Step s;
  if (!(upper > lower)) return s;
  const double span = upper - lower;
  const double wp = std::clamp((r - lower) / span, 0.0, 1.0), wm = std::clamp((upper - r) / span, 0.0, 1.0);
  const double a = -lower / span, b = upper / span;
  const double delta = std::log((a * wm + smoothing) / (b * wp + smoothing)) / span;
  if (!std::isfinite(delta)) return s;
  const double decrease = -(wm * std::expm1(delta * lower) + wp * std::expm1(delta * upper));
  if (!(decrease > 0)) return s;
  s.delta = delta;
  s.decrease = decrease;
  return s;
}

Choice choose(const std::vector<double>& r, const Bounds& bounds, double smoothing) {
  Choice best;
  for (std::size_t k = 0; k < r.size(); ++k) {
    if (!(bounds.upper[k] > bounds.lower[k])) continue;
    const Step s = bound_step(r[k], bounds.upper[k], bounds.lower[k], smoothing);
    if (s.decrease > best.step.decrease) {
      best.feature = k;
      best.step = s;
    }
  }
  return best;
}

std::size_t steepest(const std::vector<double>& r, const Bounds& bounds) {
  std::size_t best = Choice().feature;
  double top = 0;
  for (std::size_t k = 0; k < r.size(); ++k)
    if (bounds.upper[k] > bounds.lower[k] && std::abs(r[k]) > top && std::isfinite(r[k])) {
      top = std::abs(r[k]);
      best = k;
    }
  return best;
}

SentenceIndex::SentenceIndex(const Corpus& c, const Dims& dims) {
  const WeightGroups wg = dims.groups();
  const std::size_t groups = wg.count();
  transitions_ = wg.transitions();
  group_of_.assign(dims.num_weights(), 0);
  for (std::uint32_t g = 0; g < groups; ++g)
    for_each_weight(wg, g, [&](std::size_t k, std::size_t) { group_of_[k] = g; });
  std::vector<std::uint32_t> mark(groups, 0);  // 1 + the last sentence that listed the group
  offsets_.assign(groups + 1, 0);
  // Two passes over the corpus: count the sentences of each group, then list them.
  for (int pass = 0; pass < 2; ++pass) {
    std::fill(mark.begin(), mark.end(), 0u);
    std::vector<std::size_t> next;
    if (pass == 1) {
      for (std::size_t g = 0; g < groups; ++g) offsets_[g + 1] += offsets_[g];
      ids_.resize(offsets_[groups]);
      next.assign(offsets_.begin(), offsets_.end() - 1);
    }
    for (std::size_t s = 0; s < c.num_sentences(); ++s) {
      const std::size_t t0 = c.sentence_offsets[s], T = c.length(s);
      auto touch = [&](std::uint32_t g) {
        if (mark[g] == s + 1) return;
        mark[g] = std::uint32_t(s + 1);
        if (pass == 0)
          ++offsets_[g + 1];
        else
          ids_[next[g]++] = std::uint32_t(s);
      };
      for (std::size_t t = t0; t < t0 + T; ++t) {
        for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k) touch(c.state_ids[k]);
        if (t > t0 && dims.E > 0)
          for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k) touch(wg.edge(c.edge_ids[k]));
      }
    }
  }
}

SentenceSpan SentenceIndex::sentences(std::size_t k, bool& full) const {
  const std::uint32_t g = group_of_[k];
  full = g == transitions_;
  if (full) return {};
  return {ids_.data() + offsets_[g], offsets_[g + 1] - offsets_[g]};
}

RoundPolicy& round_policy() {
  static RoundPolicy policy;
  return policy;
}

}  // namespace boost

namespace {

/// One run: the corpus's bounds and index, the weights on the host, H and its gradient, the rounds'
/// steps (full and incremental) and the state a checkpoint keeps.
struct BoostRun {
  BoostRun(Objective& obj_, Vector& w_, const TrainOptions& opt, const Corpus& host_)
      : obj(obj_), b(obj_.backend()), corpus(obj_.corpus()), host(host_), w(w_), W(w_.size()),
        bounds(boost::feature_bounds(host_, b.dims())), index(host_, b.dims()), policy(boost::round_policy()),
        n(corpus.num_sentences()), r(b.vector(W)), g(b.vector(W)), wh(W), rh(W),
        improvement(opt.period, opt.delta) {}

  /// A full pass: H and ∇H over the corpus (or the log-space round where they overflow).
  void full() {
    b.fill(*g, 0.0);
    const double v = b.evaluate(corpus, w, all_sentences(corpus), g.get(), 1.0, SequenceLoss::seq_exp);
    passes += 1;
    if (std::isfinite(v) && v > 0 && std::isfinite(b.norm_inf(*g))) {
      h = mass = v;
      since = 0;
      overflowed = 0;
      log_h = std::log(h);
      b.scaled_copy(1.0 / h, *g, *r);
      return;
    }
    log_h = log_seq_exp(b, corpus, w, r.get(), passes, true).log_h;
    overflowed = 1;
  }

  /// The sentences of weight j and whether a round on j evaluates only them (see the top): two
  /// passes over the span (old and new weights) against one over the corpus.
  bool partial(std::size_t j, SentenceSpan& span, std::size_t& span_tokens) const {
    bool all = false;
    span = index.sentences(j, all);
    span_tokens = 0;
    if (!all)
      for (std::size_t i = 0; i < span.count; ++i) span_tokens += host.length(span[i]);
    return policy.incremental && !overflowed && !all && n > 0 && 2 * span_tokens < host.num_tokens();
  }

  /// The gradient rule's step on w_j: the minimum of H along e_j, smoothed (boost::smoothed_minimum),
  /// each trial a forward pass over j's sentences (H_S(w + Δe_j) − H_S(w), over H), or over the
  /// corpus where a round on j is a full pass (in log space while H overflows). w is left as it was.
  boost::LineMinimum line_search(std::size_t j, double smoothing) {
    boost::ExpSum line;
    if (exact_line(j, line))
      return boost::smoothed_minimum([&](double d) { return line.phi(d); }, rh[j], smoothing);
    const WeightGroups wg = b.dims().groups();
    if (index.group(j) == wg.transitions() && emissions()) {
      const boost::LineScores scores(b.dims(), wh);
      boost::TransitionLine along(host, scores, *em, wg.slot(j, wg.transitions()), log_h, pool.get());
      const boost::LineMinimum m =
          boost::smoothed_minimum([&](double d) { return along.phi(d); }, rh[j], smoothing);
      obj.add_passes(1.0 + along.passes);
      return m;
    }
    SentenceSpan span;
    std::size_t span_tokens = 0;
    bool part = partial(j, span, span_tokens);
    const double w0 = wh[j], share = double(span_tokens) / double(std::max<std::size_t>(host.num_tokens(), 1));
    double trial_passes = 0;
    const double h0 = part ? b.evaluate(corpus, w, span, nullptr, 1.0, SequenceLoss::seq_exp) : 0.0;
    if (part) trial_passes += share;
    // Where the span holds all but a sliver of H, H − H_S(w) is rounding: trials on the corpus.
    part = part && std::isfinite(h0) && h - h0 > 1e-8 * h;
    const auto phi = [&](double d) {
      wh[j] = w0 + d;
      b.write(w, wh.data());
      if (part) {
        trial_passes += share;
        return std::log1p((b.evaluate(corpus, w, span, nullptr, 1.0, SequenceLoss::seq_exp) - h0) / h);
      }
      return log_seq_exp(b, corpus, w, nullptr, trial_passes).log_h - log_h;
    };
    const boost::LineMinimum m = boost::smoothed_minimum(phi, rh[j], smoothing);
      wh[j] = w0;
    b.write(w, wh.data());
    obj.add_passes(trial_passes);
    return m;
  }

  /// The loss along a state weight j as a sum of exponentials (boost::state_line) from one pass
  /// over j's sentences — over the corpus where they hold all but a sliver of H (as the trials'
  /// H − H_S would be rounding). False where it does not apply: the trials then.
  bool exact_line(std::size_t j, boost::ExpSum& line) {
    const std::uint32_t a = index.group(j);
    if (a >= b.dims().A || !emissions()) return false;
    const boost::LineScores scores(b.dims(), wh);
    bool all = false;
    const SentenceSpan span = index.sentences(j, all);
    const std::uint32_t l = b.dims().groups().slot(j, a);
    std::size_t tokens = 0;
    for (std::size_t i = 0; i < span.count; ++i) tokens += host.length(span[i]);
    double share = double(tokens) / double(std::max<std::size_t>(host.num_tokens(), 1));
    bool ok = boost::state_line(host, scores, *em, a, l, span, log_h, line, pool.get());
    if (ok && !(1 - line.total > 1e-8)) {
      share += 1;
      ok = boost::state_line(host, scores, *em, a, l, {nullptr, n}, log_h, line, pool.get());
      line.whole = true;
    }
    obj.add_passes(share);
    return ok;
  }

  /// The corpus's emissions at wh (boost::Emissions), built at the first use; null where the
  /// policy or the model rules the exact lines out (edge attributes; more than 2^25 scores).
  const boost::Emissions* emissions() {
    if (!policy.exact_line || b.dims().E > 0 || host.num_tokens() * b.dims().L > (std::size_t(1) << 25)) return nullptr;
    if (!em) {
      em = std::make_unique<boost::Emissions>(b.dims());
      if (b.host_threads() > 1) pool = std::make_unique<ThreadPool>(b.host_threads());
      em->compute(host, wh, {nullptr, n}, pool.get());
      obj.add_passes(1.0);
    }
    return em.get();
  }

  /// The round's step w_j += d: re-evaluates only the sentences of j where it can (see the top).
  void step(std::size_t j, double d) {
    passes = 0;
    SentenceSpan span;
    std::size_t span_tokens = 0;
    bool done = false;
    if (partial(j, span, span_tokens)) {
      const double h_old = h;
      const double before = b.evaluate(corpus, w, span, g.get(), -1.0, SequenceLoss::seq_exp);
      wh[j] += d;
      b.write(w, wh.data());
      if (em) em->compute(host, wh, span, pool.get());
      const double after = b.evaluate(corpus, w, span, g.get(), 1.0, SequenceLoss::seq_exp);
      passes += 2.0 * double(span_tokens) / double(std::max<std::size_t>(host.num_tokens(), 1));
      const double h_new = (h_old - before) + after;
      mass += h_old + before + after;
      ++since;
      if (std::isfinite(before) && std::isfinite(after) && std::isfinite(mass) && h_new > 0 &&
          mass <= policy.refresh_ratio * h_new && since < policy.refresh_period) {
        h = h_new;
        log_h = std::log(h);
        b.scaled_copy(1.0 / h, *g, *r);
        done = true;
      }
    } else {
      wh[j] += d;
      b.write(w, wh.data());
      bool all = false;
      const SentenceSpan moved = index.sentences(j, all);
      if (em && !all) em->compute(host, wh, moved, pool.get());  // a transition moves no state score
    }
    if (!done) full();
    obj.add_passes(passes);
  }

  /// The gradient rule's round: the steepest weight and its line search (no choice where neither
  /// finds a decrease).
  boost::Choice gradient_choice(double smoothing) {
    boost::Choice c;
    const std::size_t j = boost::steepest(rh, bounds);
    if (j == c.feature) return c;
    const boost::LineMinimum m = line_search(j, smoothing);
    if (m.delta == 0) return c;
    c.feature = j;
    c.step.delta = m.delta;
    c.step.decrease = -std::expm1(m.value);
    return c;
  }

  /// H itself where it is finite (exact at a full pass; the incremental sum otherwise).
  double objective() const { return overflowed ? DBL_MAX : h; }

  void state(StateArchive& ar) {
    common_state(ar, k, obj, clock);
    ar.value("log_h", log_h);
    ar.value("overflowed", overflowed);
    ar.value("feature", feature);
    ar.value("delta", delta);
    ar.value("h", h);
    ar.value("mass", mass);
    ar.value("since", since);
    ar.vector("w", b, w);
    ar.vector("r", b, *r);
    ar.vector("g", b, *g);
    improvement.state(ar);
  }

  Objective& obj;
  Backend& b;
  const BackendCorpus& corpus;
  const Corpus& host;
  Vector& w;
  const std::size_t W;
  const boost::Bounds bounds;
  const boost::SentenceIndex index;
  const boost::RoundPolicy policy;
  const std::size_t n;
  VectorPtr r;
  VectorPtr g;  // ∇H, unscaled (meaningless after a log-space round: `overflowed`)
  std::vector<double> wh, rh;
  std::unique_ptr<boost::Emissions> em;  // the gradient rule's exact lines (emissions())
  std::unique_ptr<ThreadPool> pool;      // their sentences on the backend's host threads (the same bits)
  ImprovementTest improvement;
  Stopwatch clock;
  int k = 0;
  double log_h = 0;
  int overflowed = 0;
  std::uint64_t feature = 0;  // the last round's feature and step (reports)
  double delta = 0;
  double passes = 0;
  double h = 0;     // H, kept up to date by the incremental rounds (finite rounds only)
  double mass = 0;  // H at the last full pass + Σ of the subsets' old and new contributions since
  int since = 0;    // incremental rounds since the last full pass
};

class BoostTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    check_loss("boost", obj.loss());  // seq-exp by definition; an explicit other loss is refused
    Backend& b = obj.backend();
    const Corpus* host = b.host_corpus(obj.corpus());
    if (!host) throw Error("boost: the backend keeps no host copy of the corpus (needed for the feature bounds)");
    if (w.size() != b.dims().num_weights()) throw Error("boost: the weight vector does not have the model's size");
    BoostRun run(obj, w, opt, *host);
    const double eps = boost::smoothing(run.n);
    const bool gradient = opt.boost_rule == BoostRule::gradient;
    const int rounds = opt.max_iterations > 0 ? opt.max_iterations : boost::kDefaultRounds;
    int& k = run.k;
    const StateFn state = [&](StateArchive& ar) { run.state(ar); };

    const bool resumed = restore(state);
    if (!resumed) {
      run.passes = 0;
      run.full();
      obj.add_passes(run.passes);
      k = 1;
    }
    b.read(w, run.wh.data());
    stop_reason_ = stop_at_limit("max-iterations", rounds);
    for (bool reported = resumed; k <= rounds; ++k, reported = false) {
      if (!reported) {
        b.read(*run.r, run.rh.data());
        const boost::Choice best = gradient ? run.gradient_choice(eps) : boost::choose(run.rh, run.bounds, eps);
        if (best.feature == boost::Choice().feature) {
          stop_reason_ = std::string("no feature lowers ") + (gradient ? "the loss" : "the bound on the loss") +
                         " (round " + std::to_string(k) + ")";
          break;
        }
        run.feature = best.feature;
        run.delta = best.step.delta;
        run.step(best.feature, best.step.delta);
        const double f = run.objective();
        require_finite("boost", "round", k, f);
        const double gnorm = run.overflowed ? kNoGradientNorm : f * std::sqrt(b.norm2sq(*run.r));
        Progress pr = progress_at(k, obj, w, f, gnorm, run.delta, run.clock);
        pr.state = &state;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      const double f = run.objective();
      if (f < DBL_MAX && run.improvement.converged(f)) {
        stop_reason_ = run.improvement.reason();
        break;
      }
    }
    return run.objective();
  }
};

}  // namespace

std::unique_ptr<Trainer> make_boost_trainer() { return std::make_unique<BoostTrainer>(); }

}  // namespace crfx
