// crfx — the trainer registry: one table (Wapiti's style), each trainer with its settings;
// `crfx train --algo list` prints it.
#include "crfx/error.hpp"
#include "crfx/trainer.hpp"
#include "optim/trainers.hpp"

namespace crfx {

namespace {
// Each trainer's settings (OptionSpec tables, options.cpp): the ones its train() reads.
const std::vector<const char*> kQuasiNewton = {"max-iterations", "period", "delta", "epsilon", "memory",
                                               "max-linesearch"};
const std::vector<const char*> kIncremental = {"batch-size", "epsilon", "max-epochs", "sampling", "seed"};
}  // namespace

const std::vector<TrainerInfo>& trainer_registry() {
  static const std::vector<TrainerInfo> table = {
      {"lbfgs", "L-BFGS on NLL + c2·‖w‖² with a strong-Wolfe line search (with c1 > 0 it runs OWL-QN)",
       make_lbfgs_trainer, kQuasiNewton},
      {"owlqn", "OWL-QN (Andrew & Gao 2007) on NLL + c1·‖w‖₁ + c2·‖w‖²: sparse models",
       make_owlqn_trainer, kQuasiNewton},
      {"rprop", "RPROP (Riedmiller & Braun 1993; iRprop−, Igel & Hüsken 2000), as Wapiti's rprop: per-weight "
                "steps that follow the gradient's sign; c1 through the pseudo-gradient",
       make_rprop_trainer, {"max-iterations", "period", "delta", "epsilon"}},
      {"sag", "SAG with stored marginals, Lipschitz line search and non-uniform sampling (Schmidt et al. 2015; --sampling)",
       make_sag_trainer, kIncremental},
      {"saga", "SAGA (Defazio et al. 2014, as Schmidt et al. 2015 use it), same memory, line search and sampling as sag",
       make_saga_trainer, kIncremental},
      {"sgd-l1", "mini-batch SGD with the cumulative L1 penalty (Tsuruoka et al. 2009), "
                 "η = eta0·alpha^(k/N); --line-search heuristic (Zhou et al. 2011)",
       make_sgd_l1_trainer, {"batch-size", "epochs", "eta0", "alpha", "line-search", "seed"}},
      {"two-stage", "sgd_epochs of SGD-L1 with the heuristic line search, then OWL-QN (Zhou et al. 2011)",
       make_two_stage_trainer,
       {"sgd-epochs", "batch-size", "eta0", "alpha", "seed", "max-iterations", "period", "delta", "epsilon", "memory",
        "max-linesearch"}},
      {"adf", "online SGD with frequency-adaptive per-feature rates (Sun et al. 2012); L2 prior c2",
       make_adf_trainer, {"batch-size", "epochs", "eta0", "adf-alpha", "adf-beta", "adf-windows", "seed"}},
      {"ap", "averaged structured perceptron on Viterbi (Collins 2002); ignores c1, c2",
       make_perceptron_trainer, {"batch-size", "epochs", "seed"}, /*uses_objective=*/false},
  };
  return table;
}

const TrainerInfo& find_trainer(const std::string& name) {
  std::string known;
  for (const auto& t : trainer_registry()) {
    if (name == t.name) return t;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  throw Error("unknown training algorithm '" + name + "' (known: " + known + ")");
}

LineSearch parse_line_search(const std::string& name) {
  if (name == "none") return LineSearch::none;
  if (name == "heuristic") return LineSearch::heuristic;
  throw Error("unknown line search '" + name + "' for sgd-l1 (known: none, heuristic)");
}

const char* name_of(LineSearch v) { return v == LineSearch::heuristic ? "heuristic" : "none"; }

const char* name_of(Sampling v) {
  return v == Sampling::uniform ? "uniform" : v == Sampling::lipschitz ? "lipschitz" : "mixed";
}

Sampling parse_sampling(const std::string& name) {
  if (name == "uniform") return Sampling::uniform;
  if (name == "lipschitz") return Sampling::lipschitz;
  if (name == "mixed") return Sampling::mixed;
  throw Error("unknown sampling '" + name + "' for sag/saga (known: uniform, lipschitz, mixed)");
}

}  // namespace crfx
