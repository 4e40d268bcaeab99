// crfx — SCGIS, sequential conditional generalized iterative scaling (Goodman 2002), for Maxent
// models, as seed 001 (Huang, Hsieh, Chang & Lin 2009, §2.2) frames it: a sequential update
// (Algorithm 1) with GIS's bound taken per feature, f#_t = max_{x,y} f_t(x, y):
//     A_t(z) = (e^{z·f#_t} − 1)/f#_t · E_t + Q_t(z),   E_t = Σ_i P_w(y_t | x_i)·f_t(x_i, y_t),
//     Q_t(z) = c2·(2·w_t·z + z²) − z·P̃(f_t).
// Features are taken in weight order (attribute by attribute, each attribute's labels in turn).
// For each: E_t from the kept S_w(x, y) and T_w(x) over its occurrences (O(l̄)), A_t minimised
// exactly by safeguarded Newton on A′_t(z) = E_t·e^{z·f#_t} − P̃(f_t) + 2·c2·(w_t + z) (O(1) a
// step: Table 1), then w_t += z and S_w, T_w updated at the occurrences (O(l̄)). Needs f ≥ 0.
// ‖g‖ in the reports and the --epsilon test is the sweep's: each component A′_t(0) as its
// sub-problem began.
#include <cmath>

#include "crfx/errors.hpp"
#include "optim/maxent_problem.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class Scgis final : public MaxentMethod {
 public:
  bool sequential() const override { return true; }

  void setup(const MaxentProblem&, const TrainOptions&) override {}

  double iterate(MaxentProblem& p, std::vector<double>& w, std::vector<double>&, double& visits) override {
    const std::vector<double>& emp = p.empirical();
    const WeightGroups& wg = p.groups();
    const double c2 = p.c2();
    double gsq = 0;
    for (std::uint32_t a = 0; a < p.attributes(); ++a) {
      const std::size_t begin = p.occurrence_begin(a), end = p.occurrence_end(a);
      const double F = p.max_value(a);  // f#_t of every feature of a's row
      for_each_weight(wg, a, [&](std::size_t q, std::size_t slot) {
        const std::uint32_t y = std::uint32_t(slot);
        double Eq = 0;
        for (std::size_t j = begin; j < end; ++j) Eq += p.value(j) * p.p(p.instance(j), y);
        visits += double(end - begin);
        const double base = 2.0 * c2 * w[q] - emp[q];
        gsq += (Eq + base) * (Eq + base);
        double z;
        if (F > 0) {
          std::size_t evaluations = 0;
          z = solve_increasing(
              [&](double x, double& d) {
                const double ez = Eq * std::exp(F * x);
                d = F * ez + 2.0 * c2;
                return ez + base + 2.0 * c2 * x;
              },
              step_cap(F), evaluations);
        } else {  // the feature never fires: only the prior moves it, to 0
          z = c2 > 0 ? -w[q] : 0.0;
        }
        if (z == 0) return;
        w[q] += z;
        p.shift_weight(a, y, z, w);
      });
    }
    return std::sqrt(gsq);
  }
};

std::unique_ptr<MaxentMethod> make_scgis() { return std::make_unique<Scgis>(); }

}  // namespace

std::unique_ptr<Trainer> make_scgis_trainer() {
  return make_maxent_trainer("scgis", /*non_negative=*/true, make_scgis);
}

}  // namespace crfx
