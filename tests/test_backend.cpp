// The CPU backend: loss, log Z, node marginals and Viterbi against enumeration of every label
// path, gradient against central finite differences, independence of thread count and chunking,
// vector algebra, OWL-QN primitives.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "util/thread_pool.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "fused_check.hpp"
#include "rules/rule_set.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

using test::random_problem;
using test::random_weights;

double objective(Backend& b, const BackendCorpus& c, const std::vector<double>& w, double c2) {
  auto wv = to_backend(b, w);
  double h = b.evaluate(c, *wv, all_sentences(c), nullptr, 1.0);
  for (double x : w) h += c2 * x * x;
  return h;
}

void check_gradient(std::uint32_t L, std::uint32_t A, std::uint32_t E, double scale, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "L=" << L << " A=" << A << " E=" << E << " seed=" << seed);
  auto p = random_problem(L, A, E, 6, 5, seed);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  const double c2 = 0.3;
  auto w = random_weights(p.dims.num_weights(), scale, seed + 7);
  Objective obj(b, *corpus, 0.0, c2);
  auto wv = to_backend(b, w);
  auto gv = b.vector(w.size());
  const double h = obj.value_and_gradient(*wv, *gv);
  EXPECT_NEAR(h, objective(b, *corpus, w, c2), 1e-10 * std::fabs(h));
  auto g = to_host(b, *gv);
  const double eps = 1e-5;
  for (std::size_t i = 0; i < w.size(); ++i) {
    auto wp = w, wm = w;
    wp[i] += eps;
    wm[i] -= eps;
    const double fd = (objective(b, *corpus, wp, c2) - objective(b, *corpus, wm, c2)) / (2 * eps);
    EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::fabs(fd))) << "weight " << i;
  }
}

// A thread the system refuses (here: an address-space limit too small for their stacks) is an
// error naming the count reached, never a hang or std::terminate; run in a child process, so
// the limit stays there (a hang fails the test by ctest's timeout).
TEST(ThreadPool, ThreadCreationFailureIsAnErrorNotAHang) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct rlimit lim {};
        ::getrlimit(RLIMIT_AS, &lim);
        std::ifstream statm("/proc/self/statm");
        std::size_t pages = 0;
        statm >> pages;
        lim.rlim_cur = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + (64u << 20);  // ~8 stacks more
        ::setrlimit(RLIMIT_AS, &lim);
        try {
          ThreadPool pool(400);
          std::fprintf(stderr, "400 threads started\n");
          std::_Exit(0);
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(3);
        }
      },
      ::testing::ExitedWithCode(3), "cannot start worker thread [0-9]+ of 400 .*; --threads [0-9]+ or fewer may work here");
}

TEST(CpuBackend, GradientMatchesFiniteDifferences) { check_gradient(3, 5, 0, 1.0, 11); }
TEST(CpuBackend, GradientWithEdgeFeatures) { check_gradient(3, 4, 3, 1.0, 12); }
TEST(CpuBackend, GradientManyLabels) { check_gradient(7, 3, 2, 0.5, 13); }

/// Every label path of sentence `s`, scored on the host straight from the flat weights (the
/// layout of Dims): log Z, the gold path's score, node marginals and the best path. Independent of
/// the backend's scores / chain code.
struct Enumerated {
  double log_z = 0, gold = 0, best_score = 0;
  std::vector<double> node;          // [T][L]
  std::vector<std::pair<double, std::vector<std::uint32_t>>> ranked;  // every path, best first
  std::vector<std::uint32_t> best;   // [T]
};
Enumerated enumerate_paths(const test::RandomProblem& p, const std::vector<double>& w, std::size_t s) {
  const Corpus& c = p.corpus;
  const Dims& d = p.dims;
  const std::size_t L = d.L, t0 = c.sentence_offsets[s], T = c.length(s);
  std::vector<double> em(T * L, 0.0), tau(T * L * L, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t k = c.state_offsets[t0 + t]; k < c.state_offsets[t0 + t + 1]; ++k)
      for (std::size_t y = 0; y < L; ++y) em[t * L + y] += c.state_value(k) * w[c.state_ids[k] * L + y];
    if (t == 0) continue;
    for (std::size_t j = 0; j < L * L; ++j) {
      double v = d.transitions ? w[d.transition_offset() + j] : 0.0;
      for (std::size_t k = c.edge_offsets[t0 + t]; k < c.edge_offsets[t0 + t + 1]; ++k)
        v += c.edge_value(k) * w[d.edge_offset() + c.edge_ids[k] * L * L + j];
      tau[t * L * L + j] = v;
    }
  }
  auto score = [&](const std::vector<std::uint32_t>& y) {
    double v = 0;
    for (std::size_t t = 0; t < T; ++t) {
      v += em[t * L + y[t]];
      if (t) v += tau[t * L * L + y[t - 1] * L + y[t]];
    }
    return v;
  };
  Enumerated out;
  std::vector<std::uint32_t> y(T, 0), gold(c.labels.begin() + t0, c.labels.begin() + t0 + T);
  std::vector<double> scores;
  std::vector<std::vector<std::uint32_t>> paths;
  double best = -INFINITY;
  while (true) {
    const double v = score(y);
    scores.push_back(v);
    paths.push_back(y);
    if (v > best) {
      best = v;
      out.best = y;
    }
    std::size_t t = T;  // next path, last position fastest
    while (t > 0 && ++y[t - 1] == L) y[--t] = 0;
    if (t == 0) break;
  }
  const double m = *std::max_element(scores.begin(), scores.end());
  double z = 0;
  for (double v : scores) z += std::exp(v - m);
  out.log_z = m + std::log(z);
  out.gold = score(gold);
  out.best_score = best;
  for (std::size_t k = 0; k < paths.size(); ++k) out.ranked.emplace_back(scores[k], paths[k]);
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  out.node.assign(T * L, 0.0);
  for (std::size_t k = 0; k < paths.size(); ++k)
    for (std::size_t t = 0; t < T; ++t) out.node[t * L + paths[k][t]] += std::exp(scores[k] - out.log_z);
  return out;
}

TEST(CpuBackend, LossMarginalsAndViterbiMatchPathEnumeration) {
  for (bool transitions : {true, false}) {
    auto p = random_problem(3, 6, 2, 12, 4, 77);
    p.dims.transitions = transitions;
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    const auto w = random_weights(p.dims.num_weights(), 1.5, 78);
    auto wv = to_backend(b, w);
    for (std::uint32_t s = 0; s < p.corpus.num_sentences(); ++s) {
      SCOPED_TRACE(::testing::Message() << "sentence " << s << " transitions " << transitions);
      const Enumerated e = enumerate_paths(p, w, s);
      const SentenceSpan one{&s, 1};
      EXPECT_NEAR(b.evaluate(*corpus, *wv, one, nullptr, 1.0), e.log_z - e.gold, 1e-11);
      const std::size_t T = p.corpus.length(s), L = p.dims.L;
      std::vector<double> node(T * L);
      double log_z = 0;
      b.marginals(*corpus, *wv, one, node.data(), &log_z);
      EXPECT_NEAR(log_z, e.log_z, 1e-11);
      for (std::size_t j = 0; j < T * L; ++j) EXPECT_NEAR(node[j], e.node[j], 1e-12) << j;
      std::vector<std::uint32_t> labels(T);
      double best = 0;
      b.viterbi(*corpus, *wv, one, labels.data(), &best);
      EXPECT_EQ(labels, e.best);
      // The best path's score, and through it the path's probability (tag --probability).
      EXPECT_NEAR(best, e.best_score, 1e-11);
      EXPECT_NEAR(std::exp(best - log_z), std::exp(e.best_score - e.log_z), 1e-12);
      std::vector<std::uint32_t> none(T);
      b.viterbi(*corpus, *wv, one, none.data(), nullptr);  // scores optional
      EXPECT_EQ(none, e.best);
    }
  }
}

TEST(CpuBackend, NbestMatchesPathEnumerationInSpanLayout) {
  // Sentences of different lengths decoded together: sentence i's path r at n·o_i + r·T_i, its
  // score at i·n + r; the list equals the enumeration's best n, path 0 is viterbi()'s, and
  // paths beyond L^T are −∞ with labels 0.
  for (bool transitions : {true, false}) {
    auto p = random_problem(3, 6, 2, 12, 4, 91);
    p.dims.transitions = transitions;
    CpuBackend b(p.dims, 2);
    auto corpus = b.upload(p.corpus);
    const auto w = random_weights(p.dims.num_weights(), 1.5, 92);
    auto wv = to_backend(b, w);
    std::vector<std::uint32_t> ids(p.corpus.num_sentences());  // every sentence, in reverse
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::uint32_t(ids.size() - 1 - i);
    const SentenceSpan span{ids.data(), ids.size()};
    std::size_t tokens = 0;
    for (auto s : ids) tokens += p.corpus.length(s);
    const std::size_t n = 5;
    std::vector<std::uint32_t> labels(tokens * n, 77), best(tokens);
    std::vector<double> scores(ids.size() * n), best_scores(ids.size());
    b.viterbi_nbest(*corpus, *wv, span, n, labels.data(), scores.data());
    b.viterbi(*corpus, *wv, span, best.data(), best_scores.data());
    std::size_t o = 0;
    bool short_seen = false;  // a sentence with fewer than n paths
    for (std::size_t i = 0; i < ids.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "sentence " << ids[i] << " transitions " << transitions);
      const Enumerated e = enumerate_paths(p, w, ids[i]);
      short_seen = short_seen || e.ranked.size() < n;
      const std::size_t T = p.corpus.length(ids[i]);
      for (std::size_t r = 0; r < n; ++r) {
        const std::vector<std::uint32_t> path(labels.begin() + n * o + r * T, labels.begin() + n * o + (r + 1) * T);
        if (r < e.ranked.size()) {
          EXPECT_NEAR(scores[i * n + r], e.ranked[r].first, 1e-11) << r;
          EXPECT_EQ(path, e.ranked[r].second) << r;
        } else {
          EXPECT_EQ(scores[i * n + r], -INFINITY) << r;
          EXPECT_EQ(path, std::vector<std::uint32_t>(T, 0u)) << r;
        }
      }
      EXPECT_EQ(std::vector<std::uint32_t>(labels.begin() + n * o, labels.begin() + n * o + T),
                std::vector<std::uint32_t>(best.begin() + o, best.begin() + o + T));
      EXPECT_EQ(scores[i * n], best_scores[i]);
      o += T;
    }
    EXPECT_TRUE(short_seen) << "the span should hold a one-token sentence (3 paths < n)";
  }
}

TEST(CpuBackend, NbestTablesBeyondTheLimitAreRefusedBeforeAllocation) {
  // [T][L][n] tables of 12 bytes an entry: n = 10^8 with L = 3 needs 3.6 GB per token, more
  // than the 4 GiB a worker may take for any sentence of two tokens or more.
  auto p = random_problem(3, 6, 0, 8, 5, 93);
  std::uint32_t longest = 0;
  for (std::uint32_t s = 0; s < p.corpus.num_sentences(); ++s)
    if (p.corpus.length(s) > p.corpus.length(longest)) longest = s;
  ASSERT_GE(p.corpus.length(longest), 2u);
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 94));
  std::uint32_t label = 0;
  double score = 0;
  try {
    b.viterbi_nbest(*corpus, *w, {&longest, 1}, 100000000, &label, &score);  // buffers never reached
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ask for fewer paths"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.viterbi_nbest(*corpus, *w, {&longest, 1}, 0, &label, &score), Error);
}

TEST(CpuBackend, BinaryCorpusEqualsExplicitOnesAndBadValuesAreRefused) {
  // Values left out (binary attributes, as CoNLL data compiles) against the same corpus with
  // every value written as 1: the same loss and gradient, bit for bit.
  auto p = random_problem(4, 9, 3, 20, 6, 81, /*binary=*/true);
  ASSERT_TRUE(p.corpus.state_values.empty());
  ASSERT_TRUE(p.corpus.edge_values.empty());
  Corpus ones = p.corpus;
  ones.state_values.assign(ones.state_ids.size(), 1.0);
  ones.edge_values.assign(ones.edge_ids.size(), 1.0);
  CpuBackend b(p.dims, 2);
  auto binary = b.upload(p.corpus), explicit_ones = b.upload(ones);
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 82));
  auto g1 = b.vector(p.dims.num_weights()), g2 = b.vector(p.dims.num_weights());
  EXPECT_EQ(b.evaluate(*binary, *w, all_sentences(*binary), g1.get(), 1.0),
            b.evaluate(*explicit_ones, *w, all_sentences(*explicit_ones), g2.get(), 1.0));
  EXPECT_EQ(to_host(b, *g1), to_host(b, *g2));
  // A values array that is neither empty nor one per item is refused.
  Corpus bad = ones;
  bad.state_values.pop_back();
  EXPECT_THROW(b.upload(bad), Error);
  bad = ones;
  bad.edge_values.push_back(1.0);
  EXPECT_THROW(b.upload(bad), Error);
}

TEST(CpuBackend, TransitionsOffStayZero) {
  auto p = random_problem(3, 4, 0, 5, 6, 21);
  p.dims.transitions = false;
  CpuBackend b(p.dims, 1);
  auto corpus = b.upload(p.corpus);
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 3));
  auto g = b.vector(p.dims.num_weights());
  b.evaluate(*corpus, *w, all_sentences(*corpus), g.get(), 1.0);
  auto gh = to_host(b, *g);
  for (std::size_t i = p.dims.transition_offset(); i < p.dims.edge_offset(); ++i) EXPECT_EQ(gh[i], 0.0);
}

/// Loss and gradient bitwise identical for any thread count and chunk size.
TEST(CpuBackend, DeterministicAcrossThreadsAndChunks) {
  // ~2,600 tokens: whole-corpus chunks (and the 1,500-token ones) are above the 1,024 tokens from
  // which the marginal reduction is split over the workers; 7 and 1 exercise many small chunks.
  auto p = random_problem(5, 40, 6, 400, 12, 31);
  auto w = random_weights(p.dims.num_weights(), 0.7, 5);
  std::vector<double> ref_g;
  double ref_loss = 0;
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    for (std::size_t chunk : {std::size_t(0), std::size_t(1500), std::size_t(7), std::size_t(1)}) {
      CpuBackend b(p.dims, threads);
      if (chunk) b.set_chunk_tokens(chunk);
      auto corpus = b.upload(p.corpus);
      auto wv = to_backend(b, w);
      auto g = b.vector(w.size());
      const double loss = b.evaluate(*corpus, *wv, all_sentences(*corpus), g.get(), 1.0);
      auto gh = to_host(b, *g);
      if (ref_g.empty()) {
        ref_g = gh;
        ref_loss = loss;
      } else {
        EXPECT_EQ(loss, ref_loss) << "threads=" << threads << " chunk=" << chunk;
        EXPECT_EQ(gh, ref_g) << "threads=" << threads << " chunk=" << chunk;
      }
    }
  }
}

// evaluate's delta buffers are chunked at 32 MB (or 4 sentences' L² a thread, when more): a
// corpus whose whole pass would hold ~78 MB of deltas counts 32 MB of them, whatever its size,
// and one of thousands of labels still gets several sentences a thread. (The chunks do not change
// the result: DeterministicAcrossThreadsAndChunks.)
TEST(CpuBackend, EvaluateBuffersAreBoundedByTheChunkNotTheCorpus) {
  const auto p = random_problem(22, 50, 0, 20000, 2, 5);  // 20,000 sentences: 77 MB of pair deltas
  CpuBackend b(p.dims, 2);
  const std::size_t per_thread = (4 * 2 * 22 + 8 * 22 * 22) * sizeof(double);  // its scratch (≤ 2 tokens)
  EXPECT_LE(b.workspace_bytes(p.corpus), (std::size_t(32) << 20) + 2 * per_thread + (1u << 20));
  EXPECT_GE(b.workspace_bytes(p.corpus), std::size_t(32) << 20);
  Dims wide;
  wide.L = 1000;
  wide.A = 3;
  CpuBackend many(wide, 8);
  const std::size_t pair = std::size_t(1000) * 1000 * sizeof(double);  // 8 MB a sentence
  // 8 threads × 4 sentences × 8 MB (under the 256 MiB cap); besides, each thread's scratch (8 L²).
  EXPECT_GE(many.workspace_bytes(p.corpus), 4 * 8 * pair + 8 * 8 * pair);
  EXPECT_LT(many.workspace_bytes(p.corpus), 4 * 8 * pair + 8 * 9 * pair);
}

TEST(CpuBackend, ATokenOfTensOfThousandsOfItemsOnSeveralThreads) {
  // With several threads each worker of the marginal reduction reads its own list of items, whose
  // count per token is 16 bits; a token of more than 65,535 items (here) makes the backend test
  // every item against the worker's range instead: still one thread's loss and gradient, bit for
  // bit, on the dense and on a sparse layout, with values.
  auto p = random_problem(5, 40, 0, 30, 8, 71);
  Corpus& c = p.corpus;
  const std::size_t extra = 70000;
  std::vector<std::uint32_t> ids(extra);
  for (std::size_t i = 0; i < extra; ++i) ids[i] = std::uint32_t(i * 7 % 40);
  c.state_ids.insert(c.state_ids.begin() + std::ptrdiff_t(c.state_offsets[1]), ids.begin(), ids.end());
  ASSERT_FALSE(c.state_values.empty());
  c.state_values.insert(c.state_values.begin() + std::ptrdiff_t(c.state_offsets[1]), extra, 0.001);
  for (std::size_t t = 1; t < c.state_offsets.size(); ++t) c.state_offsets[t] += extra;
  for (bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "sparse layout" : "dense layout");
    Dims dims = p.dims;
    if (sparse) dims.layout = test::random_layout(p.dims, 0.5, 72);
    const auto w = random_weights(dims.num_weights(), 0.5, 73);
    std::vector<double> ref;
    double ref_loss = 0;
    for (unsigned threads : {1u, 2u, 3u}) {
      CpuBackend b(dims, threads);
      auto corpus = b.upload(c);
      auto wv = to_backend(b, w);
      auto g = b.vector(w.size());
      const double loss = b.evaluate(*corpus, *wv, all_sentences(*corpus), g.get(), 1.0);
      if (threads == 1) {
        ref = to_host(b, *g);
        ref_loss = loss;
        continue;
      }
      EXPECT_EQ(loss, ref_loss) << threads << " threads";
      EXPECT_EQ(to_host(b, *g), ref) << threads << " threads";
    }
  }
}

TEST(CpuBackend, SpanSelectsSentences) {
  auto p = random_problem(4, 10, 0, 9, 5, 41);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 2));
  double sum = 0;
  for (std::uint32_t s = 0; s < 9; ++s) sum += b.evaluate(*corpus, *w, {&s, 1}, nullptr, 1.0);
  std::vector<std::uint32_t> rev{8, 7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_NEAR(b.evaluate(*corpus, *w, {rev.data(), rev.size()}, nullptr, 1.0), sum, 1e-10 * sum);
  // Gradient scale: scale·(E − obs) on a span equals scale times the unscaled one.
  auto g1 = b.vector(w->size()), g2 = b.vector(w->size());
  b.evaluate(*corpus, *w, {rev.data(), 4}, g1.get(), 1.0);
  b.evaluate(*corpus, *w, {rev.data(), 4}, g2.get(), -0.25);
  b.axpy(4.0, *g2, *g1);
  EXPECT_LT(b.norm_inf(*g1), 1e-12);
}

TEST(CpuBackend, UploadTakingTheCorpusOverIsTheSameCorpus) {
  auto p = random_problem(4, 10, 3, 9, 5, 43);
  CpuBackend b(p.dims, 2);
  auto copied = b.upload(p.corpus);
  Corpus taken_from = p.corpus;
  auto taken = b.upload(std::move(taken_from));
  EXPECT_EQ(taken->num_sentences(), copied->num_sentences());
  EXPECT_EQ(taken->num_tokens(), copied->num_tokens());
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 3));
  auto g1 = b.vector(w->size()), g2 = b.vector(w->size());
  EXPECT_EQ(b.evaluate(*taken, *w, all_sentences(*taken), g1.get(), 1.0),
            b.evaluate(*copied, *w, all_sentences(*copied), g2.get(), 1.0));
  EXPECT_EQ(to_host(b, *g1), to_host(b, *g2));
  // The ids are still checked against the model.
  Corpus bad = p.corpus;
  bad.state_ids[0] = p.dims.A;
  EXPECT_THROW(b.upload(std::move(bad)), Error);
}

TEST(CpuBackend, MarginalsSumToOneAndViterbiIsConsistent) {
  auto p = random_problem(5, 10, 2, 8, 7, 51);
  CpuBackend b(p.dims, 2);
  auto corpus = b.upload(p.corpus);
  auto w = to_backend(b, random_weights(p.dims.num_weights(), 1.0, 9));
  const std::size_t N = p.corpus.num_tokens(), L = p.dims.L;
  std::vector<double> node(N * L), log_z(8);
  b.marginals(*corpus, *w, all_sentences(*corpus), node.data(), log_z.data());
  for (std::size_t t = 0; t < N; ++t) {
    double s = 0;
    for (std::size_t y = 0; y < L; ++y) s += node[t * L + y];
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
  std::vector<std::uint32_t> y(N);
  b.viterbi(*corpus, *w, all_sentences(*corpus), y.data(), nullptr);
  for (auto v : y) EXPECT_LT(v, L);
  // NLL of the Viterbi path is the smallest over the gold paths of that corpus: at least check
  // that relabelling the corpus with the Viterbi path never increases any sentence's NLL.
  Corpus relabeled = p.corpus;
  relabeled.labels = y;
  auto rc = b.upload(relabeled);
  for (std::uint32_t s = 0; s < 8; ++s)
    EXPECT_LE(b.evaluate(*rc, *w, {&s, 1}, nullptr, 1.0), b.evaluate(*corpus, *w, {&s, 1}, nullptr, 1.0) + 1e-12);
}

TEST(CpuBackend, VectorAlgebra) {
  Dims d;
  d.L = 2;
  CpuBackend b(d, 3);
  const std::size_t n = 100003;  // several reduction blocks, ragged end
  std::vector<double> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::sin(double(i));
    y[i] = (i % 7 == 0) ? 0.0 : std::cos(double(i));
  }
  auto X = to_backend(b, x), Y = to_backend(b, y), Z = b.vector(n);
  double dot = 0, n1 = 0, ninf = 0;
  std::size_t nz = 0;
  for (std::size_t i = 0; i < n; ++i) {
    dot += x[i] * y[i];
    n1 += std::fabs(y[i]);
    ninf = std::max(ninf, std::fabs(y[i]));
    nz += y[i] != 0;
  }
  EXPECT_NEAR(b.dot(*X, *Y), dot, 1e-9);
  EXPECT_NEAR(b.norm1(*Y), n1, 1e-8);
  EXPECT_EQ(b.norm_inf(*Y), ninf);
  EXPECT_EQ(b.count_nonzero(*Y), nz);
  b.sub(*X, *Y, *Z);
  b.axpby(2.0, *X, -1.0, *Y);  // y = 2x − y
  b.axpy(-1.0, *X, *Y);        // y = x − y_orig
  b.axpy(-1.0, *Z, *Y);
  EXPECT_LT(b.norm_inf(*Y), 1e-15);
  b.fill(*Z, 3.0);
  b.scale(0.5, *Z);
  EXPECT_EQ(b.norm1(*Z), 1.5 * double(n));
}

// The CPU's vector sums in their one order — kReduceBlock blocks combined in order, each block in 8
// interleaved lanes added in order — on any thread count: models depend on these bits (the order
// the hand-written loops had before the algebra became rules, host/backend/vector_rules.hpp).
TEST(CpuBackend, VectorSumsKeepTheirBlockedLaneOrder) {
  const std::size_t n = 2 * kReduceBlock + 1005;
  const auto x = test::random_weights(n, 1.0, 21), y = test::random_weights(n, 1.0, 22);
  auto lanes = [&](auto term) {
    double total = 0;
    for (std::size_t b = 0; b < n; b += kReduceBlock) {
      const std::size_t e = std::min(n, b + kReduceBlock);
      double acc[8] = {};
      std::size_t i = b;
      for (; i + 8 <= e; i += 8)
        for (std::size_t l = 0; l < 8; ++l) acc[l] += term(i + l);
      for (; i < e; ++i) acc[0] += term(i);
      double s = 0;
      for (double a : acc) s += a;
      total += s;
    }
    return total;
  };
  const double dot = lanes([&](std::size_t i) { return x[i] * y[i]; });
  const double norm1 = lanes([&](std::size_t i) { return std::fabs(y[i]); });
  const double sub_dot = lanes([&](std::size_t i) { return (x[i] - y[i]) * x[i]; });
  Dims d;
  d.L = 1;
  for (unsigned threads : {1u, 2u, 3u}) {
    CpuBackend b(d, threads);
    auto X = to_backend(b, x), Y = to_backend(b, y), O = b.vector(n);
    EXPECT_EQ(b.dot(*X, *Y), dot) << threads << " threads";
    EXPECT_EQ(b.norm1(*Y), norm1) << threads << " threads";
    EXPECT_EQ(b.sub_dot(*X, *Y, *O, *X), sub_dot) << threads << " threads";
  }
}

TEST(CpuBackend, FusedVectorOpsEqualTheSeparateCalls) {
  Dims d;
  d.L = 2;
  for (unsigned threads : {1u, 3u}) {
    CpuBackend b(d, threads);
    for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(100003)}) {
      SCOPED_TRACE(::testing::Message() << "threads=" << threads << " n=" << n);
      test::check_fused_equals_unfused(b, n);
    }
  }
}

TEST(CpuBackend, OwlqnPrimitives) {
  Dims d;
  d.L = 1;
  CpuBackend b(d, 1);
  //            w:  neg   pos   0: g+c1<0  0: g−c1>0  0: |g|≤c1
  auto w = to_backend(b, {-1.0, 2.0, 0.0, 0.0, 0.0});
  auto g = to_backend(b, {0.5, 0.5, -3.0, 3.0, 0.5});
  auto pg = b.vector(5);
  map(b, OwlqnPseudoGradientRule{1.0}, {*w, *g, *pg});
  EXPECT_EQ(to_host(b, *pg), (std::vector<double>{-0.5, 1.5, -2.0, 2.0, 0.0}));
  auto dvec = to_backend(b, {1.0, 1.0, 1.0, 1.0, 1.0});
  map(b, OwlqnConstrainRule{}, {*pg, *dvec});  // keep components that go against pg
  EXPECT_EQ(to_host(b, *dvec), (std::vector<double>{1.0, 0.0, 1.0, 0.0, 0.0}));
  // Projection: orthant of w0, or of −pg where w0 = 0.
  auto x = to_backend(b, {0.5, -0.1, 0.3, 0.3, -0.2});
  map(b, OwlqnProjectRule{}, {*w, *pg, *x});
  EXPECT_EQ(to_host(b, *x), (std::vector<double>{0.0, 0.0, 0.3, 0.0, 0.0}));
}

}  // namespace
}  // namespace crfx
