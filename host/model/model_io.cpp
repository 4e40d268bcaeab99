// crfx — the model file: writing (save_model streams it, serialize_model to memory) and
// dump_model; the format is in model_format.hpp, reading in model_read.cpp.
//
// Saving drops every state / edge attribute whose weights are all zero (the survivors keep their
// old order) and moves the weights to the compact layout, streaming the bytes to the file through
// a 1 MiB buffer (section lengths are computed first; nothing model-sized is held in memory); labels and the
// transition block stay whole. Every weight whose bit pattern is not all-zero is stored (a -0.0
// inside a kept block survives), so save → load → save gives the same bytes. The writer picks the
// smaller encoding: dense (8 bytes a weight; version 2) when more than half the kept weights are
// stored, as in an L2 model, else sparse (16 bytes a stored weight; version 1, so a sparse file
// reads in every crfx that reads models).
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
#include "crfx/internal/output.hpp"
#include "crfx/model.hpp"
#include "model/model_format.hpp"

namespace crfx {

using namespace model_file;

namespace {

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

std::string weight_text(double w) {
  char buf[400];  // %.6f of ±DBL_MAX needs 317 characters + NUL
  std::snprintf(buf, sizeof buf, "%.6f", w);
  return buf;
}

}  // namespace

namespace {

/// The model in the file format, to `out` (see the format at the top of this file).
/// What a model file keeps: the attributes with a non-zero weight, renumbered in their old order
/// (old id → new id, kNone when dropped; the dictionaries are not copied), and the kept weight
/// groups in order — their weights are the compact layout's, in index order.
struct Kept {
  Dims dims;                               // the file's: A and E counting the kept attributes
  std::vector<std::uint32_t> state_id, edge_id;
  std::vector<std::uint32_t> groups;
};

Kept kept_of(const Dims& d, const std::vector<double>& w) {
  const WeightGroups wg = d.groups();
  std::vector<bool> keep_state(d.A, false), keep_edge(d.E, false);
  auto any_nonzero = [&](std::uint32_t gid) {
    for (std::size_t k = wg.begin(gid), e = k + wg.size(gid); k < e; ++k)
      if (w[k] != 0.0) return true;
    return false;
  };
  for (std::uint32_t a = 0; a < d.A; ++a) keep_state[a] = any_nonzero(a);
  for (std::uint32_t e = 0; e < d.E; ++e) keep_edge[e] = any_nonzero(wg.edge(e));
  auto renumber = [](const std::vector<bool>& keep, std::uint32_t& kept) {
    std::vector<std::uint32_t> id(keep.size(), Dictionary::kNone);
    kept = 0;
    for (std::size_t i = 0; i < keep.size(); ++i)
      if (keep[i]) id[i] = kept++;
    return id;
  };
  Kept k;
  k.dims = d;
  k.state_id = renumber(keep_state, k.dims.A);
  k.edge_id = renumber(keep_edge, k.dims.E);
  for (std::uint32_t a = 0; a < d.A; ++a)
    if (keep_state[a]) k.groups.push_back(a);
  k.groups.push_back(wg.transitions());
  for (std::uint32_t e = 0; e < d.E; ++e)
    if (keep_edge[e]) k.groups.push_back(wg.edge(e));
  return k;
}

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
  const WeightGroups wg = d.groups();
  const Kept kept = kept_of(d, w);
  const Dims& nd = kept.dims;
  const std::vector<std::uint32_t>& kept_groups = kept.groups;

  // Every weight of the compact layout, in index order (old order = new order): `f` is called
  // with (index, bits). Stored sparsely: those whose bit pattern is not +0.0.
  auto each_kept = [&](auto&& f) {
    std::uint64_t index = 0;
    for (std::uint32_t gid : kept_groups)
      for (std::size_t k = wg.begin(gid), e = k + wg.size(gid); k < e; ++k) f(index++, bits_of(w[k]));
  };
  std::uint64_t stored = 0, total = 0;
  each_kept([&](std::uint64_t, std::uint64_t b) {
    stored += b != 0;
    ++total;
  });
  const bool dense = 8 * total < 16 * stored;

  out.bytes(kMagic, sizeof kMagic);
  out.u32(!wg.dense() ? kVersionLayout : dense ? kVersionDense : kVersion);

  out.begin("HEAD", 4 + 8 + 4 * 4);
  out.u32(fs.format == InputFormat::conll ? 0 : 1);
  out.u64(fs.feature_columns);
  out.u32(nd.L);
  out.u32(nd.A);
  out.u32(nd.E);
  out.u32(nd.transitions ? 1 : 0);
  out.end();
  if (fs.type == ModelType::maxent) {
    if (nd.transitions || nd.E != 0) throw Error("cannot save model: a Maxent model with transitions or edge attributes");
    out.begin("TYPE", 4);
    out.u32(kTypeMaxent);
    out.end();
  }

  if (fs.format == InputFormat::conll) {
    out.begin("TMPL", Writer::str_size(fs.templ.source()));
    out.str(fs.templ.source());
    out.end();
  }
  out.dictionary("LABL", fs.labels);
  out.dictionary("ATTR", fs.state_attrs, &kept.state_id);
  out.dictionary("EDGE", fs.edge_attrs, &kept.edge_id);
  if (!wg.dense()) {  // the kept groups' rows
    out.begin("ROWS", 8 + 4 * kept_groups.size() + 8 + 4 * total);
    out.u64(kept_groups.size());
    for (std::uint32_t gid : kept_groups) out.u32(std::uint32_t(wg.size(gid)));
    out.u64(total);
    for (std::uint32_t gid : kept_groups)
      for (std::size_t k = wg.begin(gid), e = k + wg.size(gid); k < e; ++k) out.u32(wg.slots[k]);
    out.end();
  }

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

std::string dump_model(const Model& model) {
  const FeatureSpace& fs = model.features;
  check_model(model, "cannot dump model");
  const Dims d = fs.dims();
  const std::vector<double>& w = model.weights;
  const std::size_t L = d.L;
  std::size_t non_zero = 0;
  for (double v : w) non_zero += v != 0.0;

  std::string out;
  out += "MODEL = {\n";
  out += std::string("  type: ") + name_of(fs.type) + "\n";
  out += std::string("  format: ") + (fs.format == InputFormat::conll ? "conll" : "crfsuite") + "\n";
  if (fs.format == InputFormat::conll) out += "  feature_columns: " + std::to_string(fs.feature_columns) + "\n";
  out += "  labels: " + std::to_string(d.L) + "\n";
  out += "  state_attributes: " + std::to_string(d.A) + "\n";
  out += "  edge_attributes: " + std::to_string(d.E) + "\n";
  out += std::string("  transitions: ") + (d.transitions ? "yes" : "no") + "\n";
  out += std::string("  layout: ") + (d.dense() ? "all pairs" : "observed pairs") + "\n";
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

  // Dense layout: the non-zero weights; sparse layout: every pair it has (CRFsuite's dump).
  const WeightGroups wg = d.groups();
  auto each = [&](std::uint32_t gid, auto&& line) {
    for_each_weight(wg, gid, [&](std::size_t k, std::size_t slot) {
      if (!wg.dense() || w[k] != 0.0) line(slot, weight_text(w[k]));
    });
  };
  auto pair_text = [&](std::size_t slot) {
    return fs.labels.at(std::uint32_t(slot / L)) + " --> " + fs.labels.at(std::uint32_t(slot % L));
  };
  out += "\nTRANSITIONS = {\n";
  each(wg.transitions(), [&](std::size_t slot, const std::string& v) { out += "  " + pair_text(slot) + ": " + v + "\n"; });
  out += "}\n";

  out += "\nSTATE_FEATURES = {\n";
  for (std::uint32_t a = 0; a < d.A; ++a)
    each(a, [&](std::size_t slot, const std::string& v) {
      out += "  " + fs.state_attrs.at(a) + " --> " + fs.labels.at(std::uint32_t(slot)) + ": " + v + "\n";
    });
  out += "}\n";

  out += "\nEDGE_FEATURES = {\n";
  for (std::uint32_t e = 0; e < d.E; ++e)
    each(wg.edge(e), [&](std::size_t slot, const std::string& v) {
      out += "  " + fs.edge_attrs.at(e) + ": " + pair_text(slot) + ": " + v + "\n";
    });
  out += "}\n";
  return out;
}

}  // namespace crfx