// crfx — writing files safely: atomic whole-file and piecewise writes (a temporary file renamed
// into place, so a failure never truncates an existing file), the early check of an output path,
// and the signal handling that removes temporaries of a killed program. See host/io/atomic_write.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/io.hpp"

namespace crfx {

/// A file written atomically in pieces: a temporary file in the same directory, renamed over
/// `path` by commit(). Destroyed without commit() (an error, an exception on the way), it removes
/// the temporary file and leaves any existing `path` untouched. Errors throw crfx::Error naming
/// `path`. A symbolic link's target is what gets replaced; a character device, FIFO or socket is
/// written in place (no temporary); a read-only file, a directory or a name too long for the
/// temporary's suffix is refused. In a program that called remove_temporaries_on_signals(), SIGINT, SIGTERM or SIGHUP
/// remove the temporary files still open before the process dies of the signal.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const char* data, std::size_t n);
  /// fsync, close, rename over `path`, fsync the directory.
  void commit();
  /// For files made durable together (AtomicFileGroup): closes the temporary without syncing
  /// it; rename_closed() then puts it in place, once the caller has made it durable.
  void close_unsynced();
  void rename_closed();
  /// The file this one replaces (a symbolic link's target), "" for a special file.
  const std::string& target() const { return target_; }

 private:
  [[noreturn]] void abort_with(const char* what, int err);
  void forget_tmp() noexcept;  // unlinked or renamed: no longer the signal handler's to remove
  bool open() const;           // not yet committed or failed
  std::string path_, target_, tmp_;  // as given; the file to replace (a symlink's target); the temporary
  int fd_ = -1;
  bool direct_ = false;  // a special file written in place
  bool closed_ = false;  // close_unsynced() was called
  int slot_ = -1;  // in the signal handler's list of temporary files, or -1
};

/// Many files written atomically, made durable together: each is written by begin(), write()
/// and end(); every `max_files` files or `max_bytes` bytes, and at flush(), one syncfs(2) per
/// file system makes the ended files' data durable, then they are renamed into place and their
/// directories synced once each. As with AtomicFile alone, a file that exists under its name is
/// whole — at the cost of one sync per group instead of two per file, which for thousands of
/// small outputs is most of the time. Destroyed before flush(), the files not yet renamed are
/// removed, as are the files a failed flush() had not renamed.
class AtomicFileGroup {
 public:
  explicit AtomicFileGroup(std::size_t max_files = 1000, std::size_t max_bytes = std::size_t(64) << 20);
  ~AtomicFileGroup();
  AtomicFileGroup(const AtomicFileGroup&) = delete;
  AtomicFileGroup& operator=(const AtomicFileGroup&) = delete;
  /// A new file (the one before must have been ended or dropped).
  void begin(const std::string& path);
  void write(const char* data, std::size_t n);
  /// The file begun is whole: closed, and in place at the next flush.
  void end();
  /// The file begun is not wanted: its temporary is removed.
  void drop();
  /// Syncs and renames every file ended so far.
  void flush();

 private:
  std::size_t max_files_, max_bytes_, bytes_ = 0;
  std::unique_ptr<AtomicFile> open_;
  std::vector<std::unique_ptr<AtomicFile>> ended_;
};

/// Whether a read-only regular file may be replaced (crfx --force); refused by default.
void set_replace_read_only(bool allow);

/// For programs (the crfx tool calls it first thing): SIGINT, SIGTERM and SIGHUP, where their
/// action is the default, first remove the open AtomicFile temporaries, then end the process as
/// the signal would have. A library never installs it on its own. Idempotent.
void remove_temporaries_on_signals();

/// For a long job in a program that called remove_temporaries_on_signals() (crfx train): while
/// armed, the first SIGINT or SIGTERM does not end the process but is recorded — stop_signal()
/// returns it — so that the job can stop at its next safe point and write what it has; a second
/// one ends the process as before (temporaries removed) — but the same signal again within a
/// second is the first one delivered twice (`timeout -s INT` signals the process, then its
/// group) and is ignored. Arming or disarming clears the record.
void set_graceful_stop(bool armed);
/// The signal that asked for a graceful stop since it was armed, or 0.
int stop_signal();

/// Fails early (Error naming `path`) where a later atomic write to `path` is bound to fail: `path`
/// is a directory or a read-only file, its name leaves no room for the temporary's suffix, or its
/// directory is missing or not writable. Call it before long work.
void check_output_path(const std::string& path);
/// Fails (Error naming both) when `output` is the same file (device and inode) as one of `inputs`:
/// writing it would destroy an input of the run. Call it before any work.
void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs);
/// The same for many outputs and inputs listed by list_inputs (which knows their files).
void check_not_an_input(const std::vector<std::string>& outputs, const std::vector<InputFile>& inputs);

/// Writes `data` to `path` atomically (AtomicFile in one piece).
void write_file_atomic(const std::string& path, const std::string& data);

}  // namespace crfx
