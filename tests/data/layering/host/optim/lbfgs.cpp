// Fixture for the layering check (tests/CMakeLists.txt): an optimizer reaching into the CPU backend.
#include "crfx/internal/trainer.hpp"
#include "cpu/cpu_backend.hpp"
