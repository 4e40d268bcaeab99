// Fixture for the layering check: an internal header outside include/crfx/internal/.
#pragma once
