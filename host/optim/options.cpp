// crfx — the trainers' settings as tables (OptionSpec, include/crfx/internal/trainer.hpp): each setting's
// name, kind, help and TrainOptions field, written once; the registry (registry.cpp) says which
// trainer takes which, and crfx train builds its command line and `--algo list` from both.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"

namespace crfx {
namespace {

// ---- values as text ------------------------------------------------------------------------

/// The shortest decimal that reads back as v.
std::string text_of(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
std::string text_of(T v) {
  return std::to_string(v);
}

double parse_real(const std::string& t) {
  char* end = nullptr;
  errno = 0;
  const double v = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw Error("'" + t + "' is not a finite number");
  return v;
}

long long parse_integer(const std::string& t, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = t.empty() ? 0 : std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE) throw Error("'" + t + "' is not an integer");
  if (v < lo || v > hi)
    throw Error("must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + t);
  return v;
}

std::uint64_t parse_seed(const std::string& t) {
  errno = 0;
  const bool digits = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  const unsigned long long v = digits ? std::strtoull(t.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) throw Error("'" + t + "' is not an integer in 0 … 2^64 − 1");
  return v;
}

// ---- fields --------------------------------------------------------------------------------

/// A real field, ≥ 0 (> 0 when kPositive).
template <double TrainOptions::*F, bool kPositive>
OptionSpec real(const char* name, const char* help) {
  return {name, "real", help, [](const TrainOptions& o) { return text_of(o.*F); },
          [](TrainOptions& o, const std::string& t) {
            const double v = parse_real(t);
            if (kPositive ? !(v > 0) : !(v >= 0))
              throw Error(std::string("must be ") + (kPositive ? "> 0" : "≥ 0") + ", got " + t);
            o.*F = v;
          }};
}

/// A 0 | 1 field (CRFsuite's flags).
template <bool TrainOptions::*F>
OptionSpec flag(const char* name, const char* help) {
  return {name, "0 | 1", help, [](const TrainOptions& o) { return std::string(o.*F ? "1" : "0"); },
          [](TrainOptions& o, const std::string& t) { o.*F = parse_integer(t, 0, 1) == 1; }};
}

template <int TrainOptions::*F, int Lo>
OptionSpec integer(const char* name, const char* help) {
  return {name, "integer", help, [](const TrainOptions& o) { return text_of(o.*F); },
          [](TrainOptions& o, const std::string& t) {
            o.*F = int(parse_integer(t, Lo, std::numeric_limits<int>::max()));
          }};
}

}  // namespace

const std::vector<OptionSpec>& objective_options() {
  static const std::vector<OptionSpec> table = {
      real<&TrainOptions::c1, false>("c1", "L1 coefficient: objective NLL + c1·|w|₁ + c2·|w|²"),
      real<&TrainOptions::c2, false>("c2", "L2 coefficient (CRFsuite's convention; CRF++ -c C = 1/(2·c2))"),
      {"loss", "seq-log | seq-exp | point-log | point-exp",
       "the loss summed over the sentences, in place of NLL (Altun et al. 2003): seq-log -log p(y|x), the NLL; "
       "seq-exp 1/p(y|x); point-log -sum_t log p(y_t|x); point-exp sum_t 1/p(y_t|x). The point losses are not "
       "convex. sag, saga and the Maxent trainers take seq-log only",
       [](const TrainOptions& o) { return std::string(sequence_loss_name(o.loss)); },
       [](TrainOptions& o, const std::string& t) { o.loss = parse_sequence_loss(t); }},
  };
  return table;
}

const std::vector<OptionSpec>& trainer_options() {
  static const std::vector<OptionSpec> table = {
      integer<&TrainOptions::max_iterations, 0>("max-iterations", "stop after this many iterations (0 = no limit)"),
      integer<&TrainOptions::period, 0>("period", "stopping test window in iterations (0 = no delta test)"),
      real<&TrainOptions::delta, false>(
          "delta", "stop when the objective improved less than this (relative) over --period iterations"),
      real<&TrainOptions::epsilon, false>(
          "epsilon", "stop when |g| / max(1, |w|) falls below this (sag, saga: when |d/n + lambda w|_inf does; pa, arow: when an "
          "epoch's mean loss does)"),
      integer<&TrainOptions::memory, 1>("memory", "quasi-Newton history pairs"),
      integer<&TrainOptions::max_linesearch, 1>("max-linesearch", "line-search trials per iteration (cd: per feature)"),
      {"seed", "seed", "random seed (shuffling, sampling): same seed, same model",
       [](const TrainOptions& o) { return text_of(o.seed); },
       [](TrainOptions& o, const std::string& t) { o.seed = parse_seed(t); }},
      {"batch-size", "integer", "sentences per update (1 = online)",
       [](const TrainOptions& o) { return text_of(o.batch_size); },
       [](TrainOptions& o, const std::string& t) {
         o.batch_size = std::size_t(parse_integer(t, 1, std::numeric_limits<long long>::max()));
       }},
      integer<&TrainOptions::epochs, 1>("epochs", "epochs over the data, shuffled anew each epoch (mira: in corpus "
                                                  "order, as CRF++)"),
      {"eta0", "real",
       "initial (per-feature) learning rate (default 0.1; 0.025 with the heuristic line search and for "
       "two-stage, whose trials grow the rate up to 4x)",
       [](const TrainOptions& o) { return o.eta0 ? text_of(*o.eta0) : std::string(); },
       [](TrainOptions& o, const std::string& t) { o.eta0 = parse_real(t); }},
      real<&TrainOptions::alpha, true>("alpha", "rate decay, eta_k = eta0 * alpha^(k/N)"),
      {"line-search", "none | heuristic", "per-batch line search: none, or the heuristic of Zhou et al. 2011",
       [](const TrainOptions& o) { return std::string(name_of(o.line_search)); },
       [](TrainOptions& o, const std::string& t) { o.line_search = parse_line_search(t); }},
      integer<&TrainOptions::sgd_epochs, 1>("sgd-epochs", "SGD-L1 epochs before OWL-QN"),
      {"sampling", "uniform | lipschitz | mixed", "how sentences are drawn (Schmidt et al. 2015 §5)",
       [](const TrainOptions& o) { return std::string(name_of(o.sampling)); },
       [](TrainOptions& o, const std::string& t) { o.sampling = parse_sampling(t); }},
      integer<&TrainOptions::max_epochs, 1>("max-epochs", "stop after this many epochs"),
      real<&TrainOptions::adf_alpha, true>("adf-alpha", "rate decay factor for rare features"),
      real<&TrainOptions::adf_beta, true>("adf-beta", "rate decay factor for frequent features"),
      integer<&TrainOptions::adf_windows, 1>("adf-windows", "rate updates per epoch (every n/windows samples)"),
      {"pa-type", "0 | 1 | 2", "passive-aggressive variant: 0 PA, 1 PA-I (step at most pa-c), 2 PA-II (CRFsuite's type)",
       [](const TrainOptions& o) { return text_of(o.pa_type); },
       [](TrainOptions& o, const std::string& t) { o.pa_type = int(parse_integer(t, 0, 2)); }},
      real<&TrainOptions::pa_c, true>("pa-c", "aggressiveness C of PA-I and PA-II (CRFsuite's c)"),
      flag<&TrainOptions::error_sensitive>(
          "error-sensitive", "1: the loss counts the mislabeled tokens (sqrt of their number), 0: a mistake costs 1"),
      flag<&TrainOptions::averaging>("averaging", "1: the model is the average of the weights (as ap's)"),
      real<&TrainOptions::arow_variance, true>("variance", "AROW's initial variance of every weight"),
      real<&TrainOptions::arow_gamma, true>("gamma", "AROW's trade-off: larger, smaller steps"),
      // CRFsuite's l2sgd calibration (calibration.eta, .rate, .samples, .candidates, .max_trials).
      real<&TrainOptions::calibration_eta, true>("calibration-eta", "the first rate eta the rate calibration tries"),
      real<&TrainOptions::calibration_rate, true>(
          "calibration-rate", "the calibration multiplies eta by this while it lowers the loss, then divides it"),
      integer<&TrainOptions::calibration_samples, 1>(
          "calibration-samples", "sentences the calibration's trials train on (the first of the shuffled data)"),
      integer<&TrainOptions::calibration_candidates, 1>(
          "calibration-candidates", "rates that lower the loss the calibration looks for, upwards then downwards"),
      integer<&TrainOptions::calibration_max_trials, 1>(
          "calibration-max-trials", "CRFsuite's bound on the calibration's trials: it runs at most this minus 1 (at "
                                    "least 1)"),
      // CRF++'s MIRA (crf_learn -a MIRA -c C -H N). Not --pa-c: pa's C caps each step, MIRA's the sum
      // of a sentence's steps over the whole run (the box of its dual variable, Crammer & Singer 2003).
      real<&TrainOptions::mira_c, true>(
          "mira-c", "MIRA's C (CRF++'s -c with -a MIRA): the most the steps on one sentence may add up to over "
                    "the run"),
      integer<&TrainOptions::shrinking_size, 1>(
          "shrinking-size", "MIRA's shrinking (CRF++'s -H): a sentence decoded right this many epochs running is "
                            "skipped, until an epoch without a margin violation below its bound"),
      // Wapiti's bcd (--kappa, --stopwin, --stopeps).
      real<&TrainOptions::bcd_kappa, true>(
          "bcd-kappa", "bcd's stability factor κ (Wapiti's --kappa): each block's curvature bound is multiplied by "
                       "κ·max(1, max |g/h|); larger, shorter steps"),
      integer<&TrainOptions::stop_window, 0>(
          "stop-window", "bcd stops when the training token error rate of this many iterations running spreads "
                         "less than --stop-epsilon (Wapiti's --stopwin; 0: no such test)"),
      real<&TrainOptions::stop_epsilon, false>(
          "stop-epsilon", "the spread of --stop-window's error rates, in percentage points (Wapiti's --stopeps)"),
      // Sequence boosting (seed 002 §5.2; host/optim/boost.cpp).
      {"boost-rule", "bound | gradient",
       "boost's round: bound, the paper's largest decrease of the convexity bound and its minimiser; gradient, "
       "the feature with the largest |dH/dw_k| stepped to the minimum of H along it (smoothed)",
       [](const TrainOptions& o) { return std::string(name_of(o.boost_rule)); },
       [](TrainOptions& o, const std::string& t) { o.boost_rule = parse_boost_rule(t); }},
      integer<&TrainOptions::dev_patience, 0>(
          "dev-patience", "with crfx train --dev: stop when the dev figure has not improved for this many rounds "
                          "(or a fifth of the rounds to the best, where more) and write the best round's model (the "
                          "paper's held-out stopping; without --max-iterations it alone ends the run; 0: no such test)"),
  };
  return table;
}

const OptionSpec* find_option(const std::string& name) {
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& o : *table)
      if (name == o.name) return &o;
  return nullptr;
}

bool TrainerInfo::takes(const std::string& name) const {
  if (uses_objective)
    for (const OptionSpec& o : objective_options())
      if (name == o.name) return true;
  for (const char* o : options)
    if (name == o) return true;
  return false;
}

}  // namespace crfx
