// crfx — the checks that data is what a model reads (declared in input_checks.hpp).
#include "features/input_checks.hpp"

#include <string>
#include <unordered_map>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"

namespace crfx::features_detail {
namespace {

// ---- data that is not what the model reads (issue 42) ------------------------------------------
//
// A feature column that does not hold what the model was trained on. compile() takes tokens of F
// or F+1 columns, so a file that lost a column — word and gold chunk tag, tagged with a word, POS,
// chunk model — is read with its chunk tags as the POS feature and tagged into nonsense, without a
// word. The model keeps no per-column vocabulary, but a U line that reads one column alone
// (U12:%x[0,1], any row) makes "U12:" + value, so whether the model saw value v in column c is
// whether that string is in fs.state_attrs (min_freq may have dropped rare values; the frequent
// ones of a tag set stay). Over the first kColumnSample (2000) tokens of the data — at least
// kColumnMinTokens (50), else no verdict — column c is refused when
//   1. at least 67% (two thirds) of the tokens have there a value the model never saw in that
//      column, and
//   2. the column holds few distinct values: each at least 4 times on average (a tag set), and
//   3. the model keeps at least half as many values for the column as the data shows, or else
//      (a sparse model, L1 or boosting, kept few) at least 67% of the tokens have there a value
//      the model knows elsewhere: a label or another column's value.
// Chunk tags read as POS tags are 100% unknown, 7 to 12 distinct values in 50 to 2000 tokens (7 to
// 190 tokens each); POS tags read as words (columns swapped) are 76% unknown with the 300-sentence
// model of the tests (punctuation is its own POS tag: ',' is a word and a tag), 34 distinct values
// in 2000 tokens. A POS column the model was trained on has next to none unknown. Condition 2
// spares a word column full of new words (a small model, another domain): words come 1.3 (50
// tokens) to 2.8 (2000 tokens) tokens per distinct value in CoNLL-2000 and CoNLL-2002. The check
// looks at the first F columns whether or not a gold label follows. Refused, not warned: nothing
// useful comes out of such a run, and a warning scrolls by in a batch job. A column that no U line
// reads alone is not checked, nor data of fewer than 50 tokens (a batch of crfx tag is checked on
// its own: a short last batch goes unchecked, the first batch of a file decides in practice).
constexpr std::size_t kColumnSample = 2000, kColumnMinTokens = 50;
constexpr std::size_t kColumnUnknownPercent = 67, kColumnTokensPerValue = 4;

/// The attribute string a one-macro template line makes from `value`.
std::string attribute_of(const FeatureTemplate::Line& line, const std::string& value) {
  std::string s;
  for (const FeatureTemplate::Piece& p : line.pieces) s += p.is_macro ? value : p.text;
  return s;
}

/// Line `n` (1-based) of `text`.
std::string text_line(const std::string& text, std::size_t n) {
  std::size_t b = 0;
  for (std::size_t i = 1; i < n && b != std::string::npos; ++i) {
    b = text.find('\n', b);
    if (b != std::string::npos) ++b;
  }
  if (b == std::string::npos || b >= text.size()) return "";
  const std::size_t e = text.find('\n', b);
  std::string line = text.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::string examples(const std::vector<std::string>& values) {
  std::string s;
  for (std::size_t i = 0; i < values.size() && i < 3; ++i) s += (i ? ", " : "") + values[i];
  return values.size() > 3 ? s + ", …" : s;
}

}  // namespace

void check_feature_columns(const FeatureSpace& fs, const TextData& data, std::size_t F) {
  std::vector<const ConllToken*> sample;
  for (const ConllSentence& sentence : data.conll) {
    for (const ConllToken& tok : sentence) {
      if (sample.size() == kColumnSample) break;
      sample.push_back(&tok);
    }
    if (sample.size() == kColumnSample) break;
  }
  if (sample.size() < kColumnMinTokens) return;
  // Per column a U line whose only macro reads it: the first with row 0 (it names the column most
  // plainly in the message), else the first. Any such line tells the same (the string holds no row).
  std::vector<const FeatureTemplate::Line*> probe(F, nullptr);
  std::vector<bool> row0(F, false);
  for (const FeatureTemplate::Line& line : fs.templ.unigrams()) {
    const FeatureTemplate::Piece* macro = nullptr;
    std::size_t macros = 0;
    for (const FeatureTemplate::Piece& p : line.pieces) {
      if (!p.is_macro) continue;
      macro = &p;
      ++macros;
    }
    if (macros != 1 || macro->col < 0 || std::size_t(macro->col) >= F) continue;
    const std::size_t c = std::size_t(macro->col);
    if (!probe[c] || (!row0[c] && macro->row == 0)) {
      probe[c] = &line;
      row0[c] = macro->row == 0;
    }
  }
  const std::size_t n = sample.size();
  for (std::size_t c = 0; c < F; ++c) {
    if (!probe[c]) continue;
    std::unordered_map<std::string, bool> known;  // distinct values → seen there in training
    std::vector<std::string> unknown_values;       // in order of appearance
    std::size_t unknown = 0;
    for (const ConllToken* tok : sample) {
      if (tok->columns.size() <= c) continue;
      const std::string& v = tok->columns[c];
      auto [it, added] = known.try_emplace(v, false);
      if (added) {
        it->second = fs.state_attrs.find(attribute_of(*probe[c], v)) != Dictionary::kNone;
        if (!it->second) unknown_values.push_back(v);
      }
      unknown += !it->second;
    }
    if (100 * unknown < kColumnUnknownPercent * n || kColumnTokensPerValue * known.size() > n) continue;
    // Refused: what the model saw there, for the message (the strings the probe line made).
    std::string before, after;
    bool in_after = false;
    for (const FeatureTemplate::Piece& p : probe[c]->pieces) {
      if (p.is_macro) in_after = true;
      else (in_after ? after : before) += p.text;
    }
    std::vector<std::string> seen;
    std::size_t vocabulary = 0;  // the values the model keeps for this column
    for (std::size_t id = 0; id < fs.state_attrs.size(); ++id) {
      const std::string& a = fs.state_attrs.at(std::uint32_t(id));
      if (a.size() <= before.size() + after.size() || a.compare(0, before.size(), before) != 0 ||
          a.compare(a.size() - after.size(), after.size(), after) != 0)
        continue;
      std::string v = a.substr(before.size(), a.size() - before.size() - after.size());
      if (v.compare(0, 2, "_B") == 0) continue;  // a boundary (_B-1, _B+1)
      ++vocabulary;
      if (seen.size() < 4) seen.push_back(std::move(v));
    }
    // A model keeps only the attributes with a non-zero weight: a sparse one (L1, boosting) has
    // forgotten most values of a column, and new-looking values prove nothing. Refused then only
    // where the values belong elsewhere: the model's labels (gold labels in a feature column) or
    // another column's values (columns out of order).
    if (2 * vocabulary < known.size()) {
      std::size_t elsewhere = 0;
      for (const ConllToken* tok : sample) {
        if (tok->columns.size() <= c) continue;
        const std::string& v = tok->columns[c];
        bool other = fs.labels.find(v) != Dictionary::kNone;
        for (std::size_t o = 0; o < F && !other; ++o)
          other = o != c && probe[o] && fs.state_attrs.find(attribute_of(*probe[o], v)) != Dictionary::kNone;
        elsewhere += other;
      }
      if (100 * elsewhere < kColumnUnknownPercent * n) continue;
    }
    const std::string line_text = text_line(fs.templ.source(), probe[c]->source_line);
    const std::size_t columns = sample.front()->columns.size();
    throw InputError(data.path.empty() ? std::string("the data") : data.path, sample.front()->line,
                     "column " + std::to_string(c) + " does not hold what the model was trained on: " +
                         std::to_string(unknown) + " of the first " + std::to_string(n) +
                         " tokens have a value there that the model never saw in that column (" +
                         examples(unknown_values) + "; " + std::to_string(known.size()) +
                         " distinct values), where it learnt " +
                         (seen.empty() ? std::string("none that min-freq kept") : "values such as " + examples(seen)) +
                         " (template line " + std::to_string(probe[c]->source_line) +
                         (line_text.empty() ? std::string() : ", " + line_text) + "). The model reads " +
                         std::to_string(F) + " feature " + columns_word(F) +
                         ", then optionally the gold label, and this data has " + std::to_string(columns) +
                         " " + columns_word(columns) +
                         ": is a column missing or out of order (e.g. the gold labels where a feature "
                         "column belongs)?");
  }
}

/// CRFsuite lines that look like CoNLL columns (TextData::conll_shape) at tag time: refused when
/// also at least half of the attribute occurrences are unknown to the model (`unknown` of
/// `total`). A CRFsuite model's attributes are what its training file wrote (w[0]=He,
/// pos[0]=PRP); CoNLL columns read as attributes (PRP, B-NP) are not among them.
void refuse_conll_shape(const ConllShape& shape) {
  throw InputError(shape.path, shape.line,
                   shape.why + "; for CoNLL columns train with --format conll and a --template (a model keeps "
                               "its training format)");
}

void check_conll_shape(const TextData& data, std::size_t unknown, std::size_t total) {
  if (!data.conll_shape.found() || total == 0 || 2 * unknown < total) return;
  throw InputError(data.conll_shape.path, data.conll_shape.line,
                   data.conll_shape.why + "; " + std::to_string(unknown) + " of " + std::to_string(total) +
                       " attributes are unknown to the model, which was trained on CRFsuite attribute lines "
                       "(a model keeps its training format): tag CoNLL columns with a model trained with "
                       "--format conll and a --template");
}

}  // namespace crfx::features_detail
