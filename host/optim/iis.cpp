// crfx — IIS, improved iterative scaling (Della Pietra, Della Pietra & Lafferty 1997), for Maxent
// models, as seed 001 (Huang, Hsieh, Chang & Lin 2009, §2.2) frames it: a parallel update
// (Algorithm 2) whose bound keeps each instance's own f#(x, y) = Σ_t f_t(x, y):
//     A_t(z) = Σ_i P_w(y_t | x_i)·f_t(x_i, y_t)·(e^{z·f#(x_i, y_t)} − 1)/f#(x_i, y_t) + Q_t(z),
//     Q_t(z) = c2·(2·w_t·z + z²) − z·P̃(f_t)
// — tighter than GIS's (the seed's (14)), but f#(x, y) varies over the occurrences, so every
// Newton step on A′_t costs O(l̄), its occurrences (Table 1). Each A_t is minimised exactly at one
// w by safeguarded Newton; then all weights move and S_w, T_w are recomputed from w. Needs f ≥ 0.
// The f# table is [tokens][labels]. Stops like L-BFGS (--epsilon on the exact ‖∇L‖).
#include <cmath>
#include <limits>

#include "crfx/errors.hpp"
#include "optim/maxent_problem.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class Iis final : public MaxentMethod {
 public:
  bool sequential() const override { return false; }

  void setup(const MaxentProblem& p, const TrainOptions&) override { f_sharp_ = p.feature_sums(); }

  double iterate(MaxentProblem& p, std::vector<double>& w, std::vector<double>& E, double& visits) override {
    const std::vector<double>& emp = p.empirical();
    const WeightGroups& wg = p.groups();
    const std::size_t L = p.labels();
    const double c2 = p.c2();
    for (std::uint32_t a = 0; a < p.attributes(); ++a) {
      const std::size_t begin = p.occurrence_begin(a), n = p.occurrence_end(a) - begin;
      for_each_weight(wg, a, [&](std::size_t q, std::size_t slot) {
        const std::uint32_t y = std::uint32_t(slot);
        // Per occurrence: c = P_w(y|x_i)·v and its f#(x_i, y), at the iteration's w (S̃ and T̃
        // stay there until the refresh below).
        coef_.resize(n);
        exponent_.resize(n);
        double f_max = 0;
        for (std::size_t j = 0; j < n; ++j) {
          const std::size_t i = p.instance(begin + j);
          coef_[j] = p.p(i, y) * p.value(begin + j);
          exponent_[j] = f_sharp_[i * L + y];
          f_max = std::max(f_max, exponent_[j]);
        }
        if (!(f_max > 0)) f_max = 1;  // (no occurrence: A′ is Q′ alone)
        const double base = 2.0 * c2 * w[q] - emp[q];
        std::size_t evaluations = 0;
        w[q] += solve_increasing(
            [&](double z, double& d) {
              double g = 0, h = 0;
              for (std::size_t j = 0; j < n; ++j) {
                const double t = coef_[j] * std::exp(z * exponent_[j]);
                g += t;
                h += t * exponent_[j];
              }
              d = h + 2.0 * c2;
              return g + base + 2.0 * c2 * z;
            },
            step_cap(f_max), evaluations);
        visits += double(evaluations) * double(n);
      });
    }
    p.refresh(w, &E);
    return std::numeric_limits<double>::quiet_NaN();
  }

 private:
  std::vector<double> f_sharp_;          // [N][L] f#(x_i, y)
  std::vector<double> coef_, exponent_;  // one sub-problem's occurrences
};

std::unique_ptr<MaxentMethod> make_iis() { return std::make_unique<Iis>(); }

}  // namespace

std::unique_ptr<Trainer> make_iis_trainer() { return make_maxent_trainer("iis", /*non_negative=*/true, make_iis); }

}  // namespace crfx
