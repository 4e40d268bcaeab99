// crfx — checkpoints: a trainer's state at a safe point, written to a file and read back, so that
// a run continues where it stopped and ends with the model an uninterrupted run gives, byte for
// byte (crfx train --checkpoint / --resume).
//
// Each trainer describes its state once, as a function visiting its fields in a fixed order
// (StateFn); the same function saves (the archive copies each field out) and restores (the
// archive writes each field in). Backend vectors go through the backend, so the CPU and CUDA
// backends checkpoint the same state.
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: StateArchive, write_checkpoint,
//  Checkpoint, Trainer::resume_from (trainer.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace crfx {

class Backend;
class Vector;

/// A trainer's state, visited field by field. A restoring archive checks each field's name, kind
/// and (for backend vectors) size against what was saved, and throws Error naming the field
/// otherwise: a trainer restored from another trainer's state, or from a corrupt file, stops there.
class StateArchive {
 public:
  virtual ~StateArchive() = default;
  virtual bool restoring() const = 0;
  virtual void doubles(const char* name, std::vector<double>& v) = 0;
  virtual void integers(const char* name, std::vector<std::uint64_t>& v) = 0;
  virtual void text(const char* name, std::string& s) = 0;

  void value(const char* name, double& x);
  void value(const char* name, std::uint64_t& x);
  /// Any other integer (int, std::size_t, bool …), through 64 bits.
  template <class Int>
  void value(const char* name, Int& x) {
    std::uint64_t v = std::uint64_t(x);
    value(name, v);
    if (restoring()) x = Int(v);
  }
  void values(const char* name, std::vector<std::uint32_t>& v);
  void values(const char* name, std::vector<char>& v);
  /// A backend-resident vector: read to the host to save, written back to restore (its size must
  /// be the saved one).
  void vector(const char* name, Backend& backend, Vector& v);
  /// A standard random engine, as its textual state (operator<< / >>: exact by the standard).
  template <class Engine>
  void engine(const char* name, Engine& e) {
    std::string s;
    if (!restoring()) {
      std::ostringstream os;
      os << e;
      s = os.str();
    }
    text(name, s);
    if (restoring()) {
      std::istringstream is(s);
      is >> e;
      if (!is) bad_engine(name);
    }
  }

 private:
  [[noreturn]] static void bad_engine(const char* name);
};

using StateFn = std::function<void(StateArchive&)>;

/// What a checkpoint must match to be resumed — the crfx version, the algorithm and each of its
/// settings, the fingerprints of the training data and of the features — as (name, value) pairs.
using CheckpointKeys = std::vector<std::pair<std::string, std::string>>;

/// Writes a checkpoint through `sink` (e.g. AtomicFile::write): a magic line, the keys, the
/// notes (pairs kept but not compared on resume: the device, the log so far), the trainer's state
/// (`state` run on a saving archive) and a checksum of everything before it.
void write_checkpoint(const std::function<void(const char*, std::size_t)>& sink, const CheckpointKeys& keys,
                      const CheckpointKeys& notes, const StateFn& state);

/// A checkpoint file opened for resuming: its checksum verified, its keys and notes read; the
/// trainer's state is then read field by field, in order, through state().
class Checkpoint {
 public:
  /// InputError naming `path` for a file that is not a crfx checkpoint, is truncated or corrupt
  /// (its checksum), or was written by an unknown checkpoint format.
  explicit Checkpoint(const std::string& path);
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::string& path() const { return path_; }
  const CheckpointKeys& keys() const { return keys_; }
  const CheckpointKeys& notes() const { return notes_; }
  /// The note called `name`, or "".
  std::string note(const std::string& name) const;
  /// Throws Error when `now` differs from the saved keys, naming each difference ("--c2: 1 in
  /// the checkpoint, 0.5 now"), and a key present on one side only.
  void check(const CheckpointKeys& now) const;
  /// The saved state, for Trainer::resume_from (restoring; fields in the order they were saved).
  StateArchive& state();
  /// Throws Error unless the trainer read every saved field (a checkpoint of a longer state).
  void finish();

 private:
  class Reader;
  std::string path_;
  CheckpointKeys keys_, notes_;
  std::unique_ptr<Reader> reader_;
};

}  // namespace crfx
