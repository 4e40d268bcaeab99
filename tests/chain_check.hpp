// A chain's scores held by value for the chain tests (tests/test_chain.cpp,
// tests/test_chain_loss.cpp): state and transition scores, per-position edge matrices, and the
// ChainScores view of them; random ones.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "cpu/chain.hpp"

namespace crfx::test {

struct Chain {
  std::size_t T, L;
  std::vector<double> state, trans;      // [T][L], [L][L]
  std::vector<std::vector<double>> pos;  // [T] [L][L] or empty
  std::vector<const double*> pos_ptr;
  bool has_edge(std::size_t t) const { return t < pos.size() && !pos[t].empty(); }
  ChainScores scores() {
    ChainScores x;
    x.T = T;
    x.L = L;
    x.state = state.data();
    x.trans = trans.data();
    pos_ptr.assign(T, nullptr);
    bool any = false;
    for (std::size_t t = 0; t < pos.size(); ++t)
      if (!pos[t].empty()) {
        pos_ptr[t] = pos[t].data();
        any = true;
      }
    if (any) x.edge = pos_ptr.data();
    return x;
  }
};

/// Normal scores of the given scale; with `edges`, a full matrix at about half the positions ≥ 1
/// (with `force_edge`, at least one when T ≥ 2).
inline Chain random_chain(std::size_t T, std::size_t L, double scale, bool edges, std::mt19937_64& rng,
                          bool force_edge = false) {
  std::normal_distribution<double> d(0.0, scale);
  Chain c{T, L, std::vector<double>(T * L), std::vector<double>(L * L), {}, {}};
  for (auto& v : c.state) v = d(rng);
  for (auto& v : c.trans) v = d(rng);
  if (edges && T >= 2) {
    c.pos.resize(T);
    const std::size_t forced = force_edge ? 1 + rng() % (T - 1) : 0;
    for (std::size_t t = 1; t < T; ++t)
      if (t == forced || rng() % 2) {
        c.pos[t].resize(L * L);
        for (auto& v : c.pos[t]) v = d(rng);
      }
  }
  return c;
}

}  // namespace crfx::test
