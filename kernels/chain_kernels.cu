// crfx — the chunk kernels up to the marginals: fill_rows, reset_slots, emission, edge_matrix,
// prepare and forward_backward, and their launchers (declared in chain_kernels.cuh). The
// pipeline they form is described at the top of cuda_backend.cuh.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "device_buffer.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

/// Block per chunk sentence: row → token, row has edge items, and token → row.
__global__ void __launch_bounds__(128) fill_rows_kernel(ChunkView ch, const std::size_t* sent_off, const std::size_t* edge_off,
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

__global__ void __launch_bounds__(256) reset_slots_kernel(std::size_t rows, const std::size_t* row_token, int* token_slot) {
  for (std::size_t r = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::size_t(gridDim.x) * blockDim.x)
    token_slot[row_token[r]] = -1;
}

/// S[r][y] = Σ_k x_k · W[a_k·L + y] over the token's items in CSR order, without FMA contraction
/// (bitwise the CPU's sum). A sparse layout (gl.offsets set) sums x_k · W[find(a_k, y)] over the
/// items whose row lists y, in the same order — the CPU's per-slot sum, so bitwise too. CPU twin:
/// the emission loops of CpuBackend::scores (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) emission_kernel(int L, std::size_t rows, const std::size_t* row_token,
                                const std::size_t* state_off, const std::uint32_t* ids,
                                const double* vals, const double* W, WeightGroups gl, double* S) {
  const std::size_t n = rows * std::size_t(L);
  for (std::size_t idx = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; idx < n;
       idx += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = idx / L, y = idx - r * L;
    const std::size_t tok = row_token[r];
    double acc = 0;
    if (gl.dense()) {
      for (std::size_t k = state_off[tok]; k < state_off[tok + 1]; ++k)
        acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[std::size_t(ids[k]) * L + y]));
    } else {
      for (std::size_t k = state_off[tok]; k < state_off[tok + 1]; ++k) {
        const std::size_t q = gl.find(ids[k], std::uint32_t(y));
        if (q != WeightGroups::kNoWeight) acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[q]));
      }
    }
    S[idx] = acc;
  }
}

/// Emissions by row: a group of G lanes (8, 16 or 32, the least ≥ L) per row, 256 / G rows a
/// block, the same sums in the same order as emission_kernel (bitwise). Dense layout: lane y sums
/// labels y, y + G, … in a register over the token's items, each item's row read coalesced. Sparse
/// layout: per item the group walks the attribute's row (no search) and lane q adds x · W[q] to
/// its slot's sum in shared memory [256 / G][L]; a row's slots are distinct, and the warp steps
/// through items together (its groups' longest item list, a __syncwarp after each), so each
/// slot's sum is taken in item order.
template <int G>
__global__ void __launch_bounds__(256) emission_rows_kernel(int L, std::size_t rows, const std::size_t* row_token,
                                                            const std::size_t* state_off, const std::uint32_t* ids,
                                                            const double* vals, const double* W, WeightGroups gl,
                                                            double* S) {
  constexpr unsigned kRows = 256 / G;
  const unsigned lane = threadIdx.x % G, grp = threadIdx.x / G;
  const std::size_t r = blockIdx.x * std::size_t(kRows) + grp;
  const bool live = r < rows;
  std::size_t k0 = 0, k1 = 0;
  if (live) {
    const std::size_t tok = row_token[r];
    k0 = state_off[tok];
    k1 = state_off[tok + 1];
  }
  const unsigned UL = unsigned(L);
  if (gl.dense()) {
    if (!live) return;
    for (unsigned y0 = 0; y0 < UL; y0 += G) {
      const unsigned y = y0 + lane;
      if (y >= UL) break;
      double acc = 0;
      for (std::size_t k = k0; k < k1; ++k)
        acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[std::size_t(ids[k]) * UL + y]));
      S[r * UL + y] = acc;
    }
    return;
  }
  CRFX_DYNAMIC_SHARED(double, smem);
  double* acc = smem + std::size_t(grp) * UL;
  for (unsigned y = lane; y < UL; y += G) acc[y] = 0;
  unsigned most = unsigned(k1 - k0);  // the warp's longest item list
  for (int o = 16; o > 0; o >>= 1) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
  __syncwarp(0xffffffffu);
  for (unsigned i = 0; i < most; ++i) {
    if (k0 + i < k1) {
      const std::size_t k = k0 + i;
      const std::uint32_t a = ids[k];
      const double x = vals ? vals[k] : 1.0;
      const std::size_t b = gl.begin(a), e = b + gl.size(a);
      for (std::size_t q = b + lane; q < e; q += G) acc[gl.slots[q]] = __dadd_rn(acc[gl.slots[q]], __dmul_rn(x, W[q]));
    }
    __syncwarp(0xffffffffu);
  }
  if (live)
    for (unsigned y = lane; y < UL; y += G) S[r * UL + y] = acc[y];
}

/// Block per row with edge items: τ_t = τ + Σ_k x_k · W_e[k] (CPU order, no FMA contraction); a
/// sparse layout adds x_k · W[find(edge(e_k), j)] where the row lists pair j. CPU twin: the
/// enriched-edge loop of CpuBackend::scores (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) edge_matrix_kernel(int L, const std::size_t* row_token, const std::uint8_t* row_edge,
                                   const std::size_t* edge_off, const std::uint32_t* ids,
                                   const double* vals, const double* trans, const double* W,
                                   WeightGroups gl, double* M) {
  const std::size_t r = blockIdx.x;
  if (!row_edge[r]) return;
  const std::size_t LL = std::size_t(L) * L, tok = row_token[r];
  double* out = M + r * LL;
  const double* WE = W + gl.begin(gl.edge(0));  // dense: the edge blocks
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    double acc = trans[j];
    if (gl.dense()) {
      for (std::size_t k = edge_off[tok]; k < edge_off[tok + 1]; ++k)
        acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, WE[std::size_t(ids[k]) * LL + j]));
    } else {
      for (std::size_t k = edge_off[tok]; k < edge_off[tok + 1]; ++k) {
        const std::size_t q = gl.find(gl.edge(ids[k]), std::uint32_t(j));
        if (q != WeightGroups::kNoWeight) acc = __dadd_rn(acc, __dmul_rn(vals ? vals[k] : 1.0, W[q]));
      }
    }
    out[j] = acc;
  }
}

/// out[j] = W[find(gid, j)], or 0 where group gid's row does not list slot j. CPU twin: the
/// dense_trans of CpuBackend::prepare (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) dense_row_kernel(WeightGroups gl, std::uint32_t gid, std::size_t width,
                                                        const double* W, double* out) {
  for (std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; j < width;
       j += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t q = gl.find(gid, std::uint32_t(j));
    out[j] = q != WeightGroups::kNoWeight ? W[q] : 0.0;
  }
}

/// One block: τ_max = max τ (0 when not finite), E = exp(τ − τ_max), Eᵀ. CPU twin:
/// CpuBackend::prepare (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(1024) prepare_kernel(int L, const double* trans, double* E, double* Et, double* tmax_out) {
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

/// The threads that run one sentence: a whole block (L > 32: thread y handles labels y, y +
/// blockDim, …), or one warp of a block that runs a sentence per warp (L ≤ 32: no block barrier,
/// the reductions by shuffles). Both reduce in the same fixed shape (the warp's butterfly, then
/// the warps in order), so a warp gives the bits a block of 32 threads gives.
struct BlockGroup {
  double* red;  // [32] shared reduction scratch
  __device__ int tid() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ double max(double v) const { return block_max(v, red); }
  __device__ double sum(double v) const { return block_sum(v, red); }
};

struct WarpGroup {
  __device__ int tid() const { return threadIdx.x & 31; }
  __device__ int size() const { return 32; }
  __device__ void sync() const { __syncwarp(0xffffffffu); }
  __device__ double max(double v) const {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  __device__ double sum(double v) const {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
};

/// log Σ_y exp(v(y)) over the group's labels (every thread gets it): the max, then the sum of
/// shifted exps (both fixed-shape reductions).
template <class Group, class F>
__device__ double group_log_sum_exp(const Group& g, int L, F v) {
  double mloc = -CUDART_INF;
  for (int y = g.tid(); y < L; y += g.size()) mloc = fmax(mloc, v(y));
  const double m = g.max(mloc);
  if (!isfinite(m)) return m;
  double sloc = 0;
  for (int y = g.tid(); y < L; y += g.size()) sloc += exp(v(y) - m);
  return m + log(g.sum(sloc));
}

/// What every step of one sentence's forward-backward reads: the group's view of FbParams.
template <class Group>
struct FbSentence {
  Group g;
  int L;
  std::size_t LL, T, tok0, r0;
  double* vec;       // [L] shared scratch
  double* rowa;      // [L] shared: per row y', the pairwise factor a(y') or −1 (see pairwise)
  double* pacc;      // [L][L] shared: the sentence's pair sums, or null (summed in p->pair)
  const double* E;   // exp(τ − τ_max), [L][L] (shared memory when it fits)
  const double* Et;  // Eᵀ
  double tmax;
  bool single;       // L ≤ the group's threads: thread y keeps label y's â and b̂ in registers
  const double* S;   // [T][L] emissions
  double* la;        // [T][L] â
  double* lb;        // [T][L] b̂
  const FbParams* p;
  /// τ_t's per-position matrix when position t has edge items, else null (τ is p->trans).
  __device__ double* edge_at(std::size_t t) const {
    return p->edge && row_has_edge(p->edge_off, tok0 + t, t) ? p->edge + (r0 + t) * LL : nullptr;
  }
};

/// Forward step t ≥ 1: â_t(y) = s_t(y) + log Σ_y' exp(â_{t−1}(y') − m + τ_t(y', y)); returns the
/// shift m = max â_{t−1} (0 when no path reaches t − 1), which c_t adds to c_{t−1}. With one label
/// a thread (f.single), `own` carries thread y's â_{t−1}(y) in and â_t(y) out, and s_t(y) is loaded
/// before the reductions wait: the recursion's chain never waits on memory for its own row (the
/// rows in memory serve the exact paths and the backward pass). The same arithmetic either way.
template <class Group>
__device__ double forward_step(const FbSentence<Group>& f, std::size_t t, double& own) {
  const int L = f.L, tid = f.g.tid(), nth = f.g.size();
  const double* ap = f.la + (t - 1) * L;
  double* at = f.la + t * L;
  const double* st = f.S + t * L;
  const double* M = f.edge_at(t);
  const double s_own = f.single && tid < L ? st[tid] : 0.0;
  auto prev = [&](int y) { return f.single ? own : ap[y]; };  // y is the thread's own label
  auto score = [&](int y) { return f.single ? s_own : st[y]; };
  double mloc = -CUDART_INF;
  for (int y = tid; y < L; y += nth) mloc = fmax(mloc, prev(y));
  double m = f.g.max(mloc);
  const bool finite = isfinite(m);
  if (!finite) m = 0;  // no path reaches position t − 1: nothing to shift
  if (M) {             // per-position matrix: exact log space
    for (int y = tid; y < L; y += nth) {
      const double v = score(y) + log_sum_exp_seq(L, [&](int yp) { return ap[yp] - m + M[std::size_t(yp) * L + y]; });
      at[y] = v;
      own = v;
    }
  } else {  // shared matrix: τ_max + log Σ_y' exp(â_{t−1} − m) · E(y', y)
    for (int y = tid; y < L; y += nth) f.vec[y] = exp(prev(y) - m);
    f.g.sync();
    for (int y = tid; y < L; y += nth) {
      double sum = 0;
      for (int yp = 0; yp < L; ++yp) sum += f.vec[yp] * f.E[std::size_t(yp) * L + y];
      double v;
      if (sum > kTinySum && finite) {
        v = score(y) + (f.tmax + log(sum));
      } else {
        const double* tr = f.p->trans;
        v = score(y) + log_sum_exp_seq(L, [&](int yp) { return ap[yp] - m + tr[std::size_t(yp) * L + y]; });
      }
      at[y] = v;
      own = v;
    }
  }
  f.g.sync();
  return m;
}

/// Backward step t ≥ 1: b̂_{t−1}(y') = log Σ_y exp(τ_t(y', y) + s_t(y) + b̂_t(y) − m); returns the
/// shift m = max_y s_t(y) + b̂_t(y) (0 when no path continues from t). With one label a thread,
/// `own` carries b̂_t(y) in and b̂_{t−1}(y) out, as forward_step's.
template <class Group>
__device__ double backward_step(const FbSentence<Group>& f, std::size_t t, double& own) {
  const int L = f.L, tid = f.g.tid(), nth = f.g.size();
  const double* bt = f.lb + t * L;
  const double* st = f.S + t * L;
  double* bp = f.lb + (t - 1) * L;
  const double* M = f.edge_at(t);
  const double s_own = f.single && tid < L ? st[tid] : 0.0;
  auto next = [&](int y) { return f.single ? s_own + own : st[y] + bt[y]; };  // y: the thread's own
  double ml = -CUDART_INF;
  for (int y = tid; y < L; y += nth) ml = fmax(ml, next(y));
  double m = f.g.max(ml);
  const bool finite = isfinite(m);
  if (!finite) m = 0;
  if (M) {
    for (int yp = tid; yp < L; yp += nth) {
      const double* row = M + std::size_t(yp) * L;
      const double v = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y] - m; });
      bp[yp] = v;
      own = v;
    }
  } else {
    for (int y = tid; y < L; y += nth) f.vec[y] = exp(next(y) - m);
    f.g.sync();
    for (int yp = tid; yp < L; yp += nth) {
      double sum = 0;
      for (int y = 0; y < L; ++y) sum += f.Et[std::size_t(y) * L + yp] * f.vec[y];
      double v;
      if (sum > kTinySum && finite) {
        v = f.tmax + log(sum);
        f.rowa[yp] = 1.0;  // pairwise may factor this row
      } else {
        const double* row = f.p->trans + std::size_t(yp) * L;
        v = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y] - m; });
        f.rowa[yp] = -1.0;
      }
      bp[yp] = v;
      own = v;
    }
  }
  f.g.sync();  // b̂_{t−1} complete; every read of τ_t for it is done
  return m;
}

/// Pairwise marginals of position t ≥ 1, minus the gold pair: p_t(y', y) = exp(â_{t−1}(y') +
/// τ_t(y', y) + s_t(y) + b̂_t(y) − q) with q = z_{t−1} + m (m: backward_step(t)'s shift), since
/// Σ_{y', y} of the numerators is Σ_y' exp(â_{t−1}(y') + b̂_{t−1}(y') + m). Where τ_t is the shared
/// matrix and backward_step summed row y' in exp space, the row factors: p_t(y', y) = (a(y') ·
/// E(y', y)) · v(y), with a(y') = exp(â_{t−1}(y') + τ_max − z_{t−1}) and v(y) = exp(s_t(y) + b̂_t(y)
/// − m) still in f.vec — L exps a position, not L² (a(y') = p_{t−1}(y') / Σ_y E(y', y) v(y) ≤
/// 1/kTinySum, so the product under/overflows only where p_t itself is below the double range);
/// other rows (and a per-position matrix) exactly, an exp per entry. Added to `acc` [L][L]; at a
/// position with edge items also written over τ_t (the edge deltas). Entry j = y'·L + y goes to
/// thread j mod size() at every t, so `acc` needs no atomics.
template <class Group>
__device__ void pairwise(const FbSentence<Group>& f, std::size_t t, double z, double m, double a_own, double* acc) {
  const unsigned L = unsigned(f.L), LL = unsigned(f.LL), tid = unsigned(f.g.tid()), nth = unsigned(f.g.size());
  const std::uint32_t* labels = f.p->labels;
  const unsigned gj = f.p->gold ? labels[f.tok0 + t - 1] * L + labels[f.tok0 + t] : LL;
  const double* ap = f.la + (t - 1) * L;
  const double* bt = f.lb + t * L;
  const double* st = f.S + t * L;
  double* M = f.edge_at(t);
  if (!M) {
    for (unsigned yp = tid; yp < L; yp += nth)  // (a_own: â_{t−1} of the thread's own label)
      f.rowa[yp] = f.rowa[yp] > 0 ? exp((f.single ? a_own : ap[yp]) + f.tmax - z) : -1.0;
    f.g.sync();
  }
  const double q = z + m;
  double* pair_at = f.p->pair_at ? f.p->pair_at + (f.r0 + t) * f.LL : nullptr;
  const unsigned dyp = nth / L, dy = nth % L;  // j = y'·L + y advanced by nth without a division
  unsigned yp = tid / L, y = tid % L;
  for (unsigned j = tid; j < LL; j += nth) {
    const double a = M ? -1.0 : f.rowa[yp];
    double pr;
    if (a >= 0) {
      pr = (a * f.E[j]) * f.vec[y];
    } else {
      const double tau = M ? M[j] : f.p->trans[j];
      pr = exp(ap[yp] + tau + st[y] + bt[y] - q);
    }
    const double d = j == gj ? pr - 1.0 : pr;
    acc[j] += d;
    if (M) M[j] = d;
    if (pair_at) pair_at[j] = pr;
    y += dy;
    yp += dyp;
    if (y >= L) y -= L, ++yp;
  }
}

/// Node marginals of position t, p_t(y) = exp(â_t + b̂_t − z_t), minus 1 at the gold label
/// (a_own, b_own: the thread's own label's â_t, b̂_t when f.single).
template <class Group>
__device__ void node_marginals(const FbSentence<Group>& f, std::size_t t, double z, double a_own, double b_own) {
  const FbParams& p = *f.p;
  if (!p.node) return;
  const std::uint32_t g = p.gold ? p.labels[f.tok0 + t] : 0xffffffffu;
  double* out = p.node + (f.r0 + t) * f.L;
  for (int y = f.g.tid(); y < f.L; y += f.g.size()) {
    const double v = exp((f.single ? a_own + b_own : f.la[t * f.L + y] + f.lb[t * f.L + y]) - z);
    out[y] = std::uint32_t(y) == g ? v - 1.0 : v;
  }
}

/// The gold path's terms at position t: s_t(y_t) and, for t ≥ 1, τ_t(y_{t−1}, y_t) (else 0; read
/// before the backward pass overwrites τ_t with the deltas). One thread loads them before the
/// forward step and adds them, s then τ, in t order after it: the loads wait beside the
/// recursion's instead of on its path.
template <class Group>
__device__ void gold_terms(const FbSentence<Group>& f, std::size_t t, double& s, double& tau) {
  const std::uint32_t* g = f.p->labels + f.tok0;
  s = f.S[t * f.L + g[t]];
  tau = 0;
  if (t > 0) {
    const double* M = f.edge_at(t);
    tau = (M ? M : f.p->trans)[std::size_t(g[t - 1]) * f.L + g[t]];
  }
}

/// Independent positions (FbParams::independent): per position t, z_t = log Σ_y exp s_t(y), log Z
/// = Σ_t z_t (in t order) and node marginals exp(s_t − z_t) (minus 1 at the gold label); O(L) a
/// position, no recursion (â, b̂ are not written: nothing reads them on this path).
template <class Group>
__device__ void independent_sentence(const FbSentence<Group>& f, std::size_t i) {
  const FbParams& p = *f.p;
  double log_z = 0, gold = 0;
  for (std::size_t t = 0; t < f.T; ++t) {
    const double* st = f.S + t * f.L;
    const double z = group_log_sum_exp(f.g, f.L, [&](int y) { return st[y]; });
    log_z += z;
    const std::uint32_t g = p.gold ? p.labels[f.tok0 + t] : 0xffffffffu;
    if (p.gold) gold += st[g];
    if (!p.backward || !p.node) continue;
    double* out = p.node + (f.r0 + t) * f.L;
    for (int y = f.g.tid(); y < f.L; y += f.g.size()) {
      const double v = exp(st[y] - z);
      out[y] = std::uint32_t(y) == g ? v - 1.0 : v;
    }
  }
  if (f.g.tid() == 0) p.result[i] = log_z - gold;
}

/// One sentence's forward-backward by the group `f.g` (chunk sentence i; f.L, f.LL, f.vec, f.E,
/// f.Et, f.tmax and f.p set by the kernel).
///
/// The CPU twin is host/cpu/chain.cpp (scaled exp space, per-position normalisers, with a
/// whole-sentence log-space fallback). Here the recursions run in log space, each position stored
/// with its own shift: â_t = log α_t − c_t and b̂_t = log β_t − d_t, where the shift of a position
/// is the maximum its recursion step computes anyway (max_y' â_{t−1}(y'), max_y s_t(y) + b̂_t(y)),
/// so every stored value stays within |scores| + log L of 0 whatever the sentence length, and
/// log Z = c_{T−1} + log Σ_y exp â_{T−1}(y). Marginals are normalised per position — p_t(y) =
/// exp(â_t + b̂_t − z_t) with z_t the position's own log Σ_y exp(â_t + b̂_t), and p_t(y', y) by
/// q_t = z_{t−1} + (the shift of b̂_{t−1}) — so their error does not grow with T (no difference of
/// two O(T) logs is ever exponentiated). The inner sums are max-shifted exp-space products
/// (L exps + L² FMAs per position) with an exact log-space redo of an entry whose sum falls below
/// kTinySum; pairwise marginals are exact per entry. The steps: forward_step, backward_step,
/// pairwise, node_marginals, gold_terms above.
template <class Group>
__device__ void fb_sentence(FbSentence<Group>& f, unsigned i) {
  const FbParams& p = *f.p;
  const int tid = f.g.tid(), nth = f.g.size();
  const std::uint32_t sid = p.ch.sent[i];
  f.tok0 = p.sent_off[sid];
  f.T = p.sent_off[sid + 1] - f.tok0;
  double* pair = p.pair ? p.pair + std::size_t(i) * f.LL : nullptr;
  if (f.T == 0) {
    if (tid == 0) p.result[i] = 0;
    if (pair)
      for (std::size_t j = tid; j < f.LL; j += nth) pair[j] = 0;
    return;
  }
  f.r0 = p.ch.slots[i];
  f.S = p.S + f.r0 * f.L;
  f.la = p.la + f.r0 * f.L;
  f.lb = p.lb + f.r0 * f.L;
  const std::size_t T = f.T;
  if (p.independent && !pair) {
    independent_sentence(f, i);
    return;
  }

  // Forward, from â_0 = s_0; c accumulates the shifts (the same in every thread); thread 0 the
  // gold path's score. With one label a thread, a_own is â_t of the thread's label (f.single).
  double a_own = 0;
  for (int y = tid; y < f.L; y += nth) f.la[y] = a_own = f.S[y];
  const bool scorer = p.gold && tid == 0;
  double gold = 0, gs = 0, gt = 0;
  if (scorer) {
    gold_terms(f, 0, gs, gt);
    gold += gs;
  }
  f.g.sync();
  double c = 0;
  for (std::size_t t = 1; t < T; ++t) {
    if (scorer) gold_terms(f, t, gs, gt);
    c += forward_step(f, t, a_own);
    if (scorer) {
      gold += gs;
      gold += gt;
    }
  }

  // log Z = c_{T−1} + log Σ_y exp â_{T−1}(y); z_{T−1} (the last position's normaliser) is the sum.
  const double* aT = f.la + (T - 1) * f.L;
  const double z_last = group_log_sum_exp(f.g, f.L, [&](int y) { return f.single ? a_own : aT[y]; });
  const double log_z = isfinite(z_last) ? c + z_last : z_last;
  if (tid == 0) p.result[i] = log_z - gold;
  if (!p.backward) return;

  // Backward, from b̂_{T−1} = 0, with the marginals of each position; the pair sums in shared
  // memory when the launch gave room (copied out at the end by the threads that summed them).
  double* acc = pair && f.pacc ? f.pacc : pair;
  if (acc)
    for (std::size_t j = tid; j < f.LL; j += nth) acc[j] = 0;
  for (int y = tid; y < f.L; y += nth) f.lb[(T - 1) * f.L + y] = 0;
  double b_own = 0;  // b̂_t of the thread's label (f.single)
  f.g.sync();
  node_marginals(f, T - 1, z_last, a_own, b_own);
  const bool mine = f.single && tid < f.L;
  for (std::size_t t = T - 1; t > 0; --t) {
    const double* ap = f.la + (t - 1) * f.L;
    const double* bp = f.lb + (t - 1) * f.L;
    const double a_prev = mine ? ap[tid] : 0.0;  // â_{t−1}: the forward pass's, loaded ahead
    const double shift = backward_step(f, t, b_own);
    const double z = group_log_sum_exp(f.g, f.L, [&](int y) { return f.single ? a_prev + b_own : ap[y] + bp[y]; });
    if (acc) pairwise(f, t, z, shift, a_prev, acc);
    node_marginals(f, t - 1, z, a_prev, b_own);
    f.g.sync();
  }
  if (acc != pair)
    for (std::size_t j = tid; j < f.LL; j += nth) pair[j] = acc[j];
}

/// E and Eᵀ into shared memory (`to`, 2·L² doubles) by the whole block.
__device__ void copy_E(const FbParams& p, std::size_t LL, double* to) {
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    to[j] = p.E[j];
    to[LL + j] = p.Et[j];
  }
  __syncthreads();
}

/// One block per sentence (L > 32), longest sentences first. Dynamic shared memory: vec [L],
/// red [32], rowa [L], then E, Eᵀ [L][L] each when shared_E (the pair sums stay in p.pair).
__global__ void __launch_bounds__(512, 1) forward_backward_kernel(FbParams p) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<BlockGroup> f;
  f.L = p.L;
  f.LL = std::size_t(p.L) * p.L;
  f.vec = smem;
  f.g.red = smem + p.L;
  f.rowa = f.g.red + 32;
  f.pacc = nullptr;
  f.E = p.E;
  f.Et = p.Et;
  f.p = &p;
  if (p.shared_E) {
    copy_E(p, f.LL, f.rowa + p.L);
    f.E = f.rowa + p.L;
    f.Et = f.E + f.LL;
  }
  f.tmax = *p.tmax;
  f.single = f.L <= f.g.size();
  fb_sentence(f, p.ch.order[blockIdx.x]);
}

/// A sentence per warp (L ≤ 32), kFbWarps warps a block, the longest sentences first; the same
/// arithmetic in the same order as forward_backward_kernel with one warp. Dynamic shared memory:
/// E, Eᵀ [L][L] each when shared_E, then per warp vec [L], rowa [L] and, when shared_pair, the
/// sentence's pair sums [L][L].
__global__ void __launch_bounds__(kFbWarps * 32) forward_backward_warp_kernel(FbParams p, unsigned n) {
  CRFX_DYNAMIC_SHARED(double, smem);
  FbSentence<WarpGroup> f;
  f.L = p.L;
  f.LL = std::size_t(p.L) * p.L;
  f.E = p.E;
  f.Et = p.Et;
  f.p = &p;
  double* rest = smem;
  if (p.shared_E) {
    copy_E(p, f.LL, smem);
    f.E = smem;
    f.Et = smem + f.LL;
    rest = smem + 2 * f.LL;
  }
  const unsigned v = threadIdx.x / 32, k = blockIdx.x * kFbWarps + v;
  if (k >= n) return;  // warp-uniform, after the block's only barrier
  const std::size_t per_warp = 2 * std::size_t(p.L) + (p.shared_pair ? f.LL : 0);
  f.vec = rest + std::size_t(v) * per_warp;
  f.rowa = f.vec + p.L;
  f.pacc = p.shared_pair ? f.rowa + p.L : nullptr;
  f.tmax = *p.tmax;
  f.single = f.L <= f.g.size();
  fb_sentence(f, p.ch.order[k]);
}

__global__ void __launch_bounds__(256) seq_exp_kernel(FbParams p) {
  const std::size_t i = blockIdx.x, L = std::size_t(p.L), LL = L * L;
  const double lf = p.result[i], f = exp(lf);
  const std::size_t r0 = p.ch.slots[i], r1 = p.ch.slots[i + 1];
  if (p.node)
    for (std::size_t j = r0 * L + threadIdx.x; j < r1 * L; j += blockDim.x) p.node[j] = exp_scaled(lf, f, p.node[j]);
  if (p.pair)
    for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) p.pair[i * LL + j] = exp_scaled(lf, f, p.pair[i * LL + j]);
  if (p.edge && p.node) {  // gradient mode: the deltas of the positions with edge items
    const std::size_t tok0 = p.sent_off[p.ch.sent[i]];
    for (std::size_t r = r0; r < r1; ++r) {
      if (!row_has_edge(p.edge_off, tok0 + (r - r0), r - r0)) continue;
      for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) p.edge[r * LL + j] = exp_scaled(lf, f, p.edge[r * LL + j]);
    }
  }
  __syncthreads();  // every thread has read result[i]
  if (threadIdx.x == 0) p.result[i] = f;
}

/// Block per chunk sentence. Scratch per sentence rows: A in la, ρ in lb, B in S (emissions and
/// the recursions are no longer needed). Thread j of a row loop keeps the same entries at every
/// position, so the pair sums need no atomics.
__global__ void __launch_bounds__(256) pointwise_loss_kernel(FbParams p, bool exp_loss, bool gradient) {
  __shared__ double sh[2];  // W, and 1 when the scaled sweeps cannot carry the sentence
  const std::size_t i = blockIdx.x, L = std::size_t(p.L), LL = L * L;
  const std::size_t r0 = p.ch.slots[i], T = p.ch.slots[i + 1] - r0;
  const std::size_t tok0 = p.sent_off[p.ch.sent[i]];
  const std::uint32_t* gold = p.labels + tok0;
  double* pair = p.pair ? p.pair + i * LL : nullptr;
  if (gradient && pair)
    for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) pair[j] = 0;
  if (T == 0) {
    if (threadIdx.x == 0) p.result[i] = 0;
    return;
  }
  const double* mu = p.node + r0 * L;  // μ (overwritten by the node gradient, each row after its last read)
  if (threadIdx.x == 0) {
    double loss = 0, W = 0, c_sum = 0;
    bool bad = false;
    for (std::size_t t = 0; t < T; ++t) {
      const double m = mu[t * L + gold[t]];
      if (!(m >= kGoldFloor)) bad = true;
      const double w = exp_loss ? 1.0 / m : 1.0;
      loss += exp_loss ? w : -log(m);
      W += w;
      c_sum += w / m;
    }
    if (!(c_sum <= kMaxLossWeight)) bad = true;
    p.result[i] = bad ? CUDART_NAN : loss;
    sh[0] = W;
    sh[1] = bad ? 1.0 : 0.0;
  }
  __syncthreads();
  if (!gradient || sh[1] != 0) return;
  const double W = sh[0];
  auto weight = [&](std::size_t t) { return exp_loss ? 1.0 / mu[t * L + gold[t]] : 1.0; };
  double* A = p.la + r0 * L;
  double* rho = p.lb + r0 * L;  // row u − 1: ρ_{u−1}
  double* B = const_cast<double*>(p.S) + r0 * L;  // row u: B_u (S_ is the backend's scratch, read by forward_backward only)
  const double* P = p.pair_at + r0 * LL;  // row u: P_u
  // Forward: A_0 = 0, ρ_{u−1} = (A_{u−1} + w_{u−1}·1[gold]) / μ_{u−1}, A_u = Σ_y' ρ_{u−1}(y') P_u(y', ·).
  for (std::size_t y = threadIdx.x; y < L; y += blockDim.x) A[y] = 0;
  __syncthreads();
  for (std::size_t u = 1; u < T; ++u) {
    for (std::size_t yp = threadIdx.x; yp < L; yp += blockDim.x) {
      const double a = A[(u - 1) * L + yp] + (yp == gold[u - 1] ? weight(u - 1) : 0.0);
      const double m = mu[(u - 1) * L + yp];
      rho[(u - 1) * L + yp] = m > 0 ? a / m : 0.0;
    }
    __syncthreads();
    const double* Pu = P + u * LL;
    for (std::size_t y = threadIdx.x; y < L; y += blockDim.x) {
      double s = 0;
      for (std::size_t yp = 0; yp < L; ++yp) s += rho[(u - 1) * L + yp] * Pu[yp * L + y];
      A[u * L + y] = s;
    }
    __syncthreads();
  }
  // Backward: B_{T−1} = w_{T−1}·1[gold]; at u: B_{u−1}(y') = w_{u−1}·1[gold] + Σ_y P_u(y', y) κ_u(y)
  // with κ_u = B_u/μ_u; the pair gradient P_u·(W − ρ_{u−1}(y') − κ_u(y)) over P_u; the node
  // gradient W·μ_u − A_u − B_u over μ_u.
  for (std::size_t y = threadIdx.x; y < L; y += blockDim.x)
    B[(T - 1) * L + y] = y == gold[T - 1] ? weight(T - 1) : 0.0;
  __syncthreads();
  double* node = p.node + r0 * L;
  auto kappa = [&](std::size_t u, std::size_t y) {
    const double m = mu[u * L + y];
    return m > 0 ? B[u * L + y] / m : 0.0;
  };
  for (std::size_t u = T - 1; u > 0; --u) {
    const double* Pu = P + u * LL;
    for (std::size_t yp = threadIdx.x; yp < L; yp += blockDim.x) {
      double b = yp == gold[u - 1] ? weight(u - 1) : 0.0;
      for (std::size_t y = 0; y < L; ++y) b += Pu[yp * L + y] * kappa(u, y);
      B[(u - 1) * L + yp] = b;
    }
    __syncthreads();
    double* Gu = p.pair_at + (r0 + u) * LL;
    for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
      const std::size_t yp = j / L, y = j - yp * L;
      const double g = Gu[j] * (W - rho[(u - 1) * L + yp] - kappa(u, y));
      Gu[j] = g;
      if (pair) pair[j] += g;
    }
    __syncthreads();
    for (std::size_t y = threadIdx.x; y < L; y += blockDim.x)
      node[u * L + y] = W * mu[u * L + y] - A[u * L + y] - B[u * L + y];
    __syncthreads();
  }
  for (std::size_t y = threadIdx.x; y < L; y += blockDim.x) node[y] = W * mu[y] - A[y] - B[y];
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) p.pair_at[r0 * LL + j] = 0;  // no factor at t = 0
}

}  // namespace

void launch_pointwise_loss(const FbParams& p, std::size_t n, bool exp_loss, bool gradient, cudaStream_t s) {
  if (n == 0) return;
  CRFX_LAUNCH(pointwise_loss_kernel, unsigned(n), 256, 0, s, p, exp_loss, gradient);
}

void launch_seq_exp(const FbParams& p, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  CRFX_LAUNCH(seq_exp_kernel, unsigned(n), 256, 0, s, p);
}

void launch_fill_rows(std::size_t n, ChunkView ch, const std::size_t* sent_off, const std::size_t* edge_off,
                      std::size_t* row_token, std::uint8_t* row_edge, int* token_slot, cudaStream_t s) {
  CRFX_LAUNCH(fill_rows_kernel, unsigned(n), 128, 0, s, ch, sent_off, edge_off, row_token, row_edge, token_slot);
}

void launch_reset_slots(std::size_t rows, const std::size_t* row_token, int* token_slot, cudaStream_t s) {
  CRFX_LAUNCH(reset_slots_kernel, grid_for(rows, 256), 256, 0, s, rows, row_token, token_slot);
}

void launch_emission(int L, std::size_t rows, const std::size_t* row_token, const std::size_t* state_off,
                     const std::uint32_t* ids, const double* vals, const double* W, const WeightGroups& gl,
                     double* S, cudaStream_t s) {
  if (L > kEmissionRowsMaxL) {  // the sparse sums [8][L] would pass 32 KB of shared memory
    CRFX_LAUNCH(emission_kernel, grid_for(rows * L, 256), 256, 0, s, L, rows, row_token, state_off, ids, vals, W,
                gl, S);
    return;
  }
  const unsigned G = L <= 8 ? 8 : L <= 16 ? 16 : 32, per_block = 256 / G;
  const unsigned grid = unsigned((rows + per_block - 1) / per_block);
  const std::size_t smem = gl.dense() ? 0 : std::size_t(per_block) * L * sizeof(double);
  if (grid == 0) return;
  if (G == 8)
    CRFX_LAUNCH(emission_rows_kernel<8>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S);
  else if (G == 16)
    CRFX_LAUNCH(emission_rows_kernel<16>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S);
  else
    CRFX_LAUNCH(emission_rows_kernel<32>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S);
}

void launch_edge_matrix(int L, std::size_t rows, const std::size_t* row_token, const std::uint8_t* row_edge,
                        const std::size_t* edge_off, const std::uint32_t* ids, const double* vals,
                        const double* trans, const double* W, const WeightGroups& gl, double* M, cudaStream_t s) {
  CRFX_LAUNCH(edge_matrix_kernel, unsigned(rows), 256, 0, s, L, row_token, row_edge, edge_off, ids, vals, trans, W,
              gl, M);
}

void launch_dense_row(const WeightGroups& gl, std::uint32_t gid, std::size_t width, const double* W, double* out,
                      cudaStream_t s) {
  CRFX_LAUNCH(dense_row_kernel, grid_for(width, 256), 256, 0, s, gl, gid, width, W, out);
}

void launch_prepare(int L, const double* trans, double* E, double* Et, double* tmax_out, cudaStream_t s) {
  CRFX_LAUNCH(prepare_kernel, 1, 1024, 0, s, L, trans, E, Et, tmax_out);
}

std::size_t forward_backward_smem(int L, bool shared_E, bool shared_pair) {
  const std::size_t LL = std::size_t(L) * L, E = shared_E ? 2 * LL : 0;
  if (L > 32) return (L + 32 + L + E) * sizeof(double);
  return (E + std::size_t(kFbWarps) * (2 * std::size_t(L) + (shared_pair ? LL : 0))) * sizeof(double);
}

void launch_forward_backward(const FbParams& p, std::size_t n, int threads, cudaStream_t s) {
  const std::size_t smem = forward_backward_smem(p.L, p.shared_E, p.shared_pair);
  if (p.L <= 32)
    CRFX_LAUNCH(forward_backward_warp_kernel, unsigned((n + kFbWarps - 1) / kFbWarps), kFbWarps * 32, smem, s, p,
                unsigned(n));
  else {
    if (smem > kSharedLimit)  // L beyond ~3000: vec, red and rowa pass the default 48 KB
      CRFX_CUDA_CHECK(cudaFuncSetAttribute(forward_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(smem)));
    CRFX_LAUNCH(forward_backward_kernel, unsigned(n), threads, smem, s, p);
  }
}

}  // namespace crfx::cuda::detail
