// The library tagger (include/crfx/tagger.hpp) against the backend's own primitives and the
// identities its outputs must satisfy; the text it formats is covered byte for byte by the CLI
// tests (crfx tag is a loop over it) and here on a hand-built expectation.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/format.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::data_path;
using test::run;
using test::temp_path;

/// A chunking model trained for a few iterations on the 300-sentence slice (seconds).
const std::string& model_path() {
  static const std::string path = [] {
    const std::string m = temp_path("tagger.model");
    std::string out;
    const int rc = run("'" + test::crfx_binary() + "' train '" + data_path("conll2000.train300.txt") + "' -t '" +
                           data_path("chunking.template") + "' -m '" + m + "' --max-iterations 30 --quiet",
                       &out);
    if (rc != 0) throw std::runtime_error("training failed: " + out);
    return m;
  }();
  return path;
}

BackendPtr cpu_backend(const Dims& dims) {
  BackendOptions bo;
  bo.device = DeviceKind::cpu;
  return make_backend(dims, bo, nullptr);
}

Tagger cpu_tagger(const TagOptions& options) {
  Model m = load_model(model_path());
  const Dims dims = m.features.dims();
  return Tagger(std::move(m), cpu_backend(dims), options);
}

TEST(Tagger, BestPathsAreTheBackendsViterbi) {
  Tagger tagger = cpu_tagger({});
  const TextData text = read_text(tagger.features(), data_path("conll2000.test100.txt"));
  Tagged tagged;
  tagger.tag(text, tagged);
  // The reference: the model's weights and the data through a backend of our own.
  Model m = load_model(model_path());
  BackendPtr b = cpu_backend(m.features.dims());
  BackendCorpusPtr up = b->upload(compile(m.features, text));
  VectorPtr w = to_backend(*b, m.weights);
  std::vector<std::uint32_t> ref(up->num_tokens());
  b->viterbi(*up, *w, all_sentences(*up), ref.data(), nullptr);
  EXPECT_EQ(tagged.paths, ref);
  EXPECT_EQ(tagged.found, std::vector<std::size_t>(text.num_sentences(), 1));
  EXPECT_TRUE(tagged.probability.empty());
  EXPECT_TRUE(tagged.marginals.empty());
}

// For a one-token sentence the L label sequences are the L labels: the n-best probabilities are
// that token's marginals, sorted, they sum to 1, and asking for more than L sequences finds L.
TEST(Tagger, NbestProbabilitiesOfOneTokenAreItsMarginals) {
  const std::string data = temp_path("one.txt");
  test::write_text(data, "Confidence NN B-NP\n\nrose VBD B-VP\n\n");
  TagOptions o;
  o.marginals = true;
  o.nbest = 50;  // more than the 22 labels
  Tagger tagger = cpu_tagger(o);
  const std::size_t L = tagger.features().dims().L;
  ASSERT_LT(L, o.nbest);
  const TextData text = read_text(tagger.features(), data);
  Tagged tagged;
  tagger.tag(text, tagged);
  ASSERT_EQ(tagged.found, std::vector<std::size_t>(2, L));
  for (std::size_t s = 0; s < 2; ++s) {
    const double* marg = tagged.marginals.data() + s * L;
    EXPECT_NEAR(std::accumulate(marg, marg + L, 0.0), 1.0, 1e-12);
    double sum = 0;
    for (std::size_t r = 0; r < L; ++r) {
      const std::uint32_t y = tagged.paths[s * o.nbest + r];
      const double p = tagged.probability[s * o.nbest + r];
      EXPECT_NEAR(p, marg[y], 1e-12) << "sentence " << s << " rank " << r;
      if (r) {
        EXPECT_LE(p, tagged.probability[s * o.nbest + r - 1]) << "best first";
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(Tagger, FormatsAsCrfxTagPrints) {
  const std::string data = temp_path("two.txt");
  test::write_text(data, "Confidence NN B-NP\nin IN B-PP\n\n");
  TagOptions o;
  o.nbest = 2;
  Tagger tagger = cpu_tagger(o);
  const TextData text = read_text(tagger.features(), data);
  Tagged tagged;
  tagger.tag(text, tagged);
  std::string expected;
  for (std::size_t r = 0; r < 2; ++r) {
    expected += "# " + std::to_string(r) + " ";
    append_fixed6(expected, tagged.probability[r]);
    expected += "\nConfidence\tNN\tB-NP\t" + tagger.features().labels.at(tagged.paths[r * 2]) + "\n";
    expected += "in\tIN\tB-PP\t" + tagger.features().labels.at(tagged.paths[r * 2 + 1]) + "\n\n";
  }
  std::string out;
  tagger.format(text, tagged, out);
  EXPECT_EQ(out, expected);
  EXPECT_GT(tagged.probability[0], tagged.probability[1]);
}

TEST(Tagger, RefusesAnOutOfRangeNbest) {
  for (std::size_t n : {std::size_t(0), kMaxNbest + 1}) {
    TagOptions o;
    o.nbest = n;
    EXPECT_THROW(cpu_tagger(o), Error) << n;
  }
}

}  // namespace
}  // namespace crfx
