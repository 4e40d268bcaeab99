// Shared by the libFuzzer targets (tests/fuzz/README.md): the fuzzer's bytes as a file that the
// library's path-based readers can open, without touching the disk; which errors are expected.
//
// The CoNLL, CRFsuite and model readers take a path (LineReader and load_model open(2) it, so
// that plain and .gz files, "-" and error messages naming the file all take the same route). The
// bytes go into one memfd (anonymous RAM-backed file) per process, opened by the library as
// /proc/self/fd/N: a fresh open file description each time, so the offset starts at 0, and the
// whole real code path runs (open, fstat, gzip detection, read(2) or zlib, line cutting).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace crfx_fuzz {

class MemFile {
 public:
  MemFile() {
    fd_ = ::memfd_create("crfx-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::fprintf(stderr, "memfd_create: %s\n", std::strerror(errno));
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  /// Replaces the file's contents with [data, data + size); returns its path.
  const std::string& set(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) die("ftruncate");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("pwrite");
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void die(const char* what) {
    std::fprintf(stderr, "%s: %s\n", what, std::strerror(errno));
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
};

/// The one file of this process (libFuzzer runs inputs one at a time on one thread).
inline MemFile& mem_file() {
  static MemFile file;
  return file;
}

/// Called for every crfx::Error a target catches: an input problem is expected, but an error the
/// library marks "internal:" (a broken invariant of its own) is a finding whatever the input.
inline void expected(const std::exception& e) {
  if (std::strncmp(e.what(), "internal", 8) == 0) {
    std::fprintf(stderr, "invariant broken: an internal error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace crfx_fuzz
