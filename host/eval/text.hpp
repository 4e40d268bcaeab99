// crfx — printf into a std::string, for the evaluation reports (host/eval only).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace crfx::eval_detail {

inline std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? std::size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

}  // namespace crfx::eval_detail
