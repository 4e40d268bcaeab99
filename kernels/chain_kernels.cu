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
/// (bitwise the CPU's sum). CPU twin: the emission loop of CpuBackend::scores
/// (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) emission_kernel(int L, std::size_t rows, const std::size_t* row_token,
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
/// CPU twin: the enriched-edge loop of CpuBackend::scores (host/cpu/cpu_backend.cpp).
__global__ void __launch_bounds__(256) edge_matrix_kernel(int L, const std::size_t* row_token, const std::uint8_t* row_edge,
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

/// log Σ_y exp(v(y)) over the block's labels (every thread gets it): the max, then the sum of
/// shifted exps (both fixed-shape block reductions).
template <class F>
__device__ double block_log_sum_exp(int L, F v, double* red) {
  double mloc = -CUDART_INF;
  for (int y = threadIdx.x; y < L; y += blockDim.x) mloc = fmax(mloc, v(y));
  const double m = block_max(mloc, red);
  if (!isfinite(m)) return m;
  double sloc = 0;
  for (int y = threadIdx.x; y < L; y += blockDim.x) sloc += exp(v(y) - m);
  return m + log(block_sum(sloc, red));
}

/// One block per sentence; thread y handles labels y, y + blockDim, … . Dynamic shared memory:
/// vec [L], red [32], then E, Eᵀ [L][L] each when shared_E.
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
/// kTiny; pairwise marginals are exact per entry.
__global__ void __launch_bounds__(512) forward_backward_kernel(FbParams p) {
  CRFX_DYNAMIC_SHARED(double, smem);
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

  // Forward: â_t(y) = s_t(y) + log Σ_y' exp(â_{t−1}(y') − m + τ_t(y', y)), m = max â_{t−1}; c_t = c_{t−1} + m.
  for (int y = tid; y < L; y += nth) la[y] = S[y];
  __syncthreads();
  double c = 0;  // the same in every thread
  for (std::size_t t = 1; t < T; ++t) {
    const double* ap = la + (t - 1) * L;
    double* at = la + t * L;
    const double* st = S + t * L;
    const double* M = edge_at(t);
    double mloc = -CUDART_INF;
    for (int y = tid; y < L; y += nth) mloc = fmax(mloc, ap[y]);
    double m = block_max(mloc, red);
    const bool finite = isfinite(m);
    if (!finite) m = 0;  // no path reaches position t − 1: nothing to shift
    if (M) {  // per-position matrix: exact log space
      for (int y = tid; y < L; y += nth)
        at[y] = st[y] + log_sum_exp_seq(L, [&](int yp) { return ap[yp] - m + M[std::size_t(yp) * L + y]; });
    } else {  // shared matrix: τ_max + log Σ_y' exp(â_{t−1} − m) · E(y', y)
      for (int y = tid; y < L; y += nth) vec[y] = exp(ap[y] - m);
      __syncthreads();
      for (int y = tid; y < L; y += nth) {
        double sum = 0;
        for (int yp = 0; yp < L; ++yp) sum += vec[yp] * E[std::size_t(yp) * L + y];
        if (sum > kTiny && finite) {
          at[y] = st[y] + (tmax + log(sum));
        } else {
          const double* tr = p.trans;
          at[y] = st[y] + log_sum_exp_seq(L, [&](int yp) { return ap[yp] - m + tr[std::size_t(yp) * L + y]; });
        }
      }
    }
    c += m;
    __syncthreads();
  }

  // log Z = c_{T−1} + log Σ_y exp â_{T−1}(y); z_{T−1} (the last position's normaliser) is the sum.
  const double* aT = la + (T - 1) * L;
  const double z_last = block_log_sum_exp(L, [&](int y) { return aT[y]; }, red);
  const double log_z = isfinite(z_last) ? c + z_last : z_last;

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

  // Backward, from b̂_{T−1} = 0, and the marginals of each position.
  double* pair = p.pair ? p.pair + std::size_t(i) * LL : nullptr;
  if (pair)
    for (std::size_t j = tid; j < LL; j += nth) pair[j] = 0;
  for (int y = tid; y < L; y += nth) lb[(T - 1) * L + y] = 0;
  __syncthreads();
  auto node = [&](std::size_t t, double z) {  // z = z_t
    if (!p.node) return;
    const std::uint32_t g = p.gold ? p.labels[tok0 + t] : 0xffffffffu;
    double* out = p.node + (r0 + t) * L;
    for (int y = tid; y < L; y += nth) {
      const double v = exp(la[t * L + y] + lb[t * L + y] - z);
      out[y] = std::uint32_t(y) == g ? v - 1.0 : v;
    }
  };
  node(T - 1, z_last);
  for (std::size_t t = T - 1; t > 0; --t) {
    const double* bt = lb + t * L;
    const double* st = S + t * L;
    double* bp = lb + (t - 1) * L;
    double* M = edge_at(t);
    // b̂_{t−1}(y') = log Σ_y exp(τ_t(y', y) + s_t(y) + b̂_t(y) − m), m = max_y s_t(y) + b̂_t(y).
    double ml = -CUDART_INF;
    for (int y = tid; y < L; y += nth) ml = fmax(ml, st[y] + bt[y]);
    double m = block_max(ml, red);
    const bool finite = isfinite(m);
    if (!finite) m = 0;
    if (M) {
      for (int yp = tid; yp < L; yp += nth) {
        const double* row = M + std::size_t(yp) * L;
        bp[yp] = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y] - m; });
      }
    } else {
      for (int y = tid; y < L; y += nth) vec[y] = exp(st[y] + bt[y] - m);
      __syncthreads();
      for (int yp = tid; yp < L; yp += nth) {
        double sum = 0;
        for (int y = 0; y < L; ++y) sum += Et[std::size_t(y) * L + yp] * vec[y];
        if (sum > kTiny && finite) {
          bp[yp] = tmax + log(sum);
        } else {
          const double* row = p.trans + std::size_t(yp) * L;
          bp[yp] = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y] - m; });
        }
      }
    }
    __syncthreads();  // b̂_{t−1} complete; every read of τ_t for it is done
    const double shift = m;
    const double* ap = la + (t - 1) * L;
    const double z = block_log_sum_exp(L, [&](int y) { return ap[y] + bp[y]; }, red);  // z_{t−1}
    if (pair) {
      // p_t(y', y) = exp(â_{t−1}(y') + τ_t(y', y) + s_t(y) + b̂_t(y) − q_t), q_t = z_{t−1} + shift:
      // Σ_{y', y} of the numerators is Σ_y' exp(â_{t−1}(y') + b̂_{t−1}(y') + shift).
      const double q = z + shift;
      const std::size_t gj = p.gold ? std::size_t(p.labels[tok0 + t - 1]) * L + p.labels[tok0 + t] : LL;
      for (std::size_t j = tid; j < LL; j += nth) {
        const std::size_t yp = j / L, y = j - yp * L;
        const double tau = M ? M[j] : p.trans[j];
        const double pr = exp(ap[yp] + tau + st[y] + bt[y] - q);
        const double d = j == gj ? pr - 1.0 : pr;
        pair[j] += d;
        if (M) M[j] = d;
      }
    }
    node(t - 1, z);
    __syncthreads();
  }
}

}  // namespace

void launch_fill_rows(std::size_t n, ChunkView ch, const std::size_t* sent_off, const std::size_t* edge_off,
                      std::size_t* row_token, std::uint8_t* row_edge, int* token_slot, cudaStream_t s) {
  CRFX_LAUNCH(fill_rows_kernel, unsigned(n), 128, 0, s, ch, sent_off, edge_off, row_token, row_edge, token_slot);
}

void launch_reset_slots(std::size_t rows, const std::size_t* row_token, int* token_slot, cudaStream_t s) {
  CRFX_LAUNCH(reset_slots_kernel, grid_for(rows, 256), 256, 0, s, rows, row_token, token_slot);
}

void launch_emission(int L, std::size_t rows, const std::size_t* row_token, const std::size_t* state_off,
                     const std::uint32_t* ids, const double* vals, const double* W, double* S, cudaStream_t s) {
  CRFX_LAUNCH(emission_kernel, grid_for(rows * L, 256), 256, 0, s, L, rows, row_token, state_off, ids, vals, W, S);
}

void launch_edge_matrix(int L, std::size_t rows, const std::size_t* row_token, const std::uint8_t* row_edge,
                        const std::size_t* edge_off, const std::uint32_t* ids, const double* vals,
                        const double* trans, const double* WE, double* M, cudaStream_t s) {
  CRFX_LAUNCH(edge_matrix_kernel, unsigned(rows), 256, 0, s, L, row_token, row_edge, edge_off, ids, vals, trans, WE,
              M);
}

void launch_prepare(int L, const double* trans, double* E, double* Et, double* tmax_out, cudaStream_t s) {
  CRFX_LAUNCH(prepare_kernel, 1, 1024, 0, s, L, trans, E, Et, tmax_out);
}

void launch_forward_backward(const FbParams& p, std::size_t n, int threads, std::size_t smem, cudaStream_t s) {
  CRFX_LAUNCH(forward_backward_kernel, unsigned(n), threads, smem, s, p);
}

}  // namespace crfx::cuda::detail
