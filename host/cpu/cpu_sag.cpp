// crfx — CPU backend: the SAG / SAGA primitives (seed 004; contracts in include/crfx/internal/backend.hpp).
//
// Memory ("Mixed", seed 004 §4.2): per token its node marginals [L], per sentence the pairwise
// marginals summed over positions [L][L], and — with enriched edge features (E > 0) — per
// position t ≥ 1 where edge items fire that position's pairwise marginals [L][L] (edge weights
// depend on the position, so the sum is not enough there). Nothing depends on the number of
// features. All start at the gold indicators.
//
// Lazy ("just-in-time") steps: incremental_step only appends (a, b, τ) to the cumulative arrays
//   P_k = Π a_t,  S_k = Σ b_t/P_t,  R_k = Σ τ_t/P_t,
// and every weight group (an attribute's L weights, the transitions, an edge attribute's L²
// block) carries the step count at which it was last brought up to date. incremental_sync brings only the
// groups of the current span up to date, in O(1) per weight:
//   w ← (P_k/P_{k0}) · soft(w − d·P_{k0}(S_k − S_{k0}), P_{k0}(R_k − R_{k0})),
// so a step costs O(weights the span touches), not O(#weights). incremental_flush catches up every group
// (parallel over blocks of groups, element-wise: independent of the thread count) and restarts
// the arrays; incremental_step flushes by itself when P would underflow.
//
// Determinism: per-sentence forward-backward runs in parallel into per-sentence slots; every
// reduction into g, d and w runs in span order on one thread, so results do not depend on the
// number of threads.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "rules/sag_update.hpp"

namespace crfx {
namespace {

constexpr std::size_t kNoSlot = ~std::size_t(0);

struct CpuIncrementalState final : IncrementalState, LazyStepHistory {
  const BackendCorpus* bc = nullptr;  // the corpus incremental_create was given (incremental_search)
  const Corpus* c = nullptr;
  std::size_t L = 0, LL = 0, A = 0, E = 0;
  bool transitions = true;
  WeightGroups wg;  // group ranges (corpus.hpp), as the CUDA backend and its kernels use them

  // Stored marginals.
  std::vector<double> node;             // [N][L]
  std::vector<double> pair;             // [S][L][L]
  std::vector<std::size_t> edge_slot;   // [N] slot of a position with edge items, or kNoSlot
  std::vector<double> edge;             // [slots][L][L]

  // Lazy bookkeeping (P, S, R: LazyStepHistory).
  std::vector<std::uint32_t> stamp;             // [groups]

  // Current span.
  std::vector<std::uint32_t> span;
  std::vector<std::size_t> tok;        // [span + 1] token offsets of the span's sentences
  std::vector<std::uint32_t> groups;   // touched groups, in order of first touch (SpanGroups)
  SpanGroups planner;
  std::vector<std::uint32_t> scratch_ids;  // incremental_sync's distinctness check
  bool planned = false;    // incremental_sync succeeded for the current span
  bool evaluated = false;

  // Pending marginals of the span and scratch.
  std::vector<double> new_node;        // [span tokens][L]
  std::vector<double> new_pair;        // [span][L][L]
  std::vector<double> new_edge;        // [span tokens][L][L] (E > 0; rows of edge positions)
  std::vector<double> losses;          // [span]
  std::vector<std::vector<double>> pair_at;  // [workers] [T][L][L]
  std::vector<double> g;               // [num_weights], zero outside `groups`
  std::vector<double> saved;           // trial: gathered values of `groups`


  /// The composite map of steps stamp+1 … k on group `gid` (see backend.hpp).
  void catch_up(std::uint32_t gid, double* w, const double* d) {
    const std::size_t k0 = stamp[gid], kk = k();
    if (k0 == kk) return;
    const SagCatchUp step(P.data(), S.data(), R.data(), k0, kk);
    const std::size_t b = wg.begin(gid), e = b + wg.size(gid);
    for (std::size_t j = b; j < e; ++j) w[j] = step(w[j], d[j]);
    stamp[gid] = std::uint32_t(kk);
  }
};

CpuIncrementalState& St(IncrementalState& s) {
  auto* p = dynamic_cast<CpuIncrementalState*>(&s);
  if (!p) throw Error("internal: SAG state does not belong to the CPU backend");
  return *p;
}

}  // namespace

IncrementalStatePtr CpuBackend::incremental_create(const BackendCorpus& corpus) {
  const Corpus& c = corpus_of(corpus);
  if (!c.labeled()) throw Error("SAG needs every training token labeled");
  auto st = std::make_unique<CpuIncrementalState>();
  CpuIncrementalState& s = *st;
  s.bc = &corpus;
  s.c = &c;
  s.L = dims_.L;
  s.LL = s.L * s.L;
  s.A = dims_.A;
  s.E = dims_.E;
  s.transitions = dims_.transitions;
  s.wg = dims_.groups();
  const std::size_t N = c.num_tokens(), L = s.L, LL = s.LL;
  s.node.assign(N * L, 0.0);
  s.pair.assign(c.num_sentences() * LL, 0.0);
  if (s.E > 0) s.edge_slot.assign(N, kNoSlot);
  std::size_t slots = 0;
  for (std::size_t sid = 0; sid < c.num_sentences(); ++sid) {
    const std::size_t t0 = c.sentence_offsets[sid], T = c.length(sid);
    for (std::size_t t = 0; t < T; ++t) {
      const std::uint32_t y = c.labels[t0 + t];
      s.node[(t0 + t) * L + y] = 1.0;
      if (t == 0) continue;
      const std::uint32_t yp = c.labels[t0 + t - 1];
      s.pair[sid * LL + yp * L + y] += 1.0;
      if (s.E > 0 && c.edge_offsets[t0 + t + 1] > c.edge_offsets[t0 + t]) {
        s.edge_slot[t0 + t] = slots++;
        s.edge.resize(slots * LL, 0.0);
        s.edge[(slots - 1) * LL + yp * L + y] = 1.0;
      }
    }
  }
  s.stamp.assign(s.wg.count(), 0);
  s.g.assign(dims_.num_weights(), 0.0);
  s.pair_at.resize(pool_.size());
  return st;
}

void CpuBackend::incremental_sync(IncrementalState& state, SentenceSpan span, Vector& w, const Vector& d) {
  CpuIncrementalState& s = St(state);
  const Corpus& c = *s.c;
  double* W = data(w).data();
  const double* D = data(d).data();
  if (data(w).size() != s.g.size() || data(d).size() != s.g.size())
    throw Error("internal: SAG vectors have the wrong size");
  // A refused span leaves nothing to evaluate, commit or restore, and no state half-changed:
  // the ids are checked before anything is touched.
  s.evaluated = false;
  s.planned = false;
  for (std::size_t i = 0; i < span.count; ++i)
    if (span[i] >= c.num_sentences()) throw Error("internal: SAG sentence id out of range");
  {  // distinct sentences (a repeated one would be committed twice)
    std::vector<std::uint32_t>& sorted = s.scratch_ids;  // reused: no allocation per step
    sorted.resize(span.count);
    for (std::size_t i = 0; i < span.count; ++i) sorted[i] = span[i];
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw Error("internal: SAG span repeats a sentence");
  }
  // g is zero outside the groups of the span it was formed on: clear those first.
  for (std::uint32_t gid : s.groups) {
    const std::size_t b = s.wg.begin(gid);
    std::fill(s.g.begin() + b, s.g.begin() + b + s.wg.size(gid), 0.0);
  }
  s.span.assign(span.count, 0);
  s.tok.assign(1, 0);
  for (std::size_t i = 0; i < span.count; ++i) {
    s.span[i] = span[i];
    s.tok.push_back(s.tok.back() + c.length(span[i]));
  }
  // First-touch order, not ascending: incremental_evaluate sums ‖g‖² in this order.
  s.planner.plan(c, span, s.wg, s.transitions, s.groups, false);
  for (std::uint32_t gid : s.groups) s.catch_up(gid, W, D);
  s.planned = true;
}

LipschitzFound CpuBackend::incremental_search(IncrementalState& state, Vector& w, double L0) {
  CpuIncrementalState& s = St(state);
  if (!s.planned) throw Error("internal: incremental_search without a successful incremental_sync");
  return lipschitz_search_on_host(*this, *this, s, *s.bc, SentenceSpan{s.span.data(), s.span.size()}, w, L0);
}

double CpuBackend::incremental_evaluate(IncrementalState& state, const Vector& w, double* grad_norm2) {
  CpuIncrementalState& s = St(state);
  if (!s.planned) throw Error("internal: incremental_evaluate without a successful incremental_sync");
  const Corpus& c = *s.c;
  const std::size_t L = s.L, LL = s.LL, n = s.span.size(), tokens = s.tok.back();
  Prepared p;
  prepare(w, p);
  s.new_node.resize(tokens * L);
  s.new_pair.assign(n * LL, 0.0);
  if (s.E > 0) s.new_edge.resize(tokens * LL);
  s.losses.resize(n);

  // Phase 1 (parallel): forward-backward per sentence into its own slots.
  pool_.run(n, [&](std::size_t i, unsigned worker) {
    Work& work = *work_[worker];
    const std::size_t sid = s.span[i], t0 = c.sentence_offsets[sid];
    ChainScores x = scores(c, p, sid, work);
    const std::size_t T = x.T;
    double* at = nullptr;
    if (x.edge) {
      auto& buf = s.pair_at[worker];
      if (buf.size() < T * LL) buf.resize(T * LL);
      at = buf.data();
    }
    ChainOutputs out{s.new_node.data() + s.tok[i] * L, s.new_pair.data() + i * LL, at};
    const double log_z = forward_backward(x, out, work.chain, log_space_only_);
    work.gold.assign(c.labels.begin() + t0, c.labels.begin() + t0 + T);
    s.losses[i] = log_z - path_score(x, work.gold.data());
    if (s.E > 0) {
      for (std::size_t t = 1; t < T; ++t) {
        if (s.edge_slot[t0 + t] == kNoSlot) continue;
        std::copy(at + t * LL, at + (t + 1) * LL, s.new_edge.data() + (s.tok[i] + t) * LL);
      }
    }
  });

  // Phase 2 (span order, one thread): g = Σ X_iᵀ(μ_new − gold) on the touched groups.
  double* g = s.g.data();
  double loss = 0;
  std::vector<double> diff(std::max(L, LL));
  for (std::size_t i = 0; i < n; ++i) {
    loss += s.losses[i];
    const std::size_t sid = s.span[i], t0 = c.sentence_offsets[sid], T = c.length(sid);
    for (std::size_t t = 0; t < T; ++t) {
      const double* mu = s.new_node.data() + (s.tok[i] + t) * L;
      std::copy(mu, mu + L, diff.begin());
      diff[c.labels[t0 + t]] -= 1.0;
      for (std::size_t k = c.state_offsets[t0 + t]; k < c.state_offsets[t0 + t + 1]; ++k) {
        const double v = c.state_value(k);
        if (!s.wg.dense()) {
          for_each_weight(s.wg, c.state_ids[k], [&](std::size_t q, std::size_t j) { g[q] += v * diff[j]; });
          continue;
        }
        double* gr = g + std::size_t(c.state_ids[k]) * L;
        for (std::size_t y = 0; y < L; ++y) gr[y] += v * diff[y];
      }
      if (s.E == 0 || t == 0 || s.edge_slot[t0 + t] == kNoSlot) continue;
      const double* me = s.new_edge.data() + (s.tok[i] + t) * LL;
      std::copy(me, me + LL, diff.begin());
      diff[c.labels[t0 + t - 1] * L + c.labels[t0 + t]] -= 1.0;
      for (std::size_t k = c.edge_offsets[t0 + t]; k < c.edge_offsets[t0 + t + 1]; ++k) {
        const double v = c.edge_value(k);
        for_each_weight(s.wg, s.wg.edge(c.edge_ids[k]), [&](std::size_t q, std::size_t j) { g[q] += v * diff[j]; });
      }
    }
    if (s.transitions) {
      const double* mp = s.new_pair.data() + i * LL;
      for_each_weight(s.wg, s.wg.transitions(), [&](std::size_t q, std::size_t j) { g[q] += mp[j]; });
      for (std::size_t t = 1; t < T; ++t) {
        const std::size_t q = s.wg.find(s.wg.transitions(), c.labels[t0 + t - 1] * L + c.labels[t0 + t]);
        if (q != WeightGroups::kNoWeight) g[q] -= 1.0;
      }
    }
  }
  double g2 = 0;
  for (std::uint32_t gid : s.groups) {
    const std::size_t b = s.wg.begin(gid), e = b + s.wg.size(gid);
    for (std::size_t j = b; j < e; ++j) g2 += g[j] * g[j];
  }
  if (grad_norm2) *grad_norm2 = g2;
  s.evaluated = true;
  return loss;
}

void CpuBackend::incremental_trial(IncrementalState& state, Vector& w, double step) {
  CpuIncrementalState& s = St(state);
  if (!s.evaluated) throw Error("internal: incremental_trial before incremental_evaluate");
  double* W = data(w).data();
  s.saved.clear();
  for (std::uint32_t gid : s.groups) {
    const std::size_t b = s.wg.begin(gid), e = b + s.wg.size(gid);
    s.saved.insert(s.saved.end(), W + b, W + e);
    for (std::size_t j = b; j < e; ++j) W[j] -= step * s.g[j];
  }
}

void CpuBackend::incremental_restore(IncrementalState& state, Vector& w) {
  CpuIncrementalState& s = St(state);
  double* W = data(w).data();
  std::size_t pos = 0;
  for (std::uint32_t gid : s.groups) {
    const std::size_t b = s.wg.begin(gid), sz = s.wg.size(gid);
    if (pos + sz > s.saved.size()) throw Error("internal: incremental_restore without incremental_trial");
    std::copy(s.saved.begin() + pos, s.saved.begin() + pos + sz, W + b);
    pos += sz;
  }
}

void CpuBackend::incremental_commit(IncrementalState& state, Vector& d, Vector& w, const double* w_coef) {
  CpuIncrementalState& s = St(state);
  if (!s.evaluated) throw Error("internal: incremental_commit before incremental_evaluate");
  const Corpus& c = *s.c;
  const std::size_t L = s.L, LL = s.LL;
  double* D = data(d).data();
  double* W = data(w).data();
  std::vector<double> diff(std::max(L, LL));
  // Adds diff (per slot of group gid's row, times v) to d, and −coef·v·diff to w.
  auto apply = [&](std::uint32_t gid, double v, double coef) {
    if (s.wg.dense()) {
      double* dr = D + s.wg.begin(gid);
      double* wr = W + s.wg.begin(gid);
      const std::size_t len = s.wg.size(gid);
      for (std::size_t j = 0; j < len; ++j) dr[j] += v * diff[j];
      if (coef != 0)
        for (std::size_t j = 0; j < len; ++j) wr[j] -= coef * (v * diff[j]);
      return;
    }
    for_each_weight(s.wg, gid, [&](std::size_t q, std::size_t j) { D[q] += v * diff[j]; });
    if (coef != 0) for_each_weight(s.wg, gid, [&](std::size_t q, std::size_t j) { W[q] -= coef * (v * diff[j]); });
  };
  for (std::size_t i = 0; i < s.span.size(); ++i) {
    const double coef = w_coef ? w_coef[i] : 0.0;
    const std::size_t sid = s.span[i], t0 = c.sentence_offsets[sid], T = c.length(sid);
    for (std::size_t t = 0; t < T; ++t) {
      double* old = s.node.data() + (t0 + t) * L;
      const double* mu = s.new_node.data() + (s.tok[i] + t) * L;
      for (std::size_t y = 0; y < L; ++y) diff[y] = mu[y] - old[y];
      for (std::size_t k = c.state_offsets[t0 + t]; k < c.state_offsets[t0 + t + 1]; ++k)
        apply(c.state_ids[k], c.state_value(k), coef);
      std::copy(mu, mu + L, old);
      if (s.E == 0 || t == 0 || s.edge_slot[t0 + t] == kNoSlot) continue;
      double* olde = s.edge.data() + s.edge_slot[t0 + t] * LL;
      const double* me = s.new_edge.data() + (s.tok[i] + t) * LL;
      for (std::size_t j = 0; j < LL; ++j) diff[j] = me[j] - olde[j];
      for (std::size_t k = c.edge_offsets[t0 + t]; k < c.edge_offsets[t0 + t + 1]; ++k)
        apply(s.wg.edge(c.edge_ids[k]), c.edge_value(k), coef);
      std::copy(me, me + LL, olde);
    }
    double* oldp = s.pair.data() + sid * LL;
    const double* mp = s.new_pair.data() + i * LL;
    if (s.transitions) {
      for (std::size_t j = 0; j < LL; ++j) diff[j] = mp[j] - oldp[j];
      apply(s.wg.transitions(), 1.0, coef);
    }
    std::copy(mp, mp + LL, oldp);
  }
  s.evaluated = false;  // the pending marginals are stored now
}

void CpuBackend::incremental_step(IncrementalState& state, double a, double b, double tau, Vector& w,
                          const Vector& d) {
  CpuIncrementalState& s = St(state);
  LazyStepHistory::check_step(a, b, tau);
  if (s.needs_flush(a)) incremental_flush(state, w, d);
  s.push(a, b, tau);
}

void CpuBackend::incremental_flush(IncrementalState& state, Vector& w, const Vector& d) {
  CpuIncrementalState& s = St(state);
  double* W = data(w).data();
  const double* D = data(d).data();
  if (s.k() > 0) {
    const std::size_t groups = s.wg.count(), per = 4096;
    const std::size_t blocks = (groups + per - 1) / per;
    pool_.run(blocks, [&](std::size_t blk, unsigned) {
      const std::size_t e = std::min(groups, (blk + 1) * per);
      for (std::size_t gid = blk * per; gid < e; ++gid) s.catch_up(std::uint32_t(gid), W, D);
    });
  }
  std::fill(s.stamp.begin(), s.stamp.end(), 0);
  s.restart();
}

std::vector<double> CpuBackend::incremental_save(IncrementalState& state) {
  CpuIncrementalState& s = St(state);
  std::vector<double> out;
  out.reserve(s.node.size() + s.pair.size() + s.edge.size() +
              (s.k() > 0 ? 1 + 3 * s.P.size() + s.stamp.size() : 0));
  out.insert(out.end(), s.node.begin(), s.node.end());
  out.insert(out.end(), s.pair.begin(), s.pair.end());
  out.insert(out.end(), s.edge.begin(), s.edge.end());
  if (s.k() > 0) save_lazy_steps(s, s.stamp, out);
  return out;
}

void CpuBackend::incremental_load(IncrementalState& state, const std::vector<double>& m) {
  CpuIncrementalState& s = St(state);
  if (s.k() > 0) throw Error("internal: SAG's state is restored only into a flushed state");
  const std::size_t a = s.node.size(), b = s.pair.size(), total = a + b + s.edge.size();
  if (m.size() < total)
    throw Error("checkpoint: SAG's stored marginals (" + std::to_string(m.size()) + " values) are not of this corpus (" +
                std::to_string(total) + ")");
  load_lazy_steps(m, total, s, s.stamp);
  std::copy(m.begin(), m.begin() + a, s.node.begin());
  std::copy(m.begin() + a, m.begin() + a + b, s.pair.begin());
  std::copy(m.begin() + a + b, m.begin() + total, s.edge.begin());
}

void CpuBackend::incremental_schedule(IncrementalState& state, SentenceSpan span, const SagStepParams& p, Vector& w,
                                      Vector& d) {
  schedule_on_host(*this, state, span, p, w, d);  // one step at a time: nothing to queue
}

void CpuBackend::incremental_schedule_drawn(IncrementalState& state, const SagSamplerRef& sampler,
                                            const SagStepParams& p, Vector& w, Vector& d) {
  schedule_drawn_on_host(*this, state, sampler, p, w, d);  // one step at a time: nothing to queue
}

}  // namespace crfx
