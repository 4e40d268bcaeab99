// AtomicFile / write_file_atomic: "<path>.tmp.<pid>.XXXXXX" (mkstemp, same directory, so rename(2)
// stays on one file system) → write(s) → fsync → close → rename over `path`. Readers see the old file or
// the new one, never a half-written one; on any failure the temporary file is removed and the
// old `path` is left as it was.
//
// Interrupted (Ctrl-C, kill, a closed terminal), the process would otherwise leave its temporary
// files behind: each open one is listed in a fixed table that a SIGINT / SIGTERM / SIGHUP handler
// reads — only async-signal-safe work there: unlink(2) each listed path, restore the default
// action, raise the signal again (so the exit status still says which signal). A library does
// not take over a process's signals on its own: the program installs the handler
// (remove_temporaries_on_signals(), the crfx tool in main), and only for signals whose action was
// the default (an ignored SIGHUP under nohup stays ignored). More than kSlots files open at once:
// the rest are cleaned up only by the ordinary paths (crfx writes at most two at a time).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "crfx/error.hpp"
#include "crfx/output.hpp"

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

/// The directory part of `path` ("." for a bare name, "/" for a name under the root).
std::string parent_dir(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error("cannot write " + path + ": " + what + ": " + std::strerror(err));
}

// ---- temporary files removed on a fatal signal ----------------------------------------------
constexpr int kSlots = 16;
constexpr std::size_t kSlotPath = 4096;
struct Slot {
  volatile std::sig_atomic_t used = 0;  // set after `path` is complete, cleared before it changes
  char path[kSlotPath];
};
Slot g_slots[kSlots];
std::mutex g_slots_mutex;  // between threads registering files; never taken by the handler
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int sig) {
  for (Slot& s : g_slots)
    if (s.used) ::unlink(s.path);
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Lists `tmp` for the handler; the slot, or -1 when the table is full or the path too long.
int register_tmp(const std::string& tmp) {
  if (tmp.size() >= kSlotPath) return -1;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_slots[i].used) continue;
    std::memcpy(g_slots[i].path, tmp.c_str(), tmp.size() + 1);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the path is complete before `used`
    g_slots[i].used = 1;
    return i;
  }
  return -1;
}

void unregister_tmp(int slot) noexcept {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_slots[slot].used = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  tmp_ = path + ".tmp." + std::to_string(::getpid()) + ".XXXXXX";
  fd_ = ::mkstemp(tmp_.data());
  if (fd_ < 0) fail(path_, "cannot create a temporary file", errno);
  slot_ = register_tmp(tmp_);
  // mkstemp creates mode 0600; give the file the mode an ordinary create would (or keep the
  // mode of the file being replaced).
  struct stat st;
  const mode_t mode = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)
                          ? (st.st_mode & 07777)
                          : (0666 & ~current_umask());
  if (::fchmod(fd_, mode) != 0) abort_with("fchmod", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  forget_tmp();
}

void AtomicFile::forget_tmp() noexcept {
  unregister_tmp(slot_);
  slot_ = -1;
}

void AtomicFile::abort_with(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  forget_tmp();
  tmp_.clear();
  fail(path_, what, err);
}

void AtomicFile::write(const char* p, std::size_t left) {
  if (tmp_.empty()) throw Error("internal: write to " + path_ + " after commit or failure");
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abort_with("write", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (tmp_.empty()) throw Error("internal: commit of " + path_ + " after commit or failure");
  if (::fsync(fd_) != 0) abort_with("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) abort_with("close", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) abort_with("rename", errno);
  forget_tmp();  // (a signal between the rename and here unlinks a name that is gone: harmless)
  tmp_.clear();

  // Make the rename itself durable; failure here does not undo the (already visible) write.
  const std::string dir = parent_dir(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void remove_temporaries_on_signals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCleanupSignals) {
      struct sigaction old;
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_handler = remove_temporaries_and_reraise;
      sigemptyset(&sa.sa_mask);
      for (int other : kCleanupSignals) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw Error("cannot write to an empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error("cannot write " + path + ": it is a directory");
  const std::string dir = parent_dir(path);
  if (::stat(dir.c_str(), &st) != 0) fail(path, "directory " + dir, errno);
  if (!S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) fail(path, "directory " + dir, errno);
}

void write_file_atomic(const std::string& path, const std::string& data) {
  AtomicFile f(path);
  f.write(data.data(), data.size());
  f.commit();
}

}  // namespace crfx
