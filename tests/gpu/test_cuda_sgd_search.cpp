// sgd-l1's heuristic line search decided on the device (issue 37; SparseGradients::
// sgd_l1_search_step, kernels/backend_sgd_search.cu): the device's step — SgdL1Search run by
// one-thread kernels, u and Λ device scalars — against the host's (the primitives and
// sgd_l1_search_on_host) step by step, bit for bit, rejected trials included; and a run stopped
// inside an epoch resumed bit-exact. On a GPU this is what catches nvcc's own arithmetic (the
// rules' elements in another kernel, an FMA contracted where the host rounds twice).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "checkpoint_check.hpp"
#include "gpu_check.hpp"
#include "rules/lazy_decay.hpp"
#include "rules/rule_set.hpp"
#include "rules/sgd_l1_search.hpp"

namespace crfx::test {
namespace {

/// What a step leaves: w, q, the stamps, u and Λ.
struct SgdState {
  std::vector<double> w, q, stamp, scalars;  // scalars: u, Λ
};

/// Steps of sgd-l1 with the heuristic line search on one-sentence batches (a fixed sequence of
/// sentences, η decaying as the trainer's), from weights w0: on the device (sgd_l1_search_step)
/// or as run_sgd_l1 takes them on the host (the primitives and sgd_l1_search_on_host), the state
/// after each. `rejected` / `accepted` count the host's steps whose trials were worse than l(w)
/// at least once / never.
std::vector<SgdState> run_sgd(const RandomProblem& p, const std::vector<double>& w0, double eta0, double c1,
                              double c2, bool on_device, std::size_t steps, std::size_t* rejected = nullptr,
                              std::size_t* accepted = nullptr) {
  BackendPtr b = gpu_backend(p.dims);
  auto corpus = b->upload(p.corpus);
  SparseGradients& sg = *b->sparse();
  const std::size_t nw = p.dims.num_weights(), n = p.corpus.num_sentences();
  const double N = double(n);
  auto w = to_backend(*b, w0);
  VectorPtr q = c1 > 0 ? b->vector(nw) : nullptr, stamp = c2 > 0 ? b->vector(nw) : nullptr;
  VectorPtr scalars = b->vector(2);
  SparseVectorPtr g = sg.sparse_vector(), saved = sg.sparse_vector();
  double u = 0, Lambda = 0;
  std::vector<SgdState> out;
  for (std::size_t t = 0; t < steps; ++t) {
    const std::uint32_t sid = std::uint32_t((7 * t + 3) % n);
    const SentenceSpan span{&sid, 1};
    const SgdL1StepParams prm =
        sgd_l1_step_params(eta0 * std::pow(0.8, double(t) / N), c1, c2, N, SequenceLoss::seq_log);
    if (on_device) {
      EXPECT_TRUE(sg.sgd_l1_search_step(*corpus, span, prm, *w, q.get(), stamp.get(), *scalars, *g, *saved));
    } else {
      if (stamp) {
        sg.support(*corpus, span, *g);
        map(*b, LazyDecayRule{Lambda, 0.0}, {*w, *stamp, nullptr}, g.get());
      }
      const double nll = sg.evaluate_sparse(*corpus, *w, span, *g, 1.0, stamp != nullptr);
      const SgdL1Search s = sgd_l1_search_on_host(*b, *corpus, span, prm, *w, q.get(), *g, *saved, nll, u);
      ++*(s.worse_seen ? rejected : accepted);
      const double rate = prm.rate[s.chosen_index()];
      u += rate * c1 / N;
      map(*b, SgdL1Rule{rate, u, 0.0, 0.0, false}, {*w, q.get()}, g.get());
      if (c2 > 0) Lambda += std::log1p(-2.0 * rate * c2 / N);
      const std::vector<double> h = {u, Lambda};
      b->write(*scalars, h.data());
    }
    out.push_back({to_host(*b, *w), q ? to_host(*b, *q) : std::vector<double>{},
                   stamp ? to_host(*b, *stamp) : std::vector<double>{}, to_host(*b, *scalars)});
  }
  return out;
}

/// The device's states after each step bit for bit the host's: w, q, the stamps, u and Λ.
void expect_same_steps(const std::vector<SgdState>& dev, const std::vector<SgdState>& host) {
  ASSERT_EQ(dev.size(), host.size());
  for (std::size_t t = 0; t < host.size(); ++t) {
    SCOPED_TRACE(::testing::Message() << "step " << t);
    ASSERT_TRUE(bitwise_equal(dev[t].w, host[t].w)) << "w";
    ASSERT_TRUE(bitwise_equal(dev[t].q, host[t].q)) << "q";
    ASSERT_TRUE(bitwise_equal(dev[t].stamp, host[t].stamp)) << "stamps";
    ASSERT_TRUE(bitwise_equal(dev[t].scalars, host[t].scalars)) << "u, Λ";
  }
}

// The device's step (the search decided by one-thread kernels, u and Λ device scalars) against
// the host's step by step, bit for bit: w, q, the stamps, u and Λ after every step — with and
// without L1 and L2, at rates where every trial is accepted and where trials are rejected.
TEST(CudaSgdSearch, DeviceStepEqualsTheHostsStepByStep) {
  REQUIRE_GPU();
  const auto p = with_layout(random_problem(5, 30, 3, 24, 12, 73), Layout::observed);
  std::vector<double> w0(p.dims.num_weights());
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> uni(-0.3, 0.3);
  for (double& x : w0) x = uni(rng);
  struct Case {
    double eta0, c1, c2;
  };
  std::size_t rejected = 0, accepted = 0;
  for (const Case& k : {Case{0.02, 0.1, 0.5}, Case{2.0, 0.2, 0.3}, Case{0.5, 0.0, 0.0}, Case{0.1, 0.1, 0.0}}) {
    SCOPED_TRACE(::testing::Message() << "eta0 " << k.eta0 << " c1 " << k.c1 << " c2 " << k.c2);
    const std::size_t steps = 30;
    const auto host = run_sgd(p, w0, k.eta0, k.c1, k.c2, false, steps, &rejected, &accepted);
    const auto dev = run_sgd(p, w0, k.eta0, k.c1, k.c2, true, steps);
    expect_same_steps(dev, host);
  }
  EXPECT_GT(rejected, 0u) << "no step's trials were rejected";
  EXPECT_GT(accepted, 0u) << "every step's trials were rejected";
  RecordProperty("steps_rejected", std::to_string(rejected));
  RecordProperty("steps_accepted", std::to_string(accepted));
}

// A sentence without a feature (no attribute at any token, no transitions in the model): its step's
// support is empty, the penalty and trial sums over it 0 (reduce_on_device's empty case) — on the
// device bit for bit the host's step, the steps around it too.
TEST(CudaSgdSearch, AStepOnASentenceWithoutFeaturesEqualsTheHosts) {
  REQUIRE_GPU();
  RandomProblem p = random_problem(4, 20, 0, 12, 6, 29);
  p.dims.transitions = false;
  Corpus& c = p.corpus;  // sentence 3 (the first step's, (7·0 + 3) mod 12) loses its items
  const std::size_t t0 = c.sentence_offsets[3], t1 = c.sentence_offsets[4];
  const std::size_t k0 = c.state_offsets[t0], k1 = c.state_offsets[t1];
  c.state_ids.erase(c.state_ids.begin() + std::ptrdiff_t(k0), c.state_ids.begin() + std::ptrdiff_t(k1));
  if (!c.state_values.empty())
    c.state_values.erase(c.state_values.begin() + std::ptrdiff_t(k0), c.state_values.begin() + std::ptrdiff_t(k1));
  for (std::size_t t = t0 + 1; t < c.state_offsets.size(); ++t)
    c.state_offsets[t] = t <= t1 ? k0 : c.state_offsets[t] - (k1 - k0);
  p = with_layout(std::move(p), Layout::observed);
  std::vector<double> w0(p.dims.num_weights());
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uni(-0.3, 0.3);
  for (double& x : w0) x = uni(rng);
  const std::size_t steps = 14;  // sentence 3 at steps 0 and 12
  std::size_t rejected = 0, accepted = 0;
  const auto host = run_sgd(p, w0, 0.5, 0.1, 0.2, false, steps, &rejected, &accepted);
  const auto dev = run_sgd(p, w0, 0.5, 0.1, 0.2, true, steps);
  expect_same_steps(dev, host);
}

// Stopped by the poll inside an epoch and resumed there: u and Λ read back from the device for the
// report's state, and written to it again by the resumed run — the uninterrupted run's model.
TEST(CudaSgdSearch, StopsInsideAnEpochAndResumesBitExact) {
  REQUIRE_GPU();
  const auto p = with_layout(random_problem(4, 24, 2, 17, 8, 43), Layout::observed);
  TrainOptions o = resume_options("sgd-l1");
  o.line_search = LineSearch::heuristic;
  o.epochs = 2;
  const TrainerInfo& info = find_trainer("sgd-l1");
  check_stop_within_is_exact([](const Dims& d) { return gpu_backend(d); }, p, info, o,
                             within_stops("sgd-l1", o, p.corpus.num_sentences()));
}

}  // namespace
}  // namespace crfx::test
