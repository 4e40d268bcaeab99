// crfx — the CUDA backend: every Backend primitive on one GPU, in double precision.
//
// The pipeline of one chunk of evaluate() (kernels in this file, names after the maths):
//
//   span ──plan (host)──▶ chunk: sentences [begin, end), rows = their tokens in span order
//     fill_rows        row → token, row has edge items, token → row (token_slot, gradient only)
//     emissions        S [rows][L] = X·W                     (thread per (row, y))
//     edge_matrices    τ_t [rows][L][L] = τ + Σ_e x_e·W_e    (rows with edge items, E > 0)
//     forward_backward one block per sentence, threads over labels, longest sentences first:
//                      log α, log Z, loss, log β, node marginals − 1(gold) [rows][L],
//                      Σ_t pairwise marginals − gold counts [sentences][L][L], and at rows with
//                      edge items p_t(y', y) − 1(gold) written over τ_t
//     gather_state     g[a·L + y] += scale · Σ_{occurrences of a, token order} x · delta
//     gather_edge      the same for edge attributes over [L][L]
//     trans_partial /  transitions: Σ over sentences by a fixed two-level tree
//     trans_final
//     reset_slots
//
// SAG / SAGA (seed 004) keep their state on the device: stored marginals, the lazy-step history
// and per-group stamps; the host plans each span (groups, occurrences) and the sag_* kernels below
// catch up, differentiate, trial, commit and store (see docs/ARCHITECTURE.md).
//
// Determinism: no floating-point atomics anywhere. Every sum has a fixed order: the gathers walk
// the transposed CSR (attribute → occurrences, built once at upload in token order), the
// transition sum is a fixed-shape tree over sentences, per-sentence losses are added on the host
// in span order, and the vector reductions use cub::BlockReduce in a fixed grid whose shape
// depends only on the vector length (so results are bitwise reproducible run to run and even
// across GPUs — stronger than cub::DeviceReduce, which is deterministic only for a given size
// *and* GPU because its grid follows the SM count).
//
// Numerics: log space throughout. The forward and backward recursions use the max-shifted
// exp-space product of DESIGN.md (L exps + L² FMAs per position, E = exp(τ − τ_max)) and redo an
// entry exactly in log space (L exps) whenever its sum falls below kTiny, so extreme weights are
// handled exactly. Pairwise marginals are computed entry by entry in log space (exact).
// Emissions and per-position edge matrices are accumulated with explicit round-to-nearest
// multiply and add (no FMA contraction), in the CPU's order, so that they are bitwise equal to
// the CPU's: Viterbi then makes the same choices on ties as the CPU (smallest label id).
//
// Precision: double throughout, the path checked against the CPU double reference. A float path
// would go in the emission and forward-backward kernels (float S, log α/β; double accumulators
// for log Z, losses and the gather sums), selected per backend; the gathers, tree sums and the
// vector algebra would stay double.
//
// Memory: the corpus (CSR, its transpose, labels, offsets; no value arrays for binary attributes,
// whose kernels then take 1) is uploaded once; one workspace arena per backend, sized at upload
// time from the corpus and the free device memory, holds every per-chunk buffer; nothing is
// allocated inside evaluate()/viterbi()/marginals(). A span larger than the workspace is split
// into chunks of whole sentences; a single sentence that cannot fit raises crfx::Error with the
// amount of memory needed.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cub/block/block_reduce.cuh>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "crfx/backend.hpp"
#include "crfx/error.hpp"
#include "cuda_api.hpp"
#include "cuda_check.cuh"

namespace crfx::cuda {
namespace {

constexpr std::uint32_t kMaxLabels = 4096;  // the forward-backward block keeps [L] in shared memory
constexpr double kTiny = 1e-200;            // below: redo the entry exactly in log space
constexpr int kMapThreads = 256;
constexpr int kRedThreads = 256;
constexpr int kRedBlocks = 512;             // fixed reduction grid (fewer for short vectors)
constexpr int kGatherWarps = 8;             // warps per block in the gathers
constexpr unsigned kTransGroup = 32;        // sentences per leaf of the transition tree
constexpr std::size_t kSharedLimit = 48 * 1024;

// ---- RAII device memory ----------------------------------------------------------------------

/// Move-only owner of a device array of T. resize() discards the contents.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  /// New contents, uninitialised (the old are freed first). On failure the buffer is empty.
  void resize(std::size_t n) {
    if (n == n_) return;
    release();
    T* p = nullptr;
    if (n) CRFX_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
    p_ = p;
    n_ = n;
  }
  void clear() noexcept { release(); }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);  // no throw from a destructor; a failed free leaks nothing we can fix
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T>
void upload_vector(DeviceBuffer<T>& d, const std::vector<T>& h, cudaStream_t s) {
  d.resize(h.size());
  if (!h.empty())
    CRFX_CUDA_CHECK(cudaMemcpyAsync(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

unsigned grid_for(std::size_t n, int threads, std::size_t max_blocks = 65535u * 32) {
  return unsigned(std::max<std::size_t>(1, std::min<std::size_t>((n + threads - 1) / threads, max_blocks)));
}

double mib(std::size_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

// ---- element-wise maps (vector algebra, OWL-QN) ----------------------------------------------

template <class F>
__global__ void map_kernel(std::size_t n, F f) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void launch_map(std::size_t n, F f, cudaStream_t s) {
  if (n == 0) return;
  map_kernel<<<grid_for(n, kMapThreads), kMapThreads, 0, s>>>(n, f);
  CRFX_CUDA_CHECK_LAUNCH();
}

struct FillOp {
  double* x;
  double v;
  __device__ void operator()(std::size_t i) const { x[i] = v; }
};
struct ScaleOp {
  double* x;
  double a;
  __device__ void operator()(std::size_t i) const { x[i] *= a; }
};
struct AxpyOp {
  const double* x;
  double* y;
  double a;
  __device__ void operator()(std::size_t i) const { y[i] += a * x[i]; }
};
struct AxpbyOp {
  const double* x;
  double* y;
  double a, b;
  __device__ void operator()(std::size_t i) const { y[i] = a * x[i] + b * y[i]; }
};
struct SubOp {
  const double* x;
  const double* y;
  double* out;
  __device__ void operator()(std::size_t i) const { out[i] = x[i] - y[i]; }
};
// OWL-QN (Andrew & Gao 2007, §3.1–3.2), as CpuBackend.
struct PseudoGradientOp {
  const double* w;
  const double* g;
  double* pg;
  double c1;
  __device__ void operator()(std::size_t i) const {
    const double wi = w[i], gi = g[i];
    double p;
    if (wi < 0) p = gi - c1;
    else if (wi > 0) p = gi + c1;
    else if (gi + c1 < 0) p = gi + c1;  // right derivative negative
    else if (gi - c1 > 0) p = gi - c1;  // left derivative positive
    else p = 0;
    pg[i] = p;
  }
};
struct ConstrainOp {
  const double* pg;
  double* d;
  __device__ void operator()(std::size_t i) const {
    if (d[i] * pg[i] >= 0) d[i] = 0;
  }
};
struct ProjectOp {
  const double* w0;
  const double* pg;
  double* w;
  __device__ void operator()(std::size_t i) const {
    const double orthant = w0[i] != 0 ? w0[i] : -pg[i];
    if (w[i] * orthant <= 0) w[i] = 0;
  }
};

// Sparse primitives of the stochastic trainers (entries distinct: no races), as CpuBackend.
struct GatherOp {
  const std::size_t* idx;
  double* val;
  const double* w;
  __device__ void operator()(std::size_t j) const { val[j] = w[idx[j]]; }
};
struct ScatterOp {
  const std::size_t* idx;
  const double* val;
  double* w;
  __device__ void operator()(std::size_t j) const { w[idx[j]] = val[j]; }
};
struct SparseAxpyOp {
  const std::size_t* idx;
  const double* val;
  double* y;
  double a;
  __device__ void operator()(std::size_t j) const { y[idx[j]] += a * val[j]; }
};
struct LazyDecayOp {
  const std::size_t* idx;  // null: dense (i = j)
  double* w;
  double* stamp;
  const double* rate;  // null: w *= exp(clock − stamp)
  double clock, coef;
  __device__ void operator()(std::size_t j) const {
    const std::size_t i = idx ? idx[j] : j;
    if (stamp[i] == clock) return;
    w[i] *= rate ? pow(1.0 - coef * rate[i], clock - stamp[i]) : exp(clock - stamp[i]);
    stamp[i] = clock;
  }
};
struct SgdL1Op {  // Tsuruoka et al. 2009 cumulative L1 (seed 000 §3.3)
  const std::size_t* idx;
  const double* g;
  double* w;
  double* q;
  double eta, u;
  bool keep_q;  // a line-search trial: q read, not written
  __device__ void operator()(std::size_t j) const {
    const std::size_t i = idx[j];
    double wi = w[i] - eta * g[j];
    if (q) {
      const double z = wi;
      if (wi > 0) wi = fmax(0.0, wi - (u + q[i]));
      else if (wi < 0) wi = fmin(0.0, wi + (u - q[i]));
      if (!keep_q) q[i] += wi - z;
    }
    w[i] = wi;
  }
};
struct SgdL1PenaltyTerm {  // the step, then the entry's penalty (as PenaltyTerm) at the new weight
  SgdL1Op step;
  double c1, c2;
  __device__ double operator()(std::size_t j) const {
    step(j);
    const double wi = step.w[step.idx[j]];
    return c1 * fabs(wi) + c2 * wi * wi;
  }
};
struct AdfStepOp {  // Sun et al. 2012
  const std::size_t* idx;
  const double* g;
  double* w;
  const double* rate;
  double* count;
  __device__ void operator()(std::size_t j) const {
    const std::size_t i = idx[j];
    w[i] -= rate[i] * g[j];
    count[i] += 1.0;
  }
};
struct AdfRatesOp {
  double* rate;
  double* count;
  double window, alpha, beta;
  __device__ void operator()(std::size_t i) const {
    const double u = count[i] / window;
    rate[i] *= alpha - u * (alpha - beta);
    count[i] = 0.0;
  }
};
struct PenaltyTerm {
  const double* v;
  double c1, c2;
  __device__ double operator()(std::size_t j) const { return c1 * fabs(v[j]) + c2 * v[j] * v[j]; }
};

// ---- deterministic reductions ------------------------------------------------------------------
// Pass 1: a fixed grid (its size a function of n only) of kRedThreads-thread blocks; thread k
// folds elements k, k + stride, … in order, then cub::BlockReduce (a fixed shuffle/shared-memory
// tree) gives one partial per block. Pass 2: one block folds the partials the same way.

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};
struct DotTerm {
  const double* x;
  const double* y;
  __device__ double operator()(std::size_t i) const { return x[i] * y[i]; }
};
// Fused updates for the quasi-Newton trainers (Backend: "fused forms"): each term writes its
// element with the expression of the unfused map op, then returns the dot term of the new value,
// so a reduce over it equals the map followed by dot() bit for bit (same tree, same terms). The
// reduction visits every index exactly once.
struct ScaledCopyOp {
  const double* x;
  double* y;
  double a;
  __device__ void operator()(std::size_t i) const {
    y[i] = x[i];
    y[i] *= a;  // as copy, then ScaleOp
  }
};
struct AddScaledOp {
  const double* x;
  const double* d;
  double* out;
  double a;
  __device__ void operator()(std::size_t i) const {
    out[i] = x[i];
    out[i] += a * d[i];  // as copy, then AxpyOp
  }
};
struct AxpyDotTerm {
  const double* x;
  double* y;
  const double* z;
  double a;
  __device__ double operator()(std::size_t i) const {
    y[i] += a * x[i];
    return z[i] * y[i];
  }
};
struct ScaleDotTerm {
  double* x;
  const double* z;
  double a;
  __device__ double operator()(std::size_t i) const {
    x[i] *= a;
    return z[i] * x[i];
  }
};
struct AxpyNormTerm {
  const double* x;
  double* y;
  double a;
  __device__ double operator()(std::size_t i) const {
    y[i] += a * x[i];
    return x[i] * x[i];
  }
};
struct SubDotTerm {
  const double* x;
  const double* y;
  double* out;
  const double* z;
  __device__ double operator()(std::size_t i) const {
    out[i] = x[i] - y[i];
    return out[i] * z[i];
  }
};
struct AbsTerm {
  const double* x;
  __device__ double operator()(std::size_t i) const { return fabs(x[i]); }
};
struct NonzeroTerm {
  const double* x;
  __device__ double operator()(std::size_t i) const { return x[i] != 0.0 ? 1.0 : 0.0; }
};

template <class F, class Op>
__global__ void __launch_bounds__(kRedThreads) reduce_pass1(std::size_t n, F f, Op op, double init,
                                                            double* partial) {
  using BlockReduce = cub::BlockReduce<double, kRedThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  double acc = init;
  for (std::size_t i = blockIdx.x * std::size_t(kRedThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kRedThreads)
    acc = op(acc, f(i));
  const double r = BlockReduce(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) partial[blockIdx.x] = r;
}

template <class Op>
__global__ void __launch_bounds__(kRedThreads) reduce_pass2(unsigned m, const double* partial, Op op,
                                                            double init, double* out) {
  using BlockReduce = cub::BlockReduce<double, kRedThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  double acc = init;
  for (unsigned i = threadIdx.x; i < m; i += kRedThreads) acc = op(acc, partial[i]);
  const double r = BlockReduce(tmp).Reduce(acc, op);
  if (threadIdx.x == 0) *out = r;
}

// ---- block helpers (blockDim.x a multiple of 32, ≤ 1024) -------------------------------------

__device__ double block_max(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // `red` may still be read from the previous call
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) r = fmax(r, red[w]);
  return r;
}

/// Fixed-shape sum (lane 0 of each warp after the butterfly, then warps in order).
__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = red[0];
  for (unsigned w = 1; w < (blockDim.x >> 5); ++w) r += red[w];
  return r;
}

/// One-pass log Σ exp over a strided sequence v(k), k < n (exact, L exps).
template <class F>
__device__ double log_sum_exp_seq(int n, F v) {
  const double ninf = -CUDART_INF;
  double mx = ninf, s = 0;
  for (int k = 0; k < n; ++k) {
    const double x = v(k);
    if (x == ninf) continue;
    if (x > mx) {
      s = s * exp(mx - x) + 1.0;
      mx = x;
    } else {
      s += exp(x - mx);
    }
  }
  return mx == ninf ? ninf : mx + log(s);
}

// ---- corpus and chunk views ----------------------------------------------------------------

struct ChunkView {
  const std::uint32_t* sent;   // [n] sentence ids, span order
  const std::size_t* slots;    // [n+1] first row of each sentence
  const std::uint32_t* order;  // [n] block → chunk sentence (longest first: the length buckets)
};

__device__ bool row_has_edge(const std::size_t* edge_off, std::size_t tok, std::size_t t) {
  return edge_off != nullptr && t > 0 && edge_off[tok + 1] > edge_off[tok];
}

/// Block per chunk sentence: row → token, row has edge items, and token → row.
__global__ void fill_rows_kernel(ChunkView ch, const std::size_t* sent_off, const std::size_t* edge_off,
                                 std::size_t* row_token, std::uint8_t* row_edge, int* token_slot) {
  const unsigned i = blockIdx.x;
  const std::size_t tok0 = sent_off[ch.sent[i]], T = sent_off[ch.sent[i] + 1] - tok0;
  const std::size_t r0 = ch.slots[i];
  for (std::size_t t = threadIdx.x; t < T; t += blockDim.x) {
    row_token[r0 + t] = tok0 + t;
    row_edge[r0 + t] = row_has_edge(edge_off, tok0 + t, t) ? 1 : 0;
    if (token_slot) token_slot[tok0 + t] = int(r0 + t);
  }
}

__global__ void reset_slots_kernel(std::size_t rows, const std::size_t* row_token, int* token_slot) {
  for (std::size_t r = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::size_t(gridDim.x) * blockDim.x)
    token_slot[row_token[r]] = -1;
}

/// S[r][y] = Σ_k x_k · W[a_k·L + y] over the token's items in CSR order, without FMA contraction
/// (bitwise the CPU's sum).
__global__ void emission_kernel(int L, std::size_t rows, const std::size_t* row_token,
                                const std::size_t* state_off, const std::uint32_t* ids,
                                const double* vals, const double* W, double* S) {
  const std::size_t n = rows * std::size_t(L);
  for (std::size_t idx = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; idx < n;
       idx += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = idx / L, y = idx - r * L;
    const std::size_t tok = row_token[r];
    double acc = 0;
    for (std::size_t k = state_off[tok]; k < state_off[tok + 1]; ++k)
      acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[std::size_t(ids[k]) * L + y]));
    S[idx] = acc;
  }
}

/// Block per row with edge items: τ_t = τ + Σ_k x_k · W_e[k] (CPU order, no FMA contraction).
__global__ void edge_matrix_kernel(int L, const std::size_t* row_token, const std::uint8_t* row_edge,
                                   const std::size_t* edge_off, const std::uint32_t* ids,
                                   const double* vals, const double* trans, const double* WE,
                                   double* M) {
  const std::size_t r = blockIdx.x;
  if (!row_edge[r]) return;
  const std::size_t LL = std::size_t(L) * L, tok = row_token[r];
  double* out = M + r * LL;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    double acc = trans[j];
    for (std::size_t k = edge_off[tok]; k < edge_off[tok + 1]; ++k)
      acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, WE[std::size_t(ids[k]) * LL + j]));
    out[j] = acc;
  }
}

/// One block: τ_max = max τ (0 when not finite), E = exp(τ − τ_max), Eᵀ.
__global__ void prepare_kernel(int L, const double* trans, double* E, double* Et, double* tmax_out) {
  __shared__ double red[32];
  const std::size_t LL = std::size_t(L) * L;
  double m = -CUDART_INF;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) m = fmax(m, trans[j]);
  double tmax = block_max(m, red);
  if (!isfinite(tmax)) tmax = 0;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    const double e = exp(trans[j] - tmax);
    const std::size_t yp = j / L, y = j - yp * L;
    E[j] = e;
    Et[y * L + yp] = e;
  }
  if (threadIdx.x == 0) *tmax_out = tmax;
}

// ---- forward-backward ------------------------------------------------------------------------

struct FbParams {
  int L;
  const std::size_t* sent_off;  // corpus [S+1]
  const std::size_t* edge_off;  // corpus [N+1], null when E == 0
  const std::uint32_t* labels;  // corpus [N] gold labels
  ChunkView ch;
  const double* S;      // [rows][L] emissions
  const double* trans;  // [L][L] τ (zeros when transitions are off)
  const double* E;      // [L][L] exp(τ − τ_max)
  const double* Et;     // [L][L] Eᵀ
  const double* tmax;   // τ_max (device scalar)
  double* edge;         // [rows][L][L]: in τ_t at rows with edge items; out p_t − 1(gold) (pair mode); or null
  double* la;           // [rows][L] log α, log domain
  double* lb;           // [rows][L] log β, log domain
  double* node;         // [rows][L] out: p_t(y) (− 1(gold) in gold mode), or null
  double* pair;         // [n][L][L] out: Σ_{t≥1} p_t(y', y) − gold counts, or null
  double* result;       // [n] out: log Z − score(gold) in gold mode, else log Z
  bool gold;            // labels known: loss and deltas
  bool backward;        // run the backward pass (node/pair outputs)
  bool shared_E;        // copy E, Eᵀ into shared memory (when 2·L² doubles fit)
};

/// One block per sentence; thread y handles labels y, y + blockDim, … . Dynamic shared memory:
/// vec [L], red [32], then E, Eᵀ [L][L] each when shared_E.
__global__ void __launch_bounds__(512) forward_backward_kernel(FbParams p) {
  extern __shared__ double smem[];
  const int L = p.L;
  const std::size_t LL = std::size_t(L) * L;
  const int tid = threadIdx.x, nth = blockDim.x;
  double* vec = smem;
  double* red = smem + L;
  const double* E = p.E;
  const double* Et = p.Et;
  if (p.shared_E) {
    double* sE = red + 32;
    double* sEt = sE + LL;
    for (std::size_t j = tid; j < LL; j += nth) {
      sE[j] = p.E[j];
      sEt[j] = p.Et[j];
    }
    E = sE;
    Et = sEt;
    __syncthreads();
  }
  const double tmax = *p.tmax;
  const unsigned i = p.ch.order[blockIdx.x];
  const std::uint32_t sid = p.ch.sent[i];
  const std::size_t tok0 = p.sent_off[sid], T = p.sent_off[sid + 1] - tok0;
  if (T == 0) {
    if (tid == 0) p.result[i] = 0;
    if (p.pair)
      for (std::size_t j = tid; j < LL; j += nth) p.pair[std::size_t(i) * LL + j] = 0;
    return;
  }
  const std::size_t r0 = p.ch.slots[i];
  const double* S = p.S + r0 * L;
  double* la = p.la + r0 * L;
  double* lb = p.lb + r0 * L;
  auto edge_at = [&](std::size_t t) -> double* {
    return p.edge && row_has_edge(p.edge_off, tok0 + t, t) ? p.edge + (r0 + t) * LL : nullptr;
  };

  // Forward: log α_t(y) = s_t(y) + log Σ_y' exp(log α_{t−1}(y') + τ_t(y', y)).
  for (int y = tid; y < L; y += nth) la[y] = S[y];
  __syncthreads();
  for (std::size_t t = 1; t < T; ++t) {
    const double* ap = la + (t - 1) * L;
    double* at = la + t * L;
    const double* st = S + t * L;
    const double* M = edge_at(t);
    if (M) {  // per-position matrix: exact log space
      for (int y = tid; y < L; y += nth)
        at[y] = st[y] + log_sum_exp_seq(L, [&](int yp) { return ap[yp] + M[std::size_t(yp) * L + y]; });
    } else {  // shared matrix: m + τ_max + log Σ_y' exp(log α − m) · E(y', y)
      double mloc = -CUDART_INF;
      for (int y = tid; y < L; y += nth) mloc = fmax(mloc, ap[y]);
      const double m = block_max(mloc, red);
      for (int y = tid; y < L; y += nth) vec[y] = exp(ap[y] - m);
      __syncthreads();
      for (int y = tid; y < L; y += nth) {
        double sum = 0;
        for (int yp = 0; yp < L; ++yp) sum += vec[yp] * E[std::size_t(yp) * L + y];
        if (sum > kTiny && isfinite(m)) {
          at[y] = st[y] + (m + tmax + log(sum));
        } else {
          const double* tr = p.trans;
          at[y] = st[y] + log_sum_exp_seq(L, [&](int yp) { return ap[yp] + tr[std::size_t(yp) * L + y]; });
        }
      }
    }
    __syncthreads();
  }

  // log Z = log Σ_y exp(log α_{T−1}(y)).
  const double* aT = la + (T - 1) * L;
  double mloc = -CUDART_INF;
  for (int y = tid; y < L; y += nth) mloc = fmax(mloc, aT[y]);
  const double mz = block_max(mloc, red);
  double sloc = 0;
  for (int y = tid; y < L; y += nth) sloc += exp(aT[y] - mz);
  const double total = block_sum(sloc, red);
  const double log_z = isfinite(mz) ? mz + log(total) : mz;

  // Score of the gold path (before τ_t is overwritten by the deltas), one thread, in t order.
  if (tid == 0) {
    double score = 0;
    if (p.gold) {
      const std::uint32_t* g = p.labels + tok0;
      for (std::size_t t = 0; t < T; ++t) {
        score += S[t * L + g[t]];
        if (t > 0) {
          const double* M = edge_at(t);
          score += (M ? M : p.trans)[std::size_t(g[t - 1]) * L + g[t]];
        }
      }
    }
    p.result[i] = log_z - score;
  }
  if (!p.backward) return;

  // Backward: log β_{t−1}(y') = log Σ_y exp(τ_t(y', y) + s_t(y) + log β_t(y)); marginals.
  double* pair = p.pair ? p.pair + std::size_t(i) * LL : nullptr;
  if (pair)
    for (std::size_t j = tid; j < LL; j += nth) pair[j] = 0;
  for (int y = tid; y < L; y += nth) lb[(T - 1) * L + y] = 0;
  __syncthreads();
  auto node = [&](std::size_t t) {
    if (!p.node) return;
    const std::uint32_t g = p.gold ? p.labels[tok0 + t] : 0xffffffffu;
    double* out = p.node + (r0 + t) * L;
    for (int y = tid; y < L; y += nth) {
      const double v = exp(la[t * L + y] + lb[t * L + y] - log_z);
      out[y] = std::uint32_t(y) == g ? v - 1.0 : v;
    }
  };
  node(T - 1);
  for (std::size_t t = T - 1; t > 0; --t) {
    const double* bt = lb + t * L;
    const double* st = S + t * L;
    double* bp = lb + (t - 1) * L;
    double* M = edge_at(t);
    if (M) {
      for (int yp = tid; yp < L; yp += nth) {
        const double* row = M + std::size_t(yp) * L;
        bp[yp] = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y]; });
      }
    } else {
      double ml = -CUDART_INF;
      for (int y = tid; y < L; y += nth) ml = fmax(ml, st[y] + bt[y]);
      const double m = block_max(ml, red);
      for (int y = tid; y < L; y += nth) vec[y] = exp(st[y] + bt[y] - m);
      __syncthreads();
      for (int yp = tid; yp < L; yp += nth) {
        double sum = 0;
        for (int y = 0; y < L; ++y) sum += Et[std::size_t(y) * L + yp] * vec[y];
        if (sum > kTiny && isfinite(m)) {
          bp[yp] = m + tmax + log(sum);
        } else {
          const double* row = p.trans + std::size_t(yp) * L;
          bp[yp] = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y]; });
        }
      }
    }
    __syncthreads();  // log β_{t−1} complete; every read of τ_t for it is done
    if (pair) {
      // p_t(y', y) = exp(log α_{t−1}(y') + τ_t(y', y) + s_t(y) + log β_t(y) − log Z), exact.
      const double* ap = la + (t - 1) * L;
      const std::size_t gj = p.gold ? std::size_t(p.labels[tok0 + t - 1]) * L + p.labels[tok0 + t] : LL;
      for (std::size_t j = tid; j < LL; j += nth) {
        const std::size_t yp = j / L, y = j - yp * L;
        const double tau = M ? M[j] : p.trans[j];
        const double pr = exp(ap[yp] + tau + st[y] + bt[y] - log_z);
        const double d = j == gj ? pr - 1.0 : pr;
        pair[j] += d;
        if (M) M[j] = d;
      }
    }
    node(t - 1);
    __syncthreads();
  }
}

// ---- Viterbi -------------------------------------------------------------------------------

/// What both Viterbi kernels read: the chunk and its scores.
struct DecodeInputs {
  int L;
  const std::size_t* sent_off;
  const std::size_t* edge_off;
  ChunkView ch;
  const double* S;      // [rows][L]
  const double* trans;  // [L][L]
  const double* edge;   // [rows][L][L] or null
};

struct ViterbiParams : DecodeInputs {
  double* d;            // [rows][L] best path score ending in (t, y)
  std::uint32_t* back;  // [rows][L] argmax predecessor
  std::uint32_t* out;   // [rows] labels
  double* score;        // [chunk sentences] best path score, or null
};

/// Block per sentence, threads over labels; the CPU's loop order and strict comparisons, so ties
/// go to the smallest label id at every step and at the end.
__global__ void viterbi_kernel(ViterbiParams p) {
  const int L = p.L;
  const std::size_t LL = std::size_t(L) * L;
  const int tid = threadIdx.x, nth = blockDim.x;
  const unsigned i = p.ch.order[blockIdx.x];
  const std::uint32_t sid = p.ch.sent[i];
  const std::size_t tok0 = p.sent_off[sid], T = p.sent_off[sid + 1] - tok0;
  if (T == 0) {
    if (p.score && tid == 0) p.score[i] = 0.0;
    return;
  }
  const std::size_t r0 = p.ch.slots[i];
  const double* S = p.S + r0 * L;
  double* d = p.d + r0 * L;
  std::uint32_t* back = p.back + r0 * L;
  for (int y = tid; y < L; y += nth) d[y] = S[y];
  __syncthreads();
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = p.edge && row_has_edge(p.edge_off, tok0 + t, t) ? p.edge + (r0 + t) * LL : p.trans;
    const double* dp = d + (t - 1) * L;
    for (int yc = tid; yc < L; yc += nth) {
      double best = -CUDART_INF;
      std::uint32_t arg = 0;
      for (int yp = 0; yp < L; ++yp) {
        const double v = dp[yp] + M[std::size_t(yp) * L + yc];
        if (v > best) {  // strict: ties keep the smallest label id
          best = v;
          arg = std::uint32_t(yp);
        }
      }
      d[t * L + yc] = best + S[t * L + yc];
      back[t * L + yc] = arg;
    }
    __syncthreads();
  }
  if (tid == 0) {
    double best = -CUDART_INF;
    std::uint32_t arg = 0;
    for (int y = 0; y < L; ++y)
      if (d[(T - 1) * L + y] > best) {
        best = d[(T - 1) * L + y];
        arg = std::uint32_t(y);
      }
    if (p.score) p.score[i] = best;
    std::uint32_t* out = p.out + r0;
    out[T - 1] = arg;
    for (std::size_t t = T - 1; t > 0; --t) {
      arg = back[t * L + arg];
      out[t - 1] = arg;
    }
  }
}

// ---- n-best Viterbi -------------------------------------------------------------------------

struct NbestParams : DecodeInputs {
  unsigned n;
  double* d;            // [rows][L][n] score of the k-th best partial path ending in (t, y)
  std::uint32_t* back;  // [rows][L][n] its predecessor yp·n + k
  std::uint32_t* out;   // [rows·n] labels: the sentence at slot r0 from out + n·r0, path r at + r·T
  double* score;        // [chunk sentences][n]
};

/// The n-best order of host/cpu/chain.hpp: higher score first, ties to the smaller index.
__device__ __forceinline__ bool nbest_before(double sa, std::uint32_t ia, double sb, std::uint32_t ib) {
  return sa > sb || (sa == sb && ia < ib);
}

/// Merges L sorted lists, list yp being value(yp·n + k) for k = 0 … n − 1 (−∞ at its end), into
/// the sorted buffer (s, ix) of the first n in the n-best order; returns how many. The
/// list-at-a-time merge of merge_best in host/cpu/chain.cpp: a list whose head does not beat a
/// full buffer's last entry is skipped, otherwise a forward count of how many of each run make
/// the first n and a backward in-place merge. O(L·n) at worst, for any n.
template <class Value>
__device__ unsigned nbest_merge(int L, unsigned n, Value value, double* s, std::uint32_t* ix) {
  unsigned m = 0;
  for (int yp = 0; yp < L; ++yp) {
    const std::uint32_t base = std::uint32_t(yp) * n;
    const double head = value(base);
    if (head == -CUDART_INF || (m == n && !nbest_before(head, base, s[n - 1], ix[n - 1]))) continue;
    unsigned a = 0, b = 0;  // how many of the buffer and of the list are among the first n
    while (a + b < n) {
      if (b < n) {
        const double c = value(base + b);
        if (c != -CUDART_INF && (a == m || nbest_before(c, base + b, s[a], ix[a]))) {
          ++b;
          continue;
        }
      }
      if (a == m) break;
      ++a;
    }
    const unsigned total = a + b;
    for (unsigned out = total; b > 0;) {  // backward, in place
      const double c = value(base + b - 1);
      --out;
      if (a > 0 && nbest_before(c, base + b - 1, s[a - 1], ix[a - 1])) {
        --a;
        s[out] = s[a];
        ix[out] = ix[a];
      } else {
        --b;
        s[out] = c;
        ix[out] = base + b;
      }
    }
    m = total;
  }
  return m;
}

/// Block per sentence, threads over labels. Each (t, y) merges the L sorted predecessor lists
/// into its n best partial paths with nbest_merge, the output row itself as the buffer: the same
/// lists as the CPU's under the same strict order, and the same additions (d + τ, then + s), so
/// the same scores bit for bit.
__global__ void viterbi_nbest_kernel(NbestParams p) {
  const int L = p.L;
  const unsigned n = p.n;
  const std::size_t LL = std::size_t(L) * L, LK = std::size_t(L) * n;
  const int tid = threadIdx.x, nth = blockDim.x;
  const unsigned i = p.ch.order[blockIdx.x];
  const std::uint32_t sid = p.ch.sent[i];
  const std::size_t tok0 = p.sent_off[sid], T = p.sent_off[sid + 1] - tok0;
  double* score = p.score + std::size_t(i) * n;
  if (T == 0) {
    for (unsigned r = tid; r < n; r += nth) score[r] = -CUDART_INF;
    return;
  }
  const std::size_t r0 = p.ch.slots[i];
  const double* S = p.S + r0 * L;
  double* d = p.d + r0 * LK;
  std::uint32_t* back = p.back + r0 * LK;
  for (std::size_t j = tid; j < LK; j += nth) {
    d[j] = j % n == 0 ? S[j / n] : -CUDART_INF;
    back[j] = 0;
  }
  __syncthreads();
  for (std::size_t t = 1; t < T; ++t) {
    const double* M = p.edge && row_has_edge(p.edge_off, tok0 + t, t) ? p.edge + (r0 + t) * LL : p.trans;
    const double* dp = d + (t - 1) * LK;
    for (int yc = tid; yc < L; yc += nth) {
      double* dc = d + t * LK + std::size_t(yc) * n;
      std::uint32_t* bc = back + t * LK + std::size_t(yc) * n;
      const unsigned m = nbest_merge(
          L, n, [&](std::uint32_t j) { return dp[j] + M[std::size_t(j / n) * L + yc]; }, dc, bc);
      for (unsigned r = 0; r < m; ++r) dc[r] = dc[r] + S[t * L + yc];
      for (unsigned r = m; r < n; ++r) {
        dc[r] = -CUDART_INF;
        bc[r] = 0;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    // The ends: the same merge over the last position's lists, into score[] and, for the
    // indices, back's row 0 (never read by the backtrack).
    const double* dl = d + (T - 1) * LK;
    std::uint32_t* ends = back;
    const unsigned m = nbest_merge(L, n, [&](std::uint32_t j) { return dl[j]; }, score, ends);
    std::uint32_t* out = p.out + n * r0;
    for (unsigned r = 0; r < m; ++r) {
      std::uint32_t* path = out + std::size_t(r) * T;
      std::uint32_t j = ends[r];
      for (std::size_t t = T; t-- > 0;) {
        path[t] = j / n;
        if (t > 0) j = back[t * LK + j];
      }
    }
    for (unsigned r = m; r < n; ++r) {
      score[r] = -CUDART_INF;
      for (std::size_t t = 0; t < T; ++t) out[std::size_t(r) * T + t] = 0;
    }
  }
}

// ---- the marginal reduction ------------------------------------------------------------------

/// Warp per (attribute, block of 32 columns): g[a·width + c] += scale · Σ x · delta[row][c] over
/// the attribute's occurrences (token order) whose token is in the chunk. Occurrences are read
/// 32 at a time and the active ones processed in lane order, so the sum order is fixed.
__global__ void __launch_bounds__(kGatherWarps * 32)
    gather_kernel(std::size_t num_attrs, std::size_t width, const std::size_t* occ_off,
                  const std::uint32_t* occ_tok, const double* occ_val, const int* token_slot,
                  const double* delta, double scale, double* G) {
  const std::size_t col_blocks = (width + 31) / 32;
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  if (warp >= num_attrs * col_blocks) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const std::size_t a = warp / col_blocks, c = (warp - a * col_blocks) * 32 + lane;
  const std::size_t b = occ_off[a], e = occ_off[a + 1];
  double acc = 0;
  bool touched = false;
  for (std::size_t k0 = b; k0 < e; k0 += 32) {
    const std::size_t k = k0 + lane;
    int slot = -1;
    double v = 0;
    if (k < e) {
      slot = token_slot[occ_tok[k]];
      v = occ_val ? occ_val[k] : 1.0;
    }
    unsigned mask = __ballot_sync(0xffffffffu, slot >= 0);
    touched |= mask != 0;
    while (mask) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const int s = __shfl_sync(0xffffffffu, slot, src);
      const double x = __shfl_sync(0xffffffffu, v, src);
      if (c < width) acc += x * delta[std::size_t(s) * width + c];
    }
  }
  if (touched && c < width) G[a * width + c] += scale * acc;
}

/// Transition tree, level 1: partial[g][j] = Σ_{i in group g, in order} pair[i][j].
__global__ void trans_partial_kernel(std::size_t LL, unsigned n, const double* pair, double* partial) {
  const std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (j >= LL) return;
  const unsigned groups = (n + kTransGroup - 1) / kTransGroup;
  for (unsigned g = blockIdx.y; g < groups; g += gridDim.y) {
    const unsigned b = g * kTransGroup, e = min(n, b + kTransGroup);
    double s = 0;
    for (unsigned i = b; i < e; ++i) s += pair[std::size_t(i) * LL + j];
    partial[std::size_t(g) * LL + j] = s;
  }
}

/// Level 2: G[j] += scale · Σ_g partial[g][j], groups in order.
__global__ void trans_final_kernel(std::size_t LL, unsigned groups, const double* partial, double scale,
                                   double* G) {
  const std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (j >= LL) return;
  double s = 0;
  for (unsigned g = 0; g < groups; ++g) s += partial[std::size_t(g) * LL + j];
  G[j] += scale * s;
}

// ---- backend objects -------------------------------------------------------------------------

struct CudaVector final : Vector {
  CudaVector(const void* owner, std::size_t n) : owner(owner), buf(n) {}
  std::size_t size() const override { return buf.size(); }
  const void* owner;
  DeviceBuffer<double> buf;
};

struct CudaCorpus final : BackendCorpus {
  const void* owner = nullptr;
  Corpus host;  // host copy: support sets, feature differences, SAG span plans
  std::size_t S = 0, N = 0, max_len = 0;
  std::vector<std::size_t> h_sent_off;  // [S+1] host copy (chunk planning)
  std::vector<std::uint8_t> h_labeled;  // [S] every token has a gold label
  DeviceBuffer<std::size_t> sent_off, state_off, edge_off;
  DeviceBuffer<std::uint32_t> state_ids, edge_ids, labels;
  DeviceBuffer<double> state_vals, edge_vals;
  // Transposes (attribute → occurrences in token order); edge items at t = 0 are left out (no
  // edge at the first position, as on the CPU).
  DeviceBuffer<std::size_t> st_off, et_off;  // [A+1], [E+1]
  DeviceBuffer<std::uint32_t> st_tok, et_tok;
  DeviceBuffer<double> st_val, et_val;
  DeviceBuffer<int> token_slot;  // [N] row of the token in the current chunk, −1 otherwise
  std::size_t num_sentences() const override { return S; }
  std::size_t num_tokens() const override { return N; }
};

/// A sparse vector on the device: nnz (index, value) pairs, indices strictly increasing;
/// grow-only capacity (no allocation once the largest support has been seen).
struct CudaSparse final : SparseVector {
  explicit CudaSparse(const void* owner) : owner(owner) {}
  std::size_t nnz() const override { return n; }
  void reserve(std::size_t m) {
    if (m <= index.size() && m <= value.size()) return;
    const std::size_t cap = std::max(m, 2 * index.size());
    index.resize(cap);  // on failure the buffer is empty: the next reserve retries both
    value.resize(cap);
  }
  const void* owner;
  std::size_t n = 0;
  std::size_t end = 0;  // last index + 1 (0 when empty), for the bounds check on the host
  DeviceBuffer<std::size_t> index;
  DeviceBuffer<double> value;
};

// ---- SAG / SAGA (seed 004): stored marginals and lazy steps on the device ------------------

constexpr std::uint32_t kNone = 0xffffffffu;
constexpr std::size_t kSagHistory = std::size_t(1) << 16;  // initial lazy-step capacity (grows)

/// The weight groups of backend.hpp: per state attribute a its L weights, the L² transitions
/// (group A), per edge attribute e its L² block (group A + 1 + e).
struct SagGroups {
  std::uint32_t A;
  std::size_t L, LL, trans_off, edge_off;
  __device__ std::size_t begin(std::uint32_t gid) const {
    if (gid < A) return std::size_t(gid) * L;
    if (gid == A) return trans_off;
    return edge_off + (std::size_t(gid) - A - 1) * LL;
  }
  __device__ std::size_t size(std::uint32_t gid) const { return gid < A ? L : LL; }
};

/// Device view of a SpanPlan (below): its touched groups in ascending id order, the offset of
/// each group in the compact per-span arrays (g, saved), and per group its occurrences in the
/// span in (sentence, token, item) order: span row of the token, stored row (token id for state
/// groups, edge slot for edge groups), value, and span index of the sentence.
struct SagSpanView {
  const std::uint32_t* groups;  // [ng]
  const std::size_t* gofs;      // [ng + 1]
  const std::uint32_t* oofs;    // [ng + 1]
  const std::uint32_t* onew;    // [occ]
  const std::uint32_t* oold;    // [occ]
  const std::uint32_t* osent;   // [occ]
  const double* oval;           // [occ]
  const std::uint32_t* sid;     // [n] sentence ids, span order
  std::uint32_t n;
};

/// Composite map of the lazy steps stamp+1 … k on every listed group (all groups when `list` is
/// null); block per group. Explicit round-to-nearest arithmetic: the CPU's formula, no FMA.
__global__ void sag_catch_up_kernel(SagGroups gl, const std::uint32_t* list, std::size_t count, std::uint32_t k,
                                    const double* P, const double* S, const double* R, std::uint32_t* stamp,
                                    double* w, const double* d) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = list ? list[q] : std::uint32_t(q);
    const std::uint32_t k0 = stamp[gid];
    if (k0 != k) {  // block-uniform
      const double ratio = P[k] / P[k0];
      const double sd = __dmul_rn(P[k0], __dsub_rn(S[k], S[k0]));
      const double r = __dmul_rn(P[k0], __dsub_rn(R[k], R[k0]));
      const std::size_t b = gl.begin(gid), e = b + gl.size(gid);
      for (std::size_t j = b + threadIdx.x; j < e; j += blockDim.x) {
        const double x = __dsub_rn(w[j], __dmul_rn(d[j], sd));
        if (r > 0) {
          const double m = fabs(x) - r;
          w[j] = m > 0 ? __dmul_rn(ratio, copysign(m, x)) : 0.0;
        } else {
          w[j] = __dmul_rn(ratio, x);
        }
      }
    }
    __syncthreads();  // every thread has read stamp[gid]
    if (threadIdx.x == 0) stamp[gid] = k;
  }
}

/// g (compact, per group) = scale · Σ over the span's occurrences of x · (μ_new − gold);
/// transitions: scale · Σ over the span's sentences of the pairwise deltas. Fixed order per entry.
__global__ void sag_gradient_kernel(SagGroups gl, SagSpanView v, std::size_t count, const double* new_node,
                                    const double* new_pair, const double* new_edge, double scale, double* g) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid);
    double* out = g + v.gofs[q];
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      double acc = 0;
      if (gid == gl.A) {
        for (std::uint32_t i = 0; i < v.n; ++i) acc = __dadd_rn(acc, new_pair[std::size_t(i) * gl.LL + c]);
      } else {
        const double* src = gid < gl.A ? new_node : new_edge;
        for (std::uint32_t o = v.oofs[q]; o < v.oofs[q + 1]; ++o)
          acc = __dadd_rn(acc, __dmul_rn(v.oval[o], src[std::size_t(v.onew[o]) * size + c]));
      }
      out[c] = __dmul_rn(scale, acc);
    }
  }
}

/// Line-search trial (save = true: saved ← w, w ← w − step·g) or restore (w ← saved) on the
/// span's groups.
__global__ void sag_trial_kernel(SagGroups gl, SagSpanView v, std::size_t count, bool save, double step,
                                 const double* g, double* saved, double* w) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid), o = v.gofs[q];
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      if (save) {
        saved[o + c] = w[b + c];
        w[b + c] = __dsub_rn(w[b + c], __dmul_rn(step, g[o + c]));
      } else {
        w[b + c] = saved[o + c];
      }
    }
  }
}

/// d += Δ_i and w −= coef_i·Δ_i, Δ_i = X_iᵀ(μ_new,i − μ_stored,i), per weight in the span's
/// (sentence, token, item) order, as the CPU.
__global__ void sag_commit_kernel(SagGroups gl, SagSpanView v, std::size_t count, const double* new_node,
                                  const double* old_node, const double* new_pair, const double* old_pair,
                                  const double* new_edge, const double* old_edge, const double* coef, double* d,
                                  double* w) {
  for (std::size_t q = blockIdx.x; q < count; q += gridDim.x) {
    const std::uint32_t gid = v.groups[q];
    const std::size_t size = gl.size(gid), b = gl.begin(gid);
    for (std::size_t c = threadIdx.x; c < size; c += blockDim.x) {
      double dj = d[b + c], wj = coef ? w[b + c] : 0.0;
      if (gid == gl.A) {
        for (std::uint32_t i = 0; i < v.n; ++i) {
          const double x = __dsub_rn(new_pair[std::size_t(i) * gl.LL + c], old_pair[std::size_t(v.sid[i]) * gl.LL + c]);
          dj = __dadd_rn(dj, x);
          if (coef) wj = __dsub_rn(wj, __dmul_rn(coef[i], x));
        }
      } else {
        const double* nw = gid < gl.A ? new_node : new_edge;
        const double* od = gid < gl.A ? old_node : old_edge;
        for (std::uint32_t o = v.oofs[q]; o < v.oofs[q + 1]; ++o) {
          const double x = __dmul_rn(
              v.oval[o], __dsub_rn(nw[std::size_t(v.onew[o]) * size + c], od[std::size_t(v.oold[o]) * size + c]));
          dj = __dadd_rn(dj, x);
          if (coef) wj = __dsub_rn(wj, __dmul_rn(coef[v.osent[o]], x));
        }
      }
      d[b + c] = dj;
      if (coef) w[b + c] = wj;
    }
  }
}

/// μ_stored ← μ_new: block per span row (node marginals; the position's pairwise marginals when
/// it has an edge slot), then block per span sentence (summed pairwise marginals).
__global__ void sag_store_kernel(std::size_t L, std::size_t rows, std::uint32_t n, const std::uint32_t* row_tok,
                                 const std::uint32_t* row_slot, const std::uint32_t* sid, const double* new_node,
                                 const double* new_pair, const double* new_edge, double* old_node,
                                 double* old_pair, double* old_edge) {
  const std::size_t LL = L * L;
  for (std::size_t b = blockIdx.x; b < rows + n; b += gridDim.x) {
    if (b < rows) {
      for (std::size_t y = threadIdx.x; y < L; y += blockDim.x)
        old_node[std::size_t(row_tok[b]) * L + y] = new_node[b * L + y];
      if (row_slot[b] != kNone)
        for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
          old_edge[std::size_t(row_slot[b]) * LL + j] = new_edge[b * LL + j];
    } else if (old_pair) {
      const std::size_t i = b - rows;
      for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
        old_pair[std::size_t(sid[i]) * LL + j] = new_pair[i * LL + j];
    }
  }
}

/// Grows a scratch buffer (never shrinks; the contents are not kept).
template <class T>
void reserve_device(DeviceBuffer<T>& b, std::size_t n) {
  if (b.size() < n) b.resize(std::max(n, 2 * b.size()));
}

/// A span planned on the host for the span-local kernels (SAG and evaluate_sparse): its touched
/// weight groups in ascending id order (so their weights ascend: the layout of S(span)), the
/// offset of each group in the compact per-span arrays, and per group its occurrences in
/// (sentence, token, item) order — span row of the token, stored row (token id for state groups,
/// edge slot for edge groups; SAG only), value, span index of the sentence — plus per span row
/// its token and edge slot. Host vectors are reused; device copies are grow-only.
struct SpanPlan {
  std::vector<std::uint32_t> sid, row_tok, row_slot, groups, oofs, onew, oold, osent, mark, local;
  std::vector<std::size_t> gofs;
  std::vector<double> oval;
  std::vector<std::uint32_t> scratch_ids;     // planning scratch, reused (no per-step allocation)
  std::vector<std::size_t> scratch_count;
  std::uint32_t generation = 0;
  std::size_t rows = 0;
  bool valid = false;  // host and device plan complete (cleared first by plan_span)
  DeviceBuffer<std::uint32_t> d_sid, d_row_tok, d_row_slot, d_groups, d_oofs, d_onew, d_oold, d_osent;
  DeviceBuffer<std::size_t> d_gofs;
  DeviceBuffer<double> d_oval;
  std::size_t compact() const { return gofs.empty() ? 0 : gofs.back(); }
  SagSpanView view() const {
    return {d_groups.get(), d_gofs.get(), d_oofs.get(), d_onew.get(), d_oold.get(), d_osent.get(),
            d_oval.get(), d_sid.get(), std::uint32_t(sid.size())};
  }
};

/// SAG / SAGA state on the device. Stored marginals are kept as deltas μ − gold (all zero at the
/// start, which is the contract's "gold indicators"), so Δ_i = X_iᵀ(δ_new − δ_stored).
struct CudaSag final : SagState {
  const void* owner = nullptr;
  const CudaCorpus* corpus = nullptr;
  std::size_t groups = 0;                   // A + 1 + E
  DeviceBuffer<double> node, pair, edge;    // [N][L], [S][L][L], [edge slots][L][L]
  std::vector<std::uint32_t> edge_slot;     // [N] host: slot of a position with edge items, or kNone
  // Lazy bookkeeping: P, S, R appended on the host, mirrored before every catch-up.
  std::vector<double> P{1.0}, S{0.0}, R{0.0};
  std::size_t uploaded = 0;
  DeviceBuffer<double> dP, dS, dR;          // [capacity ≥ k + 1], doubled when full
  DeviceBuffer<std::uint32_t> stamp;        // [groups]
  SpanPlan plan;                            // the current span
  DeviceBuffer<double> coef;                // SAGA's per-sentence coefficients
  // Pending marginals of the span (deltas), its gradient g and the trial's saved weights.
  DeviceBuffer<double> new_node, new_pair, new_edge, g, saved;
  bool synced = false;  // sag_sync succeeded for the current span
  bool evaluated = false, tried = false;
  std::size_t k() const { return P.size() - 1; }
};

/// Attribute → occurrences (token id, value), token order; `keep(tok)` filters tokens. Binary
/// attributes (no values) give no values either.
template <class Keep>
void transpose_csr(std::size_t num_attrs, const std::vector<std::size_t>& off,
                   const std::vector<std::uint32_t>& ids, const std::vector<double>& vals, Keep keep,
                   std::vector<std::size_t>& t_off, std::vector<std::uint32_t>& t_tok,
                   std::vector<double>& t_val) {
  const std::size_t N = off.size() - 1;
  t_off.assign(num_attrs + 1, 0);
  for (std::size_t tok = 0; tok < N; ++tok)
    if (keep(tok))
      for (std::size_t k = off[tok]; k < off[tok + 1]; ++k) ++t_off[ids[k] + 1];
  for (std::size_t a = 0; a < num_attrs; ++a) t_off[a + 1] += t_off[a];
  t_tok.resize(t_off[num_attrs]);
  t_val.resize(vals.empty() ? 0 : t_off[num_attrs]);
  std::vector<std::size_t> cur(t_off.begin(), t_off.end() - 1);
  for (std::size_t tok = 0; tok < N; ++tok)
    if (keep(tok))
      for (std::size_t k = off[tok]; k < off[tok + 1]; ++k) {
        const std::size_t pos = cur[ids[k]]++;
        t_tok[pos] = std::uint32_t(tok);
        if (!vals.empty()) t_val[pos] = vals[k];
      }
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Dims& dims, const CudaBackendConfig& cfg) : Backend(dims), cfg_(cfg) {
    if (dims.L == 0) throw Error("a model needs at least one label");
    if (dims.L > kMaxLabels)
      throw Error("the CUDA backend supports up to " + std::to_string(kMaxLabels) + " labels (model has " +
                  std::to_string(dims.L) + "); use --device cpu");
    CRFX_CUDA_CHECK(cudaSetDevice(cfg.device));
    CRFX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {  // the destructor does not run for a constructor that throws: the stream is ours here
      name_ = "cuda:" + std::to_string(cfg.device) + " " + device_description(cfg.device);
      const std::size_t LL = std::size_t(dims.L) * dims.L;
      E_.resize(LL);
      Et_.resize(LL);
      zeros_.resize(LL);
      tmax_.resize(1);
      red_.resize(kRedBlocks + 1);
      CRFX_CUDA_CHECK(cudaMemsetAsync(zeros_.get(), 0, LL * sizeof(double), stream_));
      threads_ = int(std::min<std::size_t>(512, (dims.L + 31) / 32 * 32));
      const std::size_t base_smem = (std::size_t(dims.L) + 32) * sizeof(double);
      shared_E_ = base_smem + 2 * LL * sizeof(double) <= kSharedLimit;
      smem_ = base_smem + (shared_E_ ? 2 * LL * sizeof(double) : 0);
      sync();
    } catch (...) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
      stream_ = nullptr;
      throw;
    }
  }
  ~CudaBackend() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  std::string name() const override { return name_; }

  // ---- data ------------------------------------------------------------------------------
  BackendCorpusPtr upload(const Corpus& c) override { return upload_owned(Corpus(c)); }
  BackendCorpusPtr upload(Corpus&& c) override { return upload_owned(std::move(c)); }

 private:
  /// Keeps `in` as the corpus's host copy (the span planners read it) and uploads it.
  BackendCorpusPtr upload_owned(Corpus&& in) {
    CRFX_CUDA_CHECK(cudaSetDevice(cfg_.device));
    const std::size_t N = in.num_tokens(), S = in.num_sentences();
    if (N >= std::size_t(std::numeric_limits<int>::max()))
      throw Error("the CUDA backend handles corpora of fewer than 2^31 tokens (" + std::to_string(N) + " given)");
    in.check_values();
    for (auto a : in.state_ids)
      if (a >= dims_.A) throw Error("internal: corpus attribute id beyond the model");
    for (auto e : in.edge_ids)
      if (e >= dims_.E) throw Error("internal: corpus edge attribute id beyond the model");
    for (auto y : in.labels)
      if (y != Corpus::kNoLabel && y >= dims_.L) throw Error("internal: corpus label beyond the model");
    auto up = std::make_unique<CudaCorpus>();
    up->owner = this;
    up->S = S;
    up->N = N;
    up->host = std::move(in);
    const Corpus& c = up->host;
    up->h_sent_off = c.sentence_offsets;
    up->h_labeled.assign(S, 1);
    std::vector<std::uint8_t> first(N, 0);  // token opens its sentence
    for (std::size_t s = 0; s < S; ++s) {
      up->max_len = std::max(up->max_len, c.length(s));
      if (c.length(s)) first[c.sentence_offsets[s]] = 1;
      for (std::size_t t = c.sentence_offsets[s]; t < c.sentence_offsets[s + 1]; ++t)
        if (c.labels[t] == Corpus::kNoLabel) up->h_labeled[s] = 0;
    }
    std::vector<std::size_t> st_off, et_off;
    std::vector<std::uint32_t> st_tok, et_tok;
    std::vector<double> st_val, et_val;
    transpose_csr(dims_.A, c.state_offsets, c.state_ids, c.state_values, [](std::size_t) { return true; },
                  st_off, st_tok, st_val);
    const bool edges = dims_.E > 0 && c.edge_offsets.size() == N + 1;
    if (edges)
      transpose_csr(dims_.E, c.edge_offsets, c.edge_ids, c.edge_values,
                    [&](std::size_t tok) { return !first[tok]; }, et_off, et_tok, et_val);

    // Device memory: the corpus, then the workspace (checked against what is free).
    const std::size_t corpus_bytes =
        (c.sentence_offsets.size() + c.state_offsets.size() + st_off.size() + et_off.size() +
         (edges ? c.edge_offsets.size() : 0)) * sizeof(std::size_t) +
        (c.state_ids.size() + st_tok.size() + c.edge_ids.size() + et_tok.size() + N) * sizeof(std::uint32_t) +
        (c.state_values.size() + st_val.size() + c.edge_values.size() + et_val.size()) * sizeof(double) +
        N * sizeof(int);
    std::size_t free_b = 0, total_b = 0;
    CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (corpus_bytes > free_b)
      throw Error("CUDA backend: the corpus needs " + fmt_mib(corpus_bytes) + " of device memory, only " +
                  fmt_mib(free_b) + " free on " + name_ + "; use --device cpu");
    upload_vector(up->sent_off, c.sentence_offsets, stream_);
    upload_vector(up->state_off, c.state_offsets, stream_);
    upload_vector(up->state_ids, c.state_ids, stream_);
    upload_vector(up->state_vals, c.state_values, stream_);
    upload_vector(up->labels, c.labels, stream_);
    upload_vector(up->st_off, st_off, stream_);
    upload_vector(up->st_tok, st_tok, stream_);
    upload_vector(up->st_val, st_val, stream_);
    if (edges) {
      upload_vector(up->edge_off, c.edge_offsets, stream_);
      upload_vector(up->edge_ids, c.edge_ids, stream_);
      upload_vector(up->edge_vals, c.edge_values, stream_);
      upload_vector(up->et_off, et_off, stream_);
      upload_vector(up->et_tok, et_tok, stream_);
      upload_vector(up->et_val, et_val, stream_);
    }
    up->token_slot.resize(N);
    if (N) CRFX_CUDA_CHECK(cudaMemsetAsync(up->token_slot.get(), 0xff, N * sizeof(int), stream_));  // −1
    sync();  // the host vectors above must outlive the copies
    size_workspace(*up);
    return up;
  }

 public:

  // ---- vectors ---------------------------------------------------------------------------
  VectorPtr vector(std::size_t n) override {
    auto v = std::make_unique<CudaVector>(this, n);
    if (n) CRFX_CUDA_CHECK(cudaMemsetAsync(v->buf.get(), 0, n * sizeof(double), stream_));
    return v;
  }
  void write(Vector& dst, const double* src) override {
    auto& d = V(dst);
    if (d.size())
      CRFX_CUDA_CHECK(cudaMemcpyAsync(d.get(), src, d.size() * sizeof(double), cudaMemcpyHostToDevice, stream_));
    sync();
  }
  void read(const Vector& src, double* dst) override {
    const auto& s = V(src);
    if (s.size())
      CRFX_CUDA_CHECK(cudaMemcpyAsync(dst, s.get(), s.size() * sizeof(double), cudaMemcpyDeviceToHost, stream_));
    sync();
  }
  void fill(Vector& x, double value) override { launch_map(x.size(), FillOp{P(x), value}, stream_); }
  void copy(const Vector& src, Vector& dst) override {
    same(src, dst);
    if (src.size())
      CRFX_CUDA_CHECK(cudaMemcpyAsync(P(dst), P(src), src.size() * sizeof(double), cudaMemcpyDeviceToDevice, stream_));
  }
  void scale(double a, Vector& x) override { launch_map(x.size(), ScaleOp{P(x), a}, stream_); }
  void axpy(double a, const Vector& x, Vector& y) override {
    same(x, y);
    launch_map(x.size(), AxpyOp{P(x), P(y), a}, stream_);
  }
  void axpby(double a, const Vector& x, double b, Vector& y) override {
    same(x, y);
    launch_map(x.size(), AxpbyOp{P(x), P(y), a, b}, stream_);
  }
  void sub(const Vector& x, const Vector& y, Vector& out) override {
    same(x, y);
    same(x, out);
    launch_map(x.size(), SubOp{P(x), P(y), P(out)}, stream_);
  }
  double dot(const Vector& x, const Vector& y) override {
    same(x, y);
    return reduce(x.size(), DotTerm{P(x), P(y)}, SumOp{}, 0.0);
  }
  double norm1(const Vector& x) override { return reduce(x.size(), AbsTerm{P(x)}, SumOp{}, 0.0); }
  double norm2sq(const Vector& x) override { return dot(x, x); }
  double norm_inf(const Vector& x) override { return reduce(x.size(), AbsTerm{P(x)}, MaxOp{}, 0.0); }
  std::size_t count_nonzero(const Vector& x) override {
    return std::size_t(reduce(x.size(), NonzeroTerm{P(x)}, SumOp{}, 0.0));  // exact below 2^53
  }
  void swap(Vector& x, Vector& y) override {
    same(x, y);
    std::swap(V(x), V(y));  // the device buffers change hands; nothing is copied
  }
  void scaled_copy(double a, const Vector& x, Vector& y) override {
    same(x, y);
    launch_map(x.size(), ScaledCopyOp{P(x), P(y), a}, stream_);
  }
  void add_scaled(const Vector& x, double a, const Vector& d, Vector& out) override {
    same(x, d);
    same(x, out);
    if (&out == &d) throw Error("internal: add_scaled with out = d");
    launch_map(x.size(), AddScaledOp{P(x), P(d), P(out), a}, stream_);
  }
  double axpy_dot(double a, const Vector& x, Vector& y, const Vector& z) override {
    same(x, y);
    same(x, z);
    return reduce(x.size(), AxpyDotTerm{P(x), P(y), P(z), a}, SumOp{}, 0.0);
  }
  double scale_dot(double a, Vector& x, const Vector& z) override {
    same(x, z);
    return reduce(x.size(), ScaleDotTerm{P(x), P(z), a}, SumOp{}, 0.0);
  }
  double axpy_norm2sq(double a, const Vector& x, Vector& y) override {
    same(x, y);
    return reduce(x.size(), AxpyNormTerm{P(x), P(y), a}, SumOp{}, 0.0);
  }
  double sub_dot(const Vector& x, const Vector& y, Vector& out, const Vector& z) override {
    same(x, y);
    same(x, out);
    same(x, z);
    return reduce(x.size(), SubDotTerm{P(x), P(y), P(out), P(z)}, SumOp{}, 0.0);
  }

  // ---- OWL-QN ----------------------------------------------------------------------------
  void owlqn_pseudo_gradient(const Vector& w, const Vector& g, double c1, Vector& pg) override {
    same(w, g);
    same(w, pg);
    launch_map(w.size(), PseudoGradientOp{P(w), P(g), P(pg), c1}, stream_);
  }
  void owlqn_constrain_direction(const Vector& pg, Vector& d) override {
    same(pg, d);
    launch_map(d.size(), ConstrainOp{P(pg), P(d)}, stream_);
  }
  void owlqn_project(const Vector& w0, const Vector& pg, Vector& w) override {
    same(w0, w);
    same(pg, w);
    launch_map(w.size(), ProjectOp{P(w0), P(pg), P(w)}, stream_);
  }

  // ---- batch primitives ------------------------------------------------------------------
  double evaluate(const BackendCorpus& bc, const Vector& w, SentenceSpan span, Vector* grad,
                  double scale) override {
    const CudaCorpus& c = C(bc);
    if (grad && grad->size() != dims_.num_weights()) throw Error("internal: gradient size mismatch");
    for (std::size_t k = 0; k < span.count; ++k)
      if (span[k] >= c.S) throw Error("internal: sentence id beyond the corpus");
      else if (!c.h_labeled[span[k]])
        throw Error("sentence " + std::to_string(span[k]) + " has tokens without a label");
    prepare(w);
    double* G = grad ? P(*grad) : nullptr;
    double loss = 0;
    for (std::size_t begin = 0; begin < span.count;) {
      const std::size_t end = plan(c, span, begin);
      const std::size_t n = end - begin, rows = h_slots_[n];
      try {
        run_chunk_front(c, w, n, rows, G != nullptr);
        FbParams fp = fb_params(c, n);
        fp.gold = true;
        fp.backward = G != nullptr;
        if (G) {
          fp.node = node_.get();
          fp.pair = dims_.transitions ? pair_.get() : nullptr;
          if (fp.edge && !fp.pair) fp.pair = pair_.get();  // edge deltas are written in the pair pass
        }
        launch_fb(fp, n);
        if (G) reduce_gradient(c, n, rows, scale, G);
      } catch (...) {
        // The chunk's token slots must not outlive it: a later evaluate would gather through
        // them. (Where the context itself is lost, this launch fails too, and so would any.)
        if (slots_set_ && rows) {  // only once fill_rows ran: before it, row_token_ is stale
          reset_slots_kernel<<<grid_for(rows, 256), 256, 0, stream_>>>(rows, row_token_.get(), c.token_slot.get());
          cudaStreamSynchronize(stream_);
        }
        slots_set_ = false;
        throw;
      }
      h_losses_.resize(n);
      CRFX_CUDA_CHECK(cudaMemcpyAsync(h_losses_.data(), losses_.get(), n * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
      sync();
      for (std::size_t i = 0; i < n; ++i) loss += h_losses_[i];  // span order, as the CPU
      begin = end;
    }
    return loss;
  }

  void viterbi(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::uint32_t* labels,
               double* best_scores) override {
    const CudaCorpus& c = C(bc);
    prepare(w);
    std::size_t out_off = 0;
    for (std::size_t begin = 0; begin < span.count;) {
      const std::size_t end = plan(c, span, begin);
      const std::size_t n = end - begin, rows = h_slots_[n];
      run_chunk_front(c, w, n, rows, false);
      ViterbiParams vp;
      static_cast<DecodeInputs&>(vp) = decode_inputs(c, w);
      vp.d = la_.get();
      vp.back = reinterpret_cast<std::uint32_t*>(lb_.get());
      vp.out = reinterpret_cast<std::uint32_t*>(node_.get());
      vp.score = best_scores ? losses_.get() : nullptr;
      viterbi_kernel<<<unsigned(n), threads_, 0, stream_>>>(vp);
      CRFX_CUDA_CHECK_LAUNCH();
      if (rows)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(labels + out_off, node_.get(), rows * sizeof(std::uint32_t),
                                        cudaMemcpyDeviceToHost, stream_));
      if (best_scores)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(best_scores + begin, losses_.get(), n * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream_));
      sync();
      out_off += rows;
      begin = end;
    }
  }

  void viterbi_nbest(const BackendCorpus& bc, const Vector& w, SentenceSpan span, std::size_t n,
                     std::uint32_t* labels, double* path_scores) override {
    if (n == 0) throw Error("internal: n-best decoding needs n ≥ 1");
    if (n > 0xffffffffu / std::max<std::size_t>(1, dims_.L))
      throw Error("n-best decoding: n = " + std::to_string(n) + " is too large");
    const CudaCorpus& c = C(bc);
    prepare(w);
    const std::size_t L = dims_.L;
    // The n-best tables are their own buffers (grow-only), not the workspace: chunks are cut so
    // that they need at most kNbestBytes (a longer sentence alone gets what it needs).
    const std::size_t per_row = L * n * (sizeof(double) + sizeof(std::uint32_t)) + n * sizeof(std::uint32_t);
    const std::size_t rows_limit = std::max<std::size_t>(1, kNbestBytes / per_row);
    std::size_t out_off = 0;
    for (std::size_t begin = 0; begin < span.count;) {
      const std::size_t end = plan(c, span, begin, rows_limit);
      const std::size_t m = end - begin, rows = h_slots_[m];
      run_chunk_front(c, w, m, rows, false);
      if (nb_d_.size() < rows * L * n) {
        nb_d_.resize(rows * L * n);
        nb_back_.resize(rows * L * n);
      }
      if (nb_out_.size() < rows * n) nb_out_.resize(rows * n);
      if (nb_score_.size() < m * n) nb_score_.resize(m * n);
      NbestParams np;
      static_cast<DecodeInputs&>(np) = decode_inputs(c, w);
      np.n = unsigned(n);
      np.d = nb_d_.get();
      np.back = nb_back_.get();
      np.out = nb_out_.get();
      np.score = nb_score_.get();
      viterbi_nbest_kernel<<<unsigned(m), threads_, 0, stream_>>>(np);
      CRFX_CUDA_CHECK_LAUNCH();
      if (rows)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(labels + n * out_off, nb_out_.get(), rows * n * sizeof(std::uint32_t),
                                        cudaMemcpyDeviceToHost, stream_));
      CRFX_CUDA_CHECK(cudaMemcpyAsync(path_scores + begin * n, nb_score_.get(), m * n * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
      sync();
      out_off += rows;
      begin = end;
    }
  }

  void marginals(const BackendCorpus& bc, const Vector& w, SentenceSpan span, double* node_marginals,
                 double* log_z) override {
    const CudaCorpus& c = C(bc);
    prepare(w);
    std::size_t out_off = 0;
    for (std::size_t begin = 0; begin < span.count;) {
      const std::size_t end = plan(c, span, begin);
      const std::size_t n = end - begin, rows = h_slots_[n];
      run_chunk_front(c, w, n, rows, false);
      FbParams fp = fb_params(c, n);
      fp.gold = false;
      fp.backward = node_marginals != nullptr;
      fp.node = node_.get();
      launch_fb(fp, n);
      if (node_marginals && rows)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(node_marginals + out_off * dims_.L, node_.get(),
                                        rows * dims_.L * sizeof(double), cudaMemcpyDeviceToHost, stream_));
      if (log_z)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(log_z + begin, losses_.get(), n * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream_));
      sync();
      out_off += rows;
      begin = end;
    }
  }

  // ---- SAG / SAGA (seed 004): stored marginals and lazy steps on the device -----------------
  // The host plans each span (touched groups and, per group, its occurrences in the span; the
  // corpus's host copy makes this O(span items), as on the CPU) and uploads the plan; kernels do
  // the catch-up of the span's groups, the span gradient, the line-search trial, the commit into
  // d (and w for SAGA) and the store of the new marginals. w, d, the stored marginals and the
  // lazy-step history stay on the device; per step only the plan and a few scalars move.
  SagStatePtr sag_create(const BackendCorpus& bc) override {
    const CudaCorpus& c = C(bc);
    const Corpus& h = c.host;
    if (!h.labeled()) throw Error("SAG needs every training token labeled");
    auto st = std::make_unique<CudaSag>();
    CudaSag& s = *st;
    s.owner = this;
    s.corpus = &c;
    s.groups = std::size_t(dims_.A) + 1 + dims_.E;
    const std::size_t L = dims_.L, LL = L * L, N = c.N;
    std::size_t slots = 0;
    if (c.edge_off.get()) {
      s.edge_slot.assign(N, kNone);
      for (std::size_t sid = 0; sid < c.S; ++sid)
        for (std::size_t t = h.sentence_offsets[sid] + 1; t < h.sentence_offsets[sid + 1]; ++t)
          if (h.edge_offsets[t + 1] > h.edge_offsets[t]) s.edge_slot[t] = std::uint32_t(slots++);
    }
    const std::size_t T = std::max<std::size_t>(1, c.max_len);
    const std::size_t pending = T * L + LL + (slots ? T * LL : 0);  // a span of the longest sentence
    const std::size_t bytes = (N * L + c.S * LL + slots * LL + pending + 3 * (kSagHistory + 1)) * sizeof(double) +
                              s.groups * sizeof(std::uint32_t);
    std::size_t free_b = 0, total_b = 0;
    CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (bytes > free_b)
      throw Error("CUDA backend: SAG's stored marginals need " + fmt_mib(bytes) + " of device memory, only " +
                  fmt_mib(free_b) + " free on " + name_ + "; use --device cpu");
    s.node.resize(N * L);
    s.pair.resize(c.S * LL);
    s.edge.resize(slots * LL);
    s.dP.resize(kSagHistory + 1);
    s.dS.resize(kSagHistory + 1);
    s.dR.resize(kSagHistory + 1);
    s.stamp.resize(s.groups);
    if (N) CRFX_CUDA_CHECK(cudaMemsetAsync(s.node.get(), 0, N * L * sizeof(double), stream_));
    if (c.S) CRFX_CUDA_CHECK(cudaMemsetAsync(s.pair.get(), 0, c.S * LL * sizeof(double), stream_));
    if (slots) CRFX_CUDA_CHECK(cudaMemsetAsync(s.edge.get(), 0, slots * LL * sizeof(double), stream_));
    CRFX_CUDA_CHECK(cudaMemsetAsync(s.stamp.get(), 0, s.groups * sizeof(std::uint32_t), stream_));
    s.P.reserve(kSagHistory + 1);
    s.S.reserve(kSagHistory + 1);
    s.R.reserve(kSagHistory + 1);
    // Pending marginals for a span of the longest sentence: batch-1 SAG never regrows them
    // (mini-batches grow them a few times, as the small plan, g and saved buffers grow during the
    // first steps; all are grow-only).
    s.new_node.resize(T * L);
    s.new_pair.resize(LL);
    if (slots) s.new_edge.resize(T * LL);
    sync();
    return st;
  }

  void sag_sync(SagState& state, SentenceSpan span, Vector& w, const Vector& d) override {
    CudaSag& s = G(state);
    if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
      throw Error("internal: SAG vectors have the wrong size");
    s.evaluated = false;  // before planning: a refused span leaves nothing to commit or restore
    s.tried = false;
    s.synced = false;
    plan_span(*s.corpus, span, s.edge_slot.empty() ? nullptr : &s.edge_slot, true, s.plan);
    sag_catch_up(s, s.plan.groups.size(), s.plan.d_groups.get(), w, d);
    s.synced = true;
  }

  double sag_evaluate(SagState& state, const Vector& w, double* grad_norm2) override {
    CudaSag& s = G(state);
    if (!s.synced || !s.plan.valid) throw Error("internal: sag_evaluate without a successful sag_sync");
    SpanPlan& pl = s.plan;
    const double loss = span_marginals(*s.corpus, w, pl, s.new_node, s.new_pair, s.new_edge);
    reserve_device(s.g, pl.compact());
    span_gradient(*s.corpus, pl, s.new_node, s.new_pair, s.new_edge, 1.0, s.g.get());
    const double g2 = reduce(pl.compact(), DotTerm{s.g.get(), s.g.get()}, SumOp{}, 0.0);
    if (grad_norm2) *grad_norm2 = g2;
    s.evaluated = true;
    return loss;
  }

  void sag_trial(SagState& state, Vector& w, double step) override {
    CudaSag& s = G(state);
    if (!s.evaluated) throw Error("internal: sag_trial before sag_evaluate");
    reserve_device(s.saved, s.plan.compact());
    const std::size_t ng = s.plan.groups.size();
    if (ng) {
      sag_trial_kernel<<<group_grid(ng), group_threads(), 0, stream_>>>(sag_groups(), s.plan.view(), ng, true, step,
                                                                      s.g.get(), s.saved.get(), P(w));
      CRFX_CUDA_CHECK_LAUNCH();
    }
    s.tried = true;
  }

  void sag_restore(SagState& state, Vector& w) override {
    CudaSag& s = G(state);
    if (!s.tried) throw Error("internal: sag_restore without sag_trial");
    const std::size_t ng = s.plan.groups.size();
    if (ng) {
      sag_trial_kernel<<<group_grid(ng), group_threads(), 0, stream_>>>(sag_groups(), s.plan.view(), ng, false, 0.0,
                                                                      s.g.get(), s.saved.get(), P(w));
      CRFX_CUDA_CHECK_LAUNCH();
    }
  }

  void sag_commit(SagState& state, Vector& d, Vector& w, const double* w_coef) override {
    CudaSag& s = G(state);
    if (!s.evaluated) throw Error("internal: sag_commit before sag_evaluate");
    const SpanPlan& pl = s.plan;
    const std::size_t n = pl.sid.size(), ng = pl.groups.size();
    const bool edges = !s.edge_slot.empty();
    if (w_coef && n) {
      reserve_device(s.coef, n);
      CRFX_CUDA_CHECK(cudaMemcpyAsync(s.coef.get(), w_coef, n * sizeof(double), cudaMemcpyHostToDevice, stream_));
    }
    if (ng) {
      sag_commit_kernel<<<group_grid(ng), group_threads(), 0, stream_>>>(
          sag_groups(), pl.view(), ng, s.new_node.get(), s.node.get(), s.new_pair.get(), s.pair.get(),
          edges ? s.new_edge.get() : nullptr, edges ? s.edge.get() : nullptr, w_coef ? s.coef.get() : nullptr,
          P(d), P(w));
      CRFX_CUDA_CHECK_LAUNCH();
    }
    if (pl.rows + n) {
      sag_store_kernel<<<grid_for(pl.rows + n, 1, 1u << 20), group_threads(), 0, stream_>>>(
          dims_.L, pl.rows, std::uint32_t(n), pl.d_row_tok.get(), pl.d_row_slot.get(), pl.d_sid.get(),
          s.new_node.get(), s.new_pair.get(), edges ? s.new_edge.get() : nullptr, s.node.get(),
          dims_.transitions ? s.pair.get() : nullptr, edges ? s.edge.get() : nullptr);
      CRFX_CUDA_CHECK_LAUNCH();
    }
    if (w_coef) sync();  // w_coef is the caller's host array
    s.evaluated = false;  // the pending marginals are stored now
  }

  void sag_step(SagState& state, double a, double b, double tau, Vector& w, const Vector& d) override {
    CudaSag& s = G(state);
    if (!(a > 0 && a <= 1) || !(b >= 0) || !(tau >= 0) || !std::isfinite(b) || !std::isfinite(tau))
      throw Error("internal: invalid SAG step (a = " + std::to_string(a) + ", b = " + std::to_string(b) +
                  ", tau = " + std::to_string(tau) + ")");
    // Flush when P would underflow or the stamps would overflow, as the CPU.
    if (s.P.back() * a < 1e-150 || s.k() + 1 >= 0xffffffffu) sag_flush(state, w, d);
    const double Pk = s.P.back() * a;
    s.S.push_back(s.S.back() + b / Pk);
    s.R.push_back(s.R.back() + tau / Pk);
    s.P.push_back(Pk);
  }

  void sag_flush(SagState& state, Vector& w, const Vector& d) override {
    CudaSag& s = G(state);
    if (w.size() != dims_.num_weights() || d.size() != dims_.num_weights())
      throw Error("internal: SAG vectors have the wrong size");
    if (s.k() > 0) sag_catch_up(s, s.groups, nullptr, w, d);
    CRFX_CUDA_CHECK(cudaMemsetAsync(s.stamp.get(), 0, s.groups * sizeof(std::uint32_t), stream_));
    s.P.assign(1, 1.0);
    s.S.assign(1, 0.0);
    s.R.assign(1, 0.0);
    s.uploaded = 0;
  }

  // ---- stochastic trainers: sparse batch gradients ----------------------------------------
  SparseVectorPtr sparse_vector() override { return std::make_unique<CudaSparse>(this); }

  void support(const BackendCorpus& bc, SentenceSpan span, SparseVector& xs) override {
    support_host(C(bc).host, span);
    upload_sparse(X(xs), false);
  }

  double evaluate_sparse(const BackendCorpus& bc, const Vector& w, SentenceSpan span, SparseVector& grad,
                         double scale, bool support_given) override {
    // Span-local: the plan's groups are S(span) in index order, so the span gradient lands
    // directly in the sparse vector's values (O(span items), not a scan of the corpus).
    const CudaCorpus& c = C(bc);
    CudaSparse& x = X(grad);
    if (w.size() != dims_.num_weights()) throw Error("internal: weight vector size mismatch");
    plan_span(c, span, nullptr, false, sp_plan_);
    const double loss = span_marginals(c, w, sp_plan_, sp_node_, sp_pair_, sp_edge_);
    if (support_given) {
      // grad's indices on the device are S(span) from support(); its length must be the plan's.
      if (x.n != sp_plan_.compact())
        throw Error("internal: evaluate_sparse given a support of " + std::to_string(x.n) +
                    " entries for a span whose support has " + std::to_string(sp_plan_.compact()));
      if (x.n) CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, x.n * sizeof(double), stream_));
    } else {
      const std::size_t L = dims_.L, LL = L * L;
      h_index_.resize(sp_plan_.compact());
      std::size_t j = 0;
      for (std::uint32_t gid : sp_plan_.groups) {
        const std::size_t b = gid < dims_.A ? std::size_t(gid) * L
                              : gid == dims_.A ? dims_.transition_offset()
                                               : dims_.edge_offset() + (std::size_t(gid) - dims_.A - 1) * LL;
        const std::size_t size = gid < dims_.A ? L : LL;
        for (std::size_t k = 0; k < size; ++k) h_index_[j++] = b + k;
      }
      upload_sparse(x, false);
    }
    span_gradient(c, sp_plan_, sp_node_, sp_pair_, sp_edge_, scale, x.value.get());
    return loss;
  }

  std::size_t feature_difference(const BackendCorpus& bc, SentenceSpan span, const std::uint32_t* labels,
                                 SparseVector& out, double scale) override {
    // On the host, as CpuBackend (O(batch tokens × items + support)), then uploaded.
    const Corpus& c = C(bc).host;
    support_host(c, span);
    const std::size_t L = dims_.L, LL = L * L;
    h_dense_.resize(dims_.num_weights(), 0.0);  // kept all-zero between calls
    double* Gh = h_dense_.data();
    double* GT = Gh + dims_.transition_offset();
    double* GE = Gh + dims_.edge_offset();
    std::size_t wrong = 0, pos = 0;
    auto take = [&] {
      h_value_.resize(h_index_.size());
      for (std::size_t j = 0; j < h_index_.size(); ++j) {
        h_value_[j] = Gh[h_index_[j]];
        Gh[h_index_[j]] = 0.0;
      }
    };
    try {
      for (std::size_t i = 0; i < span.count; ++i) {
        const std::size_t s = span[i];
        const std::size_t tok0 = c.sentence_offsets[s], T = c.length(s);
        for (std::size_t t = 0; t < T; ++t, ++pos) {
          const std::uint32_t y = c.labels[tok0 + t], p = labels[pos];
          if (y == Corpus::kNoLabel) throw Error("sentence " + std::to_string(s) + " has tokens without a label");
          if (p >= L) throw Error("internal: predicted label beyond the model");
          if (y != p) {
            ++wrong;
            for (std::size_t k = c.state_offsets[tok0 + t]; k < c.state_offsets[tok0 + t + 1]; ++k) {
              const double v = scale * c.state_value(k);
              double* row = Gh + std::size_t(c.state_ids[k]) * L;
              row[y] += v;
              row[p] -= v;
            }
          }
          if (t == 0) continue;
          const std::uint32_t y0 = c.labels[tok0 + t - 1], p0 = labels[pos - 1];
          if (y0 == p0 && y == p) continue;
          const std::size_t gold = std::size_t(y0) * L + y, pred = std::size_t(p0) * L + p;
          if (dims_.transitions) {
            GT[gold] += scale;
            GT[pred] -= scale;
          }
          if (c.edge_offsets.size() == c.num_tokens() + 1)
            for (std::size_t k = c.edge_offsets[tok0 + t]; k < c.edge_offsets[tok0 + t + 1]; ++k) {
              const double v = scale * c.edge_value(k);
              double* blk = GE + std::size_t(c.edge_ids[k]) * LL;
              blk[gold] += v;
              blk[pred] -= v;
            }
        }
      }
    } catch (...) {
      take();
      throw;
    }
    take();
    upload_sparse(X(out), true);
    return wrong;
  }

  void sparse_copy(const SparseVector& src, SparseVector& dst) override {
    const CudaSparse& s = X(src);
    CudaSparse& d = X(dst);
    if (&s == &d) return;
    d.reserve(s.n);
    if (s.n) {
      CRFX_CUDA_CHECK(cudaMemcpyAsync(d.index.get(), s.index.get(), s.n * sizeof(std::size_t),
                                      cudaMemcpyDeviceToDevice, stream_));
      CRFX_CUDA_CHECK(cudaMemcpyAsync(d.value.get(), s.value.get(), s.n * sizeof(double),
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    d.n = s.n;
    d.end = s.end;
  }
  void gather(const Vector& w, SparseVector& xs) override {
    CudaSparse& x = X(xs);
    check_index(x, w.size());
    launch_map(x.n, GatherOp{x.index.get(), x.value.get(), P(w)}, stream_);
  }
  void scatter(const SparseVector& xs, Vector& w) override {
    const CudaSparse& x = X(xs);
    check_index(x, w.size());
    launch_map(x.n, ScatterOp{x.index.get(), x.value.get(), P(w)}, stream_);
  }
  void sparse_axpy(double a, const SparseVector& xs, Vector& y) override {
    const CudaSparse& x = X(xs);
    check_index(x, y.size());
    launch_map(x.n, SparseAxpyOp{x.index.get(), x.value.get(), P(y), a}, stream_);
  }
  double sparse_penalty(const SparseVector& xs, double c1, double c2) override {
    const CudaSparse& x = X(xs);
    return reduce(x.n, PenaltyTerm{x.value.get(), c1, c2}, SumOp{}, 0.0);
  }
  void lazy_decay(Vector& w, Vector& stamp, double clock, const Vector* rate, double coef,
                  const SparseVector* sup) override {
    if (stamp.size() != w.size() || (rate && rate->size() != w.size()))
      throw Error("internal: lazy_decay vector sizes differ");
    LazyDecayOp op{nullptr, P(w), P(stamp), rate ? P(*rate) : nullptr, clock, coef};
    if (!sup) {
      launch_map(w.size(), op, stream_);
      return;
    }
    const CudaSparse& x = X(*sup);
    check_index(x, w.size());
    op.idx = x.index.get();
    launch_map(x.n, op, stream_);
  }
  double sgd_l1_step(Vector& w, Vector* q, const SparseVector& gs, double eta, double u, double c1,
                     double c2, bool keep_q) override {
    const CudaSparse& g = X(gs);
    if (q && q->size() != w.size()) throw Error("internal: sgd_l1_step vector sizes differ");
    check_index(g, w.size());
    const SgdL1Op step{g.index.get(), g.value.get(), P(w), q ? P(*q) : nullptr, eta, u, keep_q};
    if (c1 == 0 && c2 == 0) {  // no penalty wanted: a map, no host round trip
      launch_map(g.n, step, stream_);
      return 0.0;
    }
    return reduce(g.n, SgdL1PenaltyTerm{step, c1, c2}, SumOp{}, 0.0);
  }
  void adf_step(Vector& w, const Vector& rate, Vector& count, const SparseVector& gs) override {
    const CudaSparse& g = X(gs);
    if (rate.size() != w.size() || count.size() != w.size()) throw Error("internal: adf_step vector sizes differ");
    check_index(g, w.size());
    launch_map(g.n, AdfStepOp{g.index.get(), g.value.get(), P(w), P(rate), P(count)}, stream_);
  }
  void adf_update_rates(Vector& rate, Vector& count, double window, double alpha, double beta) override {
    same(rate, count);
    launch_map(rate.size(), AdfRatesOp{P(rate), P(count), window, alpha, beta}, stream_);
  }

 private:
  // ---- span plans: SAG and evaluate_sparse ---------------------------------------------------

  /// Plans `span` (distinct sentences) into `pl` and uploads it (see SpanPlan). `edge_slot`
  /// (SAG with edge features) gives the stored row of each edge position; without it the stored
  /// rows are unused.
  /// Groups of edge items at a sentence's first position are touched (as the CPU's support and
  /// sync do) but have no occurrences: no edge factor sits there.
  void plan_span(const CudaCorpus& c, SentenceSpan span, const std::vector<std::uint32_t>* edge_slot, bool sag,
                 SpanPlan& pl) {
    const Corpus& h = c.host;
    const std::uint32_t A = dims_.A;
    const std::size_t total = std::size_t(A) + 1 + dims_.E;
    // The span is checked before the plan is touched: a refused span leaves no half-made plan.
    pl.valid = false;
    for (std::size_t i = 0; i < span.count; ++i) {
      const std::uint32_t sid = span[i];
      if (sid >= c.S) throw Error("internal: sentence id beyond the corpus");
      if (!c.h_labeled[sid]) throw Error("sentence " + std::to_string(sid) + " has tokens without a label");
    }
    {  // distinct sentences (a repeated one would be counted twice)
      std::vector<std::uint32_t>& sorted = pl.scratch_ids;
      sorted.resize(span.count);
      for (std::size_t i = 0; i < span.count; ++i) sorted[i] = span[i];
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
        throw Error("internal: span repeats a sentence");
    }
    if (pl.mark.size() != total) {
      pl.mark.assign(total, 0);
      pl.local.assign(total, 0);
      pl.generation = 0;
    }
    if (++pl.generation == 0) {
      std::fill(pl.mark.begin(), pl.mark.end(), 0);
      pl.generation = 1;
    }
    const std::uint32_t gen = pl.generation;
    const bool edges = c.edge_off.get() != nullptr;
    pl.groups.clear();
    pl.sid.assign(span.count, 0);
    pl.row_tok.clear();
    pl.row_slot.clear();
    auto touch = [&](std::uint32_t gid) {
      if (pl.mark[gid] != gen) {
        pl.mark[gid] = gen;
        pl.groups.push_back(gid);
      }
    };
    // S(span) holds the transitions of a non-empty span; SAG syncs them for any span, as the CPU.
    if (dims_.transitions && (span.count || sag)) touch(A);
    for (std::size_t i = 0; i < span.count; ++i) {
      const std::uint32_t sid = span[i];
      pl.sid[i] = sid;
      const std::size_t t0 = h.sentence_offsets[sid];
      for (std::size_t t = t0; t < h.sentence_offsets[sid + 1]; ++t) {
        pl.row_tok.push_back(std::uint32_t(t));
        pl.row_slot.push_back(edge_slot ? (*edge_slot)[t] : kNone);
        for (std::size_t k = h.state_offsets[t]; k < h.state_offsets[t + 1]; ++k) touch(h.state_ids[k]);
        if (edges)
          for (std::size_t k = h.edge_offsets[t]; k < h.edge_offsets[t + 1]; ++k) touch(A + 1 + h.edge_ids[k]);
      }
    }
    // Ascending group ids: ascending weight indices. Then count, offset and fill the occurrences
    // in (sentence, token, item) order.
    std::sort(pl.groups.begin(), pl.groups.end());
    const std::size_t ng = pl.groups.size(), L = dims_.L, LL = L * L;
    for (std::size_t q = 0; q < ng; ++q) pl.local[pl.groups[q]] = std::uint32_t(q);
    std::vector<std::size_t>& count = pl.scratch_count;
    count.assign(ng + 1, 0);
    auto each_occurrence = [&](auto&& f) {
      std::size_t row = 0;
      for (std::size_t i = 0; i < span.count; ++i) {
        const std::size_t t0 = h.sentence_offsets[pl.sid[i]];
        for (std::size_t t = t0; t < h.sentence_offsets[pl.sid[i] + 1]; ++t, ++row) {
          for (std::size_t k = h.state_offsets[t]; k < h.state_offsets[t + 1]; ++k)
            f(h.state_ids[k], row, std::uint32_t(t), i, h.state_value(k));
          if (edges && t > t0 && h.edge_offsets[t + 1] > h.edge_offsets[t])
            for (std::size_t k = h.edge_offsets[t]; k < h.edge_offsets[t + 1]; ++k)
              f(A + 1 + h.edge_ids[k], row, edge_slot ? (*edge_slot)[t] : 0u, i, h.edge_value(k));
        }
      }
    };
    each_occurrence([&](std::uint32_t gid, std::size_t, std::uint32_t, std::size_t, double) {
      ++count[pl.local[gid] + 1];
    });
    pl.oofs.assign(ng + 1, 0);
    pl.gofs.assign(ng + 1, 0);
    for (std::size_t q = 0; q < ng; ++q) {
      count[q + 1] += count[q];
      pl.gofs[q + 1] = pl.gofs[q] + (pl.groups[q] < A ? L : LL);
    }
    if (count[ng] >= 0xffffffffu)  // the device offsets are 32-bit
      throw Error("CUDA backend: a batch of " + std::to_string(count[ng]) +
                  " feature items exceeds 2^32 - 1; use a smaller --batch-size");
    for (std::size_t q = 0; q <= ng; ++q) pl.oofs[q] = std::uint32_t(count[q]);
    const std::size_t occ = count[ng];
    pl.onew.resize(occ);
    pl.oold.resize(occ);
    pl.osent.resize(occ);
    pl.oval.resize(occ);
    each_occurrence([&](std::uint32_t gid, std::size_t row, std::uint32_t old_row, std::size_t i, double v) {
      const std::size_t o = count[pl.local[gid]]++;
      pl.onew[o] = std::uint32_t(row);
      pl.oold[o] = old_row;
      pl.osent[o] = std::uint32_t(i);
      pl.oval[o] = v;
    });
    pl.rows = pl.row_tok.size();
    auto up = [&](auto& dev, const auto& host_vec) {
      reserve_device(dev, host_vec.size());
      if (!host_vec.empty())
        CRFX_CUDA_CHECK(cudaMemcpyAsync(dev.get(), host_vec.data(), host_vec.size() * sizeof(host_vec[0]),
                                        cudaMemcpyHostToDevice, stream_));
    };
    up(pl.d_sid, pl.sid);
    up(pl.d_row_tok, pl.row_tok);
    up(pl.d_row_slot, pl.row_slot);
    up(pl.d_groups, pl.groups);
    up(pl.d_gofs, pl.gofs);
    up(pl.d_oofs, pl.oofs);
    up(pl.d_onew, pl.onew);
    up(pl.d_oold, pl.oold);
    up(pl.d_osent, pl.osent);
    up(pl.d_oval, pl.oval);
    sync();  // the host plan is rewritten by the next call
    pl.valid = true;
  }

  /// Forward-backward on the planned span at w through the chunk workspace; copies the span's
  /// node deltas [rows][L], summed pairwise deltas [n][L][L] (when there are transitions or edge
  /// features) and edge-position deltas [rows][L][L] (edge features) out of it, and returns the
  /// span's NLL (summed in span order, as the CPU).
  double span_marginals(const CudaCorpus& c, const Vector& w, const SpanPlan& pl, DeviceBuffer<double>& node,
                        DeviceBuffer<double>& pair, DeviceBuffer<double>& edge) {
    const std::size_t L = dims_.L, LL = L * L, n = pl.sid.size();
    const bool edges = c.edge_off.get() != nullptr, pairs = dims_.transitions || edges;
    reserve_device(node, pl.rows * L);
    reserve_device(pair, n * LL);
    if (edges) reserve_device(edge, pl.rows * LL);
    prepare(w);
    const SentenceSpan span{pl.sid.data(), n};
    double loss = 0;
    std::size_t row0 = 0;
    for (std::size_t begin = 0; begin < n;) {
      const std::size_t end = plan(c, span, begin);
      const std::size_t m = end - begin, rows = h_slots_[m];
      run_chunk_front(c, w, m, rows, false);
      FbParams fp = fb_params(c, m);
      fp.gold = true;
      fp.backward = true;
      fp.node = node_.get();
      fp.pair = pairs ? pair_.get() : nullptr;  // transitions, or edge deltas (written in the pair pass)
      launch_fb(fp, m);
      // Chunk rows are the span's tokens in span order: copy the deltas out of the workspace.
      if (rows)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(node.get() + row0 * L, node_.get(), rows * L * sizeof(double),
                                        cudaMemcpyDeviceToDevice, stream_));
      if (pairs && m)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(pair.get() + begin * LL, pair_.get(), m * LL * sizeof(double),
                                        cudaMemcpyDeviceToDevice, stream_));
      if (edges && rows)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(edge.get() + row0 * LL, edge_.get(), rows * LL * sizeof(double),
                                        cudaMemcpyDeviceToDevice, stream_));
      h_losses_.resize(m);
      CRFX_CUDA_CHECK(cudaMemcpyAsync(h_losses_.data(), losses_.get(), m * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
      sync();
      for (std::size_t i = 0; i < m; ++i) loss += h_losses_[i];
      row0 += rows;
      begin = end;
    }
    return loss;
  }

  /// out (compact, per planned group) = scale · the span's NLL gradient, from span_marginals'
  /// deltas.
  void span_gradient(const CudaCorpus& c, const SpanPlan& pl, const DeviceBuffer<double>& node,
                     const DeviceBuffer<double>& pair, const DeviceBuffer<double>& edge, double scale,
                     double* out) {
    const std::size_t ng = pl.groups.size();
    if (ng == 0) return;
    sag_gradient_kernel<<<group_grid(ng), group_threads(), 0, stream_>>>(
        sag_groups(), pl.view(), ng, node.get(), pair.get(), c.edge_off.get() ? edge.get() : nullptr, scale, out);
    CRFX_CUDA_CHECK_LAUNCH();
  }

  // ---- helpers of SAG and the sparse primitives -------------------------------------------
  CudaSag& G(SagState& st) const {
    auto* p = dynamic_cast<CudaSag*>(&st);
    if (!p || p->owner != this) throw Error("internal: SAG state does not belong to this CUDA backend");
    return *p;
  }
  SagGroups sag_groups() const {
    const std::size_t L = dims_.L;
    return {dims_.A, L, L * L, dims_.transition_offset(), dims_.edge_offset()};
  }
  int group_threads() const { return int(std::min<std::size_t>(256, (dims_.L + 31) / 32 * 32)); }
  static unsigned group_grid(std::size_t groups) { return grid_for(groups, 1, 1u << 20); }
  /// Mirrors the lazy-step history not yet on the device, then runs the composite map on
  /// `count` groups (`list` on the device, or all groups when null).
  void sag_catch_up(CudaSag& s, std::size_t count, const std::uint32_t* list, Vector& w, const Vector& d) {
    const std::size_t k = s.k();
    if (k + 1 > s.dP.size()) {  // the history outgrew the device copy: double it, re-upload
      const std::size_t cap = std::max(k + 1, 2 * s.dP.size());
      s.dP.resize(cap);
      s.dS.resize(cap);
      s.dR.resize(cap);
      s.uploaded = 0;
    }
    if (k >= s.uploaded) {
      const std::size_t from = s.uploaded, m = k + 1 - from;
      CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dP.get() + from, s.P.data() + from, m * sizeof(double),
                                      cudaMemcpyHostToDevice, stream_));
      CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dS.get() + from, s.S.data() + from, m * sizeof(double),
                                      cudaMemcpyHostToDevice, stream_));
      CRFX_CUDA_CHECK(cudaMemcpyAsync(s.dR.get() + from, s.R.data() + from, m * sizeof(double),
                                      cudaMemcpyHostToDevice, stream_));
      s.uploaded = k + 1;
      sync();  // P, S, R are appended to (and reset by sag_flush) right after
    }
    if (count == 0 || k == 0) return;
    sag_catch_up_kernel<<<group_grid(count), group_threads(), 0, stream_>>>(
        sag_groups(), list, count, std::uint32_t(k), s.dP.get(), s.dS.get(), s.dR.get(), s.stamp.get(), P(w), P(d));
    CRFX_CUDA_CHECK_LAUNCH();
  }
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
  /// S(span) into h_index_ (sorted), as CpuBackend::support.
  void support_host(const Corpus& c, SentenceSpan span) {
    const std::size_t L = dims_.L, LL = L * L;
    if (mark_a_.size() < dims_.A) mark_a_.assign(dims_.A, 0);
    if (mark_e_.size() < dims_.E) mark_e_.assign(dims_.E, 0);
    attrs_.clear();
    edges_.clear();
    const bool has_edges = c.edge_offsets.size() == c.num_tokens() + 1;
    // Every id is checked before the first mark is set: a throw must not leave marks behind
    // (the attributes would silently drop out of every later support).
    for (std::size_t i = 0; i < span.count; ++i)
      if (span[i] >= c.num_sentences()) throw Error("internal: sentence id beyond the corpus");
    for (std::size_t i = 0; i < span.count; ++i) {
      const std::size_t s = span[i];
      const std::size_t t0 = c.sentence_offsets[s], t1 = c.sentence_offsets[s + 1];
      for (std::size_t k = c.state_offsets[t0]; k < c.state_offsets[t1]; ++k) {
        const std::uint32_t a = c.state_ids[k];
        if (!mark_a_[a]) {
          mark_a_[a] = 1;
          attrs_.push_back(a);
        }
      }
      if (has_edges)
        for (std::size_t k = c.edge_offsets[t0]; k < c.edge_offsets[t1]; ++k) {
          const std::uint32_t e = c.edge_ids[k];
          if (!mark_e_[e]) {
            mark_e_[e] = 1;
            edges_.push_back(e);
          }
        }
    }
    std::sort(attrs_.begin(), attrs_.end());
    std::sort(edges_.begin(), edges_.end());
    const bool trans = dims_.transitions && span.count > 0;
    h_index_.resize(attrs_.size() * L + (trans ? LL : 0) + edges_.size() * LL);
    std::size_t j = 0;
    for (std::uint32_t a : attrs_) {
      mark_a_[a] = 0;
      for (std::size_t y = 0; y < L; ++y) h_index_[j++] = std::size_t(a) * L + y;
    }
    if (trans)
      for (std::size_t k = 0; k < LL; ++k) h_index_[j++] = dims_.transition_offset() + k;
    for (std::uint32_t e : edges_) {
      mark_e_[e] = 0;
      for (std::size_t k = 0; k < LL; ++k) h_index_[j++] = dims_.edge_offset() + std::size_t(e) * LL + k;
    }
  }
  /// h_index_ (and h_value_ when `values`, else zeros) → x.
  void upload_sparse(CudaSparse& x, bool values) {
    const std::size_t n = h_index_.size();
    x.reserve(n);
    x.n = n;
    x.end = n ? h_index_.back() + 1 : 0;
    if (n) {
      CRFX_CUDA_CHECK(cudaMemcpyAsync(x.index.get(), h_index_.data(), n * sizeof(std::size_t),
                                      cudaMemcpyHostToDevice, stream_));
      if (values)
        CRFX_CUDA_CHECK(cudaMemcpyAsync(x.value.get(), h_value_.data(), n * sizeof(double),
                                        cudaMemcpyHostToDevice, stream_));
      else
        CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, n * sizeof(double), stream_));
    }
    sync();  // the host staging vectors are reused by the next call
  }

  static std::string fmt_mib(std::size_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib(bytes));
    return buf;
  }
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

  template <class F, class Op>
  double reduce(std::size_t n, F f, Op op, double init) {
    if (n == 0) return init;
    const unsigned blocks = grid_for(n, kRedThreads, kRedBlocks);  // a function of n only
    reduce_pass1<<<blocks, kRedThreads, 0, stream_>>>(n, f, op, init, red_.get());
    CRFX_CUDA_CHECK_LAUNCH();
    reduce_pass2<<<1, kRedThreads, 0, stream_>>>(blocks, red_.get(), op, init, red_.get() + kRedBlocks);
    CRFX_CUDA_CHECK_LAUNCH();
    double r = 0;
    CRFX_CUDA_CHECK(cudaMemcpyAsync(&r, red_.get() + kRedBlocks, sizeof(double), cudaMemcpyDeviceToHost, stream_));
    sync();
    return r;
  }

  // ---- workspace -------------------------------------------------------------------------
  std::size_t row_bytes(bool edges) const {
    const std::size_t L = dims_.L;
    return 4 * L * sizeof(double) + sizeof(std::size_t) + 1 +
           (edges ? L * L * sizeof(double) : 0);  // S, log α, log β, node; row_token, row_edge; τ_t
  }
  std::size_t sentence_bytes() const {
    const std::size_t LL = std::size_t(dims_.L) * dims_.L;
    return LL * sizeof(double) + (LL * sizeof(double)) / kTransGroup + sizeof(double) * 2 +
           2 * sizeof(std::uint32_t) + sizeof(std::size_t);  // pair, tree, losses, sent/order, slots
  }

  /// Grows the workspace (never shrinks) so that chunks of `c` fit: the whole corpus when the
  /// memory budget (half of what is free) allows, else chunks of whole sentences.
  void size_workspace(const CudaCorpus& c) {
    const bool edges = dims_.E > 0;
    const std::size_t per_row = row_bytes(edges), per_sent = sentence_bytes();
    std::size_t free_b = 0, total_b = 0;
    CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const std::size_t have = (rows_cap_ * per_row + sents_cap_ * per_sent);  // already ours
    const std::size_t usable = free_b + have;
    const std::size_t min_rows = std::max<std::size_t>(1, c.max_len);
    const std::size_t need_min = min_rows * per_row + per_sent;
    if (need_min > usable * 9 / 10)
      throw Error("CUDA backend: a sentence of " + std::to_string(c.max_len) + " tokens with L = " +
                  std::to_string(dims_.L) + (edges ? " and edge features" : "") + " needs " +
                  fmt_mib(need_min) + " of device workspace; only " + fmt_mib(free_b) + " free on " + name_ +
                  "; use --device cpu");
    std::size_t rows = std::max<std::size_t>(1, c.N), sents = std::max<std::size_t>(1, c.S);
    const std::size_t budget = std::max(need_min, usable / 2);
    if (rows * per_row + sents * per_sent > budget) {
      // Rows get half the budget but at least the longest sentence; sentences what rows leave
      // (at least per_sent, since budget ≥ need_min), so the total stays within the budget.
      rows = std::min(rows, std::max(min_rows, (budget / 2) / per_row));
      sents = std::max<std::size_t>(1, std::min(sents, (budget - rows * per_row) / per_sent));
    }
    if (cfg_.max_chunk_tokens) rows = std::max(min_rows, std::min(rows, cfg_.max_chunk_tokens));
    rows = std::max(rows, rows_cap_);
    sents = std::max(sents, sents_cap_);
    if (rows == rows_cap_ && sents == sents_cap_) return;
    if (rows * per_row + sents * per_sent > usable * 9 / 10)  // grown caps of an earlier corpus
      throw Error("CUDA backend: the device workspace for this corpus needs " +
                  fmt_mib(rows * per_row + sents * per_sent) + "; only " + fmt_mib(free_b) + " free on " +
                  name_ + "; use --device cpu");
    // Every buffer is freed before its replacement is allocated (no doubled peak); should one
    // allocation fail, the whole workspace is released so that nothing runs on a half-sized one
    // (plan() then refuses), and the error propagates.
    const std::size_t L = dims_.L, LL = L * L;
    try {
      if (rows != rows_cap_) {
        rows_cap_ = 0;
        S_.resize(rows * L);
        la_.resize(rows * L);
        lb_.resize(rows * L);
        node_.resize(rows * L);
        row_token_.resize(rows);
        row_edge_.resize(rows);
        if (edges) edge_.resize(rows * LL);
        rows_cap_ = rows;
      }
      if (sents != sents_cap_) {
        sents_cap_ = 0;
        pair_.resize(sents * LL);
        partial_.resize(((sents + kTransGroup - 1) / kTransGroup) * LL);
        losses_.resize(sents);
        sent_.resize(sents);
        order_.resize(sents);
        slots_.resize(sents + 1);
        sents_cap_ = sents;
      }
    } catch (...) {
      release_workspace();
      throw;
    }
  }

  void release_workspace() noexcept {
    rows_cap_ = sents_cap_ = 0;
    S_.clear();
    la_.clear();
    lb_.clear();
    node_.clear();
    row_token_.clear();
    row_edge_.clear();
    edge_.clear();
    pair_.clear();
    partial_.clear();
    losses_.clear();
    sent_.clear();
    order_.clear();
    slots_.clear();
  }

  /// The chunk starting at span[begin]: as many whole sentences as the workspace holds. Fills
  /// h_sent_, h_slots_, h_order_ and returns the end.
  /// The next chunk of `span` from `begin`: sentences while they fit the workspace (and
  /// `rows_limit` tokens, except that a first sentence longer than that goes alone).
  std::size_t plan(const CudaCorpus& c, SentenceSpan span, std::size_t begin,
                   std::size_t rows_limit = std::numeric_limits<std::size_t>::max()) {
    if (rows_cap_ == 0 || sents_cap_ == 0)
      throw Error("CUDA backend: no device workspace (a device allocation failed earlier)");
    h_sent_.clear();
    h_slots_.assign(1, 0);
    // A sentence twice in one chunk would have two blocks race on its token slots.
    if (plan_mark_.size() < c.S) plan_mark_.assign(c.S, 0);
    if (++plan_gen_ == 0) {
      std::fill(plan_mark_.begin(), plan_mark_.end(), 0);
      plan_gen_ = 1;
    }
    std::size_t end = begin, rows = 0;
    while (end < span.count && h_sent_.size() < sents_cap_) {
      const std::uint32_t s = span[end];
      if (s >= c.S) throw Error("internal: sentence id beyond the corpus");
      if (plan_mark_[s] == plan_gen_) throw Error("internal: span repeats a sentence");
      plan_mark_[s] = plan_gen_;
      const std::size_t T = c.h_sent_off[s + 1] - c.h_sent_off[s];
      if (rows + T > rows_cap_) {
        if (end == begin) throw Error("internal: sentence longer than the CUDA workspace");
        break;
      }
      if (rows + T > rows_limit && end > begin) break;
      rows += T;
      h_sent_.push_back(s);
      h_slots_.push_back(rows);
      ++end;
    }
    // Launch order: longest sentences first (the length buckets), ties in span order.
    const std::size_t n = h_sent_.size();
    h_order_.resize(n);
    std::iota(h_order_.begin(), h_order_.end(), 0u);
    std::stable_sort(h_order_.begin(), h_order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return h_slots_[a + 1] - h_slots_[a] > h_slots_[b + 1] - h_slots_[b];
    });
    return end;
  }

  ChunkView chunk_view() const { return {sent_.get(), slots_.get(), order_.get()}; }

  /// The Viterbi kernels' inputs for the chunk run_chunk_front just scored.
  DecodeInputs decode_inputs(const CudaCorpus& c, const Vector& w) const {
    DecodeInputs in;
    in.L = int(dims_.L);
    in.sent_off = c.sent_off.get();
    in.edge_off = c.edge_off.get();
    in.ch = chunk_view();
    in.S = S_.get();
    in.trans = trans_ptr(w);
    in.edge = c.edge_off.get() ? edge_.get() : nullptr;
    return in;
  }

  const double* trans_ptr(const Vector& w) const {
    return dims_.transitions ? P(w) + dims_.transition_offset() : zeros_.get();
  }

  /// τ_max, E, Eᵀ of the weight vector.
  void prepare(const Vector& w) {
    if (w.size() != dims_.num_weights())
      throw Error("internal: weight vector has " + std::to_string(w.size()) + " entries, model needs " +
                  std::to_string(dims_.num_weights()));
    prepare_kernel<<<1, 1024, 0, stream_>>>(int(dims_.L), trans_ptr(w), E_.get(), Et_.get(), tmax_.get());
    CRFX_CUDA_CHECK_LAUNCH();
    w_ = &w;
  }

  /// Uploads the chunk plan; rows, emissions and edge matrices.
  void run_chunk_front(const CudaCorpus& c, const Vector& w, std::size_t n, std::size_t rows, bool slots) {
    CRFX_CUDA_CHECK(cudaMemcpyAsync(sent_.get(), h_sent_.data(), n * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(order_.get(), h_order_.data(), n * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream_));
    CRFX_CUDA_CHECK(cudaMemcpyAsync(slots_.get(), h_slots_.data(), (n + 1) * sizeof(std::size_t),
                                    cudaMemcpyHostToDevice, stream_));
    if (n == 0) return;
    const bool edges = c.edge_off.get() != nullptr;
    slots_set_ = slots;  // from this launch on, the chunk's token slots need resetting
    fill_rows_kernel<<<unsigned(n), 128, 0, stream_>>>(chunk_view(), c.sent_off.get(), c.edge_off.get(),
                                                       row_token_.get(), row_edge_.get(),
                                                       slots ? c.token_slot.get() : nullptr);
    CRFX_CUDA_CHECK_LAUNCH();
    if (rows == 0) return;
    const int L = int(dims_.L);
    emission_kernel<<<grid_for(rows * L, 256), 256, 0, stream_>>>(L, rows, row_token_.get(), c.state_off.get(),
                                                                  c.state_ids.get(), c.state_vals.get(), P(w),
                                                                  S_.get());
    CRFX_CUDA_CHECK_LAUNCH();
    if (edges) {
      edge_matrix_kernel<<<unsigned(rows), 256, 0, stream_>>>(L, row_token_.get(), row_edge_.get(), c.edge_off.get(),
                                                              c.edge_ids.get(), c.edge_vals.get(), trans_ptr(w),
                                                              P(w) + dims_.edge_offset(), edge_.get());
      CRFX_CUDA_CHECK_LAUNCH();
    }
  }

  FbParams fb_params(const CudaCorpus& c, std::size_t) const {
    FbParams fp{};
    fp.L = int(dims_.L);
    fp.sent_off = c.sent_off.get();
    fp.edge_off = c.edge_off.get();
    fp.labels = c.labels.get();
    fp.ch = chunk_view();
    fp.S = S_.get();
    fp.trans = trans_ptr(*w_);
    fp.E = E_.get();
    fp.Et = Et_.get();
    fp.tmax = tmax_.get();
    fp.edge = c.edge_off.get() ? edge_.get() : nullptr;
    fp.la = la_.get();
    fp.lb = lb_.get();
    fp.result = losses_.get();
    fp.shared_E = shared_E_;
    return fp;
  }

  void launch_fb(const FbParams& fp, std::size_t n) {
    if (n == 0) return;
    forward_backward_kernel<<<unsigned(n), threads_, smem_, stream_>>>(fp);
    CRFX_CUDA_CHECK_LAUNCH();
  }

  /// g += scale · Xᵀ·delta (state and edge attributes) and the transition sums; then the
  /// token → row map is cleared for the next chunk.
  void reduce_gradient(const CudaCorpus& c, std::size_t n, std::size_t rows, double scale, double* G) {
    const std::size_t L = dims_.L, LL = L * L;
    const int per_block = kGatherWarps * 32;
    if (rows && dims_.A) {
      const std::size_t warps = std::size_t(dims_.A) * ((L + 31) / 32);
      gather_kernel<<<grid_for(warps * 32, per_block, (std::size_t(1) << 31) - 1), per_block, 0, stream_>>>(
          dims_.A, L, c.st_off.get(), c.st_tok.get(), c.st_val.get(), c.token_slot.get(), node_.get(), scale,
          G + dims_.state_offset());
      CRFX_CUDA_CHECK_LAUNCH();
    }
    if (rows && c.edge_off.get() && dims_.E) {
      const std::size_t warps = std::size_t(dims_.E) * ((LL + 31) / 32);
      gather_kernel<<<grid_for(warps * 32, per_block, (std::size_t(1) << 31) - 1), per_block, 0, stream_>>>(
          dims_.E, LL, c.et_off.get(), c.et_tok.get(), c.et_val.get(), c.token_slot.get(), edge_.get(), scale,
          G + dims_.edge_offset());
      CRFX_CUDA_CHECK_LAUNCH();
    }
    if (dims_.transitions && n) {
      const unsigned groups = unsigned((n + kTransGroup - 1) / kTransGroup);
      trans_partial_kernel<<<dim3(grid_for(LL, 256), std::min(groups, 65535u)), 256, 0, stream_>>>(LL, unsigned(n), pair_.get(),
                                                                                partial_.get());
      CRFX_CUDA_CHECK_LAUNCH();
      trans_final_kernel<<<grid_for(LL, 256), 256, 0, stream_>>>(LL, groups, partial_.get(), scale,
                                                                 G + dims_.transition_offset());
      CRFX_CUDA_CHECK_LAUNCH();
    }
    if (rows) {
      reset_slots_kernel<<<grid_for(rows, 256), 256, 0, stream_>>>(rows, row_token_.get(), c.token_slot.get());
      CRFX_CUDA_CHECK_LAUNCH();
    }
    slots_set_ = false;
  }

  CudaBackendConfig cfg_;
  cudaStream_t stream_ = nullptr;
  std::string name_;
  int threads_ = 32;         // forward-backward / Viterbi block size
  bool shared_E_ = false;    // E, Eᵀ in shared memory
  std::size_t smem_ = 0;     // dynamic shared memory of the forward-backward kernel
  const Vector* w_ = nullptr;  // weights of the current call (set by prepare)
  // Per backend: transition factors and the reduction partials.
  DeviceBuffer<double> E_, Et_, zeros_, tmax_, red_;
  // The workspace arena, sized at upload time (grow-only): rows_cap_ tokens, sents_cap_ sentences.
  std::size_t rows_cap_ = 0, sents_cap_ = 0;
  bool slots_set_ = false;  // fill_rows wrote the current chunk's token slots (not yet reset)
  DeviceBuffer<double> S_;      // [rows][L] emissions
  DeviceBuffer<double> la_;     // [rows][L] log α (Viterbi: best scores)
  DeviceBuffer<double> lb_;     // [rows][L] log β (Viterbi: back pointers)
  DeviceBuffer<double> node_;   // [rows][L] node deltas / marginals (Viterbi: labels)
  DeviceBuffer<double> edge_;   // [rows][L][L] τ_t, then edge deltas (E > 0 only)
  DeviceBuffer<std::size_t> row_token_;  // [rows]
  DeviceBuffer<std::uint8_t> row_edge_;  // [rows]
  DeviceBuffer<double> pair_;     // [sents][L][L]
  DeviceBuffer<double> partial_;  // [sents / kTransGroup][L][L]
  DeviceBuffer<double> losses_;   // [sents]
  // n-best Viterbi (tag --nbest): its own tables, grow-only, at most about kNbestBytes per chunk.
  static constexpr std::size_t kNbestBytes = std::size_t(256) << 20;
  DeviceBuffer<double> nb_d_, nb_score_;
  DeviceBuffer<std::uint32_t> nb_back_, nb_out_;
  DeviceBuffer<std::uint32_t> sent_, order_;  // [sents]
  DeviceBuffer<std::size_t> slots_;           // [sents + 1]
  // Stochastic trainers.
  SpanPlan sp_plan_;                     // evaluate_sparse: the span plan and its marginals
  DeviceBuffer<double> sp_node_, sp_pair_, sp_edge_;
  std::vector<double> h_dense_;          // dense host scratch (feature_difference), all-zero
  std::vector<std::size_t> h_index_;     // support staging
  std::vector<double> h_value_;
  std::vector<std::uint8_t> mark_a_, mark_e_;
  std::vector<std::uint32_t> attrs_, edges_;
  // Host staging of the chunk plan.
  std::vector<std::uint32_t> h_sent_, h_order_;
  std::vector<std::uint32_t> plan_mark_;  // [S] generation of a chunk's sentences (repeat check)
  std::uint32_t plan_gen_ = 0;
  std::vector<std::size_t> h_slots_;
  std::vector<double> h_losses_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Dims& dims, const CudaBackendConfig& config) {
  return std::make_unique<CudaBackend>(dims, config);
}

}  // namespace crfx::cuda
