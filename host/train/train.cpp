// crfx — a training run in stages and in one call (include/crfx/train.hpp): the checks of the
// input, compilation, the backend, the memory check, the trainer.
#include "crfx/train.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/tagger.hpp"

namespace crfx {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// "sequence s, token t" of a token made in memory (after the data's name, when it has one).
std::string where(const TextData& data, std::size_t s, std::size_t t) {
  return (data.path.empty() ? std::string() : data.path + ": ") + "sequence " + std::to_string(s) + ", token " +
         std::to_string(t);
}

std::string columns_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " column" : " columns"); }

/// The readers' rules, in their words, for tokens made in memory (line 0; a file's tokens have
/// been through a reader): CoNLL tokens with the same number of columns, at least two (features
/// and the label), none empty; CRFsuite tokens with a label and named attributes whose values
/// are finite and within ±kMaxAttributeValue. Messages name the sequence and the token.
void check_text(const TextData& data) {
  if (data.format == InputFormat::conll) {
    std::size_t columns = 0;
    for (std::size_t s = 0; s < data.conll.size(); ++s)
      for (std::size_t t = 0; t < data.conll[s].size(); ++t) {
        const ConllToken& tok = data.conll[s][t];
        if (tok.line) continue;
        const std::size_t n = tok.columns.size();
        if (n < 2)
          throw InputError(where(data, s, t), 0,
                           "training data needs feature columns and a label column (the last); this token has " +
                               columns_text(n));
        if (columns == 0) columns = n;
        if (n != columns)
          throw InputError(where(data, s, t), 0,
                           "inconsistent column count: expected " + columns_text(columns) + ", got " +
                               std::to_string(n));
        for (const std::string& c : tok.columns)
          if (c.empty()) throw InputError(where(data, s, t), 0, "an empty column");
      }
    return;
  }
  for (std::size_t s = 0; s < data.crfsuite.size(); ++s)
    for (std::size_t t = 0; t < data.crfsuite[s].size(); ++t) {
      const CrfsuiteToken& tok = data.crfsuite[s][t];
      if (tok.line) continue;
      if (tok.label.empty()) throw InputError(where(data, s, t), 0, "missing label (the first field) in training data");
      for (const CrfsuiteAttribute& a : tok.attributes) {
        if (a.name.empty()) throw InputError(where(data, s, t), 0, "empty attribute name");
        const std::string problem = attribute_value_problem(a.name, a.value);
        if (!problem.empty()) throw InputError(where(data, s, t), 0, problem);
      }
    }
}

/// Refuses an implausible label set before anything of its size is allocated: more than
/// kManyLabels labels, seen fewer than kLabelUses times each on average or a quarter of them only
/// once (words are Zipf-distributed, tag sets are not), is the wrong column read as the label (a
/// word column, or CoNLL columns read as CRFsuite lines), not a tag set.
constexpr std::size_t kManyLabels = 1000, kLabelUses = 5;
void check_label_count(const FeatureSpace& fs, const Corpus& corpus, const std::string& source) {
  const std::size_t L = fs.labels.size(), N = corpus.num_tokens();
  if (L <= kManyLabels) return;
  std::vector<std::size_t> uses(L, 0);
  for (const auto y : corpus.labels)
    if (y < L) ++uses[y];
  const std::size_t once = std::size_t(std::count(uses.begin(), uses.end(), std::size_t(1)));
  if (L * kLabelUses <= N && once * 4 <= L) return;
  const std::string column =
      fs.format == InputFormat::conll
          ? "the last column (column " + std::to_string(fs.feature_columns + 1) + " of each token line)"
          : "the field before the first tab";
  throw InputError(source, 0,
                   std::to_string(L) + " labels in " + std::to_string(N) + " tokens (" + std::to_string(once) +
                       " seen once): the label is read from " + column + "; is that the label column? (" +
                       fs.labels.at(0) + ", " + fs.labels.at(1) + ", " + fs.labels.at(2) + ", …)");
}

/// The weights of `dims`'s sizes in the dense layout (every attribute × label pair).
std::size_t all_pairs(Dims dims) {
  dims.layout = nullptr;
  return dims.num_weights();
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string number(double v) {  // as std::ostream prints a double
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

TextData conll_data(const std::vector<std::vector<std::vector<std::string>>>& sentences) {
  TextData d;
  d.format = InputFormat::conll;
  for (const auto& sentence : sentences) {
    ConllSentence s;
    for (const auto& columns : sentence) s.push_back(ConllToken{columns, 0});
    d.conll.push_back(std::move(s));
  }
  return d;
}

TextData attribute_data(const std::vector<CrfsuiteSentence>& sentences) {
  TextData d;
  d.format = InputFormat::crfsuite;
  d.crfsuite = sentences;
  return d;
}

TrainingRun::TrainingRun(TrainConfig config) : config_(std::move(config)), info_(&find_trainer(config_.algorithm)) {
  const TrainerInfo& t = *info_;
  if (t.maxent_only && config_.type != ModelType::maxent)
    throw Error("the algorithm " + config_.algorithm + " trains Maxent models only (model type maxent)");
  const std::string why = loss_refusal(t, config_.options.loss);
  if (!why.empty()) throw Error("loss: " + why);
  if (t.cpu_only) {
    if (config_.backend.device == DeviceKind::cuda)
      throw Error("the algorithm " + config_.algorithm + ": " + t.cpu_only + "; use the CPU");
    config_.backend.device = DeviceKind::cpu;
  }
  if (Collective* c = config_.collective) {
    const std::string name(t.name);
    if (c->size() > 1 && name != "lbfgs" && name != "owlqn" && name != "rprop")
      throw Error("the algorithm " + name + " runs in one process only; across " + std::to_string(c->size()) +
                  " processes the full-batch trainers run (" + kDistributedTrainers +
                  "), whose objective and gradient are sums over the sentences; mini-batches, per-sentence "
                  "steps and the Maxent-only trainers are not distributed");
    config_.backend.cuda_device = c->local_rank();
  }
  check_device(config_.backend);  // a GPU asked for and absent: now, not after the data is read
  FeatureSpace& fs = model_.features;
  fs.type = config_.type;
  fs.format = config_.format;
  if (fs.format == InputFormat::conll) {
    fs.templ = config_.templ;
    const std::size_t b_lines = fs.templ.edge_bigrams().size() + (fs.templ.has_transitions() ? 1 : 0);
    if (fs.type == ModelType::maxent && b_lines > 0 && config_.note)
      config_.note(std::string("note: a Maxent model ignores the template's B line") + (b_lines == 1 ? "" : "s") +
                   " (it has no transitions and no edge features)");
  }
  algorithm_ = t.make();
}

TrainingRun::~TrainingRun() = default;

void TrainingRun::compile(const TextData& data) {
  if (compiled_) throw Error("internal: TrainingRun::compile called twice");
  if (data.format != config_.format)
    throw Error(std::string("the data is ") + (data.format == InputFormat::conll ? "CoNLL columns" : "CRFsuite attributes") +
                " but the run reads " + (config_.format == InputFormat::conll ? "CoNLL columns" : "CRFsuite attributes"));
  const double t0 = now_seconds();
  source_ = data.path.empty() ? "the training data" : data.path;
  check_text(data);
  corpus_ = compile_training(model_.features, data, config_.min_freq);
  compiled(t0, now_seconds());
}

void TrainingRun::compile(const std::vector<std::string>& paths) {
  if (compiled_) throw Error("internal: TrainingRun::compile called twice");
  if (paths.empty()) throw Error("no data files to read");
  const double t0 = now_seconds();
  source_ = paths.front();
  // The reading checks the memory as it grows: the compiled data alone past kReadingShare of what
  // the process may allocate is refused where it is found, with the figures (prepare() checks the
  // whole run). The share leaves room for what the figures do not count (the allocator's own,
  // the expansion's caches, the next batch: compile_training sizes batches to an eighth of the
  // budget), so that a reading that cannot fit stops before its peak passes the budget.
  constexpr double kReadingShare = 2.0 / 3.0;
  const HostMemory host = host_memory();
  double budget = double(host.bytes);
  std::string why = host.limit.empty() ? "" : " (" + host.limit + ")";
  if (config_.max_memory > 0 && (budget <= 0 || config_.max_memory < budget)) {
    budget = config_.max_memory;
    why = " (the limit given)";
  }
  auto check = [&](const CompileProgress& p) {
    const double used = double(p.corpus_bytes) + double(p.strings_bytes);
    if (budget <= 0 || used + double(p.growth_bytes) <= budget * kReadingShare) return;
    MemoryCheck c;
    c.fits = false;
    c.shortfall = "cannot fit: reading " + p.path + " (" + std::to_string(p.sentences) + " sentences, to line " +
                  std::to_string(p.line) + "), the compiled data alone takes " + bytes_text(used) + " (corpus " +
                  bytes_text(double(p.corpus_bytes)) + ", attribute strings " + bytes_text(double(p.strings_bytes)) +
                  (p.growth_bytes ? ", the next batch's growth up to " + bytes_text(double(p.growth_bytes)) : "") +
                  ": past two thirds of the budget) but " + bytes_text(budget) + " was available" + why;
    throw MemoryRefusal(c, false);
  };
  corpus_ = compile_training(model_.features, paths, config_.min_freq, kCompileBatchBytes, check, budget,
                             config_.backend.threads);
  compiled(t0, now_seconds());
}

void TrainingRun::compiled(double t0, double t_read) {
  FeatureSpace& fs = model_.features;
  if (corpus_.num_sentences() == 0) throw InputError(source_, 0, "no sentences in the training data");
  if (fs.state_attrs.size() == 0 && fs.edge_attrs.size() == 0) {
    // Nothing to learn from but the label bigrams: a template without U lines, or data that is
    // not in the format read (CoNLL columns read as CRFsuite lines give labels and no attributes).
    if (fs.format == InputFormat::conll)
      throw InputError(fs.templ.name(), 0,
                       "the template generates no attributes (no U line, or none that fires"
                       " after --min-freq): the model would have nothing to learn from");
    throw InputError(source_, 0,
                     "no attributes in the data read as CRFsuite lines (LABEL<TAB>attr…)"
                     "; for CoNLL columns use --format conll with a --template");
  }
  check_label_count(fs, corpus_, source_);
  choose_layout(fs, corpus_, config_.features, config_.backend.threads);
  compiled_ = true;
  const Dims d = dims();
  if (config_.note)
    config_.note("data: " + std::to_string(corpus_.num_sentences()) + " sentences, " +
                 std::to_string(corpus_.num_tokens()) + " tokens, " + std::to_string(d.L) + " labels, " +
                 std::to_string(d.A) + " attributes, " + std::to_string(d.E) + " edge attributes, " +
                 std::to_string(d.num_weights()) + " weights (" +
                 (d.dense() ? std::string("every pair")
                            : "observed pairs; every pair would be " + std::to_string(all_pairs(d))) +
                 "; " + fixed2(now_seconds() - t0) + " s, the reading " + fixed2(t_read - t0) + " s: " +
                 fixed2(double(corpus_.num_tokens()) / std::max(t_read - t0, 1e-9) / 1e6) + " M tokens/s)");
}

Backend& TrainingRun::prepare() {
  if (!compiled_) throw Error("internal: TrainingRun::prepare before compile");
  if (backend_) throw Error("internal: TrainingRun::prepare called twice");
  const Dims d = dims();
  if (Collective* c = config_.collective) {  // this rank's shard: every rank compiled the whole data alike
    const std::size_t S = corpus_.num_sentences(), T = corpus_.num_tokens();
    const auto [first, last] = shard_range(corpus_, c->rank(), c->size());
    corpus_ = shard_corpus(corpus_, first, last);
    if (config_.note)
      config_.note("processes: " + c->name() + "; rank " + std::to_string(c->rank()) + " holds sentences " +
                   std::to_string(first + 1) + "–" + std::to_string(last) + " of " + std::to_string(S) + " (" +
                   std::to_string(corpus_.num_tokens()) + " of " + std::to_string(T) + " tokens)");
  }
  std::string note;
  backend_ = make_backend(d, config_.backend, &note);
  if (config_.collective) {
    backend_ = distributed_backend(std::move(backend_), *config_.collective, config_.device_sum);
    note += "; as " + backend_->name();
  }
  if (config_.note) config_.note(note);
  {  // the run's limits, and what its vectors will take beside the corpus (a CUDA backend streams
     // a corpus that does not fit in the rest); the dictionaries too, which check_memory counts
     // against the same budget
    const MemoryEstimate m = estimate_memory(*info_, config_.options, d, corpus_);
    backend_->set_memory_limits(std::size_t(config_.max_device_memory),
                                m.weights + m.optimizer + model_.features.dictionary_bytes(),
                                std::size_t(config_.max_memory));
  }
  const MemoryCheck memory = check_memory(*info_, config_.options, d, corpus_, *backend_, config_.max_memory,
                                          model_.features.dictionary_bytes());
  if (config_.note) config_.note("memory: " + memory.figures);
  if (!memory.fits) throw MemoryRefusal(memory, d.dense());
  uploaded_ = backend_->upload(std::move(corpus_));  // resident on the backend now
  corpus_ = Corpus();
  if (config_.note) {
    const std::string how = backend_->corpus_note(*uploaded_);
    if (!how.empty()) config_.note("memory: " + how);
  }
  objective_ = std::make_unique<Objective>(*backend_, *uploaded_, config_.options.c1, config_.options.c2,
                                           config_.options.loss);
  const TrainOptions& o = config_.options;
  if (config_.note && info_->uses_objective) {
    // Say what runs: lbfgs with an L1 term dispatches to OWL-QN (host/optim/lbfgs.cpp), as
    // CRFsuite's lbfgs does with c1 > 0.
    const std::string name(info_->name);
    const std::string what = name == "lbfgs" && o.c1 > 0
                                 ? "lbfgs with c1 > 0, i.e. OWL-QN (Andrew & Gao 2007), the L1 variant of L-BFGS"
                                 : name;
    std::string line = "training: " + what + ", c1 = " + number(o.c1) + ", c2 = " + number(o.c2);
    if (o.loss != SequenceLoss::seq_log) line += std::string(", loss ") + sequence_loss_name(o.loss);
    // The batch trainers (those with iterations) minimise seq-exp's log (crfx/internal/trainer.hpp).
    if (objective_->log_scale() && info_->takes("max-iterations"))
      line += " (minimised as log(H + c2·‖w‖²), the same optimum; the objective shown is that log)";
    else if (o.loss == SequenceLoss::seq_exp && o.c1 > 0 && info_->takes("max-iterations"))
      line += " (from L-BFGS's fit of log(H + c2·‖w‖²) without c1: the objective shown is that log, "
              "then H + c2·‖w‖² + c1·‖w‖₁)";
    config_.note(line);
  } else if (config_.note) {  // ap, boost: no regulariser, no loss
    config_.note("training: " + std::string(info_->name) + " (unregularised: no c1, c2)");
  }
  return *backend_;
}

Backend& TrainingRun::backend() {
  if (!backend_) throw Error("internal: TrainingRun::backend before prepare");
  return *backend_;
}

Objective& TrainingRun::objective() {
  if (!objective_) throw Error("internal: TrainingRun::objective before prepare");
  return *objective_;
}

TrainResult TrainingRun::run(const ProgressFn& progress) {
  if (!backend_) prepare();
  if (!algorithm_) throw Error("internal: TrainingRun::run called twice");
  Backend& b = *backend_;
  const std::size_t W = dims().num_weights();
  VectorPtr w = b.vector(W);
  // Several processes stop together, at an iteration's end (below), never inside a pass: a rank
  // that left a pass or an iteration alone would leave the others waiting on its sums.
  Collective* const ranks = config_.collective;
  if (config_.stop && !ranks) algorithm_->stop_when(config_.stop);
  TrainResult r;
  double callback_seconds = 0;
  const double start = now_seconds();
  // A stop inside a batch trainer's pass: the pass is abandoned while the iterations are slow (or
  // none has ended), keeping a copy of the last slow iteration's weights to end with; where they
  // are quick the stop waits for the iteration's end, the trainer's own report. (The stochastic
  // trainers stop between mini-batches through stop_when.)
  const bool batch = !info_->takes("epochs") && !info_->takes("max-epochs") && !info_->takes("sgd-epochs");
  std::atomic<bool> abandon{true};
  VectorPtr kept;
  int kept_iteration = 0;
  double last_report = start;
  // The poll also counts the sentences evaluated in the iteration, and one worker at a time says
  // so in a note line every progress_seconds (a slow iteration shows it is alive).
  std::atomic<std::uint64_t> evaluated{0};
  std::atomic<double> iteration_start{start}, next_note{start + config_.progress_seconds};
  std::mutex note_mutex;
  auto poll = [&](std::size_t finished) {
    evaluated.fetch_add(finished, std::memory_order_relaxed);
    if (config_.note) {
      const double now = now_seconds();
      double due = next_note.load(std::memory_order_relaxed);
      if (now >= due && next_note.compare_exchange_strong(due, now + config_.progress_seconds)) {
        std::lock_guard<std::mutex> lock(note_mutex);
        config_.note("iteration " + std::to_string(r.iterations + 1) + " in progress: " +
                     std::to_string(evaluated.load(std::memory_order_relaxed)) + " sentences evaluated, " +
                     fixed2(now - iteration_start.load(std::memory_order_relaxed)) + " s");
      }
    }
    return abandon.load(std::memory_order_relaxed) && config_.stop && config_.stop();
  };
  if (batch && !ranks && (config_.stop || config_.note)) b.set_stop_poll(poll);
  const ProgressFn& report = progress ? progress : config_.progress;
  try {
    r.objective = algorithm_->train(*objective_, *w, config_.options, [&](const Progress& p, const Vector& v) {
      if (!p.within_iteration()) {
        r.iterations = p.iteration;
        const double now = now_seconds();
        const bool slow = !ranks && now - last_report > config_.abandon_seconds;
        if (slow) {
          if (!kept) kept = b.vector(W);
          b.copy(v, *kept);
          kept_iteration = p.iteration;
        }
        abandon.store(slow, std::memory_order_relaxed);
        last_report = now;
        evaluated.store(0, std::memory_order_relaxed);
        iteration_start.store(now, std::memory_order_relaxed);
        next_note.store(now + config_.progress_seconds, std::memory_order_relaxed);
      }
      bool go_on = true;
      if (report) {
        const double t = now_seconds();
        go_on = report(p, v);
        callback_seconds += now_seconds() - t;
        last_report += now_seconds() - t;  // the report's own time is not the iteration's
      }
      go_on = go_on && !(config_.stop && config_.stop());
      return ranks ? ranks->all(go_on) : go_on;
    });
  } catch (const PassStopped&) {
    b.set_stop_poll({});
    if (!kept)
      throw TrainingStopped("stopped inside iteration " + std::to_string(r.iterations + 1) +
                            (r.iterations ? ", and no slow iteration's weights were kept" : ", the first") +
                            ": no model");
    b.copy(*kept, *w);
    r.iterations = kept_iteration;
    r.stopped_in_pass = true;
    r.objective = std::numeric_limits<double>::quiet_NaN();
  }
  b.set_stop_poll({});
  r.seconds = now_seconds() - start - callback_seconds;
  r.passes = objective_->passes();
  r.active_features = b.count_nonzero(*w);
  r.stop_reason = r.stopped_in_pass ? "stopped inside iteration " + std::to_string(r.iterations + 1) +
                                          "; the model of iteration " + std::to_string(r.iterations)
                                    : algorithm_->stop_reason();
  r.device = b.name();
  model_.weights = to_host(b, *w);
  for (double x : model_.weights)  // never a model of NaN (the trainers stop before; this is the last guard)
    if (!std::isfinite(x)) throw Error("training ended with weights that are not finite; no model written");
  r.model = std::move(model_);
  algorithm_.reset();
  return r;
}

std::string objective_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e15 ? "%.6f" : "%.6e", v);
  return buf;
}

std::string progress_text(const Progress& p) {
  char gnorm[32] = "-";
  if (!std::isnan(p.gradient_norm)) std::snprintf(gnorm, sizeof gnorm, "%.3e", p.gradient_norm);
  char line[256];
  std::snprintf(line, sizeof line, "iter %4d  passes %6.1f  obj %s  |g| %s  active %zu  step %.3g  %.2f s",
                p.iteration, p.passes, objective_text(p.objective).c_str(), gnorm, p.active_features, p.step,
                p.seconds);
  return line;
}

TrainResult train(const TrainConfig& config, const TextData& data) {
  TrainingRun run(config);
  run.compile(data);
  return run.run();
}

// Tagger's constructor that chooses the backend: here, at the top of the library, because it
// calls the factory (make_backend), which host/tag may not reach.
Tagger::Tagger(Model model, const TagOptions& options, const BackendOptions& device)
    : features_(std::move(model.features)), backend_(make_backend(features_.dims(), device)), options_(options) {
  take_weights(model.weights);
}

}  // namespace crfx
