// crfx — the model file: reading (load_model). Every problem is an InputError naming the file
// and the section; the format is in model_format.hpp.
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

#include "crfx/errors.hpp"
#include "crfx/model.hpp"
#include "model/model_format.hpp"
#include "util/huge_pages.hpp"

namespace crfx {

using namespace model_file;

namespace {

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
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    if (!stated) throw InputError(path, 0, std::string("cannot read model file: ") + std::strerror(err));
    throw InputError(path, 0, S_ISDIR(st.st_mode) ? "a directory, not a model file" : "not a regular file");
  }
  // The signature first: a large file that is not a model is refused before it is read whole.
  char head[sizeof kMagic];
  if (::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) && std::memcmp(head, kMagic, sizeof kMagic) != 0) {
    ::close(fd);
    throw InputError(path, 0, "not a crfx model (no CRFXMODL signature)");
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

}  // namespace

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
  if (out.version != kVersion && out.version != kVersionDense && out.version != kVersionLayout) {
    fail("unsupported model file version " + std::to_string(out.version) + " (this crfx reads versions " +
         std::to_string(kVersion) + " to " + std::to_string(kVersionLayout) + ")");
  }
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

  static const char* const kKnown[] = {"HEAD", "TYPE", "TMPL", "LABL", "ATTR", "EDGE", "ROWS", "WGHT", "WDNS"};
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
  // Version 1 keeps its weights in WGHT, 2 in WDNS, 3 in either (and its layout in ROWS).
  out.dense = out.version == kVersionDense || (out.version == kVersionLayout && out.by_tag.count("WDNS"));
  const char* const weights_tag = out.dense ? "WDNS" : "WGHT";
  for (const char* k : {"HEAD", "LABL", "ATTR", "EDGE", weights_tag})
    if (!out.by_tag.count(k)) fail(std::string("missing section ") + k);
  if (out.by_tag.count(out.dense ? "WGHT" : "WDNS"))
    fail(std::string("section ") + (out.dense ? "WGHT" : "WDNS") + " in a version " + std::to_string(out.version) +
         " file (which keeps its weights in " + weights_tag + ")");
  if ((out.version == kVersionLayout) != (out.by_tag.count("ROWS") > 0))
    fail(out.version == kVersionLayout ? "missing section ROWS (a version 3 file stores its layout)"
                                       : "section ROWS in a version " + std::to_string(out.version) + " file");
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
  // Training gives a CoNLL model at least one feature column; without one it cannot tag.
  if (format == 0 && h.feature_columns == 0) head.fail("a CoNLL model with no feature columns (feature_columns = 0)");
  h.transitions = transitions == 1;
  fs.format = format == 0 ? InputFormat::conll : InputFormat::crfsuite;
  fs.feature_columns = static_cast<std::size_t>(h.feature_columns);
  return h;
}

/// TYPE (optional; absent: a CRF): the model type, checked against HEAD — a Maxent model has no
/// transitions and no edge attributes.
void read_type(const std::string& path, ModelSections& sections, const ModelHead& h, FeatureSpace& fs) {
  fs.type = ModelType::crf;
  if (!sections.by_tag.count("TYPE")) return;
  const Span& t = sections.by_tag["TYPE"];
  Reader r(path, t.data(), t.size(), "section TYPE");
  const std::uint32_t type = r.u32("the model type");
  r.expect_end();
  if (type != kTypeMaxent) r.fail("unknown model type " + std::to_string(type));
  if (h.transitions) r.fail("a Maxent model with transitions (HEAD says transitions = 1)");
  if (h.E != 0) r.fail("a Maxent model with E = " + std::to_string(h.E) + " edge attributes");
  fs.type = ModelType::maxent;
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

/// ROWS: the sparse layout of a version 3 file, checked against HEAD's sizes.
std::shared_ptr<const WeightLayout> read_rows(const std::string& path, const Span& bytes, const ModelHead& h) {
  Reader r(path, bytes.data(), bytes.size(), "section ROWS");
  auto layout = std::make_shared<WeightLayout>();
  const std::uint64_t groups = r.u64("the row count");
  if (groups != std::uint64_t(h.A) + 1 + h.E)
    r.fail("holds " + std::to_string(groups) + " rows but HEAD says A + 1 + E = " +
           std::to_string(std::uint64_t(h.A) + 1 + h.E));
  r.need(static_cast<std::size_t>(groups) * 4, "the row sizes");
  layout->offsets.reserve(static_cast<std::size_t>(groups) + 1);
  layout->offsets.push_back(0);
  for (std::uint64_t g = 0; g < groups; ++g) layout->offsets.push_back(layout->offsets.back() + r.u32("a row size"));
  const std::uint64_t count = r.u64("the weight count");
  if (count != layout->offsets.back())
    r.fail("holds " + std::to_string(count) + " slots but its rows add up to " + std::to_string(layout->offsets.back()));
  if (count > r.left() / 4 || count * 4 != r.left())
    r.fail("holds " + std::to_string(count) + " slots but has " + std::to_string(r.left()) + " bytes for them (4 each)");
  layout->slots.resize(static_cast<std::size_t>(count));
  for (auto& slot : layout->slots) slot = r.u32("a slot");
  Dims d;
  d.L = h.L;
  d.A = h.A;
  d.E = h.E;
  d.transitions = h.transitions;
  d.layout = layout;
  try {
    d.check_layout();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  return layout;
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
  read_type(path, sections, h, fs);
  read_template(path, sections, h, fs);
  fs.labels = read_dictionary(path, sections.by_tag["LABL"], "LABL", h.L, "L", "label");
  fs.state_attrs = read_dictionary(path, sections.by_tag["ATTR"], "ATTR", h.A, "A", "state attribute");
  fs.edge_attrs = read_dictionary(path, sections.by_tag["EDGE"], "EDGE", h.E, "E", "edge attribute");

  if (sections.by_tag.count("ROWS")) fs.layout = read_rows(path, sections.by_tag["ROWS"], h);
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
  if (fs.layout) total = d.num_weights();
  read_weights(path, sections.by_tag[sections.dense ? "WDNS" : "WGHT"], sections.dense, d, total, model);
  return model;
}

}  // namespace crfx
