// crfx — the collective over MPI (host/dist/mpi/mpi_collective.hpp).
//
// sum() is MPI_Allgather of each rank's block and, on every rank, the blocks added in rank order,
// not MPI_Allreduce: MPI leaves the order of a reduction to the implementation (Open MPI picks
// among ring, recursive doubling and others by message size and process count, and for a
// built-in operation may group (x0 + x1) + (x2 + x3)), so its bits could differ between runs or
// ranks' placements; an allgather moves every rank's numbers unchanged, and the sum is then ours,
// ((x_0 + x_1) + x_2) …, the same on every rank and in every run of the same size. The cost:
// each rank receives (N − 1)·n doubles where a ring allreduce moves 2·(N − 1)/N·n, and holds the
// N blocks of kBlock doubles at a time (N · 1 MiB), not N whole gradients.
#include "dist/mpi/mpi_collective.hpp"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "crfx/errors.hpp"

namespace crfx {
namespace {

constexpr std::size_t kBlock = std::size_t(1) << 17;  // doubles a rank sends per allgather (1 MiB)

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, std::size_t(length)) +
              " (has another process of the run ended?)");
}

class MpiCollective final : public Collective {
 public:
  MpiCollective() {
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed: MPI cannot start in this process");
      owner_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;  // the ranks sharing this machine's memory: their order picks the GPU
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
    check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank");
    MPI_Comm_free(&node);
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_.assign(version, std::size_t(length));
    library_ = library_.substr(0, library_.find_first_of(",\n"));
  }
  ~MpiCollective() override {
    int done = 0;
    MPI_Finalized(&done);
    if (owner_ && !done) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string name() const override {
    return "MPI (" + library_ + "), " + std::to_string(size_) + (size_ == 1 ? " process" : " processes");
  }

  void sum(double* x, std::size_t n) override {
    if (size_ == 1) return;
    const std::size_t N = std::size_t(size_);
    gathered_.resize(N * std::min(n, kBlock));
    for (std::size_t at = 0; at < n; at += kBlock) {
      const std::size_t m = std::min(kBlock, n - at);
      check(MPI_Allgather(x + at, int(m), MPI_DOUBLE, gathered_.data(), int(m), MPI_DOUBLE, MPI_COMM_WORLD),
            "MPI_Allgather");
      for (std::size_t i = 0; i < m; ++i) {
        double s = gathered_[i];  // rank 0's value itself (not 0 + it: a −0 stays −0)
        for (std::size_t r = 1; r < N; ++r) s += gathered_[r * m + i];
        x[at + i] = s;
      }
    }
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    for (std::size_t at = 0; at < bytes; at += kBlock) {  // MPI counts are ints
      const std::size_t m = std::min(kBlock, bytes - at);
      check(MPI_Bcast(static_cast<char*>(data) + at, int(m), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  void abort(int code) override {
    if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
  }

 private:
  bool owner_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string library_;
  std::vector<double> gathered_;  // [N][block] the ranks' blocks, rank after rank
};

}  // namespace

CollectivePtr mpi_collective() { return std::make_unique<MpiCollective>(); }

}  // namespace crfx
