// crfx — fast number formatting for the text crfx writes (probabilities with six decimals).
// See host/io/fixed_format.cpp.
#pragma once

#include <cstddef>
#include <string>

namespace crfx {

/// Writes v at dst exactly as std::snprintf(dst, n, "%.6f", v) would (without the terminating
/// NUL) and returns the end; fast for v ∈ [0, 1] (`crfx tag --marginals` prints L probabilities
/// per token: snprintf was a quarter of such a run). dst needs room for kFixed6MaxChars.
/// See host/io/fixed_format.cpp.
char* write_fixed6(char* dst, double v);
/// "%.6f" of −DBL_MAX is 317 characters.
constexpr std::size_t kFixed6MaxChars = 320;
/// write_fixed6 appended to `out`.
void append_fixed6(std::string& out, double v);

}  // namespace crfx
