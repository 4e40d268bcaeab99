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
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "crfx/error.hpp"
#include "crfx/features.hpp"
#include "features/input_checks.hpp"

namespace crfx {

namespace {

using features_detail::columns_word;

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

/// Adds n to count[id], growing `count` for a new id.
inline void bump(std::vector<std::uint32_t>& count, std::uint32_t id, std::uint32_t n = 1) {
  if (id >= count.size()) count.resize(std::size_t(id) + 1, 0);
  count[id] += n;
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

// ---- memoised template expansion ---------------------------------------------------------
//
// Building every attribute string and hashing it into the Dictionary (std::unordered_map) is
// what costs: CoNLL-2000 with the chunking template makes 4.0 M expansions of only 0.34 M
// distinct strings. So each template line with at most 3 macros gets a small open-addressing
// cache keyed by the *codes* of what its macros read at a token — the interned column string, or
// a boundary code standing for _B-k / _B+k — and the string is built (FeatureTemplate::expand,
// the one place that defines it) and looked up only the first time a key is seen. Equal keys
// always expand to equal strings, so the ids are exactly those of the plain loop. Most lines
// read few distinct values (POS n-grams), so their caches stay in the CPU cache.

constexpr std::uint32_t kBefore = 0x80000000u;  // code of _B-k: kBefore + k
constexpr std::uint32_t kAfter = 0xc0000000u;   // code of _B+k: kAfter + k
constexpr std::uint32_t kFree = 0xffffffffu;    // key[0] of an empty cache slot
constexpr std::size_t kMaxKeyed = 3;            // macros per line a cache key can hold

class LineCache {
 public:
  explicit LineCache(const FeatureTemplate::Line& line) : line_(&line) {
    for (const auto& p : line.pieces)
      if (p.is_macro) macros_.push_back(p);
    if (keyed()) slots_.assign(16, Slot{{kFree, 0, 0}, 0, 0});
  }
  const FeatureTemplate::Line& line() const { return *line_; }

  /// Switches to a direct table when the line's key space is small enough: every macro j reads
  /// one column, whose values are coded 0 … values[col] − 1, or a boundary (_B-k for row < 0,
  /// _B+k for row > 0); the key's index is then a mixed-radix number and the id is one array
  /// access instead of a hash probe. Word unigrams and POS n-grams qualify; word bigrams do not.
  /// The table is also kept to a size the batch can use (it can produce at most `tokens`
  /// distinct keys): a 4 MB table filled for a 2,000-token batch cost more than it saved.
  void plan_direct(const std::vector<std::uint32_t>& values, bool counting, std::size_t tokens) {
    if (!keyed()) return;
    const std::size_t limit = std::min(kDirectMax, std::max(kDirectMin, 8 * tokens));
    std::size_t size = 1;
    for (std::size_t j = 0; j < macros_.size(); ++j) {
      if (macros_[j].col < 0 || std::size_t(macros_[j].col) >= values.size()) return;  // checked elsewhere
      const int row = macros_[j].row;
      const std::size_t before = row < 0 ? std::size_t(-row) : 0, after = row > 0 ? std::size_t(row) : 0;
      const std::size_t dim = values[std::size_t(macros_[j].col)] + before + after;
      stride_[j] = size;
      base_[j] = values[std::size_t(macros_[j].col)];
      before_[j] = std::uint32_t(before);
      if (dim > limit || size * dim > limit) return;
      size *= dim;
    }
    direct_ids_.assign(size, kUnset);
    if (counting) direct_counts_.assign(size, 0);
  }
  bool direct() const { return !direct_ids_.empty(); }
  /// The direct table's entry for `key` (kUnset: not yet looked up), counting one occurrence.
  std::uint32_t& direct_entry(const std::uint32_t* key) {
    std::size_t index = 0;
    for (std::size_t j = 0; j < macros_.size(); ++j) {
      const std::uint32_t k = key[j];
      const std::size_t digit = k < kBefore ? k : k < kAfter ? base_[j] + (k - kBefore - 1)
                                                            : base_[j] + before_[j] + (k - kAfter - 1);
      index += digit * stride_[j];
    }
    if (!direct_counts_.empty()) ++direct_counts_[index];
    return direct_ids_[index];
  }
  static constexpr std::uint32_t kUnset = Dictionary::kNone - 1;  // never an id (see Dictionary::add)

  /// Adds the occurrences of every key to count[id] (ids other than kNone).
  void add_counts(std::vector<std::uint32_t>& count) const {
    for (const Slot& s : slots_)
      if (s.key[0] != kFree && s.id != Dictionary::kNone) bump(count, s.id, s.occurrences);
    for (std::size_t i = 0; i < direct_counts_.size(); ++i)
      if (direct_ids_[i] != kUnset && direct_ids_[i] != Dictionary::kNone)
        bump(count, direct_ids_[i], direct_counts_[i]);
  }
  const std::vector<FeatureTemplate::Piece>& macros() const { return macros_; }
  bool keyed() const { return macros_.size() <= kMaxKeyed; }
  static std::size_t hash(const std::uint32_t* k) {
    std::uint64_t h = (k[0] | std::uint64_t(k[1]) << 32) * 0x9e3779b97f4a7c15ull;
    h ^= (h >> 29) ^ (std::uint64_t(k[2]) * 0xc2b2ae3d27d4eb4full);
    h *= 0xbf58476d1ce4e5b9ull;
    return static_cast<std::size_t>(h ^ (h >> 31));
  }

  /// Starts loading the slot where the search for a key of hash `h` begins: the caches of the
  /// word lines outgrow the CPU caches, and issuing every line's first load of a token before
  /// probing any of them lets the misses overlap instead of queueing one after another.
  void prefetch(std::size_t h) const { __builtin_prefetch(&slots_[h & (slots_.size() - 1)]); }

  /// The id stored for `key` ([kMaxKeyed], unused entries 0), counting one more occurrence of
  /// the key; `inserted` when the key is new (the caller then stores the id). The reference is
  /// valid until the next call.
  std::uint32_t& find_or_insert(const std::uint32_t* key, bool& inserted) {
    return find_or_insert(key, hash(key), inserted);
  }
  /// The same with the key's hash() already computed (see prefetch).
  std::uint32_t& find_or_insert(const std::uint32_t* key, std::size_t h, bool& inserted) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    for (std::size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.key[0] == kFree) {
        std::memcpy(s.key, key, sizeof s.key);
        s.occurrences = 1;
        ++count_;
        inserted = true;
        return s.id;
      }
      if (s.key[0] == key[0] && s.key[1] == key[1] && s.key[2] == key[2]) {
        ++s.occurrences;
        inserted = false;
        return s.id;
      }
    }
  }

 private:
  struct Slot {
    std::uint32_t key[kMaxKeyed];
    std::uint32_t id;
    std::uint32_t occurrences;  // counted here (in the cache line already loaded), summed per id
  };

  void grow() {
    std::vector<Slot> old(slots_.size() * 2, Slot{{kFree, 0, 0}, 0, 0});
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.key[0] == kFree) continue;
      std::size_t i = hash(s.key) & (slots_.size() - 1);
      while (slots_[i].key[0] != kFree) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }

  static constexpr std::size_t kDirectMax = std::size_t(1) << 20;  // entries of a direct table
  static constexpr std::size_t kDirectMin = std::size_t(1) << 16;  // allowed whatever the batch

  const FeatureTemplate::Line* line_;
  std::vector<FeatureTemplate::Piece> macros_;
  std::vector<Slot> slots_;  // [power of two], load ≤ 1/2
  std::size_t count_ = 0;
  // Direct mode (plan_direct): ids [and occurrences] per key index; per macro the radix
  // (stride), the column's value count (base) and its _B-k count (before).
  std::vector<std::uint32_t> direct_ids_, direct_counts_;
  std::size_t stride_[kMaxKeyed] = {0, 0, 0}, base_[kMaxKeyed] = {0, 0, 0};
  std::uint32_t before_[kMaxKeyed] = {0, 0, 0};
};

/// Where the attribute strings of one kind (state or edge) go.
struct Sink {
  Dictionary* add_to;                  // training: the dictionary new strings are added to
  const Dictionary* find_in;           // otherwise: the frozen dictionary (unknown → kNone)
  std::vector<std::uint32_t>* counts;  // training: occurrences per id (min_freq), else null
  std::uint32_t lookup(const std::string& s) const {
    return add_to ? add_to->add(s) : find_in->find(s);
  }
};

std::uint32_t label_or_none(std::uint32_t id) {
  return id == Dictionary::kNone ? Corpus::kNoLabel : id;
}

/// Expands the templates of every token of `sentences` into `c`:
///   c.labels        [N]       label(token) — called first for every token (it validates it)
///   c.state_*       CSR [N]   one item per U line per token (unknown strings skipped)
///   c.edge_*        CSR [N]   one item per macro B line per token t ≥ 1 (none without `edges`:
///                             a Maxent model's B lines are not expanded)
///   c.sentence_offsets, c.source_lines
template <class Label>
void expand_conll(const FeatureTemplate& templ, std::size_t F,
                  const std::vector<ConllSentence>& sentences, const std::string& path,
                  Corpus& c, const Sink& state, const Sink& edge, bool edges, Label label) {
  const std::size_t first = c.labels.size();  // tokens already in `c` (a streamed compile's batches)
  std::size_t tokens = 0;
  for (const auto& s : sentences) tokens += s.size();

  // Pass 1: labels, and every feature column interned per column: codes[token·F + col] in
  // 0 … column_values[col] − 1.
  std::vector<std::uint32_t> codes(tokens * F), column_values(F, 0);
  {
    std::vector<std::unordered_map<std::string, std::uint32_t>> values(F);
    c.labels.reserve(tokens);
    std::size_t n = 0;
    for (const ConllSentence& sentence : sentences) {
      for (const ConllToken& tok : sentence) {
        c.labels.push_back(label(tok));
        for (std::size_t col = 0; col < F; ++col) {
          const auto id = static_cast<std::uint32_t>(values[col].size());
          if (id >= kBefore) throw Error("too many distinct column values");
          codes[n * F + col] = values[col].try_emplace(tok.columns[col], id).first->second;
        }
        ++n;
      }
    }
    for (std::size_t col = 0; col < F; ++col) column_values[col] = std::uint32_t(values[col].size());
  }

  // Pass 2: expansions.
  std::vector<LineCache> unigrams, bigrams;
  for (const auto& line : templ.unigrams()) unigrams.emplace_back(line);
  if (edges)
    for (const auto& line : templ.edge_bigrams()) bigrams.emplace_back(line);
  for (LineCache& cache : unigrams) cache.plan_direct(column_values, state.counts != nullptr, tokens);
  for (LineCache& cache : bigrams) cache.plan_direct(column_values, edge.counts != nullptr, tokens);
  c.state_offsets.reserve(tokens + 1);
  c.edge_offsets.reserve(tokens + 1);
  c.state_ids.reserve(tokens * unigrams.size());
  c.edge_ids.reserve(tokens * bigrams.size());
  c.source_lines.reserve(sentences.size());
  std::string buf;  // one attribute string, reused
  const std::size_t lines = std::max(unigrams.size(), bigrams.size());
  std::vector<std::uint32_t> keys(lines * kMaxKeyed), line_ids(lines);  // per line, one token
  std::vector<std::size_t> hashes(lines);
  std::size_t base = 0;  // global index of the sentence's first token
  try {
    for (const ConllSentence& sentence : sentences) {
      if (sentence.empty()) continue;
      const long T = static_cast<long>(sentence.size());
      auto code = [&](long idx, int col) -> std::uint32_t {
        if (idx < 0) return kBefore + static_cast<std::uint32_t>(-idx);
        if (idx >= T) return kAfter + static_cast<std::uint32_t>(idx - T + 1);
        return codes[(base + static_cast<std::size_t>(idx)) * F + static_cast<std::size_t>(col)];
      };
      // The attribute ids of `caches`' lines at token t, kNone for an unknown string, into ids.
      // Keyed lines go in two phases: every key and its first slot's load first, then the probes.
      auto attrs = [&](std::vector<LineCache>& caches, const Sink& sink, std::size_t t,
                       std::uint32_t* ids) {
        const std::size_t n = caches.size();
        for (std::size_t i = 0; i < n; ++i) {  // every keyed line's key; hash lines' slots requested
          LineCache& cache = caches[i];
          if (!cache.keyed()) continue;
          std::uint32_t* key = keys.data() + i * kMaxKeyed;
          key[0] = key[1] = key[2] = 0;
          const auto& m = cache.macros();
          for (std::size_t j = 0; j < m.size(); ++j) key[j] = code(long(t) + m[j].row, m[j].col);
          if (cache.direct()) continue;
          hashes[i] = LineCache::hash(key);
          cache.prefetch(hashes[i]);
        }
        for (std::size_t i = 0; i < n; ++i) {
          LineCache& cache = caches[i];
          if (cache.direct()) {
            std::uint32_t& entry = cache.direct_entry(keys.data() + i * kMaxKeyed);
            if (entry == LineCache::kUnset) {
              FeatureTemplate::expand(cache.line(), sentence, F, t, buf);
              entry = sink.lookup(buf);
            }
            ids[i] = entry;
          } else if (cache.keyed()) {
            bool inserted;
            std::uint32_t& slot = cache.find_or_insert(keys.data() + i * kMaxKeyed, hashes[i], inserted);
            if (inserted) {
              FeatureTemplate::expand(cache.line(), sentence, F, t, buf);
              slot = sink.lookup(buf);
            }
            ids[i] = slot;
          } else {
            FeatureTemplate::expand(cache.line(), sentence, F, t, buf);
            ids[i] = sink.lookup(buf);
            if (ids[i] != Dictionary::kNone && sink.counts) bump(*sink.counts, ids[i]);
          }
        }
      };
      c.source_lines.push_back(sentence.front().line);
      for (std::size_t t = 0; t < sentence.size(); ++t) {
        attrs(unigrams, state, t, line_ids.data());
        for (std::size_t i = 0; i < unigrams.size(); ++i) {
          if (line_ids[i] == Dictionary::kNone) continue;
          c.state_ids.push_back(line_ids[i]);  // binary: no values (Corpus::state_value)
        }
        c.state_offsets.push_back(c.state_ids.size());
        if (t > 0) {
          attrs(bigrams, edge, t, line_ids.data());
          for (std::size_t i = 0; i < bigrams.size(); ++i) {
            if (line_ids[i] == Dictionary::kNone) continue;
            c.edge_ids.push_back(line_ids[i]);
          }
        }
        c.edge_offsets.push_back(c.edge_ids.size());
      }
      base += sentence.size();
      c.sentence_offsets.push_back(first + base);
    }
  } catch (const InputError& e) {
    rethrow_with_path(e, path);
  }
  if (state.counts)
    for (const LineCache& cache : unigrams) cache.add_counts(*state.counts);
  if (edge.counts)
    for (const LineCache& cache : bigrams) cache.add_counts(*edge.counts);
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
    const std::size_t columns = first->columns.size();
    if (columns_ == 0) {  // the first token of the training data fixes the columns
      if (columns < 2)
        throw InputError(data.path, first->line,
                         "training data needs feature columns and a label column (the last); "
                         "this token has " + std::to_string(columns) + " " + columns_word(columns));
      fs.feature_columns = columns - 1;
      check_template_columns(fs.templ, fs.feature_columns, data.path, first->line);
      columns_ = columns;
      first_path_ = data.path;
      first_line_ = first->line;
    } else if (data.path != first_path_ && columns != columns_) {
      throw InputError(data.path, first->line,
                       std::to_string(columns) + " columns, but " + first_path_ + ":" +
                           std::to_string(first_line_) + " has " + std::to_string(columns_) +
                           ": training files are read as one, so their columns must agree");
    }
    const std::size_t expected = columns_;
    expand_conll(
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
    throw InputError(data.conll_shape.path, data.conll_shape.line,
                     data.conll_shape.why +
                         "; for CoNLL columns train with --format conll and a --template (a model keeps "
                         "its training format)");
  for (const CrfsuiteSentence& sentence : data.crfsuite) {
    if (sentence.empty()) continue;
    c.source_lines.push_back(sentence.front().line);
    for (const CrfsuiteToken& tok : sentence) {
      if (tok.label.empty())
        throw InputError(data.path, tok.line, "missing label (the first field) in training data");
      c.labels.push_back(fs.labels.add(tok.label));
      for (const CrfsuiteAttribute& a : tok.attributes) {
        const std::uint32_t id = fs.state_attrs.add(a.name);
        bump(state_count_, id);
        c.state_ids.push_back(id);
        c.state_values.push_back(finite_value(a, data.path, tok.line));
      }
      c.state_offsets.push_back(c.state_ids.size());
      c.edge_offsets.push_back(c.edge_ids.size());
    }
    c.sentence_offsets.push_back(c.labels.size());
  }
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

Corpus compile_training(FeatureSpace& fs, const std::vector<std::string>& paths, std::size_t min_freq,
                        std::uint64_t batch_bytes, const std::function<void(const CompileProgress&)>& after_batch,
                        double reserve_limit) {
  if (paths.empty()) throw Error("no data files to read");
  TrainingCompiler tc(fs);
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
  for (const std::string& path : paths) {
    TextReader reader(fs.format, path);  // every file's columns checked by the compiler
    while (!reader.exhausted()) {
      TextData batch;
      batch.format = fs.format;
      batch.path = path;
      if (reader.append(batch, ~std::size_t(0), batch_bytes) == 0 && reader.exhausted()) break;
      tc.add(batch);
      if (!projected) {  // (a gzip file's bytes read may be its text's: beyond `total`, no projection)
        projected = true;
        const std::uint64_t read = done + reader.bytes_read();
        const double scale = read > 0 ? 1.05 * double(total) / double(read) : 0;
        if (read < total && double(tc.corpus_bytes()) * scale + double(tc.strings_bytes()) <= reserve_limit)
          tc.reserve_for(scale);
      }
      if (!after_batch) continue;
      CompileProgress p;
      p.path = path;
      if (batch.format == InputFormat::conll && !batch.conll.empty() && !batch.conll.back().empty())
        p.line = batch.conll.back().front().line;
      else if (batch.format == InputFormat::crfsuite && !batch.crfsuite.empty() && !batch.crfsuite.back().empty())
        p.line = batch.crfsuite.back().front().line;
      p.sentences = tc.sentences();
      p.corpus_bytes = tc.corpus_bytes();
      p.strings_bytes = tc.strings_bytes();
      after_batch(p);
    }
    done += reader.bytes_read();
  }
  return tc.finish(min_freq);
}

Corpus compile(const FeatureSpace& fs, const TextData& data) {
  check_format(fs, data);
  Corpus c;
  if (data.format == InputFormat::conll) {
    const std::size_t F = fs.feature_columns;
    if (F == 0) throw Error("internal: compile needs a trained feature space (no feature columns)");
    bool checked = false;
    expand_conll(
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
        });
    features_detail::check_feature_columns(fs, data, F);
  } else {
    std::size_t unknown = 0, total = 0;  // attribute occurrences (check_conll_shape)
    for (const CrfsuiteSentence& sentence : data.crfsuite) {
      if (sentence.empty()) continue;
      c.source_lines.push_back(sentence.front().line);
      for (const CrfsuiteToken& tok : sentence) {
        c.labels.push_back(tok.label.empty() ? Corpus::kNoLabel
                                             : label_or_none(fs.labels.find(tok.label)));
        for (const CrfsuiteAttribute& a : tok.attributes) {
          const double value = finite_value(a, data.path, tok.line);
          const std::uint32_t id = fs.state_attrs.find(a.name);
          ++total;
          if (id == Dictionary::kNone) {  // unseen in training: no weight
            ++unknown;
            continue;
          }
          c.state_ids.push_back(id);
          c.state_values.push_back(value);
        }
        c.state_offsets.push_back(c.state_ids.size());
        c.edge_offsets.push_back(c.edge_ids.size());
      }
      c.sentence_offsets.push_back(c.labels.size());
    }
    features_detail::check_conll_shape(data, unknown, total);
  }
  drop_unit_values(c);
  return c;
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
  }
  return out;
}

}  // namespace crfx
