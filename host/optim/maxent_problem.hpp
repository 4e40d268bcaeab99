// crfx — the Maxent problem of seed 001 (Huang, Hsieh, Chang & Lin 2009), shared by its trainers
// gis.cpp, iis.cpp, scgis.cpp and cd.cpp.
//
// A Maxent model (crfx train --type maxent: Dims::transitions false, E = 0) classifies every token
// on its own: token i is an instance x_i with gold label y_i, and each state weight k — attribute a,
// label slot y of a's row (WeightGroups) — is a feature f_k(x_i, y') = v_{i,a}·[y' = y], v_{i,a}
// the value of a at token i (1 for template attributes; a token naming a twice has it summed).
// The objective, the one every crfx trainer minimises (c1 = 0), in the seed's notation
//     L(w) = Σ_i log T_w(x_i) − Σ_i log S_w(x_i, y_i) + c2·‖w‖²,
//     S_w(x, y) = exp(Σ_k w_k f_k(x, y)),   T_w(x) = Σ_y S_w(x, y),
// (the seed's ‖w‖²/(2σ²) is c2 = 1/(2σ²); its P̃ weights are counts here: L is a sum, not a mean).
//
// What the trainers keep (the seed's §2.3 and Table 1):
//   · the feature → occurrences index: per attribute a, its occurrences (instance i, value v) in
//     token order — shared by the L features of a's row, so it costs one entry per corpus item;
//   · per feature the empirical count P̃(f_k) = Σ_{i: y_i = y} v_{i,a};
//   · per instance S_w(x_i, y) for every y and T_w(x_i) (S̃ and T̃ below: any common factor per
//     instance cancels in P_w(y|x) = S/T, so they are kept rescaled, the largest S̃ near 1).
//     Moving one weight w_k += z changes them at the occurrences of k's attribute only:
//         S̃(x_i, y) ← S̃(x_i, y)·e^{z·v},   T̃(x_i) ← T̃(x_i) + S̃_old(x_i, y)·(e^{z·v} − 1),
//     O(l̄) per sub-problem, l̄ the average occurrences per feature.
// Numerics: T̃ is recomputed as Σ_y S̃ when an update would take away more than half of it (no
// cancellation), an instance is rescaled when a value grows beyond 1e250, and resync() — once per
// iteration — rescales every instance (T̃ = Σ S̃ exactly) and recomputes from w any instance
// whose S̃ underflowed to 0 or overflowed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/corpus.hpp"
#include "crfx/internal/trainer.hpp"

namespace crfx {

class MaxentProblem {
 public:
  /// The instances of `corpus` under the model `dims`. Throws Error naming the trainer (`algo`)
  /// for a CRF model (transitions or edge attributes: "train it with --type maxent"), an
  /// unlabeled token, or a label id beyond dims.L.
  MaxentProblem(const char* algo, const Corpus& corpus, const Dims& dims, double c2);

  std::size_t instances() const { return N_; }
  std::size_t labels() const { return L_; }
  std::size_t weights() const { return W_; }
  std::uint32_t attributes() const { return A_; }
  const WeightGroups& groups() const { return wg_; }
  double c2() const { return c2_; }
  /// Σ over the state weights of the occurrences of their attribute: #nz, the seed's count of
  /// non-zero (feature, instance) pairs — the unit of Progress::passes for these trainers.
  double nonzeros() const { return nonzeros_; }

  /// The occurrences of attribute a: [occurrence_begin(a), occurrence_end(a)), each an instance
  /// and its value (binary(): every value 1).
  std::size_t occurrence_begin(std::uint32_t a) const { return occ_offsets_[a]; }
  std::size_t occurrence_end(std::uint32_t a) const { return occ_offsets_[a + 1]; }
  std::uint32_t instance(std::size_t j) const { return occ_instance_[j]; }
  double value(std::size_t j) const { return occ_value_.empty() ? 1.0 : occ_value_[j]; }
  bool binary() const { return occ_value_.empty(); }
  /// The largest value among a's occurrences (SCGIS's f#_t for each feature of a's row).
  double max_value(std::uint32_t a) const { return max_value_[a]; }
  /// P̃(f_k), per weight (0 outside the state rows).
  const std::vector<double>& empirical() const { return emp_; }
  std::uint32_t gold(std::size_t i) const { return labels_[i]; }

  /// Σ_k f_k(x_i, y) for every instance and label, [N][L] (IIS's f#(x, y); its maximum is GIS's
  /// f#).
  std::vector<double> feature_sums() const;
  /// Throws Error unless every value is ≥ 0 (iterative scaling's bounds need f ≥ 0), naming the
  /// first negative one: its sentence, the sentence's first line, the token and the attribute id.
  static void require_non_negative(const char* algo, const Corpus& corpus);

  // ---- the bookkeeping: S̃ and T̃ ------------------------------------------------------------
  /// S̃ and T̃ recomputed from w (scores s_i(y) = Σ_a v·w[a, y], S̃ = exp(s − max s)); when `E` is
  /// given (W entries) it receives the model expectations E_k = Σ_i P_w(y|x_i)·f_k(x_i, y) — with
  /// empirical() and w, the gradient.
  void refresh(const std::vector<double>& w, std::vector<double>* E = nullptr);
  /// Once per iteration: every instance rescaled (largest S̃ = 1, T̃ = Σ_y S̃), and recomputed from
  /// w where an S̃ is 0 or not finite. Deterministic; O(N·L).
  void resync(const std::vector<double>& w);
  /// P_w(y | x_i) (at most 1, whatever the rounding of T̃).
  double p(std::size_t i, std::uint32_t y) const { return std::min(1.0, S_[i * L_ + y] / T_[i]); }
  /// After w_k += z for the weight k of attribute a at label slot y (w: the weights with the move
  /// made): S̃ and T̃ of a's occurrences updated, O(occurrences).
  void shift_weight(std::uint32_t a, std::uint32_t y, double z, const std::vector<double>& w);
  /// Σ_i −log P_w(y_i | x_i) from the bookkeeping (an instance whose S̃(y_i) underflowed is
  /// recomputed from w).
  double nll(const std::vector<double>& w) const;
  /// L(w) = nll + c2·‖w‖².
  double objective(const std::vector<double>& w) const;
  /// ∇L(w) from expectations E (refresh's): E − P̃ + 2·c2·w on the state weights, 0 elsewhere.
  void gradient(const std::vector<double>& w, const std::vector<double>& E, std::vector<double>& g) const;

  /// The bookkeeping as it stands (checkpoints, tests): S̃ [N][L] and T̃ [N].
  std::vector<double>& scaled_S() { return S_; }
  std::vector<double>& scaled_T() { return T_; }
  const std::vector<double>& scaled_S() const { return S_; }
  const std::vector<double>& scaled_T() const { return T_; }

 private:
  void recompute(std::size_t i, const std::vector<double>& w);
  void rescale(std::size_t i);

  const Corpus& corpus_;
  Dims dims_;  // (holds the layout wg_ points into)
  std::size_t N_ = 0, L_ = 0, W_ = 0;
  std::uint32_t A_ = 0;
  WeightGroups wg_;
  double c2_ = 0;
  double nonzeros_ = 0;
  std::vector<std::uint32_t> labels_;        // [N]
  std::vector<std::size_t> occ_offsets_;     // [A + 1]
  std::vector<std::uint32_t> occ_instance_;  // [occurrences]
  std::vector<double> occ_value_;            // [occurrences]; empty: all 1
  std::vector<double> max_value_;            // [A]
  std::vector<double> emp_;                  // [W]
  std::vector<double> S_, T_;                // [N][L], [N]
};

// ---- what the four trainers share ------------------------------------------------------------

/// Why these trainers run on the CPU only (TrainerInfo::cpu_only, their errors).
extern const char* const kMaxentCpuOnly;

/// One iteration of a Maxent trainer: the part each of gis.cpp, iis.cpp, scgis.cpp and cd.cpp
/// defines; the loop around it (make_maxent_trainer) is shared.
class MaxentMethod {
 public:
  virtual ~MaxentMethod() = default;
  /// Sequential methods (SCGIS, CD: Algorithm 1 of the seed) move one weight at a time and carry
  /// S̃ and T̃ along, so a checkpoint saves them; parallel ones (GIS, IIS: Algorithm 2) solve every
  /// sub-problem at one w, then move them all and refresh the bookkeeping from w.
  virtual bool sequential() const = 0;
  /// Once, before the first iteration (and before a resumed run's state is restored).
  virtual void setup(const MaxentProblem& p, const TrainOptions& options) = 0;
  /// One iteration from w: the bookkeeping is at w and, for a parallel method, E holds the
  /// expectations at w. Moves w and leaves the bookkeeping (and, parallel, E) at the new w.
  /// Returns ‖∇L‖ as the sweep saw it (sequential: each component taken when its sub-problem was
  /// solved) or NaN (parallel: the loop computes it from E); adds to `visits` the occurrences it
  /// read to evaluate sub-problems (Progress::passes counts visits / nonzeros()).
  virtual double iterate(MaxentProblem& p, std::vector<double>& w, std::vector<double>& E, double& visits) = 0;
};

/// The trainer `algo` around `method`: refuses a CRF model, a backend other than the CPU, c1 > 0
/// and (`non_negative`, iterative scaling) a negative value; reads w from the backend, then per
/// iteration runs the method, writes w back, reports Progress (objective, ‖g‖, active features)
/// with its checkpoint state, and stops on --max-iterations, --epsilon or --delta/--period.
std::unique_ptr<Trainer> make_maxent_trainer(const char* algo, bool non_negative,
                                             std::unique_ptr<MaxentMethod> (*make_method)());

/// Root of an increasing function g on [−cap, cap] by safeguarded Newton (Numerical Recipes'
/// rtsafe): a Newton step that leaves the bracket of the root, is not finite, or is not at most
/// half the step before it (Newton far out on an exponential crawls by 1/f a step) is replaced by
/// bisection — the exact solution of an iterative-scaling sub-problem A′(z) = 0. `g(z, d)` returns
/// g(z) and sets d = g′(z) ≥ 0 (an overflow, NaN, counts as beyond the root on z's side);
/// `evaluations` counts the calls. Ends when a step is below 1e-15·max(1, |z|), g(z) = 0, or after
/// 200 evaluations; near ±cap when the root lies beyond it.
template <class G>
double solve_increasing(G&& g, double cap, std::size_t& evaluations) {
  double lo = -cap, hi = cap, z = 0, d = 0;
  double v = g(z, d);
  ++evaluations;
  double last = hi - lo;  // the last step's length
  for (int it = 1; it < 200; ++it) {
    if (v == 0) return z;
    if (v > 0 || (std::isnan(v) && z > 0)) hi = z; else lo = z;
    double next = z - v / d;
    if (!(next > lo && next < hi) || !(std::fabs(next - z) <= 0.5 * last)) next = 0.5 * (lo + hi);  // also NaN
    last = std::fabs(next - z);
    if (last <= 1e-15 * std::max(1.0, std::fabs(z))) return next;
    z = next;
    v = g(z, d);
    ++evaluations;
  }
  return z;
}

/// The largest |z| the iterative-scaling solvers take in one sub-problem when every exponent is
/// f·z with f ≤ `f_max`: e^{f·z} stays finite (a root beyond it only exists without L2, c2 = 0).
inline double step_cap(double f_max) { return 700.0 / f_max; }

}  // namespace crfx
