// crfx — forward-backward + gradient throughput (tokens/s) of a backend on synthetic data, for
// several label counts and batch sizes (benchmarks/gpu.sh runs it). Each measurement evaluates
// the loss and gradient of every sentence once, in spans of B sentences (B = batch size), after
// one warm-up pass; the figure is tokens / median seconds over `repeat` passes.
//
// usage: crfx_gpu_bench [--device cuda|cpu|auto] [--labels 5,23,45,128] [--batches 1,32,512,0]
//                       [--sentences 4096] [--length 30] [--repeat 3]      (batch 0 = everything)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "crfx/backend.hpp"
#include "crfx/error.hpp"

namespace {

std::vector<std::size_t> list(const std::string& s) {
  std::vector<std::size_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoul(item));
  return out;
}

/// `S` sentences of lengths uniform in [len/2, 3·len/2], 20 binary attributes per token drawn
/// from A = 100,000 (a CoNLL-like density), gold labels uniform.
crfx::Corpus synthetic(std::uint32_t L, std::uint32_t A, std::size_t S, std::size_t len, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> length(std::max<std::size_t>(1, len / 2), len + len / 2);
  std::uniform_int_distribution<std::uint32_t> attr(0, A - 1), label(0, L - 1);
  crfx::Corpus c;
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t T = length(rng);
    for (std::size_t t = 0; t < T; ++t) {
      for (int k = 0; k < 20; ++k) c.state_ids.push_back(attr(rng));  // binary: no values, as CoNLL data
      c.state_offsets.push_back(c.state_ids.size());
      c.edge_offsets.push_back(0);
      c.labels.push_back(label(rng));
    }
    c.sentence_offsets.push_back(c.labels.size());
    c.source_lines.push_back(s + 1);
  }
  return c;
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda", labels = "5,23,45,128", batches = "1,32,512,0";
  std::size_t sentences = 4096, length = 30;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") device = v;
    else if (k == "--labels") labels = v;
    else if (k == "--batches") batches = v;
    else if (k == "--sentences") sentences = std::stoul(v);
    else if (k == "--length") length = std::stoul(v);
    else if (k == "--repeat") repeat = std::max(1, std::atoi(v.c_str()));
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    const std::uint32_t A = 100000;
    for (std::size_t L : list(labels)) {
      crfx::Corpus corpus = synthetic(std::uint32_t(L), A, sentences, length, L);
      crfx::Dims dims;
      dims.L = std::uint32_t(L);
      dims.A = A;
      crfx::BackendOptions bo;
      bo.device = crfx::parse_device(device);
      std::string note;
      crfx::BackendPtr b = crfx::make_backend(dims, bo, &note);
      auto up = b->upload(corpus);
      std::vector<double> host(dims.num_weights());
      for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.01 * double(int(i % 17) - 8);
      auto w = crfx::to_backend(*b, host);
      auto g = b->vector(dims.num_weights());
      const std::size_t S = corpus.num_sentences(), N = corpus.num_tokens();
      for (std::size_t B : list(batches)) {
        if (B == 0 || B > S) B = S;
        std::vector<double> times;
        for (int k = 0; k <= repeat; ++k) {
          b->fill(*g, 0.0);
          const double t0 = now();
          for (std::size_t s = 0; s < S; s += B) {
            std::vector<std::uint32_t> ids;
            for (std::size_t i = s; i < std::min(S, s + B); ++i) ids.push_back(std::uint32_t(i));
            b->evaluate(*up, *w, crfx::SentenceSpan{ids.data(), ids.size()}, g.get(), 1.0);
          }
          (void)b->norm1(*g);  // waits for the device
          if (k > 0) times.push_back(now() - t0);
        }
        std::sort(times.begin(), times.end());
        const double med = times[times.size() / 2];
        std::printf("fb+grad %-28s L=%4zu B=%5zu  %8zu tokens  median %.4f s  %10.3f M tokens/s\n",
                    b->name().substr(0, 28).c_str(), L, B, N, med, double(N) / med / 1e6);
        std::fflush(stdout);
      }
    }
  } catch (const crfx::Error& e) {
    std::fprintf(stderr, "crfx_gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
