// An outside program built against an installed crfx (find_package(crfx), or pkg-config): trains
// a model in memory from CoNLL data and a CRF++ template (L-BFGS, c2 = 1, a few iterations),
// saves it, loads it back and tags a file with it — printing what `crfx tag FILE -m MODEL` prints.
//   crfx_example TRAIN TEMPLATE ITERATIONS MODEL_OUT TEST > tagged
#include <cstdlib>
#include <iostream>
#include <string>

#include "crfx/backend.hpp"
#include "crfx/error.hpp"
#include "crfx/features.hpp"
#include "crfx/io.hpp"
#include "crfx/model.hpp"
#include "crfx/tag_run.hpp"
#include "crfx/tagger.hpp"
#include "crfx/trainer.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: crfx_example TRAIN TEMPLATE ITERATIONS MODEL_OUT TEST\n";
    return 2;
  }
  try {
    // Train: the data compiled against a fresh feature space, the observed-pair layout, L-BFGS.
    crfx::Model model;
    crfx::FeatureSpace& fs = model.features;
    fs.format = crfx::InputFormat::conll;
    fs.templ = crfx::FeatureTemplate::load(argv[2]);
    crfx::Corpus corpus = crfx::compile_training(fs, crfx::read_text(fs, argv[1]), 1);
    crfx::choose_layout(fs, corpus, crfx::FeatureSet{});
    const crfx::Dims dims = fs.dims();
    crfx::BackendOptions bo;
    bo.device = crfx::DeviceKind::cpu;
    crfx::BackendPtr backend = crfx::make_backend(dims, bo);
    crfx::BackendCorpusPtr up = backend->upload(std::move(corpus));
    crfx::TrainOptions options;
    options.c2 = 1.0;
    options.max_iterations = std::atoi(argv[3]);
    crfx::Objective objective(*backend, *up, options.c1, options.c2);
    crfx::VectorPtr w = backend->vector(dims.num_weights());
    crfx::find_trainer("lbfgs").make()->train(objective, *w, options, nullptr);
    model.weights = crfx::to_host(*backend, *w);
    crfx::save_model(model, argv[4]);

    // Tag: the saved model, every sentence of TEST, to standard output.
    crfx::Model loaded = crfx::load_model(argv[4]);
    const crfx::Dims tag_dims = loaded.features.dims();
    crfx::Tagger tagger(std::move(loaded), crfx::make_backend(tag_dims, bo), crfx::TagOptions{});
    crfx::ConcatenatedOutput out("-");
    crfx::tag_inputs(tagger, crfx::list_inputs({argv[5]}, false), out, crfx::TagRunOptions{});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "crfx_example: " << e.what() << "\n";
    return 1;
  }
}
