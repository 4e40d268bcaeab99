// crfx — the upload's item transpose (transpose_items, host/data/corpus.cpp: attribute → its
// occurrences, what a GPU run's gradient gather reads) on a synthetic corpus of CoNLL-2000 ×10's
// size: 2,117,270 tokens, 19 items a token from 338,551 ids drawn log-uniformly (a few frequent
// ids, many rare ones). Per thread count of the arguments (default: 1 and all cores): the median
// of 5 runs after one warm-up, and whether the arrays equal the first count's.
// Usage: build/crfx_transpose_bench [THREADS …]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "crfx/internal/corpus.hpp"

int main(int argc, char** argv) {
  constexpr std::size_t kTokens = 2117270, kIds = 338551, kPer = 19;
  std::vector<unsigned> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(unsigned(std::strtoul(argv[i], nullptr, 10)));
  if (counts.empty()) counts = {1u, std::max(1u, std::thread::hardware_concurrency())};
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::size_t> off{0};
  std::vector<std::uint32_t> ids;
  ids.reserve(kTokens * kPer);
  for (std::size_t t = 0; t < kTokens; ++t) {
    for (std::size_t k = 0; k < kPer; ++k)
      ids.push_back(std::uint32_t(std::min<double>(kIds - 1, std::exp(u(rng) * std::log(double(kIds))))));
    off.push_back(ids.size());
  }
  std::printf("transpose_items: %zu tokens, %zu items, %zu ids\n", kTokens, ids.size(), kIds);
  crfx::ItemTranspose first;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    std::vector<double> secs;
    crfx::ItemTranspose r;
    for (int run = 0; run < 6; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      r = crfx::transpose_items(kIds, off, ids, {}, nullptr, counts[c]);
      const auto t1 = std::chrono::steady_clock::now();
      if (run > 0) secs.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    if (c == 0) first = r;
    const bool same = r.off == first.off && r.tok == first.tok;
    std::printf("threads %u: median %.3f s (%.3f-%.3f), %s\n", counts[c], secs[secs.size() / 2], secs.front(),
                secs.back(), same ? "the same arrays" : "DIFFERENT arrays");
    if (!same) return 1;
  }
  return 0;
}
