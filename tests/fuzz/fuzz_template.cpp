// libFuzzer target: the CRF++ template parser (FeatureTemplate::parse) and what a parsed template
// is used for. The input is TEMPLATE, optionally followed by a NUL byte and CoNLL data (read by
// the library's reader from a memfd); without data a fixed two-sentence sample is used. Every
// template line is expanded at every position, and compile_training (min_freq 1 and 2) and
// compile are checked against the plain expansion (compile_oracle.hpp). Expected failures are
// crfx::Error; anything else (a crash, another exception, a sanitizer report, a leak, a timeout,
// a broken invariant) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "compile_oracle.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/template.hpp"
#include "fuzz_common.hpp"

namespace {

crfx::ConllSentence sentence(std::initializer_list<std::initializer_list<const char*>> rows) {
  crfx::ConllSentence s;
  std::size_t line = 1;
  for (const auto& r : rows) {
    crfx::ConllToken t;
    for (const char* c : r) t.columns.emplace_back(c);
    t.line = line++;
    s.push_back(std::move(t));
  }
  return s;
}

// Three feature columns and a label: columns 0–2 may be used by a template.
const crfx::TextData& sample() {
  static const crfx::TextData d = [] {
    crfx::TextData t;
    t.format = crfx::InputFormat::conll;
    t.path = "sample.txt";
    t.conll.push_back(sentence({{"He", "PRP", "x", "B-NP"}, {"reckons", "VBZ", "y", "B-VP"},
                                {"the", "DT", "x", "B-NP"}, {"the", "DT", "z", "I-NP"}}));
    t.conll.push_back(sentence({{"Rockwell", "NNP", "x", "B-NP"}}));
    return t;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const char* p = reinterpret_cast<const char*>(bytes);
  const void* nul = std::memchr(p, '\0', size);
  const std::size_t text_size = nul ? std::size_t(static_cast<const char*>(nul) - p) : size;
  const std::string text(p, text_size);
  crfx::FeatureTemplate t;
  try {
    t = crfx::FeatureTemplate::parse(text, "fuzz.template");
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
    return 0;
  }
  using crfx_fuzz::broken;
  if (t.source() != text) broken("source() is not the parsed text");
  int max_col = -1;
  for (const auto* lines : {&t.unigrams(), &t.edge_bigrams()})
    for (const auto& line : *lines)
      for (const auto& piece : line.pieces)
        if (piece.is_macro) {
          if (piece.col < 0) broken("negative macro column");
          if (piece.col > max_col) max_col = piece.col;
        }
  if (max_col != t.max_column()) broken("max_column() is not the largest macro column");
  for (const auto& line : t.edge_bigrams())
    if (!line.has_macro()) broken("an edge bigram without a macro");

  crfx::TextData data;
  if (nul) {
    const std::string& path =
        crfx_fuzz::mem_file().set(bytes + text_size + 1, size - text_size - 1);
    try {
      crfx::FeatureSpace fs;
      data = crfx::read_text(fs, path);
    } catch (const crfx::Error& e) {
      crfx_fuzz::expected(e);
      return 0;
    }
  } else {
    data = sample();
    // Every line at every position (expand throws InputError for a column beyond the data's).
    std::string out;
    for (const auto& s : data.conll)
      for (const auto* lines : {&t.unigrams(), &t.edge_bigrams()})
        for (const auto& line : *lines)
          for (std::size_t pos = 0; pos < s.size(); ++pos) {
            try {
              crfx::FeatureTemplate::expand(line, s, 3, pos, out);
            } catch (const crfx::Error& e) {
              crfx_fuzz::expected(e);
            }
          }
  }
  try {
    crfx_fuzz::check_conll_compile(t, data);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  return 0;
}
