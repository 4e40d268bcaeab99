// crfx — CPU backend: blockwise coordinate descent's statistics (bcd, host/optim/bcd.cpp; the
// contracts are BlockStatistics' in include/crfx/internal/backend.hpp). Lavergne, Cappé & Yvon (2010, §3.2)
// update one block of weights at a time from the gradient and a diagonal curvature bound summed
// over the sentences where the block is active only: the inverted index block → sentences is
// built once (block_index), and each block's statistics cost forward-backward on those sentences.
//
// Why forward-backward runs over the whole sentence: Wapiti stops α at the block's last active
// position and β at its first; the chain code here (chain.cpp) runs both whole, so a block costs
// up to twice Wapiti's per sentence, with the same marginals.
//
// Determinism: the sentences are cut into parts of kBlockPart, each summed in sentence order
// into its own slot of block_partial_, and the parts are added in part order — the same sums for
// any number of threads.
#include <algorithm>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"

namespace crfx {
namespace {
constexpr std::size_t kBlockPart = 8;  // sentences a task sums (a fixed cut: see above)
}  // namespace

void CpuBackend::block_index(const BackendCorpus& bc, std::vector<std::size_t>& offsets,
                             std::vector<std::uint32_t>& sentences) {
  const Corpus& c = corpus_of(bc);
  const WeightGroups wg = dims_.groups();
  const std::size_t G = wg.count(), S = c.num_sentences();
  // Two scans (Wapiti's): count each group's sentences, then fill; `last` marks the last
  // sentence a group was counted for, so a group active twice in a sentence counts once.
  std::vector<std::uint32_t> last(G, 0xffffffffu);
  offsets.assign(G + 1, 0);
  auto visit = [&](auto&& f) {
    for (std::uint32_t s = 0; s < S; ++s) {
      const std::size_t t0 = c.sentence_offsets[s], t1 = c.sentence_offsets[s + 1];
      auto touch = [&](std::uint32_t g) {
        if (last[g] != s) last[g] = s, f(g, s);
      };
      for (std::size_t k = c.state_offsets[t0]; k < c.state_offsets[t1]; ++k) touch(c.state_ids[k]);
      if (dims_.transitions && t1 - t0 >= 2) touch(wg.transitions());
      if (t1 > t0)  // edge items count from the second position (corpus.hpp)
        for (std::size_t k = c.edge_offsets[t0 + 1]; k < c.edge_offsets[t1]; ++k) touch(wg.edge(c.edge_ids[k]));
    }
  };
  visit([&](std::uint32_t g, std::uint32_t) { ++offsets[g + 1]; });
  for (std::size_t g = 0; g < G; ++g) offsets[g + 1] += offsets[g];
  sentences.resize(offsets[G]);
  std::vector<std::size_t> next(offsets.begin(), offsets.end() - 1);
  std::fill(last.begin(), last.end(), 0xffffffffu);
  visit([&](std::uint32_t g, std::uint32_t s) { sentences[next[g]++] = s; });
}

void CpuBackend::block_statistics(const BackendCorpus& bc, const Vector& w, SentenceSpan span,
                                  std::uint32_t group, double* grad, double* curv) {
  const Corpus& c = corpus_of(bc);
  const WeightGroups wg = dims_.groups();
  if (group >= wg.count()) throw Error("internal: block " + std::to_string(group) + " beyond the groups");
  for (std::size_t i = 0; i < span.count; ++i)
    if (span[i] >= c.num_sentences()) throw Error("internal: sentence id beyond the corpus");
  const std::size_t n = wg.size(group), L = dims_.L, LL = L * L, begin = wg.begin(group);
  std::fill(grad, grad + n, 0.0);
  std::fill(curv, curv + n, 0.0);
  if (n == 0 || span.count == 0) return;
  if (stop_requested(span.count)) throw PassStopped();
  const bool state = group < wg.transitions(), transitions = group == wg.transitions();
  const std::uint32_t edge_id = state || transitions ? 0 : std::uint32_t(group - wg.edge(0));
  Prepared p;
  prepare(w, p);
  const std::size_t parts = (span.count + kBlockPart - 1) / kBlockPart;
  block_partial_.assign(parts * 2 * n, 0.0);
  pool_.run(parts, [&](std::size_t part, unsigned worker) {
    Work& work = *work_[worker];
    double* g = block_partial_.data() + part * 2 * n;
    double* h = g + n;
    for (std::size_t i = part * kBlockPart; i < std::min(span.count, (part + 1) * kBlockPart); ++i) {
      const std::size_t s = span[i], tok0 = c.sentence_offsets[s], T = c.length(s);
      const ChainScores x = scores(c, p, s, work);
      ChainOutputs out;
      work.node.resize(T * L);
      out.node = work.node.data();
      if (!state) {
        work.pair.resize(T * LL);
        out.pair_at = work.pair.data();
      }
      forward_backward(x, out, work.chain, log_space_only_);
      for (std::size_t t = state ? 0 : 1; t < T; ++t) {
        const std::size_t tok = tok0 + t;
        double v = 0;  // the block's value at t (0: not active there)
        if (state) {
          for (std::size_t k = c.state_offsets[tok]; k < c.state_offsets[tok + 1]; ++k)
            if (c.state_ids[k] == group) v += c.state_value(k);
        } else if (transitions) {
          v = 1;
        } else {
          for (std::size_t k = c.edge_offsets[tok]; k < c.edge_offsets[tok + 1]; ++k)
            if (c.edge_ids[k] == edge_id) v += c.edge_value(k);
        }
        if (v == 0) continue;
        // Lavergne et al. (2010) §3.2: the gradient and Wapiti's curvature e·(1 − e) per weight.
        const double* P = state ? work.node.data() + t * L : work.pair.data() + t * LL;
        const std::size_t gold = state ? c.labels[tok] : std::size_t(c.labels[tok - 1]) * L + c.labels[tok];
        for_each_weight(wg, group, [&](std::size_t k, std::size_t j) {
          const double e = P[j];
          g[k - begin] += v * (e - (j == gold ? 1.0 : 0.0));
          h[k - begin] += v * v * e * (1.0 - e);
        });
      }
    }
  });
  for (std::size_t part = 0; part < parts; ++part) {
    const double* g = block_partial_.data() + part * 2 * n;
    for (std::size_t k = 0; k < n; ++k) grad[k] += g[k], curv[k] += g[n + k];
  }
}

void CpuBackend::read_block(const Vector& w, std::uint32_t group, double* out) {
  const WeightGroups wg = dims_.groups();
  if (group >= wg.count() || w.size() != dims_.num_weights()) throw Error("internal: read_block beyond the weights");
  const double* W = data(w).data() + wg.begin(group);
  std::copy(W, W + wg.size(group), out);
}

void CpuBackend::write_block(Vector& w, std::uint32_t group, const double* in) {
  const WeightGroups wg = dims_.groups();
  if (group >= wg.count() || w.size() != dims_.num_weights()) throw Error("internal: write_block beyond the weights");
  std::copy(in, in + wg.size(group), data(w).data() + wg.begin(group));
}

}  // namespace crfx
