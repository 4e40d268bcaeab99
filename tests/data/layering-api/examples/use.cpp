// Fixture for the layering check: an example that reaches past the stable API.
#include "crfx/train.hpp"
#include "crfx/internal/trainer.hpp"
