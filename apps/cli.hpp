// crfx — what the crfx tool's commands share (apps/cli.cpp) and the commands themselves: train
// (apps/cmd_train.cpp), learn (CRFsuite's command line translated to train's: apps/cmd_learn.cpp),
// tag (apps/cmd_tag.cpp), eval and dump (apps/cmd_eval.cpp), bench (apps/cmd_bench.cpp);
// apps/main.cpp dispatches. Each command parses and checks its own options and calls the library
// (training: crfx::TrainingRun; tagging: crfx::tag_inputs).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "crfx/internal/checkpoint.hpp"
#include "crfx/internal/collective.hpp"
#include "crfx/internal/features.hpp"

namespace crfx::cli {

/// crfx train stopped by a signal after writing its model (see apps/main.cpp).
constexpr int kExitStoppedBySignal = 3;
/// More worker threads than this is a typo, not a machine (and would only thrash).
constexpr unsigned kMaxThreads = 1024;

/// A mistake on the command line: exit status 2.
struct UsageError : Error {
  using Error::Error;
};

double now_seconds();
/// printf into a string; the compiler checks each call's arguments against its format (a
/// fingerprint once went through a double here and printed a register's leftovers).
__attribute__((format(printf, 1, 2))) std::string fmt(const char* format, ...);
/// What crfx calls an option that CRF++ (crf_learn, crf_test), CRFsuite or conlleval users type,
/// from cxxopts' "Option ‘c’ does not exist" ("; CRF++'s -c C is --c2 …"); "" for any other option.
std::string foreign_option_hint(const std::string& program, const std::string& msg);
/// For a CRF++ or CRFsuite algorithm name that is not crfx's (CRF-L2, CRF-L1):
/// what crfx has instead ("CRF++'s -a CRF-L2 is -a lbfgs here …"); "" for any other name.
std::string foreign_algorithm_hint(const std::string& name);
/// The crfx name of an -a value: CRF++'s MIRA, in any case (crf_learn lowercases it), is mira;
/// any other name as given.
std::string algorithm_name(const std::string& name);
/// Parses a subcommand's options; prints help and returns false for --help.
bool parse(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result);
template <class T>
T get(const cxxopts::ParseResult& r, const char* name) {
  try {
    return r[name].as<T>();
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string("--") + name + ": " + e.what());
  }
}
/// Refuses two outputs of one run that name one file, whether it exists yet or not (through
/// links: the file an atomic write would replace); `b_what` says what `b` is.
void check_not_the_same_output(const std::string& a, const std::string& b, const std::string& b_what);
/// Why a write to standard output failed (errno, as the failed write left it).
std::string stdout_error();
std::string required(const cxxopts::ParseResult& r, const char* name, const char* what);
InputFormat parse_format(const std::string& s);
/// Hands the heap's free pages back to the system. With large blocks kept on the heap (see
/// main), memory freed below the heap's top stays resident until this is called.
void release_free_memory();
void add_device_options(cxxopts::Options& o);
/// --device and --threads.
BackendOptions backend_options(const cxxopts::ParseResult& r);
/// The backend --device and --threads ask for (`cuda_device`: BackendOptions::cuda_device).
BackendPtr backend_from(const cxxopts::ParseResult& r, const Dims& dims, bool quiet, int cuda_device = 0);
/// --features, --possible-states, --possible-transitions (crfx train, crfx bench).
void add_feature_options(cxxopts::Options& o);
FeatureSet feature_set(const cxxopts::ParseResult& r);

/// The processes of an MPI job this one belongs to (apps/processes.cpp), where mpirun or srun
/// started it (OMPI_COMM_WORLD_SIZE or PMI_SIZE set) — even one alone; null otherwise. Made at
/// the first call (MPI_Init), ended at exit. Error under a launcher of several in a build
/// without MPI.
Collective* processes();
/// The GPU ranks' device sum (NCCL) in a build with -DCRFX_NCCL=ON; else empty (through the host).
DeviceSumMaker device_sum();
/// After an error on this process: ends the job's other processes too (MPI_Abort), which would
/// otherwise wait on this one for ever.
void end_other_processes(int status);
/// --resume under `processes` processes: Error naming both counts unless the checkpoint was made
/// on as many (a checkpoint without the key "processes" was made by one).
void check_resume_processes(const Checkpoint& checkpoint, int processes);

int cmd_train(int argc, char** argv);
/// crfx train, or (learn) crfx learn once apps/cmd_learn.cpp has translated CRFsuite's options:
/// the program name "crfx learn" and CRFsuite's data format by default.
int train_command(int argc, char** argv, bool learn);
int cmd_learn(int argc, char** argv);
int cmd_tag(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_dump(int argc, char** argv);
int cmd_bench(int argc, char** argv);

}  // namespace crfx::cli
