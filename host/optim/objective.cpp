// crfx — what the batch trainers share (declared in crfx/internal/trainer.hpp and optim/quasi_newton.hpp):
//   Objective        f(w) = NLL(w) + c1·‖w‖₁ + c2·‖w‖² over the whole training corpus, with its
//                    gradient (the smooth part; L1 is OWL-QN's) and the count of passes (seq-exp
//                    without c1: log(H + c2·‖w‖²), crfx/internal/trainer.hpp);
//   ImprovementTest  CRFsuite's stopping test: the relative improvement over `period` iterations;
//   LbfgsHistory     the L-BFGS memory of (s, y) pairs and the two-loop recursion on the backend.
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/exp_loss.hpp"
#include "optim/quasi_newton.hpp"

namespace crfx {

Objective::Objective(Backend& backend, const BackendCorpus& corpus, double c1, double c2, SequenceLoss loss)
    : backend_(backend), corpus_(corpus), c1_(c1), c2_(c2), loss_(loss) {
  if (!(c1 >= 0) || !(c2 >= 0) || !std::isfinite(c1) || !std::isfinite(c2))
    throw Error("regularisation coefficients must be finite and ≥ 0 (c1 = " + std::to_string(c1) +
                ", c2 = " + std::to_string(c2) + ")");
  if (corpus.num_sentences() == 0) throw Error("the training data has no sentences");
}

namespace {
/// log(e^a + e^b) without overflow.
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  return b == -HUGE_VAL ? a : a + std::log1p(std::exp(b - a));
}
}  // namespace

double Objective::value_and_gradient(const Vector& w, Vector& g) {
  if (log_scale()) {
    // h = log(H + R), R = c2‖w‖²; ∇h = (H·r + 2·c2·w)/(H + R) with r = ∇H/H, in log space.
    const LogExpLoss e = log_seq_exp(backend_, corpus_, w, &g, passes_);
    const double r = c2_ > 0 ? c2_ * backend_.norm2sq(w) : 0.0;
    const double h = log_add(e.log_h, std::log(r));
    backend_.scale(std::exp(e.log_h - h), g);
    if (r > 0) backend_.axpy(2.0 * c2_ * std::exp(-h), w, g);
    return h;
  }
  backend_.fill(g, 0.0);
  double h = backend_.evaluate(corpus_, w, all_sentences(corpus_), &g, 1.0, loss_);
  if (c2_ > 0) h += c2_ * backend_.axpy_norm2sq(2.0 * c2_, w, g);  // ∇(c2·‖w‖²) = 2·c2·w
  passes_ += 1;
  return h;
}

double Objective::value(const Vector& w) {
  if (log_scale()) {
    const double log_h = log_seq_exp(backend_, corpus_, w, nullptr, passes_).log_h;
    return c2_ > 0 ? log_add(log_h, std::log(c2_ * backend_.norm2sq(w))) : log_h;
  }
  double h = backend_.evaluate(corpus_, w, all_sentences(corpus_), nullptr, 1.0, loss_);
  if (c2_ > 0) h += c2_ * backend_.norm2sq(w);
  passes_ += 1;
  return h;
}

double Objective::l1_term(const Vector& w) { return c1_ > 0 ? c1_ * backend_.norm1(w) : 0.0; }

bool ImprovementTest::converged(double f) {
  // CRFsuite / liblbfgs `past` test: (f_{k−period} − f_k) / f_k < delta.
  bool stop = false;
  if (period_ > 0 && history_.size() >= std::size_t(period_)) {
    const double before = history_[history_.size() - period_];
    last_ = (before - f) / std::fabs(f);
    stop = last_ < delta_;
  }
  history_.push_back(f);
  return stop;
}

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
}  // namespace

void ImprovementTest::state(StateArchive& ar) {
  ar.doubles("improvement.history", history_);
  ar.value("improvement.last", last_);
}

std::string ImprovementTest::reason() const {
  return "the objective improved by " + number(last_) + " (relative) over the last " + std::to_string(period_) +
         " iterations, less than --delta " + number(delta_) + " (--period " + std::to_string(period_) + ")";
}

std::string stop_at_limit(const char* option, int value) {
  return std::string("--") + option + " " + std::to_string(value) + " reached";
}

std::string stop_at_gradient(const char* what, double value, double epsilon) {
  return std::string(what) + " = " + number(value) + ", at most --epsilon " + number(epsilon);
}

std::string stop_at_line_search(int trials) {
  return "the line search found no decrease in " + std::to_string(trials) +
         " trials (--max-linesearch): the objective cannot be lowered further along the search direction, "
         "in double precision";
}

std::string stop_by_caller() { return "stopped by the caller"; }

namespace {
int checked_memory(int m) {
  if (m < 1) throw Error("L-BFGS memory must be ≥ 1 (got " + std::to_string(m) + ")");
  return m;
}
}  // namespace

LbfgsHistory::LbfgsHistory(Backend& backend, std::size_t n, int m)
    : b_(backend), rho_(checked_memory(m)), alpha_(m), m_(m) {
  for (int i = 0; i < m; ++i) {
    s_.push_back(b_.vector(n));
    y_.push_back(b_.vector(n));
  }
}

void LbfgsHistory::push(const Vector& x, const Vector& x_prev, const Vector& g, const Vector& g_prev) {
  Vector& s = *s_[head_];
  Vector& y = *y_[head_];
  b_.sub(x, x_prev, s);
  const double ys = b_.sub_dot(g, g_prev, y, s);
  const double yy = b_.norm2sq(y);
  if (!(ys > 0) || !(yy > 0)) {  // no curvature information: the pair is not kept
    // With the memory full, slot head_ held the oldest pair, now overwritten: drop it too.
    if (count_ == m_) --count_;
    return;
  }
  rho_[head_] = 1.0 / ys;
  gamma_ = ys / yy;
  head_ = (head_ + 1) % m_;
  count_ = std::min(count_ + 1, m_);
}

void LbfgsHistory::state(StateArchive& ar) {
  ar.value("lbfgs.head", head_);
  ar.value("lbfgs.count", count_);
  ar.value("lbfgs.gamma", gamma_);
  if (head_ < 0 || head_ >= m_ || count_ < 0 || count_ > m_)
    throw Error("checkpoint: the L-BFGS memory does not fit --memory " + std::to_string(m_));
  ar.doubles("lbfgs.rho", rho_);
  if (rho_.size() != std::size_t(m_)) throw Error("checkpoint: the L-BFGS memory was saved with another --memory");
  // The live pairs only, in their slots (the others are written before they are read).
  for (int i = 0; i < count_; ++i) {
    const int slot = (head_ - count_ + i + m_) % m_;
    ar.vector("lbfgs.s", b_, *s_[slot]);
    ar.vector("lbfgs.y", b_, *y_[slot]);
  }
}

void LbfgsHistory::direction(const Vector& q, Vector& d) {
  // The two-loop recursion with each update fused with the next dot product (one pass over d
  // instead of two; the same arithmetic, see Backend's fused forms).
  b_.scaled_copy(-1.0, q, d);
  if (count_ == 0) return;
  auto older = [this](int i) { return (i - 1 + m_) % m_; };
  int idx = older(head_);  // newest → oldest
  alpha_[idx] = rho_[idx] * b_.dot(*s_[idx], d);
  for (int i = 1; i < count_; ++i) {
    const int next = older(idx);
    alpha_[next] = rho_[next] * b_.axpy_dot(-alpha_[idx], *y_[idx], d, *s_[next]);
    idx = next;
  }
  b_.axpy(-alpha_[idx], *y_[idx], d);  // idx: the oldest pair
  double beta = rho_[idx] * b_.scale_dot(gamma_, d, *y_[idx]);  // d = γ·d, then oldest → newest
  for (int i = 1; i < count_; ++i) {
    const int next = (idx + 1) % m_;
    const double beta_next = rho_[next] * b_.axpy_dot(alpha_[idx] - beta, *s_[idx], d, *y_[next]);
    idx = next;
    beta = beta_next;
  }
  b_.axpy(alpha_[idx] - beta, *s_[idx], d);
}

}  // namespace crfx
