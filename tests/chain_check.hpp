// A chain's scores held by value for the chain tests (tests/test_chain.cpp,
// tests/test_chain_loss.cpp): state and transition scores, per-position edge matrices, and the
// ChainScores view of them.
#pragma once

#include <cstddef>
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

}  // namespace crfx::test
