// crfx — the CUDA backend: every Backend primitive on one GPU, in double precision. This header
// declares the backend (CudaBackend) and its objects; host code reaches it only through
// kernels/cuda_api.hpp (make_cuda_backend).
//
// Files:
//   cuda_backend.cuh     this: the design notes below, the backend objects and the class
//   backend.cu           construction, upload, workspace sizing, chunk planning and the chunk
//                        front (prepare, fill_rows, emissions, edge matrices); make_cuda_backend
//   backend_vectors.cu   vectors: allocation, host copies, swap (the algebra: element rules)
//   backend_rules.cu     apply_rule: the element rules, the vector algebra's and the optimizers'
//   backend_chain.cu     evaluate, viterbi, viterbi_nbest, marginals; the gradient gathers
//   cuda_sag.cuh         SAG / SAGA's device state and the span plans (SpanPlan, SentencePlans)
//   backend_sag.cu       SAG / SAGA
//   backend_plans.cu     span plans (SAG and evaluate_sparse), every sentence's made once
//   backend_sparse.cu    the stochastic trainers' sparse primitives
//   backend_perceptron.cu  ap's step on the device (perceptron_kernels.cu: Δ, the updates; run_kernels.cu: runs)
//   backend_sgd_search.cu  sgd-l1's heuristic line search on the device (sgd_search_kernels.cu)
//   backend_stream.cu    a corpus larger than the device: its chunk plan, pinned copy and passes
//   corpus_stream.cuh    CorpusArrays (what a chunk's kernels read) and CorpusStream
//   chain_kernels.cu     fill_rows, reset_slots, emission, edge_matrix, prepare, forward_backward
//   fb_device.cuh        one sentence's forward-backward steps (fused and split kernels share them)
//   fb_split_kernels.cu  the split forward-backward: recursions, marginals by segment, pair sums
//   decode_kernels.cu    viterbi, viterbi_nbest
//   gather_kernels.cu    the segmented gather and its combine, trans_partial, trans_final
//   sag_kernels.cu       the sag_* kernels
//   vector_ops.cuh       map_kernel and its op structs, the deterministic reduction (templates)
//   common.cuh           constants, block helpers, ChunkView
//   device_buffer.cuh    DeviceBuffer<T> and the host-side memory helpers
//   launch.cuh           CRFX_LAUNCH, the one way kernels are launched (nvcc or the emulation)
// Each kernel file defines its kernels in an anonymous namespace and declares its host
// launchers (launch_*) and parameter structs in the .cuh of the same name: without relocatable
// device code a (non-template) kernel can only be launched from the file that defines it.
//
// The pipeline of one chunk of evaluate() (chain_kernels.cu, gather_kernels.cu; names after the
// maths):
//
//   span ──plan (host)──▶ chunk: sentences [begin, end), rows = their tokens in span order
//                      (a pass over the span of the pass before reuses the plan and its copies)
//     fill_rows        row → token, row has edge items, token → row (token_slot: gradient of a
//                      chunk whose sentences are not consecutive; else rows = a token range)
//     emissions        S [rows][L] = X·W                     (8/16/32 lanes per row, L ≤ 512)
//     edge_matrices    τ_t [rows][L][L] = τ + Σ_e x_e·W_e    (rows with edge items, E > 0)
//     forward_backward a warp per sentence (L ≤ 32, 4 a block) or warps per sentence, several
//                      a block sharing E where it fits (else a block each), threads over labels,
//                      longest sentences first (L ≤ 32 with a sentence of ≥ 128 positions:
//                      split, fb_split_kernels.cu — the recursions, ≥ 256 positions as a scan
//                      (fb_scan_kernels.cu), then the marginals a warp per 64 positions):
//                      log α, log Z, loss, log β, node marginals − 1(gold) [rows][L],
//                      Σ_t pairwise marginals − gold counts [sentences][L][L] (factored:
//                      (a(y')·E(y', y))·v(y), L exps a position; at L > 32 summed after the
//                      backward pass as E ⊙ Σ_t a_t v_tᵀ in registers), and at rows with edge items
//                      p_t(y', y) − 1(gold) written over τ_t
//     gather_state     g[a·L + y] += scale · Σ_{occurrences of a, token order} x · delta, a
//                      warp per segment of ≤ 256 occurrences, then the segments' partial rows
//                      combined in order (GatherSegments, gather_kernels.cuh)
//     gather_edge      the same for edge attributes over [L][L]
//     trans_partial /  transitions: Σ over sentences by a fixed two-level tree (trans_final)
//     reset_slots
//
// Weight layouts (crfx::WeightGroups, include/crfx/internal/corpus.hpp): dense, or sparse (observed
// pairs: each group's row lists its label / label-pair slots). A sparse layout's rows are
// uploaded once by the constructor and read through device_groups(); then W_a(y) above is
// W[find(a, y)] or 0 where the row has no weight (emissions, edge matrices: the same per-slot
// sums as the CPU), τ is the transition row scattered over zeros by prepare, the gathers and the
// transition tree write each weight of a row from its slot's column of the deltas, and the SAG
// kernels likewise. The dense paths keep their arithmetic and results.
//
// SAG / SAGA (seed 004) keep their state on the device: stored marginals, the lazy-step history
// and per-group stamps; one-sentence plans are made once (SentencePlans), the history appended by
// a kernel, and uniform sampling's steps queued with their scalars on the device (incremental_
// schedule), so a batch-1 epoch copies nothing per step and waits a few times (issue 37;
// tests/emu/test_stochastic_shape.cpp); the sag_* kernels are in sag_kernels.cu. ap's step —
// Viterbi, Δ over those plans, the updates gated by the path's mistakes — stays on the device at
// any batch size one chunk of 256 sentences holds (backend_perceptron.cu, perceptron_kernels.cu).
//
// Determinism: no floating-point atomics anywhere. Every sum has a fixed order: the gathers walk
// the transposed CSR (attribute → occurrences in token order, built once per corpus) in segments
// planned with it, with fixed butterflies and a fixed combine, the
// transition sum is a fixed-shape tree over sentences, per-sentence losses are added on the host
// in span order, and the vector reductions use cub::BlockReduce in a fixed grid whose shape
// depends only on the vector length, not on the GPU's SM count (cub::DeviceReduce's grid follows
// the SM count). So results are bitwise reproducible run to run for one build on one GPU model;
// the summation order is also the same on every GPU, but bitwise equality across GPU models or
// builds is not claimed: kernels are compiled per architecture, and nvcc's FMA contraction and
// math-library code may differ between them.
//
// Numerics: log space throughout. The forward and backward recursions use the max-shifted
// exp-space product of DESIGN.md (L exps + L² FMAs per position, E = exp(τ − τ_max)) and redo an
// entry exactly in log space (L exps) whenever its sum falls below kTiny, so extreme weights are
// handled exactly. Each position's α and β are stored shifted by that position's own maximum and
// the marginals are normalised per position, so their error does not grow with the sentence
// length (see fb_sentence in chain_kernels.cu). Pairwise marginals are computed entry by entry in log
// space (exact).
// Emissions and per-position edge matrices are accumulated with explicit round-to-nearest
// multiply and add (no FMA contraction), in the CPU's order, so that they are bitwise equal to
// the CPU's: Viterbi then makes the same choices on ties as the CPU (smallest label id).
//
// Precision: double throughout, the path checked against the CPU double reference. A float path
// would go in the emission and forward-backward kernels (float S, log α/β; double accumulators
// for log Z, losses and the gather sums), selected per backend; the gathers, tree sums and the
// vector algebra would stay double.
//
// Memory: the corpus (CSR, labels, offsets, no values for binary attributes; the transpose with
// ample memory at the first gradient, else at once) is uploaded once, into the arrays of the last
// corpus gone where they have room; one workspace arena, sized at upload from the corpus and the
// free memory, holds every per-chunk buffer. A span larger than the workspace is split
// into chunks of whole sentences; a single sentence that cannot fit raises crfx::Error with the
// amount of memory needed.
//
// Streaming: a corpus whose copy and minimal workspace do not fit in the device memory left to
// it is streamed from pinned host memory in fixed chunks (the design: backend_stream.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "batch_kernels.cuh"
#include "chain_kernels.cuh"
#include "common.cuh"
#include "corpus_stream.cuh"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "cuda_api.hpp"
#include "cuda_check.cuh"
#include "cuda_sag.cuh"
#include "decode_kernels.cuh"
#include "device_buffer.cuh"
#include "gather_kernels.cuh"
#include "sag_kernels.cuh"
#include "sgd_search_kernels.cuh"

namespace crfx::cuda::detail {

struct PerceptronRun;  // run_kernels.cuh
struct GradientRun;    // run_kernels.cuh

// ---- backend objects -------------------------------------------------------------------------

struct CudaVector final : Vector {
  CudaVector(const void* owner, std::size_t n) : owner(owner), buf(n) {}
  std::size_t size() const override { return buf.size(); }
  const void* owner;
  DeviceBuffer<double> buf;
};

/// A corpus's device arrays: the last gone corpus's serve the next upload (CudaBackend::spare_).
struct CorpusBuffers {
  DeviceBuffer<std::size_t> sent_off, state_off, edge_off;
  DeviceBuffer<std::uint32_t> state_ids, edge_ids, labels;
  DeviceBuffer<double> state_vals, edge_vals;
  DeviceBuffer<int> token_slot;  // [N] row of the token in the current chunk, −1 otherwise
};

struct CudaCorpus final : BackendCorpus, CorpusBuffers {
  ~CudaCorpus() override { if (auto s = spare.lock()) *s = std::move(static_cast<CorpusBuffers&>(*this)); }
  const void* owner = nullptr;
  std::uint64_t serial = 0;  // unique per upload in the process (the chunk plan's cache key)
  Corpus host;  // host copy: support sets, feature differences, SAG span plans
  std::size_t S = 0, N = 0, max_len = 0;
  std::vector<std::size_t> h_sent_off;  // [S+1] host copy (chunk planning)
  std::vector<std::uint8_t> h_labeled;  // [S] every token has a gold label
  std::weak_ptr<CorpusBuffers> spare;   // where the arrays go (the backend's spare_), if set
  // Transposes (attribute → occurrences in token order; edge items at t = 0 are left out: no
  // edge at the first position, as on the CPU), cut into the gathers' segments: only gradients
  // read them, built at upload or on the first gradient (CudaBackend::gathers).
  mutable DeviceBuffer<std::uint32_t> st_tok, et_tok;
  mutable DeviceBuffer<double> st_val, et_val;
  mutable GatherSegments st_plan, et_plan;
  mutable bool gathers_built = false;
  // Streamed (the copy does not fit): the arrays above other than the gather plans (without
  // their seg_off) are empty; the chunks come from here.
  std::unique_ptr<CorpusStream> stream;
  std::size_t num_sentences() const override { return S; }
  std::size_t num_tokens() const override { return N; }
};

/// A sparse vector on the device: nnz (index, value) pairs, indices strictly increasing;
/// grow-only capacity (no allocation once the largest support has been seen).
struct CudaSparse final : SparseVector {
  explicit CudaSparse(const void* owner) : owner(owner) {}
  std::size_t nnz() const override { return n; }
  void reserve(std::size_t m) {
    const std::size_t have = std::min(index.size(), value.size());
    if (m <= have) return;
    // Each checked on its own: a resize that throws leaves its buffer empty for the next call.
    const std::size_t cap = std::max(m, 2 * have);
    if (index.size() < cap) index.resize(cap);
    if (value.size() < cap) value.resize(cap);
  }
  const void* owner;
  std::size_t n = 0;
  std::size_t end = 0;  // last index + 1 (0 when empty), for the bounds check on the host
  DeviceBuffer<std::size_t> index;
  DeviceBuffer<double> value;
};

// ---- the backend ---------------------------------------------------------------------------

class CudaBackend final : public Backend, public IncrementalGradients, public SparseGradients {
 public:
  // backend.cu
  CudaBackend(const Dims& dims, const CudaBackendConfig& cfg);
  ~CudaBackend() override;
  std::string name() const override;
  unsigned host_threads() const override {
    return cfg_.host_threads ? cfg_.host_threads : std::max(1u, std::thread::hardware_concurrency());
  }
  IncrementalGradients* incremental() override { return this; }
  SparseGradients* sparse() override { return this; }
  /// Free device memory (cudaMemGetInfo), and the bytes upload(c) copies to the device (a bound:
  /// edge items at a sentence's first token, which the upload drops, counted).
  std::size_t memory_available() override;
  std::size_t upload_bytes(const Corpus& c) const override;
  std::size_t workspace_bytes(const Corpus& c, SequenceLoss loss = SequenceLoss::seq_log) const override;
  void set_memory_limits(std::size_t limit, std::size_t reserved, std::size_t host_limit) override;
  std::string corpus_note(const BackendCorpus& c) const override;
  /// Tests: whether `c` is streamed, and into how many chunks (0: resident).
  std::size_t stream_chunks(const BackendCorpus& c) const {
    const CudaCorpus& cc = C(c);
    return cc.stream ? cc.stream->chunks.size() : 0;
  }
  /// For the NCCL sum (kernels/nccl/nccl_sum.cu): a vector's device memory, the backend's stream
  /// and device, and a wait for the stream.
  double* device_data(Vector& x) { return P(x); }
  cudaStream_t stream() const { return stream_; }
  int device() const { return cfg_.device; }
  void synchronize() { sync(); }

  // ---- data (backend.cu) -------------------------------------------------------------------
  BackendCorpusPtr upload(const Corpus& c) override;
  BackendCorpusPtr upload(Corpus&& c) override;
  const Corpus* host_corpus(const BackendCorpus& c) const override { return &C(c).host; }

  // ---- vectors (backend_vectors.cu; their algebra: Backend's rules, run by apply_rule) ------
  VectorPtr vector(std::size_t n) override;
  void write(Vector& dst, const double* src) override;
  void read(const Vector& src, double* dst) override;
  void swap(Vector& x, Vector& y) override;

  // ---- element rules (backend_rules.cu) -----------------------------------------------------
  double apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over,
                    bool sum) override;

  // ---- batch primitives (backend_chain.cu) -------------------------------------------------
  double evaluate(const BackendCorpus& bc, const Vector& w, SentenceSpan span, Vector* grad,
                  double scale, SequenceLoss loss = SequenceLoss::seq_log) override;
  void viterbi(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::uint32_t* labels,
               double* best_scores) override;
  void viterbi_nbest(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::size_t n,
                     std::uint32_t* labels, double* path_scores) override;
  void marginals(const BackendCorpus& bc, const Vector& w, SentenceSpan span, double* node_marginals,
                 double* log_z) override;

  // ---- SAG / SAGA (seed 004): stored marginals and lazy steps on the device (backend_sag.cu) -
  // The host plans each span (touched groups and, per group, its occurrences in the span; the
  // corpus's host copy makes this O(span items), as on the CPU) and uploads the plan; kernels do
  // the catch-up of the span's groups, the span gradient, the line-search trial, the commit into
  // d (and w for SAGA) and the store of the new marginals. w, d, the stored marginals and the
  // lazy-step history stay on the device; per step only the plan and a few scalars move.
  IncrementalStatePtr incremental_create(const BackendCorpus& bc) override;
  void incremental_sync(IncrementalState& state, SentenceSpan span, Vector& w, const Vector& d) override;
  double incremental_evaluate(IncrementalState& state, const Vector& w, double* grad_norm2) override;
  LipschitzFound incremental_search(IncrementalState& state, Vector& w, double L0) override;
  void incremental_trial(IncrementalState& state, Vector& w, double step) override;
  void incremental_restore(IncrementalState& state, Vector& w) override;
  void incremental_commit(IncrementalState& state, Vector& d, Vector& w, const double* w_coef) override;
  void incremental_step(IncrementalState& state, double a, double b, double tau, Vector& w, const Vector& d) override;
  void incremental_flush(IncrementalState& state, Vector& w, const Vector& d) override;
  std::vector<double> incremental_save(IncrementalState& state) override;
  void incremental_load(IncrementalState& state, const std::vector<double>& marginals) override;
  void incremental_schedule(IncrementalState& st, SentenceSpan span, const SagStepParams& p, Vector& w,
                            Vector& d) override;  // backend_sag_queue.cu, as the next two
  void incremental_schedule_drawn(IncrementalState& st, const SagSamplerRef& sampler, const SagStepParams& p,
                                  Vector& w, Vector& d) override;
  SagScalars incremental_scalars(IncrementalState& state) override;
  void incremental_set_scalars(IncrementalState& state, const SagScalars& scalars) override;

  // ---- sparse batch gradients (backend_sparse.cu) ------------------------------------------
  SparseVectorPtr sparse_vector() override;
  void support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) override;
  double evaluate_sparse(const BackendCorpus& bc, const Vector& w, SentenceSpan span, SparseVector& grad,
                         double scale, bool support_given, SequenceLoss loss = SequenceLoss::seq_log) override;
  void evaluate_sparse_gradient(const BackendCorpus& bc, const Vector& w, SentenceSpan span, SparseVector& grad,
                                double scale, bool support_given, SequenceLoss loss) override;
  /// evaluate_sparse's work; without `loss_to_host` (a one-sentence span, a sequence loss) the
  /// loss stays on the device and NaN is returned. (backend_sparse.cu)
  double sparse_pass(const CudaCorpus& c, const Vector& w, SentenceSpan span, CudaSparse& x, double scale,
                     bool support_given, SequenceLoss loss, bool loss_to_host);
  std::size_t feature_difference(const BackendCorpus& bc, SentenceSpan span, const std::uint32_t* labels,
                                 SparseVector& out, double scale) override;
  /// (backend_sgd_search.cu)
  bool sgd_l1_search_step(const BackendCorpus& corpus, SentenceSpan span, const SgdL1StepParams& p, Vector& w,
                          Vector* q, Vector* stamp, Vector& scalars, SparseVector& g, SparseVector& saved) override;
  /// sgd-l1's and adf's steps at batch size 1 in runs of kRunIds, one launch each
  /// (run_kernels.cuh): as perceptron_steps', the loss seq-log (backend_sgd_search.cu).
  bool gradient_steps(const BackendCorpus& bc, SentenceSpan span, Vector& w, const GradientSteps& steps) override;
  void sparse_copy(const SparseVector& src, SparseVector& dst) override;
  void gather(const Vector& w, SparseVector& xs) override;
  void scatter(const SparseVector& xs, Vector& w) override;
  void sparse_axpy(double a, const SparseVector& xs, Vector& y) override;
  double sparse_penalty(const SparseVector& xs, double c1, double c2) override;
  /// ap's step on a span of a resident corpus that one chunk of at most kChunkIds sentences holds,
  /// nothing read back (backend_perceptron.cu; a batch: perceptron_batch, Δ in pc_dense_).
  bool perceptron_step(const BackendCorpus& bc, SentenceSpan span, Vector& w, Vector* u, double u_scale,
                       SparseVector& delta) override;
  /// ap's, pa's and arow's steps at batch size 1 in runs of kRunIds, one launch each
  /// (run_kernels.cuh): a resident corpus, transitions on, L ≤ kRunMaxL (runs_refused;
  /// backend_perceptron.cu, backend_peer.cu).
  bool perceptron_steps(const BackendCorpus& bc, SentenceSpan span, Vector& w, Vector* u, double t0) override;
  bool peer_steps(const BackendCorpus& bc, SentenceSpan span, const PeerStep& step, Vector& w, Vector* u, double t0,
                  SparseVector& scratch) override;
  /// pa's and arow's step on a span as perceptron_step's, mira's on one sentence (backend_peer.cu);
  /// ℓ summed in peer_.
  bool peer_step(const BackendCorpus& bc, SentenceSpan span, const PeerStep& step, Vector& w, Vector* u,
                 double u_scale, SparseVector& delta) override;
  void set_peer_loss(double value) override;
  double peer_loss() override;
  void set_mira_state(const float* bounds, const std::uint32_t* shrink, std::size_t n) override;
  void mira_state(float* bounds, std::uint32_t* shrink, std::size_t n) override;

 private:
  /// For a pointwise `loss` (point-log, point-exp): sets fp (of the chunk run_chunk_front just
  /// scored) to the forward-backward without gold that gives μ and, with `gradient`, every
  /// position's pairwise marginals (into edge_, or pt_pair_ when E = 0), runs it and the loss's
  /// sweeps (launch_pointwise_loss): losses_ holds each sentence's loss, node_, pair_ and the
  /// per-position buffer its gradient.
  void pointwise_chunk(const CorpusArrays& a, FbParams& fp, std::size_t n, SequenceLoss loss, bool gradient);
  /// The chunk rows (plan's rows_limit) for a pointwise loss's gradient: without edge features
  /// pt_pair_ is allocated for min(workspace rows, max(longest sentence, 256 MiB of L² rows)) and
  /// that is the limit; with them edge_ holds the pairwise marginals (no limit).
  std::size_t pointwise_rows(const CudaCorpus& c);
  /// Throws for a sentence whose pointwise loss the device did not compute (a NaN in h_losses_,
  /// the chunk's n losses starting at span position `begin`).
  void check_pointwise(SequenceLoss loss, SentenceSpan span, std::size_t begin, std::size_t n,
                       const double* losses) const;

  // ---- upload and workspace (backend.cu) ---------------------------------------------------
  /// Keeps `in` as the corpus's host copy (the span planners read it) and uploads it.
  BackendCorpusPtr upload_owned(Corpus&& in);
  /// c's transposes and gather plans, unless built; whether c's whole workspace takes at most
  /// half of what its copy leaves (upload_owned then reuses spare_'s arrays, gathers wait).
  void gathers(const CudaCorpus& c);
  bool ample(const Corpus& c, std::size_t corpus_bytes, std::size_t free_b) const;
  std::shared_ptr<CorpusBuffers> spare_ = std::make_shared<CorpusBuffers>();
  std::size_t row_bytes(bool edges) const;
  /// Device bytes of corpus c's copy: its CSR arrays, the transposed ones (edge_items edge
  /// occurrences), labels and the token → slot map.
  std::size_t device_corpus_bytes(const Corpus& c, bool edges, std::size_t edge_items) const;
  std::size_t sentence_bytes() const;
  /// Grows the workspace (never shrinks) so that chunks of `c` fit: the whole corpus when the
  /// memory budget (half of what is free) allows, else chunks of whole sentences.
  void size_workspace(const CudaCorpus& c);
  /// size_workspace's rows and sentences for a corpus of N tokens, S sentences, the longest of
  /// max_len, with `usable` bytes of device memory.
  void workspace_caps(std::size_t N, std::size_t S, std::size_t max_len, std::size_t usable, std::size_t& rows,
                      std::size_t& sents) const;
  void release_workspace() noexcept;

  // ---- chunks (backend.cu) -----------------------------------------------------------------
  /// The next chunk of `span` from `begin`: whole sentences while they fit the workspace (and
  /// `rows_limit` tokens, except that a first sentence longer than that goes alone), up to a
  /// sentence already in the chunk (a repeat starts the next chunk). Fills h_sent_, h_slots_,
  /// h_order_ and returns the end.
  std::size_t plan(const CudaCorpus& c, SentenceSpan span, std::size_t begin,
                   std::size_t rows_limit = std::numeric_limits<std::size_t>::max());
  ChunkView chunk_view() const { return {sent_.get(), slots_.get(), order_.get()}; }
  /// The Viterbi kernels' inputs for the chunk run_chunk_front just scored.
  DecodeInputs decode_inputs(const CorpusArrays& a, const Vector& w) const;
  /// The [L][L] transition matrix τ of w: its block (dense layout), zeros (transitions off), or
  /// the transition row scattered over zeros by prepare(w) (sparse layout; valid until the next
  /// prepare).
  const double* trans_ptr(const Vector& w) const {
    if (!dims_.transitions) return zeros_.get();
    return dims_.dense() ? P(w) + dims_.transition_offset() : trans_.get();
  }
  /// τ_max, E, Eᵀ of the weight vector (and, for a sparse layout, τ itself: trans_ptr).
  void prepare(const Vector& w);
  /// The resident corpus's arrays for the chunk plan() just made.
  CorpusArrays arrays(const CudaCorpus& c) const;
  /// Uploads the chunk plan (resident arrays); rows, emissions and edge matrices.
  void run_chunk_front(const CorpusArrays& a, const Vector& w, std::size_t n, std::size_t rows, bool slots,
                       const bool* skip = nullptr);
  void run_chunk_front(const CudaCorpus& c, const Vector& w, std::size_t n, std::size_t rows, bool slots,
                       const bool* skip = nullptr) {
    run_chunk_front(arrays(c), w, n, rows, slots, skip);
  }
  /// The forward-backward inputs of the chunk run_chunk_front(a, w, …) just scored.
  FbParams fb_params(const CorpusArrays& a, const Vector& w) const;
  FbParams fb_params(const CudaCorpus& c, const Vector& w) const { return fb_params(arrays(c), w); }
  /// Forward-backward on the chunk's n sentences: fused, or split (fb_mode_; the split needs
  /// L ≤ 32, the backward pass and the recursions: not the independent positions' path).
  void launch_fb(const FbParams& fp, std::size_t n, const FbWork& work);
  void launch_fb(const FbParams& fp, std::size_t n) { launch_fb(fp, n, planned_fb()); }
  /// Fills h_seg_ and h_multi_, the split forward-backward's work list of the planned chunk.
  void plan_segments();
  /// The planned chunk's split forward-backward work (h_seg_, h_multi_ and their copies).
  FbWork planned_fb() const {
    return {h_sent_.size(), h_longest_, h_partial_rows_, h_seg_.size(), h_multi_.size(), seg_.get(), multi_.get(),
            h_scan_};
  }
  /// The chunk's split forward-backward work: a streamed chunk's, or the plan's (after
  /// run_chunk_front copied it).
  FbWork fb_work(const CorpusArrays& a) const { return a.streamed ? a.fb : planned_fb(); }
  /// Whether a chunk's forward-backward is split (fb_mode_, L, its longest sentence).
  bool split_fb(const FbWork& work) const;
  bool split_fb() const { return split_fb(planned_fb()); }
  /// The length from which a split forward-backward runs a sentence's recursions as a scan
  /// (fb_scan_kernels.cu; at L ≤ 32, under the automatic mode and CRFX_FB=scan).
  std::size_t scan_length() const {
    const bool scan = fb_mode_ == CudaBackendConfig::ForwardBackward::scan ||
                      fb_mode_ == CudaBackendConfig::ForwardBackward::automatic;
    return scan && dims_.L <= 32 ? kFbScanLength : ~std::size_t(0);
  }

  // ---- streaming (backend_stream.cu) -------------------------------------------------------
  /// How much device memory corpus c's copy and workspace may take (limit_, reserved_, free).
  std::size_t device_budget(std::size_t free_b) const;
  /// What a stream may take: device_budget, or half of it where the run's vectors were not
  /// reserved (set_memory_limits not called: the rest is theirs, as a resident workspace leaves).
  std::size_t stream_budget(std::size_t free_b) const {
    return limits_set_ ? device_budget(free_b) : device_budget(free_b) / 2;
  }
  /// Whether corpus c (copy of corpus_bytes, longest sentence max_len) is streamed.
  bool streams(std::size_t corpus_bytes, std::size_t max_len, std::size_t free_b) const;
  /// A streamed corpus's device bytes beside the workspace (gather plans, two stream slots at
  /// most) and its workspace, for upload_bytes / workspace_bytes.
  void stream_sizes(const Corpus& c, std::size_t max_len, std::size_t free_b, std::size_t& resident,
                    std::size_t& workspace, bool pointwise = false) const;
  /// Builds up's stream: the gather plans (their ranges kept on the host), the workspace, the
  /// chunk plan, the pinned copy (refused with the figures past the host memory), the slots.
  void upload_streamed(CudaCorpus& up, const std::vector<std::size_t>& st_off, const std::vector<std::uint32_t>& st_tok,
                       const std::vector<double>& st_val, const std::vector<std::size_t>& et_off,
                       const std::vector<std::uint32_t>& et_tok, const std::vector<double>& et_val, bool edges);
  /// upload_streamed's steps: the chunks (whole sentences within the workspace and the slot; a
  /// sentence that cannot fit refused with the figures), each chunk's layout in its regions (the
  /// largest slot's bytes returned), and the pinned copy's contents.
  void stream_cut(const CudaCorpus& up, CorpusStream& st, StreamSources& src, const StreamBudget& b);
  std::size_t stream_layout(CudaCorpus& up, CorpusStream& st, StreamSources& src);
  void stream_fill(CudaCorpus& up, CorpusStream& st, StreamSources& src);
  /// Throws for a streamed corpus: `what` needs the whole corpus on the device.
  void require_resident(const CudaCorpus& c, const char* what) const;
  /// A pass over a streamed corpus: begin queues the first two chunks' copies; chunk(k) makes
  /// the compute stream wait for chunk k's copy, sets the host's chunk sizes (h_slots_) and
  /// returns its arrays; done(k) records that chunk k's kernels are queued and queues the copy of
  /// chunk k + 2 into its slot.
  void stream_begin(const CudaCorpus& c);
  CorpusArrays stream_chunk(const CudaCorpus& c, std::size_t k);
  void stream_done(const CudaCorpus& c, std::size_t k);
  void stream_copy(const CudaCorpus& c, std::size_t k);

  // ---- the marginal reduction (backend_chain.cu) -------------------------------------------
  /// g += scale · Xᵀ·delta (state and edge attributes) and the transition sums; then the
  /// token → row map is cleared for the next chunk.
  void reduce_gradient(const CorpusArrays& a, std::size_t n, std::size_t rows, double scale, double* G);

  // ---- span plans: SAG and evaluate_sparse (backend_plans.cu) ------------------------------
  /// Plans `span` (distinct sentences) into `pl` and uploads it (see SpanPlan). `edge_slot`
  /// (SAG with edge features) gives the stored row of each edge position; without it the stored
  /// rows are unused.
  /// Groups of edge items at a sentence's first position are touched (as the CPU's support and
  /// sync do) but have no occurrences: no edge factor sits there.
  void plan_span(const CudaCorpus& c, SentenceSpan span, const std::vector<std::uint32_t>* edge_slot, bool sag,
                 SpanPlan& pl);
  /// plan_span's host part: checks the span and fills pl's host vectors (no copy, no sync).
  void plan_span_host(const CudaCorpus& c, SentenceSpan span, const std::vector<std::uint32_t>* edge_slot, bool sag,
                      SpanPlan& pl);
  /// Every sentence's plan alone into sentence_plans_ (unless made for `c` already): planned on
  /// the host, the free device memory checked for them and `other_bytes` (SAG's stored
  /// marginals), then uploaded once. (backend_plans.cu)
  void plan_sentences(const CudaCorpus& c, std::size_t other_bytes);
  /// pl ← the plan of a span of sentence `sid` alone, from sentence_plans_: no copy.
  void select_sentence(const CudaCorpus& c, std::uint32_t sid, SpanPlan& pl);
  /// x ← S({sid}) with zero values (support_host and upload_sparse's result) from the plans made
  /// once: the indices expanded on the device, nothing copied. (backend_plans.cu)
  void sentence_support(const CudaCorpus& c, std::uint32_t sid, CudaSparse& x);
  /// Whether the corpus or the model rules runs out (perceptron_steps, peer_steps); a run's
  /// parameters but its sentences, the sentences checked (backend_perceptron.cu).
  bool runs_refused(const CudaCorpus& c) const;
  void search_run_params(const GradientSteps& s, std::size_t steps, GradientRun& r);
  PerceptronRun run_params(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u);
  /// perceptron_step's decode of a span that one chunk holds (false: refused, nothing queued); a
  /// sentence alone: S({sid}) and Δ into x, its mistakes into mistakes_. (backend_perceptron.cu)
  bool decode_on_device(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u, CudaSparse& x);
  /// perceptron_step on a batch's chunk, decoded: S(batch) (false: batch_union refused it), Δ in
  /// pc_dense_, the updates over S(batch).
  bool perceptron_batch(const CudaCorpus& c, SentenceSpan span, Vector& w, Vector* u, double u_scale);
  /// A decoded batch's Δ in pc_dense_ (returned; its users zero it again) over S(batch), which
  /// batch_union queued for this span just before, in one launch, bitwise the host's
  /// feature_difference; the batch's mistakes into mistakes_.
  double* batch_difference(const CudaCorpus& c, SentenceSpan span, std::size_t num_weights);
  /// S(batch)'s groups built on the device into batch_union_ from the plans made once (its sizes
  /// planned on the host) for 2 … kChunkIds labeled sentences of a resident corpus; false:
  /// refused, nothing queued. (backend_sparse_batch.cu)
  bool batch_union(const CudaCorpus& c, SentenceSpan span, BatchIds* ids_out = nullptr);
  /// The span's sentences with their slots in the chunk just planned for it, and the plans made
  /// once, as the merged batch kernels take them (backend_sparse_batch.cu).
  BatchRows batch_rows(SentenceSpan span) const;
  BatchPlans batch_plans(const CudaCorpus& c) const;
  /// sgd-l1's and adf's batch of 2 … kChunkIds sentences on the device (backend_sparse_batch.cu):
  /// x ← S(batch) built from the plans made once; x's values ← scale · the batch's gradient (one
  /// chunk, summed in pc_dense_), nothing copied up or read back. False: sparse_pass's path.
  bool batch_support(const CudaCorpus& c, SentenceSpan span, CudaSparse& x);
  /// pc_dense_ sized n, all zero (its users leave it zero again after a step).
  double* zeroed_dense(std::size_t n);
  bool batch_gradient(const CudaCorpus& c, const Vector& w, SentenceSpan span, CudaSparse& x, double scale,
                      bool support_given, SequenceLoss loss);
  /// SAG's stored row of each edge position: [N] its slot, or kNone (empty without edge
  /// features); the number of slots into *count.
  std::vector<std::uint32_t> edge_slots(const CudaCorpus& c, std::size_t* count) const;
  /// Forward-backward on the planned span at w through the chunk workspace; copies the span's
  /// node deltas [rows][L], summed pairwise deltas [n][L][L] (when there are transitions or edge
  /// features) and edge-position deltas [rows][L][L] (edge features) out of it, and returns the
  /// span's NLL (summed in span order, as the CPU). With `loss` seq_exp: the span's seq-exp loss
  /// and deltas (launch_seq_exp).
  /// With `loss_to_host` false (a one-sentence span): the loss is left in losses_[0] on the
  /// device, nothing is read back or waited for, and the return value is NaN.
  double span_marginals(const CudaCorpus& c, const Vector& w, const SpanPlan& pl, DeviceBuffer<double>& node,
                        DeviceBuffer<double>& pair, DeviceBuffer<double>& edge,
                        SequenceLoss loss = SequenceLoss::seq_log, bool loss_to_host = true);
  /// The NLL of a one-sentence span at w into losses_[0], as evaluate(…, nullptr) computes it
  /// (the same kernels), left on the device.
  void sentence_loss_on_device(const CudaCorpus& c, const Vector& w, SentenceSpan span, const bool* skip = nullptr);
  /// out (compact, per planned group) = scale · the span's NLL gradient, from span_marginals'
  /// deltas.
  void span_gradient(const CudaCorpus& c, const SpanPlan& pl, const DeviceBuffer<double>& node,
                     const DeviceBuffer<double>& pair, const DeviceBuffer<double>& edge, double scale,
                     double* out);

  // ---- helpers of SAG and the sparse primitives --------------------------------------------
  CudaSag& G(IncrementalState& st) const {
    auto* p = dynamic_cast<CudaSag*>(&st);
    if (!p || p->owner != this) throw Error("internal: SAG state does not belong to this CUDA backend");
    return *p;
  }
  /// The weight groups as the kernels read them: dims_.groups() with the device copies of a
  /// sparse layout's rows. Host-side planning (SpanGroups, group_indices, plan_span) keeps using
  /// dims_.groups(), whose pointers are the host's.
  WeightGroups device_groups() const { return dgroups_; }
  /// Mirrors the lazy-step history not yet on the device, then runs the composite map on
  /// `count` groups (`list` on the device, or all groups when null). (backend_sag.cu)
  void sag_catch_up(CudaSag& s, std::size_t count, const std::uint32_t* list, Vector& w, const Vector& d);
  /// A one-sentence span's loss (losses_[0]), gradient and ‖g‖² (returned) left on the device.
  const double* sag_evaluate_on_device(CudaSag& s, const Vector& w);
  /// Queues s.queued[at] (gated by the queue's halt) / waits for the queue, a halted step finished
  /// on the host and the steps after it queued again (backend_sag_queue.cu).
  void sag_enqueue(CudaSag& s, std::size_t at), sag_finish(CudaSag& s);
  /// The queue's room and history for one more step (true: a new queue); a queued step's
  /// placeholder in the host's history; a drawn step queued (SagPick), its evaluation (‖g‖²
  /// returned) and its loss, with (backward) or without the marginals.
  bool sag_queue_ready(CudaSag& s, Vector& w, Vector& d, std::uint32_t kind);
  void sag_placeholder(CudaSag& s), sag_enqueue_drawn(CudaSag& s, std::size_t at);
  /// The queue's steps at batch size 1 in runs (launch_sag_run) where the layout takes them; the
  /// queued steps from s.run_from (at most kSagRunSteps: a run is launched as they reach it, and
  /// at each wait) launched in one run (backend_sag_queue.cu).
  bool sag_runs(const CudaSag& s) const;
  void sag_launch_run(CudaSag& s);
  const double* sag_evaluate_picked(CudaSag& s, const Vector& w, const SagPick& pick);
  /// ‖s.g‖² over its first `compact` entries (reduce()'s two passes) left on the device; with
  /// compact_at, over the first *compact_at (the device's count, `compact` its bound).
  const double* sag_g2_on_device(CudaSag& s, std::size_t compact, const std::size_t* compact_at = nullptr);
  /// A batch step (a span of several sentences) queued on the device: whether the span takes it
  /// (2 … kChunkIds labeled sentences of a resident corpus in one chunk, unsplit) or, drawn on the
  /// device (SAG-NUS), a batch of B; its launches; and its chunk's loss (the sum of its sentences',
  /// into *out) with the marginals (skip null) or a trial's, none where *skip (n sentences on
  /// `rows` rows: a drawn batch's bound).
  bool sag_batch_fits(const CudaSag& s, SentenceSpan span);
  bool sag_drawn_batch_fits(const CudaSag& s, std::size_t B);
  void sag_enqueue_batch(CudaSag& s, std::size_t at);
  SagBatchSizes sag_batch_begin(CudaSag& s, std::size_t at, const SagGate& gate, SentenceSpan& span);
  void batch_loss_on_device(const CudaCorpus& c, const Vector& w, const SentenceSpan* span, std::size_t n,
                            std::size_t rows, const bool* skip, double* out);
  void sentence_loss_picked(const CudaCorpus& c, const Vector& w, const SagDraw* draw, bool backward,
                            const bool* skip = nullptr);
  CudaSparse& X(SparseVector& x) const {
    auto* p = dynamic_cast<CudaSparse*>(&x);
    if (!p || p->owner != this) throw Error("internal: sparse vector does not belong to this CUDA backend");
    return *p;
  }
  const CudaSparse& X(const SparseVector& x) const { return X(const_cast<SparseVector&>(x)); }
  static void check_index(const CudaSparse& x, std::size_t n) {
    if (x.end > n)
      throw Error("internal: sparse index beyond the vector (" + std::to_string(x.end - 1) + " ≥ " +
                  std::to_string(n) + ")");
  }
  /// S(span) into h_index_ (sorted), as CpuBackend::support. (backend_sparse.cu)
  void support_host(const Corpus& c, SentenceSpan span);
  /// h_index_ (and h_value_ when `values`, else zeros) → x. (backend_sparse.cu)
  void upload_sparse(CudaSparse& x, bool values);

  // ---- small helpers -------------------------------------------------------------------------
  void sync() { CRFX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  DeviceBuffer<double>& V(Vector& v) const {
    auto* p = dynamic_cast<CudaVector*>(&v);
    if (!p || p->owner != this) throw Error("internal: vector does not belong to this CUDA backend");
    return p->buf;
  }
  const DeviceBuffer<double>& V(const Vector& v) const { return V(const_cast<Vector&>(v)); }
  double* P(const Vector& v) const { return V(v).get(); }
  const CudaCorpus& C(const BackendCorpus& b) const {
    auto* p = dynamic_cast<const CudaCorpus*>(&b);
    if (!p || p->owner != this) throw Error("internal: corpus does not belong to this CUDA backend");
    return *p;
  }
  static void same(const Vector& a, const Vector& b) {
    if (a.size() != b.size())
      throw Error("internal: vector sizes differ (" + std::to_string(a.size()) + " vs " +
                  std::to_string(b.size()) + ")");
  }

  // ---- state ---------------------------------------------------------------------------------
  CudaBackendConfig cfg_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // a streamed corpus's copies (made with the first one)
  // set_memory_limits: the device limit (0: cfg_.max_device_memory), the bytes reserved in it for
  // the run's vectors, the host limit (0: cfg_.max_host_memory); workspace_cap_ bounds the
  // workspace of the corpus being uploaded (0: half of what is free, as without a limit).
  std::size_t limit_ = 0, reserved_ = 0, host_limit_ = 0, workspace_cap_ = 0;
  bool limits_set_ = false;  // set_memory_limits was called (its `reserved` covers the run's vectors)
  std::string name_;
  int threads_ = 32;         // forward-backward / Viterbi block size
  bool shared_E_ = false;    // E, Eᵀ in shared memory (forward-backward)
  bool shared_pair_ = false; // a sentence's pair sums in shared memory (forward-backward, L ≤ 32)
  // Per backend: transition factors and the reduction partials.
  DeviceBuffer<double> E_, Et_, zeros_, tmax_, red_;
  // The weight layout on the device (sparse layout only, uploaded once by the constructor): the
  // rows' offsets [groups + 1] and slots [weights], the groups over them (device_groups), the
  // longest state and edge rows (the gathers' column blocks; L and L² when dense), and τ as a
  // dense [L][L] matrix (prepare scatters the transition row into it).
  DeviceBuffer<std::size_t> layout_offsets_;
  DeviceBuffer<std::uint32_t> layout_slots_;
  WeightGroups dgroups_;
  std::size_t max_state_row_ = 0, max_edge_row_ = 0;
  DeviceBuffer<double> trans_;
  DeviceBuffer<GatherCountersDevice> gather_counters_;  // [1] when cfg_.gather_counters is set
  // The workspace, sized at upload time (grow-only): rows_cap_ tokens, sents_cap_ sentences. One
  // typed allocation per array and mode (no buffer reinterpreted), rather than one arena carved
  // up: the emulated device guards each allocation with canaries (and ASan poisons them), so an
  // overrun from one array into the next is caught in CI — inside one arena it would not be.
  std::size_t rows_cap_ = 0, sents_cap_ = 0;
  bool slots_set_ = false;  // fill_rows wrote the current chunk's token slots (not yet reset)
  DeviceBuffer<double> S_;      // [rows][L] emissions
  DeviceBuffer<double> la_;     // [rows][L] log α (Viterbi: best scores)
  DeviceBuffer<double> lb_;     // [rows][L] log β
  DeviceBuffer<double> node_;   // [rows][L] node deltas / marginals
  DeviceBuffer<std::uint32_t> back_;    // [rows][L] Viterbi: back pointers
  DeviceBuffer<std::uint32_t> labels_;  // [rows] Viterbi: labels
  DeviceBuffer<double> edge_;   // [rows][L][L] τ_t, then edge deltas (E > 0 only)
  /// [rows][L][L] the pointwise losses' per-position pairwise marginals, then gradients, where
  /// there is no edge_ (E = 0); allocated on their first use.
  DeviceBuffer<double> pt_pair_;
  DeviceBuffer<std::size_t> row_token_;  // [rows]
  DeviceBuffer<std::uint8_t> row_edge_;  // [rows]
  DeviceBuffer<double> pair_;     // [sents][L][L]
  DeviceBuffer<double> partial_;  // [sents / kTransGroup][L][L]
  DeviceBuffer<double> losses_;   // [sents]
  // n-best Viterbi (tag --nbest): its own tables, grow-only, at most about kNbestBytes per chunk.
  static constexpr std::size_t kNbestBytes = std::size_t(256) << 20;
  /// The pointwise losses' per-position pairwise marginals without edge features (pt_pair_): a
  /// chunk's at most this (or its longest sentence's); a streamed corpus's chunks are cut to it.
  static constexpr std::size_t kPointwiseBytes = std::size_t(256) << 20;
  DeviceBuffer<double> nb_d_, nb_score_;
  DeviceBuffer<std::uint32_t> nb_back_, nb_out_;
  DeviceBuffer<std::uint32_t> sent_, order_;  // [sents]
  DeviceBuffer<std::size_t> slots_;           // [sents + 1]
  // Stochastic trainers.
  SpanPlan sp_plan_;                     // evaluate_sparse: the span plan and its marginals
  SentencePlans sentence_plans_;         // every sentence's plan alone, for one corpus
  std::uint64_t sentence_plans_corpus_ = 0;  // its serial (0: none)
  DeviceBuffer<double> sp_node_, sp_pair_, sp_edge_;
  DeviceBuffer<std::uint32_t> mistakes_;  // [1] perceptron_step: the decoded span's wrong tokens
  DeviceBuffer<double> pc_dense_;         // [weights] perceptron_batch's Δ, batch_gradient's sums; zero between steps
  BatchUnion batch_union_;                // batch_support's S(batch)
  DeviceBuffer<double> peer_;  // peer_step: two reductions' partials and sums, τ, u's τ, the gate, Σℓ
  DeviceBuffer<float> mira_bounds_;           // [sentences] peer_step: mira's B_i
  DeviceBuffer<std::uint32_t> mira_shrink_;  // [sentences] and its shrinking counts
  DeviceBuffer<std::size_t> run_index_;  // gradient_steps' line search: the support, compact
  DeviceBuffer<double> run_g_, run_saved_;  // and its gradient and w there
  DeviceBuffer<double> lsd_red_;          // sgd_l1_search_step: a penalty's partials and sum
  DeviceBuffer<SgdL1Search> lsd_search_;  // [1] its line search
  std::vector<double> h_dense_;          // dense host scratch (feature_difference), all-zero
  std::vector<std::size_t> h_index_;     // support staging
  std::vector<double> h_value_;
  SpanGroups support_groups_;  // support_host's planner
  // Host staging of the chunk plan.
  std::vector<std::uint32_t> h_sent_, h_order_;
  // The split forward-backward's work list of the planned chunk (chain_kernels.cuh: FbSegments)
  // and its device copies; the chunk's longest sentence (the automatic choice of the split).
  std::vector<FbSegment> h_seg_;
  std::vector<FbMulti> h_multi_;
  std::size_t h_longest_ = 0, h_partial_rows_ = 0;  // h_partial_rows_: Σ count of h_multi_
  FbScan h_scan_{};  // the chunk's sentences of kFbScanLength positions or more, their segments
  DeviceBuffer<FbSegment> seg_;
  DeviceBuffer<FbMulti> multi_;
  DeviceBuffer<double> seg_pair_;  // the partial pair sums of sentences of several segments
  CudaBackendConfig::ForwardBackward fb_mode_ = CudaBackendConfig::ForwardBackward::automatic;
  bool h_consecutive_ = false;  // the planned chunk's sentence ids are consecutive, ascending
  std::vector<std::uint32_t> plan_mark_;  // [S] generation of a chunk's sentences (repeat check)
  std::uint32_t plan_gen_ = 0;
  std::vector<std::size_t> h_slots_;
  // The last plan's inputs: a pass over the same span (every pass of a batch trainer) reuses the
  // plan, and its device copies while plan_on_device_ (run_chunk_front).
  struct PlanKey {
    std::uint64_t corpus = 0;
    std::size_t begin = 0, rows_limit = 0, end = 0;
    std::vector<std::uint32_t> ids;  // the span's ids from begin through the one that ended the chunk
    std::size_t count = 0;
  } plan_key_;
  bool plan_on_device_ = false;
  std::vector<double> h_losses_;
};

}  // namespace crfx::cuda::detail
