// Fixture for the layering check: the interface an optimizer may include.
#include "crfx/internal/backend.hpp"
