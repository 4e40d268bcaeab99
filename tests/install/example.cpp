// An outside program built against an installed crfx (find_package(crfx), or pkg-config): trains
// a model in memory from CoNLL data and a CRF++ template (L-BFGS, c2 = 1, a few iterations),
// saves it, loads it back and tags a file with it — printing what `crfx tag FILE -m MODEL` prints.
//   crfx_example TRAIN TEMPLATE ITERATIONS MODEL_OUT TEST > tagged
#include <cstdlib>
#include <iostream>
#include <string>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "crfx/train.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: crfx_example TRAIN TEMPLATE ITERATIONS MODEL_OUT TEST\n";
    return 2;
  }
  try {
    // Train: the file read with the run's features (CoNLL columns, the template), L-BFGS, c2 = 1.
    crfx::TrainConfig config;
    config.templ = crfx::FeatureTemplate::load(argv[2]);
    config.options.max_iterations = std::atoi(argv[3]);
    config.backend.device = crfx::DeviceKind::cpu;
    crfx::TrainingRun run(config);
    run.compile(crfx::read_text(run.features(), argv[1]));
    crfx::save_model(run.run().model, argv[4]);

    // Tag: the saved model, every sentence of TEST, to standard output.
    crfx::Model loaded = crfx::load_model(argv[4]);
    const crfx::Dims tag_dims = loaded.features.dims();
    crfx::Tagger tagger(std::move(loaded), crfx::make_backend(tag_dims, config.backend), crfx::TagOptions{});
    crfx::ConcatenatedOutput out("-");
    crfx::tag_inputs(tagger, crfx::list_inputs({argv[5]}, false), out, crfx::TagRunOptions{});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "crfx_example: " << e.what() << "\n";
    return 1;
  }
}
