// The model file (layout in crfx/model.hpp).
//
//   magic "CRFXMODL" | u32 version: 1 (sparse weights, WGHT) or 2 (dense weights, WDNS)
//   "HEAD" u64 28 | u32 format (0 conll, 1 crfsuite) | u64 feature_columns | u32 L | u32 A | u32 E
//                 | u32 transitions (0 / 1)
//   "TMPL" u64 n  | string: the template source (conll models only)
//   "LABL" u64 n  | u32 count | count × string        (count = L)
//   "ATTR" u64 n  | u32 count | count × string        (count = A)
//   "EDGE" u64 n  | u32 count | count × string        (count = E)
//   "WGHT" u64 n  | u64 count | count × (u64 index, u64 IEEE-754 bits), index strictly ascending
//   or, in version 2 instead:
//   "WDNS" u64 n  | u64 count | count × u64 IEEE-754 bits: every weight, count = A·L + L² + E·L²
//   "CRC " u64 4  | u32 CRC-32 (zlib) of every byte before "CRC "
// Integers are little-endian; a string is u32 length + bytes. Sections are written in this order;
// a reader accepts them in any order, each at most once. The CRC section must end the file.
//
// Saving drops every state / edge attribute whose weights are all zero (the survivors keep their
// old order) and moves the weights to the compact layout, streaming the bytes to the file through
// a 1 MiB buffer (section lengths are computed first; nothing model-sized is held in memory); labels and the
// transition block stay whole. Every weight whose bit pattern is not all-zero is stored (a -0.0
// inside a kept block survives), so save → load → save gives the same bytes. The writer picks the
// smaller encoding: dense (8 bytes a weight; version 2) when more than half the kept weights are
// stored, as in an L2 model, else sparse (16 bytes a stored weight; version 1, so a sparse file
// reads in every crfx that reads models).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

#include "crfx/error.hpp"
#include "crfx/model.hpp"
#include "crfx/output.hpp"
#include "util/huge_pages.hpp"

namespace crfx {

namespace {

constexpr char kMagic[8] = {'C', 'R', 'F', 'X', 'M', 'O', 'D', 'L'};
constexpr std::uint32_t kVersion = 1;       // sparse weights (WGHT)
constexpr std::uint32_t kVersionDense = 2;  // dense weights (WDNS)
constexpr std::size_t kHeadBytes = 4 + 8 + 4 + 4 + 4 + 4;
constexpr std::size_t kCrcSectionBytes = 4 + 8 + 4;

std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double double_of(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

/// CRC-32 (zlib) of [data, data + n), continuing from `crc` (a whole-buffer CRC by default).
uLong crc_of(const char* data, std::size_t n, uLong crc = ::crc32(0L, Z_NULL, 0)) {
  while (n > 0) {
    const uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return crc;
}

// ---- writing -------------------------------------------------------------------------------

/// Model bytes to a sink through a 1 MiB buffer, with the CRC-32 of everything written so far.
/// Sections are written with their length known up front (so a model streams to its file
/// without being held in memory); end() checks that the length was right.
class Writer {
 public:
  using Sink = std::function<void(const char*, std::size_t)>;
  explicit Writer(Sink sink) : sink_(std::move(sink)) { buf_.reserve(kBuffer); }

  void bytes(const char* p, std::size_t n) {
    buf_.append(p, n);
    if (buf_.size() >= kBuffer) flush();
  }
  void u32(std::uint32_t v) {
    char b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    bytes(b, 4);
  }
  void u64(std::uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    bytes(b, 8);
  }
  static std::uint64_t str_size(const std::string& s) { return 4 + s.size(); }
  void str(const std::string& s) {
    if (s.size() > std::numeric_limits<std::uint32_t>::max())
      throw Error("cannot save model: a string of " + std::to_string(s.size()) + " bytes");
    u32(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  /// Starts a section of `length` bytes (after its tag and length fields).
  void begin(const char* tag, std::uint64_t length) {
    bytes(tag, 4);
    u64(length);
    section_end_ = written() + length;
  }
  void end() const {
    if (written() != section_end_) throw Error("internal: model section length mismatch");
  }
  /// The strings of `d` whose `id[i]` is not Dictionary::kNone (all when `id` is null), in id
  /// order, as a section: count, then (length, bytes) per string.
  void dictionary(const char* tag, const Dictionary& d, const std::vector<std::uint32_t>* id = nullptr) {
    std::uint64_t length = 4;
    std::uint32_t count = 0;
    for (std::size_t i = 0; i < d.size(); ++i)
      if (!id || (*id)[i] != Dictionary::kNone) {
        length += str_size(d.at(std::uint32_t(i)));
        ++count;
      }
    begin(tag, length);
    u32(count);
    for (std::size_t i = 0; i < d.size(); ++i)
      if (!id || (*id)[i] != Dictionary::kNone) str(d.at(std::uint32_t(i)));
    end();
  }
  /// CRC-32 of every byte written so far (flushes the buffer).
  std::uint32_t crc() {
    flush();
    return static_cast<std::uint32_t>(crc_);
  }
  void flush() {
    if (buf_.empty()) return;
    crc_ = crc_of(buf_.data(), buf_.size(), crc_);
    sink_(buf_.data(), buf_.size());
    flushed_ += buf_.size();
    buf_.clear();
  }

 private:
  static constexpr std::size_t kBuffer = std::size_t(1) << 20;
  std::uint64_t written() const { return flushed_ + buf_.size(); }
  Sink sink_;
  std::string buf_;
  std::uint64_t flushed_ = 0, section_end_ = 0;
  uLong crc_ = ::crc32(0L, Z_NULL, 0);
};

/// Throws unless the weight vector fits the feature space (used by save and dump).
void check_model(const Model& model, const char* what) {
  const Dims d = model.features.dims();
  if (model.weights.size() != d.num_weights()) {
    throw Error(std::string(what) + ": the model has " + std::to_string(model.weights.size()) +
                " weights but its feature space needs " + std::to_string(d.num_weights()));
  }
}

// ---- reading -------------------------------------------------------------------------------

/// Bounds-checked little-endian reads over [data, data + size); every failure is an InputError
/// naming the file (line 0) and, inside a section, the section.
class Reader {
 public:
  Reader(const std::string& path, const char* data, std::size_t size, std::string where)
      : path_(path), data_(data), size_(size), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_, 0, where_.empty() ? problem : where_ + ": " + problem);
  }
  std::size_t left() const { return size_ - pos_; }
  std::size_t pos() const { return pos_; }
  void need(std::size_t n, const char* what) const {
    if (n > left())
      fail(std::string(what) + " needs " + std::to_string(n) + " bytes but only " +
           std::to_string(left()) + " remain (truncated or corrupt)");
  }
  std::uint32_t u32(const char* what) {
    need(4, what);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  std::uint64_t u64(const char* what) {
    need(8, what);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  const char* bytes(std::size_t n, const char* what) {
    need(n, what);
    const char* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  std::string str(const char* what) {
    const std::uint32_t n = u32(what);
    return std::string(bytes(n, what), n);
  }
  void expect_end() const {
    if (left() != 0) fail(std::to_string(left()) + " unexpected bytes at the end");
  }

 private:
  const std::string& path_;
  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string where_;
};

/// A file's bytes in a buffer that is never zero-filled first: a model file is tens of MB, and
/// zeroing (std::string) plus 4 KiB page faults cost more than reading it did.
struct FileBytes {
  std::unique_ptr<char[]> bytes;
  std::size_t length = 0;
  const char* data() const { return bytes.get(); }
  std::size_t size() const { return length; }
  bool empty() const { return length == 0; }
};

FileBytes read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path, 0, std::string("cannot open model file: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path, 0, "not a regular file");
  }
  // Read straight into a buffer of the file's size (grown should the file grow meanwhile).
  std::size_t capacity = static_cast<std::size_t>(st.st_size) + 1;
  FileBytes file;
  auto allocate = [&](std::size_t n) {
    try {
      std::unique_ptr<char[]> p(new char[n]);  // uninitialised
      advise_huge_pages(p.get(), n);
      return p;
    } catch (const std::bad_alloc&) {
      ::close(fd);
      throw InputError(path, 0, "model file too large to load (" + std::to_string(n) + " bytes)");
    }
  };
  file.bytes = allocate(capacity);
  while (true) {
    if (file.length == capacity) {
      std::unique_ptr<char[]> bigger = allocate(2 * capacity);
      std::memcpy(bigger.get(), file.bytes.get(), file.length);
      file.bytes = std::move(bigger);
      capacity *= 2;
    }
    const ssize_t n = ::read(fd, file.bytes.get() + file.length, capacity - file.length);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path, 0, std::string("cannot read model file: ") + std::strerror(err));
    }
    if (n == 0) break;
    file.length += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return file;
}

std::string printable_tag(const char* tag) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = static_cast<unsigned char>(tag[i]);
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      s += hex;
    }
  }
  return s;
}

/// A section's payload inside the file buffer.
struct Span {
  const char* begin = nullptr;
  std::size_t length = 0;
  const char* data() const { return begin; }
  std::size_t size() const { return length; }
};

Dictionary read_dictionary(const std::string& path, const Span& payload, const char* tag,
                           std::uint32_t expected, const char* head_name, const char* noun) {
  Reader r(path, payload.data(), payload.size(), std::string("section ") + tag);
  const std::uint32_t n = r.u32("the string count");
  if (n != expected) {
    r.fail("holds " + std::to_string(n) + " " + noun + "s but HEAD says " + head_name + " = " +
           std::to_string(expected));
  }
  if (std::uint64_t(n) * 4 > r.left()) r.fail(std::to_string(n) + " strings cannot fit in the section");
  std::vector<std::string> strings;
  strings.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) strings.push_back(r.str("a string"));
  r.expect_end();
  Dictionary d;
  const std::size_t duplicate = d.assign(std::move(strings));
  if (duplicate != Dictionary::kNoDuplicate) {
    Reader again(path, payload.data(), payload.size(), std::string("section ") + tag);
    again.u32("the string count");
    std::string s;
    for (std::size_t i = 0; i <= duplicate; ++i) s = again.str("a string");
    r.fail("duplicate " + std::string(noun) + " '" + s + "'");
  }
  d.freeze();
  return d;
}

/// a·b + c without overflow, or false.
bool mul_add(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t& out) {
  if (a != 0 && b > (std::numeric_limits<std::uint64_t>::max() - c) / a) return false;
  out = a * b + c;
  return true;
}

[[noreturn]] void fail_model(const std::string& path, const std::string& problem) {
  throw InputError(path, 0, problem);
}

std::string weight_text(double w) {
  char buf[400];  // %.6f of ±DBL_MAX needs 317 characters + NUL
  std::snprintf(buf, sizeof buf, "%.6f", w);
  return buf;
}

}  // namespace

namespace {

/// The model in the file format, to `out` (see the format at the top of this file).
void write_model(const Model& model, Writer& out) {
  const FeatureSpace& fs = model.features;
  check_model(model, "cannot save model");
  const Dims d = fs.dims();
  if (d.L == 0) throw Error("cannot save model: it has no labels");
  const std::vector<double>& w = model.weights;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i]))
      throw Error("cannot save model: weight " + std::to_string(i) + " is not finite");
  }
  const std::size_t L = d.L, LL = L * L;

  // Attributes with a non-zero weight, renumbered in their old order.
  std::vector<bool> keep_state(d.A, false), keep_edge(d.E, false);
  for (std::size_t a = 0; a < d.A; ++a)
    for (std::size_t y = 0; y < L && !keep_state[a]; ++y) keep_state[a] = w[a * L + y] != 0.0;
  for (std::size_t e = 0; e < d.E; ++e)
    for (std::size_t k = 0; k < LL && !keep_edge[e]; ++k)
      keep_edge[e] = w[d.edge_offset() + e * LL + k] != 0.0;
  // Old id → new id (kNone when dropped), without copying the dictionaries.
  auto renumber = [](const std::vector<bool>& keep, std::uint32_t& kept) {
    std::vector<std::uint32_t> id(keep.size(), Dictionary::kNone);
    kept = 0;
    for (std::size_t i = 0; i < keep.size(); ++i)
      if (keep[i]) id[i] = kept++;
    return id;
  };
  Dims nd = d;
  const std::vector<std::uint32_t> state_id = renumber(keep_state, nd.A);
  const std::vector<std::uint32_t> edge_id = renumber(keep_edge, nd.E);

  // Every weight of the compact layout, in index order (old order = new order): `f` is called
  // with (index, bits). Stored sparsely: those whose bit pattern is not +0.0.
  auto each_kept = [&](auto&& f) {
    auto store = [&](std::size_t index, double v) { f(std::uint64_t(index), bits_of(v)); };
    for (std::size_t a = 0; a < d.A; ++a)
      if (state_id[a] != Dictionary::kNone)
        for (std::size_t y = 0; y < L; ++y) store(std::size_t(state_id[a]) * L + y, w[a * L + y]);
    for (std::size_t k = 0; k < LL; ++k) store(nd.transition_offset() + k, w[d.transition_offset() + k]);
    for (std::size_t e = 0; e < d.E; ++e)
      if (edge_id[e] != Dictionary::kNone)
        for (std::size_t k = 0; k < LL; ++k)
          store(nd.edge_offset() + std::size_t(edge_id[e]) * LL + k, w[d.edge_offset() + e * LL + k]);
  };
  std::uint64_t stored = 0;
  each_kept([&](std::uint64_t, std::uint64_t b) { stored += b != 0; });
  const std::uint64_t total = nd.num_weights();
  const bool dense = 8 * total < 16 * stored;

  out.bytes(kMagic, sizeof kMagic);
  out.u32(dense ? kVersionDense : kVersion);

  out.begin("HEAD", 4 + 8 + 4 * 4);
  out.u32(fs.format == InputFormat::conll ? 0 : 1);
  out.u64(fs.feature_columns);
  out.u32(nd.L);
  out.u32(nd.A);
  out.u32(nd.E);
  out.u32(nd.transitions ? 1 : 0);
  out.end();

  if (fs.format == InputFormat::conll) {
    out.begin("TMPL", Writer::str_size(fs.templ.source()));
    out.str(fs.templ.source());
    out.end();
  }
  out.dictionary("LABL", fs.labels);
  out.dictionary("ATTR", fs.state_attrs, &state_id);
  out.dictionary("EDGE", fs.edge_attrs, &edge_id);

  if (dense) {
    out.begin("WDNS", 8 + 8 * total);
    out.u64(total);
    each_kept([&](std::uint64_t, std::uint64_t b) { out.u64(b); });
  } else {
    out.begin("WGHT", 8 + 16 * stored);
    out.u64(stored);
    each_kept([&](std::uint64_t index, std::uint64_t b) {
      if (b == 0) return;
      out.u64(index);
      out.u64(b);
    });
  }
  out.end();

  const std::uint32_t crc = out.crc();
  out.begin("CRC ", 4);
  out.u32(crc);
  out.end();
  out.flush();
}

}  // namespace

std::string serialize_model(const Model& model) {
  std::string bytes;
  Writer out([&](const char* p, std::size_t n) { bytes.append(p, n); });
  write_model(model, out);
  return bytes;
}

void save_model(const Model& model, const std::string& path) {
  AtomicFile file(path);
  Writer out([&](const char* p, std::size_t n) { file.write(p, n); });
  write_model(model, out);  // streamed: the model is never held in memory as a whole
  file.commit();
}

namespace {

/// The sections of a model file between its version and its checksum, by tag, after the
/// signature, version and checksum are verified (any damage reads as corruption first).
struct ModelSections {
  std::uint32_t version = 0;
  bool dense = false;                   // version 2: weights in WDNS
  std::map<std::string, Span> by_tag;
};

ModelSections read_sections(const std::string& path, const FileBytes& file) {
  auto fail = [&path](const std::string& problem) { fail_model(path, problem); };
  if (file.size() < sizeof kMagic) {
    if (!file.empty() && std::memcmp(file.data(), kMagic, file.size()) == 0)
      fail("truncated file (" + std::to_string(file.size()) + " bytes)");
    fail("not a crfx model (no CRFXMODL signature)");
  }
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) fail("not a crfx model (no CRFXMODL signature)");
  ModelSections out;
  Reader top(path, file.data(), file.size(), "");
  top.bytes(sizeof kMagic, "the signature");
  out.version = top.u32("the format version");
  if (out.version != kVersion && out.version != kVersionDense) {
    fail("unsupported model file version " + std::to_string(out.version) + " (this crfx reads versions " +
         std::to_string(kVersion) + " and " + std::to_string(kVersionDense) + ")");
  }
  out.dense = out.version == kVersionDense;
  const char* const weights_tag = out.dense ? "WDNS" : "WGHT";
  const std::size_t header = sizeof kMagic + 4;
  if (file.size() < header + kCrcSectionBytes) fail("truncated file (no checksum section)");
  const std::size_t crc_at = file.size() - kCrcSectionBytes;
  {
    Reader tail(path, file.data() + crc_at, kCrcSectionBytes, "");
    const char* tag = tail.bytes(4, "the checksum tag");
    const std::uint64_t len = tail.u64("the checksum length");
    if (std::memcmp(tag, "CRC ", 4) != 0 || len != 4)
      fail("truncated file (the checksum section is not at its end)");
    const std::uint32_t stored_crc = tail.u32("the checksum");
    if (stored_crc != crc_of(file.data(), crc_at)) fail("checksum mismatch: file is corrupt");
  }

  static const char* const kKnown[] = {"HEAD", "TMPL", "LABL", "ATTR", "EDGE", "WGHT", "WDNS"};
  Reader body(path, file.data() + header, crc_at - header, "");
  while (body.left() > 0) {
    if (body.left() < 12) fail("truncated section header at byte " + std::to_string(header + body.pos()));
    const char* tag = body.bytes(4, "a section tag");
    const std::string name = printable_tag(tag);
    const std::uint64_t len = body.u64("a section length");
    if (len > body.left()) {
      fail("section " + name + " of " + std::to_string(len) + " bytes overruns the file (" +
           std::to_string(body.left()) + " bytes left)");
    }
    bool known = false;
    for (const char* k : kKnown) known = known || std::memcmp(tag, k, 4) == 0;
    if (!known) fail("unknown section " + name);
    const std::string key(tag, 4);
    if (out.by_tag.count(key)) fail("duplicate section " + name);
    out.by_tag[key] = Span{body.bytes(static_cast<std::size_t>(len), "a section"), static_cast<std::size_t>(len)};
  }
  for (const char* k : {"HEAD", "LABL", "ATTR", "EDGE", weights_tag})
    if (!out.by_tag.count(k)) fail(std::string("missing section ") + k);
  if (out.by_tag.count(out.dense ? "WGHT" : "WDNS"))
    fail(std::string("section ") + (out.dense ? "WGHT" : "WDNS") + " in a version " + std::to_string(out.version) +
         " file (which keeps its weights in " + weights_tag + ")");
  return out;
}

/// HEAD's fields, checked on their own (the cross-checks follow the dictionaries).
struct ModelHead {
  std::uint64_t feature_columns = 0;
  std::uint32_t L = 0, A = 0, E = 0;
  bool transitions = true;
};

ModelHead read_head(const std::string& path, const Span& bytes, FeatureSpace& fs) {
  if (bytes.size() != kHeadBytes)
    fail_model(path, "section HEAD has " + std::to_string(bytes.size()) + " bytes, expected " +
                         std::to_string(kHeadBytes));
  Reader head(path, bytes.data(), bytes.size(), "section HEAD");
  ModelHead h;
  const std::uint32_t format = head.u32("format");
  h.feature_columns = head.u64("feature_columns");
  h.L = head.u32("L");
  h.A = head.u32("A");
  h.E = head.u32("E");
  const std::uint32_t transitions = head.u32("transitions");
  if (format > 1) head.fail("unknown data format " + std::to_string(format));
  if (transitions > 1) head.fail("transitions flag " + std::to_string(transitions) + " is not 0 or 1");
  if (h.L == 0) head.fail("the model has no labels (L = 0)");
  if (h.feature_columns > std::numeric_limits<std::uint32_t>::max())
    head.fail("implausible feature column count " + std::to_string(h.feature_columns));
  h.transitions = transitions == 1;
  fs.format = format == 0 ? InputFormat::conll : InputFormat::crfsuite;
  fs.feature_columns = static_cast<std::size_t>(h.feature_columns);
  return h;
}

/// TMPL: CoNLL models only, re-parsed by the template parser and checked against HEAD.
void read_template(const std::string& path, ModelSections& sections, const ModelHead& h, FeatureSpace& fs) {
  auto fail = [&path](const std::string& problem) { fail_model(path, problem); };
  if (fs.format != InputFormat::conll) {
    if (sections.by_tag.count("TMPL")) fail("a CRFsuite model has a TMPL section");
    if (h.E != 0) fail("a CRFsuite model has E = " + std::to_string(h.E) + " edge attributes");
    return;
  }
  if (!sections.by_tag.count("TMPL")) fail("missing section TMPL (a CoNLL model stores its template)");
  const Span& t = sections.by_tag["TMPL"];
  Reader r(path, t.data(), t.size(), "section TMPL");
  const std::string source = r.str("the template text");
  r.expect_end();
  try {
    fs.templ = FeatureTemplate::parse(source, path);
  } catch (const InputError& e) {
    fail("stored template, line " + std::to_string(e.line()) + ": " + e.problem());
  }
  if (fs.templ.max_column() >= 0 && std::uint64_t(fs.templ.max_column()) >= h.feature_columns) {
    fail("the template uses column " + std::to_string(fs.templ.max_column()) + " but HEAD says " +
         std::to_string(h.feature_columns) + " feature columns");
  }
  if (h.E > 0 && fs.templ.edge_bigrams().empty())
    fail("E = " + std::to_string(h.E) + " edge attributes but the template has no bigram macros");
}

/// The weights section into `model.weights` (all `total` of them, zero where a sparse file
/// stores none): finite values, no transition weight in a model without transitions.
void read_weights(const std::string& path, const Span& wb, bool dense, const Dims& d, std::uint64_t total,
                  Model& model) {
  try {
    model.weights.reserve(static_cast<std::size_t>(total));  // not yet touched:
    advise_huge_pages(model.weights.data(), model.weights.capacity() * sizeof(double));
    model.weights.assign(static_cast<std::size_t>(total), 0.0);
  } catch (const std::bad_alloc&) {
    fail_model(path, "model too large to load (" + std::to_string(total) + " weights)");
  } catch (const std::length_error&) {
    fail_model(path, "model too large to load (" + std::to_string(total) + " weights)");
  }
  const std::uint64_t trans_begin = d.transition_offset(), trans_end = d.edge_offset();
  auto put = [&](Reader& r, std::uint64_t index, double v) {
    if (!std::isfinite(v)) r.fail("non-finite weight at index " + std::to_string(index));
    if (!d.transitions && index >= trans_begin && index < trans_end && v != 0.0)
      r.fail("transition weight at index " + std::to_string(index) + " in a model without transitions");
    model.weights[static_cast<std::size_t>(index)] = v;
  };
  Reader r(path, wb.data(), wb.size(), std::string("section ") + (dense ? "WDNS" : "WGHT"));
  const std::uint64_t count = r.u64("the weight count");
  if (dense) {  // WDNS: every weight
    if (count != total)
      r.fail("holds " + std::to_string(count) + " weights but the model has " + std::to_string(total));
    if (count > r.left() / 8 || count * 8 != r.left()) {
      r.fail("holds " + std::to_string(count) + " weights but has " + std::to_string(r.left()) +
             " bytes for them (8 each)");
    }
    for (std::uint64_t i = 0; i < count; ++i) put(r, i, double_of(r.u64("a weight value")));
    return;
  }
  // WGHT: (index, value) pairs, ascending
  if (count > r.left() / 16 || count * 16 != r.left()) {
    r.fail("holds " + std::to_string(count) + " weights but has " + std::to_string(r.left()) +
           " bytes for them (16 each)");
  }
  std::uint64_t previous = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t index = r.u64("a weight index");
    const double v = double_of(r.u64("a weight value"));
    if (index >= total)
      r.fail("weight index " + std::to_string(index) + " out of range (" + std::to_string(total) + " weights)");
    if (i > 0 && index <= previous)
      r.fail("weight indices not ascending (" + std::to_string(index) + " after " + std::to_string(previous) + ")");
    put(r, index, v);
    previous = index;
  }
}

}  // namespace

Model load_model(const std::string& path) {
  const FileBytes file = read_whole_file(path);
  ModelSections sections = read_sections(path, file);
  Model model;
  FeatureSpace& fs = model.features;
  const ModelHead h = read_head(path, sections.by_tag["HEAD"], fs);
  read_template(path, sections, h, fs);
  fs.labels = read_dictionary(path, sections.by_tag["LABL"], "LABL", h.L, "L", "label");
  fs.state_attrs = read_dictionary(path, sections.by_tag["ATTR"], "ATTR", h.A, "A", "state attribute");
  fs.edge_attrs = read_dictionary(path, sections.by_tag["EDGE"], "EDGE", h.E, "E", "edge attribute");

  const Dims d = fs.dims();
  if (d.transitions != h.transitions) {
    fail_model(path, std::string("HEAD says transitions = ") + (h.transitions ? "1" : "0") + " but the template " +
                         (d.transitions ? "has" : "has no") + " plain B line");
  }
  std::uint64_t LL = 0, total = 0;
  if (!mul_add(h.L, h.L, 0, LL) || !mul_add(h.A, h.L, LL, total) || !mul_add(h.E, LL, total, total) ||
      total > std::numeric_limits<std::size_t>::max() / sizeof(double))
    fail_model(path, "implausible model size (L = " + std::to_string(h.L) + ", A = " + std::to_string(h.A) +
                         ", E = " + std::to_string(h.E) + ")");
  read_weights(path, sections.by_tag[sections.dense ? "WDNS" : "WGHT"], sections.dense, d, total, model);
  return model;
}

std::string dump_model(const Model& model) {
  const FeatureSpace& fs = model.features;
  check_model(model, "cannot dump model");
  const Dims d = fs.dims();
  const std::vector<double>& w = model.weights;
  const std::size_t L = d.L, LL = L * L;
  std::size_t non_zero = 0;
  for (double v : w) non_zero += v != 0.0;

  std::string out;
  out += "MODEL = {\n";
  out += std::string("  format: ") + (fs.format == InputFormat::conll ? "conll" : "crfsuite") + "\n";
  if (fs.format == InputFormat::conll) out += "  feature_columns: " + std::to_string(fs.feature_columns) + "\n";
  out += "  labels: " + std::to_string(d.L) + "\n";
  out += "  state_attributes: " + std::to_string(d.A) + "\n";
  out += "  edge_attributes: " + std::to_string(d.E) + "\n";
  out += std::string("  transitions: ") + (d.transitions ? "yes" : "no") + "\n";
  out += "  weights: " + std::to_string(d.num_weights()) + "\n";
  out += "  non_zero_weights: " + std::to_string(non_zero) + "\n";
  out += "}\n";

  if (fs.format == InputFormat::conll) {
    out += "\nTEMPLATE = {\n";
    const std::string& src = fs.templ.source();
    std::size_t begin = 0;
    while (begin < src.size()) {
      std::size_t end = src.find('\n', begin);
      if (end == std::string::npos) end = src.size();
      std::string line = src.substr(begin, end - begin);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      out += (line.empty() ? "" : "  ") + line + "\n";
      begin = end + 1;
    }
    out += "}\n";
  }

  out += "\nLABELS = {\n";
  for (std::size_t y = 0; y < L; ++y)
    out += "  " + std::to_string(y) + ": " + fs.labels.at(std::uint32_t(y)) + "\n";
  out += "}\n";

  out += "\nTRANSITIONS = {\n";
  for (std::size_t p = 0; p < L; ++p)
    for (std::size_t y = 0; y < L; ++y) {
      const double v = w[d.transition_offset() + p * L + y];
      if (v != 0.0)
        out += "  " + fs.labels.at(std::uint32_t(p)) + " --> " + fs.labels.at(std::uint32_t(y)) + ": " +
               weight_text(v) + "\n";
    }
  out += "}\n";

  out += "\nSTATE_FEATURES = {\n";
  for (std::size_t a = 0; a < d.A; ++a)
    for (std::size_t y = 0; y < L; ++y) {
      const double v = w[a * L + y];
      if (v != 0.0)
        out += "  " + fs.state_attrs.at(std::uint32_t(a)) + " --> " + fs.labels.at(std::uint32_t(y)) +
               ": " + weight_text(v) + "\n";
    }
  out += "}\n";

  out += "\nEDGE_FEATURES = {\n";
  for (std::size_t e = 0; e < d.E; ++e)
    for (std::size_t p = 0; p < L; ++p)
      for (std::size_t y = 0; y < L; ++y) {
        const double v = w[d.edge_offset() + e * LL + p * L + y];
        if (v != 0.0)
          out += "  " + fs.edge_attrs.at(std::uint32_t(e)) + ": " + fs.labels.at(std::uint32_t(p)) +
                 " --> " + fs.labels.at(std::uint32_t(y)) + ": " + weight_text(v) + "\n";
      }
  out += "}\n";
  return out;
}

}  // namespace crfx
