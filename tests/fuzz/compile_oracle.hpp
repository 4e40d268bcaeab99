// Shared by the libFuzzer targets: compile_training and compile checked against the plain
// definition of what they compute. compile.cpp memoises template expansion (per-line caches keyed
// by column-value codes, direct tables, occurrence counts kept in the caches for min_freq); the
// oracle here expands every template line at every token with FeatureTemplate::expand and counts
// the strings itself, so any disagreement of the fast path with the definition aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/corpus.hpp"
#include "crfx/internal/features.hpp"

namespace crfx_fuzz {

[[noreturn]] inline void broken(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "invariant broken: %s %s\n", what, detail.c_str());
  std::abort();
}

/// Every token's attribute strings in corpus order: per token, its state strings (one per U line)
/// and its edge strings (one per macro B line, from the second token of a sentence on).
struct Expanded {
  std::vector<std::vector<std::string>> state, edge;  // [token][line]
};

inline Expanded expand_all(const crfx::FeatureTemplate& t, const crfx::TextData& data, std::size_t F) {
  Expanded e;
  std::string s;
  for (const auto& sentence : data.conll)
    for (std::size_t pos = 0; pos < sentence.size(); ++pos) {
      e.state.emplace_back();
      e.edge.emplace_back();
      for (const auto& line : t.unigrams()) {
        crfx::FeatureTemplate::expand(line, sentence, F, pos, s);
        e.state.back().push_back(s);
      }
      if (pos > 0)
        for (const auto& line : t.edge_bigrams()) {
          crfx::FeatureTemplate::expand(line, sentence, F, pos, s);
          e.edge.back().push_back(s);
        }
    }
  return e;
}

/// Corpus items [offsets[t], offsets[t+1]) of every token against the strings expected there:
/// each string the dictionary holds, in line order (unknown strings skipped).
inline void check_items(const std::vector<std::vector<std::string>>& expected, const crfx::Dictionary& dict,
                        const std::vector<std::size_t>& offsets, const std::vector<std::uint32_t>& ids,
                        const char* what) {
  if (offsets.size() != expected.size() + 1) broken(what, "token count");
  for (std::size_t t = 0; t < expected.size(); ++t) {
    std::size_t k = offsets[t];
    for (const std::string& s : expected[t]) {
      const std::uint32_t id = dict.find(s);
      if (id == crfx::Dictionary::kNone) continue;
      if (k >= offsets[t + 1] || ids[k] != id) broken(what, "item of token " + std::to_string(t) + ": '" + s + "'");
      ++k;
    }
    if (k != offsets[t + 1]) broken(what, "extra items at token " + std::to_string(t));
  }
}

/// The dictionary holds exactly the strings seen at least min_freq times.
inline void check_dictionary(const std::vector<std::vector<std::string>>& strings, const crfx::Dictionary& dict,
                             std::size_t min_freq, const char* what) {
  std::unordered_map<std::string, std::size_t> count;
  for (const auto& token : strings)
    for (const auto& s : token) ++count[s];
  std::size_t kept = 0;
  for (const auto& [s, n] : count) {
    const bool in = dict.find(s) != crfx::Dictionary::kNone;
    if (in != (n >= min_freq)) broken(what, "'" + s + "' seen " + std::to_string(n) + " times");
    kept += in;
  }
  if (kept != dict.size()) broken(what, "strings that were never seen");
}

/// crfx tag's kept caches (CompileCaches, a worker's from batch to batch): the data's second half
/// compiled first, then the whole data and then its first half with the same caches, each corpus
/// the plain expansion's. `max_bytes` 1 empties the caches before every call but the first.
inline void check_kept_caches(const crfx::FeatureSpace& fs, const crfx::TextData& data, const Expanded& e,
                              std::size_t max_bytes) {
  const std::size_t half = data.conll.size() / 2;
  crfx::TextData first = data, second = data;
  first.conll.resize(half);
  second.conll.erase(second.conll.begin(), second.conll.begin() + std::ptrdiff_t(half));
  std::size_t first_tokens = 0;
  for (const auto& s : first.conll) first_tokens += s.size();
  auto part = [](const std::vector<std::vector<std::string>>& all, std::size_t from, std::size_t to) {
    return std::vector<std::vector<std::string>>(all.begin() + std::ptrdiff_t(from), all.begin() + std::ptrdiff_t(to));
  };
  crfx::CompileCaches caches(max_bytes);
  const std::size_t T = e.state.size();
  const struct {
    const crfx::TextData* data;
    std::size_t from, to;
  } calls[] = {{&second, first_tokens, T}, {&data, 0, T}, {&first, 0, first_tokens}};
  for (const auto& call : calls) {
    const crfx::Corpus kept = crfx::compile(fs, *call.data, caches);
    check_items(part(e.state, call.from, call.to), fs.state_attrs, kept.state_offsets, kept.state_ids,
                "kept caches: state");
    check_items(part(e.edge, call.from, call.to), fs.edge_attrs, kept.edge_offsets, kept.edge_ids,
                "kept caches: edge");
  }
}

/// CoNLL data: compile_training with min_freq 1 and 2, then compile, each against the oracle.
/// Expected failures (crfx::Error) propagate to the caller.
inline void check_conll_compile(const crfx::FeatureTemplate& templ, const crfx::TextData& data) {
  for (std::size_t min_freq : {1, 2}) {
    crfx::FeatureSpace fs;
    fs.format = crfx::InputFormat::conll;
    fs.templ = templ;
    const crfx::Corpus c = crfx::compile_training(fs, data, min_freq);
    // No sentences: the front ends stop here ("no sentences in the training data"); the feature
    // space is not trained (compile refuses it, as an internal error).
    if (c.num_sentences() == 0) return;
    const Expanded e = expand_all(templ, data, fs.feature_columns);
    check_dictionary(e.state, fs.state_attrs, min_freq, "training: state dictionary");
    check_dictionary(e.edge, fs.edge_attrs, min_freq, "training: edge dictionary");
    check_items(e.state, fs.state_attrs, c.state_offsets, c.state_ids, "training: state");
    check_items(e.edge, fs.edge_attrs, c.edge_offsets, c.edge_ids, "training: edge");
    if (!c.state_values.empty() || !c.edge_values.empty()) broken("CoNLL data with attribute values");
    crfx::choose_layout(fs, c, crfx::FeatureSet{});
    fs.dims().check_layout();
    const crfx::Corpus tagged = crfx::compile(fs, data);
    check_items(e.state, fs.state_attrs, tagged.state_offsets, tagged.state_ids, "tagging: state");
    check_items(e.edge, fs.edge_attrs, tagged.edge_offsets, tagged.edge_ids, "tagging: edge");
    if (tagged.labels != c.labels) broken("tagging: gold labels differ from training");
    check_kept_caches(fs, data, e, min_freq == 1 ? std::size_t(32) << 20 : 1);
  }
}

}  // namespace crfx_fuzz
