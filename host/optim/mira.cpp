// crfx — mira: CRF++'s MIRA trainer (crf_learn -a MIRA), 1-best MIRA (Crammer & Singer 2003,
// "Ultraconservative Online Algorithms for Multiclass Problems", JMLR 3; on sequences with one
// constraint a step, the Viterbi path's: McDonald, Crammer & Pereira 2005, "Online Large-Margin
// Training of Dependency Parsers", ACL), as CRF++ 0.59 computes it: encoder.cpp runMIRA (lines
// 95–192 of taku910/crfpp at c603ea6) with TaggerImpl::collins and eval (tagger.cpp, lines 602–664
// and 457–465).
//
// Every epoch visits the sentences in corpus order (CRF++ does not shuffle; no seed). Per sentence
// i, unless shrunk (below): decode with the current w (Viterbi, ties → smallest label, as CRF++'s
// strict comparisons pick the first of its sorted labels); with d = #{t : ŷ_t ≠ y_t} (eval()) and,
// when d > 0, Δ = f(x, y) − f(x, ŷ) (Backend::feature_difference; collins() fills the same
// difference) and cost_diff = w·f(x, ŷ) − w·f(x, y) = −w·Δ ≥ 0 (collins() returns −s, s the gold
// path's score minus the Viterbi path's):
//     μ = max(0, (d − cost_diff) / ‖Δ‖²)                                  (runMIRA, line 146)
//     if B_i + μ > C:  μ = C − B_i  (the step clipped at the bound)     (lines 148–150)
//     else:            K = max(K, d − cost_diff)  (lines 151–154: the epoch's largest KKT violation,
//                                                  K = 0 at its start, line 121)
//     if μ > 1e-10:    B_i ← min(C, B_i + μ);  w ← w + μ·Δ               (lines 156–162)
// B_i (upper_bound[i], 0 at the start) is what the steps on sentence i have added up to over the
// run: the box 0 ≤ α_i ≤ C of its dual variable in the soft-margin problem, C = --mira-c (CRF++'s
// -c, default 1; no rescaling: the same C). Note the sign: CRF++ takes d − cost_diff, where the
// paper's hinge loss is d + cost_diff (the errors plus the Viterbi path's lead; pa's is
// √d + cost_diff). crfx follows CRF++: a sentence whose Viterbi path leads the gold path by its
// errors or more gets no step (and adds nothing to K).
//
// Shrinking (CRF++'s -H, --shrinking-size N, default 20; the heuristic and the wording of SVMlight's
// -h, Joachims 1999, "Making Large-Scale SVM Learning Practical"): a sentence decoded right N epochs
// running is skipped — not decoded, no pass counted — until an epoch ends with K ≤ 0, which resets
// every count (lines 124–126, 137–140, 179–181); a mistake resets its own. Stopping (lines
// 179–188): after two epochs running with K ≤ 0 — every mislabeled sentence clipped at C or with
// d ≤ cost_diff, or none mislabeled, or every sentence skipped: CRF++ has no other test (its
// "itr > maxitr" never holds inside its loop) — or after --epochs epochs (CRF++'s -m, default
// 100000; crfx's default is 30, and crfx train says so).
//
// Arithmetic as CRF++'s: C and the bounds B_i in single precision (runMIRA's float C and
// std::vector<float> upper_bound: C − B_i is a float difference, B_i += μ a double sum rounded to
// float), μ, d − cost_diff and K in double. The differences: w·Δ and ‖Δ‖² are summed over Δ's
// support (SparseDotRule, Backend::sparse_penalty) where CRF++ sums the paths' node and edge costs
// and a dense vector — rounding only (though a last-bit change in μ can round B_i to the next float,
// and a later clipped step C − B_i with it); and CRF++ counts the shrinking in an unsigned char, so that
// there an -H above 255 never shrinks (the count wraps first), where crfx's counts do not wrap.
// CRF++ warns that MIRA runs on one thread (-p); crfx's --threads parallelises the primitives with
// the same result. Where the backend can (SparseGradients::peer_step: the CUDA backend) a
// sentence's decode, μ and update run on its device, the bounds, counts and K kept there and read
// back at each epoch's end (issue 37) — in runs, an epoch's visited sentences a few hundred a
// launch (SparseGradients::peer_steps; visits() reads the counts of the epoch's start). No averaging: the model is w. The reported objective is the
// model's full f with the Objective's c1 and c2 (MIRA does not use them; CRF++ prints ‖w‖²).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "rules/rule_set.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class MiraTrainer final : public MistakeDrivenTrainer {
 public:
  MiraTrainer() : MistakeDrivenTrainer("mira") {}

 protected:
  bool averaged(const TrainOptions&) const override { return false; }
  bool shuffles() const override { return false; }
  std::size_t batch_size(const TrainOptions&) const override { return 1; }

  void prepare(Backend&, std::size_t, std::size_t num_sentences, const TrainOptions& opt) override {
    c_ = float(opt.mira_c);  // runMIRA's float C
    if (!(c_ > 0) || !std::isfinite(c_)) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "mira: --mira-c must be a number > 0 that single precision holds, as CRF++ keeps C (got %g)",
                    opt.mira_c);
      throw Error(buf);
    }
    if (opt.shrinking_size < 1)
      throw Error("mira: --shrinking-size must be ≥ 1, as CRF++'s -H (got " + std::to_string(opt.shrinking_size) +
                  ")");
    shrinking_size_ = std::uint32_t(opt.shrinking_size);
    bounds_.assign(num_sentences, 0.0f);
    shrink_.assign(num_sentences, 0);
    converged_ = 0;
    kkt_ = 0.0;
  }

  bool visits(const SentenceSpan& span) const override { return shrink_[span[0]] < shrinking_size_; }

  // The step on the device (SparseGradients::peer_step): decoded() and update() there, with the
  // bounds, the counts and K, taken back before end_epoch() and a checkpoint. visits() reads the
  // host's counts meanwhile: a sentence's changes only at its own visit, once an epoch.
  bool device_step(const TrainOptions&, PeerStep& step) const override {
    step.mira = true;
    step.mira_c = c_;
    return true;
  }
  void to_device(SparseGradients& sg, double) override {
    sg.set_peer_loss(kkt_);
    sg.set_mira_state(bounds_.data(), shrink_.data(), bounds_.size());
  }
  void from_device(SparseGradients& sg, double&) override {
    kkt_ = sg.peer_loss();
    sg.mira_state(bounds_.data(), shrink_.data(), bounds_.size());
  }

  void decoded(const SentenceSpan& span, std::size_t wrong) override {
    sentence_ = span[0];
    if (wrong == 0) {
      ++shrink_[sentence_];  // (a skipped sentence is not decoded: the count stops at the size)
    } else {
      shrink_[sentence_] = 0;
    }
  }

  double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t wrong, const TrainOptions&,
                double& tau) override {
    tau = 0;  // (no averaging)
    const double errors = double(wrong);
    const double cost_diff = -map_reduce(b, SparseDotRule{}, {w}, &delta);  // collins(): score(ŷ) − score(y)
    const double s = sparse_gradients(b).sparse_penalty(delta, 0.0, 1.0);   // ‖Δ‖²
    // runMIRA, lines 146–162, in its types (mira_step, host/rules/peer_update.hpp). ‖Δ‖² = 0 (the
    // mislabeled tokens fire no feature) gives μ = +inf, clipped to the bound, or NaN, which
    // std::max(0.0, NaN) makes 0, as in CRF++.
    const double mu = mira_step(errors, cost_diff, s, c_, bounds_[sentence_], kkt_);
    if (mu > 1e-10) sparse_gradients(b).sparse_axpy(mu, delta, w);
    return 0.0;  // (no loss: has_loss() is false)
  }

  void end_epoch() override {
    if (kkt_ <= 0.0) {  // runMIRA, lines 179–184
      std::fill(shrink_.begin(), shrink_.end(), 0);
      ++converged_;
    } else {
      converged_ = 0;
    }
    kkt_ = 0.0;  // the next epoch's
  }

  bool finished(int last, std::string& reason) const override {
    if (converged_ < 2) return false;  // runMIRA, line 186: "converge == 2"
    reason = "CRF++'s MIRA test: no KKT violation in epochs " + std::to_string(last - 1) + " and " +
             std::to_string(last) + " (every sentence decoded right, at its bound --mira-c, or with no more errors "
             "than its Viterbi path's lead)";
    return true;
  }

  void own_state(StateArchive& ar, Backend&) override {
    const std::size_t n = bounds_.size();
    std::vector<double> bounds(bounds_.begin(), bounds_.end());  // floats, exact as doubles
    ar.doubles("mira.bounds", bounds);
    ar.values("mira.shrink", shrink_);
    ar.value("mira.converged_epochs", converged_);
    ar.value("mira.max_kkt_violation", kkt_);
    if (!ar.restoring()) return;
    if (bounds.size() != n || shrink_.size() != n)
      throw Error("checkpoint: mira's bounds or shrinking counts are not of this corpus (" +
                  std::to_string(bounds.size()) + " saved, " + std::to_string(n) + " sentences)");
    for (std::size_t i = 0; i < n; ++i) bounds_[i] = float(bounds[i]);
  }

 private:
  float c_ = 1.0f;
  std::uint32_t shrinking_size_ = 20;
  std::vector<float> bounds_;         // B_i: CRF++'s upper_bound
  std::vector<std::uint32_t> shrink_;  // epochs decoded right running, per sentence
  int converged_ = 0;                 // epochs running with K ≤ 0 (CRF++'s converge)
  double kkt_ = 0.0;                  // K, the largest KKT violation of the epoch so far
  std::uint32_t sentence_ = 0;        // the sentence decoded last (decoded(), for update())
};

}  // namespace

std::unique_ptr<Trainer> make_mira_trainer() { return std::make_unique<MiraTrainer>(); }

}  // namespace crfx
