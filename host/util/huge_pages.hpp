// crfx — transparent huge pages for large host buffers.
//
// On a machine with THP in "madvise" mode (the Debian default) a fresh 60 MB buffer is faulted in
// 4 KiB at a time: ~15,000 page faults, each costly under a hypervisor, and they were a quarter of
// loading a model. Marking the buffer's 2 MiB-aligned interior with MADV_HUGEPAGE *before* it is
// first touched makes that a few dozen faults. It is only a hint: without THP nothing changes.
#pragma once

#include <cstddef>

namespace crfx {

/// Buffers smaller than this are left alone (a policy: below it the faults saved are few).
constexpr std::size_t kHugePageAdviceFrom = std::size_t(4) << 20;

/// Hints the kernel to back [p, p + bytes) with huge pages where whole 2 MiB pages fit; call it
/// before the memory is first written. Never fails (a refused hint changes nothing).
void advise_huge_pages(void* p, std::size_t bytes);

}  // namespace crfx
