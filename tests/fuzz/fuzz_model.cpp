// libFuzzer target: the model loader (load_model: signature, version, sections, CRC, HEAD,
// TMPL through the template parser, the dictionaries, ROWS, WGHT / WDNS), then what a loaded
// model is used for: dump_model, serialize_model and loading that again, and tagging a short
// sentence on the CPU backend (Viterbi, n-best with probabilities, marginals). A loaded model
// must be usable; expected failures are crfx::Error; anything else is a finding.
//
// The file's CRC-32 is recomputed before loading when its tail is a well-formed CRC section
// ("CRC ", length 4): otherwise nearly every mutation stops at the checksum and the fuzzer never
// gets past it. (A wrong checksum is covered by tests/test_model_io.cpp.)
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "fuzz_common.hpp"

namespace {

[[noreturn]] void broken(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "invariant broken: %s %s\n", what, detail.c_str());
  std::abort();
}

constexpr std::size_t kCrcSection = 4 + 8 + 4;
constexpr std::size_t kHeader = 8 + 4;

/// The input with its CRC section's checksum made right (when it has one).
std::vector<std::uint8_t> with_crc(const std::uint8_t* bytes, std::size_t size) {
  std::vector<std::uint8_t> v(bytes, bytes + size);
  if (size < kHeader + kCrcSection) return v;
  std::uint8_t* tail = v.data() + size - kCrcSection;
  static const std::uint8_t kTail[12] = {'C', 'R', 'C', ' ', 4, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(tail, kTail, sizeof kTail) != 0) return v;
  const uLong crc = ::crc32(::crc32(0L, Z_NULL, 0), v.data(), static_cast<uInt>(size - kCrcSection));
  for (int i = 0; i < 4; ++i) tail[12 + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  return v;
}

/// Three tokens for the model's format, using some of its own attributes.
crfx::TextData sample(const crfx::FeatureSpace& fs) {
  crfx::TextData d;
  d.format = fs.format;
  d.path = "sample";
  d.feature_columns = fs.feature_columns;
  const std::size_t A = fs.state_attrs.size();
  for (std::size_t t = 0; t < 3; ++t) {
    if (fs.format == crfx::InputFormat::conll) {
      if (d.conll.empty()) d.conll.emplace_back();
      crfx::ConllToken tok;
      for (std::size_t c = 0; c < fs.feature_columns; ++c) tok.columns.push_back(c == 0 ? "w" + std::to_string(t) : "NN");
      tok.line = t + 1;
      d.conll.back().push_back(std::move(tok));
    } else {
      if (d.crfsuite.empty()) d.crfsuite.emplace_back();
      crfx::CrfsuiteToken tok;
      if (A > 0) tok.attributes.push_back({fs.state_attrs.at(std::uint32_t(t % A)), 1.0});
      if (A > 1) tok.attributes.push_back({fs.state_attrs.at(std::uint32_t((t + 1) % A)), 0.5});
      tok.attributes.push_back({"unknown attribute", 1.0});
      tok.line = t + 1;
      d.crfsuite.back().push_back(std::move(tok));
    }
  }
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::vector<std::uint8_t> file = with_crc(bytes, size);
  const std::string& path = crfx_fuzz::mem_file().set(file.data(), file.size());
  crfx::Model model;
  try {
    model = crfx::load_model(path);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
    return 0;
  }
  const crfx::Dims d = model.features.dims();
  if (model.weights.size() != d.num_weights()) broken("weights do not fit the feature space");
  if (d.L != model.features.labels.size() || d.A != model.features.state_attrs.size() ||
      d.E != model.features.edge_attrs.size())
    broken("dims disagree with the dictionaries");

  // A model that loads can be listed, written and loaded again.
  (void)crfx::dump_model(model);
  const std::string again = crfx::serialize_model(model);
  try {
    const crfx::Model reloaded = crfx::load_model(
        crfx_fuzz::mem_file().set(reinterpret_cast<const std::uint8_t*>(again.data()), again.size()));
    if (reloaded.features.dims().L != d.L) broken("the label count changed in a save/load round trip");
    // Writing drops attributes without a non-zero weight; after that, writing is a fixed point.
    if (crfx::serialize_model(reloaded) != again) broken("a reloaded model is written differently");
  } catch (const crfx::Error& e) {
    broken("a loaded model, written again, does not load:", e.what());
  }

  // … and tag. (Feature columns beyond what a sentence can carry are left untagged.)
  if (model.features.format == crfx::InputFormat::conll && model.features.feature_columns > 64) return 0;
  const crfx::TextData data = sample(model.features);
  crfx::BackendOptions bo;
  bo.device = crfx::DeviceKind::cpu;
  bo.threads = 1;
  crfx::TagOptions to;
  to.nbest = 3;
  to.marginals = true;
  try {
    crfx::Tagger tagger(std::move(model), crfx::make_backend(d, bo), to);
    crfx::Tagged tagged;
    tagger.tag(data, tagged);
    std::string out;
    tagger.format(data, tagged, out);
  } catch (const crfx::Error& e) {
    crfx_fuzz::expected(e);
  }
  return 0;
}
