// crfx — template expansion, shared by compile.cpp (data in memory, tagging) and
// compile_shards.cpp (training files read on several threads): expand_conll over any tokens
// (TextTokens: sentences of ConllTokens; ChunkTokens: views into a chunk of a file) into any sink
// of attribute ids (a dictionary, or a shard's view of one), its caches kept from call to call
// where the caller asks (ExpandCaches: a training compile's chunk slot, batch after batch).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/error.hpp"
#include "crfx/features.hpp"

namespace crfx {
namespace features_detail {

/// Adds n to count[id], growing `count` for a new id.
inline void bump(std::vector<std::uint32_t>& count, std::uint32_t id, std::uint32_t n = 1) {
  if (id >= count.size()) count.resize(std::size_t(id) + 1, 0);
  count[id] += n;
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

  /// Before each call of expand_conll: a fresh line (or one whose direct table a column's values
  /// outgrew: its ids are dropped, to be looked up again) plans a direct table; a line kept in
  /// hash mode keeps its slots. `headroom`: the caches are kept from call to call (ExpandCaches),
  /// so the table leaves room for a quarter more values per column.
  void prepare(const std::vector<std::uint32_t>& values, bool counting, std::size_t tokens, bool headroom) {
    if (!keyed() || (!direct() && count_ > 0)) return;
    if (direct()) {
      bool fits = true;
      for (std::size_t j = 0; j < macros_.size(); ++j) fits = fits && values[std::size_t(macros_[j].col)] <= base_[j];
      if (fits) return;
      std::vector<std::uint32_t>().swap(direct_ids_);
      std::vector<std::uint32_t>().swap(direct_counts_);
    }
    plan_direct(values, counting, tokens, headroom);
  }

  /// Switches to a direct table when the line's key space is small enough: every macro j reads
  /// one column, whose values are coded 0 … values[col] − 1, or a boundary (_B-k for row < 0,
  /// _B+k for row > 0); the key's index is then a mixed-radix number and the id is one array
  /// access instead of a hash probe. Word unigrams and POS n-grams qualify; word bigrams do not.
  /// The table is also kept to a size the batch can use (it can produce at most `tokens`
  /// distinct keys): a 4 MB table filled for a 2,000-token batch cost more than it saved.
  void plan_direct(const std::vector<std::uint32_t>& values, bool counting, std::size_t tokens, bool headroom) {
    const std::size_t limit = std::min(kDirectMax, std::max(kDirectMin, 8 * tokens));
    std::size_t size = 1;
    for (std::size_t j = 0; j < macros_.size(); ++j) {
      if (macros_[j].col < 0 || std::size_t(macros_[j].col) >= values.size()) return;  // checked elsewhere
      const int row = macros_[j].row;
      const std::size_t before = row < 0 ? std::size_t(-row) : 0, after = row > 0 ? std::size_t(row) : 0;
      const std::size_t n = values[std::size_t(macros_[j].col)], base = headroom ? n + n / 4 + 8 : n;
      const std::size_t dim = base + before + after;
      stride_[j] = size;
      base_[j] = base;
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

  /// Calls fn(id, occurrences) for every key's id met since the last call (ids other than kNone),
  /// then counts from zero again.
  template <class Fn>
  void drain_counts(Fn fn) {
    for (Slot& s : slots_)
      if (s.key[0] != kFree && s.id != Dictionary::kNone && s.occurrences > 0) fn(s.id, s.occurrences), s.occurrences = 0;
    for (std::size_t i = 0; i < direct_counts_.size(); ++i)
      if (direct_ids_[i] != kUnset && direct_ids_[i] != Dictionary::kNone && direct_counts_[i] > 0)
        fn(direct_ids_[i], direct_counts_[i]), direct_counts_[i] = 0;
  }
  /// Replaces every id held (kNone aside) by fn(id): a shard's own ids by the dictionary's, once merged.
  template <class Fn>
  void remap(Fn fn) {
    for (Slot& s : slots_)
      if (s.key[0] != kFree && s.id != Dictionary::kNone) s.id = fn(s.id);
    for (std::uint32_t& id : direct_ids_)
      if (id != kUnset && id != Dictionary::kNone) id = fn(id);
  }
  /// The heap bytes held.
  std::size_t bytes() const {
    return slots_.capacity() * sizeof(Slot) + (direct_ids_.capacity() + direct_counts_.capacity()) * sizeof(std::uint32_t);
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


/// A feature column's values coded 0, 1, … in order of first appearance (the line caches' keys),
/// each string copied once (so that the codes stay valid from call to call; a chunk's text does
/// not), in an open-addressing table of codes with the strings' hashes beside them.
class ColumnCodes {
 public:
  std::uint32_t code(std::string_view s) {
    if (2 * (hashes_.size() + 1) > slots_.size()) grow();
    const std::size_t h = std::hash<std::string_view>{}(s), mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t c = slots_[i];
      if (c == kFree) return slots_[i] = add(s, h);
      if (hashes_[c] == h && at(c) == s) return c;
    }
  }
  std::uint32_t size() const { return std::uint32_t(hashes_.size()); }
  std::size_t bytes() const {
    return text_.capacity() + (ends_.capacity() + hashes_.capacity()) * sizeof(std::size_t) +
           slots_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::string_view at(std::uint32_t c) const { return {text_.data() + ends_[c], ends_[c + 1] - ends_[c]}; }
  std::uint32_t add(std::string_view s, std::size_t h) {
    if (hashes_.size() >= kBefore) throw Error("too many distinct column values");
    text_.append(s);
    ends_.push_back(text_.size());
    hashes_.push_back(h);
    return std::uint32_t(hashes_.size() - 1);
  }
  void grow() {
    slots_.assign(std::max<std::size_t>(16, 2 * slots_.size()), kFree);
    const std::size_t mask = slots_.size() - 1;
    for (std::uint32_t c = 0; c < hashes_.size(); ++c) {
      std::size_t i = hashes_[c] & mask;
      while (slots_[i] != kFree) i = (i + 1) & mask;
      slots_[i] = c;
    }
  }
  std::string text_;                    // the values, one after the other
  std::vector<std::size_t> ends_{0};    // [size + 1] code c is text_[ends_[c], ends_[c + 1])
  std::vector<std::size_t> hashes_;     // [size]
  std::vector<std::uint32_t> slots_;    // codes or kFree; a power of two, at most half full
};

/// What expand_conll memoises: the columns' codes and every template line's cache (codes → id).
/// Made afresh for each call, or kept by the caller from call to call (`kept`: a training
/// compile's chunk slot, batch after batch), so that what an earlier batch met is neither built
/// nor looked up again; the ids they hold are then the sinks' ids as of the last call, which the
/// caller renumbers (remap) when they change.
struct ExpandCaches {
  bool kept = false;
  std::vector<ColumnCodes> columns;         // [F]
  std::vector<LineCache> unigrams, bigrams;  // per U line, per macro B line (none without edges)

  /// The lines' caches made (the first call), then planned for a call of `tokens` tokens.
  void prepare(const FeatureTemplate& templ, bool edges, const std::vector<std::uint32_t>& values,
               bool count_states, bool count_edges, std::size_t tokens) {
    if (unigrams.empty() && bigrams.empty()) {
      for (const auto& line : templ.unigrams()) unigrams.emplace_back(line);
      if (edges)
        for (const auto& line : templ.edge_bigrams()) bigrams.emplace_back(line);
    }
    for (LineCache& cache : unigrams) cache.prepare(values, count_states, tokens, kept);
    for (LineCache& cache : bigrams) cache.prepare(values, count_edges, tokens, kept);
  }
  /// state(id) and edge(id) for every id the lines hold.
  template <class State, class Edge>
  void remap(State state, Edge edge) {
    for (LineCache& cache : unigrams) cache.remap(state);
    for (LineCache& cache : bigrams) cache.remap(edge);
  }
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const ColumnCodes& col : columns) b += col.bytes();
    for (const auto* lines : {&unigrams, &bigrams})
      for (const LineCache& cache : *lines) b += cache.bytes();
    return b;
  }
  void clear() { columns.clear(), unigrams.clear(), bigrams.clear(); }
};

/// expand_conll's pass 1: c.labels gets label(k) for every token k, and every feature column is
/// coded (caches.columns): codes[k·F + col] in 0 … values[col] − 1 (values returned).
template <class Tokens, class Label>
std::vector<std::uint32_t> intern_columns(const Tokens& tokens, std::size_t F, std::size_t N, Corpus& c,
                                          Label& label, std::vector<std::uint32_t>& codes, ExpandCaches& caches) {
  codes.resize(N * F);
  caches.columns.resize(F);
  c.labels.reserve(N);
  for (std::size_t k = 0; k < N; ++k) {
    c.labels.push_back(label(k));
    for (std::size_t col = 0; col < F; ++col) codes[k * F + col] = caches.columns[col].code(tokens.cell(k, col));
  }
  std::vector<std::uint32_t> column_values(F);
  for (std::size_t col = 0; col < F; ++col) column_values[col] = caches.columns[col].size();
  return column_values;
}

/// Expands the templates of every token of `tokens` into `c`:
///   c.labels        [N]       label(k) for token k — called first for every token (it validates it)
///   c.state_*       CSR [N]   one item per U line per token (unknown strings skipped)
///   c.edge_*        CSR [N]   one item per macro B line per token t ≥ 1 (none without `edges`:
///                             a Maxent model's B lines are not expanded)
///   c.sentence_offsets, c.source_lines
/// Tokens (TextTokens, ChunkTokens): sentences(), end(s) (one past sentence s's last token,
/// tokens numbered from 0), line(s), cell(k, col), expand(line, s, t, out). A Sink: lookup(string)
/// (the id, kNone for an unknown string), counting() and count(id, n) (min_freq's occurrences).
template <class Tokens, class Sink, class Label>
void expand_conll(const FeatureTemplate& templ, std::size_t F, const Tokens& tokens, Corpus& c, Sink& state,
                  Sink& edge, bool edges, Label label, ExpandCaches& caches) {
  const std::size_t first = c.labels.size();  // tokens already in `c` (a streamed compile's batches)
  const std::size_t S = tokens.sentences();
  const std::size_t N = S == 0 ? 0 : tokens.end(S - 1);
  std::vector<std::uint32_t> codes;
  const std::vector<std::uint32_t> column_values = intern_columns(tokens, F, N, c, label, codes, caches);
  caches.prepare(templ, edges, column_values, state.counting(), edge.counting(), N);
  std::vector<LineCache>& unigrams = caches.unigrams;
  std::vector<LineCache>& bigrams = caches.bigrams;
  c.state_offsets.reserve(N + 1);  // (the first batch's sizes: a streamed compile's later batches
  c.edge_offsets.reserve(N + 1);   // grow the arrays by doubling, or by reserve_for)
  c.state_ids.reserve(N * unigrams.size());
  c.edge_ids.reserve(N * bigrams.size());
  c.source_lines.reserve(S);
  std::string buf;  // one attribute string, reused
  const std::size_t lines = std::max(unigrams.size(), bigrams.size());
  std::vector<std::uint32_t> keys(lines * kMaxKeyed), line_ids(lines);  // per line, one token
  std::vector<std::size_t> hashes(lines);
  for (std::size_t s = 0; s < S; ++s) {
    const std::size_t base = s == 0 ? 0 : tokens.end(s - 1);  // the sentence's first token
    const long T = static_cast<long>(tokens.end(s) - base);
    auto code = [&](long idx, int col) -> std::uint32_t {
      if (idx < 0) return kBefore + static_cast<std::uint32_t>(-idx);
      if (idx >= T) return kAfter + static_cast<std::uint32_t>(idx - T + 1);
      return codes[(base + static_cast<std::size_t>(idx)) * F + static_cast<std::size_t>(col)];
    };
    // The attribute ids of `caches`' lines at token t, kNone for an unknown string, into ids.
    // Keyed lines go in two phases: every key and its first slot's load first, then the probes.
    auto attrs = [&](std::vector<LineCache>& caches, Sink& sink, std::size_t t, std::uint32_t* ids) {
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
            tokens.expand(cache.line(), s, t, buf);
            entry = sink.lookup(buf);
          }
          ids[i] = entry;
        } else if (cache.keyed()) {
          bool inserted;
          std::uint32_t& slot = cache.find_or_insert(keys.data() + i * kMaxKeyed, hashes[i], inserted);
          if (inserted) {
            tokens.expand(cache.line(), s, t, buf);
            slot = sink.lookup(buf);
          }
          ids[i] = slot;
        } else {
          tokens.expand(cache.line(), s, t, buf);
          ids[i] = sink.lookup(buf);
          if (ids[i] != Dictionary::kNone && sink.counting()) sink.count(ids[i], 1);
        }
      }
    };
    c.source_lines.push_back(tokens.line(s));
    for (std::size_t t = 0; t < std::size_t(T); ++t) {
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
    c.sentence_offsets.push_back(first + tokens.end(s));
  }
  if (state.counting())
    for (LineCache& cache : unigrams) cache.drain_counts([&](std::uint32_t id, std::uint32_t n) { state.count(id, n); });
  if (edge.counting())
    for (LineCache& cache : bigrams) cache.drain_counts([&](std::uint32_t id, std::uint32_t n) { edge.count(id, n); });
}

/// The same with caches of its own (the strings, and so the ids, are the same either way).
template <class Tokens, class Sink, class Label>
void expand_conll(const FeatureTemplate& templ, std::size_t F, const Tokens& tokens, Corpus& c, Sink& state,
                  Sink& edge, bool edges, Label label) {
  ExpandCaches caches;
  expand_conll(templ, F, tokens, c, state, edge, edges, label, caches);
}

}  // namespace features_detail
}  // namespace crfx
