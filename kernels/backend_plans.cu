// crfx — CudaBackend (cuda_backend.cuh): span plans, shared by SAG / SAGA (backend_sag.cu) and
// evaluate_sparse (backend_sparse.cu) — a span planned on the host and copied (plan_span), or,
// for a span of one sentence (batch size 1, the stochastic trainers' default), pointers into
// every sentence's plan made once per corpus (plan_sentences, select_sentence: no planning, no
// copy per step; issue 37) — the span's forward-backward through the chunk workspace
// (span_marginals) and its compact gradient (span_gradient). CPU twin: the planner SpanGroups
// (host/backend/span_groups.cpp) and host/cpu/cpu_sag.cpp, cpu_sgd.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "chain_kernels.cuh"
#include "cuda_backend.cuh"
#include "cuda_check.cuh"
#include "device_buffer.cuh"
#include "sag_kernels.cuh"

namespace crfx::cuda::detail {

// ---- span plans: SAG and evaluate_sparse ---------------------------------------------------

void CudaBackend::plan_span(const CudaCorpus& c, SentenceSpan span, const std::vector<std::uint32_t>* edge_slot,
                            bool sag, SpanPlan& pl) {
  plan_span_host(c, span, edge_slot, sag, pl);
  pl.valid = false;
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
  pl.use_own_copies();
  pl.valid = true;
}

void CudaBackend::plan_span_host(const CudaCorpus& c, SentenceSpan span, const std::vector<std::uint32_t>* edge_slot,
                                 bool sag, SpanPlan& pl) {
  require_resident(c, "a stochastic trainer's span plan");
  const Corpus& h = c.host;
  const WeightGroups wg = dims_.groups();
  const std::size_t total = wg.count();
  // The span is checked before the plan is touched: a refused span leaves no half-made plan.
  pl.valid = false;
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::uint32_t sid = span[i];
    if (sid >= c.S) throw Error("internal: sentence id beyond the corpus");
    if (!c.h_labeled[sid]) throw Error("sentence " + std::to_string(sid) + " has tokens without a label");
  }
  if (sag) {  // distinct sentences (SAG would commit a repeated one twice; the CPU refuses too)
    std::vector<std::uint32_t>& sorted = pl.scratch_ids;
    sorted.resize(span.count);
    for (std::size_t i = 0; i < span.count; ++i) sorted[i] = span[i];
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw Error("internal: span repeats a sentence");
  }
  if (pl.local.size() != total) pl.local.assign(total, 0);
  const bool edges = c.edge_off.get() != nullptr;
  // S(span) holds the transitions of a non-empty span; SAG syncs them for any span, as the CPU.
  pl.support.plan(h, span, wg, dims_.transitions && (span.count || sag), pl.groups);
  pl.sid.assign(span.count, 0);
  pl.row_tok.clear();
  pl.row_slot.clear();
  for (std::size_t i = 0; i < span.count; ++i) {
    const std::uint32_t sid = span[i];
    pl.sid[i] = sid;
    for (std::size_t t = h.sentence_offsets[sid]; t < h.sentence_offsets[sid + 1]; ++t) {
      pl.row_tok.push_back(std::uint32_t(t));
      pl.row_slot.push_back(edge_slot ? (*edge_slot)[t] : kNone);
    }
  }
  // The occurrences of the groups (ascending ids: ascending weight indices), counted, offset and
  // filled in (sentence, token, item) order.
  const std::size_t ng = pl.groups.size();
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
            f(wg.edge(h.edge_ids[k]), row, edge_slot ? (*edge_slot)[t] : 0u, i, h.edge_value(k));
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
    pl.gofs[q + 1] = pl.gofs[q] + wg.size(pl.groups[q]);
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
}

std::vector<std::uint32_t> CudaBackend::edge_slots(const CudaCorpus& c, std::size_t* count) const {
  const Corpus& h = c.host;
  std::vector<std::uint32_t> slot;
  std::size_t slots = 0;
  if (c.edge_off.get()) {
    slot.assign(c.N, kNone);
    for (std::size_t sid = 0; sid < c.S; ++sid)
      for (std::size_t t = h.sentence_offsets[sid] + 1; t < h.sentence_offsets[sid + 1]; ++t)
        if (h.edge_offsets[t + 1] > h.edge_offsets[t]) slot[t] = std::uint32_t(slots++);
  }
  if (count) *count = slots;
  return slot;
}

namespace {
/// The sums of the k largest sentences' tokens, group counts and compact sizes, k ≤ kChunkIds
/// (SentencePlans::top_rows …: bounds of a batch the device draws).
void top_sums(const CudaCorpus& c, SentencePlans& sp) {
  const auto top = [](std::vector<std::size_t> v, std::vector<std::size_t>& out) {
    const std::size_t k = std::min(v.size(), kChunkIds);
    std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(k), v.end(), std::greater<>());
    out.assign(1, 0);
    for (std::size_t i = 0; i < k; ++i) out.push_back(out.back() + v[i]);
  };
  const std::size_t S = sp.compact.size();
  std::vector<std::size_t> sizes(S);
  for (std::size_t s = 0; s < S; ++s) sizes[s] = c.h_sent_off[s + 1] - c.h_sent_off[s];
  top(sizes, sp.top_rows);
  for (std::size_t s = 0; s < S; ++s) sizes[s] = sp.gbase[s + 1] - sp.gbase[s];
  top(sizes, sp.top_groups);
  top(sp.compact, sp.top_compact);
}
}  // namespace

void CudaBackend::plan_sentences(const CudaCorpus& c, std::size_t other_bytes) {
  require_resident(c, "a stochastic trainer's per-sentence plans");
  std::size_t free_b = 0, total_b = 0;
  if (sentence_plans_corpus_ == c.serial) {  // made already: only the caller's bytes to check
    CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (other_bytes > free_b)
      throw Error("CUDA backend: SAG's stored marginals need " + fmt_mib(other_bytes) + " of device memory, only " +
                  fmt_mib(free_b) + " free on " + name_ + "; use --device cpu");
    return;
  }
  const std::size_t S = c.S, N = c.N;
  SentencePlans& sp = sentence_plans_;
  sentence_plans_corpus_ = 0;  // invalid until complete
  const std::vector<std::uint32_t> slot = edge_slots(c, nullptr);
  const std::vector<std::uint32_t>* edge_slot = slot.empty() ? nullptr : &slot;
  const WeightGroups wg = dims_.groups();
  // On the host: each sentence planned as plan_span plans a span of it alone, appended.
  std::vector<std::uint32_t> groups, oofs, onew, oold;
  std::vector<std::size_t> gofs;
  std::vector<double> oval;
  sp.gbase.assign(1, 0);
  sp.obase.assign(1, 0);
  sp.compact.clear();
  sp.iend.clear();
  std::size_t longest = 0;  // occurrences of the sentence with the most
  SpanPlan one;
  for (std::uint32_t sid = 0; sid < S; ++sid) {
    if (c.h_labeled[sid]) {  // an unlabeled one keeps an empty plan (select_sentence refuses it)
      plan_span_host(c, SentenceSpan{&sid, 1}, edge_slot, true, one);
      groups.insert(groups.end(), one.groups.begin(), one.groups.end());
      gofs.insert(gofs.end(), one.gofs.begin(), one.gofs.end());
      oofs.insert(oofs.end(), one.oofs.begin(), one.oofs.end());
      onew.insert(onew.end(), one.onew.begin(), one.onew.end());
      oold.insert(oold.end(), one.oold.begin(), one.oold.end());
      oval.insert(oval.end(), one.oval.begin(), one.oval.end());
      longest = std::max(longest, one.onew.size());
    } else {
      one.groups.clear();
      one.gofs.assign(1, 0);
      gofs.push_back(0);
      oofs.push_back(0);
    }
    std::size_t end = 0;  // the support's last index + 1 (a sparse layout's group may be empty)
    for (std::size_t q = one.groups.size(); q-- > 0 && end == 0;)
      if (wg.size(one.groups[q])) end = wg.begin(one.groups[q]) + wg.size(one.groups[q]);
    sp.gbase.push_back(groups.size());
    sp.obase.push_back(onew.size());
    sp.compact.push_back(one.gofs.back());
    sp.iend.push_back(end);
  }
  std::vector<std::uint32_t> iota(std::max(S, N)), slots(N, kNone);
  std::iota(iota.begin(), iota.end(), 0u);
  if (edge_slot) slots = *edge_slot;
  const std::size_t u32 = sizeof(std::uint32_t);
  const std::size_t bytes = (groups.size() + oofs.size() + onew.size() + oold.size() + longest + S + 2 * N) * u32 +
                            (gofs.size() + 3 * (S + 1)) * sizeof(std::size_t) + oval.size() * sizeof(double);
  CRFX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (other_bytes + bytes > free_b)
    throw Error("CUDA backend: the stochastic trainers' sentence plans" +
                std::string(other_bytes ? " and SAG's stored marginals" : "") + " need " +
                fmt_mib(other_bytes + bytes) + " of device memory, only " + fmt_mib(free_b) + " free on " + name_ +
                "; use --device cpu");
  auto up = [&](auto& dev, const auto* src, std::size_t n) {
    dev.resize(n);
    if (n) CRFX_CUDA_CHECK(cudaMemcpyAsync(dev.get(), src, n * sizeof(src[0]), cudaMemcpyHostToDevice, stream_));
  };
  up(sp.groups, groups.data(), groups.size());
  up(sp.gofs, gofs.data(), gofs.size());
  up(sp.oofs, oofs.data(), oofs.size());
  up(sp.onew, onew.data(), onew.size());
  up(sp.oold, oold.data(), oold.size());
  up(sp.oval, oval.data(), oval.size());
  sp.osent.resize(longest);
  if (longest) CRFX_CUDA_CHECK(cudaMemsetAsync(sp.osent.get(), 0, longest * u32, stream_));
  up(sp.ids, iota.data(), S);
  up(sp.tokens, iota.data(), N);
  up(sp.slots, slots.data(), N);
  up(sp.d_gbase, sp.gbase.data(), S + 1);
  up(sp.d_obase, sp.obase.data(), S + 1);
  up(sp.d_compact, sp.compact.data(), S);
  sp.most_groups = sp.most_compact = 0;
  for (std::size_t s = 0; s < S; ++s) {
    sp.most_groups = std::max(sp.most_groups, sp.gbase[s + 1] - sp.gbase[s]);
    sp.most_compact = std::max(sp.most_compact, sp.compact[s]);
  }
  top_sums(c, sp);
  sync();  // the host vectors go out of scope
  sentence_plans_corpus_ = c.serial;
}

void CudaBackend::select_sentence(const CudaCorpus& c, std::uint32_t sid, SpanPlan& pl) {
  pl.valid = false;
  if (sid >= c.S) throw Error("internal: sentence id beyond the corpus");
  if (!c.h_labeled[sid]) throw Error("sentence " + std::to_string(sid) + " has tokens without a label");
  if (sentence_plans_corpus_ != c.serial) plan_sentences(c, 0);  // made for another corpus since
  const SentencePlans& sp = sentence_plans_;
  const std::size_t g0 = sp.gbase[sid], o0 = sp.obase[sid], f0 = g0 + sid;
  const std::size_t t0 = c.h_sent_off[sid];
  pl.dev = {sp.groups.get() + g0, sp.gofs.get() + f0, sp.oofs.get() + f0, sp.onew.get() + o0,
            sp.oold.get() + o0,   sp.osent.get(),     sp.oval.get() + o0, sp.ids.get() + sid, 1u};
  pl.dev_row_tok = sp.tokens.get() + t0;
  pl.dev_row_slot = sp.slots.get() + t0;
  pl.ng = sp.gbase[sid + 1] - g0;
  pl.compact_size = sp.compact[sid];
  pl.rows = c.h_sent_off[sid + 1] - t0;
  pl.sid.assign(1, sid);
  pl.valid = true;
}

void CudaBackend::sentence_support(const CudaCorpus& c, std::uint32_t sid, CudaSparse& x) {
  SpanPlan& pl = sp_plan_;  // its host side is the one-sentence plan's: evaluate_sparse replans
  select_sentence(c, sid, pl);
  const std::size_t n = pl.compact();
  x.reserve(n);
  x.n = n;
  x.end = sentence_plans_.iend[sid];
  if (n == 0) return;
  launch_expand_groups(device_groups(), pl.view().groups, pl.view().gofs, pl.ng, x.index.get(), stream_);
  CRFX_CUDA_CHECK(cudaMemsetAsync(x.value.get(), 0, n * sizeof(double), stream_));
}

double CudaBackend::span_marginals(const CudaCorpus& c, const Vector& w, const SpanPlan& pl,
                                   DeviceBuffer<double>& node, DeviceBuffer<double>& pair,
                                   DeviceBuffer<double>& edge, SequenceLoss loss_kind, bool loss_to_host) {
  require_resident(c, "a stochastic trainer's span");
  const std::size_t L = dims_.L, LL = L * L, n = pl.sid.size();
  const bool edges = c.edge_off.get() != nullptr, pairs = dims_.transitions || edges;
  reserve_device(node, pl.rows * L);
  reserve_device(pair, n * LL);
  if (edges) reserve_device(edge, pl.rows * LL);
  prepare(w);
  const SentenceSpan span{pl.sid.data(), n};
  double loss = 0;
  std::size_t row0 = 0;
  const std::size_t rows_limit =
      pointwise_loss(loss_kind) ? pointwise_rows(c) : std::numeric_limits<std::size_t>::max();
  for (std::size_t begin = 0; begin < n;) {
    const std::size_t end = plan(c, span, begin, rows_limit);
    const std::size_t m = end - begin, rows = h_slots_[m];
    run_chunk_front(c, w, m, rows, false);
    FbParams fp = fb_params(c, w);
    fp.gold = true;
    fp.backward = true;
    fp.node = node_.get();
    fp.pair = pairs ? pair_.get() : nullptr;  // transitions, or edge deltas (written in the pair pass)
    if (pointwise_loss(loss_kind)) {
      pointwise_chunk(arrays(c), fp, m, loss_kind, true);
    } else {
      launch_fb(fp, m);
      if (loss_kind == SequenceLoss::seq_exp) launch_seq_exp(fp, m, stream_);  // 1/p, its deltas times 1/p
    }
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
    row0 += rows;
    if (!loss_to_host) {  // a one-sentence span: its loss stays in losses_[0]
      if (n != 1 || pointwise_loss(loss_kind)) throw Error("internal: a loss left on the device for a span of " +
                                                          std::to_string(n) + " sentences");
      return std::numeric_limits<double>::quiet_NaN();
    }
    h_losses_.resize(m);
    CRFX_CUDA_CHECK(cudaMemcpyAsync(h_losses_.data(), losses_.get(), m * sizeof(double),
                                    cudaMemcpyDeviceToHost, stream_));
    sync();
    if (pointwise_loss(loss_kind)) check_pointwise(loss_kind, span, begin, m, h_losses_.data());
    for (std::size_t i = 0; i < m; ++i) loss += h_losses_[i];
    begin = end;
  }
  return loss;
}

void CudaBackend::span_gradient(const CudaCorpus& c, const SpanPlan& pl, const DeviceBuffer<double>& node,
                                const DeviceBuffer<double>& pair, const DeviceBuffer<double>& edge, double scale,
                                double* out) {
  const std::size_t ng = pl.ng;
  if (ng == 0) return;
  launch_sag_gradient(device_groups(), pl.view(), ng, node.get(), pair.get(), c.edge_off.get() ? edge.get() : nullptr,
                      scale, out, stream_);
}

}  // namespace crfx::cuda::detail
