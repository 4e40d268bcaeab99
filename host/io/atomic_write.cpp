// write_file_atomic: "<path>.tmp.<pid>.XXXXXX" (mkstemp, same directory, so rename(2) stays on
// one file system) → write → fsync → close → rename over `path`. Readers see the old file or
// the new one, never a half-written one; on any failure the temporary file is removed and the
// old `path` is left as it was.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "crfx/error.hpp"
#include "crfx/io.hpp"

namespace crfx {

namespace {

/// The process umask, read without changing it (/proc/self/status, Linux ≥ 4.7); 022 otherwise.
mode_t current_umask() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 6, "Umask:") == 0)
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  }
  return 022;
}

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error("cannot write " + path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, "cannot create a temporary file", errno);

  // On failure: close (if still open), remove the temporary file, report the first error.
  auto abort_with = [&](const char* what, int err, bool open) {
    if (open) ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what, err);
  };

  // mkstemp creates mode 0600; give the file the mode an ordinary create would (or keep the
  // mode of the file being replaced).
  struct stat st;
  const mode_t mode = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)
                          ? (st.st_mode & 07777)
                          : (0666 & ~current_umask());
  if (::fchmod(fd, mode) != 0) abort_with("fchmod", errno, true);

  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abort_with("write", errno, true);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) abort_with("fsync", errno, true);
  if (::close(fd) != 0) abort_with("close", errno, false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) abort_with("rename", errno, false);

  // Make the rename itself durable; failure here does not undo the (already visible) write.
  const std::size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace crfx
