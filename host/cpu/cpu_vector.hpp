// crfx — the CPU backend's vectors (CpuVector: a HostArray), shared by its source files
// (cpu_backend.cpp, cpu_vectors.cpp).
#pragma once

#include <string>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"

namespace crfx {
namespace cpu_detail {

struct CpuVector final : Vector {
  explicit CpuVector(std::size_t n) : data(n) {}
  std::size_t size() const override { return data.size(); }
  HostArray data;
};

inline HostArray& V(Vector& v) {
  auto* p = dynamic_cast<CpuVector*>(&v);
  if (!p) throw Error("internal: vector does not belong to the CPU backend");
  return p->data;
}
inline const HostArray& V(const Vector& v) { return V(const_cast<Vector&>(v)); }

inline void check_same(const Vector& a, const Vector& b) {
  if (a.size() != b.size())
    throw Error("internal: vector sizes differ (" + std::to_string(a.size()) + " vs " +
                std::to_string(b.size()) + ")");
}

}  // namespace cpu_detail
}  // namespace crfx
