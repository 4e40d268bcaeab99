// crfx — what a backend can still allocate: the default, host memory (Backend::memory_available):
// the least of what the machine has free and what the process's limits leave it.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "crfx/internal/backend.hpp"

namespace crfx {
namespace {

constexpr std::size_t kUnknown = std::numeric_limits<std::size_t>::max();

/// "Name:  1234 kB" from /proc/self/status or /proc/meminfo, in bytes; kUnknown when absent.
std::size_t proc_kb(const char* file, const char* name) {
  std::FILE* f = std::fopen(file, "r");
  if (!f) return kUnknown;
  char line[256];
  unsigned long long kb = 0;
  bool found = false;
  const std::size_t n = std::strlen(name);
  while (!found && std::fgets(line, sizeof line, f))
    found = std::strncmp(line, name, n) == 0 && line[n] == ':' && std::sscanf(line + n + 1, "%llu", &kb) == 1;
  std::fclose(f);
  return found ? static_cast<std::size_t>(kb) * 1024 : kUnknown;
}

/// A number from a cgroup file ("max", a huge v1 value or a missing file: kUnknown).
std::size_t cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kUnknown;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  return v == 0 || v >= (1ull << 60) ? kUnknown : static_cast<std::size_t>(v);
}

/// Room left under the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes), the
/// tightest along the path from the process's cgroup to the root; kUnknown without a limit.
std::size_t cgroup_room() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, v2, v1;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
    const std::size_t m = line.find(":memory:");
    if (m != std::string::npos) v1 = line.substr(m + 8);
  }
  std::size_t room = kUnknown;
  auto walk = [&](const std::string& root, std::string path, const char* limit_file, const char* usage_file) {
    for (;;) {
      const std::size_t limit = cgroup_value(root + path + "/" + limit_file);
      const std::size_t used = cgroup_value(root + path + "/" + usage_file);
      if (limit != kUnknown) room = std::min(room, used != kUnknown && used < limit ? limit - used : limit > used ? limit : 0);
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.find_last_of('/'));
    }
  };
  if (!v2.empty()) walk("/sys/fs/cgroup", v2 == "/" ? "" : v2, "memory.max", "memory.current");
  if (!v1.empty()) walk("/sys/fs/cgroup/memory", v1 == "/" ? "" : v1, "memory.limit_in_bytes", "memory.usage_in_bytes");
  return room;
}

/// Room left under a resource limit, given what the process already uses of it.
std::size_t rlimit_room(int resource, std::size_t used) {
  struct rlimit rl {};
  if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kUnknown;
  const std::size_t limit = static_cast<std::size_t>(rl.rlim_cur);
  return used != kUnknown && used < limit ? limit - used : 0;
}

}  // namespace

HostMemory host_memory() {
  HostMemory m;
  // MemAvailable (Linux ≥ 3.14): what can be allocated without swapping, page cache included.
  std::size_t bytes = proc_kb("/proc/meminfo", "MemAvailable");
  if (bytes == kUnknown) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    bytes = pages > 0 && size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(size) : kUnknown;
  }
  auto consider = [&](std::size_t room, const char* what) {
    if (room < bytes) {
      bytes = room;
      m.limit = what;
    }
  };
  consider(rlimit_room(RLIMIT_AS, proc_kb("/proc/self/status", "VmSize")), "the address-space limit, ulimit -v");
  consider(rlimit_room(RLIMIT_DATA, proc_kb("/proc/self/status", "VmData")), "the data-segment limit, ulimit -d");
  consider(cgroup_room(), "the cgroup's memory limit");
  m.bytes = bytes == kUnknown ? 0 : bytes;
  return m;
}

std::size_t host_memory_available() { return host_memory().bytes; }

std::size_t Backend::memory_available() { return host_memory_available(); }

}  // namespace crfx
