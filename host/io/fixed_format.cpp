// crfx — fast "%.6f" for probabilities (crfx/internal/io.hpp). Values in [0, 1] take a fixed-point path
// that writes the same bytes as glibc's correctly rounded snprintf("%.6f"); the rare ones it cannot
// decide (within 1e-9 of a rounding tie in the sixth decimal), and everything outside [0, 1],
// negative zero and NaN, go through snprintf.
#include "crfx/internal/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace crfx {

char* write_fixed6(char* dst, double v) {
  // x = v·10⁶ rounded once: for v ∈ [0, 1], x ≤ 10⁶ < 2²⁰, so |x − v·10⁶| ≤ 2⁻³³, and
  // x − ⌊x⌋ is exact. When that fraction is more than 1e-9 away from ½, the exact v·10⁶ rounds
  // to the same integer as x does, which is what printf's correctly rounded "%.6f" prints.
  if (v >= 0.0 && v <= 1.0 && !std::signbit(v)) {
    const double x = v * 1e6;
    const double whole = std::floor(x), frac = x - whole;
    if (std::fabs(frac - 0.5) > 1e-9) {
      const long n = long(whole) + (frac > 0.5 ? 1 : 0);  // 0 … 1,000,000
      dst[0] = n == 1000000 ? '1' : '0';
      dst[1] = '.';
      long r = n % 1000000;
      for (int i = 7; i >= 2; --i) {
        dst[i] = char('0' + r % 10);
        r /= 10;
      }
      return dst + 8;
    }
  }
  char buf[kFixed6MaxChars + 1];
  const int len = std::snprintf(buf, sizeof buf, "%.6f", v);
  const std::size_t n = len > 0 ? std::min(std::size_t(len), kFixed6MaxChars) : 0;
  std::memcpy(dst, buf, n);
  return dst + n;
}

void append_fixed6(std::string& out, double v) {
  char buf[kFixed6MaxChars];
  out.append(buf, std::size_t(write_fixed6(buf, v) - buf));
}

}  // namespace crfx
