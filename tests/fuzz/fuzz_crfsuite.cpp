// libFuzzer target: the CRFsuite attribute-file reader (LineReader → CrfsuiteReader, through
// read_text as `crfx train --format crfsuite` reads data), then compiling the sequences for
// training (min_freq 1 and 2) and for tagging, checked against the definition, and reading and
// compiling them again as data to tag. The bytes are a memfd's
// contents (fuzz_common.hpp). Expected failures are crfx::Error; anything else is a finding.
#include <cmath>
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
using crfx_fuzz::broken;

/// compile_training (min_freq 1 and 2) and compile against the definition: per token, the
/// attributes whose names the dictionary holds (those seen min_freq times), in order, with their
/// values (none kept when all are 1).
void check_compile(const crfx::TextData& data) {
  std::vector<std::vector<std::string>> names;
  std::vector<double> values;  // every attribute's value, in order
  for (const auto& s : data.crfsuite)
    for (const auto& tok : s) {
      names.emplace_back();
      for (const auto& a : tok.attributes) names.back().push_back(a.name);
    }
  for (std::size_t min_freq : {1, 2}) {
    crfx::FeatureSpace fs;
    fs.format = crfx::InputFormat::crfsuite;
    const crfx::Corpus c = crfx::compile_training(fs, data, min_freq);
    if (c.num_sentences() == 0) return;  // refused by the front ends (compile_oracle.hpp)
    crfx_fuzz::check_dictionary(names, fs.state_attrs, min_freq, "training: attribute dictionary");
    crfx_fuzz::check_items(names, fs.state_attrs, c.state_offsets, c.state_ids, "training: attributes");
    crfx::choose_layout(fs, c, crfx::FeatureSet{});
    fs.dims().check_layout();
    const crfx::Corpus tagged = crfx::compile(fs, data);
    crfx_fuzz::check_items(names, fs.state_attrs, tagged.state_offsets, tagged.state_ids, "tagging: attributes");
    if (tagged.labels != c.labels) broken("tagging: gold labels differ from training");
    for (const crfx::Corpus* corpus : {&c, &tagged}) {
      std::size_t k = 0, t = 0;
      for (const auto& s : data.crfsuite)
        for (const auto& tok : s) {
          for (const auto& a : tok.attributes) {
            if (fs.state_attrs.find(a.name) == crfx::Dictionary::kNone) continue;
            if (corpus->state_value(k) != a.value) broken("an attribute value changed");
            ++k;
          }
          if (k != corpus->state_offsets[++t]) broken("attribute items out of step");
        }
    }
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string& path = crfx_fuzz::mem_file().set(bytes, size);
  crfx::FeatureSpace fs;
  fs.format = crfx::InputFormat::crfsuite;
  // Plain text: its structure by the definition (text_oracle.hpp); attributes are decoded and
  // checked by the reader alone (refusals of bad values are not predicted here).
  crfx_fuzz::PlainSentences expected;
  const bool plain = !crfx_fuzz::is_gzip(bytes, size);
  const bool valid = plain && crfx_fuzz::plain_crfsuite(bytes, size, expected);
  crfx::TextData data;
  try {
    data = crfx::read_text(fs, path);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
    return 0;
  }
  if (plain) {
    if (!valid) broken("CRFsuite text that must be refused was read");
    if (data.crfsuite.size() != expected.size()) broken("sequence count differs from the definition");
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (data.crfsuite[i].size() != expected[i].size()) broken("token count differs from the definition");
      for (std::size_t t = 0; t < expected[i].size(); ++t) {
        const auto& tok = data.crfsuite[i][t];
        const auto& want = expected[i][t];
        if (tok.label != want.fields[0] || tok.attributes.size() + 1 != want.fields.size() || tok.line != want.line)
          broken("a token differs from the definition at line", std::to_string(want.line));
      }
    }
  }
  // What the reader promises: no empty sequence, labels without tabs or spaces, attribute names
  // non-empty, values finite, line numbers ascending.
  std::size_t last_line = 0;
  for (const auto& s : data.crfsuite) {
    if (s.empty()) broken("an empty sequence");
    for (const auto& tok : s) {
      if (tok.label.find_first_of(" \t") != std::string::npos) broken("a label with a blank");
      for (const auto& a : tok.attributes) {
        if (a.name.empty()) broken("an empty attribute name");
        if (!std::isfinite(a.value)) broken("a non-finite attribute value");
      }
      if (tok.line <= last_line) broken("line numbers not ascending");
      last_line = tok.line;
    }
  }
  try {
    check_compile(data);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  try {
    const crfx::Corpus training = crfx::compile_training(fs, data, 1);
    if (training.num_sentences() == 0) return 0;
    crfx::choose_layout(fs, training, crfx::FeatureSet{});
    const crfx::TextData again = crfx::read_text(fs, path);
    (void)crfx::compile(fs, again);
    (void)crfx::gold_labels(again);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  return 0;
}
