// crfx — error types. Library code throws; only apps/ turns exceptions into exit codes.
//
// Entry points meant to stay stable (README, "As a library"): Error, InputError.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace crfx {

/// Any failure crfx reports to its caller.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Malformed user input: what() reads "file:line: problem" (line 0 = the file as a whole).
class InputError : public Error {
 public:
  InputError(const std::string& file, std::size_t line, const std::string& problem)
      : Error(file + (line ? ":" + std::to_string(line) : std::string()) + ": " + problem),
        file_(file), line_(line), problem_(problem) {}
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_;
  std::size_t line_;
  std::string problem_;
};

}  // namespace crfx
