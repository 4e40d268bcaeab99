// crfx — the collective over MPI (MPI_COMM_WORLD), for the runs mpirun or srun starts. Built
// only where CMake finds MPI (-DCRFX_MPI=AUTO|ON), into the crfx tool and its tests, not into the
// library (which then needs no MPI to link; a program of its own passes any Collective).
#pragma once

#include "crfx/internal/collective.hpp"

namespace crfx {

/// MPI_COMM_WORLD as a Collective: MPI_Init_thread here (MPI called from this thread only),
/// MPI_Finalize when it is destroyed. MPI errors come back as crfx::Error naming the call, not as
/// MPI's abort. Error where MPI cannot start.
CollectivePtr mpi_collective();

}  // namespace crfx
