// crfx — the Backend seam.
//
// Everything heavy goes through this interface. Optimizers hold backend vectors and call these
// primitives; they never see the hardware (no CUDA header is included above this line), so each
// optimizer is written once, tested on the CPU, and runs on any backend unchanged.
//
//   Corpus ──upload──▶ BackendCorpus (resident, static)
//   Vector w ──evaluate(corpus, w, sentences)──▶ Σ NLL, grad += scale·(E[f] − f(gold))
//            ──viterbi / marginals──▶ labels / probabilities on the host
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: make_backend,
//  BackendOptions, parse_device, to_host, to_backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crfx/internal/corpus.hpp"
#include "crfx/internal/loss.hpp"
#include "crfx/internal/step_params.hpp"

namespace crfx {

/// A vector of doubles resident on a backend. Created by Backend::vector(); move-only owner.
class Vector {
 public:
  virtual ~Vector() = default;
  virtual std::size_t size() const = 0;
};
using VectorPtr = std::unique_ptr<Vector>;

/// A corpus uploaded to a backend. Opaque; created by Backend::upload().
class BackendCorpus {
 public:
  virtual ~BackendCorpus() = default;
  virtual std::size_t num_sentences() const = 0;
  virtual std::size_t num_tokens() const = 0;
};
using BackendCorpusPtr = std::unique_ptr<BackendCorpus>;

/// The working state of an incremental aggregated-gradient run on a backend (SAG, SAGA): the
/// stored marginals of every sentence, the lazy-step bookkeeping and scratch. Opaque; created by
/// Backend::incremental_create().
class IncrementalState;
struct SagSamplerRef;  // host/rules/sag_sampler.hpp

/// A step of SAG / SAGA with one global Lipschitz estimate L (uniform sampling) whose scalars the
/// backend keeps (IncrementalGradients::incremental_schedule): what the host knows before it runs.
struct SagStepParams {
  double lambda = 0, mu1 = 0;  // the L2 and L1 coefficients in seed 004's units
  double lip_mult = 1;         // α = 1/(lip_mult·L + λ): 3 for SAGA
  double B = 1, nd = 1;        // the span's size, the number of sentences
  double seen = 1;             // sentences seen, this span's included: SAG's b = α/seen
  double prob = 1;             // each member's draw probability: SAGA's coefficients
  double decay = 1;            // L ← L·decay after the step
  bool saga = false;
};
/// What a run of scheduled steps carries from one to the next: L, the last step size α, and the
/// line searches' trials (forward-only evaluations) since incremental_set_scalars.
struct SagScalars {
  double L = 1.0, alpha = 0.0;
  unsigned long long trials = 0;
};

class IncrementalState {
 public:
  virtual ~IncrementalState() = default;
  SagScalars scalars;  // incremental_schedule's, where the host keeps them
};
using IncrementalStatePtr = std::unique_ptr<IncrementalState>;

/// A subset of sentence ids, in order (a slice of a permutation). `ids == nullptr` means the
/// sentences 0 … count-1.
struct SentenceSpan {
  const std::uint32_t* ids = nullptr;
  std::size_t count = 0;
  std::uint32_t operator[](std::size_t i) const { return ids ? ids[i] : std::uint32_t(i); }
};
inline SentenceSpan all_sentences(const BackendCorpus& c) { return {nullptr, c.num_sentences()}; }

/// For backends: the host planner of a span's support S(span) — the weight groups
/// (WeightGroups, corpus.hpp) its sentences touch: their state attributes, the transitions when
/// `transitions`, their edge attributes. One for both backends (the CPU's support() and
/// incremental state, the CUDA backend's span plans). Keeps its marks between calls (a generation
/// count: nothing is cleared per span). Sentence ids must be below corpus.num_sentences().
class SpanGroups {
 public:
  /// The groups ascending, or (ascending = false) in order of first touch: the transitions, then
  /// token by token (in span order) its state attributes' groups, then its edge attributes'.
  void plan(const Corpus& corpus, SentenceSpan span, const WeightGroups& wg, bool transitions,
            std::vector<std::uint32_t>& groups, bool ascending = true);
  /// The support as weight indices (ascending): plan(), each group expanded to its range.
  void support(const Corpus& corpus, SentenceSpan span, const WeightGroups& wg, bool transitions,
               std::vector<std::size_t>& indices);

 private:
  std::vector<std::uint32_t> mark_;  // [wg.count()] generation of the last touch
  std::uint32_t generation_ = 0;
  std::vector<std::uint32_t> groups_;  // support()'s scratch
};

/// For backends: the lazy-step history (incremental_step): the running products P_k of the
/// decays a and the sums S_k = Σ b/P, R_k = Σ τ/P, from which a catch-up composes any run of steps
/// (SagCatchUp, host/rules/sag_update.hpp). Both backends' incremental states keep one.
struct LazyStepHistory {
  std::vector<double> P{1.0}, S{0.0}, R{0.0};  // [k + 1]
  std::size_t k() const { return P.size() - 1; }
  /// Throws for step parameters outside a ∈ (0, 1], b ≥ 0, τ ≥ 0 (finite).
  static void check_step(double a, double b, double tau);
  /// The step a would underflow P, or the step count outgrow 32-bit stamps: flush first.
  bool needs_flush(double a) const { return P.back() * a < 1e-150 || k() + 1 >= 0xffffffffu; }
  void push(double a, double b, double tau) {
    const double Pk = P.back() * a;
    S.push_back(S.back() + b / Pk);
    R.push_back(R.back() + tau / Pk);
    P.push_back(Pk);
  }
  /// After a flush: step count 0, P = 1, S = R = 0.
  void restart() {
    P.assign(1, 1.0);
    S.assign(1, 0.0);
    R.assign(1, 0.0);
  }
};

/// For backends' incremental_save / incremental_load: the history of the pending lazy steps and
/// every group's stamp, appended to `out` (k, P, S, R, the stamps), and read back from `m` after
/// its first `at` values (the marginals) into `h` and `stamps` — nothing follows them in the
/// state of a flushed run, and then `h` is restarted and the stamps zeroed. Error for a record
/// that is not of this size.
void save_lazy_steps(const LazyStepHistory& h, const std::vector<std::uint32_t>& stamps, std::vector<double>& out);
void load_lazy_steps(const std::vector<double>& m, std::size_t at, LazyStepHistory& h,
                     std::vector<std::uint32_t>& stamps);

/// Host memory a run may still allocate: the least of what the machine has free without
/// swapping (Linux MemAvailable) and what the process's limits leave it — the address space
/// (RLIMIT_AS, ulimit -v) and data segment (RLIMIT_DATA) less what it uses, the cgroup's memory
/// limit (v2 memory.max, v1 memory.limit_in_bytes, the tightest up to the root) less its usage.
/// `limit` names the limit that decides, "" when it is the free memory; bytes 0 when unknown.
struct HostMemory {
  std::size_t bytes = 0;
  std::string limit;
};
HostMemory host_memory();
/// host_memory().bytes.
std::size_t host_memory_available();

/// The weight indices of `groups` (each group's whole range, in the groups' order).
void group_indices(const WeightGroups& wg, const std::vector<std::uint32_t>& groups,
                   std::vector<std::size_t>& indices);

/// For backends: the perceptron update of feature_difference, added into the dense host array
/// G (all weights, zero outside the span's support on entry): scale · (f(x, gold) − f(x, labels))
/// over `span`. Returns the number of tokens with ŷ_t ≠ y_t. Throws for an unlabeled token or a
/// predicted label ≥ L (G then holds part of the update).
std::size_t add_feature_difference(const Corpus& corpus, const Dims& dims, SentenceSpan span,
                                   const std::uint32_t* labels, double scale, double* G);

/// A sparse vector over the flat weight layout, resident on a backend: a list of nnz() pairs
/// (index, value) with strictly increasing 64-bit indices < Dims::num_weights(). Created empty by
/// SparseGradients::sparse_vector(); filled by SparseGradients' primitives (which say what they
/// set). Move-only owner.
class SparseVector {
 public:
  virtual ~SparseVector() = default;
  virtual std::size_t nnz() const = 0;
};
using SparseVectorPtr = std::unique_ptr<SparseVector>;

/// An element rule as it crosses the Backend seam: its id in the rule set (AllRules,
/// host/rules/rule_set.hpp; the id fixes its type and operands) and its parameters as bytes. Built by
/// make_map_rule() (vector_rule() for the vector algebra's); a backend decodes it with dispatch_rule()
/// to the rule's own type.
struct MapRule {
  static constexpr std::size_t kMaxBytes = 64;
  std::uint32_t id = 0;
  alignas(double) unsigned char params[kMaxBytes] = {};
};

/// The incremental-gradient primitives, a capability a Backend may offer (Backend::incremental):
/// the CRF side of SAG and SAGA. Both backends offer it.
/// What incremental_search found: the Lipschitz estimate L accepted and the trials it took.
struct LipschitzFound {
  double L = 0;
  unsigned trials = 0;
};

class IncrementalGradients {
 public:
  virtual ~IncrementalGradients() = default;

  // ---- incremental aggregated gradients: stored marginals and lazy steps ----
  // The CRF primitives of the incremental-gradient trainers (SAG, Schmidt et al. 2015; SAGA,
  // Defazio et al. 2014; any method that keeps a gradient per sentence and moves along their sum):
  // per-sentence gradients kept as marginals, their sum d maintained under changes, and the
  // composite steps w ← soft(a·w − b·d, τ) applied lazily, group by group.
  // Notation. w the weights and d the aggregated direction, both Vectors of dims().num_weights() owned
  // by the caller; d = Σ_i g_i is the sum of the stored per-sentence NLL gradients
  //     g_i = X_iᵀ(μ_i − gold_i),
  // where X_iᵀ maps marginals to weights exactly as evaluate()'s gradient does: state weight
  // w[a·L + y] gets Σ_t x_{t,a}·μ_t(y); transition w[A·L + y'·L + y] gets Σ_{t≥1} μ_t(y', y)
  // (only when dims().transitions; otherwise the block is never written); edge block e gets
  // Σ_{t≥1} x_{t,e}·μ_t(y', y) at w[edge_offset + (e·L + y')·L + y].
  //
  // Stored marginals ("Mixed" memory of Schmidt et al. 2015 §4.2, independent of the number of features):
  // per token its node marginals [L]; per sentence the pairwise marginals summed over t ≥ 1
  // [L][L] (for the transitions); and, when E > 0, per position t ≥ 1 at which edge items fire,
  // that position's own pairwise marginals [L][L] (edge weights need them per position). All are
  // initialised to the gold indicators (node: 1 at the gold label; pair sum: counts of gold label
  // bigrams; per position: 1 at the gold bigram), so the first commit of a sentence adds exactly
  // its NLL gradient to d.
  //
  // Weight groups: per state attribute a the L weights [a·L, a·L + L); the L² transitions; per
  // edge attribute e its L² block. A sentence touches the groups of the attributes on its tokens
  // and the transitions.
  //
  // Lazy steps. incremental_step(a, b, τ) appends step k (k = 1, 2, … since the last
  // incremental_flush) meaning
  //     w ← soft(a_k·w − b_k·d, τ_k),     soft(x, τ) = sign(x)·max(|x| − τ, 0), element-wise,
  // for ALL weights. It is deferred: each group has a stamp k0 (the step count when it was last
  // brought up to date) and is brought to the current count k only by incremental_sync (the
  // groups of a span) or incremental_flush (all), with the composite map, for every weight j of
  // the group:
  //     P_k = Π_{t≤k} a_t,  S_k = Σ_{t≤k} b_t / P_t,  R_k = Σ_{t≤k} τ_t / P_t   (P_0 = 1, S_0 = R_0 = 0)
  //     w_j ← (P_k / P_{k0}) · soft(w_j − d_j·P_{k0}·(S_k − S_{k0}),  P_{k0}·(R_k − R_{k0}))
  // then stamp = k. d_j is constant over the lag (d changes only on synced groups, in
  // incremental_commit), so with τ = 0 this is the steps one by one (up to rounding); with τ > 0
  // it is exact unless w_j changes sign within the lag (then it is the soft-threshold of the
  // accumulated move, with the same fixed points). Backends must implement this formula (not eager dense steps) so that
  // all backends give the same model.
  //
  // Call order of one step on a span B of distinct sentences:
  //   incremental_sync(B) → incremental_evaluate →
  //   [incremental_trial → evaluate(B, nullptr) → incremental_restore]* →
  //   incremental_commit → incremental_step
  // (incremental_search: the evaluate and the trials as one call).
  // incremental_flush before anything reads all of w (objective, saving).

  /// New incremental state for `corpus` (kept by reference: it must outlive the state; every
  /// sentence labeled, Error otherwise): stored marginals at the gold indicators, step count 0, P_0 = 1.
  virtual IncrementalStatePtr incremental_create(const BackendCorpus& corpus) = 0;
  /// Brings every group touched by `sentences` (distinct ids) up to the current step count with
  /// the composite map (reads d), and makes `sentences` the state's current span (copied), the
  /// one incremental_evaluate, incremental_trial, incremental_restore and incremental_commit work
  /// on. A span it refuses (an id beyond the corpus, a repeated id: Error) changes nothing and
  /// leaves no current span: incremental_evaluate throws until an incremental_sync succeeds.
  virtual void incremental_sync(IncrementalState& state, SentenceSpan sentences, Vector& w,
                                const Vector& d) = 0;
  /// Forward-backward on every sentence of the current span at w (its groups synced). Keeps the
  /// new marginals μ_new of each sentence in the state (pending, not yet stored), forms in the
  /// state g = Σ_{i∈span} X_iᵀ(μ_new,i − gold_i) (the span's summed NLL gradient; zero outside
  /// the touched groups), writes ‖g‖² to `*grad_norm2` and returns Σ_{i∈span} NLL_i(w).
  virtual double incremental_evaluate(IncrementalState& state, const Vector& w, double* grad_norm2) = 0;
  /// incremental_evaluate, then the Lipschitz line search of Schmidt et al. 2015 (Algorithm 2:
  /// SagLineSearch, host/rules/sag_update.hpp) on the current span from L0, its trials
  /// incremental_trial, a forward-only evaluate of the span and incremental_restore (w is
  /// restored bit-exactly). Returns the L accepted and the number of trials (forward-only passes
  /// over the span). A backend may decide the trials on its device: the CUDA backend reads back
  /// only the result, not each loss.
  virtual LipschitzFound incremental_search(IncrementalState& state, Vector& w, double L0) = 0;
  /// Line-search trial point: saves the current span's touched groups of w (bit-exact), then
  /// sets w ← w − step·g on them (g from the last incremental_evaluate).
  virtual void incremental_trial(IncrementalState& state, Vector& w, double step) = 0;
  /// Writes back exactly the values saved by the last incremental_trial.
  virtual void incremental_restore(IncrementalState& state, Vector& w) = 0;
  /// For each sentence i of the current span, in span order: Δ_i = X_iᵀ(μ_new,i − μ_stored,i);
  /// d += Δ_i; when `w_coef` is non-null (host array, one entry per span sentence)
  /// w −= w_coef[i]·Δ_i; then μ_stored,i ← μ_new,i. Requires a preceding incremental_evaluate.
  virtual void incremental_commit(IncrementalState& state, Vector& d, Vector& w, const double* w_coef) = 0;
  /// Appends the lazy step w ← soft(a·w − b·d, τ) (0 < a ≤ 1, b ≥ 0, τ ≥ 0); O(1). When P_k
  /// would fall below 1e-150 it first runs incremental_flush(state, w, d) (so P stays representable).
  virtual void incremental_step(IncrementalState& state, double a, double b, double tau, Vector& w,
                        const Vector& d) = 0;
  /// One step of SAG / SAGA on `span` (uniform sampling; the scalars in SagStepParams and the
  /// state's SagScalars): incremental_sync, incremental_search from L, then SagStepScalars
  /// (host/rules/sag_update.hpp) from the L found — α = 1/(lip_mult·L + λ), SAGA's coefficients —
  /// incremental_commit, incremental_step(1 − αλ, α/seen or α/n, αμ₁), and L ← L·decay. A
  /// backend may queue the step (the CUDA backend: on the device, no wait); incremental_scalars
  /// waits for every queued one. On the host through the primitives here: schedule_on_host.
  virtual void incremental_schedule(IncrementalState& state, SentenceSpan span, const SagStepParams& p, Vector& w,
                                    Vector& d) = 0;
  /// One step of SAG-NUS (lipschitz or mixed sampling) on p.B sentences that `sampler` draws
  /// (host/rules/sag_sampler.hpp): the draws, incremental_sync, incremental_search from their mean
  /// L_i, their L_i scaled to the L found, α = the sampler's step size, then as
  /// incremental_schedule with the sentences seen and each draw's probability. A backend may queue it, drawing on its
  /// device from a copy of the sampler's state: incremental_scalars then writes that state back
  /// into the arrays `sampler` points to, which the caller leaves alone in between (and keeps
  /// alive). On the host through the primitives: schedule_drawn_on_host.
  virtual void incremental_schedule_drawn(IncrementalState& state, const SagSamplerRef& sampler,
                                          const SagStepParams& p, Vector& w, Vector& d) = 0;
  /// The scalars after every scheduled step (waits for the queued ones). Default: state.scalars.
  virtual SagScalars incremental_scalars(IncrementalState& state) { return state.scalars; }
  /// Sets them: a run's start, a restored checkpoint.
  virtual void incremental_set_scalars(IncrementalState& state, const SagScalars& scalars) { state.scalars = scalars; }
  /// Brings every group up to the current step count (w exact), then restarts the bookkeeping:
  /// step count 0, P = 1, S = R = 0, every stamp 0.
  virtual void incremental_flush(IncrementalState& state, Vector& w, const Vector& d) = 0;
  /// The state as one host array, for a checkpoint: the stored marginals — node, pair sums,
  /// per-position pairs — and, when lazy steps are pending (step count k > 0: saved between two
  /// steps, inside an epoch), the step history and every group's stamp after them
  /// (save_lazy_steps), so that a restored state brings each group up to date as the saved one
  /// would have, bit for bit (w and d are saved by the caller as they are).
  virtual std::vector<double> incremental_save(IncrementalState& state) = 0;
  /// Restores a state saved by incremental_save over the same corpus (Error for another size)
  /// into a flushed state (a new one).
  virtual void incremental_load(IncrementalState& state, const std::vector<double>& marginals) = 0;
};

/// pa's, arow's or mira's options for SparseGradients::peer_step (pa: --pa-type, --pa-c,
/// --error-sensitive; arow: --gamma, Σ's diagonal; mira: C, a float as CRF++'s).
struct PeerStep {
  bool arow = false, mira = false, error_sensitive = true;  // (neither: pa)
  int pa_type = 1;
  double c = 1, gamma = 1;
  float mira_c = 1;
  Vector* variance = nullptr;
};

/// The sparse batch gradients, a capability a Backend may offer (Backend::sparse): the CRF side of
/// the stochastic trainers. Both backends offer it.
class SparseGradients {
 public:
  virtual ~SparseGradients() = default;

  // ---- sparse batch gradients: the stochastic trainers' CRF primitives ----
  // For sgd-l1 / two-stage (Tsuruoka et al. 2009), adf (Sun et al. 2012), ap (Collins 2002): a
  // mini-batch step must cost O(batch tokens × L + support size), never O(num_weights); their
  // per-weight steps are element rules run over these supports (apply_rule).
  // Indices in a SparseVector are distinct, so the element-wise primitives below may process
  // its entries in any order or in parallel. Every primitive is deterministic (no atomics whose
  // order changes a result; sums in a fixed order).
  //
  // The support of a span of sentences, S(span), is the sorted set of weight indices the span
  // can touch:
  //   · the state row a·L … a·L + L − 1 of every state attribute a occurring in the span;
  //   · all L² transitions A·L … A·L + L² − 1 when Dims::transitions and the span is non-empty;
  //   · the block edge_offset() + e·L² … + L² − 1 of every edge attribute e occurring in it.

  /// A new, empty sparse vector.
  virtual SparseVectorPtr sparse_vector() = 0;
  /// Sets x to S(sentences), every value 0.
  virtual void support(const BackendCorpus& corpus, SentenceSpan sentences, SparseVector& x) = 0;
  /// The NLL Σ_i −log p(y_i | x_i; w) over `sentences` (forward-backward, as evaluate()), and
  /// sets grad to S(sentences) with values scale · (E_p[f] − f(x, y)) — exactly the entries
  /// evaluate(corpus, w, sentences, g, scale) would add to a zero g, up to summation order
  /// (entries outside the support would be zero). Overwrites grad (indices and values); with
  /// `support_given` grad already holds S(sentences) — support() of the same span, as the lazy
  /// L2 decay of adf and sgd-l1 needs it just before — and only its values are written.
  /// `loss` as in evaluate(): the sum of that loss, and scale · its gradient on S(sentences).
  virtual double evaluate_sparse(const BackendCorpus& corpus, const Vector& w,
                                 SentenceSpan sentences, SparseVector& grad, double scale,
                                 bool support_given, SequenceLoss loss = SequenceLoss::seq_log) = 0;
  /// evaluate_sparse for a caller that does not read the loss (adf, sgd-l1 without its line
  /// search): the same gradient, and a backend need not bring the loss back — the CUDA backend
  /// then waits for nothing on a span of one sentence (issue 37). By default, evaluate_sparse.
  virtual void evaluate_sparse_gradient(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                                        SparseVector& grad, double scale, bool support_given,
                                        SequenceLoss loss = SequenceLoss::seq_log) {
    evaluate_sparse(corpus, w, sentences, grad, scale, support_given, loss);
  }
  /// Sets out to S(sentences) with values scale · (f(x, gold) − f(x, labels)): the perceptron
  /// update (Collins 2002). `labels` is host memory in span order, token after token (as
  /// viterbi() writes it). Values are exactly 0 where gold and predicted features agree
  /// (a token's state features contribute only where y_t ≠ ŷ_t, a transition or edge block only
  /// where (y_{t−1}, y_t) ≠ (ŷ_{t−1}, ŷ_t)). Returns the number of tokens with ŷ_t ≠ y_t.
  virtual std::size_t feature_difference(const BackendCorpus& corpus, SentenceSpan sentences,
                                         const std::uint32_t* labels, SparseVector& out,
                                         double scale) = 0;
  /// The averaged perceptron's step (ap) on `sentences` (distinct) where the backend can keep it
  /// on its device: Viterbi at w, Δ = f(x, y) − f(x, ŷ) over S(sentences) (feature_difference of
  /// the path), and where ŷ has a mistake w += Δ and, when u is non-null, u += u_scale·Δ —
  /// nothing read back, so a step need not wait (issue 37). Bitwise the same as viterbi,
  /// feature_difference and the two sparse_axpy calls. `delta` is scratch (after a span of one
  /// sentence it holds Δ). Returns false, having done nothing on the device, where the backend
  /// has no such path (the default; the CUDA backend: a streamed corpus, a span one chunk of at
  /// most 256 sentences does not hold): the caller takes the primitives' path.
  virtual bool perceptron_step(const BackendCorpus& corpus, SentenceSpan sentences, Vector& w, Vector* u,
                               double u_scale, SparseVector& delta) {
    return (void)corpus, (void)sentences, (void)w, (void)u, (void)u_scale, (void)delta, false;
  }
  /// ap's steps at batch size 1, the i-th perceptron_step(sentence i, u_scale t0 + i, no u where 0)
  /// bitwise, where the backend runs them without a launch a step (CUDA: one a few hundred; issue
  /// 37). False, having done nothing, where it has no such path (the default; an empty span asks).
  virtual bool perceptron_steps(const BackendCorpus& corpus, SentenceSpan sentences, Vector& w, Vector* u, double t0) {
    return (void)corpus, (void)sentences, (void)w, (void)u, (void)t0, false;
  }
  /// pa's or arow's steps at batch size 1 as perceptron_steps: the i-th peer_step(sentence i, u_scale
  /// t0 + i, no u where 0) bitwise, the loss summed with peer_loss's; `scratch` a sparse vector.
  virtual bool peer_steps(const BackendCorpus& corpus, SentenceSpan sentences, const PeerStep& step, Vector& w,
                          Vector* u, double t0, SparseVector& scratch) {
    return (void)corpus, (void)sentences, (void)step, (void)w, (void)u, (void)t0, (void)scratch, false;
  }
  /// pa's or arow's step on a span (mira's: one sentence) where the backend can keep it on its device,
  /// as perceptron_step: the scalars by host/rules/peer_update.hpp from w·Δ, ‖Δ‖² and the mistakes, the
  /// updates gated and ℓ summed there — bitwise the primitives' path. False, having done nothing.
  virtual bool peer_step(const BackendCorpus& corpus, SentenceSpan sentences, const PeerStep& step, Vector& w,
                         Vector* u, double u_scale, SparseVector& delta) {
    return (void)corpus, (void)sentences, (void)step, (void)w, (void)u, (void)u_scale, (void)delta, false;
  }
  /// peer_step's loss sum (mira: K, the epoch's largest KKT violation), and mira's bounds B_i and
  /// shrinking counts (n sentences): set before its first step (nothing read back), or read back.
  virtual void set_peer_loss(double value) { (void)value; }
  virtual double peer_loss() { return 0.0; }
  virtual void set_mira_state(const float* b, const std::uint32_t* s, std::size_t n) { (void)b, (void)s, (void)n; }
  virtual void mira_state(float* b, std::uint32_t* s, std::size_t n) { (void)b, (void)s, (void)n; }
  /// sgd-l1's step with its heuristic line search on a span of one sentence where the backend can
  /// decide the search on its device (issue 37): with `stamp` the support's weights caught up to
  /// Λ (LazyDecayRule), the gradient into g, the 3 trials (w restored from `saved`, scratch) and
  /// their choice k (SgdL1Search), then w (and q) stepped by SgdL1Rule at p.rate[k], u +=
  /// p.u_step[k], Λ += p.log_decay[k] — u and Λ read from and written to `scalars` (a vector of
  /// 2), nothing read back. Bitwise the host's step (sgd_l1_search_on_host between the
  /// primitives). Returns false, having done nothing, where the backend has no such path (the
  /// default; the CUDA backend: several sentences, a streamed corpus, a loss other than seq-log).
  virtual bool sgd_l1_search_step(const BackendCorpus& corpus, SentenceSpan sentences, const SgdL1StepParams& p,
                                  Vector& w, Vector* q, Vector* stamp, Vector& scalars, SparseVector& g,
                                  SparseVector& saved) {
    (void)corpus, (void)sentences, (void)p, (void)w, (void)q, (void)stamp, (void)scalars, (void)g, (void)saved;
    return false;
  }
  /// sgd-l1's (no line search) or adf's steps at batch size 1 (GradientSteps, step_params.hpp),
  /// bitwise the steps through the primitives one at a time, where the backend runs them without
  /// a launch a step (CUDA: one a few hundred; issue 37). False, having done nothing, where it has
  /// no such path (the default; an empty span asks).
  virtual bool gradient_steps(const BackendCorpus& corpus, SentenceSpan sentences, Vector& w,
                              const GradientSteps& steps) {
    return (void)corpus, (void)sentences, (void)w, (void)steps, false;
  }
  /// dst = src (indices and values).
  virtual void sparse_copy(const SparseVector& src, SparseVector& dst) = 0;
  /// x.value[j] = w[x.index[j]] for every entry j (x's indices unchanged): saves the weights of a
  /// support, for an exact restore by scatter().
  virtual void gather(const Vector& w, SparseVector& x) = 0;
  /// w[x.index[j]] = x.value[j] for every entry j (other entries of w untouched).
  virtual void scatter(const SparseVector& x, Vector& w) = 0;
  /// y[x.index[j]] += a · x.value[j] for every entry j.
  virtual void sparse_axpy(double a, const SparseVector& x, Vector& y) = 0;
  /// Σ_j c1·|x.value[j]| + c2·x.value[j]² (summed in index order, or in fixed blocks combined in
  /// order — the result must not depend on the thread count).
  virtual double sparse_penalty(const SparseVector& x, double c1, double c2) = 0;
};

/// Blockwise coordinate descent's statistics (bcd; Lavergne, Cappé & Yvon 2010, §3.2, as
/// Wapiti's bcd), a capability a Backend may offer (Backend::blockwise): the CPU backend offers it,
/// the CUDA backend not yet (bcd runs on the CPU only). A block is a weight group (WeightGroups):
/// a state attribute's row, the transitions, an edge attribute's block. Deterministic: sums in a
/// fixed order, whatever the number of threads.
class BlockStatistics {
 public:
  virtual ~BlockStatistics() = default;
  /// The inverted index, built once: for each group g the sentences where it is active,
  /// ascending, sentences[offsets[g] … offsets[g + 1]) (offsets: count() + 1 entries). A state
  /// attribute is active at the tokens with an item of it, an edge attribute at the positions
  /// t ≥ 1 with an item of it, the transitions (when Dims::transitions) at every t ≥ 1.
  virtual void block_index(const BackendCorpus& corpus, std::vector<std::size_t>& offsets,
                           std::vector<std::uint32_t>& sentences) = 0;
  /// For the group `group` over `sentences` (those where it is active, all labeled), with
  /// forward-backward on each sentence at w, per weight k of the group (slot j; host arrays of
  /// WeightGroups::size(group) entries, overwritten):
  ///   grad[k] = Σ_t x_t · (p_t(j) − 1[gold at t has j])   (the NLL's gradient, ∂/∂w_k)
  ///   curv[k] = Σ_t x_t² · p_t(j) · (1 − p_t(j))          (its diagonal curvature, Wapiti's e(1 − e))
  /// summed over the positions t where the group is active, x_t its value there (the items' sum),
  /// p_t(j) the node marginal p(y_t = j | x) of a state row, the pair marginal
  /// p(y_{t−1} = j / L, y_t = j mod L | x) of the others. Asks the stop poll (PassStopped).
  virtual void block_statistics(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                                std::uint32_t group, double* grad, double* curv) = 0;
  /// The weights of group `group` (WeightGroups::size(group) of them, in weight order) read from w
  /// into host memory, or written into w from it (w's other weights untouched).
  virtual void read_block(const Vector& w, std::uint32_t group, double* out) = 0;
  virtual void write_block(Vector& w, std::uint32_t group, const double* in) = 0;
};

/// The vectors a rule works on, slot by slot (a null slot: the rule sees a null element pointer).
struct MapOperands {
  static constexpr int kMax = 4;
  Vector* v[kMax] = {};
};

/// The seam (this file's first comment). A backend implements its 11 pure virtuals — name, upload,
/// vector, write, read, swap, apply_rule and the CRF core (evaluate, viterbi, viterbi_nbest,
/// marginals) — and may override the sizing and capability defaults; the vector algebra is Backend's
/// own, element rules run by apply_rule (tests/test_backend_seam.cpp: a backend of host arrays).
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu (2 threads)", "cuda:0 NVIDIA H100 …".
  virtual std::string name() const = 0;
  /// The host threads an optimizer may give host loops of its own (boosting's exact lines): the
  /// CPU backend's workers, the CUDA backend's --threads (0 there: every core); 1 by default.
  virtual unsigned host_threads() const { return 1; }
  const Dims& dims() const { return dims_; }
  /// Bytes a run can still allocate where this backend keeps its vectors: host memory
  /// (MemAvailable; the default, the CPU backend) or free device memory (CUDA); 0 when unknown.
  virtual std::size_t memory_available();
  /// Bytes upload(corpus) allocates beyond the host corpus (the CPU backend takes it over: 0).
  virtual std::size_t upload_bytes(const Corpus& corpus) const {
    (void)corpus;
    return 0;
  }
  /// Bytes of the buffers evaluate() holds over `corpus` at its largest (marginal deltas of a
  /// chunk, per-thread forward-backward scratch) with `loss` (the pointwise losses hold pairwise
  /// marginals per position); 0 when the backend does not say.
  virtual std::size_t workspace_bytes(const Corpus& corpus, SequenceLoss loss = SequenceLoss::seq_log) const {
    (void)corpus;
    (void)loss;
    return 0;
  }

  /// Before upload(): the run's limits — `limit` bytes at most where this backend keeps its data
  /// (0: no limit beyond what is free), of which `reserved` will hold the run's vectors (weights,
  /// optimizer state: allocated after the upload), and `host_limit` bytes of host memory (0:
  /// what is free). memory_available, upload_bytes and workspace_bytes answer within them. The
  /// CUDA backend streams a corpus whose copy does not fit in the rest; the default ignores them.
  virtual void set_memory_limits(std::size_t limit, std::size_t reserved, std::size_t host_limit) {
    (void)limit;
    (void)reserved;
    (void)host_limit;
  }

  /// How an uploaded corpus sits on this backend where that is worth a note ("streamed from
  /// pinned host memory in 12 chunks …"), else "".
  virtual std::string corpus_note(const BackendCorpus& corpus) const {
    (void)corpus;
    return "";
  }

  // ---- data ------------------------------------------------------------------------------
  virtual BackendCorpusPtr upload(const Corpus& corpus) = 0;
  /// The same, taking the corpus over where the backend can keep it as it is (the CPU backend:
  /// no copy). The default does what upload(const Corpus&) does.
  virtual BackendCorpusPtr upload(Corpus&& corpus) { return upload(static_cast<const Corpus&>(corpus)); }
  /// The host copy of an uploaded corpus, for trainers that work on the host (the Maxent
  /// trainers gis, iis, scgis and cd, host/optim/maxent_problem.hpp); null where the backend keeps
  /// none. The CPU backend's is the corpus itself, the CUDA backend's the copy it plans spans from.
  virtual const Corpus* host_corpus(const BackendCorpus& corpus) const {
    (void)corpus;
    return nullptr;
  }

  // ---- vectors (backend-resident) ----------------------------------------------------------
  // What a backend must do with its vectors: allocate, copy to and from the host, swap.
  virtual VectorPtr vector(std::size_t n) = 0;  // zero-filled
  virtual void write(Vector& dst, const double* src) = 0;
  virtual void read(const Vector& src, double* dst) = 0;
  /// Exchanges the contents of two vectors of one size without moving them (O(1)).
  virtual void swap(Vector& x, Vector& y) = 0;

  // The vector algebra, the same on every backend: each member is an element rule
  // (host/backend/vector_rules.hpp) run by apply_rule, so no backend writes it; a dense rule's
  // terms are summed as apply_rule says. Operands of one size (Error otherwise).
  void fill(Vector& x, double value);
  void copy(const Vector& src, Vector& dst);
  void scale(double a, Vector& x);                        // x = a·x
  void axpy(double a, const Vector& x, Vector& y);        // y += a·x
  void axpby(double a, const Vector& x, double b, Vector& y);  // y = a·x + b·y
  void sub(const Vector& x, const Vector& y, Vector& out);     // out = x − y
  double dot(const Vector& x, const Vector& y);
  double norm1(const Vector& x);
  double norm2sq(const Vector& x);  // dot(x, x)
  double norm_inf(const Vector& x);
  std::size_t count_nonzero(const Vector& x);

  // Fused forms for the quasi-Newton trainers, whose vector algebra over millions of weights is
  // memory-bound: each makes one pass where the separate calls make two or three, and gives bit
  // for bit what they give (the same per-element arithmetic, the same blocked summation).
  void scaled_copy(double a, const Vector& x, Vector& y);  // y = a·x
  /// out = x + a·d   (copy(x, out); axpy(a, d, out)); out must not be d (Error)
  void add_scaled(const Vector& x, double a, const Vector& d, Vector& out);
  /// y += a·x, then returns z·y   (axpy(a, x, y); dot(z, y))
  double axpy_dot(double a, const Vector& x, Vector& y, const Vector& z);
  /// x = a·x, then returns z·x   (scale(a, x); dot(z, x))
  double scale_dot(double a, Vector& x, const Vector& z);
  /// y += a·x, then returns x·x   (axpy(a, x, y); norm2sq(x))
  double axpy_norm2sq(double a, const Vector& x, Vector& y);
  /// out = x − y, then returns out·z   (sub(x, y, out); dot(out, z))
  double sub_dot(const Vector& x, const Vector& y, Vector& out, const Vector& z);

  // ---- element rules: the generic layer under the optimizers ------------------------------
  /// Runs an element rule (the vector algebra above, host/backend/vector_rules.hpp; the
  /// optimizers' rules, host/rules: SGD-L1's clipping, ADF's rates, the lazy L2 decay,
  /// OWL-QN's projections …; written once, as host-device functors) on every element — every index
  /// i < n of the operands (over == nullptr; n their common size) or every entry (i, x) of `over`
  /// (indices below n). The rule reads and writes the operands' elements i and returns a term;
  /// with `sum` the terms are summed and returned — or, for a rule with kFoldMax, their maximum
  /// from 0 — deterministically, never dependent on the thread count: on the CPU in kReduceBlock
  /// blocks combined in order, a dense block in 8 interleaved lanes added in order (vectorised), a
  /// sparse one in entry order; on the GPU the two-pass tree. Without `sum` nothing is folded (no
  /// host round trip) and 0 is returned. Elements are independent (a sparse vector's indices are
  /// distinct), so they run in any order, in parallel. Optimizers call it through map /
  /// map_reduce (host/rules/rule_set.hpp), never directly.
  virtual double apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over,
                            bool sum) = 0;

  // ---- batch primitives --------------------------------------------------------------------
  /// Negative log-likelihood Σ_i −log p(y_i | x_i) over `sentences` (all labeled; a sentence
  /// named twice counts twice, in the loss and in the gradient). When `grad`
  /// is given, adds scale · (E_p[f] − f(x, y)) to it (the NLL gradient). grad == nullptr is the
  /// loss-only mode (forward pass only), for line searches.
  /// With another `loss` (crfx/internal/loss.hpp) it is that loss summed over the sentences, and the
  /// gradient added is scale · ∂loss/∂w (seq_log: exactly the NLL and gradient above). A backend
  /// that does not compute a loss throws Error naming it, before any work.
  virtual double evaluate(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                          Vector* grad, double scale, SequenceLoss loss = SequenceLoss::seq_log) = 0;
  /// Best label sequence per sentence, written in span order (token after token) to `labels`.
  /// Ties go to the smallest label id. When `best_scores` is given (host memory, one entry per
  /// sentence in span order) it receives each best path's score Σ_t s_t(ŷ_t) + Σ_t τ_t(ŷ_{t−1}, ŷ_t)
  /// (0 for an empty sentence), so that p(ŷ | x) = exp(score − log Z) with log Z from marginals().
  virtual void viterbi(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                       std::uint32_t* labels, double* best_scores) = 0;
  /// The n ≥ 1 best label sequences per sentence (list Viterbi, `crfx tag --nbest`), best first,
  /// in the order and with the tie rule of viterbi_nbest in host/cpu/chain.hpp, so path 0 is
  /// viterbi()'s. Sentence i of the span (T_i tokens, the span's tokens before it o_i) gets path r
  /// at labels + n·o_i + r·T_i and its score at path_scores[i·n + r]; paths beyond the sentence's
  /// L^T_i get score −∞ and labels 0.
  virtual void viterbi_nbest(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                             std::size_t n, std::uint32_t* labels, double* path_scores) = 0;
  /// Node marginals p(y_t = y | x), [tokens of the span][L], and log Z per sentence (span
  /// order). Either output may be null; without node_marginals only the forward pass runs.
  virtual void marginals(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences,
                         double* node_marginals, double* log_z) = 0;

  // ---- optional capabilities ---------------------------------------------------------------
  /// The incremental-gradient primitives (SAG, SAGA), or null where the backend has none.
  virtual IncrementalGradients* incremental() { return nullptr; }
  /// The sparse batch gradients (sgd-l1, two-stage, adf, ap), or null where the backend has none.
  virtual SparseGradients* sparse() { return nullptr; }
  /// Blockwise coordinate descent's statistics (bcd), or null where the backend has none.
  virtual BlockStatistics* blockwise() { return nullptr; }

  // ---- stopping inside a pass ----------------------------------------------------------------
  /// A poll that evaluate() asks as it goes, with the number of sentences it took on since the
  /// last ask (the CPU backend: as each sentence starts, 1; CUDA: before each chunk, the previous
  /// chunk's), from its worker threads (it must be cheap and thread-safe).
  /// When it answers true the call is abandoned with PassStopped and its outputs are undefined.
  /// None by default: every call runs to its end.
  void set_stop_poll(std::function<bool(std::size_t)> poll) { stop_poll_ = std::move(poll); }

 protected:
  explicit Backend(const Dims& dims) : dims_(dims) {}
  bool stop_requested(std::size_t finished) const { return stop_poll_ && stop_poll_(finished); }
  Dims dims_;

 private:
  std::function<bool(std::size_t)> stop_poll_;
};

/// A batch primitive abandoned because its stop poll answered true (Backend::set_stop_poll).
class PassStopped : public Error {
 public:
  PassStopped() : Error("the pass was stopped") {}
};
using BackendPtr = std::unique_ptr<Backend>;

/// The backend's capabilities, or Error naming the backend and what it lacks (for the trainers
/// that need them).
IncrementalGradients& incremental_gradients(Backend& b);
SparseGradients& sparse_gradients(Backend& b);

/// A sum across the processes of a data-parallel run made where a backend keeps its vectors
/// (NCCL between CUDA devices: kernels/nccl/), not through the host (crfx/internal/collective.hpp).
class DeviceSum {
 public:
  virtual ~DeviceSum() = default;
  /// x ← Σ over the processes of each one's x, in place; every process calls it, with vectors of
  /// one size. The order of the additions is the library's (NCCL's ring or tree for this process
  /// count and topology): fixed run to run on the same machines, not the host path's rank order.
  virtual void sum(Vector& x) = 0;
  /// "NCCL 2.28.9".
  virtual std::string name() const = 0;
};

enum class DeviceKind { auto_select, cpu, cuda };

struct BackendOptions {
  DeviceKind device = DeviceKind::auto_select;
  unsigned threads = 0;  // CPU worker threads; 0 = all cores
  /// Force the log-space forward-backward on every sentence (reference path for tests);
  /// by default the scaled exp-space path runs and falls back to log space on underflow.
  bool log_space_only = false;
  /// The CUDA device (modulo the devices there are): a rank of a data-parallel run takes its
  /// local rank's (TrainConfig::collective).
  int cuda_device = 0;
};

/// Parses "auto" | "cpu" | "cuda".
DeviceKind parse_device(const std::string& s);
/// Creates the backend asked for. `cuda` without a usable GPU throws Error saying why; `auto`
/// falls back to the CPU and, via `note`, says so. `note` also receives the chosen device name.
/// With `fallback` given, the reason for an `auto` fallback goes there instead of into `note`.
BackendPtr make_backend(const Dims& dims, const BackendOptions& options, std::string* note = nullptr,
                        std::string* fallback = nullptr);
/// Why no GPU backend can be made here ("" when one can): no device or driver, a device that
/// fails the launch self-test, or a build without CUDA.
std::string gpu_unavailable();
/// The CPU backend's vector code on this CPU, e.g. "AVX-512 state rows, AVX2 chain": chosen at run
/// time, overridden by CRFX_SIMD=baseline|avx2; every choice gives the same results.
std::string cpu_vector_code();
/// Throws make_backend's error for --device cuda where no GPU backend can be made, before any
/// data is read (the model's sizes are not needed to know that); nothing for auto and cpu.
void check_device(const BackendOptions& options);

/// Convenience: host → new backend vector.
VectorPtr to_backend(Backend& b, const std::vector<double>& host);
/// Convenience: backend vector → host.
std::vector<double> to_host(Backend& b, const Vector& v);

}  // namespace crfx
