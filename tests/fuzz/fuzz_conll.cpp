// libFuzzer target: the CoNLL column reader (LineReader → ConllReader, through read_text as
// `crfx train` and `crfx tag` read data), then what the sentences are used for: compiling them
// for training (min_freq 1 and 2) and for tagging with a small template, checked against the
// plain expansion (compile_oracle.hpp), and reading and compiling the same bytes once more as
// data to tag (the column count now fixed, one more column allowed). The bytes
// are a memfd's contents (fuzz_common.hpp), so plain text and gzip both take the real route.
// Expected failures are crfx::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compile_oracle.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "fuzz_common.hpp"
#include "text_oracle.hpp"

namespace {
// Column 0 only, so that any data with a feature column can be compiled with it: a word unigram,
// a bigram and a trigram (keyed caches, direct tables), one line of four macros (plain
// expansion), transitions and an edge bigram.
const char* const kTemplate =
    "U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nU02:%x[-1,0]/%x[0,0]/%x[2,0]\nU03:%x[-2,0]/%x[-1,0]/%x[0,0]/%x[1,0]\n"
    "\nB\nB01:%x[0,0]\n";
using crfx_fuzz::broken;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string& path = crfx_fuzz::mem_file().set(bytes, size);
  crfx::FeatureSpace fs;
  fs.format = crfx::InputFormat::conll;
  // Plain text: what the reader must return (or refuse) by the definition (text_oracle.hpp).
  crfx_fuzz::PlainSentences expected;
  const bool plain = !crfx_fuzz::is_gzip(bytes, size);
  const bool valid = plain && crfx_fuzz::plain_conll(bytes, size, expected);
  crfx::TextData data;
  try {
    data = crfx::read_text(fs, path);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
    if (valid) broken("valid CoNLL text refused:", e.what());
    return 0;
  }
  if (plain) {
    if (!valid) broken("CoNLL text that must be refused was read");
    if (data.conll.size() != expected.size()) broken("sentence count differs from the definition");
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (data.conll[i].size() != expected[i].size()) broken("token count differs from the definition");
      for (std::size_t t = 0; t < expected[i].size(); ++t)
        if (data.conll[i][t].columns != expected[i][t].fields || data.conll[i][t].line != expected[i][t].line)
          broken("a token differs from the definition at line", std::to_string(expected[i][t].line));
    }
  }
  // What the reader promises: no empty sentence, every token the same number of columns (> 0),
  // no empty column, line numbers ascending.
  std::size_t columns = 0, last_line = 0;
  for (const auto& s : data.conll) {
    if (s.empty()) broken("an empty sentence");
    for (const auto& tok : s) {
      if (tok.columns.empty()) broken("a token without columns");
      if (columns == 0) columns = tok.columns.size();
      if (tok.columns.size() != columns) broken("tokens with different column counts");
      for (const auto& c : tok.columns)
        if (c.empty() || c.find_first_of(" \t") != std::string::npos) broken("an empty column or one with blanks");
      if (tok.line <= last_line) broken("line numbers not ascending");
      last_line = tok.line;
    }
  }
  static const crfx::FeatureTemplate templ = crfx::FeatureTemplate::parse(kTemplate, "fuzz.template");
  try {
    crfx_fuzz::check_conll_compile(templ, data);  // compile_training and compile, checked
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  try {
    fs.templ = templ;
    const crfx::Corpus training = crfx::compile_training(fs, data, 1);
    if (training.num_sentences() == 0) return 0;
    crfx::choose_layout(fs, training, crfx::FeatureSet{});
    // The same bytes as data to tag: fs.feature_columns columns, or one more (a gold label).
    const crfx::TextData again = crfx::read_text(fs, path);
    if (again.num_sentences() != data.num_sentences()) broken("a second read gave other sentences");
    (void)crfx::compile(fs, again);
    (void)crfx::gold_labels(again);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  return 0;
}
