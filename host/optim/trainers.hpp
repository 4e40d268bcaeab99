// crfx — constructors of the trainers; registry.cpp lists them in one table.
#pragma once

#include <memory>

#include "crfx/trainer.hpp"

namespace crfx {

std::unique_ptr<Trainer> make_lbfgs_trainer();
std::unique_ptr<Trainer> make_owlqn_trainer();
std::unique_ptr<Trainer> make_rprop_trainer();  // rprop.cpp
std::unique_ptr<Trainer> make_sag_trainer();   // sag.cpp (seed 004)
std::unique_ptr<Trainer> make_saga_trainer();  // sag.cpp (seed 004, Proposition 1)
// Stochastic trainers (seeds 000, 002, 003): sgd_l1.cpp, two_stage.cpp, adf.cpp, perceptron.cpp.
std::unique_ptr<Trainer> make_sgd_l1_trainer();
std::unique_ptr<Trainer> make_two_stage_trainer();
std::unique_ptr<Trainer> make_adf_trainer();
std::unique_ptr<Trainer> make_perceptron_trainer();
// Maxent trainers (seed 001; --type maxent, CPU only): gis.cpp, iis.cpp, scgis.cpp, cd.cpp, around
// maxent_problem.hpp.
std::unique_ptr<Trainer> make_gis_trainer();
std::unique_ptr<Trainer> make_iis_trainer();
std::unique_ptr<Trainer> make_scgis_trainer();
std::unique_ptr<Trainer> make_cd_trainer();

}  // namespace crfx
