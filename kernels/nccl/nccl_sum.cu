// crfx — the CUDA backend's device sum over NCCL (kernels/nccl/nccl_sum.hpp): ncclAllReduce of a
// gradient in place, on the backend's own stream, then a synchronisation (errors surface here,
// not in the next kernel). The host path it replaces is host/dist/distributed_backend.cpp.
#include "nccl/nccl_sum.hpp"

#include <nccl.h>

#include <string>

#include "crfx/errors.hpp"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"

namespace crfx::cuda {
namespace {

using detail::CudaBackend;

void nccl_check(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) throw Error(std::string(call) + " failed: " + ncclGetErrorString(rc));
}

class NcclSum final : public DeviceSum {
 public:
  NcclSum(CudaBackend& b, int rank, int size, const std::function<void(void*, std::size_t)>& share) : b_(b) {
    ncclUniqueId id{};
    if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    share(&id, sizeof id);
    CRFX_CUDA_CHECK(cudaSetDevice(b_.device()));
    nccl_check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    int v = 0;
    ncclGetVersion(&v);  // e.g. 22809: 2.28.9
    name_ = "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
  }
  ~NcclSum() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  void sum(Vector& x) override {
    double* p = b_.device_data(x);
    nccl_check(ncclAllReduce(p, p, x.size(), ncclDouble, ncclSum, comm_, b_.stream()), "ncclAllReduce");
    b_.synchronize();
  }
  std::string name() const override { return name_; }

 private:
  CudaBackend& b_;
  ncclComm_t comm_ = nullptr;
  std::string name_;
};

}  // namespace

bool nccl_usable(Backend& b) { return dynamic_cast<CudaBackend*>(&b) != nullptr; }

std::unique_ptr<DeviceSum> make_nccl_sum(Backend& b, int rank, int size,
                                         const std::function<void(void*, std::size_t)>& share) {
  auto* cuda = dynamic_cast<CudaBackend*>(&b);
  if (!cuda) throw Error("internal: an NCCL sum asked of a backend that is not CUDA's (" + b.name() + ")");
  return std::make_unique<NcclSum>(*cuda, rank, size, share);
}

}  // namespace crfx::cuda
