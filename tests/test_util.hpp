// Helpers shared by the test suites.
#pragma once

#include <sys/resource.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace crfx::test {

/// A fresh empty directory for this test (under the system temp dir), removed at exit.
std::string temp_dir();
/// temp_dir() + "/" + name.
std::string temp_path(const std::string& name);
void write_text(const std::string& path, const std::string& text);
/// Writes `text` gzip-compressed (throws std::runtime_error on failure).
void write_gz(const std::string& path, const std::string& text);
std::string read_text(const std::string& path);
/// Runs a shell command; returns its exit status and, if `output` is given, stdout+stderr.
int run(const std::string& command, std::string* output = nullptr);
/// Path of the built `crfx` binary and of tests/data.
std::string crfx_binary();
std::string data_path(const std::string& name);
/// The message of the crfx::Error that `f` throws, or "(no error)".
std::string error_text(const std::function<void()>& f);
/// The temporary files (".tmp." in the name) anywhere below `dir`.
std::vector<std::string> temporaries(const std::string& dir);

/// While alive, files this process writes may not grow beyond `bytes` (RLIMIT_FSIZE, which binds
/// root too) and SIGXFSZ is ignored, so an oversized write fails with EFBIG. Restores both.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace crfx::test
