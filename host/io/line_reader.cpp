// LineReader: plain or gzip-compressed text, one line at a time.
//
// The file is opened with open(2) (so that a directory or a missing file is reported with the
// system's own words). A regular file that does not start with gzip's signature is read with
// read(2) itself; anything else (a .gz file, a pipe, standard input) is handed to zlib with
// gzdopen, which reads non-gzip streams transparently. (Thousands of small documents in one
// `crfx tag` run each pay zlib's set-up otherwise.)
// Bytes come in through read(2) or gzread into a block buffer and lines are cut with memchr, so a line
// may be arbitrarily long (it grows in the caller's std::string) and an embedded NUL byte can be
// seen (gzgets would silently cut the line there). The path "-" reads standard input (plain or
// gzip as well); messages then name the file "-".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "io/text_chunks.hpp"

namespace crfx {

namespace {
constexpr std::size_t kBlock = 1 << 18;  // bytes per gzread
constexpr std::size_t kMinBlock = 1 << 12;  // … at least, for a small file
}  // namespace

struct LineReader::Impl {
  gzFile gz = nullptr;  // null: a plain file read with read(2) from fd
  int fd = -1;
  std::uint64_t offset = 0;  // bytes read from fd
  std::vector<char> buf;  // [block] (decompressed) bytes; [pos, end) not yet returned
  std::size_t pos = 0;
  std::size_t end = 0;
  bool eof = false;
  std::string truncated;  // a truncated gzip stream's error, raised at the read after its last bytes

  ~Impl() {
    if (gz) gzclose(gz);  // (closes fd)
    else if (fd >= 0) ::close(fd);
  }
  /// Up to `n` bytes into `p`; 0 at the end. Throws the reader's error through `fail`.
  template <class Fail>
  std::size_t read(char* p, std::size_t n, Fail fail) {
    if (!gz) {
      for (;;) {
        const ssize_t got = ::read(fd, p, n);
        if (got >= 0) {
          offset += std::uint64_t(got);
          // A regular file gives fewer bytes than asked only at its end: no read(2) more just
          // to be told so (a short document is then one read, not two).
          if (std::size_t(got) < n) eof = true;
          return std::size_t(got);
        }
        if (errno != EINTR) fail(std::string(std::strerror(errno)));
      }
    }
    if (!truncated.empty()) fail(truncated);
    const int got = gzread(gz, p, static_cast<unsigned>(n));
    int errnum = Z_OK;
    const char* msg = gzerror(gz, &errnum);
    // A truncated gzip stream is reported as Z_BUF_ERROR while gzread still returns the bytes
    // it had, so the error state is checked on every call, not only when got < 0.
    if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      std::string why = errnum == Z_ERRNO ? std::string(std::strerror(errno)) : std::string(msg ? msg : "unknown");
      // zlib prefixes its message with the name given to gzdopen, "<fd:3>: ": the caller names the file.
      if (why.compare(0, 4, "<fd:") == 0 && why.find(">: ") != std::string::npos) why.erase(0, why.find(">: ") + 3);
      // The bytes before a truncation are the file's own: they are returned, and the error comes
      // with the next read, at the line where the data stops. Corrupt data (Z_DATA_ERROR) fails
      // at once: the bytes zlib gave before noticing may be garbage.
      if (errnum == Z_BUF_ERROR && got > 0) {
        truncated = why;
        return std::size_t(got);
      }
      fail(why);
    }
    return std::size_t(got);
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
  std::size_t block = kBlock;
  if (S_ISREG(st.st_mode)) {
    // A small file gets a small buffer: a run over thousands of short documents opens one
    // reader each, and 256 KiB allocated and zero-filled per file would cost more than reading.
    if (std::uint64_t(st.st_size) < kBlock) block = std::max<std::size_t>(kMinBlock, std::size_t(st.st_size) + 1);
    // The first block read here tells plain text from gzip's signature (1f 8b).
    impl_->fd = fd;
    impl_->buf.resize(block);
    impl_->end = impl_->read(impl_->buf.data(), block, [&](const std::string& why) {
      throw InputError(path, 0, "cannot read: " + why);
    });
    const auto* b = reinterpret_cast<const unsigned char*>(impl_->buf.data());
    if (impl_->end < 2 || b[0] != 0x1f || b[1] != 0x8b) return;  // plain text, its first block read
    impl_->fd = -1;
    impl_->end = 0;
    impl_->eof = false;
    block = kBlock;
    if (::lseek(fd, 0, SEEK_SET) != 0) {
      const int e = errno;
      ::close(fd);
      throw InputError(path, 0, std::string("cannot read: ") + std::strerror(e));
    }
  }
  impl_->gz = gzdopen(fd, "rb");
  if (!impl_->gz) {
    ::close(fd);
    throw InputError(path, 0, "cannot open: out of memory in zlib");
  }
  gzbuffer(impl_->gz, static_cast<unsigned>(block));
  impl_->buf.resize(block);
}

LineReader::~LineReader() = default;

std::uint64_t LineReader::bytes_read() const {
  if (!impl_->gz) return impl_->offset;
  const auto off = gzoffset(impl_->gz);
  return off < 0 ? 0 : std::uint64_t(off);
}

std::size_t LineReader::max_line_bytes() {
  static const std::size_t limit = [] {
    const char* env = std::getenv("CRFX_MAX_LINE_MB");
    char* end = nullptr;
    const unsigned long mb = env ? std::strtoul(env, &end, 10) : 0;
    return (env && end && *end == '\0' && mb > 0 ? std::size_t(mb) : kDefaultMaxLineMB) << 20;
  }();
  return limit;
}

std::string nul_byte_problem() { return "NUL byte in line (binary file?)"; }

std::string line_too_long_problem() {
  return "a line longer than " + std::to_string(LineReader::max_line_bytes() >> 20) +
         " MiB (a binary or corrupt file? CRFX_MAX_LINE_MB raises the limit)";
}

bool LineReader::next(std::string& line) {
  Impl& s = *impl_;
  line.clear();
  bool any = false;  // some byte (possibly just the '\n') belongs to this line
  for (;;) {
    if (s.pos == s.end) {
      if (s.eof) break;
      const std::size_t n = s.read(s.buf.data(), s.buf.size(), [&](const std::string& why) {
        throw InputError(path_, line_no_ + 1, "read error (corrupt or truncated file?): " + why);
      });
      s.pos = 0;
      s.end = n;
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
    if (line.size() > max_line_bytes()) throw InputError(path_, line_no_ + 1, line_too_long_problem());
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
    throw InputError(path_, line_no_, nul_byte_problem());
  return true;
}

std::size_t LineReader::read_bytes(char* p, std::size_t n, std::size_t line) {
  Impl& s = *impl_;
  if (s.pos < s.end) {
    const std::size_t take = std::min(n, s.end - s.pos);
    std::memcpy(p, s.buf.data() + s.pos, take);
    s.pos += take;
    return take;
  }
  if (s.eof) return 0;
  const std::size_t got = s.read(p, n, [&](const std::string& why) {
    throw InputError(path_, line, "read error (corrupt or truncated file?): " + why);
  });
  if (got == 0) s.eof = true;
  return got;
}

void split_whitespace(const std::string& line, std::vector<std::string>& out) {
  // The columns as views (text_chunks.cpp), then copied into the strings already in `out`, reusing
  // their capacity — callers keep one vector per file.
  thread_local std::vector<std::string_view> columns;
  split_whitespace(std::string_view(line), columns);
  const std::size_t n = columns.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i < out.size())
      out[i].assign(columns[i].data(), columns[i].size());
    else
      out.emplace_back(columns[i]);
  }
  out.resize(n);
}

}  // namespace crfx
