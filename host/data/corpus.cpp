// crfx — the data part (include/crfx/internal/corpus.hpp): Dictionary (string ↔ id, open addressing) and the
// Corpus checks.
#include <algorithm>
#include <functional>
#include <utility>
#include <stdexcept>
#include <thread>

#include "crfx/errors.hpp"
#include "crfx/internal/corpus.hpp"

namespace crfx {

std::size_t Dictionary::probe(std::string_view s, std::size_t h) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const std::uint32_t id = slots_[i];
    if (id == kNone || (hashes_[id] == h && strings_[id] == s)) return i;
  }
}

void Dictionary::rehash(std::size_t slots) {
  slots_.assign(slots, kNone);
  const std::size_t mask = slots - 1;
  for (std::uint32_t id = 0; id < strings_.size(); ++id) {
    std::size_t i = hashes_[id] & mask;
    while (slots_[i] != kNone) i = (i + 1) & mask;
    slots_[i] = id;
  }
}

namespace {
/// Table size for n strings: a power of two, at least 16, more than twice n.
std::size_t table_for(std::size_t n) {
  std::size_t slots = 16;
  while (slots < 2 * n + 2) slots *= 2;
  return slots;
}
}  // namespace

std::size_t Dictionary::bytes() const {
  std::size_t b = strings_.capacity() * sizeof(std::string) + hashes_.capacity() * sizeof(std::size_t) +
                  slots_.capacity() * sizeof(std::uint32_t);
  const std::size_t inline_chars = std::string().capacity();  // the small-string buffer
  for (const std::string& s : strings_)
    if (s.capacity() > inline_chars) b += s.capacity() + 1;
  return b;
}

std::size_t Dictionary::growth_bytes(std::size_t more) const {
  const std::size_t n = strings_.size() + more;
  std::size_t b = 0;
  if (n > strings_.capacity())  // std::vector doubles (at least)
    b += std::max(n, 2 * strings_.capacity()) * (sizeof(std::string) + sizeof(std::size_t));
  if (2 * n > slots_.size()) b += table_for(n) * sizeof(std::uint32_t);  // insert()'s rehash test
  return b;
}

void Dictionary::reserve_slots(std::size_t n) {
  const std::size_t slots = table_for(n);
  if (slots > slots_.size()) rehash(slots);
}

void Dictionary::reserve(std::size_t n) {
  strings_.reserve(n);
  hashes_.reserve(n);
  reserve_slots(n);
}

std::size_t Dictionary::assign(std::vector<std::string> strings) {
  if (strings.size() >= kNone) throw std::length_error("dictionary: more than 2^32 - 2 strings");
  strings_ = std::move(strings);
  const std::size_t n = strings_.size();
  hashes_.resize(n);
  for (std::size_t id = 0; id < n; ++id) hashes_[id] = std::hash<std::string>{}(strings_[id]);
  slots_.assign(table_for(n), kNone);
  const std::size_t mask = slots_.size() - 1;
  constexpr std::size_t kAhead = 16;  // the table is far larger than the caches: overlap misses
  for (std::size_t id = 0; id < n; ++id) {
    if (id + kAhead < n) __builtin_prefetch(&slots_[hashes_[id + kAhead] & mask]);
    const std::size_t h = hashes_[id];
    std::size_t i = h & mask;
    for (; slots_[i] != kNone; i = (i + 1) & mask) {
      const std::uint32_t other = slots_[i];
      if (hashes_[other] == h && strings_[other] == strings_[id]) {
        strings_.clear();
        hashes_.clear();
        slots_.clear();
        return id;
      }
    }
    slots_[i] = static_cast<std::uint32_t>(id);
  }
  return kNoDuplicate;
}

// std::hash of a string_view is that of the string with its characters (C++17): the hashes of
// assign() and of a model's strings.
std::uint32_t Dictionary::add(std::string_view s) { return add(s, std::hash<std::string_view>{}(s)); }

std::uint32_t Dictionary::add(std::string_view s, std::size_t h) { return insert(s, h); }

template <class String>
std::uint32_t Dictionary::insert(String&& s, std::size_t h) {
  if (slots_.empty()) rehash(table_for(0));
  std::size_t i = probe(s, h);
  if (slots_[i] != kNone) return slots_[i];
  if (frozen_) return kNone;
  // (kNone - 1 and kNone - 2 are never ids either: the compile's caches mark entries with them)
  if (strings_.size() >= kNone - 2) throw std::length_error("dictionary: more than 2^32 - 3 strings");
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.emplace_back(std::forward<String>(s));
  hashes_.push_back(h);
  if (2 * strings_.size() > slots_.size()) {
    rehash(2 * slots_.size());  // keep the table at most half full
  } else {
    slots_[i] = id;
  }
  return id;
}

std::uint32_t Dictionary::find(std::string_view s) const { return find(s, std::hash<std::string_view>{}(s)); }

std::uint32_t Dictionary::find(std::string_view s, std::size_t h) const {
  if (slots_.empty()) return kNone;
  return slots_[probe(s, h)];
}

void Dictionary::find_many(const std::string_view* s, const std::size_t* h, std::size_t n,
                           std::uint32_t* ids) const {
  if (slots_.empty()) {
    std::fill(ids, ids + n, kNone);
    return;
  }
  // Look-up i + kSlot's slot is fetched, i + kEntry's entry (its hash and string), i + kText's
  // characters, then look-up i made: each stage finds in the cache what the one before fetched.
  constexpr std::size_t kSlot = 24, kEntry = 12, kText = 6;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kSlot < n) __builtin_prefetch(&slots_[h[i + kSlot] & mask]);
    if (i + kEntry < n) {
      const std::uint32_t id = slots_[h[i + kEntry] & mask];
      if (id != kNone) __builtin_prefetch(&hashes_[id]), __builtin_prefetch(&strings_[id]);
    }
    if (i + kText < n) {
      const std::uint32_t id = slots_[h[i + kText] & mask];
      if (id != kNone) __builtin_prefetch(strings_[id].data());
    }
    ids[i] = slots_[probe(s[i], h[i])];
  }
}

std::vector<std::uint32_t> Dictionary::absorb(Dictionary&& other) {
  const std::size_t n = other.size();
  std::vector<std::uint32_t> ids(n);
  // The table made large enough for all of other's strings first (insert's own test would rehash
  // it as they come), so that the slots fetched ahead stay where they are: look-up i + kSlot's
  // slot, i + kEntry's entry (its hash and string), then look-up i (a training compile's merge,
  // on one thread while the others wait: with a shard's ~10^5 new strings each look-up waited
  // for memory's round trips, as find_many's would). Only the table: reserve()'s exact vectors
  // would grow by a batch's strings at a time instead of doubling.
  reserve_slots(size() + n);
  constexpr std::size_t kSlot = 16, kEntry = 8;
  const std::size_t mask = slots_.size() - 1;
  const std::size_t* h = other.hashes_.data();
  for (std::size_t id = 0; id < n; ++id) {
    if (id + kSlot < n) __builtin_prefetch(&slots_[h[id + kSlot] & mask]);
    if (id + kEntry < n) {
      const std::uint32_t at = slots_[h[id + kEntry] & mask];
      if (at != kNone) __builtin_prefetch(&hashes_[at]), __builtin_prefetch(&strings_[at]);
    }
    ids[id] = insert(std::move(other.strings_[id]), h[id]);
  }
  other = Dictionary();
  return ids;
}

std::vector<std::uint32_t> Dictionary::compact(const std::vector<bool>& keep) {
  std::vector<std::uint32_t> remap(strings_.size(), kNone);
  std::vector<std::string> kept;
  std::vector<std::size_t> kept_hashes;
  for (std::size_t i = 0; i < strings_.size(); ++i) {
    if (i < keep.size() && keep[i]) {
      remap[i] = static_cast<std::uint32_t>(kept.size());
      kept.push_back(std::move(strings_[i]));
      kept_hashes.push_back(hashes_[i]);
    }
  }
  strings_ = std::move(kept);
  hashes_ = std::move(kept_hashes);
  rehash(table_for(strings_.size()));
  return remap;
}

std::size_t Corpus::max_length() const {
  std::size_t m = 0;
  for (std::size_t s = 0; s < num_sentences(); ++s) m = std::max(m, length(s));
  return m;
}

void Corpus::check_values() const {
  if (!state_values.empty() && state_values.size() != state_ids.size())
    throw Error("internal: corpus has " + std::to_string(state_values.size()) + " state values for " +
                std::to_string(state_ids.size()) + " items");
  if (!edge_values.empty() && edge_values.size() != edge_ids.size())
    throw Error("internal: corpus has " + std::to_string(edge_values.size()) + " edge values for " +
                std::to_string(edge_ids.size()) + " items");
}

bool Corpus::labeled() const {
  return std::none_of(labels.begin(), labels.end(), [](std::uint32_t y) { return y == kNoLabel; });
}

void Dims::check_layout() const {
  if (!layout) return;
  const WeightLayout& w = *layout;
  const std::size_t groups = std::size_t(A) + 1 + E;
  if (w.offsets.size() != groups + 1 || w.offsets.front() != 0 || w.offsets.back() != w.slots.size())
    throw Error("weight layout: " + std::to_string(w.offsets.size()) + " row offsets for " +
                std::to_string(groups) + " groups, or offsets that do not span the " +
                std::to_string(w.slots.size()) + " weights");
  for (std::size_t g = 0; g < groups; ++g) {
    if (w.offsets[g + 1] < w.offsets[g]) throw Error("weight layout: row " + std::to_string(g) + " ends before it begins");
    const std::uint64_t limit = g < A ? std::uint64_t(L) : std::uint64_t(L) * L;
    for (std::size_t k = w.offsets[g]; k < w.offsets[g + 1]; ++k)
      if (w.slots[k] >= limit || (k > w.offsets[g] && w.slots[k] <= w.slots[k - 1]))
        throw Error("weight layout: row " + std::to_string(g) + " lists slot " + std::to_string(w.slots[k]) +
                    " out of order or beyond " + std::to_string(limit - 1));
  }
  if (!transitions && w.offsets[A + 1] != w.offsets[A])
    throw Error("weight layout: transition weights in a model without transitions");
}

namespace {
/// The first tokens of `parts` ranges of tokens [0, N) with about as many items each (token t's
/// items are tok_off[t] … tok_off[t + 1]), and N last.
std::vector<std::size_t> item_parts(const std::vector<std::size_t>& tok_off, std::size_t parts) {
  const std::size_t N = tok_off.size() - 1, items = tok_off[N];
  std::vector<std::size_t> first(parts + 1, N);  // part p: tokens first[p] … first[p + 1]
  for (std::size_t p = 0; p < parts; ++p)
    first[p] = std::size_t(std::lower_bound(tok_off.begin(), tok_off.end() - 1, items * p / parts) - tok_off.begin());
  return first;
}

/// fn(p) for each p in [0, parts), each on its own thread but the first.
template <class Fn>
void on_parts(std::size_t parts, Fn&& fn) {
  std::vector<std::thread> helpers;
  for (std::size_t p = 1; p < parts; ++p) helpers.emplace_back(fn, p);
  fn(std::size_t(0));
  for (std::thread& t : helpers) t.join();
}

/// Appends to `layout` the rows of `n` ids: row r lists, ascending, the distinct slots (< width)
/// that the items of id r contribute; slot_of(t) is the slot of an item of token t (the labels of
/// t and of its predecessor). One pass over the items into a bitset of `width` bits an id, then
/// each row's bits in order — where the bitset takes no more than the items grouped by id would
/// (always for state rows of L ≤ 128 labels); else the items grouped by id (transpose_items) and
/// each id's slots sorted. Why: CoNLL-2000 ×10's 40 M items grouped and sorted took ~1 s on one
/// thread after the reading (as long as the reading itself); the bitset's pass, a tenth of it —
/// and on `threads` threads a part of the tokens each, into bitsets of their own (at most 64 MB
/// in all) or'ed together by ranges of words: one thread's 0.05 s was a third of the time from the
/// file's opening to the first pass on 16.
template <class SlotOf>
void append_observed_rows(WeightLayout& layout, std::size_t n, std::size_t width,
                          const std::vector<std::size_t>& tok_offsets, const std::vector<std::uint32_t>& ids,
                          SlotOf slot_of, unsigned threads) {
  const std::size_t words = (width + 63) / 64, N = tok_offsets.size() - 1;
  if (n * words <= ids.size() / 2 + 2 * n) {  // the grouping's 4 bytes an item and 16 an id, at most
    const std::size_t parts = std::max<std::size_t>(
        1, std::min<std::size_t>({threads, ids.size() >> 18, (std::size_t(64) << 20) / (n * words * 8 + 1)}));
    const std::vector<std::size_t> first = item_parts(tok_offsets, parts);
    std::vector<std::vector<std::uint64_t>> part_bits(parts);
    on_parts(parts, [&](std::size_t p) {
      std::vector<std::uint64_t>& bits = part_bits[p];
      bits.assign(n * words, 0);
      for (std::size_t t = first[p]; t < first[p + 1]; ++t) {
        if (tok_offsets[t] == tok_offsets[t + 1]) continue;
        const std::uint32_t slot = slot_of(t);
        for (std::size_t k = tok_offsets[t]; k < tok_offsets[t + 1]; ++k)
          bits[std::size_t(ids[k]) * words + slot / 64] |= std::uint64_t(1) << (slot % 64);
      }
    });
    std::vector<std::uint64_t>& bits = part_bits[0];
    on_parts(parts, [&](std::size_t p) {  // words [n·words·p / parts, …) of every part into the first's
      for (std::size_t i = n * words * p / parts; i < n * words * (p + 1) / parts; ++i)
        for (std::size_t q = 1; q < parts; ++q) bits[i] |= part_bits[q][i];
    });
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t w = 0; w < words; ++w)
        for (std::uint64_t b = bits[r * words + w]; b; b &= b - 1)
          layout.slots.push_back(std::uint32_t(w * 64 + std::size_t(__builtin_ctzll(b))));
      layout.offsets.push_back(layout.slots.size());
    }
    return;
  }
  const ItemTranspose g = transpose_items(n, tok_offsets, ids, {}, nullptr, 1);
  std::vector<std::uint32_t> row;
  for (std::size_t r = 0; r < n; ++r) {
    row.clear();
    for (std::size_t k = g.off[r]; k < g.off[r + 1]; ++k) row.push_back(slot_of(g.tok[k]));
    std::sort(row.begin(), row.end());
    layout.slots.insert(layout.slots.end(), row.begin(), std::unique(row.begin(), row.end()));
    layout.offsets.push_back(layout.slots.size());
  }
}
}  // namespace

WeightLayout observed_layout(const Corpus& c, const Dims& dims, bool all_states, bool all_transitions,
                             unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  if (!c.labeled()) throw Error("internal: the observed-pair layout needs every training label");
  const std::size_t L = dims.L;
  for (auto y : c.labels)
    if (y >= L) throw Error("internal: corpus label beyond the model");
  WeightLayout layout;
  layout.offsets.reserve(std::size_t(dims.A) + dims.E + 2);
  layout.offsets.push_back(0);
  // Every slot of `n` rows of `width` slots.
  auto full_rows = [&](std::size_t n, std::size_t width) {
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t j = 0; j < width; ++j) layout.slots.push_back(std::uint32_t(j));
      layout.offsets.push_back(layout.slots.size());
    }
  };
  if (all_states) {
    full_rows(dims.A, L);
  } else {
    append_observed_rows(
        layout, dims.A, L, c.state_offsets, c.state_ids, [&](std::size_t t) { return c.labels[t]; }, threads);
  }
  // Transitions: the gold bigrams, ascending y'·L + y.
  std::vector<bool> seen(dims.transitions ? L * L : 0, all_transitions);
  if (dims.transitions && !all_transitions)
    for (std::size_t s = 0; s < c.num_sentences(); ++s)
      for (std::size_t t = c.sentence_offsets[s] + 1; t < c.sentence_offsets[s + 1]; ++t)
        seen[std::size_t(c.labels[t - 1]) * L + c.labels[t]] = true;
  for (std::size_t j = 0; j < seen.size(); ++j)
    if (seen[j]) layout.slots.push_back(std::uint32_t(j));
  layout.offsets.push_back(layout.slots.size());
  if (dims.E > 0 && all_transitions) {
    full_rows(dims.E, L * L);
  } else if (dims.E > 0) {
    if (c.edge_offsets.size() != c.state_offsets.size()) throw Error("internal: corpus without edge items");
    for (std::size_t s = 0; s < c.num_sentences(); ++s)
      if (c.length(s) && c.edge_offsets[c.sentence_offsets[s]] != c.edge_offsets[c.sentence_offsets[s] + 1])
        throw Error("internal: edge items at a sentence's first token");
    append_observed_rows(
        layout, dims.E, L * L, c.edge_offsets, c.edge_ids,
        [&](std::size_t t) { return std::uint32_t(std::size_t(c.labels[t - 1]) * L + c.labels[t]); }, threads);
  }
  return layout;
}

ItemTranspose transpose_items(std::size_t n, const std::vector<std::size_t>& tok_off,
                              const std::vector<std::uint32_t>& ids, const std::vector<double>& vals,
                              const std::vector<std::uint8_t>* skip, unsigned threads) {
  const std::size_t N = tok_off.size() - 1, items = tok_off[N];
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // Parts of ~equal items, at least 2^16 each, their counts [parts][n] within the items' own size.
  std::size_t parts = std::min<std::size_t>({threads, items / (std::size_t(1) << 16) + 1,
                                            std::max<std::size_t>(1, std::max(items, std::size_t(1) << 23) / (n + 1))});
  const std::vector<std::size_t> first = item_parts(tok_off, parts);  // part p: tokens first[p] … first[p + 1]
  auto run = [&](auto&& fn) { on_parts(parts, fn); };
  auto kept = [&](std::size_t t) { return !skip || !(*skip)[t]; };
  std::vector<std::size_t> at(parts * n, 0);  // counts, then each part's next position
  run([&](std::size_t p) {
    std::size_t* c = at.data() + p * n;
    for (std::size_t t = first[p]; t < first[p + 1]; ++t)
      if (kept(t))
        for (std::size_t k = tok_off[t]; k < tok_off[t + 1]; ++k) ++c[ids[k]];
  });
  ItemTranspose r;
  r.off.assign(n + 1, 0);
  for (std::size_t a = 0; a < n; ++a) {
    std::size_t next = r.off[a];
    for (std::size_t p = 0; p < parts; ++p) std::swap(next, at[p * n + a]), next += at[p * n + a];
    r.off[a + 1] = next;
  }
  r.tok.resize(r.off[n]);
  r.val.resize(vals.empty() ? 0 : r.off[n]);
  run([&](std::size_t p) {
    std::size_t* c = at.data() + p * n;
    for (std::size_t t = first[p]; t < first[p + 1]; ++t)
      if (kept(t))
        for (std::size_t k = tok_off[t]; k < tok_off[t + 1]; ++k) {
          const std::size_t pos = c[ids[k]]++;
          r.tok[pos] = std::uint32_t(t);
          if (!vals.empty()) r.val[pos] = vals[k];
        }
  });
  return r;
}

}  // namespace crfx
