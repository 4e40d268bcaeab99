// crfx — checkpoint files (crfx/internal/checkpoint.hpp).
//
// Layout (little-endian, as the machines crfx runs on):
//   "crfx checkpoint\n"  u32 format version
//   records  u8 kind, u32 name length, name, u64 count, payload
//            kind 'K' a key, 'N' a note (payload: the value's bytes), then the state's fields:
//            'D' doubles (count × 8 bytes), 'I' integers (count × 8 bytes), 'T' text (count bytes),
//            and 'E' (empty name, count 0) after the last field
//   u64      FNV-1a of every byte before it
// A reader verifies the checksum over the whole file first (one streamed pass), so a truncated or
// damaged file is refused before any state is restored.
#include "crfx/internal/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "util/fnv.hpp"

namespace crfx {

namespace {

constexpr char kMagic[] = "crfx checkpoint\n";
constexpr std::size_t kMagicSize = sizeof kMagic - 1;
constexpr std::uint32_t kFormatVersion = 1;

const char* kind_name(char kind) {
  switch (kind) {
    case 'D': return "real numbers";
    case 'I': return "integers";
    case 'T': return "text";
    case 'K': return "a key";
    case 'N': return "a note";
    case 'E': return "the end of the state";
    default: return "an unknown record";
  }
}

/// The saving archive: each field becomes a record through the sink, checksummed on the way.
class Writer final : public StateArchive {
 public:
  explicit Writer(const std::function<void(const char*, std::size_t)>& sink) : sink_(sink) {}
  bool restoring() const override { return false; }
  void doubles(const char* name, std::vector<double>& v) override {
    record('D', name, v.size(), reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  void integers(const char* name, std::vector<std::uint64_t>& v) override {
    record('I', name, v.size(), reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::uint64_t));
  }
  void text(const char* name, std::string& s) override { record('T', name, s.size(), s.data(), s.size()); }

  void put(const char* p, std::size_t n) {
    fnv_.add(p, n);
    sink_(p, n);
  }
  void record(char kind, const std::string& name, std::uint64_t count, const char* payload, std::size_t bytes) {
    const std::uint32_t len = std::uint32_t(name.size());
    put(&kind, 1);
    put(reinterpret_cast<const char*>(&len), sizeof len);
    put(name.data(), name.size());
    put(reinterpret_cast<const char*>(&count), sizeof count);
    if (bytes) put(payload, bytes);
  }
  std::uint64_t checksum() const { return fnv_.h; }

 private:
  const std::function<void(const char*, std::size_t)>& sink_;
  Fnv64 fnv_;
};

}  // namespace

// ---- StateArchive's conveniences ------------------------------------------------------------

void StateArchive::value(const char* name, double& x) {
  std::vector<double> v{x};
  doubles(name, v);
  if (restoring()) {
    if (v.size() != 1) throw Error(std::string("checkpoint: field '") + name + "' is not one number");
    x = v[0];
  }
}

void StateArchive::value(const char* name, std::uint64_t& x) {
  std::vector<std::uint64_t> v{x};
  integers(name, v);
  if (restoring()) {
    if (v.size() != 1) throw Error(std::string("checkpoint: field '") + name + "' is not one integer");
    x = v[0];
  }
}

void StateArchive::values(const char* name, std::vector<std::uint32_t>& v) {
  std::vector<std::uint64_t> w(v.begin(), v.end());
  integers(name, w);
  if (restoring()) v.assign(w.begin(), w.end());
}

void StateArchive::values(const char* name, std::vector<char>& v) {
  std::string s(v.begin(), v.end());
  text(name, s);
  if (restoring()) v.assign(s.begin(), s.end());
}

void StateArchive::vector(const char* name, Backend& backend, Vector& v) {
  std::vector<double> host;
  if (!restoring()) host = to_host(backend, v);
  doubles(name, host);
  if (restoring()) {
    if (host.size() != v.size())
      throw Error(std::string("checkpoint: vector '") + name + "' holds " + std::to_string(host.size()) +
                  " values, the model has " + std::to_string(v.size()));
    backend.write(v, host.data());
  }
}

void StateArchive::bad_engine(const char* name) {
  throw Error(std::string("checkpoint: field '") + name + "' is not the state of a random number generator");
}

// ---- writing --------------------------------------------------------------------------------

void write_checkpoint(const std::function<void(const char*, std::size_t)>& sink, const CheckpointKeys& keys,
                      const CheckpointKeys& notes, const StateFn& state) {
  Writer w(sink);
  w.put(kMagic, kMagicSize);
  w.put(reinterpret_cast<const char*>(&kFormatVersion), sizeof kFormatVersion);
  for (const auto& [name, value] : keys) w.record('K', name, value.size(), value.data(), value.size());
  for (const auto& [name, value] : notes) w.record('N', name, value.size(), value.data(), value.size());
  state(w);
  w.record('E', "", 0, nullptr, 0);
  const std::uint64_t sum = w.checksum();
  sink(reinterpret_cast<const char*>(&sum), sizeof sum);
}

// ---- reading --------------------------------------------------------------------------------

/// The restoring archive over the file's records, read in order.
class Checkpoint::Reader final : public StateArchive {
 public:
  Reader(const std::string& path, std::uint64_t end) : path_(path), end_(end), in_(path, std::ios::binary) {
    if (!in_) throw InputError(path_, 0, "cannot open the checkpoint: " + std::string(std::strerror(errno)));
  }
  bool restoring() const override { return true; }

  struct Header {
    char kind = 0;
    std::string name;
    std::uint64_t count = 0;
  };

  void read(char* p, std::size_t n) {
    if (std::uint64_t(in_.tellg()) + n > end_ || !in_.read(p, std::streamsize(n)))
      throw InputError(path_, 0, "the checkpoint ends in the middle of a record");
  }
  Header header() {
    Header h;
    std::uint32_t len = 0;
    read(&h.kind, 1);
    read(reinterpret_cast<char*>(&len), sizeof len);
    if (len > 4096) throw InputError(path_, 0, "a checkpoint record has an implausible name length");
    h.name.resize(len);
    read(h.name.data(), len);
    read(reinterpret_cast<char*>(&h.count), sizeof h.count);
    return h;
  }
  /// The payload of `count` elements of `size` bytes, bounded by what the file holds.
  template <class T>
  void payload(const Header& h, std::vector<T>& out) {
    if (h.count > (end_ - std::uint64_t(in_.tellg())) / sizeof(T))
      throw InputError(path_, 0, "the checkpoint ends in the middle of field '" + h.name + "'");
    out.resize(h.count);
    read(reinterpret_cast<char*>(out.data()), h.count * sizeof(T));
  }
  std::string text_payload(const Header& h) {
    std::vector<char> v;
    payload(h, v);
    return std::string(v.begin(), v.end());
  }

  /// The next record, which must be a state field of `kind` called `name`.
  Header field(char kind, const char* name) {
    Header h = pending_ ? *pending_ : header();
    pending_.reset();
    if (h.kind != kind || h.name != name)
      throw Error("checkpoint " + path_ + ": the trainer expects field '" + name + "' (" + kind_name(kind) +
                  ") where the checkpoint has " +
                  (h.kind == 'E' ? std::string("no more fields") : "'" + h.name + "' (" + kind_name(h.kind) + ")") +
                  ": it was written by another trainer or another crfx");
    return h;
  }
  void doubles(const char* name, std::vector<double>& v) override { payload(field('D', name), v); }
  void integers(const char* name, std::vector<std::uint64_t>& v) override { payload(field('I', name), v); }
  void text(const char* name, std::string& s) override { s = text_payload(field('T', name)); }

  std::unique_ptr<Header> pending_;  // a record read ahead (the first state field, after the notes)
  std::string path_;
  std::uint64_t end_;  // where the checksum starts
  std::ifstream in_;
};

Checkpoint::Checkpoint(const std::string& path) : path_(path) {
  // Pass 1: the checksum over everything before its last 8 bytes.
  std::uint64_t size = 0, stored = 0;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw InputError(path, 0, "cannot open the checkpoint: " + std::string(std::strerror(errno)));
    size = std::uint64_t(in.tellg());
    char magic[kMagicSize] = {};
    in.seekg(0);
    if (size < kMagicSize + 4 + 8 || !in.read(magic, kMagicSize) || std::memcmp(magic, kMagic, kMagicSize) != 0)
      throw InputError(path, 0, "not a crfx checkpoint (crfx train --checkpoint writes them)");
    in.seekg(0);
    Fnv64 fnv;
    std::vector<char> buf(1 << 20);
    for (std::uint64_t left = size - 8; left > 0;) {
      const std::size_t n = std::size_t(std::min<std::uint64_t>(left, buf.size()));
      if (!in.read(buf.data(), std::streamsize(n))) throw InputError(path, 0, "cannot read the checkpoint");
      fnv.add(buf.data(), n);
      left -= n;
    }
    in.read(reinterpret_cast<char*>(&stored), sizeof stored);
    if (!in || stored != fnv.h)
      throw InputError(path, 0, "the checkpoint is damaged or incomplete (its checksum does not match)");
  }
  // Pass 2: the header, the keys and notes; the state stays in the file until state() reads it.
  reader_ = std::make_unique<Reader>(path, size - 8);
  char magic[kMagicSize];
  std::uint32_t version = 0;
  reader_->read(magic, kMagicSize);
  reader_->read(reinterpret_cast<char*>(&version), sizeof version);
  if (version != kFormatVersion)
    throw InputError(path, 0, "checkpoint format " + std::to_string(version) + "; this crfx reads format " +
                                  std::to_string(kFormatVersion));
  for (;;) {
    Reader::Header h = reader_->header();
    if (h.kind == 'K') {
      keys_.emplace_back(h.name, reader_->text_payload(h));
    } else if (h.kind == 'N') {
      notes_.emplace_back(h.name, reader_->text_payload(h));
    } else {
      reader_->pending_ = std::make_unique<Reader::Header>(h);
      break;
    }
  }
}

Checkpoint::~Checkpoint() = default;

std::string Checkpoint::note(const std::string& name) const {
  for (const auto& [n, v] : notes_)
    if (n == name) return v;
  return "";
}

void Checkpoint::check(const CheckpointKeys& now) const {
  std::string diff;
  auto find = [](const CheckpointKeys& keys, const std::string& name) -> const std::string* {
    for (const auto& [n, v] : keys)
      if (n == name) return &v;
    return nullptr;
  };
  for (const auto& [name, value] : keys_) {
    const std::string* v = find(now, name);
    if (!v)
      diff += "\n  " + name + ": " + value + " in the checkpoint, not part of this run";
    else if (*v != value)
      diff += "\n  " + name + ": " + value + " in the checkpoint, " + *v + " now";
  }
  for (const auto& [name, value] : now)
    if (!find(keys_, name)) diff += "\n  " + name + ": not in the checkpoint, " + value + " now";
  if (!diff.empty())
    throw Error("checkpoint " + path_ + " was made by another run; resume with the data, template and settings "
                "it was made with:" + diff);
}

StateArchive& Checkpoint::state() { return *reader_; }

void Checkpoint::finish() {
  Reader::Header h = reader_->pending_ ? *reader_->pending_ : reader_->header();
  reader_->pending_.reset();
  if (h.kind != 'E')
    throw Error("checkpoint " + path_ + ": field '" + h.name + "' was not read: it was written by another trainer");
}

}  // namespace crfx
