// crfx — SpanGroups (include/crfx/backend.hpp): the support of a span of sentences, planned on the
// host for either backend.
#include <algorithm>

#include "crfx/backend.hpp"

namespace crfx {

void SpanGroups::plan(const Corpus& c, SentenceSpan span, const WeightGroups& wg, bool transitions,
                      std::vector<std::uint32_t>& groups) {
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
    const std::size_t s = span[i], t0 = c.sentence_offsets[s], t1 = c.sentence_offsets[s + 1];
    for (std::size_t k = c.state_offsets[t0]; k < c.state_offsets[t1]; ++k) touch(c.state_ids[k]);
    if (edges)
      for (std::size_t k = c.edge_offsets[t0]; k < c.edge_offsets[t1]; ++k) touch(wg.edge(c.edge_ids[k]));
  }
  std::sort(groups.begin(), groups.end());  // ascending group ids: ascending weight indices
}

}  // namespace crfx
