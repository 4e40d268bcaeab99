// crfx — two-stage (Zhou et al. 2011, seed 000 §4): stage 1 runs `sgd_epochs` epochs of SGD with
// the cumulative L1 penalty and the heuristic line search (sgd_l1.cpp) to get close to the
// optimum quickly; stage 2 runs OWL-QN from that point with its own stopping test (period/delta,
// epsilon, max_iterations), which guarantees convergence.
//
// One continuous progress stream: stage-1 epochs are iterations 1 … sgd_epochs, the OWL-QN
// iterations continue from sgd_epochs + 1; passes accumulate in the one Objective and seconds
// run from the start of stage 1.
#include "crfx/errors.hpp"
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
    // A checkpoint says which stage it was made in (and, in stage 2, when stage 1 ended), then
    // holds that stage's state.
    int stage = 1;
    double t1 = 0;
    StateArchive* resume = resume_;
    resume_ = nullptr;
    if (resume) {
      resume->value("two-stage.stage", stage);
      if (stage == 2) resume->value("two-stage.t1", t1);
      if (stage != 1 && stage != 2) throw Error("checkpoint: two-stage has no stage " + std::to_string(stage));
    }
    // Each stage's reports, with the stage (and stage 2's offsets) in front of its state.
    auto staged = [&](int which, const Progress& p, const Vector& x) {
      if (which == 1) t1 = p.seconds;  // stage 2's reports go on from stage 1's last
      Progress q = p;
      StateFn state;
      if (p.state)
        state = [&, which, inner = p.state](StateArchive& ar) {
          int s = which;
          ar.value("two-stage.stage", s);
          if (which == 2) ar.value("two-stage.t1", t1);
          (*inner)(ar);
        };
      q.state = p.state ? &state : nullptr;
      return progress(q, x);
    };
    if (stage == 1) {
      bool stopped = false;
      ProgressFn stage1;
      if (progress) stage1 = [&](const Progress& p, const Vector& x) { return staged(1, p, x); };
      const double f1 = run_sgd_l1(obj, w, opt, opt.sgd_epochs, /*heuristic=*/true, stage1, &stopped, resume,
                                   &stop_poll_);
      if (stopped) {
        stop_reason_ = stop_by_caller();
        return f1;
      }
      resume = nullptr;
    }
    const int offset = opt.sgd_epochs;
    ProgressFn stage2;
    if (progress)
      stage2 = [&](const Progress& p, const Vector& x) {
        Progress q = p;
        q.iteration += offset;
        q.seconds += t1;
        return staged(2, q, x);
      };
    const auto owlqn = make_owlqn_trainer();
    owlqn->resume_from(resume);
    const double f = owlqn->train(obj, w, opt, stage2);
    stop_reason_ = "stage 2 (OWL-QN): " + owlqn->stop_reason();
    return f;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_two_stage_trainer() { return std::make_unique<TwoStageTrainer>(); }

}  // namespace crfx
