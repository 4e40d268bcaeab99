// crfx — data-parallel training: the collective seam, the shards, the summing backend.
//
// The full-batch objective is a sum over sentences, so N processes ("ranks") can each hold a
// shard of the corpus and add their parts (issue 39). The one place this happens is
// Backend::evaluate over the whole corpus: distributed_backend() wraps a rank's own backend and
// sums the loss and gradient of each such pass across the ranks, so every trainer built on
// Objective (lbfgs, owlqn, rprop, their Maxent and loss variants) runs unchanged, and every rank
// takes the same step on the same weights.
//
//   rank r:  corpus ─shard(r, N)─▶ its sentences ─upload─▶ inner backend
//            evaluate(whole corpus) ─▶ (loss, gradient) of the shard ─Collective::sum─▶ the total
//
// Collective: rank, size, a sum of doubles, broadcast, barrier — single_process() here, MPI in
// host/dist/mpi/ (built when MPI is found; the crfx tool makes it under mpirun). Nothing
// home-made crosses a wire.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/corpus.hpp"

namespace crfx {

/// The processes of one run and what they do together. Every call is collective: every rank
/// makes the same calls in the same order (else they wait on one another for ever).
class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The rank among those on this machine (the GPU a rank takes), 0 … ranks here − 1.
  virtual int local_rank() const = 0;
  /// "one process", "MPI (Open MPI v4.1.4), 2 processes".
  virtual std::string name() const = 0;
  /// x[i] ← Σ_r x_r[i] on every rank, summed in rank order ((x_0 + x_1) + x_2 …): the same bits
  /// on every rank and in every run with the same size, whatever the transport's own algorithms.
  virtual void sum(double* x, std::size_t n) = 0;
  /// `bytes` at `data` of rank `root` copied to every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Ends every rank of the run at once with exit status `code` (a failure on one rank, which the
  /// others would otherwise wait on for ever). Returns only for one process (does nothing).
  virtual void abort(int code) = 0;

  /// True on every rank when `value` is true on every rank (a stop anywhere stops them all).
  bool all(bool value);
};
using CollectivePtr = std::unique_ptr<Collective>;

/// One process: rank 0 of 1; sum, broadcast and barrier do nothing.
CollectivePtr single_process();

/// The sentences [first, last) of rank `rank` of `size`: contiguous shards, in corpus order,
/// balanced by tokens (each shard's first sentence is the first whose preceding tokens reach
/// rank·T/size), none empty. Error when there are fewer sentences than ranks.
std::pair<std::size_t, std::size_t> shard_range(const Corpus& corpus, int rank, int size);
/// The corpus of those sentences alone (ids, labels and values as they were).
Corpus shard_corpus(const Corpus& corpus, std::size_t first, std::size_t last);

/// How a backend's vectors are summed on the device, where a program offers it (the crfx tool
/// built with -DCRFX_NCCL=ON: kernels/nccl/nccl_sum.hpp): `usable(b)` says whether backend `b`
/// can (no collective call); `make(b, rank, size, share)` makes the sum, `share(data, bytes)`
/// copying bytes from rank 0 to every rank (NCCL's id over the host collective).
struct DeviceSumMaker {
  std::function<bool(Backend&)> usable;
  std::function<std::unique_ptr<DeviceSum>(Backend&, int rank, int size,
                                           const std::function<void(void*, std::size_t)>& share)>
      make;
};

/// A backend that forwards every call to `inner` (the rank's own backend, holding the rank's
/// shard) except evaluate over a whole uploaded corpus: its loss and gradient contribution are
/// summed across the ranks of `collective` (the contribution made on a zeroed buffer of the
/// backend, read to the host, Collective::sum, written back and added: on a zero `grad` the
/// same bits as the inner backend's own result when there is one rank). Every other call is
/// the rank's own: its weights are the same on every rank, so norms, dots and steps are too.
/// evaluate over part of a corpus (a sentence or a mini-batch, which only the rank holding it
/// could make) is an Error, as are the incremental and sparse capabilities (none here).
/// With `device` usable on every rank's backend (agreed through the collective, and not turned
/// off by CRFX_NCCL=0 in the environment), the gradient is summed by it on the device instead,
/// the loss alone through the host. `collective` must outlive the backend.
BackendPtr distributed_backend(BackendPtr inner, Collective& collective, const DeviceSumMaker& device = {});

}  // namespace crfx
