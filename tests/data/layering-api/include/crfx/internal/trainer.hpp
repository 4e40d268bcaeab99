// Fixture for the layering check: an internal header where it belongs.
#pragma once
