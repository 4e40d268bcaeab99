// LineReader: plain or gzip-compressed text, one line at a time.
//
// The file is opened with open(2) (so that a directory or a missing file is reported with the
// system's own words) and handed to zlib with gzdopen; zlib reads non-gzip files transparently.
// Bytes come in through gzread into a fixed block buffer and lines are cut with memchr, so a line
// may be arbitrarily long (it grows in the caller's std::string) and an embedded NUL byte can be
// seen (gzgets would silently cut the line there). The path "-" reads standard input (plain or
// gzip as well); messages then name the file "-".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "crfx/error.hpp"
#include "crfx/io.hpp"

namespace crfx {

namespace {
constexpr std::size_t kBlock = 1 << 18;  // bytes per gzread
}  // namespace

struct LineReader::Impl {
  gzFile gz = nullptr;
  std::vector<char> buf;  // [kBlock] decompressed bytes; [pos, end) not yet returned
  std::size_t pos = 0;
  std::size_t end = 0;
  bool eof = false;

  ~Impl() {
    if (gz) gzclose(gz);
  }
};

LineReader::LineReader(const std::string& path) : impl_(new Impl), path_(path) {
  // "-" is standard input (a duplicate, so closing the reader leaves fd 0 alone).
  const int fd = path == "-" ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  int err = 0;
  if (::fstat(fd, &st) != 0)
    err = errno;
  else if (S_ISDIR(st.st_mode))
    err = EISDIR;  // open(2) succeeds on a directory; reading it would fail later
  if (err) {
    ::close(fd);
    throw InputError(path, 0, std::string("cannot open: ") + std::strerror(err));
  }
  impl_->gz = gzdopen(fd, "rb");
  if (!impl_->gz) {
    ::close(fd);
    throw InputError(path, 0, "cannot open: out of memory in zlib");
  }
  gzbuffer(impl_->gz, kBlock);
  impl_->buf.resize(kBlock);
}

LineReader::~LineReader() = default;

std::size_t LineReader::max_line_bytes() {
  static const std::size_t limit = [] {
    const char* env = std::getenv("CRFX_MAX_LINE_MB");
    char* end = nullptr;
    const unsigned long mb = env ? std::strtoul(env, &end, 10) : 0;
    return (env && end && *end == '\0' && mb > 0 ? std::size_t(mb) : kDefaultMaxLineMB) << 20;
  }();
  return limit;
}

bool LineReader::next(std::string& line) {
  Impl& s = *impl_;
  line.clear();
  bool any = false;  // some byte (possibly just the '\n') belongs to this line
  for (;;) {
    if (s.pos == s.end) {
      if (s.eof) break;
      const int n = gzread(s.gz, s.buf.data(), static_cast<unsigned>(s.buf.size()));
      int errnum = Z_OK;
      const char* msg = gzerror(s.gz, &errnum);
      // A truncated gzip stream is reported as Z_BUF_ERROR while gzread still returns the bytes
      // it had, so the error state is checked on every call, not only when n < 0.
      if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
        const std::string why = errnum == Z_ERRNO ? std::strerror(errno) : (msg ? msg : "unknown");
        throw InputError(path_, line_no_ + 1, "read error (corrupt or truncated file?): " + why);
      }
      s.pos = 0;
      s.end = static_cast<std::size_t>(n);
      if (n == 0) {
        s.eof = true;
        break;
      }
    }
    const char* begin = s.buf.data() + s.pos;
    const std::size_t avail = s.end - s.pos;
    const void* nl = std::memchr(begin, '\n', avail);
    const std::size_t take =
        nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - begin) : avail;
    line.append(begin, take);
    any = true;
    if (line.size() > max_line_bytes())
      throw InputError(path_, line_no_ + 1,
                       "a line longer than " + std::to_string(max_line_bytes() >> 20) +
                           " MiB (a binary or corrupt file? CRFX_MAX_LINE_MB raises the limit)");
    if (nl) {
      s.pos += take + 1;
      break;
    }
    s.pos = s.end;
  }
  if (!any) return false;
  ++line_no_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (std::memchr(line.data(), '\0', line.size()))
    throw InputError(path_, line_no_, "NUL byte in line (binary file?)");
  return true;
}

void split_whitespace(const std::string& line, std::vector<std::string>& out) {
  // Reuses the strings already in `out` (their capacity) — callers keep one vector per file.
  std::size_t n = 0;
  const char* p = line.data();
  const char* const e = p + line.size();
  while (p < e) {
    while (p < e && (*p == ' ' || *p == '\t')) ++p;
    if (p == e) break;
    const char* b = p;
    while (p < e && *p != ' ' && *p != '\t') ++p;
    if (n < out.size())
      out[n].assign(b, p);
    else
      out.emplace_back(b, p);
    ++n;
  }
  out.resize(n);
}

}  // namespace crfx
