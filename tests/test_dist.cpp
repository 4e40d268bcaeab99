// Data-parallel runs without MPI (include/crfx/internal/collective.hpp): the shards of a corpus, the
// summing backend over a one-process collective and over ranks simulated by threads (a collective
// of shared memory, summing in rank order as the MPI one does), and TrainingRun's refusals.
// tests/mpi/test_mpi.cpp runs the same under mpirun, end to end.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/collective.hpp"
#include "crfx/train.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

/// `size` ranks as threads of this process: sum() gathers every rank's numbers and adds them in
/// rank order, as host/dist/mpi/mpi_collective.cpp does.
struct SharedRanks {
  explicit SharedRanks(int n) : size(n), slots(std::size_t(n)) {}
  int size;
  std::vector<std::vector<double>> slots;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  long generation = 0;
  void wait_all() {
    std::unique_lock<std::mutex> lock(m);
    const long g = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != g; });
    }
  }
};

class ThreadRank final : public Collective {
 public:
  ThreadRank(SharedRanks& s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_.size; }
  int local_rank() const override { return rank_; }
  std::string name() const override { return "threads"; }
  void sum(double* x, std::size_t n) override {
    s_.slots[std::size_t(rank_)].assign(x, x + n);
    s_.wait_all();
    for (std::size_t i = 0; i < n; ++i) {
      double v = s_.slots[0][i];
      for (int r = 1; r < s_.size; ++r) v += s_.slots[std::size_t(r)][i];
      x[i] = v;
    }
    s_.wait_all();  // nobody overwrites a slot before every rank has read it
  }
  void broadcast(void*, std::size_t, int) override { throw Error("not in these tests"); }
  void barrier() override { s_.wait_all(); }
  void abort(int) override {}

 private:
  SharedRanks& s_;
  int rank_;
};

TEST(Dist, ShardsCoverTheCorpusInOrderBalancedByTokens) {
  const auto p = test::random_problem(3, 20, 2, 101, 12, 7);
  const Corpus& c = p.corpus;
  for (int n : {1, 2, 3, 7, 101}) {
    std::size_t next = 0;
    for (int r = 0; r < n; ++r) {
      const auto [first, last] = shard_range(c, r, n);
      ASSERT_EQ(first, next) << n << " ranks, rank " << r;
      ASSERT_LT(first, last);
      next = last;
      const double tokens = double(c.sentence_offsets[last] - c.sentence_offsets[first]);
      if (n <= 7) {  // each within a sentence (≤ 12 tokens) either side of its share
        EXPECT_NEAR(tokens, double(c.num_tokens()) / n, 2 * 12.0) << n << " ranks, rank " << r;
      }
    }
    EXPECT_EQ(next, c.num_sentences());
  }
  EXPECT_NE(test::error_text([&] { shard_range(c, 0, 102); })
                .find("101 sentences, fewer than the 102 processes"),
            std::string::npos);
}

TEST(Dist, AShardIsItsSentencesAsTheyWere) {
  const auto p = test::random_problem(3, 20, 2, 30, 9, 8);
  const Corpus& c = p.corpus;
  const Corpus s = shard_corpus(c, 11, 19);
  ASSERT_EQ(s.num_sentences(), 8u);
  EXPECT_EQ(s.source_lines.front(), c.source_lines[11]);
  for (std::size_t i = 0; i < 8; ++i) {
    ASSERT_EQ(s.length(i), c.length(11 + i));
    for (std::size_t k = 0; k < s.length(i); ++k) {
      const std::size_t t = s.sentence_offsets[i] + k, u = c.sentence_offsets[11 + i] + k;
      EXPECT_EQ(s.labels[t], c.labels[u]);
      ASSERT_EQ(s.state_offsets[t + 1] - s.state_offsets[t], c.state_offsets[u + 1] - c.state_offsets[u]);
      for (std::size_t j = 0; j < s.state_offsets[t + 1] - s.state_offsets[t]; ++j) {
        EXPECT_EQ(s.state_ids[s.state_offsets[t] + j], c.state_ids[c.state_offsets[u] + j]);
        EXPECT_EQ(s.state_values[s.state_offsets[t] + j], c.state_values[c.state_offsets[u] + j]);
      }
      ASSERT_EQ(s.edge_offsets[t + 1] - s.edge_offsets[t], c.edge_offsets[u + 1] - c.edge_offsets[u]);
      for (std::size_t j = 0; j < s.edge_offsets[t + 1] - s.edge_offsets[t]; ++j)
        EXPECT_EQ(s.edge_ids[s.edge_offsets[t] + j], c.edge_ids[c.edge_offsets[u] + j]);
    }
  }
}

// One process: the summing backend's result is the inner backend's, bit for bit, added to what
// the gradient held; what it cannot sum is refused.
TEST(Dist, OneProcessAddsNothing) {
  const auto p = test::random_problem(4, 15, 2, 40, 8, 9);
  const auto w = test::random_weights(p.dims.num_weights(), 0.3, 10);
  CpuBackend plain(p.dims, 2);
  auto one = single_process();
  BackendPtr b = distributed_backend(std::make_unique<CpuBackend>(p.dims, 2), *one);
  auto pc = plain.upload(p.corpus);
  auto dc = b->upload(p.corpus);
  auto pw = to_backend(plain, w), dw = to_backend(*b, w);
  auto pg = plain.vector(w.size()), dg = b->vector(w.size());
  const double f0 = plain.evaluate(*pc, *pw, all_sentences(*pc), pg.get(), 0.5);
  const double f1 = b->evaluate(*dc, *dw, all_sentences(*dc), dg.get(), 0.5);
  EXPECT_EQ(f0, f1);
  EXPECT_EQ(to_host(plain, *pg), to_host(*b, *dg));
  EXPECT_EQ(plain.evaluate(*pc, *pw, all_sentences(*pc), nullptr, 1.0),
            b->evaluate(*dc, *dw, all_sentences(*dc), nullptr, 1.0));
  b->evaluate(*dc, *dw, all_sentences(*dc), dg.get(), 0.5);  // adds: twice the gradient
  const auto g1 = to_host(plain, *pg), g2 = to_host(*b, *dg);
  for (std::size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g2[i], g1[i] + g1[i]) << i;
  const std::uint32_t ids[] = {3, 4};
  EXPECT_NE(test::error_text([&] { b->evaluate(*dc, *dw, SentenceSpan{ids, 2}, dg.get(), 1.0); })
                .find("only passes over the whole training data are summed"),
            std::string::npos);
  EXPECT_EQ(b->incremental(), nullptr);
  EXPECT_EQ(b->sparse(), nullptr);
  EXPECT_EQ(b->host_corpus(*dc), nullptr);
}

// Three ranks on three shards: each gets the whole corpus's loss and gradient (to rounding), the
// same bits on every rank.
TEST(Dist, RanksSumTheirShardsToTheWholeCorpus) {
  const auto p = test::random_problem(4, 15, 2, 61, 8, 11);
  const auto w = test::random_weights(p.dims.num_weights(), 0.3, 12);
  CpuBackend whole(p.dims, 1);
  auto wc = whole.upload(p.corpus);
  auto ww = to_backend(whole, w);
  auto wg = whole.vector(w.size());
  const double f = whole.evaluate(*wc, *ww, all_sentences(*wc), wg.get(), 1.0);
  const auto g = to_host(whole, *wg);
  constexpr int N = 3;
  SharedRanks shared(N);
  std::vector<double> fs(N);
  std::vector<std::vector<double>> gs(N);
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      ThreadRank rank(shared, r);
      const auto [first, last] = shard_range(p.corpus, r, N);
      BackendPtr b = distributed_backend(std::make_unique<CpuBackend>(p.dims, 1), rank);
      auto c = b->upload(shard_corpus(p.corpus, first, last));
      auto bw = to_backend(*b, w);
      auto bg = b->vector(w.size());
      fs[std::size_t(r)] = b->evaluate(*c, *bw, all_sentences(*c), bg.get(), 1.0);
      gs[std::size_t(r)] = to_host(*b, *bg);
    });
  for (auto& t : threads) t.join();
  EXPECT_NEAR(fs[0], f, 1e-12 * std::fabs(f));
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(gs[0][i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << i;
  for (int r = 1; r < N; ++r) {
    EXPECT_EQ(std::memcmp(&fs[std::size_t(r)], &fs[0], sizeof(double)), 0) << r;
    EXPECT_EQ(gs[std::size_t(r)], gs[0]) << r;
  }
}

/// A device sum of the tests: the host's sum in rank order, counting its calls.
class CountingSum final : public DeviceSum {
 public:
  CountingSum(Backend& b, Collective& c, int& calls) : b_(b), c_(c), calls_(calls) {}
  void sum(Vector& x) override {
    ++calls_;
    std::vector<double> h = to_host(b_, x);
    c_.sum(h.data(), h.size());
    b_.write(x, h.data());
  }
  std::string name() const override { return "counting sum"; }

 private:
  Backend& b_;
  Collective& c_;
  int& calls_;
};

// Where every rank's backend has a device sum the gradient goes through it (the loss through the
// host), with the host path's result; where one rank's has none, no rank uses it.
TEST(Dist, DeviceSumOnlyWhereEveryRankHasOne) {
  const auto p = test::random_problem(3, 12, 1, 40, 7, 13);
  const auto w = test::random_weights(p.dims.num_weights(), 0.3, 14);
  constexpr int N = 2;
  for (int without : {-1, 1}) {  // the rank whose backend has no device sum (-1: none)
    SharedRanks shared(N);
    int calls[N] = {0, 0};
    std::vector<std::vector<double>> gs(N), host(N);
    std::vector<std::thread> threads;
    for (int r = 0; r < N; ++r)
      threads.emplace_back([&, r] {
        ThreadRank rank(shared, r);
        const auto [first, last] = shard_range(p.corpus, r, N);
        DeviceSumMaker device;
        device.usable = [&](Backend&) { return r != without; };
        device.make = [&](Backend& b, int, int, const std::function<void(void*, std::size_t)>&) {
          return std::unique_ptr<DeviceSum>(new CountingSum(b, rank, calls[r]));
        };
        for (bool with_device : {true, false}) {
          BackendPtr b = distributed_backend(std::make_unique<CpuBackend>(p.dims, 1), rank,
                                             with_device ? device : DeviceSumMaker{});
          auto c = b->upload(shard_corpus(p.corpus, first, last));
          auto bw = to_backend(*b, w);
          auto bg = b->vector(w.size());
          b->evaluate(*c, *bw, all_sentences(*c), bg.get(), 1.0);
          (with_device ? gs : host)[std::size_t(r)] = to_host(*b, *bg);
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < N; ++r) {
      EXPECT_EQ(calls[r], without < 0 ? 1 : 0) << "rank " << r << ", without " << without;
      EXPECT_EQ(gs[std::size_t(r)], host[std::size_t(r)]) << "rank " << r;
    }
  }
}

TEST(Dist, TrainingRunRefusesTrainersThatDoNotSum) {
  SharedRanks shared(2);
  ThreadRank rank(shared, 0);
  for (const char* algo : {"sgd-l1", "sag", "ap", "mira", "boost", "two-stage"}) {
    TrainConfig config;
    config.algorithm = algo;
    config.collective = &rank;
    const std::string why = test::error_text([&] { TrainingRun run(config); });
    EXPECT_NE(why.find(std::string("the algorithm ") + algo + " runs in one process only; across 2 processes"),
              std::string::npos)
        << why;
  }
  for (const char* algo : {"lbfgs", "owlqn", "rprop"}) {
    TrainConfig config;
    config.algorithm = algo;
    config.collective = &rank;
    EXPECT_EQ(test::error_text([&] { TrainingRun run(config); }), "(no error)") << algo;
  }
}

}  // namespace
}  // namespace crfx
