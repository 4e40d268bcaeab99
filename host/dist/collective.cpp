// crfx — the one-process collective and the shards of a corpus (include/crfx/internal/collective.hpp).
#include <algorithm>
#include <string>

#include "crfx/errors.hpp"
#include "crfx/internal/collective.hpp"

namespace crfx {

bool Collective::all(bool value) {
  double missing = value ? 0.0 : 1.0;  // a count of the ranks that say no: exact in doubles
  sum(&missing, 1);
  return missing == 0.0;
}

namespace {

class SingleProcess final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string name() const override { return "one process"; }
  void sum(double*, std::size_t) override {}
  void broadcast(void*, std::size_t, int root) override {
    if (root != 0) throw Error("broadcast from rank " + std::to_string(root) + " of one process");
  }
  void barrier() override {}
  void abort(int) override {}
};

}  // namespace

CollectivePtr single_process() { return std::make_unique<SingleProcess>(); }

std::pair<std::size_t, std::size_t> shard_range(const Corpus& corpus, int rank, int size) {
  const std::size_t S = corpus.num_sentences(), N = std::size_t(size);
  if (size < 1 || rank < 0 || rank >= size)
    throw Error("internal: shard " + std::to_string(rank) + " of " + std::to_string(size));
  if (S < N)
    throw Error("the training data has " + std::to_string(S) + " sentences, fewer than the " + std::to_string(size) +
                " processes it is to be shared among");
  const std::size_t T = corpus.num_tokens();
  // Shard r starts at the first sentence whose preceding tokens reach r·T/N, moved so that every
  // shard keeps at least one sentence (a shard boundary b_r lies within [r, S − (N − r)]).
  auto start = [&](std::size_t r) -> std::size_t {
    if (r == 0) return 0;
    if (r == N) return S;
    const std::size_t target = (T * r + N / 2) / N;  // rounded r·T/N (T·r fits: T < 2^40 in practice)
    const auto it = std::lower_bound(corpus.sentence_offsets.begin(), corpus.sentence_offsets.end() - 1, target);
    const std::size_t s = std::size_t(it - corpus.sentence_offsets.begin());
    return std::min(std::max(s, r), S - (N - r));
  };
  std::size_t first = start(std::size_t(rank)), last = start(std::size_t(rank) + 1);
  // The clamps of neighbouring boundaries are monotone, so first < last; kept as a check.
  if (!(first < last)) throw Error("internal: an empty shard");
  return {first, last};
}

Corpus shard_corpus(const Corpus& c, std::size_t first, std::size_t last) {
  if (first > last || last > c.num_sentences()) throw Error("internal: a shard beyond the corpus");
  Corpus out;
  const std::size_t t0 = c.sentence_offsets[first], t1 = c.sentence_offsets[last];
  const std::size_t s0 = c.state_offsets[t0], s1 = c.state_offsets[t1];
  const std::size_t e0 = c.edge_offsets[t0], e1 = c.edge_offsets[t1];
  out.sentence_offsets.resize(last - first + 1);
  for (std::size_t s = first; s <= last; ++s) out.sentence_offsets[s - first] = c.sentence_offsets[s] - t0;
  out.state_offsets.resize(t1 - t0 + 1);
  out.edge_offsets.resize(t1 - t0 + 1);
  for (std::size_t t = t0; t <= t1; ++t) {
    out.state_offsets[t - t0] = c.state_offsets[t] - s0;
    out.edge_offsets[t - t0] = c.edge_offsets[t] - e0;
  }
  out.state_ids.assign(c.state_ids.begin() + s0, c.state_ids.begin() + s1);
  if (!c.state_values.empty()) out.state_values.assign(c.state_values.begin() + s0, c.state_values.begin() + s1);
  out.edge_ids.assign(c.edge_ids.begin() + e0, c.edge_ids.begin() + e1);
  if (!c.edge_values.empty()) out.edge_values.assign(c.edge_values.begin() + e0, c.edge_values.begin() + e1);
  out.labels.assign(c.labels.begin() + t0, c.labels.begin() + t1);
  if (!c.source_lines.empty())
    out.source_lines.assign(c.source_lines.begin() + first, c.source_lines.begin() + last);
  return out;
}

}  // namespace crfx
