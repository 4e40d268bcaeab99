// crfx — pa's, arow's and mira's steps on the GPU backend (SparseGradients::peer_step, peer_steps;
// issue 37) against the primitives, bit for bit, on the GPU and on the emulated device: a step —
// decode, Δ over the sentence's plan made once, w·Δ and ‖Δ‖² (arow: Σ Δ_j²·Σ_jj) reduced on the
// device, τ (α, μ) and ℓ by one thread with the host's formulas, the updates gated there — is the
// primitives' (viterbi → feature_difference → map_reduce → sparse_penalty → the host's τ →
// sparse_axpy, arow's map), its loss sum too; and the runs are the steps one at a time.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_steps.hpp"
#include "gpu_check.hpp"
#include "rules/peer_update.hpp"
#include "rules/rule_set.hpp"

namespace crfx::test {
namespace {

/// w, u (pa), Σ's diagonal (arow), the loss sum and the last Δ after `steps` steps on sentences
/// drawn from a fixed sequence from the weights w0 — one a step, or `batch` distinct ones (the
/// first of a shuffle, a partial Fisher–Yates) — on the device (peer_step) or through the
/// primitives, as pa's and arow's update() take them (Δ, d and ℓ the batch's).
struct PeerRun {
  std::vector<double> w, u, variance, delta;
  std::vector<float> bounds;           // mira's B_i
  std::vector<std::uint32_t> shrink;  // and its shrinking counts
  double loss = 0;
  std::size_t mistaken = 0, clipped = 0;  // the primitives': steps with a mistake, PA-I's τ = C
};
PeerRun run_peer(const RandomProblem& p, const std::vector<double>& w0, PeerStep step, bool on_device,
                 std::size_t steps, std::size_t batch = 1) {
  DeviceStart d(p, w0);
  Backend* b = d.b.get();
  BackendCorpus* corpus = d.corpus.get();
  SparseGradients& sg = d.sg();
  Vector *w = d.w.get(), *u = d.u.get(), *variance = d.variance.get();
  SparseVector* delta = d.delta.get();
  if (step.arow) step.variance = variance;
  std::vector<std::uint32_t> labels(p.corpus.num_tokens());
  const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
  PeerRun out;
  double loss = 0.25;  // the epoch's sum so far (mira: K): the device's starts from it
  std::vector<float> bounds(n, 0.0f);
  std::vector<std::uint32_t> shrink(n, 0);
  bounds[0] = 0.03f;
  shrink[1] = 3;
  if (on_device) sg.set_peer_loss(loss);
  if (on_device && step.mira) sg.set_mira_state(bounds.data(), shrink.data(), n);
  std::uint32_t x = 777;
  std::vector<std::uint32_t> ids(n);
  for (std::uint32_t i = 0; i < n; ++i) ids[i] = i;
  for (std::size_t t = 1; t <= steps; ++t) {
    x = x * 1103515245u + 12345u;
    const std::uint32_t sid = (x >> 8) % n;
    for (std::size_t i = 0; batch > 1 && i < batch; ++i) {
      x = x * 1103515245u + 12345u;
      std::swap(ids[i], ids[i + (x >> 8) % (n - i)]);
    }
    const SentenceSpan span = batch > 1 ? SentenceSpan{ids.data(), batch} : SentenceSpan{&sid, 1};
    Vector* ut = t > 1 && !step.arow ? u : nullptr;
    const double a = double(t) * 0.75 - 0.5;  // not an integer: u's products round
    if (on_device) {
      EXPECT_TRUE(sg.peer_step(*corpus, span, step, *w, ut, a, *delta)) << "no device path for the span";
      continue;
    }
    b->viterbi(*corpus, *w, span, labels.data(), nullptr);
    const std::size_t wrong = sg.feature_difference(*corpus, span, labels.data(), *delta, 1.0);
    if (step.mira) shrink[sid] = wrong ? 0 : shrink[sid] + 1;  // mira's decoded()
    if (!wrong) continue;
    ++out.mistaken;
    const double margin = map_reduce(*b, SparseDotRule{}, {*w}, delta);
    if (step.mira) {  // mira's update()
      const double mu = mira_step(double(wrong), -margin, sg.sparse_penalty(*delta, 0.0, 1.0), step.mira_c,
                                  bounds[sid], loss);
      if (mu > 1e-10) sg.sparse_axpy(mu, *delta, *w);
      continue;
    }
    if (step.arow) {
      const double l = arow_loss(margin, wrong);
      ArowUpdateRule rule;
      rule.alpha = arow_alpha(l, step.gamma, map_reduce(*b, ArowVarianceRule{}, {*variance}, delta));
      rule.gamma = step.gamma;
      map(*b, rule, {*w, *variance}, delta);
      loss += l;
      continue;
    }
    const double l = passive_aggressive_loss(margin, wrong, step.error_sensitive);
    const double tau = passive_aggressive_tau(step.pa_type, l, sg.sparse_penalty(*delta, 0.0, 1.0), step.c);
    loss += l;
    if (tau == step.c) ++out.clipped;
    if (tau == 0) continue;
    sg.sparse_axpy(tau, *delta, *w);
    if (ut) sg.sparse_axpy(a * tau, *delta, *ut);
  }
  out.loss = on_device ? sg.peer_loss() : loss;
  if (on_device && step.mira) sg.mira_state(bounds.data(), shrink.data(), n);
  if (step.mira) {
    out.bounds = bounds;
    out.shrink = shrink;
  }
  out.w = to_host(*b, *w);
  out.u = to_host(*b, *u);
  out.variance = to_host(*b, *variance);
  auto dense = b->vector(w0.size());
  sg.sparse_axpy(1.0, *delta, *dense);
  out.delta = to_host(*b, *dense);
  return out;
}

/// The runs agree bit for bit; returns the steps whose path was right (the gate's other side).
std::size_t expect_same_runs(const PeerRun& dev, const PeerRun& prim, std::size_t steps) {
  EXPECT_GT(prim.mistaken, 0u);
  EXPECT_TRUE(dev.w == prim.w) << "w";
  EXPECT_TRUE(dev.u == prim.u) << "u";
  EXPECT_TRUE(dev.variance == prim.variance) << "Σ's diagonal";
  EXPECT_TRUE(dev.delta == prim.delta) << "the last step's Δ";
  EXPECT_EQ(dev.loss, prim.loss) << "the loss sum (mira: K)";
  EXPECT_TRUE(dev.bounds == prim.bounds) << "mira's bounds";
  EXPECT_TRUE(dev.shrink == prim.shrink) << "mira's shrinking counts";
  if (prim.bounds.empty()) { EXPECT_GT(prim.loss, 0.25); }  // (mira's K moves on unclipped steps only)
  return steps - prim.mistaken;
}

/// fn(problem, w0) for each case of the step tests: with and without edge features, each weight
/// layout, from zero weights and from random ones.
template <class Fn>
void for_each_case(Fn fn) {
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : kAllLayouts)
      for (double scale : {0.0, 0.4}) {
        SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout << " w0 scale " << scale);
        const RandomProblem p = with_layout(random_problem(4, 15, E, 12, 7, 91 + E), layout);
        fn(p, random_weights(p.dims.num_weights(), scale, 5));
      }
}

// pa's step on the device is the primitives' bit for bit — w, u, the loss sum and the last Δ — for
// each type (PA-I's τ clipped at C on some steps), error-sensitive or not, in each weight layout,
// with and without edge features, from zero weights and from random ones; on one sentence and on
// batches of 5 and 8 (Δ summed over the batch in the host's order, d its mistakes).
TEST(CudaPeerSteps, PaStepOnTheDeviceEqualsThePrimitives) {
  REQUIRE_GPU();
  const std::size_t steps = 30;
  for (std::size_t batch : {1u, 5u, 8u}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    std::size_t right = 0, clipped = 0;
    int k = 0;  // the six (type, error-sensitive) pairs in turn: each twice over the cases
    for_each_case([&](const RandomProblem& p, const std::vector<double>& w0) {
      PeerStep step;
      step.pa_type = k % 3;
      step.c = 0.05;
      step.error_sensitive = (k / 3) % 2 == 1;
      ++k;
      SCOPED_TRACE(::testing::Message() << "pa-type " << step.pa_type << " error-sensitive " << step.error_sensitive);
      const PeerRun prim = run_peer(p, w0, step, false, steps, batch);
      right += expect_same_runs(run_peer(p, w0, step, true, steps, batch), prim, steps);
      if (step.pa_type == 1) clipped += prim.clipped;
    });
    EXPECT_GT(clipped, 0u) << "PA-I's clip at C never taken";
    if (batch == 1) { EXPECT_GT(right, 0u) << "no step whose path was right: the gate untested"; }
  }
}

// arow's step: w, Σ's diagonal and the loss sum bit for bit, as pa's, on one sentence and on
// batches of 5 and 8.
TEST(CudaPeerSteps, ArowStepOnTheDeviceEqualsThePrimitives) {
  REQUIRE_GPU();
  const std::size_t steps = 30;
  for (std::size_t batch : {1u, 5u, 8u}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    std::size_t right = 0;
    for_each_case([&](const RandomProblem& p, const std::vector<double>& w0) {
      PeerStep step;
      step.arow = true;
      step.gamma = 0.3;
      const PeerRun prim = run_peer(p, w0, step, false, steps, batch);
      const PeerRun dev = run_peer(p, w0, step, true, steps, batch);
      right += expect_same_runs(dev, prim, steps);
      EXPECT_FALSE(prim.variance == std::vector<double>(w0.size(), 0.7)) << "Σ never updated";
    });
    if (batch == 1) { EXPECT_GT(right, 0u) << "no step whose path was right: the gate untested"; }
  }
}

/// w, u (pa), Σ's diagonal (arow), the loss sum (mira: K), mira's bounds and counts after pa's,
/// arow's or mira's steps at batch size 1 on `sids` from w0 and a loss sum of 0.25: one peer_step a
/// sentence (u scaled by t0 + i, not updated where that is 0), or all of them in runs (peer_steps).
std::vector<std::vector<double>> run_peer_steps(const RandomProblem& p, const std::vector<double>& w0, PeerStep step,
                                                const std::vector<std::uint32_t>& sids, double t0, bool runs) {
  DeviceStart d(p, w0);
  SparseGradients& sg = d.sg();
  if (step.arow) step.variance = d.variance.get();
  sg.set_peer_loss(0.25);
  const std::size_t n = p.corpus.num_sentences();
  std::vector<float> bounds(n, 0.0f);  // mira's: one sentence's part of the way to C, one shrinking
  std::vector<std::uint32_t> shrink(n, 0);
  bounds[0] = 0.03f;
  shrink[1] = 3;
  if (step.mira) sg.set_mira_state(bounds.data(), shrink.data(), n);
  Vector* uu = step.arow || step.mira ? nullptr : d.u.get();
  if (runs) {
    EXPECT_TRUE(sg.peer_steps(*d.corpus, SentenceSpan{sids.data(), sids.size()}, step, *d.w, uu, t0, *d.delta));
  } else {
    for (std::size_t i = 0; i < sids.size(); ++i)
      EXPECT_TRUE(sg.peer_step(*d.corpus, SentenceSpan{&sids[i], 1}, step, *d.w, t0 + double(i) > 0 ? uu : nullptr,
                               t0 + double(i), *d.delta));
  }
  if (step.mira) sg.mira_state(bounds.data(), shrink.data(), n);
  return {to_host(*d.b, *d.w),
          to_host(*d.b, *d.u),
          to_host(*d.b, *d.variance),
          {sg.peer_loss()},
          std::vector<double>(bounds.begin(), bounds.end()),
          std::vector<double>(shrink.begin(), shrink.end())};
}

// pa's and arow's steps at batch size 1 in runs (peer_steps: one launch of one block for up to
// kRunIds steps, w·Δ and ‖Δ‖² by reduce_on_device's blocks one after another) are the steps one at
// a time bit for bit — w, u, Σ's diagonal, the loss sum — for each pa type, error-sensitive or not,
// and arow, in every case of the step tests; and a run of two launches (600 steps).
TEST(CudaPeerSteps, PeerRunsEqualTheStepsOneByOne) {
  REQUIRE_GPU();
  int k = 0;
  for_each_case([&](const RandomProblem& p, const std::vector<double>& w0) {
    PeerStep step;
    step.arow = k % 4 == 3;
    step.gamma = 0.3;
    step.pa_type = k % 3;
    step.c = 0.05;
    step.error_sensitive = (k / 4) % 2 == 1;
    const std::size_t steps = k == 0 ? 600 : 40;
    ++k;
    SCOPED_TRACE(::testing::Message() << (step.arow ? "arow" : "pa") << " type " << step.pa_type << " error-sensitive "
                                      << step.error_sensitive << ", " << steps << " steps");
    std::vector<std::uint32_t> sids(steps);
    std::uint32_t x = 99;
    for (std::uint32_t& id : sids) id = ((x = x * 1103515245u + 12345u) >> 8) % std::uint32_t(p.corpus.num_sentences());
    const double t0 = k % 2 ? 0.0 : 5.0;
    const auto one = run_peer_steps(p, w0, step, sids, t0, false), run = run_peer_steps(p, w0, step, sids, t0, true);
    EXPECT_TRUE(run[0] == one[0]) << "w";
    EXPECT_TRUE(run[1] == one[1]) << "u";
    EXPECT_TRUE(run[2] == one[2]) << "Σ's diagonal";
    EXPECT_EQ(run[3][0], one[3][0]) << "the loss sum";
    EXPECT_GT(one[3][0], 0.25) << "no step had a loss";
  });
}

// mira's steps in runs (peer_steps with its bounds, counts and K on the device, each step's its
// sentence's) are the steps one at a time bit for bit: w, B_i (clipped at C on some sentences),
// the shrinking counts and K, in every case of the step tests; and a run of two launches (600 steps).
TEST(CudaPeerSteps, MiraRunsEqualTheStepsOneByOne) {
  REQUIRE_GPU();
  std::size_t clipped = 0, counted = 0, k = 0;
  for_each_case([&](const RandomProblem& p, const std::vector<double>& w0) {
    PeerStep step;
    step.mira = true;
    step.mira_c = 0.06f;
    const std::size_t steps = k++ == 0 ? 600 : 40;
    SCOPED_TRACE(::testing::Message() << steps << " steps");
    std::vector<std::uint32_t> sids(steps);
    std::uint32_t x = 123;
    for (std::uint32_t& id : sids) id = ((x = x * 1103515245u + 12345u) >> 8) % std::uint32_t(p.corpus.num_sentences());
    const auto one = run_peer_steps(p, w0, step, sids, 0.0, false), run = run_peer_steps(p, w0, step, sids, 0.0, true);
    const char* names[] = {"w", "u", "Σ's diagonal", "K", "the bounds", "the shrinking counts"};
    for (std::size_t v = 0; v < one.size(); ++v) EXPECT_TRUE(run[v] == one[v]) << names[v];
    for (double bound : one[4]) clipped += bound == double(step.mira_c);
    for (double count : one[5]) counted += count > 3;
  });
  EXPECT_GT(clipped, 0u) << "no bound reached C";
  EXPECT_GT(counted, 0u) << "no sentence decoded right twice: the counts untested";
}

// mira's step: w, the bounds B_i (clipped at C on some sentences), the shrinking counts and K
// (the loss slot) bit for bit.
TEST(CudaPeerSteps, MiraStepOnTheDeviceEqualsThePrimitives) {
  REQUIRE_GPU();
  const std::size_t steps = 30;
  std::size_t right = 0, clipped = 0, violated = 0;
  for_each_case([&](const RandomProblem& p, const std::vector<double>& w0) {
    PeerStep step;
    step.mira = true;
    step.mira_c = 0.06f;
    const PeerRun prim = run_peer(p, w0, step, false, steps);
    right += expect_same_runs(run_peer(p, w0, step, true, steps), prim, steps);
    for (float bound : prim.bounds) clipped += bound == step.mira_c;
    violated += prim.loss > 0.25;
  });
  EXPECT_GT(right, 0u) << "no step whose path was right: the gate untested";
  EXPECT_GT(clipped, 0u) << "no bound reached C";
  EXPECT_GT(violated, 0u) << "K never moved";
}

}  // namespace
}  // namespace crfx::test
