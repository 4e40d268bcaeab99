// crfx — what the emulated device can say about a GPU pass's speed without a GPU: the counts
// that decide its overhead and its critical path, whatever the device's clock.
//   - Kernel launches, host synchronisations and copies of one objective+gradient pass (and of
//     one Viterbi pass), and of a quasi-Newton iteration, do not grow with the number of
//     sentences; a pass over the span of the pass before copies nothing to the device.
//   - The gradient gather's serial work (the occurrences one warp walks in turn) does not grow
//     with an attribute's frequency: a corpus where one attribute is in every token.
//   - Forward-backward's serial work (the positions one warp's recursion walks in turn) does not
//     grow with a sentence's length past kFbScanLength: a long sentence's recursions run as a scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "crfx/internal/trainer.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {
namespace {

struct PassCounts {
  emu::HostCounters evaluate, loss_only, viterbi;
};

PassCounts count_passes(const RandomProblem& p) {
  emu::reset_launch_counts();
  BackendPtr gpu = gpu_backend(p.dims, 0);
  auto gc = gpu->upload(p.corpus);
  auto w = to_backend(*gpu, random_weights(p.dims.num_weights(), 0.5, 3));
  auto g = gpu->vector(p.dims.num_weights());
  std::vector<std::uint32_t> labels(p.corpus.num_tokens());
  gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0);  // a first pass may size buffers
  PassCounts out;
  emu::reset_host_counters();
  gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0);
  out.evaluate = emu::host_counters();
  emu::reset_host_counters();
  gpu->evaluate(*gc, *w, all_sentences(*gc), nullptr, 1.0);
  out.loss_only = emu::host_counters();
  emu::reset_host_counters();
  gpu->viterbi(*gc, *w, all_sentences(*gc), labels.data(), nullptr);
  out.viterbi = emu::host_counters();
  return out;
}

void expect_same(const emu::HostCounters& a, const emu::HostCounters& b, const char* what) {
  EXPECT_EQ(a.launches, b.launches) << what << ": launches";
  EXPECT_EQ(a.syncs, b.syncs) << what << ": host synchronisations";
  EXPECT_EQ(a.to_host, b.to_host) << what << ": device → host copies";
  EXPECT_EQ(a.to_device, b.to_device) << what << ": host → device copies";
}

// One pass over the corpus: a fixed number of launches (the chunk's kernels), one host
// synchronisation and one device → host copy (the per-sentence losses), for 30 sentences as for
// 300 — dense and observed-pair layouts, with and without edge features.
TEST(PassShape, LaunchesSyncsAndCopiesDoNotGrowWithSentences) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (Layout layout : {Layout::dense, Layout::observed}) {
      SCOPED_TRACE(::testing::Message() << "E=" << E << " " << layout);
      const PassCounts small = count_passes(with_layout(random_problem(5, 30, E, 30, 12, 71), layout));
      const PassCounts large = count_passes(with_layout(random_problem(5, 30, E, 300, 12, 71), layout));
      expect_same(small.evaluate, large.evaluate, "evaluate with gradient");
      expect_same(small.loss_only, large.loss_only, "evaluate without gradient");
      expect_same(small.viterbi, large.viterbi, "viterbi");
      EXPECT_EQ(large.evaluate.syncs, 1u);
      EXPECT_EQ(large.evaluate.to_host, 1u);
      EXPECT_EQ(large.loss_only.syncs, 1u);
      EXPECT_EQ(large.viterbi.syncs, 1u);
      // A pass over the span of the pass before reuses its chunk plan and the plan's device
      // copies: nothing goes to the device (was 3 copies a chunk, and the host's sort).
      EXPECT_EQ(large.evaluate.to_device, 0u);
      EXPECT_EQ(large.loss_only.to_device, 0u);
      EXPECT_EQ(large.viterbi.to_device, 0u);
      // prepare (+ the sparse τ), fill_rows, emission, (edge matrix), forward-backward, state
      // gather and its combine, (edge gather and combine), the transition tree's two levels.
      EXPECT_LE(large.evaluate.launches, 12u);
      // L = 5: forward-backward runs a sentence per warp (no block barrier on its critical path).
      EXPECT_GT(emu::launch_counts()["forward_backward_warp_kernel"], 0u);
      EXPECT_EQ(emu::launch_counts().count("forward_backward_kernel"), 0u);
      EXPECT_EQ(emu::launch_counts().count("fb_recursions_kernel"), 0u);  // sentences ≤ 12: fused
      RecordProperty(std::string("evaluate_launches_E") + std::to_string(E) +
                         (layout == Layout::dense ? "_dense" : "_observed"),
                     std::to_string(large.evaluate.launches));
    }
}

// A chunk whose longest sentence has 128 positions or more runs the split forward-backward
// (the recursions, the marginals a warp per 64 positions, the pair sums of sentences of several
// segments): two launches more, still as many for 30 sentences as for 300, and one
// synchronisation a pass.
TEST(PassShape, SplitForwardBackwardDoesNotGrowWithSentences) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "E=" << E);
    const PassCounts small = count_passes(random_problem(5, 30, E, 30, 200, 73));
    const PassCounts large = count_passes(random_problem(5, 30, E, kSanitized ? 100 : 300, 200, 73));
    expect_same(small.evaluate, large.evaluate, "evaluate with gradient");
    EXPECT_EQ(large.evaluate.syncs, 1u);
    EXPECT_EQ(large.evaluate.to_device, 0u);
    EXPECT_LE(large.evaluate.launches, 14u);
    EXPECT_GT(emu::launch_counts()["fb_recursions_kernel"], 0u);
    EXPECT_GT(emu::launch_counts()["fb_marginals_kernel"], 0u);
    EXPECT_GT(emu::launch_counts()["fb_pair_segments_kernel"], 0u);
  }
}

// Six iterations of L-BFGS and of OWL-QN (the same evaluations on both problems: no line-search
// retries at these sizes) ask the device for the same launches, synchronisations and copies for
// 30 sentences as for 300; per iteration a pass (one synchronisation) and the two-loop
// recursion's dot products (one each: their values steer the host's next step).
TEST(PassShape, QuasiNewtonIterationDoesNotGrowWithSentences) {
  REQUIRE_GPU();
  for (const char* algo : {"lbfgs", "owlqn"}) {
    SCOPED_TRACE(algo);
    emu::HostCounters counts[2];
    double passes[2];
    for (int k = 0; k < 2; ++k) {
      const auto p = random_problem(5, 30, 0, k == 0 ? 30 : 300, 12, 71);
      TrainOptions o;
      o.c1 = std::string(algo) == "owlqn" ? 0.1 : 0.0;
      o.c2 = 0.5;
      o.epsilon = o.delta = 0;
      o.period = 0;
      o.max_iterations = 6;
      BackendPtr b = gpu_backend(p.dims);
      auto corpus = b->upload(p.corpus);
      Objective obj(*b, *corpus, o.c1, o.c2);
      auto w = b->vector(p.dims.num_weights());
      emu::reset_host_counters();
      find_trainer(algo).make()->train(obj, *w, o, nullptr);
      counts[k] = emu::host_counters();
      passes[k] = obj.passes();
    }
    ASSERT_EQ(passes[0], passes[1]) << "the same evaluations (else the counts cannot be compared)";
    expect_same(counts[0], counts[1], algo);
    EXPECT_LE(counts[1].syncs, 6u * 20u) << "host synchronisations of six iterations";
    RecordProperty(std::string(algo) + "_syncs_per_iteration", std::to_string(double(counts[1].syncs) / 6));
    RecordProperty(std::string(algo) + "_launches_per_iteration", std::to_string(double(counts[1].launches) / 6));
  }
}

/// `p` with attribute 0 added as the first item of every token (a bias, a frequent POS tag).
RandomProblem with_attribute_everywhere(RandomProblem p) {
  Corpus& c = p.corpus;
  const bool values = !c.state_values.empty();
  std::vector<std::uint32_t> ids;
  std::vector<double> vals;
  std::vector<std::size_t> off{0};
  for (std::size_t t = 0; t + 1 < c.state_offsets.size(); ++t) {
    ids.push_back(0);
    if (values) vals.push_back(0.75);
    for (std::size_t k = c.state_offsets[t]; k < c.state_offsets[t + 1]; ++k)
      if (c.state_ids[k] != 0) {
        ids.push_back(c.state_ids[k]);
        if (values) vals.push_back(c.state_values[k]);
      }
    off.push_back(ids.size());
  }
  c.state_ids = std::move(ids);
  c.state_values = std::move(vals);
  c.state_offsets = std::move(off);
  return p;
}

// The gather's warps walk at most one segment of an attribute's occurrences: with attribute 0 in
// all ~2,400 tokens (10 segments) no warp walks more than 256 occurrences
// (fewer at L = 5: several occurrences side by side in a warp), the combine's threads add at
// most ⌈segments / 8⌉ partial rows each, every occurrence is visited once, and the gradient is the CPU's — and
// bitwise the same from a second backend (the sums' order does not depend on the schedule).
TEST(PassShape, GatherWalkIsBoundedWhateverTheSkew) {
  REQUIRE_GPU();
  std::size_t index = 0;
  for (std::uint32_t L : {5u, 40u})
    for (Layout layout : {Layout::dense, Layout::observed}) {
      if (!schedule_share(index++)) continue;  // the schedule seeds share the cases
      SCOPED_TRACE(::testing::Message() << "L=" << L << " " << layout);
      // L = 5 without edge features (the state rows alone: 4 occurrences side by side in a warp);
      // L = 40 with them (edge rows of 1,600 weights: 50 warps a segment).
      const std::uint32_t E = L <= 8 ? 0 : 2;
      const auto p = with_layout(with_attribute_everywhere(random_problem(L, 25, E, 200, 25, 5)), layout);
      const std::size_t N = p.corpus.num_tokens();
      ASSERT_GT(N, 2048u);  // attribute 0: more than 8 segments of 256
      CpuBackend cpu(p.dims, 1);
      auto cc = cpu.upload(p.corpus);
      const auto w = random_weights(p.dims.num_weights(), 0.5, 6);
      auto wc = to_backend(cpu, w);
      auto gcv = cpu.vector(w.size());
      cpu.evaluate(*cc, *wc, all_sentences(*cc), gcv.get(), 1.0);
      std::vector<double> first;
      for (int run = 0; run < 2; ++run) {
        cuda::CudaBackendConfig::GatherCounters counters;
        cuda::CudaBackendConfig cfg;
        cfg.gather_counters = &counters;
        BackendPtr gpu = cuda::make_cuda_backend(p.dims, cfg);
        auto gc = gpu->upload(p.corpus);
        auto wg = to_backend(*gpu, w);
        auto ggv = gpu->vector(w.size());
        gpu->evaluate(*gc, *wg, all_sentences(*gc), ggv.get(), 1.0);
        const std::vector<double> g = to_host(*gpu, *ggv);
        expect_close_vec(g, to_host(cpu, *gcv), kGradTol, "gradient");
        const std::size_t lanes_per_occurrence = L <= 8 ? 8 : 32;  // L = 5: rows of 5 in 8 lanes
        EXPECT_LE(counters.longest_walk, 256 * lanes_per_occurrence / 32) << "the bound, whatever the data";
        EXPECT_GE(counters.longest_walk, 1u);
        // The combine: 8 warps a block, each thread one partial row of ⌈N / 256⌉ (with 32 / w rows
        // side by side in a warp where the row block is w ≤ 16 weights wide).
        const std::size_t segments = (N + 255) / 256;
        EXPECT_LE(counters.longest_combine, (segments + 7) / 8);
        std::size_t occurrences = p.corpus.state_ids.size();
        for (std::size_t t = 0; t < N; ++t)  // edge items at a sentence's first token have no factor
          occurrences += p.corpus.edge_offsets[t + 1] - p.corpus.edge_offsets[t];
        EXPECT_LE(counters.visits, occurrences);
        EXPECT_GE(counters.visits, p.corpus.state_ids.size());
        if (run == 0 && layout == Layout::dense) {  // for RESULTS.md, via --gtest_output=xml
          const std::string at = "_L" + std::to_string(L);
          RecordProperty("attribute0_occurrences" + at, std::to_string(N));
          RecordProperty("longest_walk" + at, std::to_string(counters.longest_walk));
          RecordProperty("longest_combine" + at, std::to_string(counters.longest_combine));
        }
        if (run == 0)
          first = g;
        else
          EXPECT_TRUE(first == g) << "two backends, the same bits";
      }
    }
}

/// The longest chain of one gradient pass on a backend of forward-backward mode `mode`, and its
/// loss and gradient.
std::uint64_t longest_chain(const RandomProblem& p, cuda::CudaBackendConfig::ForwardBackward mode, double& loss,
                            std::vector<double>& gradient) {
  cuda::CudaBackendConfig::GatherCounters counters;
  cuda::CudaBackendConfig cfg;
  cfg.gather_counters = &counters;
  cfg.forward_backward = mode;
  BackendPtr gpu = cuda::make_cuda_backend(p.dims, cfg);
  auto gc = gpu->upload(p.corpus);
  auto w = to_backend(*gpu, random_weights(p.dims.num_weights(), 0.5, 3));
  auto g = gpu->vector(p.dims.num_weights());
  loss = gpu->evaluate(*gc, *w, all_sentences(*gc), g.get(), 1.0);
  gradient = to_host(*gpu, *g);
  return counters.longest_chain;
}

// Sentences of up to 2,500 positions: with the serial recursions (CRFX_FB=split) a warp walks
// the longest sentence's every position in turn; with the scan (CRFX_FB=scan) no warp walks more
// than the scan's threshold — 64 positions of a segment, a combine step a segment, or a sentence
// shorter than 256 — whatever the length. The two give the same loss and gradient to rounding.
TEST(PassShape, ALongSentencesChainIsItsSegmentsNotItsLength) {
  REQUIRE_GPU();
  using Mode = cuda::CudaBackendConfig::ForwardBackward;
  for (std::uint32_t E : {0u, 2u}) {
    SCOPED_TRACE(::testing::Message() << "E=" << E);
    const auto p = random_problem(9, 30, E, 6, 2500, 17 + E);
    std::size_t longest = 0;
    for (std::size_t s = 0; s < p.corpus.num_sentences(); ++s) longest = std::max(longest, p.corpus.length(s));
    ASSERT_GE(longest, 1500u);
    double serial_loss = 0, scan_loss = 0;
    std::vector<double> serial_g, scan_g;
    const std::uint64_t serial = longest_chain(p, Mode::split, serial_loss, serial_g);
    const std::uint64_t scan = longest_chain(p, Mode::scan, scan_loss, scan_g);
    EXPECT_EQ(serial, longest);
    EXPECT_GE(scan, 64u);
    EXPECT_LT(scan, 256u) << "the bound, whatever the length";
    EXPECT_NEAR(scan_loss, serial_loss, kLossRel * std::fabs(serial_loss));
    expect_close_vec(scan_g, serial_g, kGradTol, "gradient");
    RecordProperty("longest_sentence_E" + std::to_string(E), std::to_string(longest));
    RecordProperty("longest_chain_serial_E" + std::to_string(E), std::to_string(serial));
    RecordProperty("longest_chain_scan_E" + std::to_string(E), std::to_string(scan));
  }
}

/// One streamed (or resident) evaluate pass's counts after a first pass, cut into chunks of at
/// most `chunk_tokens` tokens; `chunks` the stream's (from the backend's note).
emu::HostCounters streamed_pass(const RandomProblem& p, std::size_t chunk_tokens, bool stream, bool gradient,
                                std::size_t* chunks) {
  cuda::CudaBackendConfig cfg;
  cfg.max_chunk_tokens = chunk_tokens;
  cfg.always_stream = stream;
  BackendPtr gpu = cuda::make_cuda_backend(p.dims, cfg);
  auto gc = gpu->upload(p.corpus);
  const std::string note = gpu->corpus_note(*gc);
  *chunks = note.empty() ? 0 : std::stoul(note.substr(note.find(" in ") + 4));
  auto w = to_backend(*gpu, random_weights(p.dims.num_weights(), 0.5, 3));
  auto g = gpu->vector(p.dims.num_weights());
  gpu->evaluate(*gc, *w, all_sentences(*gc), gradient ? g.get() : nullptr, 1.0);  // a first pass may size buffers
  emu::reset_host_counters();
  gpu->evaluate(*gc, *w, all_sentences(*gc), gradient ? g.get() : nullptr, 1.0);
  return emu::host_counters();
}

// A streamed pass waits for the device once, as a resident pass of one chunk does, however many
// chunks it streams (the resident pass cut into chunks waits once a chunk); per chunk it queues a
// fixed number of launches, at most five copies to the device (the chunk's regions, on the copy
// stream) and one of its losses to pinned host memory (no wait).
TEST(PassShape, StreamedPassWaitsOnceWhateverTheChunks) {
  REQUIRE_GPU();
  for (std::uint32_t E : {0u, 3u})
    for (bool gradient : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "E=" << E << (gradient ? " gradient" : " loss only"));
      const auto p = random_problem(5, 30, E, 200, 12, 71);
      std::size_t k1 = 0, k2 = 0, kr = 0;
      const emu::HostCounters a = streamed_pass(p, 120, true, gradient, &k1);
      const emu::HostCounters b = streamed_pass(p, 60, true, gradient, &k2);
      const emu::HostCounters r = streamed_pass(p, 60, false, gradient, &kr);
      ASSERT_GE(k1, 5u);
      ASSERT_GT(k2, k1);
      EXPECT_EQ(kr, 0u);
      EXPECT_EQ(a.syncs, 1u);
      EXPECT_EQ(b.syncs, 1u);
      EXPECT_GE(r.syncs, k2) << "resident, the same chunks: a wait a chunk";
      EXPECT_EQ(a.to_host, k1);
      EXPECT_EQ(b.to_host, k2);
      EXPECT_LE(a.to_device, 5 * k1);
      EXPECT_LE(b.to_device, 5 * k2);
      // Launches: the same per chunk (prepare once a pass).
      const std::size_t per_chunk = (b.launches - a.launches) / (k2 - k1);
      EXPECT_EQ(a.launches - k1 * per_chunk, b.launches - k2 * per_chunk);
      EXPECT_LE(per_chunk, 11u);
      if (gradient) {
        const std::string at = "_E" + std::to_string(E);
        RecordProperty("streamed_chunks" + at, std::to_string(k2));
        RecordProperty("streamed_syncs" + at, std::to_string(b.syncs));
        RecordProperty("resident_chunked_syncs" + at, std::to_string(r.syncs));
        RecordProperty("streamed_launches_per_chunk" + at, std::to_string(per_chunk));
        RecordProperty("streamed_copies_to_device_per_chunk" + at, std::to_string(double(b.to_device) / double(k2)));
      }
    }
}

}  // namespace
}  // namespace crfx::test
