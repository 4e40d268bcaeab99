// crfx bench: objective+gradient passes over a data set, timed.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cxxopts.hpp>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/checkpoint.hpp"
#include "crfx/internal/eval.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/output.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "crfx/train.hpp"

#include "cli.hpp"

namespace crfx::cli {

// ---- bench ---------------------------------------------------------------------------------

int cmd_bench(int argc, char** argv) {
  cxxopts::Options o("crfx bench",
                     "Time objective + gradient passes (forward-backward and the marginal reduction)\n"
                     "over a whole training set, for one or more thread counts.");
  o.positional_help("DATA");
  o.add_options()
      ("data", "training data", cxxopts::value<std::string>())
      ("t,template", "CRF++ template (CoNLL data)", cxxopts::value<std::string>())
      ("format", "conll | crfsuite", cxxopts::value<std::string>()->default_value("conll"))
      ("thread-list", "comma-separated thread counts to time", cxxopts::value<std::string>()->default_value("1,2"))
      ("repeat", "timed passes per thread count (after one warm-up)", cxxopts::value<int>()->default_value("5"))
      ("type", "crf | maxent (as crfx train --type)", cxxopts::value<std::string>()->default_value("crf"))
      ("loss", "seq-log | seq-exp | point-log | point-exp: the loss the pass computes (as crfx train --loss)",
       cxxopts::value<std::string>()->default_value("seq-log"))
      ("h,help", "show this help");
  add_feature_options(o);
  add_device_options(o);
  o.parse_positional({"data"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  // The thread counts and the repeat count are checked before the data is read.
  std::vector<unsigned> thread_counts;
  {
    std::stringstream list(get<std::string>(r, "thread-list"));
    std::string item;
    while (std::getline(list, item, ',')) {
      if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(item) > kMaxThreads)
        throw UsageError("--thread-list: '" + item + "' is not a thread count (0 to " +
                         std::to_string(kMaxThreads) + ", 0 = all cores)");
      thread_counts.push_back(unsigned(std::stoul(item)));
    }
    if (thread_counts.empty()) throw UsageError("--thread-list: no thread count given");
  }
  const int repeat = get<int>(r, "repeat");
  if (repeat < 1) throw UsageError("--repeat must be ≥ 1, got " + std::to_string(repeat));
  FeatureSpace fs;
  SequenceLoss loss;
  try {
    fs.type = parse_model_type(get<std::string>(r, "type"));
    loss = parse_sequence_loss(get<std::string>(r, "loss"));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  fs.format = parse_format(get<std::string>(r, "format"));
  if (fs.format == InputFormat::conll)
    fs.templ = FeatureTemplate::load(required(r, "template", "--template for CoNLL data"));
  double t = now_seconds();
  const FeatureSet features = feature_set(r);
  Corpus corpus = compile_training(fs, read_text(fs, required(r, "data", "training data")), 1);
  choose_layout(fs, corpus, features);
  const double compile_s = now_seconds() - t;
  const Dims dims = fs.dims();
  std::printf("data: %zu sentences, %zu tokens, L = %u, A = %u, E = %u, %zu weights%s; loss %s; read + compile %.3f s\n",
              corpus.num_sentences(), corpus.num_tokens(), dims.L, dims.A, dims.E, dims.num_weights(),
              fs.type == ModelType::maxent ? " (Maxent)" : "", sequence_loss_name(loss), compile_s);
  std::string said;  // the device's fallback note, printed once
  for (const unsigned threads : thread_counts) {
    BackendOptions bo;
    bo.device = parse_device(get<std::string>(r, "device"));
    bo.threads = threads;
    std::string note, fallback;
    BackendPtr b = make_backend(dims, bo, &note, &fallback);
    if (!fallback.empty() && said.empty())  // why the GPU is not used: once, not on every row
      std::printf("device auto: %s; using the CPU\n", (said = fallback).c_str());
    BackendCorpusPtr up = b->upload(corpus);
    // Small non-zero weights, so that the chain does real work (a fixed pattern, same each run).
    std::vector<double> host(dims.num_weights());
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = 0.01 * double(int(i % 17) - 8);
    VectorPtr w = to_backend(*b, host);
    VectorPtr g = b->vector(dims.num_weights());
    std::vector<double> times;
    double value = 0;
    for (int k = 0; k <= repeat; ++k) {
      b->fill(*g, 0.0);
      t = now_seconds();
      value = b->evaluate(*up, *w, all_sentences(*up), g.get(), 1.0, loss);
      if (k > 0) times.push_back(now_seconds() - t);
    }
    std::sort(times.begin(), times.end());
    std::printf("%s: objective+gradient pass: median %.4f s, min %.4f s (%d passes; %.2f M tokens/s; loss %.6f)\n",
                note.c_str(), times[times.size() / 2], times.front(), repeat,
                double(corpus.num_tokens()) / times[times.size() / 2] / 1e6, value);
  }
  return 0;
}

}  // namespace crfx::cli
