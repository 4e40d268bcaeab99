// crfx — GIS, generalized iterative scaling (Darroch & Ratcliff 1972), for Maxent models, as seed
// 001 (Huang, Hsieh, Chang & Lin 2009, §2.2) frames it: a parallel update (Algorithm 2) whose
// sub-problems bound the function reduction with one constant f# = max_{x,y} Σ_t f_t(x, y):
//     A_t(z) = (e^{z·f#} − 1)/f# · E_t + Q_t(z),   E_t = Σ_i P_w(y_t | x_i)·f_t(x_i, y_t),
//     Q_t(z) = c2·(2·w_t·z + z²) − z·P̃(f_t)
// (the seed's Q_t with 1/(2σ²) = c2 and counts for P̃). Every A_t is minimised exactly at one w by
// safeguarded Newton on A′_t(z) = E_t·e^{z·f#} − P̃(f_t) + 2·c2·(w_t + z) — O(1) per Newton step once
// E_t is known (Table 1) — then all weights move and S_w, T_w and E are recomputed from w: one pass
// over the data per iteration. Needs f ≥ 0 (the slack feature f# − Σ_t f_t with z = 0 makes the
// bound hold). Stops like L-BFGS: --max-iterations, --epsilon (the exact ‖∇L‖), --delta/--period.
#include <cmath>
#include <limits>

#include "crfx/errors.hpp"
#include "optim/maxent_problem.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class Gis final : public MaxentMethod {
 public:
  bool sequential() const override { return false; }

  void setup(const MaxentProblem& p, const TrainOptions&) override {
    const std::vector<double> sums = p.feature_sums();
    f_sharp_ = 0;
    for (double f : sums) f_sharp_ = std::max(f_sharp_, f);
    if (!(f_sharp_ > 0)) throw Error("gis: every feature value is 0: there is nothing to learn");
  }

  double iterate(MaxentProblem& p, std::vector<double>& w, std::vector<double>& E, double& visits) override {
    const std::vector<double>& emp = p.empirical();
    const WeightGroups& wg = p.groups();
    const double c2 = p.c2(), F = f_sharp_, cap = step_cap(F);
    std::size_t evaluations = 0;
    for (std::uint32_t a = 0; a < p.attributes(); ++a)
      for_each_weight(wg, a, [&](std::size_t q, std::size_t) {
        const double Eq = E[q], base = 2.0 * c2 * w[q] - emp[q];  // every z_q from the same w
        w[q] += solve_increasing(
            [&](double z, double& d) {
              const double ez = Eq * std::exp(F * z);
              d = F * ez + 2.0 * c2;
              return ez + base + 2.0 * c2 * z;
            },
            cap, evaluations);
      });
    (void)visits;  // the sub-problems read no occurrence: E_t was summed by the last refresh
    p.refresh(w, &E);
    return std::numeric_limits<double>::quiet_NaN();
  }

 private:
  double f_sharp_ = 0;
};

std::unique_ptr<MaxentMethod> make_gis() { return std::make_unique<Gis>(); }

}  // namespace

std::unique_ptr<Trainer> make_gis_trainer() { return make_maxent_trainer("gis", /*non_negative=*/true, make_gis); }

}  // namespace crfx
