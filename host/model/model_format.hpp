// crfx — the model file's format, shared by its writer (model_io.cpp: save, serialize, dump) and
// its reader (model_read.cpp: load).
//
//   magic "CRFXMODL" | u32 version: 1 (sparse weights, WGHT) or 2 (dense weights, WDNS), both for
//                      the dense layout (every attribute × label pair); 3: a sparse layout (ROWS),
//                      its weights in WGHT or WDNS
//   "HEAD" u64 28 | u32 format (0 conll, 1 crfsuite) | u64 feature_columns | u32 L | u32 A | u32 E
//                 | u32 transitions (0 / 1)
//   "TYPE" u64 4  | u32 model type: 1 maxent (FeatureSpace::type; HEAD then has E = 0 and
//                 transitions 0). Optional, in any version, and written only for a model that is
//                 not a CRF, so a CRF's file is what it was before model types; absent: a CRF.
//                 (A crfx older than model types refuses such a file: "unknown section TYPE".)
//   "TMPL" u64 n  | string: the template source (conll models only)
//   "LABL" u64 n  | u32 count | count × string        (count = L)
//   "ATTR" u64 n  | u32 count | count × string        (count = A)
//   "EDGE" u64 n  | u32 count | count × string        (count = E)
//   "ROWS" u64 n  | u64 groups | groups × u32 row size | u64 count | count × u32 slot   (version 3
//                 only: the layout's rows, corpus.hpp WeightGroups; groups = A + 1 + E, count =
//                 the weights; slots ascending within a row, below L (state rows) or L²)
//   "WGHT" u64 n  | u64 count | count × (u64 index, u64 IEEE-754 bits), index strictly ascending
//   or, in version 2 instead:
//   "WDNS" u64 n  | u64 count | count × u64 IEEE-754 bits: every weight, count = A·L + L² + E·L²
//                 (or the layout's count)
//   "CRC " u64 4  | u32 CRC-32 (zlib) of every byte before "CRC "
// Integers are little-endian; a string is u32 length + bytes. Sections are written in this order;
// a reader accepts them in any order, each at most once. The CRC section must end the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <zlib.h>

namespace crfx::model_file {

constexpr char kMagic[8] = {'C', 'R', 'F', 'X', 'M', 'O', 'D', 'L'};
constexpr std::uint32_t kVersion = 1;       // sparse weights (WGHT)
constexpr std::uint32_t kVersionDense = 2;  // dense weights (WDNS)
constexpr std::uint32_t kVersionLayout = 3;  // a sparse layout (ROWS); WGHT or WDNS
constexpr std::size_t kHeadBytes = 4 + 8 + 4 + 4 + 4 + 4;
constexpr std::size_t kCrcSectionBytes = 4 + 8 + 4;
constexpr std::uint32_t kTypeMaxent = 1;  // TYPE's value for ModelType::maxent

inline std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline double double_of(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

/// CRC-32 (zlib) of [data, data + n), continuing from `crc` (a whole-buffer CRC by default).
inline uLong crc_of(const char* data, std::size_t n, uLong crc = ::crc32(0L, Z_NULL, 0)) {
  while (n > 0) {
    const uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return crc;
}

}  // namespace crfx::model_file
