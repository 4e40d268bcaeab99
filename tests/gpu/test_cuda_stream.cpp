// crfx — a corpus larger than the device, streamed (kernels/backend_stream.cu): its whole-corpus
// passes give bitwise the resident corpus's results when both are cut into the same chunks (the
// objective, the gradient, Viterbi, the marginals and an L-BFGS model), a device-memory limit
// below the corpus streams it (results as the CPU's), and what cannot be streamed is refused with
// the figures: a pinned copy past the host memory, a stochastic trainer's per-sentence work.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/trainer.hpp"
#include "gpu_check.hpp"
#include "random_problem.hpp"

#ifdef CRFX_HAVE_CUDA
#include "../kernels/cuda_api.hpp"
#endif

namespace crfx::test {
namespace {

#ifdef CRFX_HAVE_CUDA
BackendPtr cuda_backend(const Dims& d, std::size_t chunk_tokens, bool stream, std::size_t device_limit = 0,
                        std::size_t host_limit = 0) {
  cuda::CudaBackendConfig cfg;
  cfg.max_chunk_tokens = chunk_tokens;
  cfg.always_stream = stream;
  cfg.max_device_memory = device_limit;
  cfg.max_host_memory = host_limit;
  return cuda::make_cuda_backend(d, cfg);
}
#else
BackendPtr cuda_backend(const Dims&, std::size_t, bool, std::size_t = 0, std::size_t = 0) {
  throw Error("built without CUDA");
}
#endif

/// The chunk count in the backend's note on a streamed corpus ("… in 7 chunks …"), 0 when resident.
std::size_t chunks_of(const Backend& b, const BackendCorpus& c) {
  const std::string note = b.corpus_note(c);
  const auto at = note.find(" in ");
  return note.empty() || at == std::string::npos ? 0 : std::stoul(note.substr(at + 4));
}

bool bitwise(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

struct PassResults {
  double loss = 0, loss_only = 0, exp_loss = 0, point_loss = 0;
  std::vector<double> grad, exp_grad, point_grad, scores, node, log_z, model;
  std::vector<std::uint32_t> labels;
  double objective = 0;
  std::size_t chunks = 0;
};

PassResults run_passes(Backend& b, const RandomProblem& p, bool train) {
  PassResults r;
  auto c = b.upload(p.corpus);
  r.chunks = chunks_of(b, *c);
  const std::size_t W = p.dims.num_weights(), N = p.corpus.num_tokens(), S = p.corpus.num_sentences();
  auto w = to_backend(b, random_weights(W, 0.5, 11));
  auto g = b.vector(W);
  b.fill(*g, 0.0);
  r.loss = b.evaluate(*c, *w, all_sentences(*c), g.get(), 1.0);
  r.grad = to_host(b, *g);
  r.loss_only = b.evaluate(*c, *w, all_sentences(*c), nullptr, 1.0);
  b.fill(*g, 0.0);
  r.exp_loss = b.evaluate(*c, *w, all_sentences(*c), g.get(), 0.5, SequenceLoss::seq_exp);
  r.exp_grad = to_host(b, *g);
  b.fill(*g, 0.0);
  r.point_loss = b.evaluate(*c, *w, all_sentences(*c), g.get(), 1.0, SequenceLoss::point_log);
  r.point_grad = to_host(b, *g);
  r.labels.resize(N);
  r.scores.resize(S);
  b.viterbi(*c, *w, all_sentences(*c), r.labels.data(), r.scores.data());
  r.node.resize(N * p.dims.L);
  r.log_z.resize(S);
  b.marginals(*c, *w, all_sentences(*c), r.node.data(), r.log_z.data());
  if (train) {
    TrainOptions o;
    o.c2 = 0.5;
    o.epsilon = o.delta = 0;
    o.period = 0;
    o.max_iterations = 8;
    Objective obj(b, *c, 0.0, o.c2);
    auto wv = b.vector(W);
    r.objective = find_trainer("lbfgs").make()->train(obj, *wv, o, nullptr);
    r.model = to_host(b, *wv);
  }
  return r;
}

void expect_bitwise(const PassResults& s, const PassResults& r) {
  EXPECT_EQ(std::memcmp(&s.loss, &r.loss, sizeof(double)), 0) << s.loss << " vs " << r.loss;
  EXPECT_EQ(std::memcmp(&s.loss_only, &r.loss_only, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(&s.exp_loss, &r.exp_loss, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(&s.point_loss, &r.point_loss, sizeof(double)), 0);
  EXPECT_TRUE(bitwise(s.grad, r.grad)) << "gradient";
  EXPECT_TRUE(bitwise(s.exp_grad, r.exp_grad)) << "seq-exp gradient";
  EXPECT_TRUE(bitwise(s.point_grad, r.point_grad)) << "point-log gradient";
  EXPECT_EQ(s.labels, r.labels);
  EXPECT_TRUE(bitwise(s.scores, r.scores)) << "Viterbi scores";
  EXPECT_TRUE(bitwise(s.node, r.node)) << "node marginals";
  EXPECT_TRUE(bitwise(s.log_z, r.log_z)) << "log Z";
  EXPECT_EQ(std::memcmp(&s.objective, &r.objective, sizeof(double)), 0) << s.objective << " vs " << r.objective;
  EXPECT_TRUE(bitwise(s.model, r.model)) << "L-BFGS model";
}

// Streamed and resident, cut into the same chunks (max_chunk_tokens): every pass bitwise the same,
// and eight L-BFGS iterations give the same model byte for byte — dense and observed-pair layouts,
// with and without edge features, valued and binary attributes, short sentences (the fused
// forward-backward) and long ones (the split one, its work list streamed with the chunk).
TEST(CudaStream, StreamedPassesAreBitwiseTheResidentOnes) {
  REQUIRE_GPU();
  struct Case {
    std::uint32_t A, E;
    Layout layout;
    bool binary;
    std::size_t sentences, max_len, chunk_tokens;
  };
  // A = 3 over 150 sentences: every attribute has several gather segments (> 256 occurrences),
  // whose partial rows the chunks share.
  const Case cases[] = {{40, 0, Layout::dense, false, 40, 12, 40},   {40, 3, Layout::dense, false, 40, 12, 40},
                        {40, 3, Layout::observed, true, 40, 12, 25}, {40, 0, Layout::observed, false, 40, 12, 25},
                        {3, 3, Layout::dense, false, 150, 12, 200},  {40, 3, Layout::dense, false, 12, 200, 260}};
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "A=" << k.A << " E=" << k.E << " " << k.layout
                                      << (k.binary ? " binary" : "") << " max_len=" << k.max_len);
    const auto p = with_layout(random_problem(5, k.A, k.E, k.sentences, k.max_len, 91 + k.E, k.binary), k.layout);
    const bool train = k.max_len < 100;  // (the long sentences' case: the passes only, for time)
    auto resident = cuda_backend(p.dims, k.chunk_tokens, false);
    auto streamed = cuda_backend(p.dims, k.chunk_tokens, true);
    const PassResults r = run_passes(*resident, p, train);
    const PassResults s = run_passes(*streamed, p, train);
    EXPECT_EQ(r.chunks, 0u) << "resident";
    EXPECT_GE(s.chunks, 3u) << "streamed in several chunks";
    expect_bitwise(s, r);
  }
}

// A device-memory limit below the corpus's copy: the corpus is streamed without being asked to
// (in several chunks, cut by the memory left), and its passes agree with the CPU's.
TEST(CudaStream, DeviceMemoryLimitBelowTheCorpusStreamsIt) {
  REQUIRE_GPU();
  const auto p = random_problem(5, 300, 3, 120, 12, 17);
  auto probe = cuda_backend(p.dims, 0, false);
  const std::size_t copy = probe->upload_bytes(p.corpus);
  ASSERT_GT(copy, 0u);
  // The copy alone is over the limit; what the stream needs (the gather plans, two slots and the
  // workspace) is within it.
  const std::size_t limit = copy * 3 / 4;
  auto gpu = cuda_backend(p.dims, 0, false, limit);
  EXPECT_LE(gpu->upload_bytes(p.corpus) + gpu->workspace_bytes(p.corpus), limit);
  auto gc = gpu->upload(p.corpus);
  EXPECT_GE(chunks_of(*gpu, *gc), 2u) << gpu->corpus_note(*gc);
  CpuBackend cpu(p.dims, 1);
  auto cc = cpu.upload(p.corpus);
  const auto w = random_weights(p.dims.num_weights(), 0.5, 5);
  auto wg = to_backend(*gpu, w), wc = to_backend(cpu, w);
  auto gg = gpu->vector(w.size()), gcv = cpu.vector(w.size());
  gpu->fill(*gg, 0.0);
  cpu.fill(*gcv, 0.0);
  const double lg = gpu->evaluate(*gc, *wg, all_sentences(*gc), gg.get(), 1.0);
  const double lc = cpu.evaluate(*cc, *wc, all_sentences(*cc), gcv.get(), 1.0);
  EXPECT_NEAR(lg, lc, kLossRel * std::fabs(lc));
  expect_close_vec(to_host(*gpu, *gg), to_host(cpu, *gcv), kGradTol, "gradient");
  std::vector<std::uint32_t> lab_g(p.corpus.num_tokens()), lab_c(p.corpus.num_tokens());
  gpu->viterbi(*gc, *wg, all_sentences(*gc), lab_g.data(), nullptr);
  cpu.viterbi(*cc, *wc, all_sentences(*cc), lab_c.data(), nullptr);
  EXPECT_EQ(lab_g, lab_c);
}

// The pinned copy past the host memory given: refused at upload, with the figures.
TEST(CudaStream, PinnedCopyPastTheHostMemoryIsRefusedWithTheFigures) {
  REQUIRE_GPU();
  const auto p = random_problem(5, 40, 3, 30, 12, 23);
  auto gpu = cuda_backend(p.dims, 40, true, 0, 4096);
  try {
    gpu->upload(p.corpus);
    FAIL() << "upload must be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("needs"), std::string::npos) << m;
    EXPECT_NE(m.find("pinned host memory"), std::string::npos) << m;
    EXPECT_NE(m.find("MiB"), std::string::npos) << m;
  }
}

// What needs the whole corpus on the device — a stochastic trainer's per-sentence state and steps,
// a pass over part of the corpus, n-best decoding — is refused on a streamed one, saying why.
TEST(CudaStream, PerSentenceWorkOnAStreamedCorpusIsRefused) {
  REQUIRE_GPU();
  const auto p = random_problem(5, 40, 0, 30, 12, 29);
  auto gpu = cuda_backend(p.dims, 40, true);
  auto gc = gpu->upload(p.corpus);
  ASSERT_GE(chunks_of(*gpu, *gc), 2u);
  auto w = gpu->vector(p.dims.num_weights());
  gpu->fill(*w, 0.0);
  const std::uint32_t ids[] = {3, 4};
  auto refused = [&](auto&& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << " must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("streamed"), std::string::npos) << what << ": " << e.what();
    }
  };
  refused([&] { gpu->incremental()->incremental_create(*gc); }, "SAG");
  refused([&] { gpu->evaluate(*gc, *w, SentenceSpan{ids, 2}, nullptr, 1.0); }, "a part of the corpus");
  std::vector<std::uint32_t> labels(p.corpus.num_tokens() * 2);
  std::vector<double> scores(p.corpus.num_sentences() * 2);
  refused([&] { gpu->viterbi_nbest(*gc, *w, all_sentences(*gc), 2, labels.data(), scores.data()); }, "n-best");
  // The whole-corpus passes still run after the refusals.
  EXPECT_TRUE(std::isfinite(gpu->evaluate(*gc, *w, all_sentences(*gc), nullptr, 1.0)));
}

}  // namespace
}  // namespace crfx::test
