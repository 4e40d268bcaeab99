// AtomicFile / write_file_atomic: "<path>.tmp.<pid>.<8 random hex digits>" (same directory, so rename(2)
// stays on one file system) → write(s) → fsync → close → rename over `path`. Readers see the old file or
// the new one, never a half-written one; on any failure the temporary file is removed and the
// old `path` is left as it was.
//
// What `path` names decides how it is written (resolve_output):
//   - a regular file, or nothing yet: replaced atomically as above, keeping the old file's mode;
//     a read-only file is refused (replacing it would defeat its protection);
//   - a symbolic link: its target is what gets replaced (the link stays a link);
//   - a character device, FIFO or socket (/dev/null, /dev/stdout, a pipe's reader): written
//     directly, streamed, every write checked — never renamed over.
// The temporary's name is registered for the signal handler before the file is created
// (O_CREAT | O_EXCL under that name), so no signal timing leaves it behind.
//
// Interrupted (Ctrl-C, kill, a closed terminal), the process would otherwise leave its temporary
// files behind: each open one is listed in a table (blocks of slots, grown as needed, never freed)
// that a SIGINT / SIGTERM / SIGHUP handler
// reads — only async-signal-safe work there: unlink(2) each listed path, restore the default
// action, raise the signal again (so the exit status still says which signal). Other threads
// that create a temporary meanwhile remove it themselves, and the handler waits for creations
// under way before the process dies (g_ending, g_creating below). A library does
// not take over a process's signals on its own: the program installs the handler
// (remove_temporaries_on_signals(), the crfx tool in main), and only for signals whose action was
// the default (an ignored SIGHUP under nohup stays ignored). More than 4,096 files open at once
// (kBlocks · kSlotsPerBlock): the rest are cleaned up only by the ordinary paths (crfx keeps at
// most an AtomicFileGroup's 1,000 and two more).
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "crfx/errors.hpp"
#include "crfx/internal/output.hpp"

namespace crfx {

namespace {

/// The directory part of `path` ("." for a bare name, "/" for a name under the root).
std::string parent_dir(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error("cannot write " + path + ": " + what + ": " + std::strerror(err));
}

// ---- temporary files removed on a fatal signal ----------------------------------------------
// Slots come in blocks, allocated as more files are open at once (AtomicFileGroup keeps up to a
// thousand temporaries before it renames them); the handler only reads them.
constexpr int kSlotsPerBlock = 64;
constexpr int kBlocks = 64;  // at most 4096 temporaries listed at once
constexpr std::size_t kSlotPath = 4096;
struct Slot {
  std::atomic<int> used{0};  // set after `path` is complete, cleared before it changes (lock-free)
  char path[kSlotPath];
};
static_assert(std::atomic<int>::is_always_lock_free, "the handler reads slots: lock-free atomics only");
struct SlotBlock {
  Slot slots[kSlotsPerBlock];
};
std::atomic<SlotBlock*> g_blocks[kBlocks];  // null until needed; never freed
std::mutex g_slots_mutex;  // between threads registering files; never taken by the handler
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
// Set by the handler before it removes the listed temporaries: the process is ending. The other
// threads go on meanwhile; one that creates a temporary behind the handler's scan (listed after
// the scan read its slot, or created after the scan's unlink of a name not created yet) removes
// it itself (AtomicFile's constructor reads this after its open). The process must not die while
// such an open is under way (the file would be made and nobody left to remove it): creations in
// flight are counted, and the handler waits for them (at most kCreationWaitMs: the thread it
// interrupted may be one of them, its file listed before the scan).
std::atomic<int> g_ending{0};
std::atomic<int> g_creating{0};
constexpr int kCreationWaitMs = 200;

void wait_for_creations() {  // async-signal-safe (atomics, nanosleep)
  for (int ms = 0; ms < kCreationWaitMs && g_creating.load(std::memory_order_seq_cst) > 0; ++ms) {
    struct timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
}

// While a graceful stop is armed (set_graceful_stop), the first SIGINT or SIGTERM is only
// recorded here, for the program to finish its step and write what it has; a second one (or
// SIGHUP) removes the temporaries and ends the process as before.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_graceful = 0;
// When the first one came (CLOCK_MONOTONIC, ns): the same signal again within kRepeatNs is that
// request delivered twice, not a second one — `timeout -s INT` signals the process and then its
// process group, and the two arrive apart when the first is handled in between.
std::atomic<long long> g_stop_ns{0};
constexpr long long kRepeatNs = 1000000000;  // 1 s

long long monotonic_ns() {  // async-signal-safe (clock_gettime)
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

extern "C" void remove_temporaries_and_reraise(int sig) {
  if (g_graceful && sig != SIGHUP) {
    if (g_stop_signal == 0) {
      // The time first: a repeat handled on another thread meanwhile must not read the 0 of
      // "no time yet" (it would take the repeat for a second request and end the process).
      g_stop_ns.store(monotonic_ns(), std::memory_order_seq_cst);
      g_stop_signal = sig;
      return;
    }
    if (sig == g_stop_signal && monotonic_ns() - g_stop_ns.load(std::memory_order_seq_cst) < kRepeatNs) return;
  }
  g_ending.store(1, std::memory_order_seq_cst);
  for (auto& b : g_blocks) {
    SlotBlock* block = b.load(std::memory_order_acquire);
    if (!block) break;
    for (Slot& s : block->slots)
      if (s.used.load(std::memory_order_seq_cst)) ::unlink(s.path);
  }
  wait_for_creations();
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Lists `tmp` for the handler; the slot, or -1 when the table is full or the path too long.
int register_tmp(const std::string& tmp) {
  if (tmp.size() >= kSlotPath) return -1;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (int b = 0; b < kBlocks; ++b) {
    SlotBlock* block = g_blocks[b].load(std::memory_order_relaxed);
    if (!block) {
      block = new (std::nothrow) SlotBlock;
      if (!block) return -1;
      g_blocks[b].store(block, std::memory_order_release);
    }
    for (int i = 0; i < kSlotsPerBlock; ++i) {
      Slot& slot = block->slots[i];
      if (slot.used.load(std::memory_order_relaxed)) continue;
      std::memcpy(slot.path, tmp.c_str(), tmp.size() + 1);
      slot.used.store(1, std::memory_order_seq_cst);  // the path is complete before `used`
      return b * kSlotsPerBlock + i;
    }
  }
  return -1;
}

void unregister_tmp(int slot) noexcept {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_blocks[slot / kSlotsPerBlock].load(std::memory_order_relaxed)->slots[slot % kSlotsPerBlock].used.store(
      0, std::memory_order_seq_cst);
}

/// open(O_CREAT | O_EXCL) of the listed temporary `tmp`, counted in flight for the handler: -1
/// with errno EINTR where the process is ending (the file not made, or removed again).
int create_listed(const std::string& tmp, mode_t mode) {
  g_creating.fetch_add(1, std::memory_order_seq_cst);
  int fd = -1;
  if (g_ending.load(std::memory_order_seq_cst)) {
    errno = EINTR;
  } else {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    // Listed, then created, then this read: where it reads 0 the handler's scan comes after the
    // open and removes the file; where it reads 1 the scan may have passed: removed here.
    if (fd >= 0 && g_ending.load(std::memory_order_seq_cst)) {
      ::close(fd);
      ::unlink(tmp.c_str());
      fd = -1;
      errno = EINTR;
    }
  }
  const int err = errno;
  g_creating.fetch_sub(1, std::memory_order_seq_cst);
  errno = err;
  return fd;
}

std::atomic<bool> g_replace_read_only{false};

/// Characters a temporary name adds to the output's file name: ".tmp." pid "." 8 hex digits.
constexpr std::size_t kTmpSuffix = 5 + 10 + 1 + 8;

/// How `path` is written (see the top of this file): the file to replace (a symlink's target),
/// or `direct` for a special file written in place. Throws for what must not be written.
struct OutputTarget {
  std::string path;
  bool direct = false;
  bool exists = false;  // `path` is a regular file, of mode `mode`
  mode_t mode = 0;
};

OutputTarget resolve_output(const std::string& path) {
  if (path.empty()) throw Error("cannot write to an empty path");
  OutputTarget t{path, false};
  struct stat st;
  // What the path leads to, through any links: a device, FIFO or socket (/dev/stdout →
  // /proc/self/fd/1 → a pipe) is opened through the path itself and written in place.
  bool found = ::stat(path.c_str(), &st) == 0;
  if (found && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    t.direct = true;
    return t;
  }
  // A link's target is replaced, not the link: follow the chain (a dangling link's target is
  // created). Relative targets are relative to the link's directory.
  bool linked = false;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat lst;
    if (::lstat(t.path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) break;
    std::string link(PATH_MAX, '\0');
    const ssize_t n = ::readlink(t.path.c_str(), link.data(), link.size());
    if (n < 0) fail(path, "readlink", errno);
    link.resize(std::size_t(n));
    t.path = link[0] == '/' ? link : parent_dir(t.path) + "/" + link;
    linked = true;
  }
  if (linked) found = ::stat(t.path.c_str(), &st) == 0;  // else the first stat was of t.path
  if (found) {
    if (S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": it is a directory");
    // Read-only by its mode (no write bit), or not writable by us: root may write anything,
    // but a file marked read-only is protected on purpose.
    if (S_ISREG(st.st_mode) && !g_replace_read_only.load() &&
        ((st.st_mode & 0222) == 0 || ::access(t.path.c_str(), W_OK) != 0))
      throw Error("cannot write " + path + ": it is read-only (mode " +
                  [&] {
                    char m[8];
                    std::snprintf(m, sizeof m, "%04o", unsigned(st.st_mode & 07777));
                    return std::string(m);
                  }() +
                  "); --force replaces it, or make it writable or choose another name");
    if (!S_ISREG(st.st_mode)) throw Error("cannot write " + path + ": it is not a regular file");
    t.exists = true;
    t.mode = st.st_mode & 07777;
  }
  const std::size_t slash = t.path.find_last_of('/');
  const std::size_t name = t.path.size() - (slash == std::string::npos ? 0 : slash + 1);
  if (name + kTmpSuffix > NAME_MAX)
    throw Error("cannot write " + path + ": the file name is too long (" + std::to_string(name) +
                " characters; at most " + std::to_string(NAME_MAX - kTmpSuffix) +
                ", to leave room for its temporary file's suffix)");
  return t;
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  const OutputTarget target = resolve_output(path);
  if (target.direct) {  // a device, FIFO or socket: written in place, never renamed over
    fd_ = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail(path_, "open", errno);
    direct_ = true;
    return;
  }
  target_ = target.path;
  // The name is registered for the signal handler before the file exists: a signal at any point
  // removes it (or a name not created yet, which is harmless).
  // Seeded once per thread: a random_device per file cost more than writing a small one.
  thread_local std::mt19937 rd{std::random_device{}()};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%08x", unsigned(rd()));
    tmp_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + suffix;
    slot_ = register_tmp(tmp_);
    // A new file gets the mode an ordinary create would (0666 less the umask); one that replaces
    // a file is made private first, then given that file's mode.
    fd_ = create_listed(tmp_, target.exists ? 0600 : 0666);
    if (fd_ >= 0) break;
    const int err = errno;
    forget_tmp();
    if (err == EINTR) {
      tmp_.clear();
      fail(path_, "the process is ending on a signal", err);
    }
    if (err != EEXIST || attempt == 100) {
      tmp_.clear();
      fail(path_, "cannot create a temporary file", err);
    }
  }
  if (target.exists && ::fchmod(fd_, target.mode) != 0) abort_with("fchmod", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  forget_tmp();
}

bool AtomicFile::open() const { return direct_ ? fd_ >= 0 : !tmp_.empty(); }

void AtomicFile::forget_tmp() noexcept {
  unregister_tmp(slot_);
  slot_ = -1;
}

void AtomicFile::abort_with(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  forget_tmp();
  tmp_.clear();
  fail(path_, what, err);
}

void AtomicFile::write(const char* p, std::size_t left) {
  if (!open()) throw Error("internal: write to " + path_ + " after commit or failure");
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
  if (!open()) throw Error("internal: commit of " + path_ + " after commit or failure");
  if (direct_) {  // written in place: closing is the last check
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(path_, "close", errno);
    return;
  }
  if (::fsync(fd_) != 0) abort_with("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) abort_with("close", errno);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) abort_with("rename", errno);
  forget_tmp();  // (a signal between the rename and here unlinks a name that is gone: harmless)
  tmp_.clear();

  // Make the rename itself durable; failure here does not undo the (already visible) write.
  const std::string dir = parent_dir(target_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void AtomicFile::close_unsynced() {
  if (!open() || closed_) throw Error("internal: close of " + path_ + " after commit, close or failure");
  const int fd = fd_;
  fd_ = -1;
  if (direct_) {
    if (::close(fd) != 0) fail(path_, "close", errno);
    return;
  }
  if (::close(fd) != 0) abort_with("close", errno);
  closed_ = true;
}

void AtomicFile::rename_closed() {
  if (direct_) return;  // written in place: nothing to rename
  if (!closed_ || tmp_.empty()) throw Error("internal: rename of " + path_ + " before close");
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) abort_with("rename", errno);
  forget_tmp();
  tmp_.clear();
}

AtomicFileGroup::AtomicFileGroup(std::size_t max_files, std::size_t max_bytes)
    : max_files_(std::max<std::size_t>(1, max_files)), max_bytes_(max_bytes) {}

AtomicFileGroup::~AtomicFileGroup() = default;  // each AtomicFile removes its temporary

void AtomicFileGroup::begin(const std::string& path) {
  if (open_) throw Error("internal: " + path + " begun before the file before it was ended");
  open_ = std::make_unique<AtomicFile>(path);
}

void AtomicFileGroup::write(const char* data, std::size_t n) {
  if (!open_) throw Error("internal: a write to a group with no file begun");
  open_->write(data, n);
  bytes_ += n;
}

void AtomicFileGroup::end() {
  if (!open_) throw Error("internal: the end of a group's file never begun");
  open_->close_unsynced();
  ended_.push_back(std::move(open_));
  if (ended_.size() >= max_files_ || bytes_ >= max_bytes_) flush();
}

void AtomicFileGroup::drop() { open_.reset(); }

void AtomicFileGroup::flush() {
  if (ended_.empty()) return;
  // One sync per file system (by its device), through a directory of the group's files there.
  std::set<std::string> dirs;
  for (const auto& f : ended_)
    if (!f->target().empty()) dirs.insert(parent_dir(f->target()));  // (empty: a special file)
  std::map<dev_t, std::string> systems;
  for (const std::string& dir : dirs) {
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) systems.emplace(st.st_dev, dir);
  }
  for (const auto& [dev, dir] : systems) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || ::syncfs(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      // Every file of the group is still a temporary, removed with the group: name what is lost.
      std::string lost = dir;
      for (const auto& f : ended_)
        if (!f->target().empty()) {
          lost = f->target();
          break;
        }
      if (ended_.size() > 1)
        lost += " (and " + std::to_string(ended_.size() - 1) + (ended_.size() == 2 ? " more file)" : " more files)");
      fail(lost, "syncfs of " + dir, err);
    }
    ::close(fd);
  }
  for (auto& f : ended_) f->rename_closed();
  ended_.clear();
  bytes_ = 0;
  for (const std::string& dir : dirs) {  // make the renames durable
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
}

void set_replace_read_only(bool allow) { g_replace_read_only.store(allow); }

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

void set_graceful_stop(bool armed) {
  g_stop_signal = 0;
  g_graceful = armed ? 1 : 0;
}

int stop_signal() { return g_stop_signal; }

void check_output_path(const std::string& path) {
  const OutputTarget t = resolve_output(path);  // directories, read-only files, long names
  if (t.direct) return;                          // a device or FIFO: written in place
  struct stat st;
  const std::string dir = parent_dir(t.path);
  if (::stat(dir.c_str(), &st) != 0) fail(path, "directory " + dir, errno);
  if (!S_ISDIR(st.st_mode)) throw Error("cannot write " + path + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) fail(path, "directory " + dir, errno);
}

void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs) {
  struct stat out;
  if (::stat(output.c_str(), &out) != 0 || !S_ISREG(out.st_mode)) return;  // new, or a device
  for (const std::string& in : inputs) {
    struct stat st;
    if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      throw Error("cannot write " + output + ": it is " + (in == output ? "an input" : "the input " + in) +
                  " of this run; choose another name");
  }
}

void check_not_an_input(const std::vector<std::string>& outputs, const std::vector<InputFile>& inputs) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, const InputFile*> files;
  for (const InputFile& in : inputs)
    if (in.inode) files.emplace(std::make_pair(in.device, in.inode), &in);
  for (const std::string& output : outputs) {
    struct stat out;
    if (::stat(output.c_str(), &out) != 0 || !S_ISREG(out.st_mode)) continue;  // new, or a device
    const auto it = files.find({std::uint64_t(out.st_dev), std::uint64_t(out.st_ino)});
    if (it != files.end())
      throw Error("cannot write " + output + ": it is " +
                  (it->second->path == output ? "an input" : "the input " + it->second->path) +
                  " of this run; choose another name");
  }
}

void write_file_atomic(const std::string& path, const std::string& data) {
  AtomicFile f(path);
  f.write(data.data(), data.size());
  f.commit();
}

}  // namespace crfx
