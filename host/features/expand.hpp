// crfx — template expansion, shared by compile.cpp (data in memory, tagging) and
// compile_shards.cpp (training files read on several threads): expand_conll over any tokens
// (TextTokens: sentences of ConllTokens; ChunkTokens: views into a chunk of a file) into any sink
// of attribute ids (a dictionary, or a shard's view of one), its caches kept from call to call
// where the caller asks, or shared by a training compile's chunk slots (ExpandCaches).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"

namespace crfx {
namespace features_detail {

/// Adds n to count[id], growing `count` for a new id.
inline void bump(std::vector<std::uint32_t>& count, std::uint32_t id, std::uint32_t n = 1) {
  if (id >= count.size()) count.resize(std::size_t(id) + 1, 0);
  count[id] += n;
}

// ---- memoised template expansion ---------------------------------------------------------
//
// Building every attribute string and hashing it into the Dictionary is what costs: CoNLL-2000
// with the chunking template makes 4.0 M expansions of only 0.34 M distinct strings. So each
// template line with at most 3 macros gets a cache keyed by the *codes* of what its macros read
// at a token — the column's string coded (ColumnCodes), or a boundary code standing for _B-k /
// _B+k — and the string is built (FeatureTemplate::expand, the one place that defines it) and
// looked up only the first time a key is seen. Equal keys always expand to equal strings, so the
// ids are exactly those of the plain loop. The caches are probed line after line over a block of
// tokens (LinePass), so that one line's table is in the CPU cache at a time, and the first-seen
// keys' strings are looked up afterwards in text order (the order the ids follow). A training
// compile's chunk slots share one set of caches, read by all during a batch and given the slots'
// new keys after it (ExpandCaches::shared).

constexpr std::uint32_t kBefore = 0x80000000u;  // code of _B-k: kBefore + k
constexpr std::uint32_t kAfter = 0xc0000000u;   // code of _B+k: kAfter + k
constexpr std::uint32_t kFree = 0xffffffffu;    // key[0] of an empty cache slot
/// A column's values a ColumnCodes codes at most: an overlay's codes (ExpandCaches::shared) follow
/// the shared caches' and stay below kBefore.
constexpr std::uint32_t kMaxValues = 0x40000000u;
constexpr std::size_t kMaxKeyed = 3;            // macros per line a cache key can hold

class LineCache {
 public:
  explicit LineCache(const FeatureTemplate::Line& line) : line_(&line) {
    for (const auto& p : line.pieces)
      if (p.is_macro) macros_.push_back(p);
    if (keyed()) slots_.assign(16, Slot{{kFree, 0, 0}, 0});
  }
  const FeatureTemplate::Line& line() const { return *line_; }

  /// Before each call of expand_conll: a fresh line (or one whose direct table a column's values
  /// outgrew: its ids are dropped, to be looked up again) plans a direct table; a line kept in
  /// hash mode keeps its slots. `headroom`: the caches are kept from call to call (ExpandCaches),
  /// so the table leaves room for a quarter more values per column.
  void prepare(const std::vector<std::uint32_t>& values, bool counting, std::size_t tokens, bool headroom) {
    if (!keyed()) return;
    if (counting && counts_.empty()) counts_.assign(slots_.size(), 0);  // (before any key is held)
    if (!direct() && count_ > 0) return;
    if (direct()) {
      if (fits(values)) return;
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
      dim_[j] = dim;
      if (dim > limit || size * dim > limit) return;
      size *= dim;
    }
    direct_ids_.assign(size, kUnset);
    if (counting) direct_counts_.assign(size, 0);
  }
  bool direct() const { return !direct_ids_.empty(); }
  /// Whether the direct table holds every key of columns with `values` values.
  bool fits(const std::vector<std::uint32_t>& values) const {
    for (std::size_t j = 0; j < macros_.size(); ++j)
      if (values[std::size_t(macros_[j].col)] > base_[j]) return false;
    return true;
  }
  /// The direct table's index of `key`.
  std::size_t direct_index(const std::uint32_t* key) const {
    std::size_t index = 0;
    for (std::size_t j = 0; j < macros_.size(); ++j) {
      const std::uint32_t k = key[j];
      const std::size_t digit = k < kBefore ? k : k < kAfter ? base_[j] + (k - kBefore - 1)
                                                            : base_[j] + before_[j] + (k - kAfter - 1);
      index += digit * stride_[j];
    }
    return index;
  }
  /// The direct table's entry at `index` (kUnset: not yet looked up), counting one occurrence.
  std::uint32_t& direct_at(std::size_t index) {
    if (!direct_counts_.empty()) ++direct_counts_[index];
    return direct_ids_[index];
  }
  static constexpr std::uint32_t kUnset = Dictionary::kNone - 1;  // never an id (see Dictionary::add)
  /// An entry whose string is still to be looked up (expand_conll's misses), never an id either.
  static constexpr std::uint32_t kPending = Dictionary::kNone - 2;

  /// Calls fn(id, occurrences) for every key's id met since the last call (ids other than kNone),
  /// then counts from zero again.
  template <class Fn>
  void drain_counts(Fn fn) {
    for (std::size_t i = 0; i < counts_.size(); ++i)
      if (slots_[i].key[0] != kFree && slots_[i].id != Dictionary::kNone && counts_[i] > 0) fn(slots_[i].id, counts_[i]), counts_[i] = 0;
    for (std::size_t i = 0; i < direct_counts_.size(); ++i)
      if (direct_ids_[i] != kUnset && direct_ids_[i] != Dictionary::kNone && direct_counts_[i] > 0)
        fn(direct_ids_[i], direct_counts_[i]), direct_counts_[i] = 0;
  }
  /// Calls fn(key, id) for every key held (the shared caches' merge, compile_shards.cpp).
  template <class Fn>
  void for_each(Fn fn) const {
    for (const Slot& s : slots_)
      if (s.key[0] != kFree) fn(s.key, s.id);
    std::uint32_t key[kMaxKeyed] = {0, 0, 0};
    for (std::size_t index = 0; index < direct_ids_.size(); ++index) {
      if (direct_ids_[index] == kUnset) continue;
      for (std::size_t j = 0; j < macros_.size(); ++j) {  // direct_index's digits, back to codes
        const std::size_t digit = index / stride_[j] % dim_[j];
        key[j] = digit < base_[j]                ? std::uint32_t(digit)
                 : digit < base_[j] + before_[j] ? kBefore + std::uint32_t(digit - base_[j]) + 1
                                                 : kAfter + std::uint32_t(digit - base_[j] - before_[j]) + 1;
      }
      fn(key, direct_ids_[index]);
    }
  }
  /// The id held for `key` at place(key) `at`, or kUnset; nothing written (the shared caches,
  /// read by the slots at once).
  std::uint32_t get(const std::uint32_t* key, std::size_t at) const {
    if (direct()) return direct_ids_[at];
    for (std::size_t i = at & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.key[0] == kFree) return kUnset;
      if (s.key[0] == key[0] && s.key[1] == key[1] && s.key[2] == key[2]) return s.id;
    }
  }
  /// Holds `id` for `key` (the shared caches' merge; no occurrences counted there).
  void set(const std::uint32_t* key, std::uint32_t id) {
    bool inserted = false;
    (direct() ? direct_ids_[direct_index(key)] : find_or_insert(key, hash(key), inserted)) = id;
  }
  /// A shared line made ready for keys of columns with `values` values: a fresh line plans a
  /// direct table, one whose direct table the values outgrew plans again, keeping its keys (in a
  /// new direct table, or slots where it would be too large); a line in hash mode stays so.
  void replan(const std::vector<std::uint32_t>& values, std::size_t tokens) {
    if (!keyed() || (direct() ? fits(values) : count_ > 0)) return;
    LineCache fresh(*line_);
    fresh.plan_direct(values, false, tokens, true);
    for_each([&](const std::uint32_t* key, std::uint32_t id) { fresh.set(key, id); });
    *this = std::move(fresh);
  }
  /// The heap bytes held.
  std::size_t bytes() const {
    return slots_.capacity() * sizeof(Slot) +
           (counts_.capacity() + direct_ids_.capacity() + direct_counts_.capacity()) * sizeof(std::uint32_t);
  }
  const std::vector<FeatureTemplate::Piece>& macros() const { return macros_; }
  bool keyed() const { return macros_.size() <= kMaxKeyed; }
  static std::size_t hash(const std::uint32_t* k) {
    std::uint64_t h = (k[0] | std::uint64_t(k[1]) << 32) * 0x9e3779b97f4a7c15ull;
    h ^= (h >> 29) ^ (std::uint64_t(k[2]) * 0xc2b2ae3d27d4eb4full);
    h *= 0xbf58476d1ce4e5b9ull;
    return static_cast<std::size_t>(h ^ (h >> 31));
  }

  /// Where the key is: its direct_index in a direct table, else its hash (find_or_insert's `h`).
  std::size_t place(const std::uint32_t* key) const { return direct() ? direct_index(key) : hash(key); }
  /// Starts loading the entry at place `at`, or the slot where its search begins: the tables of the word lines outgrow the CPU caches,
  /// and requesting a group of tokens' entries before probing any of them lets the misses overlap
  /// instead of queueing one after another.
  void prefetch(std::size_t at) const {
    if (direct()) __builtin_prefetch(&direct_ids_[at]);
    else __builtin_prefetch(&slots_[at & (slots_.size() - 1)]);
  }
  /// The entry of a key already met, occurrences not counted.
  std::uint32_t& find(const std::uint32_t* key) {
    if (direct()) return direct_ids_[direct_index(key)];
    for (std::size_t i = hash(key) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.key[0] == key[0] && s.key[1] == key[1] && s.key[2] == key[2]) return s.id;
    }
  }

  /// The id stored for `key` ([kMaxKeyed], unused entries 0), counting one more occurrence of
  /// the key (`h`: its hash); `inserted` when the key is new (the caller then stores the id). The
  /// reference is valid until the next call.
  std::uint32_t& find_or_insert(const std::uint32_t* key, std::size_t h, bool& inserted) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    for (std::size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.key[0] == kFree) {
        std::memcpy(s.key, key, sizeof s.key);
        if (!counts_.empty()) counts_[i] = 1;
        ++count_;
        inserted = true;
        return s.id;
      }
      if (s.key[0] == key[0] && s.key[1] == key[1] && s.key[2] == key[2]) {
        if (!counts_.empty()) ++counts_[i];
        inserted = false;
        return s.id;
      }
    }
  }

 private:
  struct Slot {  // 16 bytes: a slot never straddles two cache lines
    std::uint32_t key[kMaxKeyed];
    std::uint32_t id;
  };

  void grow() {
    std::vector<Slot> old(slots_.size() * 2, Slot{{kFree, 0, 0}, 0});
    std::vector<std::uint32_t> old_counts(counts_.empty() ? 0 : old.size(), 0);
    old.swap(slots_);
    old_counts.swap(counts_);
    for (std::size_t o = 0; o < old.size(); ++o) {
      if (old[o].key[0] == kFree) continue;
      std::size_t i = hash(old[o].key) & (slots_.size() - 1);
      while (slots_[i].key[0] != kFree) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = old[o];
      if (!counts_.empty()) counts_[i] = old_counts[o];
    }
  }

  static constexpr std::size_t kDirectMax = std::size_t(1) << 20;  // entries of a direct table
  static constexpr std::size_t kDirectMin = std::size_t(1) << 16;  // allowed whatever the batch

  const FeatureTemplate::Line* line_;
  std::vector<FeatureTemplate::Piece> macros_;
  std::vector<Slot> slots_;  // [power of two], load ≤ 1/2
  std::vector<std::uint32_t> counts_;  // [slots_.size()] occurrences per slot (min_freq), else empty
  std::size_t count_ = 0;
  // Direct mode (plan_direct): ids [and occurrences] per key index; per macro the radix
  // (stride), the column's value count (base) and its _B-k count (before).
  std::vector<std::uint32_t> direct_ids_, direct_counts_;
  std::size_t stride_[kMaxKeyed] = {0, 0, 0}, base_[kMaxKeyed] = {0, 0, 0}, dim_[kMaxKeyed] = {0, 0, 0};
  std::uint32_t before_[kMaxKeyed] = {0, 0, 0};
};


/// A feature column's values coded 0, 1, … in order of first appearance (the line caches' keys),
/// each string copied once (so that the codes stay valid from call to call; a chunk's text does
/// not), in an open-addressing table of codes with the strings' hashes beside them.
class ColumnCodes {
 public:
  /// The code of `s` (its hash `h`), a new one for a value not met before.
  std::uint32_t code(std::string_view s, std::size_t h) {
    if (2 * (hashes_.size() + 1) > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t c = slots_[i];
      if (c == kFree) return slots_[i] = add(s, h);
      if (hashes_[c] == h && value(c) == s) return c;
    }
  }
  /// The code of `s`, or kFree for a value not met; nothing written (the shared caches).
  std::uint32_t find(std::string_view s, std::size_t h) const {
    if (slots_.empty()) return kFree;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t c = slots_[i];
      if (c == kFree || (hashes_[c] == h && value(c) == s)) return c;
    }
  }
  std::string_view value(std::uint32_t c) const { return {text_.data() + ends_[c], ends_[c + 1] - ends_[c]}; }
  std::size_t hash(std::uint32_t c) const { return hashes_[c]; }
  std::uint32_t size() const { return std::uint32_t(hashes_.size()); }
  std::size_t bytes() const {
    return text_.capacity() + (ends_.capacity() + hashes_.capacity()) * sizeof(std::size_t) +
           slots_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::uint32_t add(std::string_view s, std::size_t h) {
    if (hashes_.size() >= kMaxValues) throw Error("too many distinct column values");
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
/// Made afresh for each call, or kept by the caller from call to call (`kept`: its direct tables
/// leave room for more values), so that what an earlier call met is neither built nor looked up
/// again (the ids they hold are the sinks'), or an overlay of caches shared by a training
/// compile's chunk slots (`shared`, kept from batch to batch).
struct ExpandCaches {
  bool kept = false;
  /// The caches a training compile's chunk slots share (null: none). During a batch every slot
  /// reads them, nothing written, and these (the slot's, emptied before each batch: an overlay)
  /// hold only what they lack: the values they do not hold coded from base[col] on (their count
  /// then), the keys they do not hold with the sink's ids. After the batch the slots' new values
  /// and keys are added to them with the dictionaries' ids (compile_shards.cpp, share_caches).
  /// Each slot would otherwise meet and build most strings itself: on 16 threads a batch gives a
  /// slot 512 KB of text, a sixteenth of what the others have met.
  const ExpandCaches* shared = nullptr;
  std::vector<std::uint32_t> base;  // [F] an overlay's first code of each column
  std::vector<ColumnCodes> columns;         // [F]
  std::vector<LineCache> unigrams, bigrams;  // per U line, per macro B line (none without edges)

  /// The lines' caches made (the first call), then planned for a call of `tokens` tokens.
  void prepare(const FeatureTemplate& templ, bool edges, const std::vector<std::uint32_t>& values,
               bool count_states, bool count_edges, std::size_t tokens) {
    make_lines(templ, edges);
    // An overlay plans direct tables only while the shared caches are empty (a file's first
    // batch): after it, it holds the few keys they lack, and tables made for those batch after
    // batch cost more than the probes they save (no values to plan with: hash mode).
    const std::vector<std::uint32_t> none;
    const std::vector<std::uint32_t>& plan = shared && !shared->columns.empty() ? none : values;
    for (LineCache& cache : unigrams) cache.prepare(plan, count_states, tokens, kept);
    for (LineCache& cache : bigrams) cache.prepare(plan, count_edges, tokens, kept);
  }
  void make_lines(const FeatureTemplate& templ, bool edges) {
    if (!unigrams.empty() || !bigrams.empty()) return;
    for (const auto& line : templ.unigrams()) unigrams.emplace_back(line);
    if (edges)
      for (const auto& line : templ.edge_bigrams()) bigrams.emplace_back(line);
  }
  /// Line i: the U lines, then the B lines.
  std::size_t lines() const { return unigrams.size() + bigrams.size(); }
  LineCache& line(std::size_t i) { return i < unigrams.size() ? unigrams[i] : bigrams[i - unigrams.size()]; }
  const LineCache& line(std::size_t i) const {
    return i < unigrams.size() ? unigrams[i] : bigrams[i - unigrams.size()];
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
  // An overlay (caches.shared) codes a value the shared caches hold as they do, another from
  // base[col] on: the codes of a column stay dense, for the direct tables.
  const std::size_t shared = caches.shared ? std::min(F, caches.shared->columns.size()) : 0;
  caches.base.assign(F, 0);
  for (std::size_t col = 0; col < shared; ++col) caches.base[col] = caches.shared->columns[col].size();
  for (std::size_t k = 0; k < N; ++k) {
    c.labels.push_back(label(k));
    for (std::size_t col = 0; col < F; ++col) {
      const std::string_view s = tokens.cell(k, col);
      const std::size_t h = std::hash<std::string_view>{}(s);
      const std::uint32_t known = col < shared ? caches.shared->columns[col].find(s, h) : kFree;
      codes[k * F + col] = known != kFree ? known : caches.base[col] + caches.columns[col].code(s, h);
    }
  }
  std::vector<std::uint32_t> column_values(F);
  for (std::size_t col = 0; col < F; ++col) column_values[col] = caches.base[col] + caches.columns[col].size();
  return column_values;
}

/// Tokens expanded line by line at a time (LinePass): a block's ids stay in the CPU caches. A
/// line's row of a block's ids is kBlockRow long, not a power of two: the rows read token by token
/// would otherwise fall into the same sets of the L1 cache.
constexpr std::size_t kExpandBlock = 2048;
constexpr std::size_t kBlockRow = kExpandBlock + 16;

/// The ids of a set of template lines (the U lines into the state sink, or the macro B lines into
/// the edge sink) for a block of tokens, line after line: one line's table stays in the CPU
/// caches over the block, and a group of tokens' entries is requested before any is probed.
/// The strings of keys met for the first time (misses) are then built and looked up in text
/// order — token after token, line after line within a token — as a token-by-token loop does:
/// the sink gives a new string its id at its first appearance, so the ids are that loop's.
template <class Tokens, class Sink>
class LinePass {
 public:
  /// `sentence_of[k]` is token k's sentence; a line has an item at position t ≥ `first` only.
  /// `shared`: null, or the shared caches' lines (`lines` their overlay: its codes of column col
  /// are [base[col], values[col])), looked up first.
  LinePass(const Tokens& tokens, const std::vector<std::uint32_t>& codes, std::size_t F,
           const std::vector<std::uint32_t>& sentence_of, std::vector<LineCache>& lines, Sink& sink,
           std::size_t first, const std::vector<LineCache>* shared, const std::vector<std::uint32_t>& base,
           const std::vector<std::uint32_t>& values)
      : tokens_(tokens), codes_(codes), F_(F), sentence_of_(sentence_of), lines_(lines), sink_(sink), first_(first),
        shared_(shared && shared->size() == lines.size() ? shared : nullptr), base_(&base), values_(values),
        pending_(lines.size()) {}

  /// ids[i·kBlockRow + k − k0] for every line i and token k in [k0, k0 + B): the id, or kNone where the
  /// token has no item of the line (t < first, or an unknown string).
  void run(std::size_t k0, std::size_t B, std::uint32_t* ids) {
    for (std::size_t i = 0; i < lines_.size(); ++i) probe(i, k0, B, ids + i * kBlockRow);
    if (!misses_.empty()) resolve(k0, B, ids);
  }

 private:
  struct Miss {
    std::size_t k;
    std::size_t line;
  };

  /// Token k's key for `cache` into key[kMaxKeyed] (unused entries 0); false: no item there.
  bool key(const LineCache& cache, std::size_t k, std::uint32_t* key) const {
    const std::size_t s = sentence_of_[k], base = s == 0 ? 0 : tokens_.end(s - 1);
    const long T = long(tokens_.end(s) - base), t = long(k - base);
    if (t < long(first_)) return false;
    key[0] = key[1] = key[2] = 0;
    const auto& m = cache.macros();
    for (std::size_t j = 0; j < m.size() && j < kMaxKeyed; ++j) {
      const long idx = t + m[j].row;
      key[j] = idx < 0    ? kBefore + std::uint32_t(-idx)
               : idx >= T ? kAfter + std::uint32_t(idx - T + 1)
                          : codes_[(base + std::size_t(idx)) * F_ + std::size_t(m[j].col)];
    }
    return true;
  }

  /// The keys of n tokens from k, their entries requested (probe asks for a group's while it
  /// probes the previous group's: the loads of the word lines' tables, beyond the CPU caches,
  /// overlap each other and the probing).
  static constexpr std::size_t kGroup = 16;
  struct Group {
    std::size_t n = 0;
    std::uint32_t keys[kGroup][kMaxKeyed];
    std::size_t at[kGroup];
    bool item[kGroup];
    bool shared[kGroup];  // looked up in the shared line first (`at` is its place there)
  };
  /// Whether `key` has a code of the overlay's values: from first[j] on (boundary codes aside).
  static bool overlay_key(const std::uint32_t* key, const std::uint32_t* first) {
    return (key[0] >= first[0] && key[0] < kBefore) || (key[1] >= first[1] && key[1] < kBefore) ||
           (key[2] >= first[2] && key[2] < kBefore);
  }
  /// Asks for the entries of n tokens' keys from k: in the shared line where kShared (of a keyed
  /// line; `first`: null, or the overlay's first code of each macro's column, whose keys are
  /// not looked up there), else in the line.
  template <bool kShared>
  void ask(const LineCache& cache, const LineCache* shared, const std::uint32_t* first, std::size_t k, std::size_t n,
           Group& group) const {
    group.n = n;
    const bool keyed = cache.keyed();
    for (std::size_t q = 0; q < n; ++q) {
      group.item[q] = key(cache, k + q, group.keys[q]);
      if (!group.item[q] || !keyed) continue;
      const std::uint32_t* key = group.keys[q];
      group.shared[q] = kShared && !(first && overlay_key(key, first));
      const LineCache& table = kShared && group.shared[q] ? *shared : cache;
      group.at[q] = table.place(key);
      table.prefetch(group.at[q]);
    }
  }

  /// Line i over the block into row: the id, kNone, or LineCache::kPending for a key met in this
  /// block for the first time (a miss, recorded; a line without a cache misses at every item).
  void probe(std::size_t i, std::size_t k0, std::size_t B, std::uint32_t* row) {
    const LineCache& cache = lines_[i];
    const LineCache* shared = shared_ && cache.keyed() ? &(*shared_)[i] : nullptr;
    // A key with a code of the overlay's values is not in the shared line: looked up there, it
    // finds no slot of a hash line, and kUnset in a direct table whose digits reach its codes
    // (the table has room for them: the usual case); only a direct table the overlay's values
    // outgrew needs the keys told apart.
    std::uint32_t first[kMaxKeyed] = {kBefore, kBefore, kBefore};
    const bool tell = shared && shared->direct() && !shared->fits(values_);
    for (std::size_t j = 0; tell && j < cache.macros().size(); ++j)
      first[j] = (*base_)[std::size_t(cache.macros()[j].col)];
    if (shared) scan<true>(i, k0, B, row, shared, tell ? first : nullptr);
    else scan<false>(i, k0, B, row, nullptr, nullptr);
  }
  /// probe's loop, the shared line's look-ups compiled in only where there is one.
  template <bool kShared>
  void scan(std::size_t i, std::size_t k0, std::size_t B, std::uint32_t* row, const LineCache* shared,
            const std::uint32_t* first) {
    const LineCache& cache = lines_[i];
    const bool counting = sink_.counting();
    Group groups[2];
    if (B > 0) ask<kShared>(cache, shared, first, k0, std::min(kGroup, B), groups[0]);
    for (std::size_t g = 0, b = 0; g < B; g += kGroup, b ^= 1) {
      if (g + kGroup < B)
        ask<kShared>(cache, shared, first, k0 + g + kGroup, std::min(kGroup, B - g - kGroup), groups[b ^ 1]);
      const Group& now = groups[b];
      for (std::size_t q = 0; q < now.n; ++q) {
        std::uint32_t& out = row[g + q];
        if (!now.item[q]) {
          out = Dictionary::kNone;
          continue;
        }
        std::size_t at = now.at[q];
        if (kShared && now.shared[q]) {
          if ((out = shared->get(now.keys[q], at)) != LineCache::kUnset) {
            if (counting && out != Dictionary::kNone) sink_.count(out, 1);  // (the sink counts the shared ids)
            continue;
          }
          at = cache.place(now.keys[q]);  // (the line's own place)
        }
        own(i, k0 + g + q, now.keys[q], at, out);
      }
    }
  }

  /// Line i's own entry for token k's `key` (at its place `at`) into out: its id, or kPending for
  /// a key met for the first time (a miss, recorded; a line without a cache misses at every item).
  void own(std::size_t i, std::size_t k, const std::uint32_t* key, std::size_t at, std::uint32_t& out) {
    LineCache& cache = lines_[i];
    bool miss = !cache.keyed();
    std::uint32_t* id = &out;
    if (cache.direct()) {
      id = &cache.direct_at(at);
      miss = *id == LineCache::kUnset;
    } else if (cache.keyed()) {
      id = &cache.find_or_insert(key, at, miss);
    }
    if (miss) {
      *id = LineCache::kPending;
      misses_.push_back({k, i});
      pending_[i] = true;
    }
    out = *id;
  }

  /// The misses' strings looked up in text order, then every kPending of the block replaced.
  void resolve(std::size_t k0, std::size_t B, std::uint32_t* ids) {
    std::sort(misses_.begin(), misses_.end(),
              [](const Miss& a, const Miss& b) { return a.k != b.k ? a.k < b.k : a.line < b.line; });
    std::uint32_t k[kMaxKeyed];
    for (const Miss& m : misses_) {
      LineCache& cache = lines_[m.line];
      const std::size_t s = sentence_of_[m.k];
      tokens_.expand(cache.line(), s, m.k - (s == 0 ? 0 : tokens_.end(s - 1)), buf_);
      std::uint32_t& out = ids[m.line * kBlockRow + m.k - k0];
      if (!cache.keyed()) {  // every item looked up (and counted) in turn
        out = sink_.lookup(buf_);
        if (out != Dictionary::kNone && sink_.counting()) sink_.count(out, 1);
        continue;
      }
      key(cache, m.k, k);
      out = cache.find(k) = sink_.lookup(buf_);
    }
    misses_.clear();
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      if (!pending_[i]) continue;
      pending_[i] = false;
      std::uint32_t* row = ids + i * kBlockRow;
      for (std::size_t q = 0; q < B; ++q)
        if (row[q] == LineCache::kPending && key(lines_[i], k0 + q, k)) row[q] = lines_[i].find(k);
    }
  }

  const Tokens& tokens_;
  const std::vector<std::uint32_t>& codes_;
  std::size_t F_;
  const std::vector<std::uint32_t>& sentence_of_;
  std::vector<LineCache>& lines_;
  Sink& sink_;
  std::size_t first_;
  const std::vector<LineCache>* shared_;
  const std::vector<std::uint32_t>* base_;
  const std::vector<std::uint32_t>& values_;  // [F] the overlay's column values (the shared's, then its own)
  std::vector<Miss> misses_;
  std::vector<bool> pending_;  // [line] some entry of the block is kPending
  std::string buf_;            // one attribute string, reused
};

/// Expands the templates of every token of `tokens` into `c`:
///   c.labels        [N]       label(k) for token k — called first for every token (it validates it)
///   c.state_*       CSR [N]   one item per U line per token (unknown strings skipped)
///   c.edge_*        CSR [N]   one item per macro B line per token t ≥ 1 (none without `edges`:
///                             a Maxent model's B lines are not expanded)
///   c.sentence_offsets, c.source_lines
/// Tokens (TextTokens, ChunkTokens): sentences(), end(s) (one past sentence s's last token,
/// tokens numbered from 0), line(s), cell(k, col), expand(line, s, t, out). A Sink: lookup(string)
/// (the id, kNone for an unknown string), counting() and count(id, n) (min_freq's occurrences).
/// `caches`: made afresh, or kept from the previous call (ExpandCaches).
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
  std::vector<std::uint32_t> sentence_of(N);
  for (std::size_t s = 0, k = 0; s < S; ++s)
    for (; k < tokens.end(s); ++k) sentence_of[k] = std::uint32_t(s);
  c.state_offsets.reserve(N + 1);  // (the first batch's sizes: a streamed compile's later batches
  c.edge_offsets.reserve(N + 1);   // grow the arrays by doubling, or by reserve_for)
  c.state_ids.reserve(N * unigrams.size());
  c.edge_ids.reserve(N * bigrams.size());
  c.source_lines.reserve(S);
  // (Shared caches without values: a file's first batch, nothing to look up there.)
  const ExpandCaches* shared = caches.shared && !caches.shared->columns.empty() ? caches.shared : nullptr;
  LinePass<Tokens, Sink> state_pass(tokens, codes, F, sentence_of, unigrams, state, 0,
                                    shared ? &shared->unigrams : nullptr, caches.base, column_values);
  LinePass<Tokens, Sink> edge_pass(tokens, codes, F, sentence_of, bigrams, edge, 1,
                                   shared ? &shared->bigrams : nullptr, caches.base, column_values);
  std::vector<std::uint32_t> state_ids(kBlockRow * unigrams.size()), edge_ids(kBlockRow * bigrams.size());
  for (std::size_t k0 = 0, s = 0; k0 < N; k0 += kExpandBlock) {
    const std::size_t B = std::min(kExpandBlock, N - k0);
    state_pass.run(k0, B, state_ids.data());
    edge_pass.run(k0, B, edge_ids.data());
    for (std::size_t q = 0; q < B; ++q) {
      const std::size_t k = k0 + q;
      if (k == (s == 0 ? 0 : tokens.end(s - 1))) c.source_lines.push_back(tokens.line(s));
      for (std::size_t i = 0; i < unigrams.size(); ++i)
        if (state_ids[i * kBlockRow + q] != Dictionary::kNone) c.state_ids.push_back(state_ids[i * kBlockRow + q]);
      c.state_offsets.push_back(c.state_ids.size());  // binary: no values (Corpus::state_value)
      for (std::size_t i = 0; i < bigrams.size(); ++i)
        if (edge_ids[i * kBlockRow + q] != Dictionary::kNone) c.edge_ids.push_back(edge_ids[i * kBlockRow + q]);
      c.edge_offsets.push_back(c.edge_ids.size());
      if (k + 1 == tokens.end(s)) c.sentence_offsets.push_back(first + tokens.end(s++));
    }
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
