// crfx — the CUDA library's host-facing API. Plain C++: host/ includes this, never a CUDA header.
#pragma once

#include <string>

namespace crfx::cuda {

/// Number of CUDA devices this process can use; 0 with the reason in `why` when none (no driver,
/// no device, or a runtime error).
int device_count(std::string* why);
/// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)".
std::string device_description(int device);
/// Runs a small kernel on `device` and checks its result on the host; false with the reason in
/// `why` when the device cannot run this build's kernels (e.g. no code for its architecture).
bool self_test(int device, std::string* why);

}  // namespace crfx::cuda
