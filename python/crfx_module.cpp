// crfx's Python extension (_crfx): training from per-token features in memory, tagging, token
// marginals, the model's weights by name, and the file-level helpers, over the library's entry
// points. python/crfx/__init__.py wraps it in an estimator with sklearn-crfsuite's interface.
// Every training run keeps a record per iteration (Model.log); with verbose it also prints crfx
// train's progress line to Python's sys.stderr, with the GIL held.
//
// Python objects are read while the GIL is held; training and tagging then run without it
// (other Python threads go on), and a training run checks for Ctrl-C after every iteration (a
// stochastic trainer: after every mini-batch): it stops there and raises KeyboardInterrupt. crfx::Error and its InputError become
// ValueError with crfx's message, OSError for a file that cannot be opened or read.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/tag_run.hpp"
#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "crfx/tagger.hpp"
#include "crfx/train.hpp"

namespace py = pybind11;

namespace {

using crfx::CrfsuiteAttribute;
using crfx::CrfsuiteSentence;
using crfx::CrfsuiteToken;

/// A number that is not a Python int, float or bool (numpy.int64, numpy.float32, numpy.bool_, …):
/// one with __float__ or __index__.
bool number_like(py::handle value) {
  return !py::isinstance<py::str>(value) && !py::isinstance<py::bytes>(value) &&
         (py::hasattr(value, "__float__") || py::hasattr(value, "__index__"));
}

/// One token's features: a dict {name: value} — a str value makes the attribute "name=value"
/// with weight 1 (as sklearn-crfsuite and python-crfsuite do), a number or bool (numpy's
/// scalars too) is the attribute's value — or an iterable of names (value 1) or of (name, value)
/// pairs.
void read_token(py::handle features, CrfsuiteToken& token, std::size_t s, std::size_t t) {
  auto where = [&] { return "sequence " + std::to_string(s) + ", token " + std::to_string(t) + ": "; };
  auto add = [&](const std::string& name, py::handle value) {
    if (name.empty()) throw py::value_error(where() + "an empty feature name");
    if (py::isinstance<py::str>(value)) {
      token.attributes.push_back({name + "=" + value.cast<std::string>(), 1.0});
    } else if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value) ||
               py::isinstance<py::float_>(value)) {
      token.attributes.push_back({name, value.cast<double>()});
    } else if (number_like(value)) {
      const double v = PyFloat_AsDouble(value.ptr());
      if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        throw py::type_error(where() + "feature '" + name + "': a value of type " +
                             std::string(py::str(value.get_type().attr("__name__"))) + " that is not a number");
      }
      token.attributes.push_back({name, v});
    } else {
      throw py::type_error(where() + "feature '" + name + "' has a value of type " +
                           std::string(py::str(value.get_type().attr("__name__"))) +
                           " (str, int, float or bool expected)");
    }
  };
  if (py::isinstance<py::dict>(features)) {
    for (auto item : features.cast<py::dict>()) add(py::str(item.first).cast<std::string>(), item.second);
  } else if (py::isinstance<py::str>(features)) {
    throw py::type_error(where() + "a str, not a dict or a list of features");
  } else if (py::hasattr(features, "__iter__")) {
    for (py::handle f : features) {
      if (py::isinstance<py::str>(f)) {
        const std::string name = f.cast<std::string>();
        if (name.empty()) throw py::value_error(where() + "an empty feature name");
        token.attributes.push_back({name, 1.0});
      } else if (py::isinstance<py::tuple>(f) && py::len(f) == 2) {
        add(py::str(f.cast<py::tuple>()[0]).cast<std::string>(), f.cast<py::tuple>()[1]);
      } else {
        throw py::type_error(where() + "features are names (str) or (name, value) pairs");
      }
    }
  } else {
    throw py::type_error(where() + "a dict of features or a list of feature names expected");
  }
}

/// `seq` as it is when it has a length, else (a generator, an iterator) as a list.
py::object sized(py::handle seq) {
  if (py::hasattr(seq, "__len__")) return py::reinterpret_borrow<py::object>(seq);
  return py::list(py::reinterpret_borrow<py::object>(seq));
}

/// X (and y, when given) as CRFsuite data: sequences of tokens with their labels. X, y and the
/// sequences in them may be any iterables (generators too).
crfx::TextData read_sequences(py::handle X_in, py::handle y_in) {
  crfx::TextData data;
  data.format = crfx::InputFormat::crfsuite;
  data.path = "<X>";
  const bool labelled = !y_in.is_none();
  const py::object X = labelled ? sized(X_in) : py::reinterpret_borrow<py::object>(X_in);
  const py::object y = labelled ? sized(y_in) : py::none();
  if (labelled && py::len(X) != py::len(y))
    throw py::value_error(std::to_string(py::len(X)) + " sequences in X but " + std::to_string(py::len(y)) +
                          " in y");
  std::vector<py::object> ys;
  if (labelled)
    for (py::handle l : y) ys.push_back(py::isinstance<py::str>(l) ? py::reinterpret_borrow<py::object>(l) : sized(l));
  std::size_t s = 0;
  for (py::handle xseq : X) {
    if (py::isinstance<py::str>(xseq) || py::isinstance<py::dict>(xseq))
      throw py::type_error("X: a sequence of sequences of tokens expected (sequence " + std::to_string(s) +
                           " is a " + std::string(py::str(xseq.get_type().attr("__name__"))) + ")");
    CrfsuiteSentence sentence;
    for (py::handle features : xseq) {
      CrfsuiteToken token;  // line 0: messages name the sequence and token
      read_token(features, token, s, sentence.size());
      sentence.push_back(std::move(token));
    }
    if (labelled) {
      const py::object& yseq = ys[s];
      if (py::isinstance<py::str>(yseq)) throw py::type_error("y: sequence " + std::to_string(s) + " is a str, not a list of labels");
      if (py::len(yseq) != sentence.size())
        throw py::value_error("sequence " + std::to_string(s) + ": " + std::to_string(sentence.size()) +
                              " tokens but " + std::to_string(py::len(yseq)) + " labels");
      std::size_t t = 0;
      for (py::handle label : yseq) {
        sentence[t].label = py::str(label).cast<std::string>();
        if (sentence[t].label.empty()) throw py::value_error("sequence " + std::to_string(s) + ", token " + std::to_string(t) + ": an empty label");
        ++t;
      }
    }
    data.crfsuite.push_back(std::move(sentence));
    ++s;
  }
  return data;
}

crfx::BackendOptions backend_options(const std::string& device, unsigned threads) {
  crfx::BackendOptions bo;
  bo.device = crfx::parse_device(device);
  bo.threads = threads;
  return bo;
}

/// One iteration of a training run, as its progress report gave it.
struct IterationRecord {
  int iteration = 0;
  double passes = 0, objective = 0, gradient_norm = 0;  // gradient_norm NaN: not computed
  std::size_t active_features = 0;
  double step = 0, seconds = 0;
};

/// A trained or loaded model, and the taggers made from it on first use.
struct PyModel {
  crfx::Model model;
  crfx::BackendOptions backend;
  std::string stop_reason;
  int iterations = 0;
  std::vector<IterationRecord> log;  // training's iterations (empty for a loaded model)
  std::mutex mutex;  // one tagging call at a time (a Tagger and its Backend serve one)
  std::unique_ptr<crfx::Tagger> plain, with_marginals;

  crfx::Tagger& tagger(bool marginals) {
    std::unique_ptr<crfx::Tagger>& t = marginals ? with_marginals : plain;
    if (!t) {
      crfx::TagOptions options;
      options.marginals = marginals;
      crfx::Model copy = model;
      const crfx::Dims dims = copy.features.dims();
      t = std::make_unique<crfx::Tagger>(std::move(copy), crfx::make_backend(dims, backend), options);
    }
    return *t;
  }
};

/// Training settings by their crfx train names (underscores for dashes: max_iterations).
crfx::TrainOptions train_options(const crfx::TrainerInfo& trainer, const py::dict& params) {
  crfx::TrainOptions options;
  for (auto item : params) {
    const std::string given = py::str(item.first).cast<std::string>();
    std::string name = given;  // crfx train's spelling
    for (char& c : name)
      if (c == '_') c = '-';
    const crfx::OptionSpec* spec = crfx::find_option(name);
    if (!spec)
      throw py::value_error("'" + given + "' is not a training setting ('crfx train --algo list' lists them, "
                            "with dashes for underscores)");
    if (!trainer.takes(name))
      throw py::value_error("'" + given + "' is not a setting of " + trainer.name + " ('crfx train --algo list')");
    if (item.second.is_none()) continue;  // the default
    std::string text = py::str(item.second).cast<std::string>();
    if (py::isinstance<py::bool_>(item.second)) text = item.second.cast<bool>() ? "1" : "0";
    try {
      spec->set(options, text);
    } catch (const crfx::Error& e) {
      throw py::value_error(given + ": " + e.what());
    }
  }
  const std::string why = crfx::loss_refusal(trainer, options.loss);
  if (!why.empty()) throw py::value_error("loss: " + why);
  return options;
}

/// The model type by crfx train's --type name, checked against the algorithm (seed 001's
/// trainers train Maxent models only).
crfx::ModelType model_type(const std::string& name, const crfx::TrainerInfo& trainer) {
  crfx::ModelType type;
  try {
    type = crfx::parse_model_type(name);
  } catch (const crfx::Error& e) {
    throw py::value_error(std::string("type: ") + e.what());
  }
  if (trainer.maxent_only && type != crfx::ModelType::maxent)
    throw py::value_error(std::string("algorithm ") + trainer.name +
                          " trains Maxent models: add type=\"maxent\" (or use lbfgs, owlqn, … for a CRF)");
  return type;
}

/// The backend for `trainer`: a CPU-only trainer (iterative scaling, coordinate descent) takes
/// the CPU under device="auto" and refuses "cuda" with the reason, as crfx train does.
crfx::BackendOptions training_backend(const crfx::TrainerInfo& trainer, const std::string& device, unsigned threads) {
  crfx::BackendOptions bo = backend_options(device, threads);
  if (trainer.cpu_only) {
    if (bo.device == crfx::DeviceKind::cuda)
      throw py::value_error(std::string("algorithm ") + trainer.name + ": " + trainer.cpu_only +
                            "; use device=\"cpu\" (or \"auto\")");
    bo.device = crfx::DeviceKind::cpu;
  }
  return bo;
}

/// The training run's settings from fit's and train_file's arguments.
crfx::TrainConfig train_config(const std::string& algorithm, const py::dict& params, bool all_states,
                               bool all_transitions, const std::string& device, unsigned threads,
                               std::size_t min_freq, const std::string& type, double max_memory,
                               double max_device_memory) {
  const crfx::TrainerInfo& trainer = crfx::find_trainer(algorithm);
  crfx::TrainConfig c;
  c.algorithm = trainer.name;
  c.type = model_type(type, trainer);
  c.options = train_options(trainer, params);
  c.features.all_states = all_states;
  c.features.all_transitions = all_transitions;
  c.min_freq = min_freq;
  c.backend = training_backend(trainer, device, threads);
  c.max_memory = max_memory;
  c.max_device_memory = max_device_memory;
  return c;
}

/// Writes `text` to Python's sys.stderr (the GIL held).
void to_stderr(const std::string& text) {
  py::object err = py::module_::import("sys").attr("stderr");
  if (err.is_none()) return;
  err.attr("write")(text);
  err.attr("flush")();
}

/// Trains through crfx::TrainingRun (the library's checks of the input, the CLI's) without the
/// GIL, on the data `read` gives (called without the GIL too); Ctrl-C stops after an iteration (a
/// stochastic trainer: after a mini-batch). A run whose estimated memory exceeds what the backend
/// has (or max_memory) is refused with MemoryError before anything large is allocated; the run's
/// notes ("note: …") become UserWarnings. Every iteration is recorded in the model's log; with
/// `verbose` its progress line, and at the end why training stopped, go to sys.stderr.
std::shared_ptr<PyModel> train_run(crfx::TrainConfig config, const std::function<void(crfx::TrainingRun&)>& compile,
                                   bool verbose) {
  auto result = std::make_shared<PyModel>();
  result->backend = config.backend;
  std::vector<std::string> notes;
  config.note = [&](const std::string& line) {
    if (line.rfind("note: ", 0) == 0) notes.push_back(line.substr(6));
  };
  std::atomic<bool> interrupted{false};
  const std::thread::id main_thread = std::this_thread::get_id();
  // The stochastic trainers ask after every mini-batch, a slow pass as each sentence starts (from
  // the backend's workers too): signals are Python's to check on the main thread only, so the
  // others read the flag it sets.
  config.stop = [&interrupted, main_thread] {
    if (std::this_thread::get_id() != main_thread) return interrupted.load();
    py::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() != 0) interrupted = true;  // (the error stays set)
    return interrupted.load();
  };
  const bool all_states = config.features.all_states;
  std::string refused;
  std::unique_ptr<crfx::TrainingRun> run;
  {
    py::gil_scoped_release release;
    run = std::make_unique<crfx::TrainingRun>(config);
    try {
      compile(*run);  // files: refused while reading where the data alone cannot fit
      run->prepare();
    } catch (const crfx::MemoryRefusal& e) {
      const bool weights_counted = e.check().estimate.weights > 0;  // (not a refusal while reading)
      refused = std::string(e.what()) + "; " +
                (all_states && weights_counted
                     ? "all_possible_states gives every attribute × label pair a weight, the default keeps "
                       "the pairs seen in training"
                     : "raise min_freq to drop rare attributes");
    }
  }
  for (const std::string& note : notes)
    if (PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 1) != 0) throw py::error_already_set();
  if (!refused.empty()) {
    PyErr_SetString(PyExc_MemoryError, refused.c_str());
    throw py::error_already_set();
  }
  {
    py::gil_scoped_release release;
    crfx::TrainResult r = run->run([&](const crfx::Progress& p, const crfx::Vector&) {
      result->iterations = p.iteration;
      if (interrupted) return false;
      if (!p.within_iteration())
        result->log.push_back({p.iteration, p.passes, p.objective, p.gradient_norm, p.active_features, p.step,
                               p.seconds});
      const std::string line = verbose && !p.within_iteration() ? crfx::progress_text(p) + "\n" : "";
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {  // Ctrl-C: stop here (the error stays set)
        interrupted = true;
        return false;
      }
      if (verbose && !p.within_iteration()) {
        try {
          to_stderr(line);
        } catch (py::error_already_set& e) {  // stop here and raise it (the error set again)
          e.restore();
          interrupted = true;
          return false;
        }
      }
      return true;
    });
    result->stop_reason = r.stop_reason;
    result->model = std::move(r.model);
  }
  if (interrupted) throw py::error_already_set();
  if (verbose) to_stderr("stopped: " + result->stop_reason + "\n");
  return result;
}

std::shared_ptr<PyModel> fit(py::handle X, py::handle y, const std::string& algorithm, const py::dict& params,
                             bool all_states, bool all_transitions, const std::string& device, unsigned threads,
                             std::size_t min_freq, const std::string& type, double max_memory,
                             double max_device_memory, bool verbose) {
  if (y.is_none()) throw py::value_error("fit needs the labels y");
  crfx::TrainConfig config =
      train_config(algorithm, params, all_states, all_transitions, device, threads, min_freq, type, max_memory,
                   max_device_memory);
  config.format = crfx::InputFormat::crfsuite;
  crfx::TextData data = read_sequences(X, y);
  return train_run(std::move(config), [&](crfx::TrainingRun& run) { run.compile(data); }, verbose);
}

std::shared_ptr<PyModel> train_file(const std::vector<std::string>& data, const std::string& format,
                                    const std::string& template_path, const std::string& algorithm,
                                    const py::dict& params, bool all_states, bool all_transitions,
                                    const std::string& device, unsigned threads, std::size_t min_freq,
                                    const std::string& type, double max_memory, double max_device_memory,
                                    bool verbose) {
  crfx::TrainConfig config =
      train_config(algorithm, params, all_states, all_transitions, device, threads, min_freq, type, max_memory,
                   max_device_memory);
  {
    py::gil_scoped_release release;
    if (format == "conll") {
      if (template_path.empty()) throw crfx::Error("CoNLL data needs a template (template=PATH)");
      config.format = crfx::InputFormat::conll;
      config.templ = crfx::FeatureTemplate::load(template_path);
    } else if (format == "crfsuite") {
      config.format = crfx::InputFormat::crfsuite;
    } else {
      throw crfx::Error("format '" + format + "': conll or crfsuite");
    }
  }
  // The files streamed, a batch of text at a time (TrainingRun::compile(paths)).
  return train_run(std::move(config), [&](crfx::TrainingRun& run) { run.compile(data); }, verbose);
}

crfx::TextData unlabelled(PyModel& m, py::handle X) {
  if (m.model.features.format != crfx::InputFormat::crfsuite)
    throw py::value_error("this model reads CoNLL columns through a template: tag files with crfx.tag_file");
  return read_sequences(X, py::none());
}

py::list predict(PyModel& m, py::handle X) {
  crfx::TextData data = unlabelled(m, X);
  crfx::Tagged tagged;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m.mutex);
    m.tagger(false).tag(data, tagged);
  }
  const crfx::Dictionary& labels = m.model.features.labels;
  py::list out;
  std::size_t k = 0;
  for (const auto& sentence : data.crfsuite) {
    py::list seq;
    for (std::size_t t = 0; t < sentence.size(); ++t) seq.append(labels.at(tagged.paths[k++]));
    out.append(std::move(seq));
  }
  return out;
}

py::list predict_marginals(PyModel& m, py::handle X) {
  crfx::TextData data = unlabelled(m, X);
  crfx::Tagged tagged;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(m.mutex);
    m.tagger(true).tag(data, tagged);
  }
  const crfx::Dictionary& labels = m.model.features.labels;
  const std::size_t L = labels.size();
  std::vector<py::str> names;
  for (std::size_t y = 0; y < L; ++y) names.emplace_back(labels.at(std::uint32_t(y)));
  py::list out;
  std::size_t k = 0;
  for (const auto& sentence : data.crfsuite) {
    py::list seq;
    for (std::size_t t = 0; t < sentence.size(); ++t, ++k) {
      py::dict p;
      for (std::size_t y = 0; y < L; ++y) p[names[y]] = tagged.marginals[k * L + y];
      seq.append(std::move(p));
    }
    out.append(std::move(seq));
  }
  return out;
}

py::list labels(const PyModel& m) {
  py::list out;
  for (std::size_t y = 0; y < m.model.features.labels.size(); ++y) out.append(m.model.features.labels.at(std::uint32_t(y)));
  return out;
}

/// {(attribute, label): weight} for every non-zero state weight.
py::dict state_features(const PyModel& m) {
  const crfx::FeatureSpace& fs = m.model.features;
  const crfx::Dims d = fs.dims();
  const crfx::WeightGroups wg = d.groups();
  py::dict out;
  for (std::uint32_t a = 0; a < d.A; ++a)
    crfx::for_each_weight(wg, a, [&](std::size_t k, std::size_t slot) {
      if (m.model.weights[k] != 0.0)
        out[py::make_tuple(fs.state_attrs.at(a), fs.labels.at(std::uint32_t(slot)))] = m.model.weights[k];
    });
  return out;
}

/// {(label from, label to): weight} for every non-zero transition weight.
py::dict transition_features(const PyModel& m) {
  const crfx::FeatureSpace& fs = m.model.features;
  const crfx::Dims d = fs.dims();
  const crfx::WeightGroups wg = d.groups();
  const std::size_t L = d.L;
  py::dict out;
  crfx::for_each_weight(wg, wg.transitions(), [&](std::size_t k, std::size_t slot) {
    if (m.model.weights[k] != 0.0)
      out[py::make_tuple(fs.labels.at(std::uint32_t(slot / L)), fs.labels.at(std::uint32_t(slot % L)))] =
          m.model.weights[k];
  });
  return out;
}

/// The state attributes the model file keeps (those with a non-zero weight), in id order.
py::list attributes(const PyModel& m) {
  const crfx::FeatureSpace& fs = m.model.features;
  const crfx::Dims d = fs.dims();
  const crfx::WeightGroups wg = d.groups();
  py::list out;
  for (std::uint32_t a = 0; a < d.A; ++a) {
    for (std::size_t k = wg.begin(a), e = k + wg.size(a); k < e; ++k)
      if (m.model.weights[k] != 0.0) {
        out.append(fs.state_attrs.at(a));
        break;
      }
  }
  return out;
}

/// The training log: one dict per iteration.
py::list training_log(const PyModel& m) {
  py::list out;
  for (const IterationRecord& r : m.log) {
    py::dict d;
    d["iteration"] = r.iteration;
    d["passes"] = r.passes;
    d["objective"] = r.objective;
    d["gradient_norm"] = std::isnan(r.gradient_norm) ? py::object(py::none()) : py::object(py::float_(r.gradient_norm));
    d["active_features"] = r.active_features;
    d["step"] = r.step;
    d["seconds"] = r.seconds;
    out.append(std::move(d));
  }
  return out;
}

std::shared_ptr<PyModel> load(const std::string& path, const std::string& device, unsigned threads) {
  auto m = std::make_shared<PyModel>();
  m->backend = backend_options(device, threads);
  py::gil_scoped_release release;
  m->model = crfx::load_model(path);
  return m;
}

/// crfx tag's engine: `inputs` (files; directories with recursive) into `output` (one stream,
/// "-" for standard output) or `output_dir` (one file each). Returns the run's figures.
py::dict tag_file(const std::string& model_path, const std::vector<std::string>& inputs, const std::string& output,
                  const std::string& output_dir, const std::string& suffix, bool recursive, bool keep_going,
                  bool probability, bool marginals, std::size_t nbest, const std::string& device, unsigned threads) {
  crfx::TagRunStats stats;
  {
    py::gil_scoped_release release;
    std::vector<crfx::InputFile> files = crfx::list_inputs(inputs, recursive);
    crfx::Model model = crfx::load_model(model_path);
    const crfx::Dims dims = model.features.dims();
    crfx::TagOptions options;
    options.probability = probability;
    options.marginals = marginals;
    options.nbest = nbest;
    const crfx::BackendOptions bo = backend_options(device, threads);
    crfx::Tagger tagger(std::move(model), crfx::make_backend(dims, bo), options);
    std::unique_ptr<crfx::TagSink> sink;
    if (!output_dir.empty())
      sink = std::make_unique<crfx::DirectoryOutput>(crfx::output_paths(files, output_dir, suffix));
    else
      sink = std::make_unique<crfx::ConcatenatedOutput>(output.empty() ? "-" : output);
    crfx::TagRunOptions run;
    run.workers = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
    run.keep_going = keep_going;
    stats = crfx::tag_inputs(tagger, files, *sink, run);
  }
  py::dict out;
  out["inputs"] = stats.inputs;
  out["sentences"] = stats.sentences;
  out["tokens"] = stats.tokens;
  out["seconds"] = stats.seconds;
  py::list failures;
  for (const auto& f : stats.failures) failures.append(f.message);
  out["failures"] = failures;
  return out;
}

}  // namespace

PYBIND11_MODULE(_crfx, m) {
  m.doc() = "crfx: linear-chain CRFs (the C++ core; use the crfx package)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const crfx::InputError& e) {  // a file that cannot be opened or read: OSError
      const bool io = e.problem().rfind("cannot open", 0) == 0 || e.problem().rfind("cannot read", 0) == 0;
      PyErr_SetString(io ? PyExc_OSError : PyExc_ValueError, e.what());
    } catch (const crfx::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model")
      .def("predict", &predict)
      .def("predict_marginals", &predict_marginals)
      .def("labels", &labels)
      .def("state_features", &state_features)
      .def("transition_features", &transition_features)
      .def("save", [](const PyModel& self, const std::string& path) {
        py::gil_scoped_release release;
        crfx::save_model(self.model, path);
      })
      .def("to_bytes",
           [](const PyModel& self) {
             std::string bytes;
             {
               py::gil_scoped_release release;
               bytes = crfx::serialize_model(self.model);
             }
             return py::bytes(bytes);
           },
           "The model file's bytes (what save writes).")
      .def("attributes", &attributes)
      .def_property_readonly("log", &training_log)
      .def_readonly("stop_reason", &PyModel::stop_reason)
      .def_readonly("iterations", &PyModel::iterations);
  m.def("fit", &fit, py::arg("X"), py::arg("y"), py::arg("algorithm"), py::arg("params"), py::arg("all_states"),
        py::arg("all_transitions"), py::arg("device"), py::arg("threads"), py::arg("min_freq"), py::arg("type"),
        py::arg("max_memory"), py::arg("max_device_memory") = 0.0,
        py::arg("verbose") = false);
  m.def("train_file", &train_file, py::arg("data"), py::arg("format"), py::arg("template"), py::arg("algorithm"),
        py::arg("params"), py::arg("all_states"), py::arg("all_transitions"), py::arg("device"), py::arg("threads"),
        py::arg("min_freq"), py::arg("type"), py::arg("max_memory"), py::arg("max_device_memory") = 0.0,
        py::arg("verbose") = false);
  m.def("load", &load, py::arg("path"), py::arg("device"), py::arg("threads"));
  m.def("tag_file", &tag_file, py::arg("model"), py::arg("inputs"), py::arg("output"), py::arg("output_dir"),
        py::arg("suffix"), py::arg("recursive"), py::arg("keep_going"), py::arg("probability"), py::arg("marginals"),
        py::arg("nbest"), py::arg("device"), py::arg("threads"));
  m.def("algorithms", [] {
    py::list out;
    for (const auto& t : crfx::trainer_registry()) out.append(t.name);
    return out;
  });
}
