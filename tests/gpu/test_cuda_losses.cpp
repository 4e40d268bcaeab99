// Seed 002's losses on the CUDA backend (issue 16 item 3) against the CPU backend (whose losses are
// chain_loss.hpp's sequence_loss, tests/test_losses.cpp): seq-exp — the NLL's deltas scaled per
// sentence by 1/p = exp(log Z − score(y*)) on the device — and point-log, point-exp — the forward
// and backward sweeps over every position's pairwise marginals on the device — for evaluate (with
// and without gradient, chunked, with edge features, without transitions, on sparse layouts) and
// evaluate_sparse; L-BFGS with each loss on both backends; a gold marginal below what the device
// computes refused naming the sentence; crfx train --loss on the emulated device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "crfx/internal/loss.hpp"
#include "crfx/internal/trainer.hpp"
#include "gpu_check.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

/// Distinct sentence ids, permuted (every other sentence reversed, then the rest).
std::vector<std::uint32_t> permuted(std::size_t S) {
  std::vector<std::uint32_t> ids;
  for (std::size_t s = S; s-- > 0;)
    if (s % 2 == 0) ids.push_back(std::uint32_t(s));
  for (std::size_t s = 0; s < S; ++s)
    if (s % 2 == 1) ids.push_back(std::uint32_t(s));
  return ids;
}

void compare_loss(const RandomProblem& p, double weight_scale, std::size_t max_chunk_tokens, SequenceLoss loss,
                  double grad_tol = kGradTol) {
  BothBackends both(p, 2, weight_scale, 17, max_chunk_tokens);
  auto& [cpu, gpu, cc, gc, w, wc, wg] = both;
  const std::vector<std::uint32_t> ids = permuted(p.corpus.num_sentences());
  const SentenceSpan span{ids.data(), ids.size()};
  auto gcv = cpu.vector(w.size());
  auto ggv = gpu->vector(w.size());
  const double lc = cpu.evaluate(*cc, *wc, span, gcv.get(), 0.75, loss);
  const double lg = gpu->evaluate(*gc, *wg, span, ggv.get(), 0.75, loss);
  EXPECT_NEAR(lg, lc, kLossRel * std::max(1.0, std::fabs(lc))) << "loss";
  // The loss is not the NLL — but for independent positions (no transitions, no edges), where
  // p(y|x) = Π_t μ_t(y_t), point-log is.
  const double nll = cpu.evaluate(*cc, *wc, span, nullptr, 1.0);
  if (loss == SequenceLoss::point_log && !p.dims.transitions && p.dims.E == 0)
    EXPECT_NEAR(lc, nll, 1e-12 * nll);
  else
    EXPECT_GT(std::fabs(lc - nll), 1e-3);
  const std::vector<double> gc_host = to_host(cpu, *gcv);
  expect_close_vec(to_host(*gpu, *ggv), gc_host, grad_tol, "gradient");
  const double lg_only = gpu->evaluate(*gc, *wg, span, nullptr, 1.0, loss);
  EXPECT_NEAR(lg_only, lg, 1e-12 * std::max(1.0, std::fabs(lg))) << "loss-only mode";

  // evaluate_sparse: the same entries (on the support, spread into a dense vector).
  auto sc = cpu.sparse_vector();
  auto sg = gpu->sparse()->sparse_vector();
  const double sl_c = cpu.evaluate_sparse(*cc, *wc, span, *sc, 0.5, false, loss);
  const double sl_g = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *sg, 0.5, false, loss);
  EXPECT_NEAR(sl_g, sl_c, kLossRel * std::max(1.0, std::fabs(sl_c))) << "sparse loss";
  EXPECT_EQ(sg->nnz(), sc->nnz());
  auto dc = cpu.vector(w.size());
  auto dg = gpu->vector(w.size());
  cpu.sparse_axpy(1.0, *sc, *dc);
  gpu->sparse()->sparse_axpy(1.0, *sg, *dg);
  expect_close_vec(to_host(*gpu, *dg), to_host(cpu, *dc), grad_tol, "sparse gradient");
  // With the support given (as sgd-l1 and adf call it after their lazy decay).
  gpu->sparse()->support(*gc, span, *sg);
  const double sl_g2 = gpu->sparse()->evaluate_sparse(*gc, *wg, span, *sg, 0.5, true, loss);
  EXPECT_NEAR(sl_g2, sl_c, kLossRel * std::max(1.0, std::fabs(sl_c))) << "sparse loss, support given";
}

constexpr SequenceLoss kOnGpu[] = {SequenceLoss::seq_exp, SequenceLoss::point_log, SequenceLoss::point_exp};

TEST(CudaLosses, EveryLossMatchesCpu) {
  REQUIRE_GPU();
  for (SequenceLoss loss : kOnGpu)
    for (std::uint32_t E : {0u, 3u})
      for (bool transitions : {true, false})
        for (Layout layout : {Layout::dense, Layout::random})
          for (std::size_t chunk : {std::size_t(0), std::size_t(9)}) {
            SCOPED_TRACE(::testing::Message() << sequence_loss_name(loss) << ", E " << E << ", transitions "
                                              << transitions << ", layout " << layout << ", chunk tokens " << chunk);
            RandomProblem p = random_problem(5, 12, E, 23, 9, 40 + E);
            p.dims.transitions = transitions;
            compare_loss(with_layout(p, layout), 0.7, chunk, loss);
          }
}

TEST(CudaLosses, PoorlyFittedLongSentences) {
  REQUIRE_GPU();
  // seq-exp's 1/p up to ~1e40, gold marginals down to ~1e-10: large factors, relative comparisons.
  // point-exp's gradient has terms in 1/μ² of the gold marginals, which amplify the two backends'
  // differences in μ (each ~1e-15 relative): 1e-8 there.
  const RandomProblem p = random_problem(8, 10, 2, 6, 40, 3);
  for (SequenceLoss loss : kOnGpu) {
    SCOPED_TRACE(sequence_loss_name(loss));
    compare_loss(p, 1.5, 0, loss, loss == SequenceLoss::point_exp ? 1e-8 : kGradTol);
  }
}

TEST(CudaLosses, GoldMarginalBeyondTheDeviceIsRefused) {
  REQUIRE_GPU();
  // Scores of ±60 per attribute: some gold marginal far below 1e-50 (the CPU's log-space path).
  const RandomProblem p = random_problem(4, 6, 0, 5, 8, 9);
  std::vector<double> w(p.dims.num_weights());
  for (std::size_t k = 0; k < w.size(); ++k) w[k] = (k * 7919) % 3 == 0 ? 60.0 : -60.0;
  CpuBackend cpu(p.dims, 1);
  BackendPtr gpu = gpu_backend(p.dims);
  auto cc = cpu.upload(p.corpus);
  auto gc = gpu->upload(p.corpus);
  auto wc = to_backend(cpu, w), wg = to_backend(*gpu, w);
  auto g = gpu->vector(w.size());
  for (SequenceLoss loss : {SequenceLoss::point_log, SequenceLoss::point_exp}) {
    const double on_cpu = cpu.evaluate(*cc, *wc, all_sentences(*cc), nullptr, 1.0, loss);
    EXPECT_FALSE(std::isnan(on_cpu));
    try {
      gpu->evaluate(*gc, *wg, all_sentences(*gc), g.get(), 1.0, loss);
      ADD_FAILURE() << sequence_loss_name(loss) << " computed on the device";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind(std::string("the loss ") + sequence_loss_name(loss) + " of sentence ", 0), 0u) << m;
      EXPECT_NE(m.find(": a gold label's marginal is below 1e-50, which the CUDA backend does not compute (the "
                       "CPU backend does, in log space); use --device cpu"),
                std::string::npos)
          << m;
    }
  }
  // The backend still works afterwards.
  const double l = gpu->evaluate(*gc, *wg, all_sentences(*gc), g.get(), 1.0, SequenceLoss::seq_log);
  EXPECT_TRUE(std::isfinite(l));
}

TEST(CudaLosses, LbfgsWithEachLossMatchesCpu) {
  REQUIRE_GPU();
  const RandomProblem p = random_problem(4, 9, 1, 15, 6, 12);
  for (SequenceLoss loss : kOnGpu) {
  SCOPED_TRACE(sequence_loss_name(loss));
  TrainOptions o;
  o.c2 = 0.1;
  o.max_iterations = 15;
  o.loss = loss;
  auto run = [&](Backend& b, std::vector<double>& objectives) {
    auto corpus = b.upload(p.corpus);
    Objective obj(b, *corpus, o.c1, o.c2, o.loss);
    auto w = b.vector(p.dims.num_weights());
    find_trainer("lbfgs").make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
      objectives.push_back(pr.objective);
      return true;
    });
    return to_host(b, *w);
  };
  CpuBackend cpu(p.dims, 2);
  BackendPtr gpu = gpu_backend(p.dims);
  std::vector<double> fc, fg;
  const std::vector<double> wc = run(cpu, fc), wg = run(*gpu, fg);
  ASSERT_EQ(fc.size(), fg.size());
  ASSERT_GE(fc.size(), 5u);
  for (std::size_t i = 0; i < fc.size(); ++i) EXPECT_NEAR(fg[i], fc[i], 1e-7 * std::fabs(fc[i])) << "iteration " << i + 1;
  EXPECT_LT(fc.back(), fc.front());
  expect_close_vec(wg, wc, 1e-6, "weights after 15 iterations");
  }
}

TEST(CudaLosses, SeqExpObjectiveWhereHOverflowsMatchesCpu) {
  // seq-exp without c1 is log(H + c2‖w‖²); where H overflows at w = 0 it is formed from one
  // evaluate per sentence (optim/exp_loss.hpp): the same value and gradient as on the CPU.
  REQUIRE_GPU();
  const RandomProblem p = beyond_the_doubles();
  const std::vector<double> w = random_weights(p.dims.num_weights(), 0.02, 4);
  CpuBackend cpu(p.dims, 2);
  BackendPtr gpu = gpu_backend(p.dims);
  auto cc = cpu.upload(p.corpus);
  auto gc = gpu->upload(p.corpus);
  auto wc = to_backend(cpu, w), wg = to_backend(*gpu, w);
  ASSERT_FALSE(std::isfinite(gpu->evaluate(*gc, *wg, all_sentences(*gc), nullptr, 1.0, SequenceLoss::seq_exp)));
  Objective oc(cpu, *cc, 0.0, 0.1, SequenceLoss::seq_exp), og(*gpu, *gc, 0.0, 0.1, SequenceLoss::seq_exp);
  auto gcv = cpu.vector(w.size());
  auto ggv = gpu->vector(w.size());
  const double hc = oc.value_and_gradient(*wc, *gcv), hg = og.value_and_gradient(*wg, *ggv);
  EXPECT_GT(hc, 700);
  EXPECT_NEAR(hg, hc, 1e-12 * hc);
  EXPECT_NEAR(og.value(*wg), hc, 1e-12 * hc);
  expect_close_vec(to_host(*gpu, *ggv), to_host(cpu, *gcv), 1e-9, "gradient");
}

#ifdef CRFX_EMU_BINARY
std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(CudaLosses, CrfxTrainLossOnTheEmulatedDevice) {
  REQUIRE_GPU();
  const std::string train = " train " + q(data_path("conll2000.train60.crfsuite.txt")) +
                            " --format crfsuite --max-iterations 3 --threads 1 -m " + q(temp_path("emu.model"));
  std::string out;
  ASSERT_EQ(run(q(CRFX_EMU_BINARY) + train + " --device cuda --loss seq-exp", &out), 0) << out;
  EXPECT_NE(out.find("cuda:0"), std::string::npos) << out;
  EXPECT_NE(out.find("loss seq-exp"), std::string::npos) << out;
  ASSERT_EQ(run(q(CRFX_EMU_BINARY) + train + " --device cuda --loss point-exp", &out), 0) << out;
  EXPECT_NE(out.find("cuda:0"), std::string::npos) << out;
  EXPECT_NE(out.find("loss point-exp"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace crfx::test
