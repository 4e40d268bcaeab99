// crfx — what the tests of single trainers share (tests/test_peer_trainers.cpp, test_l2sgd.cpp,
// test_mira.cpp): a trainer run on the CPU with its reports, a path's features, weights compared
// to a reference written plainly, the two-token problem of the steps by hand, and the F1 of a
// crfx train run on the CoNLL-2000 slices.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx::test {

struct Trained {
  std::vector<double> w;
  std::vector<Progress> reports;
  std::string stop_reason;
};

/// `algo` trained on p from w0 (zeros when empty) with `o`, on the CPU with `threads` threads, with
/// no c1, c2 in the objective (the trainers that take them read them from `o`).
inline Trained train_on_cpu(const char* algo, const RandomProblem& p, const TrainOptions& o,
                            const std::vector<double>& w0 = {}, unsigned threads = 1) {
  CpuBackend b(p.dims, threads);
  auto corpus = b.upload(p.corpus);
  Objective obj(b, *corpus, 0.0, 0.0);
  auto w = w0.empty() ? b.vector(p.dims.num_weights()) : to_backend(b, w0);
  auto trainer = find_trainer(algo).make();
  Trained r;
  trainer->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
    r.reports.push_back(pr);
    return true;
  });
  r.w = to_host(b, *w);
  r.stop_reason = trainer->stop_reason();
  return r;
}

/// f(x, y) of sentence `id` (scaled) added to `out`, from the feature definitions.
inline void add_path(const RandomProblem& p, std::uint32_t id, const std::uint32_t* y, double scale,
                     std::vector<double>& out) {
  const Corpus& c = p.corpus;
  const std::size_t L = p.dims.L, t0 = c.sentence_offsets[id];
  for (std::size_t t = t0; t < c.sentence_offsets[id + 1]; ++t) {
    const std::uint32_t yt = y[t - t0];
    for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
      out[std::size_t(c.state_ids[k]) * L + yt] += scale * c.state_value(k);
    if (t == t0) continue;
    const std::size_t pair = std::size_t(y[t - t0 - 1]) * L + yt;
    out[p.dims.transition_offset() + pair] += scale;
    for (std::size_t k = c.edge_offsets[t]; k < c.edge_offsets[t + 1]; ++k)
      out[p.dims.edge_offset() + c.edge_ids[k] * L * L + pair] += scale * c.edge_value(k);
  }
}

/// Every weight within tol · max(1, max |want|) of the reference.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1;
  for (double x : want) scale = std::max(scale, std::fabs(x));
  for (std::size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], tol * scale) << "weight " << j;
}

/// One sentence of 2 tokens, L = 2, A = 2: token 1 fires attribute 0, token 2 attribute 1, gold
/// labels (1, 1). Weights: state a·2 + y (0 … 3), transitions 4 + y'·2 + y (4 … 7).
inline RandomProblem two_tokens() {
  RandomProblem p;
  p.dims.L = 2;
  p.dims.A = 2;
  p.dims.E = 0;
  p.dims.transitions = true;
  Corpus& c = p.corpus;
  c.state_ids = {0, 1};
  c.state_offsets = {0, 1, 2};
  c.edge_offsets = {0, 0, 0};
  c.labels = {1, 1};
  c.sentence_offsets = {0, 2};
  c.source_lines = {1};
  return p;
}

/// random_problem's sentences labelled by a linear rule of their attributes (argmax_y Σ_a
/// x_a·U[a][y], U random), as test::beyond_the_doubles does: labels a model can learn, so that
/// sentences come out right (mistake-driven trainers shrink, stop) and rates calibrate. (Random
/// labels teach nothing that carries to the next sentence.)
inline RandomProblem learnable(std::uint32_t L, std::uint32_t A, std::uint32_t E, std::size_t sentences,
                               std::size_t max_len, std::uint64_t seed) {
  RandomProblem p = random_problem(L, A, E, sentences, max_len, seed);
  const std::vector<double> U = random_weights(std::size_t(A) * L, 1.0, seed + 1);
  std::vector<double> score(L);
  for (std::size_t t = 0; t < p.corpus.num_tokens(); ++t) {
    std::fill(score.begin(), score.end(), 0.0);
    for (std::size_t k = p.corpus.state_offsets[t]; k < p.corpus.state_offsets[t + 1]; ++k)
      for (std::size_t y = 0; y < L; ++y) score[y] += p.corpus.state_value(k) * U[p.corpus.state_ids[k] * L + y];
    p.corpus.labels[t] = std::uint32_t(std::max_element(score.begin(), score.end()) - score.begin());
  }
  return p;
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// F1 of `args` trained on the 300-sentence slice and tagged on the 100-sentence test slice; the
/// training run's output in `err` when given.
inline double conll_f1(const std::string& name, const std::string& args, std::string* err = nullptr) {
  const std::string model = temp_path(name + ".model"), tagged = temp_path(name + ".tagged");
  std::string out;
  const std::string train = crfx_binary() + " train " + quoted(data_path("conll2000.train300.txt")) + " -t " +
                            quoted(data_path("chunking.template")) + " --threads 2 --quiet -m " + quoted(model) + " " +
                            args;
  EXPECT_EQ(run(train, &out), 0) << out;
  if (err) *err = out;
  EXPECT_EQ(run(crfx_binary() + " tag " + quoted(data_path("conll2000.test100.txt")) + " -m " + quoted(model) +
                    " -o " + quoted(tagged) + " --quiet",
                &out),
            0)
      << out;
  EXPECT_EQ(run(crfx_binary() + " eval " + quoted(tagged), &out), 0) << out;
  const std::size_t at = out.find("FB1:");
  if (at == std::string::npos) {
    ADD_FAILURE() << out;
    return 0;
  }
  return std::stod(out.substr(at + 4));
}

}  // namespace crfx::test
