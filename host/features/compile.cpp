// From sentences to a Corpus.
//
//   CoNLL:    token columns [F feature columns | label] + FeatureTemplate
//               U lines, every token t         → state attribute strings → fs.state_attrs ids
//               B lines with macros, t ≥ 1     → edge attribute strings  → fs.edge_attrs ids
//                                               (CRF models; a Maxent model expands no B line)
//               (CRF++ feature.cpp buildFeatures: unigrams at cur = 0…T−1, bigrams at 1…T−1)
//   CRFsuite: label + attr[:value]            → fs.state_attrs ids (no edge attributes)
//
// Every item has value 1.0 in CoNLL data, so no values are stored (Corpus::state_value). A
// template that yields the same string twice at one token gives the id twice (CRF++ appends every
// expansion to the token's feature list, so the feature then counts twice); the backends sum over
// items, which does the same.
//
// Ids are given in order of first appearance. min_freq follows CRF++ -f
// (EncoderFeatureIndex::shrink): an attribute is kept when it occurs at least min_freq times in
// the training data, counting every occurrence (each token, each template).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "features/expand.hpp"
#include "features/input_checks.hpp"

namespace crfx {

namespace {

using features_detail::bump;
using features_detail::columns_word;
using features_detail::expand_conll;

/// FeatureTemplate::expand reports the token's line but not the file; name the file here.
[[noreturn]] void rethrow_with_path(const InputError& e, const std::string& path) {
  if (!e.file().empty()) throw e;
  throw InputError(path, e.line(), e.problem());
}

void check_format(const FeatureSpace& fs, const TextData& data) {
  if (fs.format != data.format)
    throw Error("internal: data read as " +
                std::string(data.format == InputFormat::conll ? "CoNLL" : "CRFsuite") +
                " but the feature space is for the other format");
}

/// min_freq cut-off for one dictionary and its CSR block ([N+1] offsets, [items] ids/values):
/// drops the rare ids from the dictionary and their items from the corpus, renumbering the rest.
void prune(Dictionary& dict, const std::vector<std::uint32_t>& count, std::size_t min_freq,
           std::vector<std::size_t>& offsets, std::vector<std::uint32_t>& ids,
           std::vector<double>& values) {
  if (min_freq <= 1) return;
  std::vector<bool> keep(dict.size());
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i < count.size() && count[i] >= min_freq;
  const std::vector<std::uint32_t> remap = dict.compact(keep);
  std::size_t w = 0;
  std::size_t begin = offsets[0];
  for (std::size_t t = 0; t + 1 < offsets.size(); ++t) {
    const std::size_t end = offsets[t + 1];
    for (std::size_t k = begin; k < end; ++k) {
      const std::uint32_t id = remap[ids[k]];
      if (id == Dictionary::kNone) continue;
      ids[w] = id;
      if (!values.empty()) values[w] = values[k];  // empty: binary
      ++w;
    }
    begin = end;
    offsets[t + 1] = w;
  }
  ids.resize(w);
  if (!values.empty()) values.resize(w);
}

/// Where the attribute strings of one kind (state or edge) go (expand_conll's Sink).
struct Sink {
  Dictionary* add_to;                  // training: the dictionary new strings are added to
  const Dictionary* find_in;           // otherwise: the frozen dictionary (unknown → kNone)
  std::vector<std::uint32_t>* counts;  // training: occurrences per id (min_freq), else null
  std::uint32_t lookup(const std::string& s) const {
    return add_to ? add_to->add(s) : find_in->find(s);
  }
  bool counting() const { return counts != nullptr; }
  void count(std::uint32_t id, std::uint32_t n) const { bump(*counts, id, n); }
};

std::uint32_t label_or_none(std::uint32_t id) {
  return id == Dictionary::kNone ? Corpus::kNoLabel : id;
}

/// expand_conll's tokens for sentences read whole (the empty ones left out).
class TextTokens {
 public:
  TextTokens(const std::vector<ConllSentence>& sentences, std::size_t F) : F_(F) {
    for (const ConllSentence& s : sentences) {
      if (s.empty()) continue;
      sentences_.push_back(&s);
      for (const ConllToken& tok : s) tokens_.push_back(&tok);
      ends_.push_back(tokens_.size());
    }
  }
  std::size_t sentences() const { return sentences_.size(); }
  std::size_t end(std::size_t s) const { return ends_[s]; }
  std::size_t line(std::size_t s) const { return sentences_[s]->front().line; }
  const ConllToken& token(std::size_t k) const { return *tokens_[k]; }
  std::string_view cell(std::size_t k, std::size_t col) const { return tokens_[k]->columns[col]; }
  void expand(const FeatureTemplate::Line& line, std::size_t s, std::size_t t, std::string& out) const {
    FeatureTemplate::expand(line, *sentences_[s], F_, t, out);
  }

 private:
  std::size_t F_;
  std::vector<const ConllSentence*> sentences_;
  std::vector<const ConllToken*> tokens_;
  std::vector<std::size_t> ends_;
};

/// expand_conll over `sentences`, an error of the expansion named in file `path`; with the
/// `caches` of an earlier call (null: caches of its own).
template <class Label>
void expand_text(const FeatureTemplate& templ, std::size_t F, const std::vector<ConllSentence>& sentences,
                 const std::string& path, Corpus& c, Sink state, Sink edge, bool edges, Label label,
                 features_detail::ExpandCaches* caches = nullptr) {
  const TextTokens tokens(sentences, F);
  auto token_label = [&](std::size_t k) { return label(tokens.token(k)); };
  try {
    if (caches) expand_conll(templ, F, tokens, c, state, edge, edges, token_label, *caches);
    else expand_conll(templ, F, tokens, c, state, edge, edges, token_label);
  } catch (const InputError& e) {
    rethrow_with_path(e, path);
  }
}

/// CRFsuite data whose values are all 1 (attributes written without ":value", the usual case)
/// keeps none, as CoNLL data does: 8 of every 12 bytes an item takes, and the same sums (1·w is w).
void drop_unit_values(Corpus& c) {
  auto all_one = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return x == 1.0; });
  };
  if (all_one(c.state_values)) std::vector<double>().swap(c.state_values);
  if (all_one(c.edge_values)) std::vector<double>().swap(c.edge_values);
}

/// An attribute value must be a finite number (read_crfsuite refuses others in files; data built
/// in memory, as the Python module builds it, is checked here): NaN or ±inf would make every
/// score, and so the whole model, NaN.
double finite_value(const CrfsuiteAttribute& a, const std::string& path, std::size_t line) {
  if (!std::isfinite(a.value)) {
    const char* v = std::isnan(a.value) ? "nan" : a.value > 0 ? "inf" : "-inf";
    throw InputError(path, line, "attribute '" + a.name + "': value " + v + " is not a finite number");
  }
  return a.value;
}

/// Calls, for CRFsuite data in either form (sentences, or the lines TextReader::keep_lines
/// keeps), v.sentence(its first line) for every non-empty sentence, then for each of its tokens
/// v.token(label, line), v.attribute(name, value) for each attribute and v.token_end(), then
/// v.sentence_end().
template <class Visitor>
void visit_crfsuite(const TextData& data, Visitor& v) {
  for (const CrfsuiteSentence& sentence : data.crfsuite) {
    if (sentence.empty()) continue;
    v.sentence(sentence.front().line);
    for (const CrfsuiteToken& tok : sentence) {
      v.token(tok.label, tok.line);
      for (const CrfsuiteAttribute& a : tok.attributes) v.attribute(a.name, finite_value(a, data.path, tok.line));
      v.token_end();
    }
    v.sentence_end();
  }
  const CrfsuiteLines& lines = data.crfsuite_lines;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::size_t first = lines.first_token(i);
    if (lines.sentence_ends[i] == first) continue;
    v.sentence(lines.sentence_lines[i]);
    for (std::size_t k = first; k < lines.sentence_ends[i]; ++k) {
      const std::string_view line = lines.line(k);
      const std::size_t number = lines.sentence_lines[i] + (k - first);
      v.token(CrfsuiteLines::label(line), number);
      for_each_attribute(line, data.path, number, [&v](std::string_view name, double value) { v.attribute(name, value); });
      v.token_end();
    }
    v.sentence_end();
  }
}

/// TrainingCompiler::add's visitor of CRFsuite data: labels and attributes added to the
/// dictionaries, their occurrences counted.
struct CrfsuiteAdder {
  FeatureSpace& fs;
  Corpus& c;
  std::vector<std::uint32_t>& count;
  const std::string& path;
  void sentence(std::size_t line) { c.source_lines.push_back(line); }
  void token(std::string_view label, std::size_t line) {
    if (label.empty()) throw InputError(path, line, "missing label (the first field) in training data");
    c.labels.push_back(fs.labels.add(label));
  }
  void attribute(std::string_view name, double value) {
    const std::uint32_t id = fs.state_attrs.add(name);
    bump(count, id);
    c.state_ids.push_back(id);
    c.state_values.push_back(value);
  }
  void token_end() {
    c.state_offsets.push_back(c.state_ids.size());
    c.edge_offsets.push_back(c.edge_ids.size());
  }
  void sentence_end() { c.sentence_offsets.push_back(c.labels.size()); }
};

/// compile's visitor of CRFsuite data: labels and attributes looked up in the frozen
/// dictionaries (an unknown attribute is no item), the unknown ones counted. A sentence's
/// attributes are looked up together at its end (Dictionary::find_many fetches the table's
/// slots and strings ahead, where one look-up at a time waits on memory for each).
struct CrfsuiteFinder {
  const FeatureSpace& fs;
  Corpus& c;
  std::string_view text;  // the batch's lines (CrfsuiteLines): names inside it stay put
  std::size_t unknown = 0, total = 0;  // attribute occurrences (check_conll_shape)

  std::vector<std::string_view> names{};  // the sentence's attributes so far
  std::vector<std::size_t> copied{};    // [names] where a decoded name sits in `decoded`, or npos
  std::vector<double> values{};
  std::vector<std::size_t> token_ends{};  // one past each token's attributes in `names`
  std::string decoded{};  // names decoded from escapes or before a value (their views do not last)
  std::vector<std::size_t> hashes{};
  std::vector<std::uint32_t> ids{};

  void sentence(std::size_t line) { c.source_lines.push_back(line); }
  void token(std::string_view label, std::size_t) {
    c.labels.push_back(label.empty() ? Corpus::kNoLabel : label_or_none(fs.labels.find(label)));
  }
  void attribute(std::string_view name, double value) {
    const bool stays = text.empty() || (std::less_equal<>()(text.data(), name.data()) &&
                                        std::less_equal<>()(name.data() + name.size(), text.data() + text.size()));
    copied.push_back(stays ? std::string::npos : decoded.size());
    if (!stays) decoded.append(name);
    names.push_back(name);
    values.push_back(value);
  }
  void token_end() { token_ends.push_back(names.size()); }
  void sentence_end() {
    const std::size_t n = names.size();
    hashes.resize(n);
    ids.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (copied[i] != std::string::npos) names[i] = std::string_view(decoded).substr(copied[i], names[i].size());
      hashes[i] = std::hash<std::string_view>{}(names[i]);
    }
    fs.state_attrs.find_many(names.data(), hashes.data(), n, ids.data());
    total += n;
    std::size_t i = 0;
    for (const std::size_t end : token_ends) {
      for (; i < end; ++i) add(ids[i], values[i]);
      c.state_offsets.push_back(c.state_ids.size());
      c.edge_offsets.push_back(c.edge_ids.size());
    }
    c.sentence_offsets.push_back(c.labels.size());
    names.clear();
    copied.clear();
    values.clear();
    token_ends.clear();
    decoded.clear();
  }

 private:
  void add(std::uint32_t id, double value) {
    if (id == Dictionary::kNone) {  // unseen in training: no weight
      ++unknown;
      return;
    }
    c.state_ids.push_back(id);
    // The values are kept from the first that is not 1 on (drop_unit_values would drop them
    // all otherwise: 8 bytes an item a batch need not hold).
    if (value != 1.0 || !c.state_values.empty()) {
      c.state_values.resize(c.state_ids.size() - 1, 1.0);  // the first time: the ones before it
      c.state_values.push_back(value);
    }
  }
};

void check_template_columns(const FeatureTemplate& templ, std::size_t feature_columns,
                            const std::string& path, std::size_t line) {
  if (templ.max_column() < 0 || std::size_t(templ.max_column()) < feature_columns) return;
  std::size_t source_line = 0;  // the first template line reading that column
  for (const auto* lines : {&templ.unigrams(), &templ.edge_bigrams()})
    for (const FeatureTemplate::Line& l : *lines)
      for (const FeatureTemplate::Piece& p : l.pieces)
        if (p.is_macro && p.col == templ.max_column() && (source_line == 0 || l.source_line < source_line))
          source_line = l.source_line;
  throw InputError(path, line,
                   "template column " + std::to_string(templ.max_column()) + " but the data has only " +
                       std::to_string(feature_columns) + " feature " + columns_word(feature_columns) +
                       " (read by line " + std::to_string(source_line) +
                       " of the template; columns count from 0, and the last one is the label)");
}

}  // namespace

TrainingCompiler::TrainingCompiler(FeatureSpace& fs) : fs_(fs) {
  if (fs.labels.frozen() || fs.state_attrs.frozen() || fs.edge_attrs.frozen())
    throw Error("internal: compile_training needs empty, unfrozen dictionaries");
}

void TrainingCompiler::check_columns(const std::string& path, std::size_t columns, std::size_t line) {
  if (columns_ == 0) {  // the first token of the training data fixes the columns
    if (columns < 2)
      throw InputError(path, line,
                       "training data needs feature columns and a label column (the last); "
                       "this token has " + std::to_string(columns) + " " + columns_word(columns));
    fs_.feature_columns = columns - 1;
    check_template_columns(fs_.templ, fs_.feature_columns, path, line);
    columns_ = columns;
    first_path_ = path;
    first_line_ = line;
  } else if (path != first_path_ && columns != columns_) {
    throw InputError(path, line,
                     std::to_string(columns) + " columns, but " + first_path_ + ":" + std::to_string(first_line_) +
                         " has " + std::to_string(columns_) +
                         ": training files are read as one, so their columns must agree");
  }
}

void TrainingCompiler::add(const TextData& data) {
  if (finished_) throw Error("internal: TrainingCompiler::add after finish");
  check_format(fs_, data);
  FeatureSpace& fs = fs_;
  Corpus& c = c_;
  if (data.format == InputFormat::conll) {
    const ConllToken* first = nullptr;
    for (const auto& s : data.conll)
      if (!s.empty()) {
        first = &s.front();
        break;
      }
    if (!first) return;
    check_columns(data.path, first->columns.size(), first->line);
    const std::size_t expected = columns_;
    expand_text(
        fs.templ, fs.feature_columns, data.conll, data.path, c,
        Sink{&fs.state_attrs, nullptr, &state_count_}, Sink{&fs.edge_attrs, nullptr, &edge_count_},
        fs.type == ModelType::crf, [&](const ConllToken& tok) {
          if (tok.columns.size() != expected)
            throw InputError(data.path, tok.line,
                             "inconsistent column count: expected " + std::to_string(expected) + " " +
                                 columns_word(expected) + ", got " + std::to_string(tok.columns.size()));
          return fs.labels.add(tok.columns.back());
        });
    return;
  }
  if (data.conll_shape.found())  // CoNLL columns read as CRFsuite lines (host/io/crfsuite.cpp)
    features_detail::refuse_conll_shape(data.conll_shape);
  CrfsuiteAdder adder{fs, c, state_count_, data.path};
  visit_crfsuite(data, adder);
}

Corpus TrainingCompiler::finish(std::size_t min_freq) {
  if (finished_) throw Error("internal: TrainingCompiler::finish twice");
  finished_ = true;
  Corpus& c = c_;
  prune(fs_.state_attrs, state_count_, min_freq, c.state_offsets, c.state_ids, c.state_values);
  prune(fs_.edge_attrs, edge_count_, min_freq, c.edge_offsets, c.edge_ids, c.edge_values);
  drop_unit_values(c);
  // The run keeps the arrays for its whole length: one that grew by doubling (no reserve_for, or
  // more text than projected) is copied to its size, one array at a time; one reserved within
  // 1/8 of its size is left as it is (the copy would hold both at once).
  auto fit = [](auto& v) {
    if (v.capacity() - v.size() > v.size() / 8) v.shrink_to_fit();
  };
  fit(c.sentence_offsets), fit(c.state_offsets), fit(c.edge_offsets), fit(c.labels), fit(c.state_ids);
  fit(c.edge_ids), fit(c.state_values), fit(c.edge_values), fit(c.source_lines);
  fs_.labels.freeze();
  fs_.state_attrs.freeze();
  fs_.edge_attrs.freeze();
  return std::move(c_);
}

Corpus compile_training(FeatureSpace& fs, const TextData& data, std::size_t min_freq) {
  TrainingCompiler tc(fs);
  tc.add(data);
  return tc.finish(min_freq);
}

void TrainingCompiler::reserve_for(double scale) {
  if (!(scale > 1)) return;
  auto grow = [scale](auto& v) {
    if (!v.empty()) v.reserve(std::size_t(double(v.size()) * scale) + 1);
  };
  Corpus& c = c_;
  grow(c.sentence_offsets), grow(c.state_offsets), grow(c.edge_offsets), grow(c.labels), grow(c.state_ids);
  grow(c.edge_ids), grow(c.state_values), grow(c.edge_values), grow(c.source_lines);
}

std::size_t TrainingCompiler::corpus_bytes() const {
  auto b = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return b(c_.sentence_offsets) + b(c_.source_lines) + b(c_.labels) + b(c_.state_offsets) + b(c_.state_ids) +
         b(c_.state_values) + b(c_.edge_offsets) + b(c_.edge_ids) + b(c_.edge_values) +
         (state_count_.capacity() + edge_count_.capacity()) * sizeof(std::uint32_t);
}

std::size_t TrainingCompiler::strings_bytes() const {
  return fs_.dictionary_bytes();
}

namespace {

/// The text a thread's chunk of a CoNLL batch may hold under a large template: each U or B line
/// expands every token into a string (its characters, the std::string, the dictionary's slots:
/// ~kStringBytes), a token taking kTokenBytes of text at least. A batch whose strings could pass a
/// eighth of `budget` is cut smaller, so that the memory check after each batch stops a reading
/// that cannot fit before its dictionaries pass the budget by more than that (a 10,000-line
/// template under 1 GB: a sentence a chunk); a template of tens of lines keeps the batches.
constexpr double kStringBytes = 100, kTokenBytes = 8;
std::size_t template_lines(const FeatureSpace& fs) {
  return fs.templ.unigrams().size() + fs.templ.edge_bigrams().size();
}
std::uint64_t template_batch_bytes(const FeatureSpace& fs, std::uint64_t batch_bytes, double budget,
                                   unsigned threads) {
  const std::size_t lines = template_lines(fs);
  if (!(budget > 0) || lines == 0) return batch_bytes;
  const double per_text_byte = double(lines) / kTokenBytes * kStringBytes;
  const double room = budget / 8 / (per_text_byte * double(std::max(1u, threads)));
  return std::max<std::uint64_t>(1, std::min(batch_bytes, std::uint64_t(room)));
}

}  // namespace

Corpus compile_training(FeatureSpace& fs, const std::vector<std::string>& paths, std::size_t min_freq,
                        std::uint64_t batch_bytes, const std::function<void(const CompileProgress&)>& after_batch,
                        double reserve_limit, unsigned threads) {
  if (paths.empty()) throw Error("no data files to read");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  TrainingCompiler tc(fs);
  tc.count_occurrences(min_freq > 1);
  // The files' bytes (0 when one is standard input or not a regular file): after the first batch
  // the arrays are reserved for the whole text, projected from that batch (5% over).
  std::uint64_t total = 0, done = 0;
  for (const std::string& path : paths) {
    std::error_code ec;
    const auto size = path == "-" || !std::filesystem::is_regular_file(path, ec) ? 0 : std::filesystem::file_size(path, ec);
    if (ec || size == 0) {
      total = 0;
      break;
    }
    total += size;
  }
  bool projected = total == 0 || !(reserve_limit > 0);
  // A CoNLL batch's text (a chunk a thread) and the most strings the template makes of it; a
  // CRFsuite batch (batch_text) has an attribute per kTokenBytes at most.
  const std::uint64_t conll_batch = template_batch_bytes(fs, batch_bytes, reserve_limit, threads);
  const std::size_t batch_strings =
      fs.format == InputFormat::conll
          ? std::size_t(double(conll_batch) * threads / kTokenBytes * double(std::max<std::size_t>(1, template_lines(fs))))
          : std::size_t(double(TrainingCompiler::batch_text(batch_bytes, threads)) / kTokenBytes);
  auto after = [&](const std::string& path, std::uint64_t file_bytes, std::size_t line) {
    if (!projected) {  // (a gzip file's bytes read may be its text's: beyond `total`, no projection)
      projected = true;
      const std::uint64_t read = done + file_bytes;
      const double scale = read > 0 ? 1.05 * double(total) / double(read) : 0;
      if (read < total && double(tc.corpus_bytes()) * scale + double(tc.strings_bytes()) <= reserve_limit)
        tc.reserve_for(scale);
    }
    if (!after_batch) return;
    CompileProgress p;
    p.path = path;
    p.line = line;
    p.sentences = tc.sentences();
    p.corpus_bytes = tc.corpus_bytes();
    p.strings_bytes = tc.strings_bytes();
    p.growth_bytes = fs.state_attrs.growth_bytes(batch_strings) + fs.edge_attrs.growth_bytes(batch_strings);
    after_batch(p);
  };
  for (const std::string& path : paths) {
    auto batch_done = [&](std::uint64_t bytes, std::size_t line) { after(path, bytes, line); };
    done += fs.format == InputFormat::conll ? tc.add_file(path, threads, conll_batch, batch_done)
                                            : tc.add_crfsuite_file(path, threads, batch_bytes, batch_done);
  }
  return tc.finish(min_freq);
}

struct CompileCaches::Kept {
  const FeatureSpace* fs = nullptr;  // the caches' (another's empties them)
  features_detail::ExpandCaches caches;
  std::size_t max_bytes = 0;
};

CompileCaches::CompileCaches(std::size_t max_bytes) : kept_(std::make_unique<Kept>()) {
  kept_->caches.kept = true;
  kept_->max_bytes = max_bytes;
}
CompileCaches::~CompileCaches() = default;
std::size_t CompileCaches::bytes() const { return kept_->caches.bytes(); }

namespace {

/// compile(fs, data), its template expanded with `kept` caches (null: its own).
Corpus compile_with(const FeatureSpace& fs, const TextData& data, features_detail::ExpandCaches* kept) {
  check_format(fs, data);
  Corpus c;
  if (data.format == InputFormat::conll) {
    const std::size_t F = fs.feature_columns;
    if (F == 0) throw Error("internal: compile needs a trained feature space (no feature columns)");
    bool checked = false;
    expand_text(
        fs.templ, F, data.conll, data.path, c, Sink{nullptr, &fs.state_attrs, nullptr},
        Sink{nullptr, &fs.edge_attrs, nullptr}, fs.type == ModelType::crf,
        [&](const ConllToken& tok) {
          const std::size_t n = tok.columns.size();
          if (n != F && n != F + 1)
            throw InputError(data.path, tok.line,
                             "expected " + std::to_string(F) + " or " + std::to_string(F + 1) +
                                 " columns (the model's " + std::to_string(F) + " feature " +
                                 columns_word(F) + ", then optionally the gold label), got " +
                                 std::to_string(n));
          if (!checked) {
            check_template_columns(fs.templ, F, data.path, tok.line);
            checked = true;
          }
          return n == F ? Corpus::kNoLabel : label_or_none(fs.labels.find(tok.columns.back()));
        },
        kept);
    features_detail::check_feature_columns(fs, data, F);
  } else {
    CrfsuiteFinder finder{fs, c, data.crfsuite_lines.text};
    visit_crfsuite(data, finder);
    const std::size_t unknown = finder.unknown, total = finder.total;
    features_detail::check_conll_shape(data, unknown, total);
  }
  drop_unit_values(c);
  return c;
}

}  // namespace

Corpus compile(const FeatureSpace& fs, const TextData& data) { return compile_with(fs, data, nullptr); }

Corpus compile(const FeatureSpace& fs, const TextData& data, CompileCaches& caches) {
  CompileCaches::Kept& k = caches.kept();
  if (k.fs != &fs || k.caches.bytes() > k.max_bytes) k.caches.clear();
  k.fs = &fs;
  try {
    return compile_with(fs, data, &k.caches);
  } catch (...) {
    k.caches.clear();  // (an expansion cut short may leave entries half made)
    throw;
  }
}

std::vector<std::string> gold_labels(const TextData& data) {
  // All or nothing: the labels of every token, or an empty vector when some token has none
  // (CoNLL data read with the model's feature columns and no label column; CRFsuite tokens with
  // an empty first field).
  std::vector<std::string> out;
  if (data.format == InputFormat::conll) {
    for (const ConllSentence& s : data.conll) {
      for (const ConllToken& tok : s) {
        if (data.feature_columns > 0 && tok.columns.size() <= data.feature_columns) return {};
        out.push_back(tok.columns.back());
      }
    }
  } else {
    for (const CrfsuiteSentence& s : data.crfsuite) {
      for (const CrfsuiteToken& tok : s) {
        if (tok.label.empty()) return {};
        out.push_back(tok.label);
      }
    }
    const CrfsuiteLines& lines = data.crfsuite_lines;
    for (std::size_t k = 0; k < lines.token_ends.size(); ++k) {
      const std::string_view label = CrfsuiteLines::label(lines.line(k));
      if (label.empty()) return {};
      out.emplace_back(label);
    }
  }
  return out;
}

}  // namespace crfx
