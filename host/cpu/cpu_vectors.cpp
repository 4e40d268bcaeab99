// crfx — CPU backend: the vector algebra (Backend's vector primitives and the fused quasi-Newton
// forms), in kReduceBlock blocks on the pool, sums in a fixed order whatever the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_sparse.hpp"
#include "cpu/cpu_vector.hpp"
#include "crfx/error.hpp"

namespace crfx {

using cpu_detail::check_same;
using cpu_detail::CpuVector;
using cpu_detail::V;

// ---- vectors -------------------------------------------------------------------------------

namespace {
// Reductions over [b, e) in kLanes interleaved partial sums added in a fixed order: GCC
// vectorises these plain loops (a single running sum is a serial dependency chain, and a
// lambda-generic version was not vectorised), and each result depends only on b and e.
constexpr std::size_t kLanes = 8;

double lanes_total(const double (&acc)[kLanes]) {
  double s = 0;
  for (double a : acc) s += a;
  return s;
}

double dot_range(const double* x, const double* y, std::size_t b, std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += x[i + j] * y[i + j];
  for (; i < e; ++i) acc[0] += x[i] * y[i];
  return lanes_total(acc);
}

// The fused forms (Backend: one pass, bit for bit the separate calls): the element update and
// the dot term in the same loop iteration, in dot_range's lanes.
double axpy_dot_range(double a, const double* x, double* y, const double* z, std::size_t b, std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const double v = y[i + j] + a * x[i + j];
      y[i + j] = v;
      acc[j] += z[i + j] * v;
    }
  for (; i < e; ++i) {
    const double v = y[i] + a * x[i];
    y[i] = v;
    acc[0] += z[i] * v;
  }
  return lanes_total(acc);
}

double scale_dot_range(double a, double* x, const double* z, std::size_t b, std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const double v = x[i + j] * a;
      x[i + j] = v;
      acc[j] += z[i + j] * v;
    }
  for (; i < e; ++i) {
    const double v = x[i] * a;
    x[i] = v;
    acc[0] += z[i] * v;
  }
  return lanes_total(acc);
}

double axpy_norm2sq_range(double a, const double* x, double* y, std::size_t b, std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      y[i + j] += a * x[i + j];
      acc[j] += x[i + j] * x[i + j];
    }
  for (; i < e; ++i) {
    y[i] += a * x[i];
    acc[0] += x[i] * x[i];
  }
  return lanes_total(acc);
}

double sub_dot_range(const double* x, const double* y, double* out, const double* z, std::size_t b,
                     std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const double v = x[i + j] - y[i + j];
      out[i + j] = v;
      acc[j] += v * z[i + j];
    }
  for (; i < e; ++i) {
    const double v = x[i] - y[i];
    out[i] = v;
    acc[0] += v * z[i];
  }
  return lanes_total(acc);
}

double abs_sum_range(const double* x, std::size_t b, std::size_t e) {
  double acc[kLanes] = {};
  std::size_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) acc[j] += std::fabs(x[i + j]);
  for (; i < e; ++i) acc[0] += std::fabs(x[i]);
  return lanes_total(acc);
}

std::size_t nonzero_range(const double* x, std::size_t b, std::size_t e) {
  std::size_t n = 0;
  for (std::size_t i = b; i < e; ++i) n += x[i] != 0.0;
  return n;
}
}  // namespace

VectorPtr CpuBackend::vector(std::size_t n) { return std::make_unique<CpuVector>(n); }

// On every thread, in blocks: a fresh vector's pages are faulted in (and zeroed by the kernel)
// by the thread that first writes them, and for a model's weights that is most of the copy.
void CpuBackend::write(Vector& dst, const double* src) {
  auto& d = V(dst);
  blocks(pool_, d.size(), [&](std::size_t b, std::size_t e) { std::copy(src + b, src + e, &d[0] + b); });
}

void CpuBackend::read(const Vector& src, double* dst) {
  const auto& s = V(src);
  blocks(pool_, s.size(), [&](std::size_t b, std::size_t e) { std::copy(&s[0] + b, &s[0] + e, dst + b); });
}

void CpuBackend::fill(Vector& x, double value) {
  auto& v = V(x);
  blocks(pool_, v.size(), [&](std::size_t b, std::size_t e) { std::fill(&v[0] + b, &v[0] + e, value); });
}

void CpuBackend::copy(const Vector& src, Vector& dst) {
  check_same(src, dst);
  const auto& s = V(src);
  auto& d = V(dst);
  blocks(pool_, s.size(), [&](std::size_t b, std::size_t e) { std::copy(&s[0] + b, &s[0] + e, &d[0] + b); });
}

void CpuBackend::scale(double a, Vector& x) {
  auto& v = V(x);
  blocks(pool_, v.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) v[i] *= a;
  });
}

void CpuBackend::axpy(double a, const Vector& x, Vector& y) {
  check_same(x, y);
  const auto& xv = V(x);
  auto& yv = V(y);
  blocks(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) yv[i] += a * xv[i];
  });
}

void CpuBackend::axpby(double a, const Vector& x, double b_, Vector& y) {
  check_same(x, y);
  const auto& xv = V(x);
  auto& yv = V(y);
  blocks(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) yv[i] = a * xv[i] + b_ * yv[i];
  });
}

void CpuBackend::sub(const Vector& x, const Vector& y, Vector& out) {
  check_same(x, y);
  check_same(x, out);
  const auto& xv = V(x);
  const auto& yv = V(y);
  auto& o = V(out);
  blocks(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) o[i] = xv[i] - yv[i];
  });
}

double CpuBackend::dot(const Vector& x, const Vector& y) {
  check_same(x, y);
  const auto& xv = V(x);
  const auto& yv = V(y);
  return reduce(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    return dot_range(xv.data(), yv.data(), b, e);
  });
}

void CpuBackend::swap(Vector& x, Vector& y) {
  check_same(x, y);
  V(x).swap(V(y));
}

void CpuBackend::scaled_copy(double a, const Vector& x, Vector& y) {
  check_same(x, y);
  const auto& xv = V(x);
  auto& yv = V(y);
  blocks(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) yv[i] = xv[i] * a;  // as copy, then scale
  });
}

void CpuBackend::add_scaled(const Vector& x, double a, const Vector& d, Vector& out) {
  check_same(x, d);
  check_same(x, out);
  if (&out == &d) throw Error("internal: add_scaled with out = d");
  const auto& xv = V(x);
  const auto& dv = V(d);
  auto& o = V(out);
  blocks(pool_, xv.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) o[i] = xv[i] + a * dv[i];  // as copy, then axpy
  });
}

double CpuBackend::axpy_dot(double a, const Vector& x, Vector& y, const Vector& z) {
  check_same(x, y);
  check_same(x, z);
  const double* xp = V(x).data();
  double* yp = V(y).data();
  const double* zp = V(z).data();
  return reduce(pool_, V(x).size(), [&](std::size_t b, std::size_t e) {
    return axpy_dot_range(a, xp, yp, zp, b, e);
  });
}

double CpuBackend::scale_dot(double a, Vector& x, const Vector& z) {
  check_same(x, z);
  double* xp = V(x).data();
  const double* zp = V(z).data();
  return reduce(pool_, V(x).size(), [&](std::size_t b, std::size_t e) {
    return scale_dot_range(a, xp, zp, b, e);
  });
}

double CpuBackend::axpy_norm2sq(double a, const Vector& x, Vector& y) {
  check_same(x, y);
  const double* xp = V(x).data();
  double* yp = V(y).data();
  return reduce(pool_, V(x).size(), [&](std::size_t b, std::size_t e) {
    return axpy_norm2sq_range(a, xp, yp, b, e);
  });
}

double CpuBackend::sub_dot(const Vector& x, const Vector& y, Vector& out, const Vector& z) {
  check_same(x, y);
  check_same(x, out);
  check_same(x, z);
  const double* xp = V(x).data();
  const double* yp = V(y).data();
  double* op = V(out).data();
  const double* zp = V(z).data();
  return reduce(pool_, V(x).size(), [&](std::size_t b, std::size_t e) {
    return sub_dot_range(xp, yp, op, zp, b, e);
  });
}

double CpuBackend::norm1(const Vector& x) {
  const auto& v = V(x);
  return reduce(pool_, v.size(), [&](std::size_t b, std::size_t e) {
    return abs_sum_range(v.data(), b, e);
  });
}

double CpuBackend::norm2sq(const Vector& x) { return dot(x, x); }

double CpuBackend::norm_inf(const Vector& x) {
  const auto& v = V(x);
  const std::size_t blocks = (v.size() + kReduceBlock - 1) / kReduceBlock;
  std::vector<double> partial(blocks, 0.0);
  pool_.run(blocks, [&](std::size_t b, unsigned) {
    double m = 0;
    for (std::size_t i = b * kReduceBlock; i < std::min(v.size(), (b + 1) * kReduceBlock); ++i)
      m = std::max(m, std::fabs(v[i]));
    partial[b] = m;
  });
  return partial.empty() ? 0.0 : *std::max_element(partial.begin(), partial.end());
}

std::size_t CpuBackend::count_nonzero(const Vector& x) {
  const auto& v = V(x);
  return static_cast<std::size_t>(reduce(pool_, v.size(), [&](std::size_t b, std::size_t e) {
    return double(nonzero_range(v.data(), b, e));
  }));
}

}  // namespace crfx
