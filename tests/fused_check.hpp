// The fused vector operations of the quasi-Newton trainers against the separate calls they
// replace, bit for bit, on any backend: shared by the CPU tests (test_backend.cpp) and the GPU
// tests (gpu/test_cuda_backend.cpp).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "random_problem.hpp"

namespace crfx::test {

inline void check_fused_equals_unfused(Backend& b, std::size_t n) {
  const std::vector<double> x = random_weights(n, 1.0, 41), y = random_weights(n, 1.0, 42),
                            z = random_weights(n, 1.0, 43);
  auto vec = [&](const std::vector<double>& h) { return to_backend(b, h); };
  const double a = -0.37;

  {  // scaled_copy = copy, scale
    auto X = vec(x), Y1 = vec(y), Y2 = vec(z);
    b.scaled_copy(a, *X, *Y1);
    b.copy(*X, *Y2);
    b.scale(a, *Y2);
    EXPECT_EQ(to_host(b, *Y1), to_host(b, *Y2)) << "scaled_copy";
  }
  {  // add_scaled = copy, axpy
    auto X = vec(x), D = vec(y), O1 = vec(z), O2 = b.vector(n);
    b.add_scaled(*X, a, *D, *O1);
    b.copy(*X, *O2);
    b.axpy(a, *D, *O2);
    EXPECT_EQ(to_host(b, *O1), to_host(b, *O2)) << "add_scaled";
    EXPECT_THROW(b.add_scaled(*X, a, *D, *D), Error);  // out = d: refused (it would not be copy, axpy)
  }
  {  // axpy_dot = axpy, dot
    auto X = vec(x), Y1 = vec(y), Y2 = vec(y), Z = vec(z);
    const double r1 = b.axpy_dot(a, *X, *Y1, *Z);
    b.axpy(a, *X, *Y2);
    EXPECT_EQ(r1, b.dot(*Z, *Y2)) << "axpy_dot";
    EXPECT_EQ(to_host(b, *Y1), to_host(b, *Y2)) << "axpy_dot";
  }
  {  // scale_dot = scale, dot
    auto X1 = vec(x), X2 = vec(x), Z = vec(z);
    const double r1 = b.scale_dot(a, *X1, *Z);
    b.scale(a, *X2);
    EXPECT_EQ(r1, b.dot(*Z, *X2)) << "scale_dot";
    EXPECT_EQ(to_host(b, *X1), to_host(b, *X2)) << "scale_dot";
  }
  {  // axpy_norm2sq = axpy, norm2sq
    auto X = vec(x), Y1 = vec(y), Y2 = vec(y);
    const double r1 = b.axpy_norm2sq(a, *X, *Y1);
    b.axpy(a, *X, *Y2);
    EXPECT_EQ(r1, b.norm2sq(*X)) << "axpy_norm2sq";
    EXPECT_EQ(to_host(b, *Y1), to_host(b, *Y2)) << "axpy_norm2sq";
  }
  {  // sub_dot = sub, dot
    auto X = vec(x), Y = vec(y), Z = vec(z), O1 = b.vector(n), O2 = b.vector(n);
    const double r1 = b.sub_dot(*X, *Y, *O1, *Z);
    b.sub(*X, *Y, *O2);
    EXPECT_EQ(r1, b.dot(*O2, *Z)) << "sub_dot";
    EXPECT_EQ(to_host(b, *O1), to_host(b, *O2)) << "sub_dot";
  }
  {  // swap exchanges contents
    auto X = vec(x), Y = vec(y);
    b.swap(*X, *Y);
    EXPECT_EQ(to_host(b, *X), y) << "swap";
    EXPECT_EQ(to_host(b, *Y), x) << "swap";
    EXPECT_EQ(X->size(), n);
  }
}

}  // namespace crfx::test
