// crfx — coordinate descent for Maxent models, seed 001's new method (Huang, Hsieh, Chang & Lin
// 2009, §3.2): a sequential update (Algorithm 1) on the exact function reduction
//     A_t(z) = L(w + z·e_t) − L(w) = Σ_i log(1 + P_w(y_t|x_i)·(e^{z·f_t(x_i, y_t)} − 1)) + Q_t(z),
//     Q_t(z) = c2·(2·w_t·z + z²) − z·P̃(f_t),
// minimised approximately by ONE Newton step from z = 0,
//     d = −A′_t(0)/A″_t(0),   A′_t(0) = Σ_i P·f − P̃(f_t) + 2·c2·w_t,
//                             A″_t(0) = Σ_i P·(1 − P)·f² + 2·c2,
// with the backtracking line search λ = 1, β, β², … (β = 0.5) until the sufficient decrease
// A_t(λd) ≤ γ·λd·A′_t(0) (γ = 0.001), at most --max-linesearch trials (none succeeding: w_t kept).
// Each derivative and each trial costs O(l̄) from the kept S_w(x, y), T_w(x) (Table 1); the accepted
// step updates them in O(l̄). Near the optimum λ = 1 passes at once (the seed's result). Features in
// weight order. Any feature values (negative ones too). ‖g‖ in the reports and the --epsilon test
// is the sweep's: each component A′_t(0) as its sub-problem began.
#include <cmath>

#include "crfx/errors.hpp"
#include "optim/maxent_problem.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

constexpr double kBeta = 0.5, kGamma = 0.001;  // the seed's §4

class CoordinateDescent final : public MaxentMethod {
 public:
  bool sequential() const override { return true; }

  void setup(const MaxentProblem&, const TrainOptions& options) override { max_trials_ = options.max_linesearch; }

  double iterate(MaxentProblem& p, std::vector<double>& w, std::vector<double>&, double& visits) override {
    const std::vector<double>& emp = p.empirical();
    const WeightGroups& wg = p.groups();
    const double c2 = p.c2();
    const bool binary = p.binary();
    double gsq = 0;
    for (std::uint32_t a = 0; a < p.attributes(); ++a) {
      const std::size_t begin = p.occurrence_begin(a), n = p.occurrence_end(a) - begin;
      for_each_weight(wg, a, [&](std::size_t q, std::size_t slot) {
        const std::uint32_t y = std::uint32_t(slot);
        prob_.resize(n);
        double g = 0, h = 0;
        for (std::size_t j = 0; j < n; ++j) {
          const double P = prob_[j] = p.p(p.instance(begin + j), y), v = p.value(begin + j);
          g += P * v;
          h += P * (1.0 - P) * v * v;
        }
        visits += double(n);
        g += 2.0 * c2 * w[q] - emp[q];
        h += 2.0 * c2;
        gsq += g * g;
        if (g == 0 || !(h > 0)) return;
        const double d = -g / h;
        double lambda = 1;
        for (int trial = 0; trial < max_trials_; ++trial, lambda *= kBeta) {
          const double z = lambda * d;
          double A = c2 * (2.0 * w[q] * z + z * z) - z * emp[q];
          const double m_bin = binary ? std::expm1(z) : 0.0;
          for (std::size_t j = 0; j < n; ++j)
            if (prob_[j] > 0) A += std::log1p(prob_[j] * (binary ? m_bin : std::expm1(z * p.value(begin + j))));
          visits += double(n);
          if (A <= kGamma * z * g) {  // sufficient decrease (16)
            w[q] += z;
            p.shift_weight(a, y, z, w);
            return;
          }
        }
      });
    }
    return std::sqrt(gsq);
  }

 private:
  int max_trials_ = 20;
  std::vector<double> prob_;  // P_w(y | x_i) over one sub-problem's occurrences
};

std::unique_ptr<MaxentMethod> make_cd() { return std::make_unique<CoordinateDescent>(); }

}  // namespace

std::unique_ptr<Trainer> make_cd_trainer() { return make_maxent_trainer("cd", /*non_negative=*/false, make_cd); }

}  // namespace crfx
