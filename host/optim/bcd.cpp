// crfx — blockwise coordinate descent for the elastic net (Lavergne, Cappé & Yvon 2010,
// "Practical very large scale CRFs", ACL, §3.2; Sokolovska, Lavergne, Cappé & Yvon 2010), as
// Wapiti's `-a bcd`. It minimises
//     f(w) = NLL(w) + ρ1·‖w‖₁ + (ρ2/2)·‖w‖²,   ρ1 = c1, ρ2 = 2·c2 (crfx's convention)
// one block at a time. A block is a weight group (WeightGroups): a state attribute's row of
// labels, the transitions, an edge attribute's label-pair block (Wapiti's unigram and bigram
// observation blocks; its plain "B" observation is the transitions here). An iteration visits
// the blocks in group order; for each, over the sentences where it is active only (an inverted
// index built once, BlockStatistics::block_index), the NLL's gradient g_k and the curvature
// h_k = Σ_t x_t²·p_t(k)·(1 − p_t(k)) of each of its weights (block_statistics), then
//   §3.2, the bound made safe: h ← κ·a·h with a = max(1, max_k |g_k / h_k|) (Wapiti's), so that
//     the step |g/h| of any weight is at most 1/κ;
//   the closed-form minimiser of the separable quadratic bound plus the elastic net,
//     w_k ← soft(h_k·w_k − g_k, ρ1) / (h_k + ρ2),   soft(z, r) = sign(z)·max(|z| − r, 0),
//   which sets the weights whose |h·w − g| ≤ ρ1 exactly to zero.
// A weight with h_k = 0 (its marginal exactly 0 or 1 at every active position: the curvature
// says nothing of a step) keeps its value, where Wapiti's ratio would be infinite.
// After each iteration: the full objective (one forward pass; Wapiti reports none for bcd), the
// report, and Wapiti's stopping test: the token error rate on the training data (Viterbi) of the
// last --stop-window iterations spread less than --stop-epsilon percentage points; or
// --max-iterations (0: none). Settings: c1, c2, --bcd-kappa (Wapiti's --kappa, 1.5).
// Passes count a block's sentences each (forward-backward), the objective's pass and the decode.
// Runs on the CPU only: the CUDA backend has no BlockStatistics yet.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/trainers.hpp"

namespace crfx {

const char* const kBcdCpuOnly = "its block statistics exist on the CPU backend only";

namespace {

double soft_threshold(double z, double r) { return z > r ? z - r : z < -r ? z + r : 0.0; }

class BcdTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    check_loss("bcd", obj.loss());
    Backend& b = obj.backend();
    if (!b.blockwise()) throw Error(std::string("bcd: ") + kBcdCpuOnly + " (this run's device is " + b.name() + ")");
    BlockStatistics& bs = *b.blockwise();
    const Corpus* host = b.host_corpus(obj.corpus());
    if (!host) throw Error("bcd: the backend " + b.name() + " keeps no host corpus for the error rate");
    std::vector<std::size_t> offsets;
    std::vector<std::uint32_t> index;
    bs.block_index(obj.corpus(), offsets, index);
    const std::size_t n_sentences = obj.corpus().num_sentences(), groups = offsets.size() - 1;
    std::vector<std::uint32_t> labels(host->num_tokens());
    std::vector<std::uint32_t> window;  // the last stop_window error counts, oldest first
    Stopwatch clock;
    int k = 0;
    double f = 0;
    const StateFn state = [&](StateArchive& ar) {  // after iteration k's report, before its tests
      common_state(ar, k, obj, clock);
      ar.value("f", f);
      ar.vector("w", b, w);
      ar.values("errors", window);
    };
    const bool resumed = restore(state);
    if (!resumed) k = 1;
    stop_reason_ = stop_at_limit("max-iterations", opt.max_iterations);
    for (bool reported = resumed; opt.max_iterations <= 0 || k <= opt.max_iterations; ++k, reported = false) {
      if (!reported) {
        for (std::uint32_t g = 0; g < groups; ++g) {
          const SentenceSpan span{index.data() + offsets[g], offsets[g + 1] - offsets[g]};
          if (span.count) update_block(bs, obj, w, span, g, opt.bcd_kappa);
          obj.add_passes(double(span.count) / n_sentences);
        }
        f = obj.full(obj.value(w), w);
        require_finite("bcd", "iteration", k, f, obj.loss());
        b.viterbi(obj.corpus(), w, all_sentences(obj.corpus()), labels.data(), nullptr);
        obj.add_passes(1);
        std::uint32_t wrong = 0;
        for (std::size_t t = 0; t < labels.size(); ++t) wrong += labels[t] != host->labels[t];
        window.push_back(wrong);
        if (window.size() > std::size_t(std::max(opt.stop_window, 1))) window.erase(window.begin());
        Progress pr = progress_at(k, obj, w, f, kNoGradientNorm, 0.0, clock);
        pr.state = &state;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (error_rate_settled(opt, host->num_tokens(), window)) break;
    }
    return f;
  }

 private:
  // One block's update (§3.2): its statistics, the bound made safe with κ, the soft-thresholded step.
  void update_block(BlockStatistics& bs, Objective& obj, Vector& w, SentenceSpan span, std::uint32_t g,
                    double kappa) {
    const std::size_t n = obj.backend().dims().groups().size(g);
    grad_.resize(n), curv_.resize(n), weights_.resize(n);
    bs.block_statistics(obj.corpus(), w, span, g, grad_.data(), curv_.data());
    bs.read_block(w, g, weights_.data());
    double a = 1.0;
    for (std::size_t j = 0; j < n; ++j)
      if (curv_[j] > 0) a = std::max(a, std::fabs(grad_[j] / curv_[j]));
    const double rho1 = obj.c1(), rho2 = 2 * obj.c2();
    for (std::size_t j = 0; j < n; ++j) {
      if (!(curv_[j] > 0)) continue;
      const double h = curv_[j] * (a * kappa);
      weights_[j] = soft_threshold(h * weights_[j] - grad_[j], rho1) / (h + rho2);
    }
    bs.write_block(w, g, weights_.data());
  }

  // Wapiti's test: the last stop_window token error rates (percent) spread less than stop_epsilon.
  bool error_rate_settled(const TrainOptions& opt, std::size_t tokens, const std::vector<std::uint32_t>& window) {
    if (opt.stop_window <= 0 || window.size() < std::size_t(opt.stop_window) || tokens == 0) return false;
    const auto [lo, hi] = std::minmax_element(window.begin(), window.end());
    const double spread = 100.0 * (double(*hi) - double(*lo)) / double(tokens);
    if (!(spread < opt.stop_epsilon)) return false;
    char text[160];
    std::snprintf(text, sizeof text,
                  "the training error rate of the last %d iterations spread %.3g points, less than --stop-epsilon %g",
                  opt.stop_window, spread, opt.stop_epsilon);
    stop_reason_ = text;
    return true;
  }

  std::vector<double> grad_, curv_, weights_;  // [block size] a block's g, h and weights
};

}  // namespace

std::unique_ptr<Trainer> make_bcd_trainer() { return std::make_unique<BcdTrainer>(); }

}  // namespace crfx
