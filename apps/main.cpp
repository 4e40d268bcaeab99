// crfx — the command-line tool: train (and learn, CRFsuite's command line), tag, eval, bench, dump.
//
// Library code throws crfx::Error; this file alone turns errors into messages and exit codes:
//   0 success, 1 failure (bad input, I/O, numerical), 2 usage error, 3 training stopped by a
//   signal (SIGINT, SIGTERM) with the model of its last iteration (a stochastic trainer: of its
//   last mini-batch) written.

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
namespace {

void usage(std::ostream& os) {
  os << "crfx — linear-chain CRF trainer and tagger\n\n"
        "usage: crfx COMMAND [options]   (crfx COMMAND --help for its options)\n\n"
        "commands:\n"
        "  train   train a model from CoNLL (with a CRF++ template) or CRFsuite data\n"
        "  learn   train with CRFsuite's command line: CRFsuite data, -p NAME=VALUE, -a NAME\n"
        "  tag     label data with a model\n"
        "  eval    conlleval chunk P/R/F1, or accuracy and per-label P/R/F1, of labelled output\n"
        "  bench   time objective+gradient passes over a data set\n"
        "  dump    print a model readably\n"
        "  --version  the version, build type and CUDA backend of this crfx\n";
}

}  // namespace
}  // namespace crfx::cli

int main(int argc, char** argv) {
  using namespace crfx;
  using namespace crfx::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::cout << "crfx " << CRFX_VERSION << " (" << CRFX_BUILD_INFO << ")\n"
              << "CPU vector code: " << cpu_vector_code() << "\n";
    return 0;
  }
  // A file-size limit (ulimit -f) would otherwise kill us with SIGXFSZ mid-write, leaving the
  // temporary file behind; ignored, the write fails with EFBIG and AtomicFile reports it and
  // cleans up like any other write error.
  std::signal(SIGXFSZ, SIG_IGN);
  // Ctrl-C, kill or a closed terminal: the open temporary outputs are removed first.
  remove_temporaries_on_signals();
#ifdef __GLIBC__
  // Tagging streams batches whose buffers run to tens of MB. glibc would give each its own mmap,
  // fault it in page by page and unmap it at free; from the heap, kept rather than trimmed, the
  // next batch reuses the pages (benchmarks/tag.sh: 2.6 → 1.7 s). The trainers' big vectors are
  // HostArray mappings of their own and do not go through malloc; what training frees on the
  // heap (the text, once compiled) is handed back by release_free_memory().
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One heap for every thread: tagging's workers each hold a batch, and in arenas of their own
  // those pages would be fresh for every worker and never reused by another (sys time 0.03 →
  // 0.12 s, wall +18% on benchmarks/tag.sh with 2 threads). Their allocations are few and large.
  mallopt(M_ARENA_MAX, 1);
#endif
  try {
    int status = -1;
    if (cmd == "train") status = cmd_train(argc - 1, argv + 1);
    else if (cmd == "learn") status = cmd_learn(argc - 1, argv + 1);
    else if (cmd == "tag") status = cmd_tag(argc - 1, argv + 1);
    else if (cmd == "eval") status = cmd_eval(argc - 1, argv + 1);
    else if (cmd == "bench") status = cmd_bench(argc - 1, argv + 1);
    else if (cmd == "dump") status = cmd_dump(argc - 1, argv + 1);
    if (status < 0) {
      std::cerr << "crfx: unknown command '" << cmd << "'\n";
      usage(std::cerr);
      return 2;
    }
    // What went to standard output must have arrived (a full disk, /dev/full, a closed pipe):
    // a report or a dump that was lost is a failure, not exit 0.
    std::cout.flush();
    if (!std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout))
      throw Error(std::string("cannot write to standard output: ") + std::strerror(errno ? errno : EIO));
    return status;
  } catch (const UsageError& e) {
    std::cerr << "crfx " << cmd << ": " << e.what() << "\n";
    end_other_processes(2);  // under mpirun: the others would wait on this one for ever
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "crfx " << cmd << ": out of memory\n";
    end_other_processes(1);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "crfx " << cmd << ": " << e.what() << "\n";
    end_other_processes(1);
    return 1;
  }
}
