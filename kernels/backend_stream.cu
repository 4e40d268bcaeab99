// crfx — CudaBackend (cuda_backend.cuh): a corpus larger than the device, streamed. At upload the
// corpus is cut into a fixed plan of chunks of whole sentences (the workspace's, as a resident
// corpus's chunks, and a stream slot's size), each chunk's arrays made chunk-local and laid out in
// pinned host memory; a whole-corpus pass copies chunk k + 1 on the copy stream while chunk k
// computes, into the other of two device slots, ordered by events.
//
// Streaming: a corpus whose copy and minimal workspace do not fit in the
// device memory left to it — free memory, or CudaBackendConfig::max_device_memory /
// set_memory_limits' limit, less what the run's vectors will take — is not uploaded but streamed.
// At upload, the chunks of a whole-corpus pass are fixed: whole sentences within the workspace
// (plan()'s cut, so that a resident corpus with the same max_chunk_tokens is cut alike), within
// a slot (half of what the workspace and the resident gather plans leave of the budget — all of
// it after set_memory_limits reserved the run's vectors, else half of it, as a resident workspace
// leaves half) and, without edge features, within kPointwiseBytes of a pointwise loss's
// per-position pairwise marginals (a resident pass of such a loss cuts so). Each chunk's arrays are
// made chunk-local (sentence, token and item ids from 0) and laid out in five typed regions of
// pinned host memory: its CSR slices, labels, plan (slots, launch order, the split
// forward-backward's work list) and its own transposes — the occurrences of its tokens, in the
// plan's order, with the gather segments it touches (GatherChunk::seg_id, seg_off: each the
// resident segment restricted to the chunk). A pass queues the copies of chunks 0 and 1 on the
// copy stream, then per chunk k: the compute stream waits for copied[k % 2], runs the chunk's
// kernels (the same as a resident chunk's, reading CorpusArrays), records consumed[k % 2], and the
// copy stream, after waiting for that event, copies chunk k + 2 into the slot. evaluate() copies
// each chunk's losses into pinned memory and waits once a pass (tests/emu/test_pass_shape.cpp);
// viterbi and marginals wait a chunk, as resident. The gathers zero the multi-segment
// attributes' partial rows and marks first (a chunk writes only its own segments'), so every sum
// has the resident order: streamed results are bitwise the resident ones cut into the same chunks
// (tests/gpu/test_cuda_stream.cpp). Only whole-corpus passes stream; what needs the corpus on the
// device (SAG's state, span plans, n-best, a pass over part of it) is refused, saying so, and a
// pinned copy past the host memory (or CudaBackendConfig::max_host_memory) is refused with figures.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"

namespace crfx::cuda::detail {

CorpusStream::CorpusStream() {
  for (int i = 0; i < 2; ++i) {
    CRFX_CUDA_CHECK(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
    CRFX_CUDA_CHECK(cudaEventCreateWithFlags(&consumed[i], cudaEventDisableTiming));
  }
}

CorpusStream::~CorpusStream() {
  for (int i = 0; i < 2; ++i) {
    if (copied[i]) cudaEventDestroy(copied[i]);
    if (consumed[i]) cudaEventDestroy(consumed[i]);
  }
}

namespace {

/// Bytes of a gather plan on the device without its ranges (a streamed corpus's chunks carry
/// their own).
std::size_t plan_bytes(const GatherSegments& p) {
  return p.segments * (sizeof(std::uint32_t) + sizeof(std::size_t) + 1) +
         p.multi * (sizeof(std::uint32_t) + 2 * sizeof(std::size_t)) + p.partials * sizeof(double);
}

/// A chunk's element counts per region (StreamChunk's offsets laid out from them).
struct ChunkCounts {
  std::size_t state_items = 0, edge_items = 0, st_occ = 0, et_occ = 0, st_segs = 0, et_segs = 0;
};

/// Walks the side's segments in order, giving each occurrence to its chunk (chunk_of its token):
/// counts (fill false) or writes (fill true) each chunk's occurrences, chunk-local tokens, and its
/// own segments — their plan ids and their ranges in its occurrences. The chunk's occurrences stay
/// in the plan's order, so each own segment is the plan's restricted to the chunk.
void cut_side(const StreamSources& src, bool edge, std::vector<StreamChunk>& chunks, std::vector<ChunkCounts>& counts,
              bool fill, std::size_t* z, std::uint32_t* u, double* d) {
  const std::size_t K = chunks.size();
  std::vector<std::size_t> last(K, ~std::size_t(0)), occ(K, 0), segs(K, 0);
  const std::vector<std::size_t>& off = src.ranges[edge];
  const std::vector<std::uint32_t>& tok = *src.tok[edge];
  const std::vector<double>& val = *src.val[edge];
  const std::vector<std::uint32_t>& chunk_of = src.chunk_of;
  const bool vals = !val.empty();
  for (std::size_t sg = 0; sg + 1 < off.size(); ++sg)
    for (std::size_t q = off[sg]; q < off[sg + 1]; ++q) {
      const std::uint32_t k = chunk_of[tok[q]];
      StreamChunk& ch = chunks[k];
      if (last[k] != sg) {
        last[k] = sg;
        if (fill) {
          u[ch.u0 + (edge ? ch.et_seg : ch.st_seg) + segs[k]] = std::uint32_t(sg);
          z[ch.z0 + (edge ? ch.et_range : ch.st_range) + segs[k]] = occ[k];
        }
        ++segs[k];
      }
      if (fill) {
        u[ch.u0 + (edge ? ch.et_tok : ch.st_tok) + occ[k]] = std::uint32_t(tok[q] - ch.token);
        if (vals) d[ch.d0 + (edge ? ch.et_val : ch.st_val) + occ[k]] = val[q];
      }
      ++occ[k];
    }
  for (std::size_t k = 0; k < K; ++k) {
    if (fill) z[chunks[k].z0 + (edge ? chunks[k].et_range : chunks[k].st_range) + segs[k]] = occ[k];
    (edge ? counts[k].et_occ : counts[k].st_occ) = occ[k];
    (edge ? counts[k].et_segs : counts[k].st_segs) = segs[k];
  }
}

}  // namespace

// ---- sizing --------------------------------------------------------------------------------

std::size_t CudaBackend::device_budget(std::size_t free_b) const {
  const std::size_t limit = limit_ ? limit_ : cfg_.max_device_memory;
  const std::size_t avail = limit ? std::min(free_b, limit) : free_b;
  return avail - std::min(avail, reserved_);
}

bool CudaBackend::streams(std::size_t corpus_bytes, std::size_t max_len, std::size_t free_b) const {
  if (cfg_.always_stream) return true;
  const std::size_t need_min = std::max<std::size_t>(1, max_len) * row_bytes(dims_.E > 0) + sentence_bytes();
  return corpus_bytes + need_min > device_budget(free_b);
}

void CudaBackend::stream_sizes(const Corpus& c, std::size_t max_len, std::size_t free_b, std::size_t& resident,
                               std::size_t& workspace, bool pointwise) const {
  const bool edges = dims_.E > 0 && c.edge_offsets.size() == c.num_tokens() + 1;
  const std::size_t plans = GatherSegments::bytes_bound(dims_.A, c.state_ids.size(), max_state_row_) +
                            (edges ? GatherSegments::bytes_bound(dims_.E, c.edge_ids.size(), max_edge_row_) : 0);
  const std::size_t budget = stream_budget(free_b), usable = budget > plans ? budget - plans : 0;
  std::size_t rows = 0, sents = 0;
  workspace_caps(c.num_tokens(), c.num_sentences(), max_len, usable, rows, sents);
  workspace = rows * row_bytes(dims_.E > 0) + sents * sentence_bytes();
  // The two slots take what the workspace leaves, or the whole copy where that is less.
  const std::size_t slot = usable > workspace ? (usable - workspace) / 2 : 0;
  resident = plans + 2 * std::min(slot, device_corpus_bytes(c, edges, c.edge_ids.size()));
  if (pointwise) {  // pt_pair_ for the largest chunk (pointwise_rows), beyond the budget the slots were cut to
    const std::size_t LL = std::size_t(dims_.L) * dims_.L;
    workspace += std::min(rows, std::max(max_len, kPointwiseBytes / (LL * sizeof(double)))) * LL * sizeof(double);
  }
}

std::string CudaBackend::corpus_note(const BackendCorpus& bc) const {
  const CudaCorpus& c = C(bc);
  if (!c.stream) return "";
  return "the corpus is streamed from pinned host memory (" + fmt_mib(c.stream->pinned_bytes) + ") in " +
         std::to_string(c.stream->chunks.size()) + " chunks, " + fmt_mib(c.stream->device_bytes) +
         " of device memory for two of them and the gather plans";
}

void CudaBackend::require_resident(const CudaCorpus& c, const char* what) const {
  if (!c.stream || !what) return;
  throw Error(std::string("CUDA backend: ") + what + " needs the whole corpus on the device, but this one is "
              "streamed from host memory in " + std::to_string(c.stream->chunks.size()) + " chunks (" +
              fmt_mib(c.stream->pinned_bytes) + " pinned; " + fmt_mib(c.stream->device_bytes) +
              " of device memory for the stream); give the run more device memory (--max-device-memory), "
              "train with a batch trainer (lbfgs, owlqn, rprop, …: whole-corpus passes stream), or use --device cpu");
}

// ---- upload ----------------------------------------------------------------------------------

void CudaBackend::upload_streamed(CudaCorpus& up, const std::vector<std::size_t>& st_off,
                                  const std::vector<std::uint32_t>& st_tok, const std::vector<double>& st_val,
                                  const std::vector<std::size_t>& et_off, const std::vector<std::uint32_t>& et_tok,
                                  const std::vector<double>& et_val, bool edges) {
  const Corpus& c = up.host;
  StreamSources src{{&st_tok, &et_tok}, {&st_val, &et_val}, {}, {}, {}};
  // The gather plans stay resident (but their ranges: each chunk has its own).
  const WeightGroups hg = dims_.groups();
  up.st_plan.build(dims_.A, st_off, [&](std::size_t a) { return hg.size(std::uint32_t(a)); }, stream_, &src.ranges[0]);
  if (edges)
    up.et_plan.build(dims_.E, et_off, [&](std::size_t e) { return hg.size(hg.edge(std::uint32_t(e))); }, stream_,
                     &src.ranges[1]);
  StreamBudget b;
  b.plans = plan_bytes(up.st_plan) + (edges ? plan_bytes(up.et_plan) : 0);
  std::size_t free_b = 0, total_b = 0;
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  b.budget = stream_budget(free_b + b.plans);  // the plans are part of the budget
  const std::size_t usable = b.budget > b.plans ? b.budget - b.plans : 0;
  // The workspace: at most half of what the plans leave (size_workspace refuses a sentence that
  // cannot fit, with the figures); the two slots share the rest.
  workspace_cap_ = std::max<std::size_t>(usable, 1);
  try {
    size_workspace(up);
  } catch (...) {
    workspace_cap_ = 0;
    throw;
  }
  workspace_cap_ = 0;
  b.workspace = rows_cap_ * row_bytes(dims_.E > 0) + sents_cap_ * sentence_bytes();
  b.slot_cap = usable > b.workspace ? (usable - b.workspace) / 2 : 0;
  auto stream = std::make_unique<CorpusStream>();
  CorpusStream& st = *stream;
  st.edges = edges;
  st.state_vals = !c.state_values.empty();
  st.edge_vals = edges && !c.edge_values.empty();
  src.ids.resize(up.S);
  std::iota(src.ids.begin(), src.ids.end(), 0u);
  src.chunk_of.resize(up.N);
  for (int attempt = 0;; ++attempt) {
    stream_cut(up, st, src, b);
    const std::size_t slot = stream_layout(up, st, src);
    // Each region's largest chunk may be another: where the slots' sum of maxima passes the
    // share, the chunks are cut smaller (rarely more than once).
    if (slot <= b.slot_cap || attempt == 3) {
      st.device_bytes = b.plans + 2 * slot;
      break;
    }
    b.slot_cap = std::size_t(double(b.slot_cap) * (double(b.slot_cap) / double(slot)) * 0.95);
  }
  // The pinned copy: refused with the figures where the host has not the memory for it.
  std::size_t host = host_memory_available();
  const std::size_t host_limit = host_limit_ ? host_limit_ : cfg_.max_host_memory;
  if (host_limit && (host == 0 || host_limit < host)) host = host_limit;
  if (host && st.pinned_bytes > host)
    throw Error("CUDA backend: the corpus's copy (" + fmt_mib(device_corpus_bytes(c, edges, et_tok.size())) +
                ") does not fit in the " + fmt_mib(b.budget) + " of device memory left to it on " + name_ +
                ", and streaming it needs " + fmt_mib(st.pinned_bytes) + " of pinned host memory; only " +
                fmt_mib(host) + (host_limit && host == host_limit ? " allowed (the limit given)" : " available") +
                "; use a machine with more memory, or --device cpu");
  stream_fill(up, st, src);
  // The split forward-backward's partial pair sums, for the largest chunk: no allocation in a pass.
  std::size_t partial_rows = 0;
  for (const StreamChunk& ch : st.chunks) partial_rows = std::max(partial_rows, ch.partial_rows);
  if (dims_.L <= 32) reserve_device(seg_pair_, partial_rows * dims_.L * dims_.L);
  if (!copy_stream_) CRFX_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  up.stream = std::move(stream);
}

void CudaBackend::stream_cut(const CudaCorpus& up, CorpusStream& st, StreamSources& src, const StreamBudget& b) {
  const Corpus& c = up.host;
  const bool edges = st.edges;
  // A sentence's bytes in a slot, a bound (its own segments counted as its occurrences).
  auto sentence_cost = [&](std::size_t sid) {
    const std::size_t t0 = c.sentence_offsets[sid], t1 = c.sentence_offsets[sid + 1], T = t1 - t0;
    const std::size_t is = c.state_offsets[t1] - c.state_offsets[t0];
    const std::size_t ie = edges ? c.edge_offsets[t1] - c.edge_offsets[t0] : 0;
    const std::size_t z = 2 * T + 4 + is + ie, u = 3 * is + 3 * ie + T + 2;
    const std::size_t d = (st.state_vals ? 2 * is : 0) + (st.edge_vals ? 2 * ie : 0);
    return z * 8 + u * 4 + d * 8 + (T / kFbSegment + 2) * sizeof(FbSegment) + sizeof(FbMulti);
  };
  // Whole sentences while the workspace (as plan() cuts a resident pass) and the slot hold them,
  // and (without edge features) while a pointwise loss's per-position pairwise marginals fit in
  // kPointwiseBytes, as a resident pass of such a loss cuts its chunks (pointwise_rows).
  const std::size_t LL = std::size_t(dims_.L) * dims_.L;
  const std::size_t pt_rows = edges ? up.N + 1 : std::max<std::size_t>(up.max_len, kPointwiseBytes / (LL * sizeof(double)));
  st.chunks.clear();
  for (std::size_t first = 0; first < up.S;) {
    StreamChunk ch;
    ch.first = first;
    ch.token = c.sentence_offsets[first];
    std::size_t bytes = 64, e = first;
    while (e < up.S && e - first < sents_cap_) {
      const std::size_t T = c.length(e), cost = sentence_cost(e);
      if (ch.rows + T > rows_cap_ || bytes + cost > b.slot_cap) {
        if (e == first)
          throw Error("CUDA backend: streaming the corpus, sentence " + std::to_string(e) + " (" + std::to_string(T) +
                      " tokens) needs " + fmt_mib(2 * (cost + 64) + b.workspace + b.plans) +
                      " of device memory (two stream slots, the workspace, the gather plans); only " +
                      fmt_mib(b.budget) + " is available to the corpus on " + name_ +
                      "; give it more (--max-device-memory) or use --device cpu");
        break;
      }
      if (ch.rows + T > pt_rows && e > first) break;
      ch.rows += T;
      bytes += cost;
      ++e;
    }
    ch.n = e - first;
    for (std::size_t t = ch.token; t < ch.token + ch.rows; ++t) src.chunk_of[t] = std::uint32_t(st.chunks.size());
    st.chunks.push_back(ch);
    first = e;
  }
}

std::size_t CudaBackend::stream_layout(CudaCorpus& up, CorpusStream& st, StreamSources& src) {
  const Corpus& c = up.host;
  const bool edges = st.edges;
  std::vector<ChunkCounts> counts(st.chunks.size());
  cut_side(src, false, st.chunks, counts, false, nullptr, nullptr, nullptr);
  if (edges) cut_side(src, true, st.chunks, counts, false, nullptr, nullptr, nullptr);
  std::size_t zt = 0, ut = 0, dt = 0, gt = 0, mt = 0, zmax = 0, umax = 0, dmax = 0, gmax = 0, mmax = 0;
  st.max_rows = 0;
  for (std::size_t k = 0; k < st.chunks.size(); ++k) {
    StreamChunk& ch = st.chunks[k];
    const ChunkCounts& n = counts[k];
    const std::size_t t0 = ch.token, t1 = ch.token + ch.rows;
    const std::size_t is = c.state_offsets[t1] - c.state_offsets[t0];
    const std::size_t ie = edges ? c.edge_offsets[t1] - c.edge_offsets[t0] : 0;
    plan(up, SentenceSpan{src.ids.data() + ch.first, ch.n}, 0);  // the chunk as a resident pass plans it
    std::size_t z = 0, u = 0, d = 0;
    auto at = [](std::size_t& field, std::size_t& cursor, std::size_t count) { field = cursor, cursor += count; };
    at(ch.sent_off, z, ch.n + 1), at(ch.state_off, z, ch.rows + 1), at(ch.edge_off, z, edges ? ch.rows + 1 : 0);
    at(ch.slots, z, ch.n + 1), at(ch.st_range, z, n.st_segs + 1), at(ch.et_range, z, edges ? n.et_segs + 1 : 0);
    at(ch.state_ids, u, is), at(ch.edge_ids, u, ie), at(ch.labels, u, ch.rows), at(ch.order, u, ch.n);
    at(ch.sent, u, ch.n), at(ch.st_tok, u, n.st_occ), at(ch.et_tok, u, n.et_occ), at(ch.st_seg, u, n.st_segs);
    at(ch.et_seg, u, n.et_segs);
    at(ch.state_vals, d, st.state_vals ? is : 0), at(ch.edge_vals, d, st.edge_vals ? ie : 0);
    at(ch.st_val, d, st.state_vals ? n.st_occ : 0), at(ch.et_val, d, st.edge_vals ? n.et_occ : 0);
    ch.st_segments = n.st_segs;
    ch.et_segments = n.et_segs;
    ch.longest = h_longest_;
    ch.partial_rows = h_partial_rows_;
    ch.scan = h_scan_;
    ch.z0 = zt, ch.nz = z, zt += z, zmax = std::max(zmax, z);
    ch.u0 = ut, ch.nu = u, ut += u, umax = std::max(umax, u);
    ch.d0 = dt, ch.nd = d, dt += d, dmax = std::max(dmax, d);
    ch.g0 = gt, ch.ng = h_seg_.size(), gt += ch.ng, gmax = std::max(gmax, ch.ng);
    ch.m0 = mt, ch.nm = h_multi_.size(), mt += ch.nm, mmax = std::max(mmax, ch.nm);
    st.max_rows = std::max(st.max_rows, ch.rows);
  }
  plan_key_.corpus = 0;  // the chunk plans above are not a resident pass's
  plan_on_device_ = false;
  st.pinned_bytes = zt * 8 + ut * 4 + dt * 8 + gt * sizeof(FbSegment) + mt * sizeof(FbMulti) + up.S * sizeof(double);
  st.z_total = zt, st.u_total = ut, st.d_total = dt, st.g_total = gt, st.m_total = mt;
  st.z_max = zmax, st.u_max = umax, st.d_max = dmax, st.g_max = gmax, st.m_max = mmax;
  return zmax * 8 + umax * 4 + dmax * 8 + gmax * sizeof(FbSegment) + mmax * sizeof(FbMulti);
}

void CudaBackend::stream_fill(CudaCorpus& up, CorpusStream& st, StreamSources& src) {
  const Corpus& c = up.host;
  const bool edges = st.edges;
  for (StreamSlot& sl : st.slot) {
    sl.z.resize(st.z_max);
    sl.u.resize(st.u_max);
    sl.d.resize(st.d_max);
    sl.g.resize(st.g_max);
    sl.m.resize(st.m_max);
  }
  st.z.resize(st.z_total);
  st.u.resize(st.u_total);
  st.d.resize(st.d_total);
  st.g.resize(st.g_total);
  st.m.resize(st.m_total);
  st.losses.resize(up.S);
  // Each chunk's slices of the corpus (offsets made chunk-local), its plan, its transposes.
  std::vector<ChunkCounts> counts(st.chunks.size());
  cut_side(src, false, st.chunks, counts, true, st.z.get(), st.u.get(), st.d.get());
  if (edges) cut_side(src, true, st.chunks, counts, true, st.z.get(), st.u.get(), st.d.get());
  for (StreamChunk& ch : st.chunks) {
    std::size_t* z = st.z.get() + ch.z0;
    std::uint32_t* u = st.u.get() + ch.u0;
    double* d = st.d.get() + ch.d0;
    const std::size_t t0 = ch.token, t1 = ch.token + ch.rows;
    const std::size_t s0 = c.state_offsets[t0], e0 = edges ? c.edge_offsets[t0] : 0;
    for (std::size_t i = 0; i <= ch.n; ++i) z[ch.sent_off + i] = c.sentence_offsets[ch.first + i] - t0;
    for (std::size_t t = t0; t <= t1; ++t) z[ch.state_off + t - t0] = c.state_offsets[t] - s0;
    if (edges)
      for (std::size_t t = t0; t <= t1; ++t) z[ch.edge_off + t - t0] = c.edge_offsets[t] - e0;
    const std::size_t is = c.state_offsets[t1] - s0, ie = edges ? c.edge_offsets[t1] - e0 : 0;
    std::copy_n(c.state_ids.begin() + std::ptrdiff_t(s0), is, u + ch.state_ids);
    if (edges) std::copy_n(c.edge_ids.begin() + std::ptrdiff_t(e0), ie, u + ch.edge_ids);
    std::copy_n(c.labels.begin() + std::ptrdiff_t(t0), ch.rows, u + ch.labels);
    if (st.state_vals) std::copy_n(c.state_values.begin() + std::ptrdiff_t(s0), is, d + ch.state_vals);
    if (st.edge_vals) std::copy_n(c.edge_values.begin() + std::ptrdiff_t(e0), ie, d + ch.edge_vals);
    plan(up, SentenceSpan{src.ids.data() + ch.first, ch.n}, 0);  // the chunk as a resident pass plans it
    std::copy(h_slots_.begin(), h_slots_.end(), z + ch.slots);
    std::copy(h_order_.begin(), h_order_.end(), u + ch.order);
    std::iota(u + ch.sent, u + ch.sent + ch.n, 0u);  // chunk-local sentence ids
    std::copy(h_seg_.begin(), h_seg_.end(), st.g.get() + ch.g0);
    std::copy(h_multi_.begin(), h_multi_.end(), st.m.get() + ch.m0);
  }
  plan_key_.corpus = 0;
  plan_on_device_ = false;
}

// ---- a pass --------------------------------------------------------------------------------

void CudaBackend::stream_copy(const CudaCorpus& c, std::size_t k) {
  CorpusStream& st = *c.stream;
  const StreamChunk& ch = st.chunks[k];
  StreamSlot& sl = st.slot[k % 2];
  // The slot's previous chunk must be done with before it is overwritten.
  CRFX_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, st.consumed[k % 2], 0));
  auto copy = [&](auto* dst, const auto* src, std::size_t n) {
    if (n) CRFX_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(*src), cudaMemcpyHostToDevice, copy_stream_));
  };
  copy(sl.z.get(), st.z.get() + ch.z0, ch.nz);
  copy(sl.u.get(), st.u.get() + ch.u0, ch.nu);
  copy(sl.d.get(), st.d.get() + ch.d0, ch.nd);
  copy(sl.g.get(), st.g.get() + ch.g0, ch.ng);
  copy(sl.m.get(), st.m.get() + ch.m0, ch.nm);
  CRFX_CUDA_CHECK(cudaEventRecord(st.copied[k % 2], copy_stream_));
}

void CudaBackend::stream_begin(const CudaCorpus& c) {
  for (std::size_t k = 0; k < std::min<std::size_t>(2, c.stream->chunks.size()); ++k) stream_copy(c, k);
}

CorpusArrays CudaBackend::stream_chunk(const CudaCorpus& c, std::size_t k) {
  CorpusStream& st = *c.stream;
  const StreamChunk& ch = st.chunks[k];
  const StreamSlot& sl = st.slot[k % 2];
  CRFX_CUDA_CHECK(cudaStreamWaitEvent(stream_, st.copied[k % 2], 0));
  const std::size_t* z = sl.z.get();
  const std::uint32_t* u = sl.u.get();
  const double* d = sl.d.get();
  CorpusArrays a;
  a.streamed = true;
  a.sent_off = z + ch.sent_off;
  a.state_off = z + ch.state_off;
  a.edge_off = st.edges ? z + ch.edge_off : nullptr;
  a.state_ids = u + ch.state_ids;
  a.edge_ids = st.edges ? u + ch.edge_ids : nullptr;
  a.labels = u + ch.labels;
  a.state_vals = st.state_vals ? d + ch.state_vals : nullptr;
  a.edge_vals = st.edge_vals ? d + ch.edge_vals : nullptr;
  a.st_tok = u + ch.st_tok;
  a.et_tok = st.edges ? u + ch.et_tok : nullptr;
  a.st_val = st.state_vals ? d + ch.st_val : nullptr;
  a.et_val = st.edge_vals ? d + ch.et_val : nullptr;
  a.st_plan = &c.st_plan;
  a.et_plan = &c.et_plan;
  a.st_own.seg_id = u + ch.st_seg;
  a.st_own.seg_off = z + ch.st_range;
  a.st_own.segments = ch.st_segments;
  a.et_own.seg_id = u + ch.et_seg;
  a.et_own.seg_off = z + ch.et_range;
  a.et_own.segments = ch.et_segments;
  a.ch = {u + ch.sent, z + ch.slots, u + ch.order};
  a.fb = {ch.n, ch.longest, ch.partial_rows, ch.ng, ch.nm, sl.g.get(), sl.m.get(), ch.scan};
  a.t_lo = 0;
  return a;
}

void CudaBackend::stream_done(const CudaCorpus& c, std::size_t k) {
  CorpusStream& st = *c.stream;
  CRFX_CUDA_CHECK(cudaEventRecord(st.consumed[k % 2], stream_));
  if (k + 2 < st.chunks.size()) stream_copy(c, k + 2);
}

}  // namespace crfx::cuda::detail
