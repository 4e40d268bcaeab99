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

// ---- eval ----------------------------------------------------------------------------------

namespace {

/// `s` as a JSON string: quotes, backslashes and control characters escaped; other bytes as they
/// are (labels and paths are taken to be UTF-8).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt("\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// A percentage as a JSON number, to more digits than the text report's two.
std::string json_number(double v) { return fmt("%.10g", v); }

/// One ChunkCounts (a chunk type, a label, or the chunks overall): counts and percentages.
std::string json_counts(const ChunkCounts& c) {
  return "\"gold\": " + std::to_string(c.gold) + ", \"guessed\": " + std::to_string(c.guessed) +
         ", \"correct\": " + std::to_string(c.correct) + ", \"precision\": " + json_number(c.precision()) +
         ", \"recall\": " + json_number(c.recall()) + ", \"f1\": " + json_number(c.f1());
}

/// The figures of the text report of `ev` (the chunk report or the item report, as ev.mode says),
/// as the members of a JSON object; confusion: every (gold, guessed) pair that differs, with its
/// count.
std::string json_members(const Evaluation& ev, bool confusion) {
  std::string out;
  if (ev.mode == EvalMode::item) {
    const ItemEvaluator& e = ev.item;
    out += "\"mode\": \"item\", \"tokens\": " + std::to_string(e.tokens()) +
           ", \"correct_tokens\": " + std::to_string(e.correct_tokens()) +
           ", \"sentences\": " + std::to_string(e.sentences()) +
           ", \"correct_sentences\": " + std::to_string(e.correct_sentences()) +
           ", \"accuracy\": " + json_number(e.accuracy()) +
           ", \"sentence_accuracy\": " + json_number(e.sentence_accuracy()) + ", \"labels\": {";
    bool first = true;
    for (const auto& [label, c] : e.by_label()) {
      out += std::string(first ? "" : ", ") + json_string(label) + ": {" + json_counts(c) + "}";
      first = false;
    }
    out += "}, \"macro_average\": {\"precision\": " + json_number(e.macro_precision()) +
           ", \"recall\": " + json_number(e.macro_recall()) + ", \"f1\": " + json_number(e.macro_f1()) +
           "}, \"micro_average\": {\"precision\": " + json_number(e.accuracy()) +
           ", \"recall\": " + json_number(e.accuracy()) + ", \"f1\": " + json_number(e.accuracy()) + "}";
  } else {
    const ChunkEvaluator& e = ev.chunk;
    out += "\"mode\": \"chunk\", \"tokens\": " + std::to_string(e.tokens()) +
           ", \"correct_tokens\": " + std::to_string(e.correct_tokens()) +
           ", \"accuracy\": " + json_number(e.accuracy()) + ", \"chunks\": {" + json_counts(e.overall()) +
           "}, \"types\": {";
    bool first = true;
    for (const auto& [type, c] : e.by_type()) {
      if (c.gold == 0 && c.guessed == 0) continue;  // as the text report
      out += std::string(first ? "" : ", ") + json_string(type) + ": {" + json_counts(c) + "}";
      first = false;
    }
    out += "}";
  }
  if (confusion) {
    out += ", \"confusions\": [";
    bool first = true;
    for (const auto& [pair, n] : ev.item.confusions()) {
      out += std::string(first ? "" : ", ") + "{\"gold\": " + json_string(pair.first) +
             ", \"guessed\": " + json_string(pair.second) + ", \"count\": " + std::to_string(n) + "}";
      first = false;
    }
    out += "]";
  }
  return out;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  cxxopts::Options o("crfx eval",
                     "Scores labelled output. Chunk tags (IOB1, IOB2, IOE, IOBES: B-, I-, E-, S- prefixes and\n"
                     "the outside label) get conlleval's report: token accuracy and chunk precision / recall /\n"
                     "F1. Any other tag set (POS, morphology, classes) gets token and sentence accuracy and\n"
                     "per-label precision / recall / F1 with macro and micro averages (CRFsuite's tag -qt).\n"
                     "Input: one token per line, the last two columns gold and predicted label\n"
                     "(what 'crfx tag' writes for data with gold labels). Several files (or directories, -R)\n"
                     "get a report each, under a '== FILE' line, then one over them all under '== total'.");
  o.positional_help("FILE...");
  o.add_options()
      ("file", "labelled output to score", cxxopts::value<std::vector<std::string>>())
      ("R,recursive", "score every file below a directory argument")
      ("total-only", "with several files: the report over them all, not each file's")
      ("json", "the report's figures as one JSON object (several files: {\"files\": [...], \"total\": {...}}; "
       "one file, or --total-only: that report's object)")
      ("mode", "auto | chunk | item: the report (auto: chunk when every label is a chunk tag)",
       cxxopts::value<std::string>()->default_value("auto"))
      ("confusion", "also print the confusion matrix of the labels with the most errors (--json: every "
       "confused pair)")
      ("raw", "chunk report over labels without B-/I- prefixes: each token is a chunk (conlleval -r; crfx's "
       "-r means recursive, and is refused here)")
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
  const bool confusion = r.count("confusion") > 0, json = r.count("json") > 0;
  const bool total_only = r.count("total-only") > 0;
  if (files.size() == 1 && !total_only) {  // conlleval's report alone, byte for byte
    const Evaluation ev = evaluate_labels_file(files[0].path, eo);
    if (json)
      std::cout << "{\"file\": " << json_string(files[0].path) << ", " << json_members(ev, confusion) << "}\n";
    else
      std::cout << ev.report(confusion);
    std::cout << std::flush;
    return 0;
  }
  Evaluation total{ChunkEvaluator(eo), ItemEvaluator(), {}, EvalMode::chunk};
  bool first = true;
  if (json && !total_only) std::cout << "{\"files\": [";
  for (const InputFile& f : files) {
    const Evaluation ev = evaluate_labels_file(f.path, eo);
    if (json && !total_only)
      std::cout << (first ? "" : ",\n") << "{\"file\": " << json_string(f.path) << ", " << json_members(ev, confusion)
                << "}" << std::flush;
    else if (!total_only)
      std::cout << "== " << f.path << "\n" << ev.report(confusion) << "\n" << std::flush;
    first = false;
    total.merge(ev, eo);
  }
  const std::string total_json =
      "{\"files\": " + std::to_string(files.size()) + ", " + json_members(total, confusion) + "}";
  if (json && total_only)
    std::cout << total_json << "\n";
  else if (json)
    std::cout << "],\n\"total\": " << total_json << "}\n";
  else
    std::cout << "== total: " << files.size() << " files\n" << total.report(confusion);
  std::cout << std::flush;
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
