// crfx — sgd-l1's and adf's batch step on the device (issue 37; backend_sparse_batch.cu): for a
// batch of 2 … 256 sentences, support() builds S(batch) on the device from the sentences' plans
// made once and evaluate_sparse_gradient sums the gradient sentence by sentence in a dense
// scratch — bitwise evaluate_sparse's, whose span is still planned on the host and copied (the
// path every batch took before). Runs on a GPU and on the emulated device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpu_check.hpp"

namespace crfx::test {
namespace {

/// Per step of a run on batches drawn from a fixed sequence: the batch's gradient as a dense
/// vector and its support (a fixed random vector gathered over it, as a dense vector), and w
/// after all the steps (w −= step·g each step).
struct BatchRun {
  std::vector<std::vector<double>> gradient, support;
  std::vector<std::size_t> nnz;
  std::vector<double> w;
};
BatchRun run_batches(const RandomProblem& p, const std::vector<double>& w0, bool on_device, std::size_t batch,
                     SequenceLoss loss, double step, std::size_t steps = 10) {
  BackendPtr b = gpu_backend(p.dims);
  auto corpus = b->upload(p.corpus);
  SparseGradients& sg = *b->sparse();
  auto w = to_backend(*b, w0);
  auto r = to_backend(*b, random_weights(w0.size(), 1.0, 11));
  auto g = sg.sparse_vector();
  const std::uint32_t n = std::uint32_t(p.corpus.num_sentences());
  std::vector<std::uint32_t> ids(n);
  for (std::uint32_t i = 0; i < n; ++i) ids[i] = i;
  std::uint32_t x = 4242;
  BatchRun out;
  auto image = [&] {  // g as a dense vector
    auto dense = b->vector(w0.size());
    sg.sparse_axpy(1.0, *g, *dense);
    return to_host(*b, *dense);
  };
  for (std::size_t t = 0; t < steps; ++t) {
    for (std::size_t i = 0; i < batch; ++i) {  // `batch` distinct sentences (a partial Fisher–Yates)
      x = x * 1103515245u + 12345u;
      std::swap(ids[i], ids[i + (x >> 8) % (n - i)]);
    }
    const SentenceSpan span{ids.data(), batch};
    const bool given = t % 2 == 1;  // support() first (sgd-l1, adf with L2), or the pass's own
    if (given) sg.support(*corpus, span, *g);
    const double scale = 1.0 / double(batch);
    if (on_device)
      sg.evaluate_sparse_gradient(*corpus, *w, span, *g, scale, given, loss);
    else
      sg.evaluate_sparse(*corpus, *w, span, *g, scale, given, loss);
    out.nnz.push_back(g->nnz());
    out.gradient.push_back(image());
    sg.sparse_axpy(-step, *g, *w);
    sg.gather(*r, *g);
    out.support.push_back(image());
  }
  out.w = to_host(*b, *w);
  return out;
}

// The device's batch step is the span plan's bit for bit — each step's gradient and support, and
// the weights after ten steps — in every weight layout, with and without edge features and
// transitions, for both sequence losses, at batch sizes 5 and 8.
TEST(CudaSparseBatch, StepOnTheDeviceEqualsTheSpanPlan) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (bool transitions : {true, false})
      for (Layout layout : kAllLayouts)
        for (SequenceLoss loss : {SequenceLoss::seq_log, SequenceLoss::seq_exp}) {
          SCOPED_TRACE(::testing::Message() << "E=" << E << " transitions=" << transitions << " " << layout
                                            << " seq_exp=" << (loss == SequenceLoss::seq_exp));
          RandomProblem base = random_problem(4, 15, E, 24, 7, 93 + E);
          base.dims.transitions = transitions;
          const RandomProblem p = with_layout(base, layout);
          const std::vector<double> w0 = random_weights(p.dims.num_weights(), 0.3, 5);
          for (std::size_t batch : {5u, 8u}) {
            SCOPED_TRACE(::testing::Message() << "batch " << batch);
            // seq-exp's gradient is exp(NLL) times larger: a step that keeps w finite.
            const double step = loss == SequenceLoss::seq_exp ? 1e-5 : 0.7;
            const BatchRun host = run_batches(p, w0, false, batch, loss, step);
            const BatchRun dev = run_batches(p, w0, true, batch, loss, step);
            EXPECT_TRUE(dev.nnz == host.nnz) << "support sizes";
            for (std::size_t t = 0; t < host.gradient.size(); ++t) {
              EXPECT_TRUE(dev.gradient[t] == host.gradient[t]) << "gradient of step " << t;
              EXPECT_TRUE(dev.support[t] == host.support[t]) << "support of step " << t;
            }
            EXPECT_TRUE(dev.w == host.w) << "w";
            double norm = 0;
            for (double v : host.gradient.back()) norm += v * v;
            EXPECT_GT(norm, 0.0) << "a gradient that is not zero";
            EXPECT_TRUE(std::isfinite(norm)) << "w stayed finite";
          }
        }
}

}  // namespace
}  // namespace crfx::test
