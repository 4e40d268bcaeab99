// crfx — one sentence's forward-backward as device functions (the groups that run it, the
// forward and backward steps, the pairwise and node marginals, the gold path's terms), shared by
// the fused kernels (chain_kernels.cu: a sentence per warp or block, the marginals inside the
// backward loop) and the split ones (fb_split_kernels.cu: the recursions on two warps, then the
// marginals position-parallel). Included by those two files only.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstddef>
#include <cstdint>

#include "chain_kernels.cuh"
#include "common.cuh"

namespace crfx::cuda::detail {
namespace fb {

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

/// `n` threads of a block (whole warps from thread `base`) that run one sentence beside the
/// block's other groups (L > 32: several sentences a block sharing E in shared memory), synced by
/// named barrier `id` (common.cuh's group_barrier). The reductions have BlockGroup's shape with
/// blockDim.x = n, so a group gives the bits a block of its size gives.
struct SubBlockGroup {
  double* red;  // [32] the group's reduction scratch
  int base, n;
  unsigned id;
  __device__ int tid() const { return int(threadIdx.x) - base; }
  __device__ int size() const { return n; }
  __device__ void sync() const { group_barrier(id, unsigned(n)); }
  template <class Op>
  __device__ double reduce(double v, Op op) const {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    sync();  // `red` may still be read from the previous call
    if ((tid() & 31) == 0) red[tid() >> 5] = v;
    sync();
    double r = red[0];
    for (int w = 1; w < (n >> 5); ++w) r = op(r, red[w]);
    return r;
  }
  __device__ double max(double v) const {
    return reduce(v, [](double a, double b) { return fmax(a, b); });
  }
  __device__ double sum(double v) const {
    return reduce(v, [](double a, double b) { return a + b; });
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
  const double* Et;  // Eᵀ (unused when es > 0)
  std::size_t es = 0;  // > 0: E's rows `es` apart (padded, in shared memory) and Eᵀ read from E
  __device__ std::size_t e_stride() const { return es ? es : std::size_t(L); }
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
/// `ap` and `at` are the rows â_{t−1} is read from and â_t written to (the scan's kernels pass
/// their own; forward_step's are f.la's rows t − 1 and t).
template <class Group>
__device__ double forward_step_rows(const FbSentence<Group>& f, std::size_t t, double& own, const double* ap,
                                    double* at) {
  const int L = f.L, tid = f.g.tid(), nth = f.g.size();
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
      const std::size_t es = f.e_stride();
      for (int yp = 0; yp < L; ++yp) sum += f.vec[yp] * f.E[std::size_t(yp) * es + y];
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

template <class Group>
__device__ double forward_step(const FbSentence<Group>& f, std::size_t t, double& own) {
  return forward_step_rows(f, t, own, f.la + (t - 1) * f.L, f.la + t * f.L);
}

/// Backward step t ≥ 1: b̂_{t−1}(y') = log Σ_y exp(τ_t(y', y) + s_t(y) + b̂_t(y) − m); returns the
/// shift m = max_y s_t(y) + b̂_t(y) (0 when no path continues from t). With one label a thread,
/// `own` carries b̂_t(y) in and b̂_{t−1}(y) out, as forward_step's.
/// `bp` is the row b̂_{t−1} is written to, or null: not stored (only `own`, f.vec and f.rowa; the
/// split marginals at a scanned segment's first position).
template <class Group>
__device__ double backward_step_to(const FbSentence<Group>& f, std::size_t t, double& own, double* bp) {
  const int L = f.L, tid = f.g.tid(), nth = f.g.size();
  const double* bt = f.lb + t * L;
  const double* st = f.S + t * L;
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
      if (bp) bp[yp] = v;
      own = v;
    }
  } else {
    for (int y = tid; y < L; y += nth) f.vec[y] = exp(next(y) - m);
    f.g.sync();
    for (int yp = tid; yp < L; yp += nth) {
      double sum = 0;
      if (f.es) {  // row yp of the padded E: conflict-free across the lanes' rows
        const double* row = f.E + std::size_t(yp) * f.es;
        for (int y = 0; y < L; ++y) sum += row[y] * f.vec[y];
      } else {
        for (int y = 0; y < L; ++y) sum += f.Et[std::size_t(y) * L + yp] * f.vec[y];
      }
      double v;
      if (sum > kTinySum && finite) {
        v = f.tmax + log(sum);
        f.rowa[yp] = 1.0;  // pairwise may factor this row
      } else {
        const double* row = f.p->trans + std::size_t(yp) * L;
        v = log_sum_exp_seq(L, [&](int y) { return row[y] + st[y] + bt[y] - m; });
        f.rowa[yp] = -1.0;
      }
      if (bp) bp[yp] = v;
      own = v;
    }
  }
  f.g.sync();  // b̂_{t−1} complete; every read of τ_t for it is done
  return m;
}

template <class Group>
__device__ double backward_step(const FbSentence<Group>& f, std::size_t t, double& own) {
  return backward_step_to(f, t, own, f.lb + (t - 1) * f.L);
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
      pr = (a * f.E[f.es ? yp * f.es + y : j]) * f.vec[y];
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

/// pairwise's deferred form, for a sentence whose pair sums go to memory (L > 32, no per-position
/// marginals kept: fb_sentence's `defer`): a factored row's products are not added
/// here but after the backward pass, all positions at once, as E ⊙ Σ_t a_t v_tᵀ (pair_products):
/// a_t(y') (0 for an exact row) goes to â's row t and v_t to b̂'s row t (fb_sentence copies it
/// there after the position's last read), rows that no later step reads. A position adds to `acc`
/// only its exact rows' entries and the gold pair's −1, each entry j by thread j mod size() as in
/// pairwise: the L² read-modify-writes of memory a position become L² FMAs in registers.
template <class Group>
__device__ void pairwise_deferred(const FbSentence<Group>& f, std::size_t t, double z, double m, double a_own,
                                  double* acc) {
  const unsigned L = unsigned(f.L), LL = unsigned(f.LL), tid = unsigned(f.g.tid()), nth = unsigned(f.g.size());
  const double* ap = f.la + (t - 1) * L;
  const double* bt = f.lb + t * L;
  const double* st = f.S + t * L;
  double* at = f.la + t * L;  // last read by position t + 1's step
  for (unsigned yp = tid; yp < L; yp += nth) {
    const double a = f.rowa[yp] > 0 ? exp((f.single ? a_own : ap[yp]) + f.tmax - z) : -1.0;
    f.rowa[yp] = a;
    at[yp] = a >= 0 ? a : 0.0;
  }
  f.g.sync();
  const double q = z + m;
  for (unsigned yp = 0; yp < L; ++yp) {  // the exact rows (rare: where the row's sum underflowed)
    if (f.rowa[yp] >= 0) continue;
    const unsigned base = yp * L;
    for (unsigned y = (tid + nth - base % nth) % nth; y < L; y += nth)  // base + y ≡ tid (mod nth)
      acc[base + y] += exp(ap[yp] + f.p->trans[base + y] + st[y] + bt[y] - q);
  }
  const unsigned gj = f.p->gold ? f.p->labels[f.tok0 + t - 1] * L + f.p->labels[f.tok0 + t] : LL;
  if (gj < LL && gj % nth == tid) acc[gj] -= 1.0;
}

/// The deferred pair sums (pairwise_deferred) after the backward pass: acc(y', y) += E(y', y) ·
/// Σ_{1 ≤ t < T} a_t(y') v_t(y) (a_t in la's row t, v_t in lb's, rows L apart; E's rows `es`
/// apart), thread `tid` of `nth` a tile of 4 × 8 entries at a time, their sums in registers over t
/// in order (a fixed order: the same bits run to run). Follows a group sync. Not inlined, and given
/// scalars only: inlined, its 32 sums shared the registers of the recursions' loop (ptxas spilled
/// there); given the FbSentence, the kernel kept that in local memory.
__device__ __noinline__ inline void pair_products(const double* la, const double* lb, const double* E, std::size_t es,
                                                  unsigned L, std::size_t T, unsigned tid, unsigned nth, double* acc) {
  constexpr unsigned R = 4, C = 8;
  const unsigned cols = (L + C - 1) / C, tiles = (L + R - 1) / R * cols;
  for (unsigned k = tid; k < tiles; k += nth) {
    const unsigned y0 = k / cols * R, x0 = k % cols * C;
    double s[R][C] = {};
    for (std::size_t t = 1; t < T; ++t) {
      const double* a = la + t * L;
      const double* v = lb + t * L;
      double ar[R], vr[C];
      for (unsigned i = 0; i < R; ++i) ar[i] = y0 + i < L ? a[y0 + i] : 0.0;
      for (unsigned c = 0; c < C; ++c) vr[c] = x0 + c < L ? v[x0 + c] : 0.0;
      for (unsigned i = 0; i < R; ++i)
        for (unsigned c = 0; c < C; ++c) s[i][c] += ar[i] * vr[c];
    }
    for (unsigned i = 0; i < R; ++i)
      for (unsigned c = 0; c < C; ++c)
        if (y0 + i < L && x0 + c < L) {
          const std::size_t yp = y0 + i, y = x0 + c;
          acc[yp * L + y] += E[yp * es + y] * s[i][c];
        }
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

/// The tests' count of the longest serial chain (FbParams::longest_chain, null outside them): a run
/// of `steps` positions one after another, recorded once by the group's `leader` thread.
__device__ inline void count_chain(const FbParams& p, std::size_t steps, bool leader) {
  if (p.longest_chain && leader) atomicMax(p.longest_chain, static_cast<unsigned long long>(steps));
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

/// Points f at chunk sentence i's rows (f.tok0, f.T, f.r0, f.S, f.la, f.lb).
template <class Group>
__device__ void fb_locate(FbSentence<Group>& f, unsigned i) {
  const FbParams& p = *f.p;
  const std::uint32_t sid = p.ch.sent[i];
  f.tok0 = p.sent_off[sid];
  f.T = p.sent_off[sid + 1] - f.tok0;
  f.r0 = p.ch.slots[i];
  f.S = p.S + f.r0 * f.L;
  f.la = p.la + f.r0 * f.L;
  f.lb = p.lb + f.r0 * f.L;
}

/// The forward pass of chunk sentence i (T ≥ 1), from â_0 = s_0: writes â, p.result[i] = log Z −
/// score(gold) (or log Z) and returns z_{T−1} = log Σ_y exp â_{T−1}(y); c accumulates the shifts
/// (the same in every thread), thread 0 the gold path's score. With one label a thread, `a_own`
/// ends as â_{T−1} of the thread's label (f.single).
template <class Group>
__device__ double fb_forward(FbSentence<Group>& f, unsigned i, double& a_own) {
  const FbParams& p = *f.p;
  const int tid = f.g.tid(), nth = f.g.size();
  const std::size_t T = f.T;
  a_own = 0;
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
  return z_last;
}

/// The backward recursion alone (T ≥ 1), from b̂_{T−1} = 0: writes b̂ and nothing else (the split
/// forward-backward's second warp; the marginals follow in their own kernel).
template <class Group>
__device__ void fb_backward(FbSentence<Group>& f) {
  const int tid = f.g.tid(), nth = f.g.size();
  for (int y = tid; y < f.L; y += nth) f.lb[(f.T - 1) * f.L + y] = 0;
  double b_own = 0;
  f.g.sync();
  for (std::size_t t = f.T - 1; t > 0; --t) backward_step(f, t, b_own);
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
/// kTinySum; pairwise marginals are exact per entry or factored (pairwise; pairwise_deferred and
/// pair_products at L > 32). The steps: forward_step, backward_step, node_marginals, gold_terms
/// above.
template <class Group>
__device__ void fb_sentence(FbSentence<Group>& f, unsigned i) {
  const FbParams& p = *f.p;
  const int tid = f.g.tid(), nth = f.g.size();
  fb_locate(f, i);
  double* pair = p.pair ? p.pair + std::size_t(i) * f.LL : nullptr;
  if (f.T == 0) {
    if (tid == 0) p.result[i] = 0;
    if (pair)
      for (std::size_t j = tid; j < f.LL; j += nth) pair[j] = 0;
    return;
  }
  const std::size_t T = f.T;
  if (p.independent && !pair) {
    independent_sentence(f, i);
    return;
  }
  double a_own;
  const double z_last = fb_forward(f, i, a_own);
  if (!p.backward) return;

  // Backward, from b̂_{T−1} = 0, with the marginals of each position; the pair sums in shared
  // memory when the launch gave room (copied out at the end by the threads that summed them).
  double* acc = pair && f.pacc ? f.pacc : pair;
  // pairwise_deferred at L > 32 (at L ≤ 32 the pair sums are in shared memory, or the fused
  // kernel gives the split marginals' bits, which sum each position's entries as it comes).
  const bool defer = acc && acc == pair && !p.pair_at && f.L > 32;
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
    const double* M = f.edge_at(t);
    if (defer && !M)
      pairwise_deferred(f, t, z, shift, a_prev, acc);
    else if (acc)
      pairwise(f, t, z, shift, a_prev, acc);
    node_marginals(f, t - 1, z, a_prev, b_own);
    f.g.sync();
    if (defer)  // v_t (f.vec: each thread's own labels) or nothing (τ_t exact), after b̂_t's last read
      for (int y = tid; y < f.L; y += nth) {
        f.lb[t * f.L + y] = M ? 0.0 : f.vec[y];
        if (M) f.la[t * f.L + y] = 0;
      }
  }
  if (defer && T > 1) {
    f.g.sync();
    pair_products(f.la, f.lb, f.E, f.e_stride(), unsigned(f.L), T, unsigned(tid), unsigned(nth), acc);
  }
  if (acc != pair)
    for (std::size_t j = tid; j < f.LL; j += nth) pair[j] = acc[j];
}

/// E and Eᵀ into shared memory (`to`, 2·L² doubles) by the whole block.
inline __device__ void copy_E(const FbParams& p, std::size_t LL, double* to) {
  for (std::size_t j = threadIdx.x; j < LL; j += blockDim.x) {
    to[j] = p.E[j];
    to[LL + j] = p.Et[j];
  }
  __syncthreads();
}

/// The warp-path view of FbParams with E, Eᵀ in shared memory when p.shared_E (by the whole
/// block; before any warp-uniform return). Returns the shared memory after E.
inline __device__ double* warp_sentence(FbSentence<WarpGroup>& f, const FbParams& p, double* smem) {
  f.L = p.L;
  f.LL = std::size_t(p.L) * p.L;
  f.E = p.E;
  f.Et = p.Et;
  f.p = &p;
  f.pacc = nullptr;
  f.single = true;  // L ≤ 32: a label a lane
  if (!p.shared_E) return smem;
  copy_E(p, f.LL, smem);
  f.E = smem;
  f.Et = smem + f.LL;
  return smem + 2 * f.LL;
}

}  // namespace fb
}  // namespace crfx::cuda::detail
