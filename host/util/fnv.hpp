// crfx — FNV-1a, 64 bits: the checksum of checkpoint files and the fingerprints of training data
// and features (not cryptographic: it tells a different input from the one a checkpoint was made
// with, and a damaged file from a whole one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crfx {

struct Fnv64 {
  std::uint64_t h = 1469598103934665603ull;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  template <class T>
  void add(const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    add(&n, sizeof n);
    add(v.data(), v.size() * sizeof(T));
  }
  void add(const std::string& s) {
    const std::uint64_t n = s.size();
    add(&n, sizeof n);
    add(s.data(), s.size());
  }
};

}  // namespace crfx
