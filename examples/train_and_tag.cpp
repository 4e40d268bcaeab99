// crfx as a library: train a CRF on sentences in memory, then tag new ones (built against the
// installed package by tests/install/check.sh; see README, "As a library"). Only the stable API:
// crfx/train.hpp, crfx/tagger.hpp (and crfx/model.hpp, crfx/errors.hpp).
#include <iostream>
#include <utility>

#include "crfx/tagger.hpp"
#include "crfx/train.hpp"

int main() {
  // Each token: its columns (here the word), the label last.
  const auto data = crfx::conll_data({{{"He", "B-NP"}, {"reckons", "B-VP"}, {"the", "B-NP"}, {"deficit", "I-NP"}},
                                      {{"The", "B-NP"}, {"cat", "I-NP"}, {"sleeps", "B-VP"}}});
  crfx::TrainConfig config;  // L-BFGS, c2 = 1, CRFsuite's feature set, the best device
  config.templ = crfx::FeatureTemplate::parse("U00:%x[0,0]\nU01:%x[-1,0]\nB\n", "in-memory template");
  crfx::TrainResult trained = crfx::train(config, data);
  crfx::Tagger tagger(std::move(trained.model));  // the best device again
  for (const auto& sentence : tagger.labels(crfx::conll_data({{{"The"}, {"deficit"}, {"sleeps"}}}))) {
    for (const auto& label : sentence) std::cout << label << ' ';
    std::cout << '\n';
  }
  return 0;
}
