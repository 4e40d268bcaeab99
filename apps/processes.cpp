// crfx — the processes a command runs as (apps/cli.hpp: processes, end_other_processes,
// check_resume_processes): one, or the ranks of an MPI job that mpirun or srun started
// (docs/ARCHITECTURE.md, "Data-parallel runs"). Only crfx train and crfx tag ask.
#include <cstdlib>
#include <memory>
#include <string>

#include "crfx/internal/checkpoint.hpp"
#include "crfx/internal/collective.hpp"

#include "cli.hpp"

#ifdef CRFX_HAVE_MPI
#include "../host/dist/mpi/mpi_collective.hpp"
#endif
#ifdef CRFX_HAVE_NCCL
#include "../kernels/nccl/nccl_sum.hpp"
#endif

namespace crfx::cli {
namespace {

/// The process count an MPI launcher announces: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), or a
/// PMI launcher such as srun or MPICH's (PMI_SIZE); 0 when none started us.
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

CollectivePtr& the_processes() {
  static CollectivePtr processes;  // destroyed at exit: MPI_Finalize
  return processes;
}

}  // namespace

Collective* processes() {
  CollectivePtr& p = the_processes();
  if (p) return p.get();
  const int n = launched_size();
  if (n == 0) return nullptr;
#ifdef CRFX_HAVE_MPI
  p = mpi_collective();
  return p.get();
#else
  if (n == 1) return nullptr;
  throw Error("started as one of " + std::to_string(n) +
              " processes (mpirun or srun), but this crfx was built without MPI: each would do the whole "
              "work and write the same outputs; build it with MPI (cmake -DCRFX_MPI=ON, apt: libopenmpi-dev) "
              "or run one process");
#endif
}

DeviceSumMaker device_sum() {
  DeviceSumMaker m;
#ifdef CRFX_HAVE_NCCL
  m.usable = cuda::nccl_usable;
  m.make = cuda::make_nccl_sum;
#endif
  return m;
}

void end_other_processes(int status) {
  if (CollectivePtr& p = the_processes(); p && p->size() > 1) p->abort(status);
}

void check_resume_processes(const Checkpoint& checkpoint, int processes) {
  std::string saved = "1";
  for (const auto& [name, value] : checkpoint.keys())
    if (name == "processes") saved = value;
  if (saved != std::to_string(processes))
    throw Error("checkpoint " + checkpoint.path() + " was made by a run on " + saved + " process" +
                (saved == "1" ? "" : "es") + ", this run has " + std::to_string(processes) + ": resume it on " + saved +
                " (the sums over the data would be added in another order, and the model would not be the "
                "uninterrupted run's)");
}

}  // namespace crfx::cli
