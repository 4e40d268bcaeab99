// crfx — the Maxent problem (maxent_problem.hpp) and the loop the four Maxent trainers share.
#include "optim/maxent_problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"

namespace crfx {

const char* const kMaxentCpuOnly = "iterative scaling and coordinate descent are sequential: CPU only";

namespace {

/// A value grown beyond this is rescaled (S̃ of one instance), far from overflow.
constexpr double kBig = 1e250;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Error unless `dims` is a Maxent model's: no transitions, no edge attributes.
void require_maxent(const char* algo, const Dims& dims) {
  if (!dims.transitions && dims.E == 0) return;
  std::string what = dims.transitions ? "label transitions" : "";
  if (dims.E > 0)
    what += std::string(what.empty() ? "" : " and ") + std::to_string(dims.E) + (dims.E == 1 ? " edge attribute" : " edge attributes");
  throw Error(std::string(algo) + " trains Maxent models (crfx train --type maxent), and this model is a CRF (it has " +
              what + "): train it with --type maxent, or use lbfgs, owlqn, sgd-l1 … for a CRF");
}

}  // namespace

// ---- the problem ---------------------------------------------------------------------------

MaxentProblem::MaxentProblem(const char* algo, const Corpus& corpus, const Dims& dims, double c2)
    : corpus_(corpus), dims_(dims), c2_(c2) {
  require_maxent(algo, dims);
  dims.check_layout();
  corpus.check_values();
  N_ = corpus.num_tokens();
  L_ = dims.L;
  W_ = dims.num_weights();
  A_ = dims.A;
  wg_ = dims_.groups();
  if (corpus.labels.size() != N_) throw Error(std::string(algo) + ": the corpus has no gold label per token");
  labels_ = corpus.labels;
  for (std::size_t s = 0; s < corpus.num_sentences(); ++s)
    for (std::size_t i = corpus.sentence_offsets[s]; i < corpus.sentence_offsets[s + 1]; ++i)
      if (labels_[i] >= L_)
        throw Error(std::string(algo) + ": token " + std::to_string(i - corpus.sentence_offsets[s] + 1) +
                    " of sentence " + std::to_string(s + 1) + " has no gold label");
  for (std::uint32_t a : corpus.state_ids)
    if (a >= A_) throw Error(std::string(algo) + ": attribute id " + std::to_string(a) + " beyond the model");

  // The occurrence index: attribute → (instance, value), in token order, a token's repeats of an
  // attribute merged into one (values summed), zero values left out.
  occ_offsets_.assign(std::size_t(A_) + 1, 0);
  for (std::uint32_t a : corpus.state_ids) ++occ_offsets_[a + 1];
  for (std::uint32_t a = 0; a < A_; ++a) occ_offsets_[a + 1] += occ_offsets_[a];
  const std::size_t items = corpus.state_ids.size();
  occ_instance_.resize(items);
  std::vector<double> value(items);
  std::vector<std::size_t> fill(occ_offsets_.begin(), occ_offsets_.end() - 1);
  for (std::size_t i = 0; i < N_; ++i)
    for (std::size_t k = corpus.state_offsets[i]; k < corpus.state_offsets[i + 1]; ++k) {
      const std::uint32_t a = corpus.state_ids[k];
      const double v = corpus.state_value(k);
      std::size_t& at = fill[a];
      if (at > occ_offsets_[a] && occ_instance_[at - 1] == i) {
        value[at - 1] += v;  // the same attribute again at this token
        continue;
      }
      occ_instance_[at] = std::uint32_t(i);
      value[at] = v;
      ++at;
    }
  std::size_t out = 0;  // compaction: merged repeats and zero values out
  bool binary = true;
  max_value_.assign(A_, 0.0);
  for (std::uint32_t a = 0; a < A_; ++a) {
    const std::size_t begin = occ_offsets_[a], end = fill[a];
    occ_offsets_[a] = out;
    for (std::size_t j = begin; j < end; ++j) {
      if (value[j] == 0.0) continue;
      occ_instance_[out] = occ_instance_[j];
      value[out] = value[j];
      binary = binary && value[j] == 1.0;
      max_value_[a] = out == occ_offsets_[a] ? value[j] : std::max(max_value_[a], value[j]);
      ++out;
    }
  }
  occ_offsets_[A_] = out;
  occ_instance_.resize(out);
  occ_instance_.shrink_to_fit();
  if (!binary) {
    value.resize(out);
    occ_value_ = std::move(value);
  }

  // Empirical counts, and #nz.
  emp_.assign(W_, 0.0);
  for (std::uint32_t a = 0; a < A_; ++a) {
    nonzeros_ += double(occ_offsets_[a + 1] - occ_offsets_[a]) * double(wg_.size(a));
    for (std::size_t j = occ_offsets_[a]; j < occ_offsets_[a + 1]; ++j) {
      const std::size_t k = wg_.find(a, labels_[occ_instance_[j]]);
      if (k != WeightGroups::kNoWeight) emp_[k] += this->value(j);
    }
  }
  S_.assign(N_ * L_, 0.0);
  T_.assign(N_, 0.0);
}

std::vector<double> MaxentProblem::feature_sums() const {
  std::vector<double> f(N_ * L_, 0.0);
  for (std::size_t i = 0; i < N_; ++i) {
    double* fi = f.data() + i * L_;
    for (std::size_t k = corpus_.state_offsets[i]; k < corpus_.state_offsets[i + 1]; ++k) {
      const double v = corpus_.state_value(k);
      for_each_weight(wg_, corpus_.state_ids[k], [&](std::size_t, std::size_t y) { fi[y] += v; });
    }
  }
  return f;
}

void MaxentProblem::require_non_negative(const char* algo, const Corpus& corpus) {
  if (corpus.state_values.empty()) return;  // every value 1
  for (std::size_t s = 0; s < corpus.num_sentences(); ++s)
    for (std::size_t i = corpus.sentence_offsets[s]; i < corpus.sentence_offsets[s + 1]; ++i)
      for (std::size_t k = corpus.state_offsets[i]; k < corpus.state_offsets[i + 1]; ++k) {
        const double v = corpus.state_values[k];
        if (v >= 0) continue;
        const std::string line =
            s < corpus.source_lines.size() ? ", which starts at line " + std::to_string(corpus.source_lines[s]) : "";
        throw Error(std::string(algo) + ": iterative scaling needs non-negative feature values, and token " +
                    std::to_string(i - corpus.sentence_offsets[s] + 1) + " of sentence " + std::to_string(s + 1) +
                    line + ", has attribute #" + std::to_string(corpus.state_ids[k]) + " with the value " +
                    number(v) + " (the first negative one): train with -a cd or lbfgs, which take any value");
      }
}

void MaxentProblem::recompute(std::size_t i, const std::vector<double>& w) {
  double* S = S_.data() + i * L_;
  std::fill(S, S + L_, 0.0);
  for (std::size_t k = corpus_.state_offsets[i]; k < corpus_.state_offsets[i + 1]; ++k) {
    const double v = corpus_.state_value(k);
    for_each_weight(wg_, corpus_.state_ids[k], [&](std::size_t q, std::size_t y) { S[y] += v * w[q]; });
  }
  double m = *std::max_element(S, S + L_);
  if (!std::isfinite(m)) m = 0;  // (finite weights give finite scores)
  double T = 0;
  for (std::size_t y = 0; y < L_; ++y) T += S[y] = std::exp(S[y] - m);
  T_[i] = T;
}

void MaxentProblem::rescale(std::size_t i) {
  double* S = S_.data() + i * L_;
  const double m = *std::max_element(S, S + L_);
  int e = 0;
  std::frexp(m, &e);  // scaled by a power of two: exact
  double T = 0;
  for (std::size_t y = 0; y < L_; ++y) T += S[y] = std::ldexp(S[y], -e);
  T_[i] = T;
}

void MaxentProblem::refresh(const std::vector<double>& w, std::vector<double>* E) {
  if (E) E->assign(W_, 0.0);
  for (std::size_t i = 0; i < N_; ++i) {
    recompute(i, w);
    if (!E) continue;
    const double* S = S_.data() + i * L_;
    const double inv = 1.0 / T_[i];
    for (std::size_t k = corpus_.state_offsets[i]; k < corpus_.state_offsets[i + 1]; ++k) {
      const double v = corpus_.state_value(k);
      for_each_weight(wg_, corpus_.state_ids[k], [&](std::size_t q, std::size_t y) { (*E)[q] += v * (S[y] * inv); });
    }
  }
}

void MaxentProblem::resync(const std::vector<double>& w) {
  for (std::size_t i = 0; i < N_; ++i) {
    const double* S = S_.data() + i * L_;
    bool usable = true;
    for (std::size_t y = 0; y < L_; ++y) usable = usable && S[y] > 0 && S[y] <= kBig;
    if (usable)
      rescale(i);
    else
      recompute(i, w);
  }
}

void MaxentProblem::shift_weight(std::uint32_t a, std::uint32_t y, double z, const std::vector<double>& w) {
  if (z == 0) return;
  const bool bin = binary();
  const double e_bin = bin ? std::exp(z) : 0.0, m_bin = bin ? std::expm1(z) : 0.0;
  for (std::size_t j = occ_offsets_[a]; j < occ_offsets_[a + 1]; ++j) {
    const std::size_t i = occ_instance_[j];
    double* S = S_.data() + i * L_;
    const double old = S[y];
    if (old == 0) continue;  // underflowed: resync() recomputes it from w
    const double zv = bin ? 0.0 : z * occ_value_[j];
    S[y] = old * (bin ? e_bin : std::exp(zv));
    const double delta = old * (bin ? m_bin : std::expm1(zv));
    double& T = T_[i];
    if (delta < -0.5 * T) {  // most of T̃ goes: summed afresh rather than cancelled
      T = 0;
      for (std::size_t l = 0; l < L_; ++l) T += S[l];
    } else {
      T += delta;
    }
    if (!(S[y] <= kBig) || !(T <= kBig)) {
      if (std::isfinite(S[y]) && std::isfinite(T))
        rescale(i);
      else
        recompute(i, w);  // overflowed: from the weights (w already moved)
    }
  }
}

double MaxentProblem::nll(const std::vector<double>& w) const {
  double sum = 0;
  std::vector<double> s;
  for (std::size_t i = 0; i < N_; ++i) {
    const double Sy = S_[i * L_ + labels_[i]];
    if (Sy > 0 && std::isfinite(Sy) && std::isfinite(T_[i])) {
      sum += std::log(T_[i]) - std::log(Sy);
      continue;
    }
    // S̃(y_i) underflowed: −log P from the scores, exactly.
    s.assign(L_, 0.0);
    for (std::size_t k = corpus_.state_offsets[i]; k < corpus_.state_offsets[i + 1]; ++k) {
      const double v = corpus_.state_value(k);
      for_each_weight(wg_, corpus_.state_ids[k], [&](std::size_t q, std::size_t y) { s[y] += v * w[q]; });
    }
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double x : s) z += std::exp(x - m);
    sum += m + std::log(z) - s[labels_[i]];
  }
  return sum;
}

double MaxentProblem::objective(const std::vector<double>& w) const {
  double f = nll(w);
  if (c2_ > 0) {
    double sq = 0;
    for (double x : w) sq += x * x;
    f += c2_ * sq;
  }
  return f;
}

void MaxentProblem::gradient(const std::vector<double>& w, const std::vector<double>& E, std::vector<double>& g) const {
  g.assign(W_, 0.0);
  const std::size_t state_weights = wg_.begin(A_);
  for (std::size_t q = 0; q < state_weights; ++q) g[q] = E[q] - emp_[q] + 2.0 * c2_ * w[q];
}

// ---- the trainers' loop --------------------------------------------------------------------

namespace {

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

class MaxentTrainer final : public Trainer {
 public:
  MaxentTrainer(const char* algo, bool non_negative, std::unique_ptr<MaxentMethod> method)
      : algo_(algo), non_negative_(non_negative), method_(std::move(method)) {}

  double train(Objective& obj, Vector& wv, const TrainOptions& opt, const ProgressFn& progress) override {
    Backend& b = obj.backend();
    require_maxent(algo_, b.dims());
    if (b.name().rfind("cpu", 0) != 0)
      throw Error(std::string(algo_) + ": " + kMaxentCpuOnly + " (this run's device is " + b.name() +
                  "); use --device cpu");
    if (obj.c1() > 0)
      throw Error(std::string(algo_) + " minimises NLL + c2·‖w‖² (the objective of Huang, Hsieh, Chang & Lin 2009): c1 = " +
                  number(obj.c1()) + " (L1) is not supported; use owlqn for an L1 penalty");
    const Corpus* host = b.host_corpus(obj.corpus());
    if (!host) throw Error(std::string(algo_) + ": the backend (" + b.name() + ") keeps no host copy of the corpus");
    if (non_negative_) MaxentProblem::require_non_negative(algo_, *host);

    MaxentProblem p(algo_, *host, b.dims(), obj.c2());
    method_->setup(p, opt);
    const bool sequential = method_->sequential();
    std::vector<double> w(p.weights()), E, g;
    b.read(wv, w.data());
    ImprovementTest improvement(opt.period, opt.delta);
    Stopwatch clock;
    int k = 0;
    double f = 0, gnorm = 0, xnorm = 0;
    // The state after iteration k's report, before its stopping tests: the weights and, for a
    // sequential method, the bookkeeping it carried (a parallel one recomputes it from w).
    const StateFn state = [&](StateArchive& ar) {
      common_state(ar, k, obj, clock);
      ar.value("f", f);
      ar.value("gnorm", gnorm);
      ar.value("xnorm", xnorm);
      ar.vector("w", b, wv);
      if (sequential) {
        ar.doubles("maxent.S", p.scaled_S());
        ar.doubles("maxent.T", p.scaled_T());
        if (p.scaled_S().size() != p.instances() * p.labels() || p.scaled_T().size() != p.instances())
          throw Error("checkpoint: the Maxent bookkeeping was saved for another corpus");
      }
      improvement.state(ar);
    };

    const bool resumed = restore(state);
    if (resumed) {
      b.read(wv, w.data());
      if (!sequential) p.refresh(w, &E);  // as the iteration left it
    } else {
      p.refresh(w, &E);
      obj.add_passes(1);
      f = p.objective(w);
      if (!std::isfinite(f)) throw Error("the objective is not finite at the starting point");
      p.gradient(w, E, g);
      gnorm = norm(g);
      xnorm = norm(w);
      if (gradient_small(kGradientRatio, gnorm, xnorm, opt.epsilon, stop_reason_)) return f;
      if (sequential) std::vector<double>().swap(E);  // only the parallel methods carry it on
      k = 1;
    }
    stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations);
    for (bool reported = resumed; opt.max_iterations <= 0 || k <= opt.max_iterations; ++k, reported = false) {
      if (!reported) {
        double visits = 0;
        const double swept = method_->iterate(p, w, E, visits);
        if (sequential) {
          p.resync(w);
          gnorm = swept;
        } else {
          p.gradient(w, E, g);
          gnorm = norm(g);
          visits += p.nonzeros();  // the refresh at the new w
        }
        obj.add_passes(p.nonzeros() > 0 ? visits / p.nonzeros() : 0.0);
        f = p.objective(w);
        require_finite(algo_, "iteration", k, f);
        xnorm = norm(w);
        b.write(wv, w.data());
        Progress pr = progress_at(k, obj, wv, f, gnorm, 0.0, clock);
        pr.state = &state;
        if (progress && !progress(pr, wv)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (stop_tests(kGradientRatio, gnorm, xnorm, opt.epsilon, f, improvement, stop_reason_)) break;
    }
    return f;
  }

 private:
  const char* algo_;
  bool non_negative_;
  std::unique_ptr<MaxentMethod> method_;
};

}  // namespace

std::unique_ptr<Trainer> make_maxent_trainer(const char* algo, bool non_negative,
                                             std::unique_ptr<MaxentMethod> (*make_method)()) {
  return std::make_unique<MaxentTrainer>(algo, non_negative, make_method());
}

}  // namespace crfx
