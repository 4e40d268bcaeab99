// crfx — two-stage (Zhou et al. 2011, seed 000 §4): stage 1 runs `sgd_epochs` epochs of SGD with
// the cumulative L1 penalty and the heuristic line search (sgd_l1.cpp) to get close to the
// optimum quickly; stage 2 runs OWL-QN from that point with its own stopping test (period/delta,
// epsilon, max_iterations), which guarantees convergence.
//
// One continuous progress stream: stage-1 epochs are iterations 1 … sgd_epochs, the OWL-QN
// iterations continue from sgd_epochs + 1; passes accumulate in the one Objective and seconds
// run from the start of stage 1.
#include "crfx/error.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

class TwoStageTrainer final : public Trainer {
 public:
  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    if (opt.sgd_epochs < 1)
      throw Error("two-stage: sgd_epochs must be ≥ 1 (got " + std::to_string(opt.sgd_epochs) + ")");
    Stopwatch clock;
    bool stopped = false;
    const double f1 = run_sgd_l1(obj, w, opt, opt.sgd_epochs, /*heuristic=*/true, progress, &stopped);
    if (stopped) {
      stop_reason_ = stop_by_caller();
      return f1;
    }
    const int offset = opt.sgd_epochs;
    const double t1 = clock.seconds();
    ProgressFn stage2;
    if (progress)
      stage2 = [&](const Progress& p, const Vector& x) {
        Progress q = p;
        q.iteration += offset;
        q.seconds += t1;
        return progress(q, x);
      };
    const auto owlqn = make_owlqn_trainer();
    const double f = owlqn->train(obj, w, opt, stage2);
    stop_reason_ = "stage 2 (OWL-QN): " + owlqn->stop_reason();
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_two_stage_trainer() { return std::make_unique<TwoStageTrainer>(); }

}  // namespace crfx
