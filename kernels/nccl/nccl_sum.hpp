// crfx — the CUDA backend's device sum over NCCL (crfx::DeviceSum), for data-parallel runs whose
// ranks train on GPUs: their gradients summed device to device (ncclAllReduce) instead of through
// the host. Built only with -DCRFX_NCCL=ON (nccl.h and libnccl from the CUDA toolkit), into the
// crfx tool alone (as host/dist/mpi/); UNTESTED in CI, which has no GPU: on a GPU machine,
// scripts/gpu-checks.sh's step `mpi` compares its model with the host path's (CRFX_NCCL=0).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "crfx/internal/backend.hpp"

namespace crfx::cuda {

/// Whether `b` is a CUDA backend (whose vectors NCCL can sum).
bool nccl_usable(Backend& b);
/// The NCCL communicator of `size` ranks, this one `rank`, on `b`'s device and stream: rank 0
/// makes the id, `share` copies it to every rank. Error naming NCCL's reason when it cannot start.
std::unique_ptr<DeviceSum> make_nccl_sum(Backend& b, int rank, int size,
                                         const std::function<void(void*, std::size_t)>& share);

}  // namespace crfx::cuda
