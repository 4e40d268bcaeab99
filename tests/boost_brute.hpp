// Brute force for the boosting tests (tests/test_boost.cpp, tests/test_boost_gradient.cpp): Φ and
// ψ = Φ(y) − Φ(gold) of every label sequence of a tiny problem, the exact feature bounds, H and
// r = ∇H/H by enumeration, a helper that trains boost and reports each round's weights, and one
// that records a run's rounds under a round policy (run_rounds).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/boost.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx::test::boost_brute {

/// Φ(x_s, y) as (weight, value) additions, every feature the layout has.
inline std::map<std::size_t, double> features(const RandomProblem& p, std::size_t s, const std::vector<std::size_t>& y) {
  const Corpus& c = p.corpus;
  const WeightGroups wg = p.dims.groups();
  const std::size_t t0 = c.sentence_offsets[s], T = c.length(s), L = p.dims.L;
  std::map<std::size_t, double> phi;
  auto add = [&](std::uint32_t g, std::size_t slot, double v) {
    const std::size_t k = wg.find(g, std::uint32_t(slot));
    if (k != WeightGroups::kNoWeight) phi[k] += v;
  };
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t i = c.state_offsets[t0 + t]; i < c.state_offsets[t0 + t + 1]; ++i)
      add(c.state_ids[i], y[t], c.state_value(i));
    if (t == 0) continue;
    if (p.dims.transitions) add(wg.transitions(), y[t - 1] * L + y[t], 1.0);
    for (std::size_t i = c.edge_offsets[t0 + t]; i < c.edge_offsets[t0 + t + 1]; ++i)
      add(wg.edge(c.edge_ids[i]), y[t - 1] * L + y[t], c.edge_value(i));
  }
  return phi;
}

/// Calls f(y) for every label sequence of length T.
template <class F>
void each_sequence(std::size_t T, std::size_t L, F&& f) {
  std::vector<std::size_t> y(T, 0);
  for (;;) {
    f(y);
    std::size_t t = 0;
    while (t < T && ++y[t] == L) y[t++] = 0;
    if (t == T) return;
  }
}

inline std::vector<std::size_t> gold_of(const RandomProblem& p, std::size_t s) {
  const std::size_t t0 = p.corpus.sentence_offsets[s];
  std::vector<std::size_t> y;
  for (std::size_t t = 0; t < p.corpus.length(s); ++t) y.push_back(p.corpus.labels[t0 + t]);
  return y;
}

/// ψ = Φ(y) − Φ(gold) as a dense vector.
inline std::vector<double> psi(const RandomProblem& p, std::size_t s, const std::vector<std::size_t>& y,
                        const std::map<std::size_t, double>& gold) {
  std::vector<double> v(p.dims.num_weights(), 0.0);
  for (const auto& [k, x] : features(p, s, y)) v[k] += x;
  for (const auto& [k, x] : gold) v[k] -= x;
  return v;
}

inline boost::Bounds brute_bounds(const RandomProblem& p) {
  boost::Bounds b;
  b.upper.assign(p.dims.num_weights(), 0.0);
  b.lower.assign(p.dims.num_weights(), 0.0);
  for (std::size_t s = 0; s < p.corpus.num_sentences(); ++s) {
    const auto gold = features(p, s, gold_of(p, s));
    each_sequence(p.corpus.length(s), p.dims.L, [&](const std::vector<std::size_t>& y) {
      const std::vector<double> v = psi(p, s, y, gold);
      for (std::size_t k = 0; k < v.size(); ++k) {
        b.upper[k] = std::max(b.upper[k], v[k]);
        b.lower[k] = std::min(b.lower[k], v[k]);
      }
    });
  }
  return b;
}

/// H(w) = Σ_s Σ_y exp⟨w, ψ⟩ and r = Σ exp⟨w, ψ⟩·ψ / H, by enumeration.
struct BruteRound {
  double h = 0;
  std::vector<double> r;
};
inline BruteRound brute_round(const RandomProblem& p, const std::vector<double>& w) {
  BruteRound out;
  out.r.assign(p.dims.num_weights(), 0.0);
  for (std::size_t s = 0; s < p.corpus.num_sentences(); ++s) {
    const auto gold = features(p, s, gold_of(p, s));
    each_sequence(p.corpus.length(s), p.dims.L, [&](const std::vector<std::size_t>& y) {
      const std::vector<double> v = psi(p, s, y, gold);
      double score = 0;
      for (std::size_t k = 0; k < v.size(); ++k) score += w[k] * v[k];
      const double e = std::exp(score);
      out.h += e;
      for (std::size_t k = 0; k < v.size(); ++k) out.r[k] += e * v[k];
    });
  }
  for (double& x : out.r) x /= out.h;
  return out;
}

/// A tiny problem: L labels, sentences of 1–3 tokens, edge attributes, some negative values.
inline RandomProblem tiny(std::uint32_t L, std::uint64_t seed, int layout = 0) {
  RandomProblem p = random_problem(L, 5, 2, 6, 3, seed);
  for (std::size_t i = 0; i < p.corpus.state_values.size(); i += 3) p.corpus.state_values[i] *= -1;
  for (std::size_t i = 1; i < p.corpus.edge_values.size(); i += 3) p.corpus.edge_values[i] *= -1;
  if (layout == 1) p.dims.layout = std::make_shared<const WeightLayout>(observed_layout(p.corpus, p.dims));
  if (layout == 2) p.dims.layout = test::random_layout(p.dims, 0.5, seed + 1);
  return p;
}

/// Trains boost on p, calling `round(k, w, objective, active)` at every report.
template <class F>
double train_boost(Backend& b, const BackendCorpus& corpus, std::vector<double>& w, const TrainOptions& o,
                   F&& round, std::string* reason = nullptr) {
  Objective obj(b, corpus, o.c1, o.c2);
  auto wv = b.vector(b.dims().num_weights());
  auto trainer = find_trainer("boost").make();
  const double f = trainer->train(obj, *wv, o, [&](const Progress& pr, const Vector& x) {
    round(pr, to_host(b, x));
    return true;
  });
  w = to_host(b, *wv);
  if (reason) *reason = trainer->stop_reason();
  return f;
}

/// Sets boost::round_policy() for a scope.
struct PolicyGuard {
  boost::RoundPolicy saved = boost::round_policy();
  explicit PolicyGuard(const boost::RoundPolicy& p) { boost::round_policy() = p; }
  ~PolicyGuard() { boost::round_policy() = saved; }
};

/// One run's rounds: objective, gradient norm, weights after each round, passes.
struct Rounds {
  std::vector<double> objective, gnorm, passes;
  std::vector<std::vector<double>> w;
};
inline Rounds run_rounds(const RandomProblem& p, const boost::RoundPolicy& policy, int rounds, BoostRule rule,
                         unsigned threads = 1) {
  PolicyGuard guard(policy);
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  TrainOptions o;
  o.max_iterations = rounds;
  o.delta = 0;
  o.boost_rule = rule;
  Rounds run;
  std::vector<double> w;
  train_boost(b, *corpus, w, o, [&](const Progress& pr, const std::vector<double>& x) {
    run.objective.push_back(pr.objective);
    run.gnorm.push_back(pr.gradient_norm);
    run.passes.push_back(pr.passes);
    run.w.push_back(x);
  });
  return run;
}

}  // namespace crfx::test::boost_brute
