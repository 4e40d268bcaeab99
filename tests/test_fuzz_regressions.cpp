// What the libFuzzer targets (tests/fuzz/, scripts/fuzz.sh) found, as plain tests: one case per
// finding, and the seeds and kept reproducers of tests/fuzz replayed through the library's entry
// points, so that every build checks them (also where clang is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/template.hpp"
#include "crfx/model.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

std::string fuzz_dir(const std::string& target) { return data_path("../fuzz/" + target); }

/// The files of tests/fuzz/<target>, sorted.
std::vector<std::string> seeds(const std::string& target) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(fuzz_dir(target)))
    if (e.is_regular_file()) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_regression(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("regression-", 0) == 0;
}

// ---- findings ------------------------------------------------------------------------------

// fuzz_model: a CoNLL model whose HEAD says 0 feature columns (and whose template, "B", reads
// none) loaded; `crfx tag` with it then stopped at "internal: compile needs a trained feature
// space (no feature columns)". Training never writes such a model: the loader refuses it.
// Reproducer: tests/fuzz/model/regression-conll-no-feature-columns.model.
TEST(FuzzRegression, ConllModelWithoutFeatureColumnsIsRefused) {
  Model m;
  m.features.format = InputFormat::conll;
  m.features.templ = FeatureTemplate::parse("B\n", "t");
  m.features.feature_columns = 0;
  m.features.labels.add("a");
  m.features.labels.add("b");
  m.weights.assign(m.features.dims().num_weights(), 0.0);
  m.weights[m.features.dims().transition_offset() + 1] = 0.5;
  const std::string path = temp_path("no-columns.model");
  write_text(path, serialize_model(m));
  try {
    load_model(path);
    FAIL() << "a CoNLL model without feature columns loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(e.problem().find("section HEAD: a CoNLL model with no feature columns"), std::string::npos)
        << e.what();
  }
  // The kept reproducer, built by hand (tests/fuzz/README.md), is refused the same way.
  EXPECT_THROW(load_model(fuzz_dir("model") + "/regression-conll-no-feature-columns.model"), InputError);
  // With one feature column the same model loads (a CRFsuite model has none and loads too).
  m.features.feature_columns = 1;
  write_text(path, serialize_model(m));
  EXPECT_EQ(load_model(path).features.feature_columns, 1u);
}

// ---- the seeds ---------------------------------------------------------------------------

// Every seed of the fuzz targets goes through its entry point: the seeds proper are accepted,
// the kept reproducers (regression-*) are refused with a crfx::Error, never anything else.
template <class F>
void replay(const std::string& target, F&& entry) {
  const std::vector<std::string> files = seeds(target);
  ASSERT_FALSE(files.empty()) << fuzz_dir(target);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    if (is_regression(f))
      EXPECT_THROW(entry(f), Error);
    else
      EXPECT_NO_THROW(entry(f));
  }
}

TEST(FuzzRegression, TemplateSeeds) {
  replay("template", [](const std::string& f) {
    std::string text = read_text(f);
    text.resize(std::min(text.size(), text.find('\0')));  // TEMPLATE [NUL DATA]: the template part
    FeatureTemplate::parse(text, f);
  });
}

TEST(FuzzRegression, ConllSeeds) {
  replay("conll", [](const std::string& f) {
    FeatureSpace fs;
    fs.format = InputFormat::conll;
    EXPECT_GT(crfx::read_text(fs, f).num_sentences(), 0u);
  });
}

TEST(FuzzRegression, CrfsuiteSeeds) {
  replay("crfsuite", [](const std::string& f) {
    FeatureSpace fs;
    fs.format = InputFormat::crfsuite;
    EXPECT_GT(crfx::read_text(fs, f).num_sentences(), 0u);
  });
}

TEST(FuzzRegression, ModelSeeds) {
  replay("model", [](const std::string& f) {
    const Model m = load_model(f);
    EXPECT_EQ(m.weights.size(), m.features.dims().num_weights());
  });
}

}  // namespace
}  // namespace crfx::test
