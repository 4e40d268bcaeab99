// crfx — constructors of the trainers; registry.cpp lists them in one table.
#pragma once

#include <memory>

#include "crfx/trainer.hpp"

namespace crfx {

std::unique_ptr<Trainer> make_lbfgs_trainer();
std::unique_ptr<Trainer> make_owlqn_trainer();

}  // namespace crfx
