// Runs the crfx binary (or any program) for the fault and bad-input tests: argv without a shell,
// a working directory, extra environment variables, standard input from a file, standard output
// and standard error captured apart (the tests compare standard error exactly).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace crfx::test {

struct Spawned {
  int status = -1;     // exit status, or 128 + the signal that ended the process (as a shell says)
  int signal = 0;      // the signal that ended it, 0 when it exited
  std::string out;     // standard output (empty when sent elsewhere)
  std::string err;     // standard error
};

struct SpawnOptions {
  std::string cwd;                                        // "" keeps the test's
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  std::string stdin_path = "/dev/null";
  std::string stdout_path;  // "" captures it into Spawned::out
};

namespace spawn_detail {
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace spawn_detail

/// Starts `argv` and returns its pid; its standard output and error go to `out_file` and
/// `err_file`.
inline pid_t start(const std::vector<std::string>& argv, const SpawnOptions& o, const std::string& out_file,
                   const std::string& err_file) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // The child: only async-signal-safe calls would be strictly right after fork in a threaded
    // parent; gtest runs single-threaded here, and these are plain system calls.
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
    const int in = ::open(o.stdin_path.c_str(), O_RDONLY);
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& [k, v] : o.env) ::setenv(k.c_str(), v.c_str(), 1);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits for `pid` and fills the status fields of `r`.
inline void finish(pid_t pid, Spawned& r) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) {
    r.status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.status = 128 + r.signal;
  }
}

/// Runs `argv` to its end. `while_running(pid)`, if given, is called once the process has started
/// (to signal it); the captured output is read after it ends. `scratch` is a directory for the
/// capture files.
inline Spawned spawn(const std::vector<std::string>& argv, const SpawnOptions& o, const std::string& scratch,
                     const std::function<void(pid_t)>& while_running = nullptr) {
  const std::string out_file = o.stdout_path.empty() ? scratch + "/.stdout" : o.stdout_path;
  const std::string err_file = scratch + "/.stderr";
  Spawned r;
  const pid_t pid = start(argv, o, out_file, err_file);
  if (while_running) while_running(pid);
  finish(pid, r);
  if (o.stdout_path.empty()) {
    r.out = spawn_detail::slurp(out_file);
    std::remove(out_file.c_str());
  }
  r.err = spawn_detail::slurp(err_file);
  std::remove(err_file.c_str());
  return r;
}

}  // namespace crfx::test
