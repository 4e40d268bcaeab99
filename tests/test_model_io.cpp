// The model file: round trips, compaction of zero attributes, validation of damaged files, dump.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/model.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

const char* const kTemplate =
    "# unigrams\n"
    "U00:%x[0,0]\n"
    "U01:%x[0,1]\n"
    "\n"
    "B\n"
    "B01:%x[0,1]\n";

std::uint64_t bits(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

/// A deterministic weight for (attribute string, slot), never zero.
double weight_for(const std::string& s, std::size_t k) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h = (h ^ k) * 1099511628211ull;
  return (double(h % 2000001) - 1000000.0) / 3e5 + (h & 1 ? 1e-3 : -1e-3);
}

/// CoNLL model: 3 labels, state attributes (two of them all-zero), edge attributes (one all-zero).
Model conll_model() {
  Model m;
  FeatureSpace& fs = m.features;
  fs.format = InputFormat::conll;
  fs.templ = FeatureTemplate::parse(kTemplate, "test.template");
  fs.feature_columns = 2;
  for (const char* s : {"B-NP", "I-NP", "O"}) fs.labels.add(s);
  for (const char* s : {"U00:the", "U00:zero", "U01:NN", "U00:dog", "U01:zero2"}) fs.state_attrs.add(s);
  for (const char* s : {"B01:zeroE", "B01:NN", "B01:VB"}) fs.edge_attrs.add(s);
  fs.labels.freeze();
  fs.state_attrs.freeze();
  fs.edge_attrs.freeze();
  const Dims d = fs.dims();
  const std::size_t L = d.L;
  m.weights.assign(d.num_weights(), 0.0);
  for (std::uint32_t a = 0; a < d.A; ++a) {
    const std::string& s = fs.state_attrs.at(a);
    if (s.find("zero") != std::string::npos) continue;
    for (std::size_t y = 0; y < L; ++y) m.weights[a * L + y] = weight_for(s, y);
  }
  for (std::size_t k = 0; k < L * L; ++k) m.weights[d.transition_offset() + k] = weight_for("trans", k);
  for (std::uint32_t e = 0; e < d.E; ++e) {
    const std::string& s = fs.edge_attrs.at(e);
    if (s.find("zero") != std::string::npos) continue;
    for (std::size_t k = 0; k < L * L; ++k) m.weights[d.edge_offset() + e * L * L + k] = weight_for(s, k);
  }
  // Odd values that must survive bit for bit: a zero and a -0.0 inside kept blocks, a subnormal,
  // extremes.
  const std::uint32_t the = fs.state_attrs.find("U00:the"), dog = fs.state_attrs.find("U00:dog");
  m.weights[the * L + 1] = 0.0;
  m.weights[the * L + 2] = -0.0;
  m.weights[dog * L + 0] = 4.9e-324;
  m.weights[dog * L + 1] = -std::numeric_limits<double>::max();
  m.weights[d.transition_offset() + 4] = 0.0;  // I-NP → I-NP
  return m;
}

/// conll_model() with most transition and edge weights zero, so that the file stores its weights
/// sparsely (WGHT, version 1); conll_model() itself is mostly non-zero and is stored densely.
Model sparse_conll_model() {
  Model m = conll_model();
  const Dims d = m.features.dims();
  const std::size_t LL = std::size_t(d.L) * d.L;
  for (std::size_t k = 1; k < LL; ++k) m.weights[d.transition_offset() + k] = 0.0;
  for (std::uint32_t e = 0; e < d.E; ++e)
    for (std::size_t k = 1; k < LL; ++k) m.weights[d.edge_offset() + e * LL + k] = 0.0;
  return m;
}

Model crfsuite_model() {
  Model m;
  FeatureSpace& fs = m.features;
  fs.format = InputFormat::crfsuite;
  for (const char* s : {"PER", "LOC", "O"}) fs.labels.add(s);
  for (const char* s : {"w=John", "w=zero", "w:cap"}) fs.state_attrs.add(s);
  fs.labels.freeze();
  fs.state_attrs.freeze();
  fs.edge_attrs.freeze();
  const Dims d = fs.dims();
  m.weights.assign(d.num_weights(), 0.0);
  for (std::uint32_t a = 0; a < d.A; ++a)
    if (a != 1)
      for (std::size_t y = 0; y < d.L; ++y) m.weights[a * d.L + y] = weight_for(fs.state_attrs.at(a), y);
  for (std::size_t k = 0; k < d.L * d.L; ++k) m.weights[d.transition_offset() + k] = weight_for("t", k);
  return m;
}

/// Checks that `b` holds exactly the non-zero attributes of `a`, in order, with their weights.
void expect_same_model(const Model& a, const Model& b) {
  const FeatureSpace &fa = a.features, &fb = b.features;
  EXPECT_EQ(fa.format, fb.format);
  EXPECT_EQ(fa.feature_columns, fb.feature_columns);
  EXPECT_EQ(fa.templ.source(), fb.templ.source());
  EXPECT_EQ(fa.labels.strings(), fb.labels.strings());
  const Dims da = fa.dims(), db = fb.dims();
  EXPECT_EQ(da.L, db.L);
  EXPECT_EQ(da.transitions, db.transitions);
  ASSERT_EQ(b.weights.size(), db.num_weights());
  const std::size_t L = da.L;
  for (std::size_t k = 0; k < L * L; ++k)
    EXPECT_EQ(bits(a.weights[da.transition_offset() + k]), bits(b.weights[db.transition_offset() + k])) << k;
  // State attributes: b's are a's non-zero ones, in a's order, each with its own weights.
  std::vector<std::string> expected;
  for (std::uint32_t i = 0; i < da.A; ++i) {
    bool nz = false;
    for (std::size_t y = 0; y < L; ++y) nz = nz || a.weights[i * L + y] != 0.0;
    if (nz) expected.push_back(fa.state_attrs.at(i));
  }
  EXPECT_EQ(fb.state_attrs.strings(), expected);
  for (std::uint32_t j = 0; j < db.A; ++j) {
    const std::uint32_t i = fa.state_attrs.find(fb.state_attrs.at(j));
    ASSERT_NE(i, Dictionary::kNone);
    for (std::size_t y = 0; y < L; ++y)
      EXPECT_EQ(bits(a.weights[i * L + y]), bits(b.weights[j * L + y])) << fb.state_attrs.at(j) << " " << y;
  }
  expected.clear();
  for (std::uint32_t i = 0; i < da.E; ++i) {
    bool nz = false;
    for (std::size_t k = 0; k < L * L; ++k) nz = nz || a.weights[da.edge_offset() + i * L * L + k] != 0.0;
    if (nz) expected.push_back(fa.edge_attrs.at(i));
  }
  EXPECT_EQ(fb.edge_attrs.strings(), expected);
  for (std::uint32_t j = 0; j < db.E; ++j) {
    const std::uint32_t i = fa.edge_attrs.find(fb.edge_attrs.at(j));
    ASSERT_NE(i, Dictionary::kNone);
    for (std::size_t k = 0; k < L * L; ++k)
      EXPECT_EQ(bits(a.weights[da.edge_offset() + i * L * L + k]), bits(b.weights[db.edge_offset() + j * L * L + k]))
          << fb.edge_attrs.at(j) << " " << k;
  }
}

// ---- byte surgery on a saved file ----------------------------------------------------------

std::uint64_t get_le(const std::string& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

void put_le(std::string& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

/// Offset of the payload of section `tag` (its u64 length sits just before).
std::size_t section(const std::string& b, const char* tag) {
  std::size_t at = 12;
  while (at + 12 <= b.size()) {
    const std::uint64_t len = get_le(b, at + 4, 8);
    if (b.compare(at, 4, tag) == 0) return at + 12;
    at += 12 + len;
  }
  ADD_FAILURE() << "no section " << tag;
  return 0;
}

/// Recomputes the CRC after an edit, so that the edit itself is what the loader sees.
void reseal(std::string& b) {
  const std::size_t crc_at = b.size() - 16;
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data()), uInt(crc_at));
  put_le(b, b.size() - 4, crc, 4);
}

struct LoadResult {
  bool ok = false;
  std::string problem;
  std::string file;
  std::size_t line = 99;
};

LoadResult try_load(const std::string& bytes) {
  const std::string path = test::temp_path("m.crfx");
  test::write_text(path, bytes);
  LoadResult r;
  r.file = path;
  try {
    load_model(path);
    r.ok = true;
  } catch (const InputError& e) {
    r.problem = e.problem();
    EXPECT_EQ(e.file(), path);
    r.line = e.line();
  }
  return r;
}

void expect_load_error(const std::string& bytes, const std::string& needle) {
  const LoadResult r = try_load(bytes);
  ASSERT_FALSE(r.ok) << "loaded although expected: " << needle;
  EXPECT_EQ(r.line, 0u);
  EXPECT_NE(r.problem.find(needle), std::string::npos) << "problem: " << r.problem << "\nexpected: " << needle;
}

// ---- tests -----------------------------------------------------------------------------------

TEST(ModelIo, SaveLoadRoundTripDropsZeroAttributes) {
  const Model m = conll_model();
  const std::string path = test::temp_path("chunk.model");
  save_model(m, path);
  const Model back = load_model(path);
  expect_same_model(m, back);
  EXPECT_EQ(back.features.state_attrs.strings(), (std::vector<std::string>{"U00:the", "U01:NN", "U00:dog"}));
  EXPECT_EQ(back.features.edge_attrs.strings(), (std::vector<std::string>{"B01:NN", "B01:VB"}));
  EXPECT_EQ(back.features.templ.unigrams().size(), 2u);
  EXPECT_EQ(back.features.templ.edge_bigrams().size(), 1u);
  EXPECT_TRUE(back.features.templ.has_transitions());
  // Renumbered: "U00:dog" was id 3, is id 2; its weights moved with it.
  EXPECT_EQ(back.features.state_attrs.find("U00:dog"), 2u);
  EXPECT_EQ(back.weights[2 * 3 + 0], 4.9e-324);
  EXPECT_TRUE(std::signbit(back.weights[0 * 3 + 2]));  // -0.0 kept as such
  // Loaded dictionaries are frozen.
  EXPECT_TRUE(back.features.labels.frozen());
  EXPECT_TRUE(back.features.state_attrs.frozen());
  EXPECT_TRUE(back.features.edge_attrs.frozen());
  Model copy = back;
  EXPECT_EQ(copy.features.state_attrs.add("U00:new"), Dictionary::kNone);
}

TEST(ModelIo, ResaveGivesIdenticalBytes) {
  const Model m = conll_model();
  const std::string p1 = test::temp_path("a.model"), p2 = test::temp_path("b.model");
  save_model(m, p1);
  const std::string bytes = test::read_text(p1);
  EXPECT_EQ(bytes, serialize_model(m));
  EXPECT_EQ(bytes.compare(0, 8, "CRFXMODL"), 0);
  save_model(load_model(p1), p2);
  EXPECT_EQ(test::read_text(p2), bytes);
}

TEST(ModelIo, CompactModelRoundTripsExactly) {
  // Nothing to drop: the loaded model equals the saved one entirely, weights bit for bit.
  Model m = conll_model();
  const std::string path = test::temp_path("c.model");
  save_model(m, path);
  const Model compact = load_model(path);
  save_model(compact, path);
  const Model again = load_model(path);
  EXPECT_EQ(again.features.state_attrs.strings(), compact.features.state_attrs.strings());
  EXPECT_EQ(again.features.edge_attrs.strings(), compact.features.edge_attrs.strings());
  ASSERT_EQ(again.weights.size(), compact.weights.size());
  EXPECT_EQ(std::memcmp(again.weights.data(), compact.weights.data(), again.weights.size() * sizeof(double)), 0);
}

TEST(ModelIo, CrfsuiteModel) {
  const Model m = crfsuite_model();
  const std::string path = test::temp_path("cs.model");
  save_model(m, path);
  const Model back = load_model(path);
  expect_same_model(m, back);
  EXPECT_EQ(back.features.format, InputFormat::crfsuite);
  EXPECT_EQ(back.features.state_attrs.strings(), (std::vector<std::string>{"w=John", "w:cap"}));
  EXPECT_EQ(test::read_text(path).find("TMPL"), std::string::npos);
  EXPECT_EQ(serialize_model(back), test::read_text(path));
}

/// Labels A, B; a template without a B line (no transitions); the given state attributes; all
/// weights zero.
Model no_transitions_model(std::initializer_list<const char*> attributes) {
  Model m;
  m.features.templ = FeatureTemplate::parse("U00:%x[0,0]\n", "t");
  m.features.feature_columns = 1;
  m.features.labels.add("A");
  m.features.labels.add("B");
  for (const char* a : attributes) m.features.state_attrs.add(a);
  m.weights.assign(m.features.dims().num_weights(), 0.0);
  return m;
}

TEST(ModelIo, NoTransitionsAndAllZeroWeights) {
  Model m = no_transitions_model({"U00:x"});
  ASSERT_FALSE(m.features.dims().transitions);
  const std::string path = test::temp_path("z.model");
  save_model(m, path);
  const Model back = load_model(path);
  EXPECT_FALSE(back.features.dims().transitions);
  EXPECT_EQ(back.features.labels.size(), 2u);      // labels are kept whole
  EXPECT_EQ(back.features.state_attrs.size(), 0u);  // the zero attribute is dropped
  EXPECT_EQ(back.weights, std::vector<double>(4, 0.0));
}

TEST(ModelIo, SaveRefusesInvalidModels) {
  Model m = conll_model();
  m.weights.pop_back();
  EXPECT_THROW(serialize_model(m), Error);
  m = conll_model();
  m.weights[5] = std::nan("");
  EXPECT_THROW(serialize_model(m), Error);
  Model empty;
  EXPECT_THROW(serialize_model(empty), Error);  // L = 0
  // Refused while streaming to a file: the existing model is left as it was, nothing else written.
  const std::string dir = test::temp_dir() + "/save";
  std::filesystem::create_directory(dir);
  const std::string path = dir + "/m.model";
  save_model(conll_model(), path);
  const std::string before = test::read_text(path);
  EXPECT_THROW(save_model(m, path), Error);
  EXPECT_EQ(test::read_text(path), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
}

TEST(ModelIo, EveryFlippedByteIsDetected) {
  const std::string good = serialize_model(conll_model());
  const std::size_t crc_at = good.size() - 16;
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string b = good;
    b[i] = static_cast<char>(b[i] ^ 0x24);
    const LoadResult r = try_load(b);
    ASSERT_FALSE(r.ok) << "flipped byte " << i;
    if (i < 8) {
      EXPECT_NE(r.problem.find("not a crfx model"), std::string::npos) << i << ": " << r.problem;
    } else if (i < 12) {
      EXPECT_NE(r.problem.find("unsupported model file version"), std::string::npos) << i << ": " << r.problem;
    } else if (i < crc_at || i >= good.size() - 4) {
      EXPECT_EQ(r.problem, "checksum mismatch: file is corrupt") << i;
    } else {
      EXPECT_NE(r.problem.find("truncated"), std::string::npos) << i << ": " << r.problem;
    }
  }
}

TEST(ModelIo, TruncatedOrExtendedFiles) {
  const std::string good = serialize_model(conll_model());
  for (std::size_t n = 0; n < good.size(); ++n) {
    const LoadResult r = try_load(good.substr(0, n));
    ASSERT_FALSE(r.ok) << "truncated to " << n;
    if (n == 0) {
      EXPECT_NE(r.problem.find("not a crfx model"), std::string::npos) << r.problem;
    } else {
      EXPECT_NE(r.problem.find("truncated"), std::string::npos) << n << ": " << r.problem;
    }
  }
  expect_load_error(good + std::string(1, '\0'), "truncated");
}

TEST(ModelIo, SignatureAndVersion) {
  std::string b = serialize_model(conll_model());
  expect_load_error("hello, world; this is not a model at all\n", "not a crfx model");
  std::string v = b;
  put_le(v, 8, 4, 4);
  reseal(v);
  expect_load_error(v, "unsupported model file version 4 (this crfx reads versions 1 to 3)");
  v = b;  // version 3 keeps a sparse layout's rows
  put_le(v, 8, 3, 4);
  reseal(v);
  expect_load_error(v, "missing section ROWS (a version 3 file stores its layout)");
  // The version says where the weights are: 1 sparse (WGHT), 2 dense (WDNS).
  ASSERT_EQ(get_le(b, 8, 4), 2u);
  v = b;
  put_le(v, 8, 1, 4);
  reseal(v);
  expect_load_error(v, "missing section WGHT");
  v = serialize_model(sparse_conll_model());
  ASSERT_EQ(get_le(v, 8, 4), 1u);
  put_le(v, 8, 2, 4);
  reseal(v);
  expect_load_error(v, "missing section WDNS");
}

TEST(ModelIo, DenseWeights) {
  // Mostly non-zero weights are stored densely: 8 bytes a weight, no indices.
  const Model m = conll_model();
  const std::string dense = serialize_model(m), sparse = serialize_model(sparse_conll_model());
  const std::size_t w = section(dense, "WDNS");
  EXPECT_EQ(dense.find("WGHT"), std::string::npos);
  const Model back = [&] {
    const std::string p = test::temp_path("dense.model");
    test::write_text(p, dense);
    return load_model(p);
  }();
  expect_same_model(m, back);  // bit for bit, -0.0 and the subnormal included
  EXPECT_EQ(serialize_model(back), dense);
  const std::uint64_t count = get_le(dense, w, 8);
  EXPECT_EQ(count, back.weights.size());
  EXPECT_EQ(get_le(dense, w - 8, 8), 8 + 8 * count);
  EXPECT_GT(section(sparse, "WGHT"), 0u);
  EXPECT_EQ(sparse.find("WDNS"), std::string::npos);

  auto corrupt = [&](auto&& edit, const std::string& needle) {
    std::string b = dense;
    edit(b);
    reseal(b);
    expect_load_error(b, needle);
  };
  corrupt([&](std::string& b) { put_le(b, w, count - 1, 8); }, "section WDNS: holds " + std::to_string(count - 1));
  corrupt([&](std::string& b) { b.insert(w + 8, 8, '\0'); put_le(b, w - 8, 8 + 8 * (count + 1), 8); },
          "bytes for them (8 each)");
  corrupt([&](std::string& b) { put_le(b, w + 8 + 8 * 5, bits(std::numeric_limits<double>::quiet_NaN()), 8); },
          "non-finite weight at index 5");
  corrupt(
      [&](std::string& b) {
        std::string extra = std::string("WGHT") + std::string(16, '\0');  // a WGHT of 8 zero bytes
        put_le(extra, 4, 8, 8);
        b.insert(section(b, "HEAD") - 12, extra);
      },
      "section WGHT in a version 2 file");
}

TEST(ModelIo, DenseWeightsWithoutTransitions) {
  Model m = no_transitions_model({"U00:x", "U00:y", "U00:z"});
  const Dims d = m.features.dims();
  ASSERT_FALSE(d.transitions);
  for (std::size_t i = 0; i < d.transition_offset(); ++i) m.weights[i] = 0.5 + double(i);  // 6 of 10
  const std::string b0 = serialize_model(m);
  ASSERT_EQ(get_le(b0, 8, 4), 2u);
  const std::size_t w = section(b0, "WDNS");
  std::string b = b0;
  put_le(b, w + 8 + 8 * d.transition_offset(), bits(1.0), 8);
  reseal(b);
  expect_load_error(b, "transition weight at index " + std::to_string(d.transition_offset()));
}

TEST(ModelIo, SectionFraming) {
  const std::string good = serialize_model(sparse_conll_model());
  {
    std::string b = good;
    const std::size_t w = section(b, "WGHT");
    put_le(b, w - 8, get_le(b, w - 8, 8) + 1000, 8);
    reseal(b);
    expect_load_error(b, "section WGHT of");
  }
  {
    std::string b = good;
    const std::size_t w = section(b, "LABL");
    put_le(b, w - 8, 1ull << 62, 8);
    reseal(b);
    expect_load_error(b, "overruns the file");
  }
  {
    std::string b = good;
    b[section(b, "EDGE") - 9] = 'X';  // "EDGX"
    reseal(b);
    expect_load_error(b, "unknown section EDGX");
  }
  {
    std::string b = good;
    const std::size_t h = section(b, "HEAD");
    b.replace(h - 12, 4, "WGHT");  // two WGHT sections, no HEAD
    reseal(b);
    expect_load_error(b, "duplicate section WGHT");
  }
  {
    std::string b = good;
    const std::size_t l = section(b, "LABL");
    put_le(b, l, get_le(b, l, 4) + 1, 4);  // one more label than stored
    reseal(b);
    expect_load_error(b, "section LABL");
  }
}

TEST(ModelIo, HeaderValidation) {
  const std::string good = serialize_model(conll_model());
  const std::size_t h = section(good, "HEAD");
  {
    std::string b = good;
    put_le(b, h + 12, 0, 4);  // L = 0
    reseal(b);
    expect_load_error(b, "no labels (L = 0)");
  }
  {
    std::string b = good;
    put_le(b, h + 16, 7, 4);  // A = 7, but ATTR holds 3
    reseal(b);
    expect_load_error(b, "HEAD says A = 7");
  }
  {
    std::string b = good;
    put_le(b, h, 9, 4);  // format
    reseal(b);
    expect_load_error(b, "unknown data format 9");
  }
  {
    std::string b = good;
    put_le(b, h + 24, 0, 4);  // transitions flag off while the template has a B line
    reseal(b);
    expect_load_error(b, "transitions");
  }
  {
    std::string b = good;
    put_le(b, h + 4, 1, 8);  // feature_columns = 1, but the template uses column 1
    reseal(b);
    expect_load_error(b, "template uses column 1");
  }
}

TEST(ModelIo, DictionaryValidation) {
  const std::string good = serialize_model(conll_model());
  std::string b = good;
  const std::size_t l = section(b, "LABL");
  // Labels "B-NP", "I-NP": make the second a copy of the first.
  ASSERT_EQ(b.compare(l + 8, 4, "B-NP"), 0);
  ASSERT_EQ(b.compare(l + 16, 4, "I-NP"), 0);
  b.replace(l + 16, 4, "B-NP");
  reseal(b);
  expect_load_error(b, "duplicate label 'B-NP'");

  b = good;
  const std::size_t a = section(b, "ATTR");
  put_le(b, a + 4, 1000, 4);  // the first string's length runs past the section
  reseal(b);
  expect_load_error(b, "section ATTR");

  b = good;
  const std::size_t t = section(b, "TMPL");
  const std::size_t u = b.find("U00:%x", t);
  ASSERT_NE(u, std::string::npos);
  b[u] = 'Q';  // not a U or B line
  reseal(b);
  expect_load_error(b, "stored template");
}

TEST(ModelIo, WeightValidation) {
  const Model m = sparse_conll_model();
  const std::string good = serialize_model(m);
  const std::size_t w = section(good, "WGHT");
  const std::uint64_t count = get_le(good, w, 8);
  ASSERT_GT(count, 3u);
  const std::size_t first = w + 8;  // (index, bits) pairs
  const std::size_t total = load_model([&] {
                              const std::string p = test::temp_path("ok.model");
                              test::write_text(p, good);
                              return p;
                            }())
                                .weights.size();
  {
    std::string b = good;
    put_le(b, first + 16 * (count - 1), total, 8);  // last index one past the end
    reseal(b);
    expect_load_error(b, "out of range");
  }
  {
    std::string b = good;
    put_le(b, first + 16, get_le(b, first, 8), 8);  // second index equal to the first
    reseal(b);
    expect_load_error(b, "not ascending");
  }
  {
    std::string b = good;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    put_le(b, first + 8, bits(nan), 8);
    reseal(b);
    expect_load_error(b, "non-finite weight");
    put_le(b, first + 8, bits(-std::numeric_limits<double>::infinity()), 8);
    reseal(b);
    expect_load_error(b, "non-finite weight");
  }
  {
    std::string b = good;
    put_le(b, w, count + 1, 8);  // count disagrees with the section length
    reseal(b);
    expect_load_error(b, "section WGHT");
  }
}

TEST(ModelIo, MissingFile) {
  const std::string path = test::temp_dir() + "/none.model";
  try {
    load_model(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 0u);
  }
  EXPECT_THROW(load_model(test::temp_dir()), InputError);  // a directory
}

TEST(ModelIo, AtomicSave) {
  namespace fsys = std::filesystem;
  const std::string dir = test::temp_dir();
  const std::string path = dir + "/model";
  test::write_text(path, "precious\n");
  // Overwriting an existing file works and leaves no temporary file behind.
  save_model(conll_model(), path);
  EXPECT_EQ(test::read_text(path), serialize_model(conll_model()));
  std::size_t files = 0;
  for (const auto& entry : fsys::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);

  // A model that cannot be saved leaves the existing file as it was.
  test::write_text(path, "precious\n");
  Model bad = conll_model();
  bad.weights.resize(3);
  EXPECT_THROW(save_model(bad, path), Error);
  EXPECT_EQ(test::read_text(path), "precious\n");

  // The file system refusing the write: a path under a regular file.
  EXPECT_THROW(save_model(conll_model(), path + "/sub.model"), Error);
  EXPECT_EQ(test::read_text(path), "precious\n");

  // The file system refusing bytes midway (a file-size limit at half the model's size).
  {
    test::FileSizeLimit limit(serialize_model(conll_model()).size() / 2);
    EXPECT_THROW(save_model(conll_model(), path), Error);
  }
  EXPECT_EQ(test::read_text(path), "precious\n");
  files = 0;
  for (const auto& entry : fsys::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "a temporary file was left behind";

  // A directory without write permission (meaningless for root, who may write anyway).
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
    EXPECT_THROW(save_model(conll_model(), path), Error);
    ::chmod(dir.c_str(), 0755);
    EXPECT_EQ(test::read_text(path), "precious\n");
  }
}

TEST(ModelIo, Dump) {
  const Model m = conll_model();
  const std::string path = test::temp_path("d.model");
  save_model(m, path);
  const Model back = load_model(path);
  const std::string text = dump_model(back);
  EXPECT_NE(text.find("  format: conll\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  labels: 3\n"), std::string::npos);
  EXPECT_NE(text.find("  state_attributes: 3\n"), std::string::npos);
  EXPECT_NE(text.find("  edge_attributes: 2\n"), std::string::npos);
  std::size_t nz = 0;
  for (double v : back.weights) nz += v != 0.0;
  EXPECT_NE(text.find("  non_zero_weights: " + std::to_string(nz) + "\n"), std::string::npos);
  EXPECT_NE(text.find("LABELS = {\n  0: B-NP\n  1: I-NP\n  2: O\n}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  U00:%x[0,0]\n"), std::string::npos);  // the template

  char line[256];
  const std::size_t L = 3;
  const Dims d = back.features.dims();
  std::snprintf(line, sizeof line, "  B-NP --> I-NP: %.6f\n", back.weights[d.transition_offset() + 1]);
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_LT(text.find("TRANSITIONS = {\n"), text.find(line));
  EXPECT_EQ(text.find("  I-NP --> I-NP:"), std::string::npos);  // zero: not listed
  std::snprintf(line, sizeof line, "  U01:NN --> O: %.6f\n", back.weights[1 * L + 2]);
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find("U00:the --> I-NP"), std::string::npos);  // 0.0
  EXPECT_EQ(text.find("U00:the --> O"), std::string::npos);     // -0.0
  EXPECT_EQ(text.find("U00:zero"), std::string::npos);          // dropped attributes
  EXPECT_EQ(text.find("U01:zero2"), std::string::npos);
  EXPECT_EQ(text.find("B01:zeroE"), std::string::npos);
  // Every weight in full, even the extreme ones.
  const std::string huge = std::string("  U00:dog --> I-NP: -179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368.000000\n");
  EXPECT_NE(text.find(huge), std::string::npos);
  const std::uint32_t vb = back.features.edge_attrs.find("B01:VB");
  std::snprintf(line, sizeof line, "  B01:VB: O --> B-NP: %.6f\n", back.weights[d.edge_offset() + (vb * L + 2) * L + 0]);
  EXPECT_NE(text.find(std::string("EDGE_FEATURES = {\n")), std::string::npos);
  EXPECT_NE(text.find(line), std::string::npos) << text;
  // The unsaved model dumps the same lines (its zero attributes have no non-zero weight).
  std::string original = dump_model(m);
  EXPECT_NE(original.find(line), std::string::npos);
}

/// conll_model() on a sparse layout: about 60% of each row's slots, each weight the dense model's
/// (the all-zero attributes stay all zero).
Model layout_model() {
  const Model dense = conll_model();
  Model m;
  m.features = dense.features;
  Dims d = dense.features.dims();
  auto layout = test::random_layout(d, 0.6, 17);
  m.features.layout = layout;
  d.layout = layout;
  const std::vector<std::size_t> index = test::dense_index(d);
  m.weights.resize(d.num_weights());
  for (std::size_t k = 0; k < index.size(); ++k) m.weights[k] = dense.weights[index[k]];
  return m;
}

/// (group name, slot) → weight bits of the groups a saved model keeps (those with a non-zero
/// weight, and the transitions).
std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> pairs_of(const Model& m) {
  const FeatureSpace& fs = m.features;
  const Dims d = fs.dims();
  const WeightGroups wg = d.groups();
  std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> out;
  for (std::uint32_t g = 0; g < wg.count(); ++g) {
    const std::string name = g < d.A ? "S " + fs.state_attrs.at(g) : g == d.A ? std::string("T") : "E " + fs.edge_attrs.at(g - d.A - 1);
    bool any = g == d.A;
    for_each_weight(wg, g, [&](std::size_t k, std::size_t) { any = any || m.weights[k] != 0.0; });
    if (any) for_each_weight(wg, g, [&](std::size_t k, std::size_t slot) { out[{name, std::uint32_t(slot)}] = bits(m.weights[k]); });
  }
  return out;
}

TEST(ModelIo, SparseLayoutRoundTrip) {
  const Model m = layout_model();
  const std::string bytes = serialize_model(m);
  EXPECT_EQ(get_le(bytes, 8, 4), 3u);  // version 3: the layout's rows are stored
  const std::string path = test::temp_path("layout.model");
  test::write_text(path, bytes);
  const Model back = load_model(path);
  ASSERT_TRUE(back.features.layout);
  // The attributes without a non-zero weight are dropped (the two all-zero ones, and any whose
  // listed slots hold only ±0).
  std::size_t kept_state = 0, kept_edge = 0;
  {
    std::map<std::string, bool> seen;
    for (const auto& entry : pairs_of(m)) seen[entry.first.first] = true;
    for (const auto& [name, yes] : seen) {
      (void)yes;
      kept_state += name[0] == 'S';
      kept_edge += name[0] == 'E';
    }
  }
  EXPECT_LT(kept_state, m.features.state_attrs.size());
  EXPECT_EQ(back.features.state_attrs.size(), kept_state);
  EXPECT_EQ(back.features.edge_attrs.size(), kept_edge);
  EXPECT_EQ(back.weights.size(), back.features.dims().num_weights());
  EXPECT_EQ(pairs_of(back), pairs_of(m));
  EXPECT_EQ(serialize_model(back), bytes);  // saved again: the same bytes
  // dump lists every pair of a sparse layout, zero weights too.
  const std::string text = dump_model(back);
  EXPECT_NE(text.find("  layout: observed pairs\n"), std::string::npos) << text;
  std::size_t lines = 0;
  for (std::size_t at = text.find(" --> "); at != std::string::npos; at = text.find(" --> ", at + 1)) ++lines;
  EXPECT_EQ(lines, back.weights.size());
  EXPECT_NE(dump_model(conll_model()).find("  layout: all pairs\n"), std::string::npos);
}

TEST(ModelIo, SparseLayoutValidation) {
  const std::string good = serialize_model(layout_model());
  const std::size_t rows = section(good, "ROWS");
  const std::uint64_t groups = get_le(good, rows, 8);
  const std::size_t first_slot = rows + 8 + 4 * groups + 8;
  {
    std::string b = good;  // a row size that no longer adds up to the slot count
    put_le(b, rows + 8, get_le(b, rows + 8, 4) + 1, 4);
    reseal(b);
    expect_load_error(b, "section ROWS: holds");
  }
  {
    std::string b = good;  // the first row's first slot moved past the label count
    put_le(b, first_slot, 7, 4);
    reseal(b);
    expect_load_error(b, "section ROWS: weight layout: row 0 lists slot 7");
  }
  {
    std::string b = good;  // rows for another model
    put_le(b, rows, groups + 1, 8);
    reseal(b);
    expect_load_error(b, "section ROWS: holds " + std::to_string(groups + 1) + " rows");
  }
  {
    std::string b = good;  // a ROWS section in a version 2 file
    put_le(b, 8, 2, 4);
    reseal(b);
    expect_load_error(b, "section ROWS in a version 2 file");
  }
}

// A large file that is not a model is refused by its signature before it is read: in a child
// process whose address space could not hold it (a sparse 2 GB file, 256 MB of address space).
TEST(ModelIo, ALargeNonModelIsRefusedBeforeItIsRead) {
  const std::string path = test::temp_path("large.bin");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("NOTAMODEL", f);
    std::fclose(f);
    ASSERT_EQ(::truncate(path.c_str(), off_t(2) << 30), 0);
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct rlimit lim {};
        ::getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = rlim_t(256) << 20;
        ::setrlimit(RLIMIT_AS, &lim);
        try {
          load_model(path);
          std::_Exit(0);
        } catch (const InputError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(3);
        } catch (...) {
          std::_Exit(4);
        }
      },
      ::testing::ExitedWithCode(3), "not a crfx model \\(no CRFXMODL signature\\)");
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace crfx
