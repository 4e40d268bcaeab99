// crfx — the CUDA backend's view of a chunk's corpus arrays (CorpusArrays: the resident corpus's,
// or a streamed chunk's copy) and a streamed corpus's parts (CorpusStream: the chunk plan, the
// pinned copy, the two device slots and their events). See "Streaming" in backend_stream.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "device_buffer.cuh"
#include "gather_kernels.cuh"

namespace crfx::cuda::detail {

/// The split forward-backward's work list of a planned chunk (device) and the sizes the host
/// decides by: the resident plan's (planned_fb) or a streamed chunk's copy.
struct FbWork {
  std::size_t sentences = 0, longest = 0, partial_rows = 0, segs = 0, multis = 0;
  const FbSegment* seg = nullptr;
  const FbMulti* multi = nullptr;
  FbScan scan{};  // the sentences whose recursions run as a scan (their segments come first in seg)
};

/// The device arrays one chunk's kernels read: the resident corpus's (CudaBackend::arrays), or a
/// streamed chunk's copy in a stream buffer (chunk-local sentence, token and item ids).
struct CorpusArrays {
  const std::size_t *sent_off = nullptr, *state_off = nullptr, *edge_off = nullptr;  // edge_off null: no edges
  const std::uint32_t *state_ids = nullptr, *edge_ids = nullptr, *labels = nullptr;
  const double *state_vals = nullptr, *edge_vals = nullptr;  // null: binary attributes
  int* token_slot = nullptr;                                  // resident only
  const std::uint32_t *st_tok = nullptr, *et_tok = nullptr;  // the transposes
  const double *st_val = nullptr, *et_val = nullptr;
  const GatherSegments *st_plan = nullptr, *et_plan = nullptr;
  GatherChunk st_own, et_own;  // a streamed chunk's own segments (seg_id set), else unused
  ChunkView ch{};
  FbWork fb;
  std::size_t t_lo = 0;  // the chunk's first token (consecutive sentences), in these arrays' ids
  bool streamed = false;
};

/// One chunk of a streamed corpus: sentences [first, first + n), rows tokens from `token`, and
/// its arrays in each typed region of the pinned copy (element offsets: the region starts at z0,
/// u0, d0, g0, m0 there and at 0 in a stream buffer; the named fields are offsets in the region).
struct StreamChunk {
  std::size_t first = 0, n = 0, rows = 0, token = 0;
  std::size_t z0 = 0, nz = 0, u0 = 0, nu = 0, d0 = 0, nd = 0, g0 = 0, ng = 0, m0 = 0, nm = 0;
  // size_t: sentence, state and edge offsets (chunk-local), the rows' slots, the gathers' ranges
  std::size_t sent_off = 0, state_off = 0, edge_off = 0, slots = 0, st_range = 0, et_range = 0;
  // uint32: items, labels, the launch order, sentence ids (0..n−1), occurrences' tokens, segments
  std::size_t state_ids = 0, edge_ids = 0, labels = 0, order = 0, sent = 0, st_tok = 0, et_tok = 0;
  std::size_t st_seg = 0, et_seg = 0, st_segments = 0, et_segments = 0;
  std::size_t state_vals = 0, edge_vals = 0, st_val = 0, et_val = 0;  // double
  std::size_t longest = 0, partial_rows = 0;  // the split forward-backward's plan (ng, nm: its lists)
  FbScan scan{};
};

/// The device buffers of one half of the double buffering: a chunk's regions.
struct StreamSlot {
  DeviceBuffer<std::size_t> z;
  DeviceBuffer<std::uint32_t> u;
  DeviceBuffer<double> d;
  DeviceBuffer<FbSegment> g;
  DeviceBuffer<FbMulti> m;
};

/// A streamed corpus (see "Streaming" above): the chunks' arrays in pinned host memory, made once
/// at upload with the chunk plan of every whole-corpus pass, two device slots, and the events that
/// order the copy stream and the compute stream.
struct CorpusStream {
  std::vector<StreamChunk> chunks;
  PinnedBuffer<std::size_t> z;
  PinnedBuffer<std::uint32_t> u;
  PinnedBuffer<double> d;
  PinnedBuffer<FbSegment> g;
  PinnedBuffer<FbMulti> m;
  PinnedBuffer<double> losses;  // [S] the pass's per-sentence losses (read once, after the pass)
  StreamSlot slot[2];
  cudaEvent_t copied[2] = {nullptr, nullptr}, consumed[2] = {nullptr, nullptr};
  bool state_vals = false, edge_vals = false, edges = false;
  std::size_t max_rows = 0;
  std::size_t device_bytes = 0, pinned_bytes = 0;  // the figures (slots and plans; the pinned copy)
  // The regions' totals (the pinned arrays) and largest chunks' (the slots), in elements.
  std::size_t z_total = 0, u_total = 0, d_total = 0, g_total = 0, m_total = 0;
  std::size_t z_max = 0, u_max = 0, d_max = 0, g_max = 0, m_max = 0;
  CorpusStream();
  ~CorpusStream();
  CorpusStream(const CorpusStream&) = delete;
  CorpusStream& operator=(const CorpusStream&) = delete;
};

/// What a stream's chunks are cut from at upload (upload_streamed): per gather side (state, edge)
/// the transposed occurrences (token order within an attribute), their values (empty: binary) and
/// the plan's segments' ranges (kept on the host); the sentence ids 0..S−1 (the chunks' spans) and
/// each token's chunk.
struct StreamSources {
  const std::vector<std::uint32_t>* tok[2];
  const std::vector<double>* val[2];
  std::vector<std::size_t> ranges[2];
  std::vector<std::uint32_t> ids, chunk_of;
};

/// The budget a stream is cut to (the refusal's figures): the gather plans, the workspace, the
/// device memory left to the corpus, and the bytes one slot may take.
struct StreamBudget {
  std::size_t plans = 0, workspace = 0, budget = 0, slot_cap = 0;
};

}  // namespace crfx::cuda::detail
