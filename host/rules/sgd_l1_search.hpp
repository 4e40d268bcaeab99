// crfx — sgd-l1's heuristic line search (Zhou et al. 2011, Algorithm 1, Eq. 14) as the scalar rule
// SgdL1Search, which the host runs between a backend's primitives (sgd_l1_search_on_host:
// host/optim/sgd_l1.cpp's search on every backend) and the CUDA backend in one-thread kernels
// between its own (kernels/sgd_search_kernels.cu), so that the host need not read a loss or a
// penalty back per trial (issue 37). Its 3 trials are a fixed count and their rates a function of
// the comparisons, η·2^j for j in −2 … 2, so the host makes every rate a step can take beforehand
// (sgd_l1_step_params) and a device picks one by its index.
#pragma once

#include <cmath>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/host_device.hpp"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_update.hpp"

namespace crfx {

/// Algorithm 1 on a batch objective l (the batch's mean NLL and the support's c1/N·|w| + c2/N·w²):
/// r(0) = η; the rate doubles while the trials are not worse than l at w (`init`), restarts from
/// r(0)·decay and halves once one is; the best trial's rate is taken (η where none is better than
/// +∞: NaN never wins). Exponents, not rates: trial rate η·2^j is SgdL1StepParams' rate[j − kLow].
struct SgdL1Search {
  static constexpr int kTrials = 3;       // Algorithm 1: MaxTrialTime
  static constexpr double kDecay = 0.5;   // Algorithm 1: the rate's changing factor
  double init, best;
  int j, chosen;  // the next trial's exponent, the best trial's
  bool worse_seen;

  SgdL1Search() = default;  // trivial: it lives on the device as bytes
  CRFX_HOST_DEVICE explicit SgdL1Search(double init_)
      : init(init_), best(INFINITY), j(0), chosen(0), worse_seen(false) {}
  /// The index of the next trial's rate (of the rate chosen: chosen_index) in SgdL1StepParams.
  CRFX_HOST_DEVICE int index() const { return j - SgdL1StepParams::kLow; }
  CRFX_HOST_DEVICE int chosen_index() const { return chosen - SgdL1StepParams::kLow; }
  /// The objective at the trial point (its loss plus its penalty).
  CRFX_HOST_DEVICE void tried(double value) {
    if (value < best) {  // NaN never wins
      best = value;
      chosen = j;
    }
    const bool worse = !(value <= init);
    if (worse && !worse_seen) {  // the flag changes: restart below r(0)
      worse_seen = true;
      j = -1;
    } else if (!worse_seen) {
      ++j;
    } else {
      --j;
    }
  }
};

/// A step's rates from η (the trials' own sequence of doublings and halvings, so each is the very
/// double the search reaches), with r·c1/N and log1p(−2·r·c2/N) of each (0 without L2).
inline SgdL1StepParams sgd_l1_step_params(double eta, double c1, double c2, double N, SequenceLoss loss) {
  constexpr int z = -SgdL1StepParams::kLow;  // η's index
  SgdL1StepParams p;
  p.rate[z] = eta;
  p.rate[z + 1] = eta / SgdL1Search::kDecay;
  p.rate[z + 2] = p.rate[z + 1] / SgdL1Search::kDecay;
  p.rate[z - 1] = eta * SgdL1Search::kDecay;
  p.rate[z - 2] = p.rate[z - 1] * SgdL1Search::kDecay;
  for (int k = 0; k < SgdL1StepParams::kRates; ++k) {
    const double r = p.rate[k];
    p.u_step[k] = r * c1 / N;
    p.log_decay[k] = c2 > 0 ? std::log1p(-2.0 * r * c2 / N) : 0.0;
  }
  p.c1 = c1 / N;
  p.c2 = c2 / N;
  p.loss = loss;
  return p;
}

/// The search on the host: `g` holds the batch's gradient (its indices the support) and `nll`
/// its summed NLL at w over the M sentences of `span`, u the L1 penalty per weight so far, q the
/// penalty record (null without L1); each trial applied to the support (q read, not written),
/// scored by a forward-only evaluate and undone exactly from `saved` (scratch). Returns the
/// search after its trials (the rate: p.rate[chosen_index()]).
inline SgdL1Search sgd_l1_search_on_host(Backend& b, const BackendCorpus& corpus, SentenceSpan span,
                                         const SgdL1StepParams& p, Vector& w, const Vector* q,
                                         const SparseVector& g, SparseVector& saved, double nll, double u) {
  SparseGradients& sg = sparse_gradients(b);
  const double M = double(span.count);
  sg.sparse_copy(g, saved);
  sg.gather(w, saved);
  SgdL1Search s(nll / M + sg.sparse_penalty(saved, p.c1, p.c2));  // Eq. 14
  for (int trial = 0; trial < SgdL1Search::kTrials; ++trial) {
    const int k = s.index();
    const double penalty = map_reduce(b, SgdL1Rule{p.rate[k], u + p.u_step[k], p.c1, p.c2, true}, {w, q}, &g);
    const double loss = b.evaluate(corpus, w, span, nullptr, 1.0, p.loss) / M;
    sg.scatter(saved, w);  // exact restore
    s.tried(loss + penalty);
  }
  return s;
}

}  // namespace crfx
