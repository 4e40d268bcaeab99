#include <algorithm>

#include "crfx/corpus.hpp"

namespace crfx {

std::uint32_t Dictionary::add(const std::string& s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  if (frozen_) return kNone;
  auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.push_back(s);
  index_.emplace(s, id);
  return id;
}

std::uint32_t Dictionary::find(const std::string& s) const {
  auto it = index_.find(s);
  return it == index_.end() ? kNone : it->second;
}

std::vector<std::uint32_t> Dictionary::compact(const std::vector<bool>& keep) {
  std::vector<std::uint32_t> remap(strings_.size(), kNone);
  std::vector<std::string> kept;
  index_.clear();
  for (std::size_t i = 0; i < strings_.size(); ++i) {
    if (i < keep.size() && keep[i]) {
      remap[i] = static_cast<std::uint32_t>(kept.size());
      index_.emplace(strings_[i], remap[i]);
      kept.push_back(std::move(strings_[i]));
    }
  }
  strings_ = std::move(kept);
  return remap;
}

std::size_t Corpus::max_length() const {
  std::size_t m = 0;
  for (std::size_t s = 0; s < num_sentences(); ++s) m = std::max(m, length(s));
  return m;
}

bool Corpus::labeled() const {
  return std::none_of(labels.begin(), labels.end(), [](std::uint32_t y) { return y == kNoLabel; });
}

}  // namespace crfx
