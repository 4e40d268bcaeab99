// crfx — the chunk kernels up to the marginals: fill_rows, reset_slots, emission, edge_matrix,
// prepare and the fused forward-backward (its device functions in fb_device.cuh), and their
// launchers (declared in chain_kernels.cuh). The pipeline they form is described at the top of
// cuda_backend.cuh.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "chain_kernels.cuh"
#include "common.cuh"
#include "device_buffer.cuh"
#include "fb_device.cuh"
#include "launch.cuh"

namespace crfx::cuda::detail {
namespace {

using namespace fb;  // NOLINT: the forward-backward device functions (fb_device.cuh)

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
                                const double* vals, const double* W, WeightGroups gl, double* S,
                                const bool* skip) {
  if (skip && *skip) return;  // grid-uniform
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
/// block (emission_row: the same sums in the same order as emission_kernel, bitwise; a sparse
/// layout's sums in shared memory [256 / G][L]).
template <int G>
__global__ void __launch_bounds__(256) emission_rows_kernel(int L, std::size_t rows, const std::size_t* row_token,
                                                            const std::size_t* state_off, const std::uint32_t* ids,
                                                            const double* vals, const double* W, WeightGroups gl,
                                                            double* S, const bool* skip) {
  if (skip && *skip) return;  // grid-uniform
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
  CRFX_DYNAMIC_SHARED(double, smem);
  emission_row<G>(unsigned(L), live, k0, k1, lane, ids, vals, W, gl, gl.dense() ? nullptr : smem + std::size_t(grp) * L,
                  S + r * unsigned(L));
}

/// Block per row with edge items: τ_t = τ + Σ_k x_k · W_e[k] (CPU order, no FMA contraction); a
/// sparse layout adds x_k · W[find(edge(e_k), j)] where the row lists pair j. CPU twin: the
/// enriched-edge loop of CpuBackend::scores (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) edge_matrix_kernel(int L, const std::size_t* row_token, const std::uint8_t* row_edge,
                                   const std::size_t* edge_off, const std::uint32_t* ids,
                                   const double* vals, const double* trans, const double* W,
                                   WeightGroups gl, double* M, const bool* skip) {
  const std::size_t r = blockIdx.x;
  if (!row_edge[r] || (skip && *skip)) return;
  const std::size_t LL = std::size_t(L) * L, tok = row_token[r];
  double* out = M + r * LL;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x)
    out[j] = edge_entry(gl, trans[j], j, edge_off[tok], edge_off[tok + 1], ids, vals, W);
}

/// out[j] = W[find(gid, j)], or 0 where group gid's row does not list slot j. CPU twin: the
/// dense_trans of CpuBackend::prepare (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) dense_row_kernel(WeightGroups gl, std::uint32_t gid, std::size_t width,
                                                        const double* W, double* out) {
  for (std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; j < width;
       j += std::size_t(gridDim.x) * blockDim.x)
    out[j] = dense_row_entry(gl, gid, j, W);
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

/// One block per sentence (L > 32), longest sentences first. Dynamic shared memory: vec [L],
/// red [32], rowa [L], then E, Eᵀ [L][L] each when shared_E (the pair sums stay in p.pair).
__global__ void __launch_bounds__(512, 1) forward_backward_kernel(FbParams p) {
  if (p.skip && *p.skip) return;  // grid-uniform
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

/// Several sentences a block at L > 32 — groups of `threads` threads (whole warps), a sentence
/// each, the longest first — that share one copy of E in shared memory, its rows padded to L + 1
/// (the backward step reads a row a lane, Eᵀ from E without bank conflicts), each group synced by
/// its own named barrier. The same arithmetic in the same order as forward_backward_kernel with
/// blockDim.x = threads: the same bits. Why: a block per sentence copies E (and Eᵀ) for each
/// sentence, or reads it from L2 at every position where 2·L² doubles do not fit (L ≥ ~55).
/// Dynamic shared memory: E padded [L][L + 1], then per group vec [L], red [32], rowa [L].
__global__ void __launch_bounds__(kFbGroupBlock, 1) forward_backward_groups_kernel(FbParams p, unsigned n, int threads) {
  if (p.skip && *p.skip) return;  // grid-uniform
  CRFX_DYNAMIC_SHARED(double, smem);
  const std::size_t L = std::size_t(p.L), LL = L * L, es = L + 1;
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) smem[(j / L) * es + j % L] = p.E[j];
  __syncthreads();  // the block's only one
  const unsigned g = threadIdx.x / unsigned(threads), groups = blockDim.x / unsigned(threads);
  const unsigned k = blockIdx.x * groups + g;
  if (k >= n) return;  // group-uniform
  double* mine = smem + L * es + std::size_t(g) * (2 * L + 32);
  FbSentence<SubBlockGroup> f;
  f.g = SubBlockGroup{mine + L, int(g) * threads, threads, 1 + g};
  f.L = p.L;
  f.LL = LL;
  f.vec = mine;
  f.rowa = mine + L + 32;
  f.pacc = nullptr;
  f.E = smem;
  f.Et = nullptr;
  f.es = es;
  f.p = &p;
  f.tmax = *p.tmax;
  f.single = f.L <= threads;
  fb_sentence(f, p.ch.order[k]);
}

/// A sentence per warp (L ≤ 32), kFbWarps warps a block, the longest sentences first; the same
/// arithmetic in the same order as forward_backward_kernel with one warp. Dynamic shared memory:
/// E, Eᵀ [L][L] each when shared_E, then per warp vec [L], rowa [L] and, when shared_pair, the
/// sentence's pair sums [L][L].
__global__ void __launch_bounds__(kFbWarps * 32) forward_backward_warp_kernel(FbParams p, unsigned n) {
  if (p.skip && *p.skip) return;  // grid-uniform
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

/// Threads for a block that walks the L² entries of a matrix one a thread, each on its own (an
/// elementwise map or a max, exact whatever the count): no more whole warps than entries, at most
/// `most` — at small L most of a fixed-size block would only wait at its barriers.
unsigned entry_threads(int L, unsigned most) {
  const std::size_t LL = std::size_t(L) * L, warps = (LL + 31) / 32;
  return unsigned(std::clamp<std::size_t>(warps * 32, 32, most));
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
                     double* S, cudaStream_t s, const bool* skip) {
  if (L > kEmissionRowsMaxL) {  // the sparse sums [8][L] would pass 32 KB of shared memory
    CRFX_LAUNCH(emission_kernel, grid_for(rows * L, 256), 256, 0, s, L, rows, row_token, state_off, ids, vals, W,
                gl, S, skip);
    return;
  }
  const unsigned G = L <= 8 ? 8 : L <= 16 ? 16 : 32, per_block = 256 / G;
  const unsigned grid = unsigned((rows + per_block - 1) / per_block);
  const std::size_t smem = gl.dense() ? 0 : std::size_t(per_block) * L * sizeof(double);
  if (grid == 0) return;
  if (G == 8)
    CRFX_LAUNCH(emission_rows_kernel<8>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S, skip);
  else if (G == 16)
    CRFX_LAUNCH(emission_rows_kernel<16>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S,
                skip);
  else
    CRFX_LAUNCH(emission_rows_kernel<32>, grid, 256, smem, s, L, rows, row_token, state_off, ids, vals, W, gl, S,
                skip);
}

void launch_edge_matrix(int L, std::size_t rows, const std::size_t* row_token, const std::uint8_t* row_edge,
                        const std::size_t* edge_off, const std::uint32_t* ids, const double* vals,
                        const double* trans, const double* W, const WeightGroups& gl, double* M, cudaStream_t s,
                        const bool* skip) {
  CRFX_LAUNCH(edge_matrix_kernel, unsigned(rows), entry_threads(L, 256), 0, s, L, row_token, row_edge, edge_off, ids,
              vals, trans, W, gl, M, skip);
}

void launch_dense_row(const WeightGroups& gl, std::uint32_t gid, std::size_t width, const double* W, double* out,
                      cudaStream_t s) {
  CRFX_LAUNCH(dense_row_kernel, grid_for(width, 256), 256, 0, s, gl, gid, width, W, out);
}

void launch_prepare(int L, const double* trans, double* E, double* Et, double* tmax_out, cudaStream_t s) {
  CRFX_LAUNCH(prepare_kernel, 1, entry_threads(L, 1024), 0, s, L, trans, E, Et, tmax_out);
}

std::size_t forward_backward_smem(int L, bool shared_E, bool shared_pair) {
  const std::size_t LL = std::size_t(L) * L, E = shared_E ? 2 * LL : 0;
  if (L > 32) return (L + 32 + L + E) * sizeof(double);
  return (E + std::size_t(kFbWarps) * (2 * std::size_t(L) + (shared_pair ? LL : 0))) * sizeof(double);
}

unsigned fb_groups(int L, int threads) {
  if (L <= 32) return 0;
  const unsigned groups = std::min(15u, unsigned(kFbGroupBlock / threads));
  return groups >= 2 && forward_backward_groups_smem(L, groups) <= kFbGroupShared ? groups : 0;
}

std::size_t forward_backward_groups_smem(int L, unsigned groups) {
  const std::size_t l = std::size_t(L);
  return (l * (l + 1) + groups * (2 * l + 32)) * sizeof(double);
}

void launch_forward_backward(const FbParams& p, std::size_t n, int threads, bool groups_ok, cudaStream_t s) {
  const std::size_t smem = forward_backward_smem(p.L, p.shared_E, p.shared_pair);
  const unsigned groups = groups_ok ? fb_groups(p.L, threads) : 0;
  if (groups) {
    const std::size_t gsmem = forward_backward_groups_smem(p.L, groups);
    if (gsmem > kSharedLimit)
      CRFX_CUDA_CHECK(cudaFuncSetAttribute(forward_backward_groups_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(gsmem)));
    CRFX_LAUNCH(forward_backward_groups_kernel, unsigned((n + groups - 1) / groups), int(groups) * threads, gsmem, s,
                p, unsigned(n), threads);
  } else if (p.L <= 32)
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
