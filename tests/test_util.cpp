#include "test_util.hpp"

#include "crfx/errors.hpp"

#include <sys/wait.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace crfx::test {
namespace fs = std::filesystem;

namespace {
struct TempRoot {
  fs::path root;
  TempRoot() {
    std::string pattern = (fs::temp_directory_path() / "crfx-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    root = pattern;
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};
TempRoot& temp_root() {
  static TempRoot r;
  return r;
}
int counter = 0;
}  // namespace

std::string temp_dir() {
  fs::path d = temp_root().root / ("d" + std::to_string(counter++));
  fs::create_directories(d);
  return d.string();
}

std::string temp_path(const std::string& name) { return temp_dir() + "/" + name; }

FileSizeLimit::FileSizeLimit(rlim_t bytes) {
  if (getrlimit(RLIMIT_FSIZE, &old_) != 0) throw std::runtime_error("getrlimit failed");
  old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lim = old_;
  lim.rlim_cur = bytes;
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
    std::signal(SIGXFSZ, old_handler_);
    throw std::runtime_error("setrlimit failed");
  }
}

FileSizeLimit::~FileSizeLimit() {
  setrlimit(RLIMIT_FSIZE, &old_);
  std::signal(SIGXFSZ, old_handler_);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_gz(const std::string& path, const std::string& text) {
  gzFile gz = gzopen(path.c_str(), "wb");
  if (!gz) throw std::runtime_error("cannot write " + path);
  const bool ok = gzwrite(gz, text.data(), static_cast<unsigned>(text.size())) == int(text.size());
  if (gzclose(gz) != Z_OK || !ok) throw std::runtime_error("cannot write " + path);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run(const std::string& command, std::string* output) {
  std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string crfx_binary() { return CRFX_BINARY; }
std::string data_path(const std::string& name) { return std::string(CRFX_TEST_DATA) + "/" + name; }

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(e.path().string());
  return found;
}

}  // namespace crfx::test
