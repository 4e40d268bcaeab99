// crfx::train and crfx::TrainingRun (include/crfx/train.hpp): the one entry point of a training
// run. The CLI and the library give the same model; every check of the input lives in the library
// (so sentences in memory are refused as files are); a model trained in memory tags in memory.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "crfx/train.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using test::data_path;
using test::error_text;

std::string model_bytes(const Model& m) {
  const std::string path = test::temp_path("api.model");
  save_model(m, path);
  return test::read_text(path);
}

// For each kind of trainer (quasi-Newton, stochastic, SAG, perceptron, Maxent), crfx train's model
// file and the library's are the same bytes.
TEST(TrainApi, TheCliAndTheLibraryGiveTheSameModel) {
  struct Case {
    const char* algo;
    const char* cli;
    ModelType type;
    void (*set)(TrainOptions&);
  };
  const Case cases[] = {
      {"lbfgs", "--max-iterations 15", ModelType::crf, [](TrainOptions& o) { o.max_iterations = 15; }},
      {"owlqn", "--c1 1 --c2 0 --max-iterations 15", ModelType::crf,
       [](TrainOptions& o) { o.c1 = 1, o.c2 = 0, o.max_iterations = 15; }},
      {"sag", "--max-epochs 2", ModelType::crf, [](TrainOptions& o) { o.max_epochs = 2; }},
      {"ap", "--epochs 2", ModelType::crf, [](TrainOptions& o) { o.epochs = 2; }},
      {"scgis", "--type maxent --max-iterations 5", ModelType::maxent, [](TrainOptions& o) { o.max_iterations = 5; }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.algo);
    const std::string cli_model = test::temp_path(std::string(c.algo) + ".cli.model");
    std::string out;
    ASSERT_EQ(test::run(test::crfx_binary() + " train " + data_path("conll2000.train300.txt") + " -t " +
                            data_path("chunking.template") + " -a " + c.algo + " " + c.cli +
                            " --device cpu --threads 2 -q -m " + cli_model,
                        &out),
              0)
        << out;
    TrainConfig config;
    config.algorithm = c.algo;
    config.type = c.type;
    c.set(config.options);
    config.templ = FeatureTemplate::load(data_path("chunking.template"));
    config.backend.device = DeviceKind::cpu;
    config.backend.threads = 2;
    TrainingRun run(config);
    run.compile(read_text(run.features(), data_path("conll2000.train300.txt")));
    const TrainResult r = run.run();
    EXPECT_EQ(model_bytes(r.model), test::read_text(cli_model));
    EXPECT_GT(r.iterations, 0);
    EXPECT_FALSE(r.stop_reason.empty());
  }
}

// Sentences in memory: trained on and tagged back (a separable toy: each word has one label).
TEST(TrainApi, SentencesInMemoryTrainAndTag) {
  TrainConfig config;
  config.templ = FeatureTemplate::parse("U00:%x[0,0]\nU01:%x[-1,0]\nB\n", "template");
  config.backend.device = DeviceKind::cpu;
  const TextData data = conll_data({{{"He", "B-NP"}, {"reckons", "B-VP"}, {"the", "B-NP"}, {"deficit", "I-NP"}},
                                    {{"The", "B-NP"}, {"cat", "I-NP"}, {"sleeps", "B-VP"}}});
  TrainResult r = train(config, data);
  const Dims dims = r.model.features.dims();
  EXPECT_EQ(dims.L, 3u);
  Tagger tagger(std::move(r.model), make_backend(dims, config.backend), {});
  const auto tagged = tagger.labels(conll_data({{{"The"}, {"deficit"}, {"sleeps"}}, {{"He"}, {"reckons"}}}));
  ASSERT_EQ(tagged.size(), 2u);
  EXPECT_EQ(tagged[0], (std::vector<std::string>{"B-NP", "I-NP", "B-VP"}));
  EXPECT_EQ(tagged[1], (std::vector<std::string>{"B-NP", "B-VP"}));

  // CRFsuite-style attribute lists.
  TrainConfig cs;
  cs.format = InputFormat::crfsuite;
  cs.backend.device = DeviceKind::cpu;
  auto token = [](const char* label, const char* word) { return CrfsuiteToken{label, {{word, 1.0}}, 0}; };
  TrainResult m = train(cs, attribute_data({{token("N", "w=cat"), token("V", "w=sleeps")},
                                            {token("N", "w=dog"), token("V", "w=runs")}}));
  const Dims d2 = m.model.features.dims();
  Tagger t2(std::move(m.model), make_backend(d2, cs.backend), {});
  EXPECT_EQ(t2.labels(attribute_data({{token("", "w=dog"), token("", "w=sleeps")}}))[0],
            (std::vector<std::string>{"N", "V"}));
}

// The checks of the input, for data made in memory: the readers' rules and the run's.
TEST(TrainApi, InputChecksApplyToSentencesInMemory) {
  TrainConfig cs;
  cs.format = InputFormat::crfsuite;
  cs.backend.device = DeviceKind::cpu;
  auto one = [](const char* label, std::vector<CrfsuiteAttribute> attrs) {
    return attribute_data({{CrfsuiteToken{label, std::move(attrs), 0}, CrfsuiteToken{"B", {{"y", 1.0}}, 0}}});
  };
  // Values beyond ±1e10: the file reader's words (an all-zero model otherwise).
  EXPECT_EQ(error_text([&] { train(cs, one("A", {{"x", 1e11}})); }),
            "sequence 0, token 0: attribute 'x': value 1e+11 is beyond ±1e10, the range crfx accepts (scale the "
            "values down)");
  EXPECT_NE(error_text([&] { train(cs, one("A", {{"x", std::nan("")}})); }).find("is not a finite number"),
            std::string::npos);
  EXPECT_EQ(error_text([&] { train(cs, one("", {{"x", 1.0}})); }),
            "sequence 0, token 0: missing label (the first field) in training data");
  EXPECT_EQ(error_text([&] { train(cs, one("A", {{"", 1.0}})); }), "sequence 0, token 0: empty attribute name");
  EXPECT_EQ(error_text([&] { train(cs, attribute_data({})); }),
            "the training data: no sentences in the training data");
  EXPECT_NE(error_text([&] { train(cs, attribute_data({{CrfsuiteToken{"A", {}, 0}}})); })
                .find("no attributes in the data read as CRFsuite lines"),
            std::string::npos);

  TrainConfig conll;
  conll.templ = FeatureTemplate::parse("U00:%x[0,0]\n", "t.tpl");
  conll.backend.device = DeviceKind::cpu;
  EXPECT_EQ(error_text([&] { train(conll, conll_data({{{"a", "A"}, {"b", "c", "B"}}})); }),
            "sequence 0, token 1: inconsistent column count: expected 2 columns, got 3");
  EXPECT_EQ(error_text([&] { train(conll, conll_data({{{"a"}}})); }),
            "sequence 0, token 0: training data needs feature columns and a label column (the last); this token "
            "has 1 column");
  EXPECT_EQ(error_text([&] { train(conll, attribute_data({{CrfsuiteToken{"A", {{"x", 1.0}}, 0}}})); }),
            "the data is CRFsuite attributes but the run reads CoNLL columns");
  conll.templ = FeatureTemplate::parse("B\n", "t.tpl");
  EXPECT_NE(error_text([&] { train(conll, conll_data({{{"a", "A"}, {"b", "B"}}})); })
                .find("t.tpl: the template generates no attributes"),
            std::string::npos);

  // The run's settings against each other, before any data.
  TrainConfig maxent_only;
  maxent_only.algorithm = "gis";
  EXPECT_EQ(error_text([&] { TrainingRun run(maxent_only); }),
            "the algorithm gis trains Maxent models only (model type maxent)");
  TrainConfig unknown;
  unknown.algorithm = "no-such";
  EXPECT_NE(error_text([&] { TrainingRun run(unknown); }).find("no-such"), std::string::npos);
}

// A run that does not fit is refused before anything of its size is allocated, with the figures.
TEST(TrainApi, MemoryRefusalCarriesTheFigures) {
  TrainConfig config;
  config.templ = FeatureTemplate::load(data_path("chunking.template"));
  config.backend.device = DeviceKind::cpu;
  config.max_memory = 1e5;
  TrainingRun run(config);
  run.compile(read_text(run.features(), data_path("conll2000.train300.txt")));
  try {
    run.prepare();
    FAIL() << "not refused";
  } catch (const MemoryRefusal& e) {
    EXPECT_FALSE(e.check().fits);
    EXPECT_EQ(std::string(e.what()).rfind("this training run needs an estimated ", 0), 0u) << e.what();
    EXPECT_FALSE(e.dense_layout());
  }
}

}  // namespace
}  // namespace crfx

namespace crfx {
namespace {

TrainConfig stop_config() {
  TrainConfig config;
  config.templ = FeatureTemplate::load(test::data_path("chunking.template"));
  config.backend.device = DeviceKind::cpu;
  config.backend.threads = 2;
  config.options.max_iterations = 30;
  return config;
}

// A stop inside a pass of a batch trainer whose iterations are slow (here: every one, with
// abandon_seconds 0) abandons the pass; the model is the last completed iteration's — the model
// a run bounded at that iteration gives, bit for bit. A stop before any iteration ended: none.
TEST(TrainApi, AStopInsideAPassEndsWithTheLastCompletedIteration) {
  TrainConfig config = stop_config();
  config.abandon_seconds = 0;
  std::atomic<int> polls{0};
  config.stop = [&] { return ++polls > 2000; };  // mid-pass, some iterations in
  TrainingRun run(config);
  run.compile(read_text(run.features(), test::data_path("conll2000.train300.txt")));
  const TrainResult stopped = run.run();
  ASSERT_TRUE(stopped.stopped_in_pass);
  ASSERT_GE(stopped.iterations, 1);
  EXPECT_LT(stopped.iterations, 30);
  EXPECT_EQ(stopped.stop_reason, "stopped inside iteration " + std::to_string(stopped.iterations + 1) +
                                     "; the model of iteration " + std::to_string(stopped.iterations));

  TrainConfig bounded = stop_config();
  bounded.options.max_iterations = stopped.iterations;
  TrainingRun again(bounded);
  again.compile(read_text(again.features(), test::data_path("conll2000.train300.txt")));
  EXPECT_TRUE(again.run().model.weights == stopped.model.weights);

  TrainConfig at_once = stop_config();
  at_once.stop = [] { return true; };
  TrainingRun first(at_once);
  first.compile(read_text(first.features(), test::data_path("conll2000.train300.txt")));
  EXPECT_THROW(first.run(), TrainingStopped);
}

}  // namespace
}  // namespace crfx

namespace crfx {
namespace {

// Inside an iteration that lasts longer than progress_seconds (here 0: any), note lines say it
// is alive: "iteration N in progress: S sentences evaluated, T s".
TEST(TrainApi, ASlowIterationSaysItIsInProgress) {
  TrainConfig config = stop_config();
  config.options.max_iterations = 2;
  config.progress_seconds = 0;
  std::vector<std::string> notes;
  config.note = [&](const std::string& line) { notes.push_back(line); };
  TrainingRun run(config);
  run.compile(read_text(run.features(), test::data_path("conll2000.train300.txt")));
  run.run();
  std::size_t progress = 0;
  for (const std::string& n : notes)
    if (n.rfind("iteration ", 0) == 0) {
      ++progress;
      EXPECT_NE(n.find(" in progress: "), std::string::npos) << n;
      EXPECT_NE(n.find(" sentences evaluated, "), std::string::npos) << n;
    }
  EXPECT_GT(progress, 0u);
}

}  // namespace
}  // namespace crfx
