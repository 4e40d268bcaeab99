// append_fixed6 against snprintf("%.6f"): the bytes must be the same for every double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "crfx/internal/format.hpp"

namespace crfx {
namespace {

std::string printf6(double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

std::string fixed6(double v) {
  std::string s = "x";  // appends, keeping what is there
  append_fixed6(s, v);
  return s.substr(1);
}

TEST(FixedFormat, SameBytesAsPrintf) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {0.0, -0.0, 1.0, 0.5, 1e-7, 5e-7, 4.999999e-7, 5.000001e-7, 0.9999995, 0.99999949,
                   0.99999951, 1.0000001, -1e-9, 2.5, 123456.789, 1e300, -1e300, inf, -inf,
                   std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                   std::nextafter(1.0, 0.0), std::nextafter(0.0, 1.0), 0.0000125, 0.1234565}) {
    EXPECT_EQ(fixed6(v), printf6(v)) << v;
  }
  EXPECT_EQ(fixed6(std::nan("")), printf6(std::nan("")));
  // Rounding ties of the sixth decimal and their neighbours, where a careless fixed-point
  // rounding would differ from printf's exact one.
  std::size_t checked = 0;
  for (long k = 0; k < 1000000; k += 997) {
    const double tie = (double(k) + 0.5) / 1e6;
    double v = tie;
    for (int step = 0; step < 4; ++step) v = std::nextafter(v, 0.0);
    for (int step = 0; step < 9; ++step, v = std::nextafter(v, 1.0)) {
      ASSERT_EQ(fixed6(v), printf6(v)) << v;
      ++checked;
    }
  }
  // Random probabilities, uniformly and log-uniformly spread.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0), e(-30.0, 0.0);
  for (int i = 0; i < 300000; ++i) {
    const double a = u(rng), b = std::pow(10.0, e(rng));
    ASSERT_EQ(fixed6(a), printf6(a)) << a;
    ASSERT_EQ(fixed6(b), printf6(b)) << b;
    checked += 2;
  }
  EXPECT_GT(checked, 600000u);
}

}  // namespace
}  // namespace crfx
