// crfx — the data part (include/crfx/corpus.hpp): Dictionary (string ↔ id, open addressing) and the
// Corpus checks.
#include <algorithm>
#include <functional>
#include <stdexcept>

#include "crfx/corpus.hpp"
#include "crfx/error.hpp"

namespace crfx {

std::size_t Dictionary::probe(const std::string& s, std::size_t h) const {
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

void Dictionary::reserve(std::size_t n) {
  strings_.reserve(n);
  hashes_.reserve(n);
  const std::size_t slots = table_for(n);
  if (slots > slots_.size()) rehash(slots);
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

std::uint32_t Dictionary::add(const std::string& s) {
  if (slots_.empty()) rehash(table_for(0));
  const std::size_t h = std::hash<std::string>{}(s);
  std::size_t i = probe(s, h);
  if (slots_[i] != kNone) return slots_[i];
  if (frozen_) return kNone;
  if (strings_.size() >= kNone - 1) throw std::length_error("dictionary: more than 2^32 - 2 strings");
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.push_back(s);
  hashes_.push_back(h);
  if (2 * strings_.size() > slots_.size()) {
    rehash(2 * slots_.size());  // keep the table at most half full
  } else {
    slots_[i] = id;
  }
  return id;
}

std::uint32_t Dictionary::find(const std::string& s) const {
  if (slots_.empty()) return kNone;
  return slots_[probe(s, std::hash<std::string>{}(s))];
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

}  // namespace crfx
