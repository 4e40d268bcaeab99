// crfx — what a backend can still allocate: the default, host memory (Backend::memory_available).
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "crfx/backend.hpp"

namespace crfx {

std::size_t host_memory_available() {
  // MemAvailable (Linux ≥ 3.14): what can be allocated without swapping, page cache included.
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f))
      found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    std::fclose(f);
    if (found) return static_cast<std::size_t>(kb) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(size) : 0;
}

std::size_t Backend::memory_available() { return host_memory_available(); }

}  // namespace crfx
