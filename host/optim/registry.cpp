// crfx — the trainer registry: one table (Wapiti's style); `crfx train --algo list` prints it.
#include "crfx/error.hpp"
#include "crfx/trainer.hpp"
#include "optim/trainers.hpp"

namespace crfx {

const std::vector<TrainerInfo>& trainer_registry() {
  static const std::vector<TrainerInfo> table = {
      {"lbfgs", "L-BFGS on NLL + c2·‖w‖² with a strong-Wolfe line search (with c1 > 0 it runs OWL-QN)",
       make_lbfgs_trainer},
      {"owlqn", "OWL-QN (Andrew & Gao 2007) on NLL + c1·‖w‖₁ + c2·‖w‖²: sparse models",
       make_owlqn_trainer},
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

}  // namespace crfx
