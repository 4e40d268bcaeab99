// crfx eval (conlleval's report, or accuracy and per-label scores) and crfx dump.
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

#include "crfx/backend.hpp"
#include "crfx/checkpoint.hpp"
#include "crfx/error.hpp"
#include "crfx/eval.hpp"
#include "crfx/features.hpp"
#include "crfx/model.hpp"
#include "crfx/output.hpp"
#include "crfx/tagger.hpp"
#include "crfx/tag_run.hpp"
#include "crfx/train.hpp"
#include "crfx/trainer.hpp"

#include "cli.hpp"

namespace crfx::cli {

// ---- eval ----------------------------------------------------------------------------------

int cmd_eval(int argc, char** argv) {
  cxxopts::Options o("crfx eval",
                     "Scores labelled output. Chunk tags (IOB1, IOB2, IOE, IOBES: B-, I-, E-, S- prefixes and\n"
                     "the outside label) get conlleval's report: token accuracy and chunk precision / recall /\n"
                     "F1. Any other tag set (POS, morphology, classes) gets token and sentence accuracy and\n"
                     "per-label precision / recall / F1 with macro and micro averages (CRFsuite's tag -qt).\n"
                     "Input: one token per line, the last two columns gold and predicted label\n"
                     "(what 'crfx tag' writes for data with gold labels). Several files (or directories, -r)\n"
                     "get a report each, under a '== FILE' line, then one over them all under '== total'.");
  o.positional_help("FILE...");
  o.add_options()
      ("file", "labelled output to score", cxxopts::value<std::vector<std::string>>())
      ("R,recursive", "score every file below a directory argument")
      ("mode", "auto | chunk | item: the report (auto: chunk when every label is a chunk tag)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("confusion", "also print the confusion matrix of the labels with the most errors")
      ("r,raw", "chunk report over labels without B-/I- prefixes: each token is a chunk (conlleval -r)")
      ("o,outside", "the outside label (conlleval -o)", cxxopts::value<std::string>()->default_value("O"))
      ("h,help", "show this help");
  o.parse_positional({"file"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  EvalOptions eo;
  eo.raw = r.count("raw") > 0;
  eo.outside = get<std::string>(r, "outside");
  const std::string mode = get<std::string>(r, "mode");
  if (mode == "chunk")
    eo.mode = EvalMode::chunk;
  else if (mode == "item")
    eo.mode = EvalMode::item;
  else if (mode != "auto")
    throw UsageError("--mode: '" + mode + "' is none of auto, chunk, item");
  if (eo.raw && eo.mode == EvalMode::item) throw UsageError("--raw gives the chunk report; it does not go with --mode item");
  if (!r.count("file")) throw UsageError("missing a file to evaluate (crfx eval FILE...)");
  const std::vector<InputFile> files =
      list_inputs(get<std::vector<std::string>>(r, "file"), r.count("recursive") > 0);
  const bool confusion = r.count("confusion") > 0;
  if (files.size() == 1) {  // conlleval's report alone, byte for byte
    std::cout << evaluate_labels_file(files[0].path, eo).report(confusion) << std::flush;
    return 0;
  }
  Evaluation total{ChunkEvaluator(eo), ItemEvaluator(), {}, EvalMode::chunk};
  for (const InputFile& f : files) {
    const Evaluation ev = evaluate_labels_file(f.path, eo);
    std::cout << "== " << f.path << "\n" << ev.report(confusion) << "\n" << std::flush;
    total.merge(ev, eo);
  }
  std::cout << "== total: " << files.size() << " files\n" << total.report(confusion) << std::flush;
  return 0;
}

// ---- dump ----------------------------------------------------------------------------------

int cmd_dump(int argc, char** argv) {
  cxxopts::Options o("crfx dump", "Print a model file readably.");
  o.positional_help("MODEL");
  o.add_options()("model", "model file", cxxopts::value<std::string>())("h,help", "show this help");
  o.parse_positional({"model"});
  cxxopts::ParseResult r;
  if (!parse(o, argc, argv, r)) return 0;
  std::cout << dump_model(load_model(required(r, "model", "a model file (crfx dump MODEL)"))) << std::flush;
  return 0;
}

}  // namespace crfx::cli
