// crfx — SAG / SAGA's queued steps at batch size 1 (incremental_schedule, incremental_schedule_drawn;
// kernels/backend_sag_queue.cu) against the host's steps one at a time, bit for bit: in runs
// (launch_sag_run) and on each step's launches, on the GPU and on the emulated device (issue 37).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "rules/sag_sampler.hpp"
#include "rules/sag_update.hpp"

namespace crfx::test {
namespace {

/// `steps` scheduled steps of SAG or SAGA on sentences from a fixed sequence, queued (the CUDA
/// backend's incremental_schedule, its scalars read every `read_every` steps: in runs, or each
/// step on its launches) or one by one on the host's primitives (IncrementalGradients' default),
/// then flushed: w, d and the scalars.
struct ScheduledRun {
  std::vector<double> w, d;
  SagScalars scalars;
};
enum class Scheduled { host, launches, runs };

/// SAG's state on the GPU backend (its queued steps in runs or not), the problem uploaded, w and d
/// at zero, L at L0; finish(): the scalars read back, the state flushed, w and d to the host.
struct SagOnDevice {
  BackendPtr b;
  BackendCorpusPtr corpus;
  IncrementalGradients& ig;
  IncrementalStatePtr state;
  VectorPtr w, d;
  const bool queued;
  SagOnDevice(const RandomProblem& p, Scheduled how, double L0)
      : b(gpu_backend(p.dims, config(how))), corpus(b->upload(p.corpus)), ig(*b->incremental()),
        state(ig.incremental_create(*corpus)), w(b->vector(p.dims.num_weights())),
        d(b->vector(p.dims.num_weights())), queued(how != Scheduled::host) {
    ig.incremental_set_scalars(*state, SagScalars{L0, 0.0, 0});
  }
  static cuda::CudaBackendConfig config(Scheduled how) {
    cuda::CudaBackendConfig cfg;
    cfg.sag_runs = how == Scheduled::runs;
    return cfg;
  }
  SagScalars finish(std::vector<double>& w_out, std::vector<double>& d_out) {
    const SagScalars s = ig.incremental_scalars(*state);
    ig.incremental_flush(*state, *w, *d);
    w_out = to_host(*b, *w);
    d_out = to_host(*b, *d);
    return s;
  }
};

ScheduledRun run_scheduled(const RandomProblem& p, Scheduled how, const SagStepParams& params, double L0,
                           std::size_t steps, std::size_t read_every, std::size_t batch = 1) {
  SagOnDevice s(p, how, L0);
  const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
  std::uint32_t x = 12345;
  std::vector<std::uint32_t> ids;
  for (std::size_t t = 0; t < steps; ++t) {
    ids.clear();
    while (ids.size() < batch) {  // distinct sentences, as the trainer's batches
      x = x * 1103515245u + 12345u;
      const std::uint32_t sid = (x >> 8) % n;
      if (std::find(ids.begin(), ids.end(), sid) == ids.end()) ids.push_back(sid);
    }
    const SentenceSpan span{ids.data(), batch};
    if (s.queued)
      s.ig.incremental_schedule(*s.state, span, params, *s.w, *s.d);
    else
      schedule_on_host(s.ig, *s.state, span, params, *s.w, *s.d);
    if ((t + 1) % read_every == 0) s.ig.incremental_scalars(*s.state);
  }
  ScheduledRun out;
  out.scalars = s.finish(out.w, out.d);
  return out;
}

/// A queued run's state is the host's bit for bit.
void expect_same(const ScheduledRun& queue, const ScheduledRun& host) {
  EXPECT_TRUE(queue.w == host.w) << "w";
  EXPECT_TRUE(queue.d == host.d) << "d";
  EXPECT_EQ(queue.scalars.L, host.scalars.L);
  EXPECT_EQ(queue.scalars.alpha, host.scalars.alpha);
  EXPECT_EQ(queue.scalars.trials, host.scalars.trials);
}

/// The long cases, the schedule seeds sharing them: L = 40 (the forward-backward on a group of the
/// block) for 60 steps, and 1,000 steps at L = 4 (the queue's cap grows to 512, so that one wait
/// takes two runs, the first launched at 256 steps); f(problem, steps).
template <class F>
void for_each_long_case(std::size_t& index, F f) {
  for (const auto& [L, steps] : {std::pair<std::uint32_t, std::size_t>{40, 60}, {4, 1000}}) {
    if (!schedule_share(index++)) continue;
    SCOPED_TRACE(::testing::Message() << "L=" << L << ", " << steps << " steps");
    f(random_problem(L, 20, 2, 25, 9, 17), steps);
  }
}

// The queue's model is the host's step by step, bit for bit: SAG and SAGA, with and without L1,
// read back at once or rarely, and with the halts — a start at L = 1e-3, whose first searches
// need more trials than a step queues, and an L2 coefficient so large that P_k underflows every
// few steps (a flush between two steps).
TEST(CudaSagQueue, StepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (bool saga : {false, true})
    for (double mu1 : {0.0, 0.01})
      for (double lambda : {0.02, 400.0})
        for (double L0 : {1.0, 1e-3})
          for (std::size_t read_every : {1000u, 7u}) {
            if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
            SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " mu1=" << mu1 << " lambda=" << lambda
                                              << " L0=" << L0 << " read every " << read_every);
            SagStepParams params{lambda, mu1, saga ? 3.0 : 1.0, 1.0, nd, 7.0, 1.0 / nd, 0.97, saga};
            const ScheduledRun host = run_scheduled(p, Scheduled::host, params, L0, 90, read_every);
            for (Scheduled how : {Scheduled::launches, Scheduled::runs}) {
              SCOPED_TRACE(how == Scheduled::runs ? "in runs" : "a step's launches");
              expect_same(run_scheduled(p, how, params, L0, 90, read_every), host);
            }
            EXPECT_GT(host.scalars.trials, 0u);
          }
  // In runs at L > 32 and over 1,000 steps (two runs a wait).
  for_each_long_case(index, [](const RandomProblem& q, std::size_t steps) {
    const double n = double(q.corpus.num_sentences());
    const SagStepParams params{0.02, 0.01, 1.0, 1.0, n, 7.0, 1.0 / n, 0.97, false};
    expect_same(run_scheduled(q, Scheduled::runs, params, 1e-3, steps, 1000000),
                run_scheduled(q, Scheduled::host, params, 1e-3, steps, 1000000));
  });
}

// Batch steps (uniform sampling, a span of 2 or 8 sentences): queued on the device — S(batch)
// from the plans made once, the span's losses summed there — the model is the host's step by step
// (schedule_on_host: span plans, each loss read back), bit for bit: SAG and SAGA, with and without
// L1, with edge features, and the halts (a start at L = 1e-3; P_k underflowing).
TEST(CudaSagQueue, BatchStepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (std::size_t batch : {2u, 8u})
    for (bool saga : {false, true})
      for (double mu1 : {0.0, 0.01})
        for (double lambda : {0.02, 400.0})
          for (double L0 : {1.0, 1e-3})
            for (std::size_t read_every : {1000u, 7u}) {
              if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
              SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " batch " << batch << " mu1=" << mu1
                                                << " lambda=" << lambda << " L0=" << L0 << " read every "
                                                << read_every);
              const SagStepParams params{lambda, mu1, saga ? 3.0 : 1.0, double(batch), nd, 7.0, 1.0 / nd, 0.97, saga};
              const std::size_t steps = lambda > 1 ? 80 : 40;  // P_k reaches 1e-150 after ~60 steps
              const ScheduledRun host = run_scheduled(p, Scheduled::host, params, L0, steps, read_every, batch);
              expect_same(run_scheduled(p, Scheduled::launches, params, L0, steps, read_every, batch), host);
              EXPECT_GT(host.scalars.trials, 0u);
            }
  // L > 32 without edge features, 24 sentences a batch.
  if (schedule_share(index++)) {
    const auto q = random_problem(40, 20, 0, 60, 9, 17);
    const double n = double(q.corpus.num_sentences());
    const SagStepParams params{0.02, 0.01, 3.0, 24.0, n, 0.0, 1.0 / n, 0.97, true};
    expect_same(run_scheduled(q, Scheduled::launches, params, 1e-3, 12, 1000000, 24),
                run_scheduled(q, Scheduled::host, params, 1e-3, 12, 1000000, 24));
  }
}

/// `steps` drawn steps of SAG-NUS (incremental_schedule_drawn: queued on the CUDA backend, in runs
/// or on each step's launches, or one by one on its primitives, schedule_drawn_on_host) from a
/// sampler whose every sentence is seen with L_i = Li (read back every `read_every` steps), then
/// flushed: w, d, the scalars, the sampler.
struct DrawnRun {
  std::vector<double> w, d, sum, max;
  std::vector<char> seen;
  SagScalars scalars;
  std::uint64_t m = 0, next = 0;  // sentences seen; the generator's next output
};
DrawnRun run_drawn(const RandomProblem& p, Scheduled how, const SagStepParams& params, SamplerMode mode, double Li,
                   std::size_t steps, std::size_t read_every) {
  SagOnDevice s(p, how, 1.0);
  const std::size_t n = p.corpus.num_sentences();
  DrawnRun out;
  SagSamplerScalars sc{};
  sc.rng.seed(5);
  sc.n = n;
  sc.leaves = 1;
  while (sc.leaves < n) sc.leaves *= 2;
  sc.mode = mode;
  out.sum.assign(2 * sc.leaves, 0.0);
  out.max.assign(2 * sc.leaves, 0.0);
  out.seen.assign(n, 1);
  const SagSamplerRef r{&sc, out.sum.data(), out.max.data(), out.seen.data()};
  for (std::size_t i = 0; i < n; ++i) r.set(i, Li);
  sc.m = n;
  for (std::size_t t = 0; t < steps; ++t) {
    if (s.queued)
      s.ig.incremental_schedule_drawn(*s.state, r, params, *s.w, *s.d);
    else
      schedule_drawn_on_host(s.ig, *s.state, r, params, *s.w, *s.d);
    if ((t + 1) % read_every == 0) s.ig.incremental_scalars(*s.state);
  }
  out.scalars = s.finish(out.w, out.d);
  out.m = sc.m;
  out.next = sc.rng();
  return out;
}

/// A drawn queued run's state and sampler are the host's bit for bit.
void expect_same(const DrawnRun& queue, const DrawnRun& host) {
  EXPECT_TRUE(queue.w == host.w) << "w";
  EXPECT_TRUE(queue.d == host.d) << "d";
  EXPECT_TRUE(queue.sum == host.sum && queue.max == host.max) << "the L_i";
  EXPECT_EQ(queue.next, host.next) << "the generators";
  EXPECT_EQ(queue.scalars.alpha, host.scalars.alpha);
  EXPECT_EQ(queue.scalars.trials, host.scalars.trials);
}

// The drawn queue's model and sampler are the host's step by step, bit for bit: SAG and SAGA
// under mixed and lipschitz sampling, read back at once or rarely, and with the halts — every
// L_i at 1e-3 (searches that need more trials than a step queues) and an L2 coefficient so large
// that P_k underflows every few steps (L_i restored on the device, the step ended on the host).
TEST(CudaSagQueue, DrawnStepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (bool saga : {false, true})
    for (SamplerMode mode : {SamplerMode::mixed, SamplerMode::lipschitz})
      for (double lambda : {0.02, 400.0})
        for (double Li : {1.0, 1e-3})
          for (std::size_t read_every : {1000u, 7u}) {
            if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
            SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " mode=" << int(mode)
                                              << " lambda=" << lambda << " Li=" << Li << " read every "
                                              << read_every);
            const SagStepParams params{lambda, 0.01, saga ? 3.0 : 1.0, 1.0, nd, 0.0, 0.0, 1.0, saga};
            const DrawnRun host = run_drawn(p, Scheduled::host, params, mode, Li, 90, read_every);
            for (Scheduled how : {Scheduled::launches, Scheduled::runs}) {
              SCOPED_TRACE(how == Scheduled::runs ? "in runs" : "a step's launches");
              expect_same(run_drawn(p, how, params, mode, Li, 90, read_every), host);
            }
            EXPECT_GT(host.scalars.trials, 0u);
          }
  // In runs at L > 32 and over 1,000 steps (two runs a wait).
  for_each_long_case(index, [](const RandomProblem& q, std::size_t steps) {
    const SagStepParams params{0.02, 0.01, 1.0, 1.0, double(q.corpus.num_sentences()), 0.0, 0.0, 1.0, false};
    expect_same(run_drawn(q, Scheduled::runs, params, SamplerMode::mixed, 1e-3, steps, 1000000),
                run_drawn(q, Scheduled::host, params, SamplerMode::mixed, 1e-3, steps, 1000000));
  });
}

// SAG-NUS's batches drawn and stepped on the device (B = 2 and 8 of 25 sentences: draws redrawn
// on repeats; B = 24 at L = 40): the model, the L_i and the generator are the host's step by step
// (schedule_drawn_on_host: draw_span, span plans, each loss read back), bit for bit — SAG and SAGA
// (each member's coefficient from its own probability), mixed and lipschitz sampling, and the
// halts (every L_i at 1e-3; P_k underflowing: the L_i restored on the device).
TEST(CudaSagQueue, DrawnBatchStepsEqualTheHostsStepByStep) {
  REQUIRE_GPU();
  std::size_t index = 0;
  const auto p = random_problem(4, 20, 2, 25, 9, 17);
  const double nd = double(p.corpus.num_sentences());
  for (std::size_t batch : {2u, 8u})
    for (bool saga : {false, true})
      for (SamplerMode mode : {SamplerMode::mixed, SamplerMode::lipschitz})
        for (double lambda : {0.02, 400.0})
          for (double Li : {1.0, 1e-3}) {
            if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
            SCOPED_TRACE(::testing::Message() << (saga ? "saga" : "sag") << " batch " << batch << " mode=" << int(mode)
                                              << " lambda=" << lambda << " Li=" << Li);
            const SagStepParams params{lambda, 0.01, saga ? 3.0 : 1.0, double(batch), nd, 0.0, 0.0, 1.0, saga};
            const std::size_t read_every = batch == 2 ? 7 : 1000;
            const std::size_t steps = lambda > 1 ? 100 : 40;  // P_k reaches 1e-150 after ~80 steps
            const DrawnRun host = run_drawn(p, Scheduled::host, params, mode, Li, steps, read_every);
            expect_same(run_drawn(p, Scheduled::launches, params, mode, Li, steps, read_every), host);
            EXPECT_GT(host.scalars.trials, 0u);
          }
  if (schedule_share(index++)) {  // L > 32, 24 sentences a batch
    const auto q = random_problem(40, 20, 0, 60, 9, 17);
    const SagStepParams params{0.02, 0.01, 3.0, 24.0, double(q.corpus.num_sentences()), 0.0, 0.0, 1.0, true};
    expect_same(run_drawn(q, Scheduled::launches, params, SamplerMode::mixed, 1e-3, 12, 1000000),
                run_drawn(q, Scheduled::host, params, SamplerMode::mixed, 1e-3, 12, 1000000));
  }
}

}  // namespace
}  // namespace crfx::test
