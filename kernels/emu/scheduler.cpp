// crfx — the emulated device's block scheduler: a launch's blocks run one after another (in a
// seeded order); a block's threads are fibers (Boost.Context's fcontext) that run until they reach
// a barrier, a warp collective or their end, in a seeded order that changes every round, so a
// missing barrier or a read of another thread's unsynchronised write shows as a wrong or
// non-reproducible result.
//
// Rules, as the hardware's (or stricter, where the hardware leaves it undefined):
// - __syncthreads releases when every thread of the block waits at it, all at the same call site.
//   Waiting at different call sites, a barrier some thread never reaches (a deadlock), and a barrier
//   reached while other threads of the block have exited are reported. (The hardware counts exited
//   threads as arrived on sm_70+, but the programming model requires every thread to reach a
//   barrier; being strict finds the bugs that this hides.)
// - A named barrier (bar.sync id, count: common.cuh's group_barrier) releases when `count`
//   threads wait at it (id 1–15), all at the same call site with the same count; more threads
//   than its count, a count that is not whole warps, or a barrier that never fills are reported.
// - A warp collective releases when every lane of its mask waits at the same collective (kind,
//   mask, call site). A mask without the calling lane, naming a lane the block does not have or one
//   that has exited, a shuffle whose source lane is outside the mask, or lanes of one mask at
//   different collectives are reported.
// - Every error names the kernel, the block and the threads involved.
#include <boost/context/detail/fcontext.hpp>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu_internal.hpp"
#include "emu_launch.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CRFX_EMU_ASAN 1
#endif

namespace crfx::emu::detail {
namespace {

namespace bctx = boost::context::detail;

#ifdef CRFX_EMU_ASAN
constexpr std::size_t kStackBytes = 512 * 1024;
#else
constexpr std::size_t kStackBytes = 128 * 1024;
#endif
constexpr std::size_t kGuardBytes = 4096;
constexpr std::size_t kCanaryBytes = 16;
constexpr unsigned char kCanary = 0xCD;
constexpr unsigned char kSharedFill = 0xA5;  // dynamic shared memory starts as garbage

/// A fiber stack with a guard page below it (a stack overflow faults instead of corrupting).
struct Stack {
  void* base = nullptr;  // mapping, guard page first
  char* bottom = nullptr;
  std::size_t size = 0;
  bool abandoned = false;  // a fiber was left suspended on it (a failed block): frames still poisoned
};

/// Per OS thread: stacks are reused across blocks and launches.
std::vector<Stack>& stack_pool(std::size_t n) {
  thread_local std::vector<Stack> pool;
  while (pool.size() < n) {
    Stack s;
    s.base = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s.base == MAP_FAILED) {
      std::fprintf(stderr, "crfx emulated device: cannot map a fiber stack\n");
      std::abort();
    }
    mprotect(s.base, kGuardBytes, PROT_NONE);
    s.bottom = static_cast<char*>(s.base) + kGuardBytes;
    s.size = kStackBytes;
    pool.push_back(s);
  }
  return pool;
}

enum class State : std::uint8_t { runnable, barrier, named, warp, done };

struct Thread {
  dim3 idx;
  unsigned linear = 0, lane = 0, warp = 0;
  State state = State::runnable;
  bctx::fcontext_t ctx = nullptr;
  Stack* stack = nullptr;
  // Where it waits, and what it brings to a collective.
  const char* file = "";
  int line = 0;
  Collective kind = Collective::syncwarp;
  unsigned mask = 0;
  int param = 0, width = 32;
  unsigned bar_id = 0, bar_count = 0;  // the named barrier it waits at (State::named)
  std::size_t size = 0;
  unsigned char value[16] = {};
  unsigned char result[16] = {};
  void* fake_stack = nullptr;  // AddressSanitizer's fake stack of this fiber while switched out
};

struct BlockRun {
  const LaunchJob* job = nullptr;
  dim3 idx;
  std::vector<Thread> threads;
  bctx::fcontext_t sched_ctx = nullptr;
  unsigned char* smem = nullptr;  // dynamic shared memory (user part)
  std::string error;              // set by a fiber (e.g. an exception escaping the kernel)
  const void* main_bottom = nullptr;
  std::size_t main_size = 0;
  void* sched_fake = nullptr;
};

/// The schedule's random numbers (SplitMix64: small, fast, and the same on every platform, so a
/// seed names the same schedule everywhere).
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n).
  std::uint32_t below(std::uint32_t n) { return std::uint32_t(((next() >> 32) * n) >> 32); }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(std::uint32_t(i))]);
  }
};

thread_local BlockRun* t_block = nullptr;
thread_local Thread* t_thread = nullptr;

// AddressSanitizer's fiber annotations (no-ops without it).
inline void asan_start(void** fake, const void* bottom, std::size_t size) {
#ifdef CRFX_EMU_ASAN
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}
inline void asan_finish(void* fake, const void** bottom, std::size_t* size) {
#ifdef CRFX_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

std::string dim_str(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}
std::string site(const Thread& t) { return std::string(t.file) + ":" + std::to_string(t.line); }
const char* kind_name(Collective k) {
  switch (k) {
    case Collective::shfl_idx: return "__shfl_sync";
    case Collective::shfl_up: return "__shfl_up_sync";
    case Collective::shfl_down: return "__shfl_down_sync";
    case Collective::shfl_xor: return "__shfl_xor_sync";
    case Collective::ballot: return "__ballot_sync";
    case Collective::any: return "__any_sync";
    case Collective::all: return "__all_sync";
    case Collective::syncwarp: return "__syncwarp";
  }
  return "?";
}

void yield_to_scheduler() {
  Thread* th = t_thread;
  BlockRun* b = t_block;
  asan_start(&th->fake_stack, b->main_bottom, b->main_size);
  const bctx::transfer_t t = bctx::jump_fcontext(b->sched_ctx, nullptr);
  b->sched_ctx = t.fctx;
  asan_finish(th->fake_stack, nullptr, nullptr);
}

void fiber_main(bctx::transfer_t t) {
  BlockRun* b = t_block;
  Thread* th = static_cast<Thread*>(t.data);
  b->sched_ctx = t.fctx;
  asan_finish(nullptr, &b->main_bottom, &b->main_size);
  try {
    b->job->body();
  } catch (const std::exception& e) {
    if (b->error.empty()) b->error = "thread " + dim_str(th->idx) + " threw: " + e.what();
  } catch (...) {
    if (b->error.empty()) b->error = "thread " + dim_str(th->idx) + " threw an exception";
  }
  th->state = State::done;
  asan_start(nullptr, b->main_bottom, b->main_size);  // this fiber is finished
  bctx::jump_fcontext(b->sched_ctx, nullptr);
  std::abort();  // never resumed
}

void resume(BlockRun& b, Thread& th) {
  t_thread = &th;
  asan_start(&b.sched_fake, th.stack->bottom, th.stack->size);
  const bctx::transfer_t t = bctx::jump_fcontext(th.ctx, &th);
  asan_finish(b.sched_fake, nullptr, nullptr);
  th.ctx = t.fctx;
  t_thread = nullptr;
}

/// Releases every warp collective whose mask's lanes have all arrived. Returns whether one was
/// released; sets `err` on a misuse.
/// Releases every named barrier that has its count of threads; an error where one cannot be right.
/// One pass over the threads (a block of 512 waits at a barrier dozens of times a sentence).
bool release_named(BlockRun& b, std::string& err) {
  const Thread* first[16] = {};
  unsigned waiting[16] = {};
  for (const Thread& th : b.threads) {
    if (th.state != State::named) continue;
    const unsigned id = th.bar_id & 15;
    const Thread* f = first[id];
    if (!f) {
      first[id] = &th;
    } else if (th.file != f->file || th.line != f->line || th.bar_count != f->bar_count) {
      err = "threads wait at named barrier " + std::to_string(id) + " with different call sites or counts: thread " +
            dim_str(f->idx) + " at " + site(*f) + " (count " + std::to_string(f->bar_count) + "), thread " +
            dim_str(th.idx) + " at " + site(th) + " (count " + std::to_string(th.bar_count) + ")";
      return false;
    }
    ++waiting[id];
  }
  bool full[16] = {}, any = false;
  for (unsigned id = 1; id < 16; ++id) {
    const Thread* f = first[id];
    if (!f) continue;
    if (f->bar_count == 0 || f->bar_count % 32 != 0 || waiting[id] > f->bar_count) {
      err = std::to_string(waiting[id]) + " threads wait at named barrier " + std::to_string(id) + " (" + site(*f) +
            ") of count " + std::to_string(f->bar_count) + " (whole warps, at least as many as wait)";
      return false;
    }
    full[id] = waiting[id] == f->bar_count;
    any = any || full[id];
  }
  if (!any) return false;
  for (Thread& th : b.threads)
    if (th.state == State::named && full[th.bar_id & 15]) th.state = State::runnable;
  return true;
}

bool release_warps(BlockRun& b, std::string& err) {
  const std::size_t n = b.threads.size();
  bool released = false;
  for (std::size_t base = 0; base < n; base += 32) {
    const unsigned count = unsigned(std::min<std::size_t>(32, n - base));
    unsigned handled = 0;
    for (unsigned l = 0; l < count; ++l) {
      Thread& th = b.threads[base + l];
      if (th.state != State::warp || (handled >> l & 1u)) continue;
      const unsigned M = th.mask;
      auto who = [&] { return "thread " + dim_str(th.idx) + " at " + kind_name(th.kind) + " (" + site(th) + ")"; };
      if (!(M >> l & 1u)) {
        err = who() + ": the mask 0x" + [&] { std::ostringstream o; o << std::hex << M; return o.str(); }() +
              " does not include the calling lane " + std::to_string(l);
        return false;
      }
      bool ready = true;
      for (unsigned i = 0; i < 32; ++i) {
        if (!(M >> i & 1u)) continue;
        if (i >= count) {
          err = who() + ": the mask names lane " + std::to_string(i) + ", which this block of " + std::to_string(n) +
                " threads does not have";
          return false;
        }
        const Thread& o = b.threads[base + i];
        if (o.state == State::done) {
          err = who() + ": lane " + std::to_string(i) + " of the mask has exited";
          return false;
        }
        if (o.state != State::warp) {
          ready = false;
          continue;
        }
        if (o.mask != M || o.kind != th.kind || o.file != th.file || o.line != th.line) {
          err = who() + " and thread " + dim_str(o.idx) + " at " + kind_name(o.kind) + " (" + site(o) +
                "), lanes of one mask, wait at different warp collectives";
          return false;
        }
      }
      if (!ready) continue;
      const int w = th.width;
      if (w <= 0 || w > 32 || (w & (w - 1))) {
        err = who() + ": width " + std::to_string(w) + " is not a power of two up to 32";
        return false;
      }
      unsigned votes = 0;
      for (unsigned i = 0; i < 32; ++i)
        if ((M >> i & 1u) && b.threads[base + i].value[0] | b.threads[base + i].value[1] |
                                 b.threads[base + i].value[2] | b.threads[base + i].value[3])
          votes |= 1u << i;
      for (unsigned i = 0; i < 32; ++i) {
        if (!(M >> i & 1u)) continue;
        Thread& me = b.threads[base + i];
        const unsigned seg = i & ~unsigned(w - 1);
        unsigned src = i;
        switch (me.kind) {
          case Collective::shfl_idx: src = seg + (unsigned(me.param) & unsigned(w - 1)); break;
          case Collective::shfl_up: src = int(i) - me.param >= int(seg) ? i - unsigned(me.param) : i; break;
          case Collective::shfl_down: src = i + unsigned(me.param) < seg + unsigned(w) ? i + unsigned(me.param) : i; break;
          case Collective::shfl_xor: src = (i ^ unsigned(me.param)) < seg + unsigned(w) ? i ^ unsigned(me.param) : i; break;
          case Collective::ballot: std::memcpy(me.result, &votes, 4); break;
          case Collective::any: { const unsigned r = votes != 0; std::memcpy(me.result, &r, 4); } break;
          case Collective::all: { const unsigned r = votes == M; std::memcpy(me.result, &r, 4); } break;
          case Collective::syncwarp: break;
        }
        const bool shuffle = me.kind == Collective::shfl_idx || me.kind == Collective::shfl_up ||
                             me.kind == Collective::shfl_down || me.kind == Collective::shfl_xor;
        if (shuffle) {
          if (src >= 32 || !(M >> src & 1u)) {
            err = "thread " + dim_str(me.idx) + " at " + kind_name(me.kind) + " (" + site(me) + ") reads lane " +
                  std::to_string(src) + ", outside the mask";
            return false;
          }
          std::memcpy(me.result, b.threads[base + src].value, me.size);
        }
      }
      for (unsigned i = 0; i < 32; ++i)
        if (M >> i & 1u) b.threads[base + i].state = State::runnable;
      handled |= M;
      released = true;
    }
  }
  return released;
}

/// Runs one block to its end; returns "" or the error.
std::string run_block(BlockRun& b, Rng& rng) {
  const std::size_t n = b.threads.size();
  std::vector<Stack>& pool = stack_pool(n);
  for (std::size_t i = 0; i < n; ++i) {
    Thread& th = b.threads[i];
    th.stack = &pool[i];
#ifdef CRFX_EMU_ASAN
    if (th.stack->abandoned) ASAN_UNPOISON_MEMORY_REGION(th.stack->bottom, th.stack->size);
#endif
    th.stack->abandoned = false;
    // Stack tops staggered by 64 bytes a fiber: tops at one offset modulo 4 KiB would all fall in
    // the same L1 cache sets, and every switch would miss.
    const std::size_t stagger = (i % 64) * 64;
    th.ctx = bctx::make_fcontext(th.stack->bottom + th.stack->size - stagger, th.stack->size - stagger, fiber_main);
  }
  std::vector<std::uint32_t> order;
  order.reserve(n);
  std::size_t live = n;
  while (true) {
    order.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (b.threads[i].state == State::runnable) order.push_back(std::uint32_t(i));
    rng.shuffle(order);
    for (std::uint32_t i : order) {
      resume(b, b.threads[i]);
      if (b.threads[i].state == State::done) --live;
      if (!b.error.empty()) return b.error;
    }
    if (live == 0) return "";
    std::string err;
    if (release_warps(b, err)) continue;
    if (!err.empty()) return err;
    if (release_named(b, err)) continue;
    if (!err.empty()) return err;
    // The barrier: every live thread waits at it, at one call site.
    const Thread* first = nullptr;
    bool all_at_barrier = true;
    for (const Thread& th : b.threads) {
      if (th.state == State::done) continue;
      if (th.state != State::barrier) {
        all_at_barrier = false;
        continue;
      }
      if (!first) {
        first = &th;
      } else if (th.file != first->file || th.line != first->line) {
        return "threads wait at different __syncthreads: thread " + dim_str(first->idx) + " at " + site(*first) +
               ", thread " + dim_str(th.idx) + " at " + site(th);
      }
    }
    if (all_at_barrier && live < n) {
      // Hardware counts exited threads as arrived (sm_70+), but the programming model requires
      // every thread of the block to reach the barrier: reported, since it hides real bugs.
      const Thread* gone = nullptr;
      for (const Thread& th : b.threads)
        if (th.state == State::done) gone = gone ? gone : &th;
      return std::to_string(live) + " threads wait at __syncthreads (" + site(*first) + ") but " +
             std::to_string(n - live) + " threads of the block, thread " + dim_str(gone->idx) +
             " first, exited without reaching it";
    }
    if (all_at_barrier) {
      for (Thread& th : b.threads)
        if (th.state == State::barrier) th.state = State::runnable;
      continue;
    }
    // Nothing can move: a barrier some thread never reaches, or a collective whose lanes never meet.
    std::size_t at_barrier = 0, at_warp = 0, at_named = 0, done = 0;
    const Thread *eb = nullptr, *ew = nullptr, *en = nullptr;
    for (const Thread& th : b.threads) {
      if (th.state == State::barrier) ++at_barrier, eb = eb ? eb : &th;
      if (th.state == State::named) ++at_named, en = en ? en : &th;
      if (th.state == State::warp) ++at_warp, ew = ew ? ew : &th;
      if (th.state == State::done) ++done;
    }
    std::string msg = "deadlock: " + std::to_string(at_barrier) + " threads wait at __syncthreads";
    if (eb) msg += " (" + site(*eb) + ")";
    msg += ", " + std::to_string(at_warp) + " at a warp collective";
    if (ew) msg += " (" + std::string(kind_name(ew->kind)) + " at " + site(*ew) + ", thread " + dim_str(ew->idx) + ")";
    msg += " whose lanes never all arrive, " + std::to_string(at_named) + " at a named barrier";
    if (en) msg += " (" + std::to_string(en->bar_id) + " of count " + std::to_string(en->bar_count) + " at " + site(*en) + ")";
    msg += " that never fills, " + std::to_string(done) + " have exited";
    return msg;
  }
}

}  // namespace

const dim3& thread_idx() {
  if (!t_thread) {
    std::fprintf(stderr, "crfx emulated device: threadIdx read outside a kernel\n");
    std::abort();
  }
  return t_thread->idx;
}
const dim3& block_idx() { return t_block->idx; }
const dim3& block_dim() { return t_block->job->block; }
const dim3& grid_dim() { return t_block->job->grid; }

void syncthreads(const char* file, int line) {
  Thread* th = t_thread;
  th->state = State::barrier;
  th->file = file;
  th->line = line;
  yield_to_scheduler();
}

void named_barrier(unsigned id, unsigned count, const char* file, int line) {
  if (id == 0 || id > 15) throw std::runtime_error("named barrier " + std::to_string(id) + ": ids are 1 to 15");
  Thread* th = t_thread;
  th->state = State::named;
  th->bar_id = id;
  th->bar_count = count;
  th->file = file;
  th->line = line;
  yield_to_scheduler();
}

void warp_collective(Collective kind, unsigned mask, const void* value, std::size_t size, int param, int width,
                     void* result, const char* file, int line) {
  Thread* th = t_thread;
  th->state = State::warp;
  th->kind = kind;
  th->mask = mask;
  th->param = param;
  th->width = width;
  th->size = size;
  th->file = file;
  th->line = line;
  std::memset(th->value, 0, sizeof th->value);
  if (size) std::memcpy(th->value, value, size);
  yield_to_scheduler();
  if (!result) return;
  const bool vote = kind == Collective::ballot || kind == Collective::any || kind == Collective::all;
  std::memcpy(result, th->result, vote ? 4 : size);
}

unsigned active_mask() {
  const BlockRun& b = *t_block;
  const unsigned base = t_thread->warp * 32;
  unsigned m = 0;
  for (unsigned i = 0; i < 32 && base + i < b.threads.size(); ++i)
    if (b.threads[base + i].state != State::done) m |= 1u << i;
  return m;
}

void* dynamic_shared_memory() {
  if (!t_block) {
    std::fprintf(stderr, "crfx emulated device: dynamic shared memory used outside a kernel\n");
    std::abort();
  }
  return t_block->smem;
}

std::string execute_launch(const LaunchJob& job) {
  const dim3 g = job.grid, d = job.block;
  const std::uint64_t blocks = std::uint64_t(g.x) * g.y * g.z;
  const std::size_t nthreads = std::size_t(d.x) * d.y * d.z;
  Rng rng{job.seed};
  // Blocks in a seeded order: i → (a·i + c) mod blocks with a coprime to blocks.
  std::uint64_t a = 1, c = 0;
  if (blocks > 1) {
    c = rng.next() % blocks;
    a = rng.next() % blocks;
    while (std::gcd(a, blocks) != 1) a = (a + 1) % blocks;
  }
  std::vector<unsigned char> smem_buf(job.smem + 2 * kCanaryBytes);
  BlockRun b;
  b.job = &job;
  b.threads.resize(nthreads);
  BlockRun* const saved_block = t_block;
  std::string err;
  for (std::uint64_t k = 0; k < blocks && err.empty(); ++k) {
    const std::uint64_t lin = (unsigned __int128)(a) * k % blocks;
    const std::uint64_t id = (lin + c) % blocks;
    b.idx = dim3(unsigned(id % g.x), unsigned(id / g.x % g.y), unsigned(id / (std::uint64_t(g.x) * g.y)));
    b.error.clear();
    for (std::size_t i = 0; i < nthreads; ++i) {
      Thread& th = b.threads[i];
      th.state = State::runnable;
      th.idx = dim3(unsigned(i % d.x), unsigned(i / d.x % d.y), unsigned(i / (std::size_t(d.x) * d.y)));
      th.linear = unsigned(i);
      th.lane = unsigned(i % 32);
      th.warp = unsigned(i / 32);
    }
    // Dynamic shared memory: garbage, with canaries on both sides (a fresh allocation per block
    // would let AddressSanitizer see overruns too; the canaries catch them without it).
    std::memset(smem_buf.data(), kCanary, smem_buf.size());
    std::memset(smem_buf.data() + kCanaryBytes, kSharedFill, job.smem);
    b.smem = smem_buf.data() + kCanaryBytes;
#ifdef CRFX_EMU_ASAN  // AddressSanitizer reports any access to the canaries, reads included
    ASAN_POISON_MEMORY_REGION(smem_buf.data(), kCanaryBytes);
    ASAN_POISON_MEMORY_REGION(smem_buf.data() + kCanaryBytes + job.smem, kCanaryBytes);
#endif
    t_block = &b;
    err = run_block(b, rng);
    t_block = saved_block;
    for (Thread& th : b.threads)
      if (th.state != State::done) th.stack->abandoned = true;
#ifdef CRFX_EMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(smem_buf.data(), smem_buf.size());
#endif
    if (!err.empty()) {
      err = "kernel '" + job.name + "' block " + dim_str(b.idx) + ": " + err;
      break;
    }
    for (std::size_t i = 0; i < kCanaryBytes; ++i)
      if (smem_buf[i] != kCanary || smem_buf[kCanaryBytes + job.smem + i] != kCanary) {
        err = "kernel '" + job.name + "' block " + dim_str(b.idx) + ": wrote outside its " +
              std::to_string(job.smem) + " bytes of dynamic shared memory";
        break;
      }
  }
  return err;
}

}  // namespace crfx::emu::detail
