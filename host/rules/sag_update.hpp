// crfx — SAG / SAGA (Schmidt et al. 2015; Defazio et al. 2014): the lazy catch-up of a weight
// through the steps it missed, from the step history the backends keep (LazyStepHistory,
// backend.hpp); and the step's Lipschitz line search (Schmidt et al. 2015, Algorithm 2) as the
// scalar rule SagLineSearch, which the host runs between a backend's primitives
// (lipschitz_search_on_host: the CPU backend) and the CUDA backend in one-thread kernels between
// its own (kernels/sag_kernels.cu), so that the host need not read a loss back per trial (issue 37).
#pragma once

#include <cstddef>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/host_device.hpp"
#include "rules/sag_sampler.hpp"

namespace crfx {

/// Algorithm 2 of Schmidt et al. 2015 on a span's mean loss f_B = (1/B)·Σ NLL_i: from L0, L is
/// doubled until the trial step w − g/(L·B) decreases f_B by at least ‖g‖²/(2·L·B) — in the
/// span's summed units, f(trial) < f − g²/(2·L·B) — at most kMaxTrials times; no trial at all
/// when ‖g/B‖² ≤ 1e-8 (the gradient is negligible). A trial loss that is not finite fails.
struct SagLineSearch {
  static constexpr unsigned kMaxTrials = 200;
  double f, g2, B, L;  // the span's loss and ‖g‖² at w, its size, the current L
  unsigned trials;     // trial losses seen
  bool done;           // L accepted (or the trials exhausted, or none needed)

  SagLineSearch() = default;  // trivial: it crosses to and from the device as bytes
  CRFX_HOST_DEVICE SagLineSearch(double f_, double g2_, double B_, double L0)
      : f(f_), g2(g2_), B(B_), L(L0), trials(0), done(!(g2_ / (B_ * B_) > 1e-8)) {}
  /// The trial step size 1/(L·B).
  CRFX_HOST_DEVICE double step() const { return 1.0 / (L * B); }
  /// The loss at the trial point w − step()·g: accept L, or double it.
  CRFX_HOST_DEVICE void tried(double ft) {
    ++trials;
    if (fabs(ft) <= 1.7976931348623157e308 && ft < f - g2 / (2.0 * L * B)) {  // finite, enough decrease
      done = true;
    } else {
      L *= 2.0;
      done = trials >= kMaxTrials;
    }
  }
};

/// A scheduled step's scalars (IncrementalGradients::incremental_schedule) from the L its line
/// search found: the step size α = 1/(lip_mult·L + λ), the lazy step (a, b, τ) = (1 − αλ, α/seen
/// or α/n, αμ₁) and SAGA's memory coefficient α(1/(B·p·n) − 1/n)/a — the trainer's formulas
/// (host/optim/sag.cpp), on the host and in the CUDA backend's one-thread kernel alike.
/// A step size α given as such (SAG-NUS: SagSamplerRef::step_size's, from L̄ and L_max).
struct SagStepSize {
  double alpha;
};
struct SagStepScalars {
  double alpha, a, b, tau, coef;
  CRFX_HOST_DEVICE SagStepScalars(const SagStepParams& p, double L)
      : SagStepScalars(p, SagStepSize{1.0 / (mul_rn(p.lip_mult, L) + p.lambda)}) {}
  CRFX_HOST_DEVICE SagStepScalars(const SagStepParams& p, SagStepSize step)
      : alpha(step.alpha),
        a(sub_rn(1.0, mul_rn(alpha, p.lambda))),
        b(alpha / (p.saga ? p.nd : p.seen)),
        tau(mul_rn(alpha, p.mu1)),
        coef(p.saga ? mul_rn(alpha, 1.0 / mul_rn(mul_rn(p.B, p.prob), p.nd) - 1.0 / p.nd) / a : 0.0) {}
};

/// The line search on the host: incremental_evaluate, then per trial incremental_trial, a
/// forward-only evaluate of the span and incremental_restore, each trial's loss read back — the
/// CPU backend's incremental_search (and the CUDA backend's for a span of several sentences).
inline LipschitzFound lipschitz_search_on_host(Backend& b, IncrementalGradients& ig, IncrementalState& state,
                                               const BackendCorpus& corpus, SentenceSpan span, Vector& w,
                                               double L0) {
  double g2 = 0;
  const double f = ig.incremental_evaluate(state, w, &g2);
  SagLineSearch ls(f, g2, double(span.count), L0);
  while (!ls.done) {
    ig.incremental_trial(state, w, ls.step());
    const double ft = b.evaluate(corpus, w, span, nullptr, 1.0);
    ig.incremental_restore(state, w);
    ls.tried(ft);
  }
  return {ls.L, ls.trials};
}

/// The end of a scheduled step whose search found `found` (a span of `count` sentences): the
/// state's scalars, incremental_commit, incremental_step, L ← found.L·decay.
inline void finish_sag_step(IncrementalGradients& ig, IncrementalState& state, std::size_t count,
                            const SagStepParams& p, LipschitzFound found, Vector& w, Vector& d) {
  SagScalars& s = state.scalars;
  const SagStepScalars x(p, found.L);
  s.trials += found.trials;
  s.alpha = x.alpha;
  if (p.saga) {
    const std::vector<double> coef(count, x.coef);
    ig.incremental_commit(state, d, w, coef.data());
  } else {
    ig.incremental_commit(state, d, w, nullptr);
  }
  ig.incremental_step(state, x.a, x.b, x.tau, w, d);
  s.L = found.L * p.decay;
}

/// incremental_schedule through the primitives, one step at a time on the host: the CPU
/// backend's, and the CUDA backend's for a span of several sentences.
inline void schedule_on_host(IncrementalGradients& ig, IncrementalState& state, SentenceSpan span,
                             const SagStepParams& p, Vector& w, Vector& d) {
  ig.incremental_sync(state, span, w, d);
  const LipschitzFound found = ig.incremental_search(state, w, state.scalars.L);
  finish_sag_step(ig, state, span.count, p, found, w, d);
}

/// The end of a drawn step (IncrementalGradients::incremental_schedule_drawn) on the host's
/// primitives, its sentence drawn (x) and synced: the search from its L_i, L_i scaled to the L
/// found, α the sampler's, then SagStepScalars with the sentences seen and x's probability, the
/// commit and the lazy step — take_step's arithmetic for a span of one (host/optim/sag.cpp).
inline void finish_drawn_step(IncrementalGradients& ig, IncrementalState& state, const SagSamplerRef& sampler,
                              SagDraw x, SagStepParams p, Vector& w, Vector& d) {
  const double L0 = sampler.get(x.id);
  const LipschitzFound found = ig.incremental_search(state, w, L0);
  sampler.found(&x.id, 1, L0, found.L);
  p.seen = double(sampler.s->m);
  p.prob = x.prob;
  const SagStepScalars sc(p, SagStepSize{sampler.step_size(p.lip_mult, p.lambda)});
  state.scalars.trials += found.trials;
  state.scalars.alpha = sc.alpha;
  ig.incremental_commit(state, d, w, p.saga ? &sc.coef : nullptr);
  ig.incremental_step(state, sc.a, sc.b, sc.tau, w, d);
}

/// The end of a drawn span of several sentences (its draws `ids`, `prob`; synced): the search
/// from the span's mean L_i, the span's L_i scaled alike, α the sampler's, then SagStepScalars
/// with the sentences seen and, for SAGA, each member's coefficient from its own probability.
inline void finish_drawn_span(IncrementalGradients& ig, IncrementalState& state, const SagSamplerRef& sampler,
                              const std::vector<std::uint32_t>& ids, const std::vector<double>& prob,
                              SagStepParams p, Vector& w, Vector& d) {
  const double L0 = sampler.span_lipschitz(ids.data(), ids.size());
  const LipschitzFound found = ig.incremental_search(state, w, L0);
  sampler.found(ids.data(), ids.size(), L0, found.L);
  p.seen = double(sampler.s->m);
  const SagStepSize step{sampler.step_size(p.lip_mult, p.lambda)};
  std::vector<double> coef(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    p.prob = prob[i];
    coef[i] = SagStepScalars(p, step).coef;
  }
  const SagStepScalars sc(p, step);
  state.scalars.trials += found.trials;
  state.scalars.alpha = sc.alpha;
  ig.incremental_commit(state, d, w, p.saga ? coef.data() : nullptr);
  ig.incremental_step(state, sc.a, sc.b, sc.tau, w, d);
}

/// incremental_schedule_drawn on the host, one step at a time: the CPU backend's. A span of
/// p.B > 1 sentences: B distinct draws (SagSamplerRef::draw_span) and finish_drawn_span.
inline void schedule_drawn_on_host(IncrementalGradients& ig, IncrementalState& state, const SagSamplerRef& sampler,
                                   const SagStepParams& p, Vector& w, Vector& d) {
  if (p.B > 1) {
    std::vector<std::uint32_t> ids(std::size_t(p.B));
    std::vector<double> prob(ids.size());
    sampler.draw_span(ids.data(), prob.data(), ids.size());
    ig.incremental_sync(state, SentenceSpan{ids.data(), ids.size()}, w, d);
    finish_drawn_span(ig, state, sampler, ids, prob, p, w, d);
    return;
  }
  const SagDraw x = sampler.draw_one();
  ig.incremental_sync(state, SentenceSpan{&x.id, 1}, w, d);
  finish_drawn_step(ig, state, sampler, x, p, w, d);
}

/// Steps stamp+1 … k applied at once to a weight whose gradient memory is d — the composite of
/// w ← a·w − b·d and the L1 prox — from the cumulative products and sums P, S, R of the history.
struct SagCatchUp {
  double ratio, sd, r;  // P_k / P_k0, P_k0·(S_k − S_k0), P_k0·(R_k − R_k0)
  CRFX_HOST_DEVICE SagCatchUp(const double* P, const double* S, const double* R, unsigned long long k0,
                              unsigned long long k)
      : ratio(P[k] / P[k0]), sd(mul_rn(P[k0], sub_rn(S[k], S[k0]))), r(mul_rn(P[k0], sub_rn(R[k], R[k0]))) {}
  CRFX_HOST_DEVICE double operator()(double w, double d) const {
    const double x = sub_rn(w, mul_rn(d, sd));
    if (r > 0) {
      const double m = fabs(x) - r;
      return m > 0 ? mul_rn(ratio, copysign(m, x)) : 0.0;
    }
    return mul_rn(ratio, x);
  }
};

}  // namespace crfx
