// crfx — the host side both backends share (include/crfx/internal/backend.hpp): SpanGroups (the support of
// a span of sentences), add_feature_difference (the perceptron update, built on the host),
// LazyStepHistory's step check, and the host ↔ backend vector conveniences.
#include <algorithm>
#include <cmath>
#include <string>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {

void SpanGroups::plan(const Corpus& c, SentenceSpan span, const WeightGroups& wg, bool transitions,
                      std::vector<std::uint32_t>& groups, bool ascending) {
  if (mark_.size() != wg.count()) {
    mark_.assign(wg.count(), 0);
    generation_ = 0;
  }
  if (++generation_ == 0) {  // wrapped: every mark is stale again
    std::fill(mark_.begin(), mark_.end(), 0);
    generation_ = 1;
  }
  const std::uint32_t gen = generation_;
  groups.clear();
  auto touch = [&](std::uint32_t gid) {
    if (mark_[gid] != gen) {
      mark_[gid] = gen;
      groups.push_back(gid);
    }
  };
  if (transitions) touch(wg.transitions());
  const bool edges = wg.E > 0 && c.edge_offsets.size() == c.state_offsets.size();
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::size_t s = span[i];
    for (std::size_t t = c.sentence_offsets[s]; t < c.sentence_offsets[s + 1]; ++t) {
      for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k) touch(c.state_ids[k]);
      if (edges)
        for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k) touch(wg.edge(c.edge_ids[k]));
    }
  }
  if (ascending) std::sort(groups.begin(), groups.end());  // ascending weight indices
}

void SpanGroups::support(const Corpus& c, SentenceSpan span, const WeightGroups& wg, bool transitions,
                         std::vector<std::size_t>& indices) {
  plan(c, span, wg, transitions, groups_);
  group_indices(wg, groups_, indices);
}

void LazyStepHistory::check_step(double a, double b, double tau) {
  if (!(a > 0 && a <= 1) || !(b >= 0) || !(tau >= 0) || !std::isfinite(b) || !std::isfinite(tau))
    throw Error("internal: invalid SAG step (a = " + std::to_string(a) + ", b = " + std::to_string(b) +
                ", tau = " + std::to_string(tau) + ")");
}

void save_lazy_steps(const LazyStepHistory& h, const std::vector<std::uint32_t>& stamps, std::vector<double>& out) {
  out.push_back(double(h.k()));
  out.insert(out.end(), h.P.begin(), h.P.end());
  out.insert(out.end(), h.S.begin(), h.S.end());
  out.insert(out.end(), h.R.begin(), h.R.end());
  out.insert(out.end(), stamps.begin(), stamps.end());  // 32-bit: exact as doubles
}

void load_lazy_steps(const std::vector<double>& m, std::size_t at, LazyStepHistory& h,
                     std::vector<std::uint32_t>& stamps) {
  const std::size_t groups = stamps.size();
  if (m.size() == at) {  // a flushed state
    h.restart();
    std::fill(stamps.begin(), stamps.end(), 0u);
    return;
  }
  const double kd = m[at];
  const std::size_t k = kd >= 1 && kd < 4294967295.0 && kd == std::floor(kd) ? std::size_t(kd) : 0;
  if (k == 0 || m.size() != at + 1 + 3 * (k + 1) + groups)
    throw Error("checkpoint: SAG's stored state (" + std::to_string(m.size()) + " values) is not of this corpus (" +
                std::to_string(at) + " marginals, then the lazy steps and " + std::to_string(groups) + " stamps)");
  auto p = m.begin() + std::ptrdiff_t(at + 1);
  const auto n = std::ptrdiff_t(k + 1);
  h.P.assign(p, p + n);
  h.S.assign(p + n, p + 2 * n);
  h.R.assign(p + 2 * n, p + 3 * n);
  for (std::size_t g = 0; g < groups; ++g) {
    const double v = p[3 * n + std::ptrdiff_t(g)];
    if (!(v >= 0 && v <= kd && v == std::floor(v))) throw Error("checkpoint: SAG's stored state has a bad stamp");
    stamps[g] = std::uint32_t(v);
  }
}

void group_indices(const WeightGroups& wg, const std::vector<std::uint32_t>& groups,
                   std::vector<std::size_t>& indices) {
  std::size_t size = 0;
  for (std::uint32_t gid : groups) size += wg.size(gid);
  indices.resize(size);
  std::size_t j = 0;
  for (std::uint32_t gid : groups)
    for (std::size_t b = wg.begin(gid), e = b + wg.size(gid); b < e; ++b) indices[j++] = b;
}

std::size_t add_feature_difference(const Corpus& c, const Dims& dims, SentenceSpan span,
                                   const std::uint32_t* labels, double scale, double* G) {
  const std::size_t L = dims.L;
  const WeightGroups wg = dims.groups();
  // G[weight of (gid, slot)] += v, where the layout has that weight (the sparse layout may not).
  auto add = [&](std::uint32_t gid, std::size_t slot, double v) {
    const std::size_t k = wg.find(gid, std::uint32_t(slot));
    if (k != WeightGroups::kNoWeight) G[k] += v;
  };
  const bool edges = c.edge_offsets.size() == c.num_tokens() + 1;
  std::size_t wrong = 0, pos = 0;
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::size_t s = span[i];
    const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
    for (std::size_t t = 0; t < T; ++t, ++pos) {
      const std::uint32_t y = c.labels[tok0 + t], p = labels[pos];
      if (y == Corpus::kNoLabel) throw Error("sentence " + std::to_string(s) + " has tokens without a label");
      if (p >= L) throw Error("internal: predicted label beyond the model");
      if (y != p) {
        ++wrong;
        for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k) {
          const double v = scale * c.state_value(k);
          add(c.state_ids[k], y, v);
          add(c.state_ids[k], p, -v);
        }
      }
      if (t == 0) continue;
      const std::uint32_t y0 = c.labels[tok0 + t - 1], p0 = labels[pos - 1];
      if (y0 == p0 && y == p) continue;
      const std::size_t gold = std::size_t(y0) * L + y, pred = std::size_t(p0) * L + p;
      if (dims.transitions) {
        add(wg.transitions(), gold, scale);
        add(wg.transitions(), pred, -scale);
      }
      if (edges)
        for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k) {
          const double v = scale * c.edge_value(k);
          add(wg.edge(c.edge_ids[k]), gold, v);
          add(wg.edge(c.edge_ids[k]), pred, -v);
        }
    }
  }
  return wrong;
}

VectorPtr to_backend(Backend& b, const std::vector<double>& host) {
  VectorPtr v = b.vector(host.size());
  b.write(*v, host.data());
  return v;
}

std::vector<double> to_host(Backend& b, const Vector& v) {
  std::vector<double> host(v.size());
  b.read(v, host.data());
  return host;
}

}  // namespace crfx
