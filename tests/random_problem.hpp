// Random small CRF problems for the numerical tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "crfx/internal/corpus.hpp"

namespace crfx::test {

/// Dims whose weight vector is n plain entries (n attributes, one label, no transitions): the
/// vector algebra's and the element rules' tests.
inline Dims vector_dims(std::size_t n) {
  Dims d;
  d.A = static_cast<std::uint32_t>(n);
  d.L = 1;
  d.transitions = false;
  return d;
}

struct RandomProblem {
  Dims dims;
  Corpus corpus;
};

/// `sentences` sentences of length 1 … max_len; each token has 1–4 of A state attributes with
/// values in (0.5, 1.5) (binary: no values stored, every value 1, as CoNLL data compiles), and,
/// when E > 0, 0–2 edge attributes from t = 1 on.
inline RandomProblem random_problem(std::uint32_t L, std::uint32_t A, std::uint32_t E,
                                    std::size_t sentences, std::size_t max_len, std::uint64_t seed,
                                    bool binary = false) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> label(0, L - 1), attr(0, A - 1),
      edge(0, E ? E - 1 : 0);
  std::uniform_int_distribution<std::size_t> len(1, max_len), items(1, 4), eitems(0, 2);
  std::uniform_real_distribution<double> value(0.5, 1.5);
  RandomProblem p;
  p.dims.L = L;
  p.dims.A = A;
  p.dims.E = E;
  p.dims.transitions = true;
  Corpus& c = p.corpus;
  for (std::size_t s = 0; s < sentences; ++s) {
    const std::size_t T = len(rng);
    for (std::size_t t = 0; t < T; ++t) {
      const std::size_t k = items(rng);
      for (std::size_t i = 0; i < k; ++i) {
        c.state_ids.push_back(attr(rng));
        if (!binary) c.state_values.push_back(value(rng));
      }
      c.state_offsets.push_back(c.state_ids.size());
      if (E > 0 && t > 0) {
        const std::size_t ke = eitems(rng);
        for (std::size_t i = 0; i < ke; ++i) {
          c.edge_ids.push_back(edge(rng));
          if (!binary) c.edge_values.push_back(value(rng));
        }
      }
      c.edge_offsets.push_back(c.edge_ids.size());
      c.labels.push_back(label(rng));
    }
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(s + 1);
  }
  return p;
}

inline std::vector<double> random_weights(std::size_t n, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> w(n);
  for (auto& x : w) x = d(rng);
  return w;
}

/// A problem with a sentence of more than 286 tokens and 12 labels, so 1/p = 12^T > DBL_MAX at
/// w = 0, and labels a linear rule of the attributes gives (argmax_y Σ_a U[a][y], U random), so
/// that a model can fit them and H at the optimum is small.
inline RandomProblem beyond_the_doubles() {
  RandomProblem p = random_problem(12, 40, 0, 8, 500, 5);
  std::size_t longest = 0;
  for (std::size_t i = 0; i < p.corpus.num_sentences(); ++i) longest = std::max(longest, p.corpus.length(i));
  if (longest <= 290) throw std::logic_error("beyond_the_doubles: the longest sentence has " + std::to_string(longest) + " tokens");
  const std::vector<double> U = random_weights(40 * 12, 1.0, 9);
  for (std::size_t t = 0; t < p.corpus.num_tokens(); ++t) {
    double score[12] = {};
    for (std::size_t k = p.corpus.state_offsets[t]; k < p.corpus.state_offsets[t + 1]; ++k)
      for (std::size_t y = 0; y < 12; ++y) score[y] += p.corpus.state_value(k) * U[p.corpus.state_ids[k] * 12 + y];
    p.corpus.labels[t] = std::uint32_t(std::max_element(score, score + 12) - score);
  }
  return p;
}

/// A sparse layout (corpus.hpp WeightGroups) for `d`: each row lists each of its slots with
/// probability `density` (1: full rows), so gold pairs may be absent too; no transition row when
/// d.transitions is false.
inline std::shared_ptr<const WeightLayout> random_layout(const Dims& d, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution keep(density);
  auto layout = std::make_shared<WeightLayout>();
  layout->offsets.push_back(0);
  const std::size_t groups = std::size_t(d.A) + 1 + d.E;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t width = g < d.A ? d.L : std::size_t(d.L) * d.L;
    if (g != d.A || d.transitions)
      for (std::size_t j = 0; j < width; ++j)
        if (density >= 1.0 || keep(rng)) layout->slots.push_back(std::uint32_t(j));
    layout->offsets.push_back(layout->slots.size());
  }
  return layout;
}

/// For each weight of `sparse`'s layout, its index in the dense layout of the same sizes.
inline std::vector<std::size_t> dense_index(const Dims& sparse) {
  Dims dense = sparse;
  dense.layout = nullptr;
  const WeightGroups s = sparse.groups(), dn = dense.groups();
  std::vector<std::size_t> index(sparse.num_weights());
  for (std::uint32_t g = 0; g < s.count(); ++g)
    for (std::size_t k = s.begin(g); k < s.begin(g) + s.size(g); ++k) index[k] = dn.begin(g) + s.slot(k, g);
  return index;
}

/// `w` over `sparse`'s layout spread over the dense layout: zero where a row has no weight.
inline std::vector<double> dense_weights(const Dims& sparse, const std::vector<double>& w) {
  Dims dense = sparse;
  dense.layout = nullptr;
  std::vector<double> out(dense.num_weights(), 0.0);
  const std::vector<std::size_t> index = dense_index(sparse);
  for (std::size_t k = 0; k < w.size(); ++k) out[index[k]] = w[k];
  return out;
}

}  // namespace crfx::test
