// crfx train's and learn's options and the small texts of their report (train_options.cpp).
#pragma once

#include <string>

#include <cxxopts.hpp>

#include "crfx/internal/trainer.hpp"
#include "crfx/model.hpp"
#include "crfx/train.hpp"

namespace crfx::cli {

/// crfx train's options; learn: crfx learn's (CRFsuite's data format by default, and -p).
void add_train_options(cxxopts::Options& o, bool learn);
/// A size with an optional K, M, G or T suffix (powers of 1000; KiB, MiB, … of 1024), as
/// --max-memory and --max-device-memory take it; `option` names it in the usage error.
double parse_bytes(const std::string& text, const char* option = "--max-memory");
/// The process's peak resident memory in bytes (getrusage).
double peak_resident_bytes();
/// A run refused by the memory check, in crfx train's words (the shortfall and advice naming
/// crfx train's options).
[[noreturn]] void refuse_memory(const MemoryRefusal& e);
/// The trainer's settings from the command line, checked.
TrainOptions train_options(const cxxopts::ParseResult& r, const TrainerInfo& trainer);
/// --algo list: every trainer with its settings.
void list_trainers();
/// "12 s", "3.5 min", "2.1 h".
std::string eta_text(double seconds);
/// The last iteration (epoch) a run of `trainer` can reach with `opt` (0: no cap).
int iteration_cap(const TrainerInfo& trainer, const TrainOptions& opt);
/// --type, checked against the algorithm.
ModelType model_type(const cxxopts::ParseResult& r, const TrainerInfo& trainer);

}  // namespace crfx::cli
