// crfx — the marginal reduction of evaluate() (kernels/gather_kernels.cu): the gradient
// g += scale · Xᵀ·delta for state and edge attributes (the segmented gather) and the transition
// sums over the chunk's sentences by a fixed two-level tree (trans_partial, trans_final). No
// atomics on the sums: every entry is added in a fixed order, whatever the schedule.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "crfx/internal/corpus.hpp"  // WeightGroups
#include "device_buffer.cuh"

namespace crfx::cuda::detail {

/// Occurrences one warp of the gather walks at most (one segment); see GatherSegments.
constexpr std::size_t kGatherSegment = 256;
/// Threads of a block of the segments' combine (the partials of one attribute).
constexpr int kCombineThreads = 256;
constexpr std::size_t kNoPartial = ~std::size_t(0);

/// A gather's work list, made once at upload from the transposed CSR (attribute → occurrences in
/// token order): each attribute's occurrences cut into nseg = ⌈n / kGatherSegment⌉ segments of
/// near-equal length, in attribute order. A warp takes (segment, 32 weights of the row), so no
/// warp walks more than kGatherSegment occurrences however often an attribute occurs (a bias, a
/// POS tag: the critical path no longer grows with the corpus). An attribute of one segment adds
/// its sum to the gradient directly; one of several writes a partial row per segment, which the
/// combine adds up in segment order (a fixed tree of kCombineThreads-thread blocks). The sum
/// order depends on the data only: bitwise the same run to run.
struct GatherSegments {
  std::size_t segments = 0;  // count
  std::size_t multi = 0;     // attributes of several segments
  std::size_t partials = 0;  // doubles of the partial rows
  DeviceBuffer<std::size_t> seg_off;    // [segments + 1] occurrence range of each segment
  DeviceBuffer<std::uint32_t> seg_attr; // [segments] attribute (gather-local id)
  DeviceBuffer<std::size_t> seg_part;   // [segments] first double of its partial row, or kNoPartial
  DeviceBuffer<std::uint8_t> touched;   // [segments] the segment had occurrences in the chunk
  DeviceBuffer<std::uint32_t> multi_attr;  // [multi]
  DeviceBuffer<std::size_t> multi_seg;     // [2 · multi] segments [begin, end) of each
  DeviceBuffer<double> partial;            // [partials]
  /// Plans `num_attrs` attributes over occ_off (host copy, [num_attrs + 1]); row(a) the length of
  /// attribute a's weight row (a partial row has that many doubles), and uploads the plan. With
  /// `host_off` (a streamed corpus) the segments' occurrence ranges stay on the host there, for
  /// the chunks' own (GatherChunk::seg_off), and seg_off is left empty.
  template <class Row>
  void build(std::size_t num_attrs, const std::vector<std::size_t>& occ_off, Row row, cudaStream_t s,
             std::vector<std::size_t>* host_off = nullptr);
  /// Device bytes a plan of `occurrences` over `num_attrs` attributes with rows of at most
  /// `max_row` weights takes at most.
  static std::size_t bytes_bound(std::size_t num_attrs, std::size_t occurrences, std::size_t max_row);
};

/// The chunk a gather reads: either any set of sentences, through the token → row map
/// (token_slot[t] ≥ 0 for the chunk's tokens; every occurrence of the corpus is scanned), or
/// consecutive tokens [t_lo, t_hi) with row t − t_lo (token_slot null; only the chunk's own
/// occurrences are scanned, found by binary search in each segment).
/// A streamed corpus's chunk (its own transposed occurrences, tokens chunk-local from t_lo = 0)
/// names the plan's segments it has occurrences in: seg_id [segments] (ascending), and their
/// ranges in its occurrences seg_off [segments + 1] — each the plan's segment restricted to the
/// chunk, so the sums are those of the resident corpus chunked alike, bit for bit.
struct GatherChunk {
  const int* token_slot = nullptr;
  std::uint32_t t_lo = 0, t_hi = 0;
  const std::uint32_t* seg_id = nullptr;
  const std::size_t* seg_off = nullptr;
  std::size_t segments = 0;
};

/// What the tests read (CudaBackendConfig::gather_counters, on the device): occurrences scanned,
/// the longest run of occurrences one warp walked, the longest run of partials one thread of
/// the combine added.
struct GatherCountersDevice {
  unsigned long long visits, longest_walk, longest_combine, longest_chain;
};

/// G[k] += scale · Σ x · delta[row][slot(k)] for each weight k of group gid0 + a, over the
/// occurrences (occ_tok, occ_val: the transposed CSR, token order) of attribute a whose token is
/// in the chunk, by the segments of `plan`; delta rows are `width` wide (L or L²), `gl` the weight
/// groups (device pointers; dense: k = begin + slot), `max_row` the longest of the rows (`width`
/// when dense). Two launches at most (the segments, then the combine of the partials).
void launch_gather(const GatherSegments& plan, std::size_t width, std::size_t max_row, const WeightGroups& gl,
                   std::uint32_t gid0, const std::uint32_t* occ_tok, const double* occ_val, const GatherChunk& ch,
                   const double* delta, double scale, double* G, GatherCountersDevice* counters, cudaStream_t s);
/// G[k] += scale · Σ_i pair[i][slots[k]] for k < count (slots null: slot k, count LL) over the n
/// sentences' [LL] blocks, by the fixed tree: sums of kTransGroup sentences in order into
/// `partial` [⌈n / kTransGroup⌉][LL], then those in order.
void launch_transition_tree(std::size_t LL, std::size_t n, const double* pair, double* partial, double scale,
                            std::size_t count, const std::uint32_t* slots, double* G, cudaStream_t s);

// ---- GatherSegments::build ---------------------------------------------------------------------

template <class Row>
void GatherSegments::build(std::size_t num_attrs, const std::vector<std::size_t>& occ_off, Row row,
                           cudaStream_t s, std::vector<std::size_t>* host_off) {
  std::vector<std::size_t> off{0}, part, mseg;
  std::vector<std::uint32_t> attr, mattr;
  std::size_t parts = 0;
  for (std::size_t a = 0; a < num_attrs; ++a) {
    const std::size_t b = occ_off[a], n = occ_off[a + 1] - b;
    if (n == 0) continue;
    const std::size_t nseg = (n + kGatherSegment - 1) / kGatherSegment;
    if (nseg > 1) {
      mattr.push_back(std::uint32_t(a));
      mseg.push_back(attr.size());
      mseg.push_back(attr.size() + nseg);
    }
    for (std::size_t j = 0; j < nseg; ++j) {  // near-equal lengths, each ≤ kGatherSegment
      attr.push_back(std::uint32_t(a));
      off.push_back(b + n * (j + 1) / nseg);
      part.push_back(nseg > 1 ? parts : kNoPartial);
      if (nseg > 1) parts += row(a);
    }
  }
  segments = attr.size();
  multi = mattr.size();
  partials = parts;
  if (!host_off) upload_vector(seg_off, off, s);
  upload_vector(seg_attr, attr, s);
  upload_vector(seg_part, part, s);
  touched.resize(segments);
  upload_vector(multi_attr, mattr, s);
  upload_vector(multi_seg, mseg, s);
  partial.resize(partials);
  CRFX_CUDA_CHECK(cudaStreamSynchronize(s));  // the host vectors above must outlive the copies
  if (host_off) *host_off = std::move(off);
}

inline std::size_t GatherSegments::bytes_bound(std::size_t num_attrs, std::size_t occurrences, std::size_t max_row) {
  // Segments ≤ (attributes that occur) + occurrences / K; an attribute of n > K occurrences has
  // ⌈n / K⌉ ≤ 2n / K of them, each with a partial row of at most max_row doubles.
  const std::size_t segs = std::min(occurrences, num_attrs + occurrences / kGatherSegment) + 1;
  const std::size_t multi_segs = std::min(2 * (occurrences / kGatherSegment), segs);
  return segs * (2 * sizeof(std::size_t) + sizeof(std::uint32_t) + 1) +
         multi_segs * (sizeof(std::uint32_t) + sizeof(std::size_t) + max_row * sizeof(double));
}

}  // namespace crfx::cuda::detail
