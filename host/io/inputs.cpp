// The input files of a run over many (crfx tag, crfx eval): file and directory arguments
// expanded into an ordered list, each with the name its output mirrors.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"

namespace crfx {

namespace fs = std::filesystem;

namespace {

/// The last component of `path` ("a/b.txt" → "b.txt"; "dir/" → "dir").
std::string file_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string kind_of(const struct stat& st) {
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "not a regular file";
}

InputFile input_file(const std::string& path, const std::string& name, const struct stat& st) {
  InputFile f;
  f.path = path;
  f.name = name;
  f.bytes = S_ISREG(st.st_mode) ? std::uint64_t(st.st_size) : 0;
  f.device = std::uint64_t(st.st_dev);
  f.inode = std::uint64_t(st.st_ino);
  return f;
}

/// Every file below directory argument `arg`, sorted by the path below it.
void walk(const std::string& arg, std::vector<InputFile>& out) {
  const std::size_t first = out.size();
  std::error_code ec;
  fs::recursive_directory_iterator it(arg, fs::directory_options::none, ec), end;
  if (ec) throw InputError(arg, 0, "cannot read the directory: " + ec.message());
  std::string base = arg;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  for (; it != end; it.increment(ec)) {
    if (ec) throw InputError(arg, 0, "cannot read the directory: " + ec.message());
    // The entry's type as the directory listing gave it (no lstat for directories and files).
    const bool link = it->is_symlink(ec);
    if (!link && it->is_directory(ec)) continue;  // the iterator goes into it
    const std::string path = it->path().string();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      throw InputError(path, 0, std::string("cannot open: ") + std::strerror(errno) +
                                    (link ? " (a broken link)" : ""));
    if (S_ISDIR(st.st_mode))
      throw InputError(path, 0,
                       "a link to a directory, not followed under --recursive (name it as an argument "
                       "to read the files it holds)");
    if (!S_ISREG(st.st_mode)) throw InputError(path, 0, kind_of(st) + ", not a file to read");
    std::string rel = path.substr(base.size());
    while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    out.push_back(input_file(path, rel, st));
  }
  std::sort(out.begin() + std::ptrdiff_t(first), out.end(),
            [](const InputFile& a, const InputFile& b) { return a.name < b.name; });
}

}  // namespace

std::vector<InputFile> list_inputs(const std::vector<std::string>& arguments, bool recursive) {
  std::vector<InputFile> out;
  bool stdin_seen = false;
  for (const std::string& arg : arguments) {
    if (arg.empty()) throw InputError("''", 0, "an empty file name");
    if (arg == "-") {
      if (stdin_seen) throw InputError("-", 0, "standard input named twice");
      stdin_seen = true;
      InputFile f;
      f.path = f.name = "-";
      out.push_back(f);
      continue;
    }
    struct stat st;
    if (::stat(arg.c_str(), &st) != 0) throw InputError(arg, 0, std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      if (!recursive)
        throw InputError(arg, 0, "a directory (--recursive reads every file below it)");
      walk(arg, out);
    } else if (S_ISREG(st.st_mode)) {
      out.push_back(input_file(arg, file_name(arg), st));
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
      out.push_back(input_file(arg, file_name(arg), st));  // a pipe (<(…)) or /dev/stdin: a stream
    } else {
      throw InputError(arg, 0, kind_of(st) + ", not a file to read");
    }
  }
  return out;
}

}  // namespace crfx
