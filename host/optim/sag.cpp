// crfx — SAG and SAGA for CRFs (seed 004: Schmidt, Babanezhad, Ahmed, Defazio, Clifton & Sarkar
// 2015, Algorithms 1–2, §4.2, §5 SAG-NUS*, Proposition 1), written only against the Backend.
//
// Regularisation convention. crfx minimises f(w) = Σ_i NLL_i + c1‖w‖₁ + c2‖w‖² (summed, CRFsuite).
// The seed minimises F(w) = (1/n)Σ_i NLL_i + (λ/2)‖w‖²; F = f/n exactly when
//     λ = 2·c2/n,   and the L1 term becomes μ₁‖w‖₁ with μ₁ = c1/n.
// All step sizes, Lipschitz constants (of one NLL_i) and the stopping measure below are in the
// seed's units (F), so the seed's λ = 1/n is c2 = 0.5.
//
// One step on a span B of distinct sentences (B = batch_size, 1 = the seed's algorithm):
//   incremental_sync      bring w up to date on the groups B touches (lazy updates, below);
//   incremental_evaluate  forward-backward at w: Σ NLL_i, μ_new, g = Σ_{i∈B} X_iᵀ(μ_new,i − gold_i);
//   line search   Algorithm 2 on the batch mean f̄ = (1/|B|)Σ NLL_i: while
//                 f̄(w − ḡ/L) ≥ f̄(w) − ‖ḡ‖²/(2L): L ← 2L (forward-only evaluate(…, nullptr) at
//                 the trial point; incremental_trial/incremental_restore save and write back the gathered values,
//                 so w is restored bit-exactly — never w + a − a); skipped when ‖ḡ‖² ≤ 1e-8;
//                 the rule is SagLineSearch (host/rules/sag_update.hpp), the evaluation and the
//                 trials one incremental_search, so a GPU decides the trials on the device;
//   incremental_commit    d += X_iᵀ(μ_new,i − μ_old,i) per sentence (stored marginals, initialised to the
//                 gold indicators so that a first visit adds exactly the NLL gradient);
//   incremental_step      SAG:  w ← soft((1 − αλ)w − (α/m)d, αμ₁)    (m = sentences seen so far)
//                 SAGA: w ← soft((1 − αλ)w − α[d_old/n + Σ_{j∈B} Δ_j/(|B|·p_j·n)], αμ₁)
//                       (Proposition 1: d_old/n + (∇f_j − s_j)/(p_j n)); the Δ_j part is passed to
//                       incremental_commit as per-sentence coefficients α(1/(|B| p_j n) − 1/n)/(1 − αλ),
//                       so that with d = d_old + ΣΔ_j the remaining step is (1 − αλ)w − (α/n)d.
//   L decays: uniform L ← L·2^(−|B|/n); NUS: each L_i is kept per sentence (below).
//
// Lazy updates (why a step is not O(#weights)): the step above touches every weight, but between
// two visits of a weight group (an attribute's L weights, an edge attribute's L² block) its d is
// constant, so the backend only records (a, b, τ) per step and brings a group up to date in O(1)
// per weight when a span next touches it, from cumulative products/sums of the scalar factors
// (contract and formula in backend.hpp, section SAG / SAGA). incremental_flush applies everything at the
// end of every epoch, before the objective is computed and reported.
//
// L1 / elastic net (c1 > 0): proximal SAG/SAGA — the step ends with the soft-threshold
// prox_{αμ₁}(x) = sign(x)·max(|x| − αμ₁, 0), which is what leaves exact zeros. Lazily, the
// thresholds of a group's missed steps are accumulated (R_k) and applied once with its deferred
// move; this equals the step-by-step prox unless a weight changes sign during its lag, and has
// the same fixed points (so the optimum is the same).
//
// Sampling (TrainOptions::sampling), with one deterministic RNG (std::mt19937_64 seeded by
// TrainOptions::seed, our own 53-bit uniform draw; no std::*_distribution): same seed → same
// model, independent of the number of threads.
//   uniform    i uniform over n; one global L (starts at 1), α = 1/(L + λ)       [Algorithm 1]
//   mixed      SAG-NUS* (seed 004 §5, the default): with probability ½ uniform, else ∝ L_i over
//              the sentences seen so far; L_i = ½·L̄ on a first visit (1 when nothing is seen),
//              L_i ← 0.9·L_i on each revisit, then Algorithm 2 on L_i;
//              α = ½(1/(L_max + λ) + 1/(L̄ + λ)), L̄ and L_max over the seen sentences.
//   lipschitz  NUS in the style of Schmidt et al. 2013 §5.5 as seed 004 describes it: L_i = 1 on a
//              first visit, L_i ← ½·L_i on each revisit, then Algorithm 2 on L_i; with probability
//              m/n (non-uniformity grows with the number seen) sample ∝ L_i over the seen
//              sentences, else uniformly; α = 1/(L_max + λ). (The 2013 paper's more elaborate
//              step-size rule is not reproduced.)
//   With |B| > 1 a batch is |B| distinct draws (repeats are redrawn); the NUS line search runs on
//   the mean of the members' L_i and scales each member's L_i by the same factor.
//   Under uniform sampling nothing the host draws depends on the L found, so a step is handed to
//   the backend whole (incremental_schedule: search, α, commit, lazy step, L's decay), which keeps
//   L, α and the trials until read after the epoch or at a stop: the CUDA backend queues a step
//   (of one sentence, or a batch that one chunk takes) on the device without a wait (issue 37).
//   NUS hands the backend the sampler too (incremental_schedule_drawn): the draws ∝ L_i need the
//   L_i of the step before, so the CUDA backend draws on the device with the same code (host/
//   rules/sag_sampler.hpp: draw_one, draw_span) and writes the sampler back when read; the CPU
//   backend steps on its primitives (schedule_drawn_on_host, host/rules/sag_update.hpp).
// SAGA uses the same L estimates with α divided by 3 in the Lipschitz part (α = 1/(3L + λ), as
// Defazio et al. 2014 recommend); p_j is the draw probability of j at the time of the draw.
//
// Stopping (seed 004 Algorithm 1): after an epoch (⌈n/|B|⌉ steps), when every sentence was seen
// (m = n) and ‖G‖∞ < δ = TrainOptions::epsilon, where G = d/n + λw in F's units — with c1 > 0 the
// minimum-norm subgradient of F (OWL-QN's pseudo-gradient of d/n + λw with μ₁); or after
// max_epochs. Progress is reported once per epoch: iteration = epoch, passes = seed 004's
// effective passes ((forward-backward + forward-only line-search evaluations)/n), objective =
// the full f(w) (one extra monitoring pass, not counted in passes), gradient_norm = ‖G‖∞,
// step = the last α. A stop poll (Trainer::stop_when) is asked after every step but an epoch's
// last; a stop there saves w and d as they are with the lazy steps pending (incremental_save
// keeps their history and the groups' stamps), then flushes them into the model's weights.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "rules/rule_set.hpp"
#include "rules/sag_sampler.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {
namespace {

/// The sampling side of SAG-NUS (seed 004 §5 and Algorithm 2's bookkeeping): batches of distinct
/// sentences with the probability each was drawn with, the count m of sentences seen, and the
/// Lipschitz estimates — L_i per seen sentence (lipschitz, mixed) or one global L (uniform). The
/// draws and the rules are SagSamplerRef's (host/rules/sag_sampler.hpp), which the CUDA backend
/// runs on the device too; this owns the arrays.
class SagSampler {
 public:
  SagSampler(std::size_t n, Sampling sampling, std::uint64_t seed) : sampling_(sampling), seen_(n, 0) {
    sc_.rng.seed(seed);
    sc_.n = n;
    sc_.leaves = 1;
    while (sc_.leaves < n) sc_.leaves *= 2;
    sc_.m = 0;
    sc_.mode = sampling == Sampling::uniform ? SamplerMode::uniform
               : sampling == Sampling::mixed ? SamplerMode::mixed : SamplerMode::lipschitz;
    sum_.assign(2 * sc_.leaves, 0.0);
    max_.assign(2 * sc_.leaves, 0.0);
  }

  std::size_t seen() const { return sc_.m; }
  Sampling sampling() const { return sampling_; }
  /// The global L of uniform sampling (the backend's, while it schedules the steps).
  double global_lipschitz() const { return L_global_; }
  void set_global_lipschitz(double L) { L_global_ = L; }
  void state(StateArchive& ar) {
    std::mt19937_64 rng;
    if (!ar.restoring()) to_std(sc_.rng, rng);
    ar.engine("sampler.rng", rng);
    if (ar.restoring() && !from_std(rng, sc_.rng)) throw Error("checkpoint: the saved sampler's generator is not read");
    const std::size_t size = sum_.size(), n = sc_.n;
    ar.doubles("sampler.lipschitz_sums", sum_);
    ar.doubles("sampler.lipschitz_maxima", max_);
    if (sum_.size() != size || max_.size() != size)
      throw Error("checkpoint: the saved Lipschitz estimates are not of this corpus");
    ar.values("sampler.seen", seen_);
    if (seen_.size() != n) throw Error("checkpoint: the saved sampler is not of this corpus");
    std::size_t m = sc_.m;
    ar.value("sampler.m", m);
    sc_.m = m;
    ar.value("sampler.L", L_global_);
  }

  /// B distinct sentences (a repeat is redrawn) and their draw probabilities; then the first
  /// visits and the revisits (SagSamplerRef::draw_span, visit).
  void draw_batch(std::vector<std::uint32_t>& batch, std::vector<double>& prob) {
    ref().draw_span(batch.data(), prob.data(), batch.size());
  }
  /// The state, for a backend that draws (incremental_schedule_drawn).
  SagSamplerRef ref() { return {&sc_, sum_.data(), max_.data(), seen_.data()}; }

 private:

  Sampling sampling_;
  SagSamplerScalars sc_{};
  std::vector<double> sum_, max_;
  std::vector<char> seen_;
  double L_global_ = 1.0;
};

/// A step's batch: the sentences drawn and their draw probabilities (uniform sampling).
struct Batch {
  explicit Batch(std::size_t B) : ids(B), prob(B) {}
  std::vector<std::uint32_t> ids;
  std::vector<double> prob;
};

/// Steps scheduled on the backend: uniform sampling's (incremental_schedule: the host draws the
/// batches and counts the sentences seen) and NUS's (incremental_schedule_drawn: the backend
/// draws with the sampler's state, written back when read); L, α and the line
/// searches' trials stay with the backend
/// (on a GPU, on the device: no wait per step) until read — after an epoch, or at a stop.
struct Schedule {
  IncrementalGradients& ig;
  IncrementalState& state;
  std::size_t B;
  double nd;
  bool drawn = false;  // NUS: the backend draws (incremental_schedule_drawn)
  SagStepParams params{};
  std::size_t unread = 0;  // steps since the last read
  unsigned long long trials_read = 0;

  void step(SagSampler& sampler, Batch& batch, Vector& w, Vector& d) {
    ++unread;
    if (drawn) {
      ig.incremental_schedule_drawn(state, sampler.ref(), params, w, d);
      return;
    }
    sampler.draw_batch(batch.ids, batch.prob);
    params.seen = double(sampler.seen());
    params.prob = batch.prob[0];  // uniform: 1/n for every member
    ig.incremental_schedule(state, SentenceSpan{batch.ids.data(), B}, params, w, d);
  }
  /// The backend's scalars into the sampler (and its state, drawn) and α; the passes of the steps since the last read
  /// (an evaluation each and every trial, B/n apiece, added one by one).
  void read(Objective& obj, SagSampler& sampler, double& alpha) {
    const SagScalars sc = ig.incremental_scalars(state);
    for (unsigned long long t = unread + (sc.trials - trials_read); t > 0; --t) obj.add_passes(double(B) / nd);
    trials_read = sc.trials;
    unread = 0;
    if (!drawn) sampler.set_global_lipschitz(sc.L);
    alpha = sc.alpha;
  }
};

class SagTrainer final : public Trainer {
 public:
  explicit SagTrainer(bool saga) : saga_(saga) {}

  double train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) override {
    const char* algo = saga_ ? "saga" : "sag";
    check_loss(algo, obj.loss());  // the stored marginals are the log-loss's
    check_options(algo, opt);

    Backend& b = obj.backend();
    const BackendCorpus& corpus = obj.corpus();
    const std::size_t n = corpus.num_sentences(), W = w.size();
    const double nd = double(n);
    const std::size_t B = std::min<std::size_t>(opt.batch_size, n);
    const double lambda = 2.0 * obj.c2() / nd, mu1 = obj.c1() / nd;  // seed 004's units (f = n·F)

    IncrementalStatePtr state = incremental_gradients(b).incremental_create(corpus);
    VectorPtr d = b.vector(W), G = b.vector(W), pg = mu1 > 0 ? b.vector(W) : nullptr;
    SagSampler sampler(n, opt.sampling, opt.seed);
    const double decay = std::pow(2.0, -double(B) / nd);
    const std::size_t steps_per_epoch = (n + B - 1) / B;
    Batch batch(B);
    Stopwatch clock;
    double f = 0, alpha = 0, gnorm = 0;
    int epoch = 0;
    std::size_t steps_done = 0;  // steps of epoch `epoch` taken: 0 after an epoch's report
    // The state after an epoch's report: w flushed (no lazy step pending), d, the stored marginals
    // and the sampler; or inside epoch `epoch` after `steps_done` steps (a stop requested by the
    // poll): w as it is, with the lazy steps pending and the groups' stamps (incremental_save).
    const StateFn save = [&](StateArchive& ar) {
      common_state(ar, epoch, obj, clock);
      ar.value("f", f);
      ar.value("alpha", alpha);
      ar.value("gnorm", gnorm);
      ar.value("epoch.steps_done", steps_done);
      if (ar.restoring() && steps_done >= steps_per_epoch)
        throw Error(std::string("checkpoint: ") + algo + "'s position in the epoch is beyond its steps");
      sampler.state(ar);
      ar.vector("w", b, w);
      ar.vector("d", b, *d);
      std::vector<double> marginals;
      if (!ar.restoring()) marginals = incremental_gradients(b).incremental_save(*state);
      ar.doubles("stored_marginals", marginals);
      if (ar.restoring()) incremental_gradients(b).incremental_load(*state, marginals);
    };
    const bool resumed = restore(save);
    if (!resumed) {
      epoch = 1;
    }
    Schedule sched{incremental_gradients(b), *state, B, nd};
    sched.drawn = opt.sampling != Sampling::uniform;
    sched.params = SagStepParams{lambda, mu1, saga_ ? 3.0 : 1.0, double(B), nd, 0.0, 1.0 / nd, decay, saga_};
    sched.ig.incremental_set_scalars(*state, SagScalars{sampler.global_lipschitz(), alpha, 0});

    stop_reason_ = stop_at_limit("max-epochs", opt.max_epochs);
    for (bool reported = resumed && steps_done == 0; epoch <= opt.max_epochs; ++epoch, reported = false) {
      if (!reported) {
        for (std::size_t step = steps_done; step < steps_per_epoch; ++step) {
          sched.step(sampler, batch, w, *d);
          steps_done = step + 1;
          if (steps_done < steps_per_epoch && stop_requested()) {  // stop inside the epoch
            sched.read(obj, sampler, alpha);
            Progress pr = progress_within(epoch, steps_done * B, steps_per_epoch * B, obj, w, alpha, clock);
            pr.state = &save;
            if (progress) progress(pr, w);
            incremental_gradients(b).incremental_flush(*state, w, *d);  // the model: every lazy step applied
            stop_reason_ = stop_by_caller();
            return std::numeric_limits<double>::quiet_NaN();
          }
        }
        steps_done = 0;
        sched.read(obj, sampler, alpha);

        // ---- end of epoch: flush, measure, report
        incremental_gradients(b).incremental_flush(*state, w, *d);
        gnorm = gradient_norm(b, w, *d, *G, pg.get(), nd, lambda, mu1);
        f = objective(obj, w);
        require_finite(algo, "epoch", epoch, f);
        Progress pr = progress_at(epoch, obj, w, f, gnorm, alpha, clock);
        pr.state = &save;
        if (progress && !progress(pr, w)) {
          stop_reason_ = stop_by_caller();
          break;
        }
      }
      if (sampler.seen() == n && gnorm < opt.epsilon) {
        stop_reason_ = stop_at_gradient("‖g‖∞ (every sentence seen)", gnorm, opt.epsilon);
        break;
      }
    }
    return f;
  }

 private:
  static void check_options(const char* algo, const TrainOptions& opt) {
    if (opt.batch_size < 1) throw Error(std::string(algo) + ": batch_size must be ≥ 1");
    if (opt.max_epochs < 1) throw Error(std::string(algo) + ": max_epochs must be ≥ 1");
    if (!(opt.epsilon >= 0) || !std::isfinite(opt.epsilon))
      throw Error(std::string(algo) + ": epsilon must be finite and ≥ 0");
  }

  /// The epoch's measure of convergence: ‖G‖∞ for G = d/n + λw, or of its pseudo-gradient (L1).
  static double gradient_norm(Backend& b, const Vector& w, const Vector& d, Vector& G, Vector* pg, double nd,
                              double lambda, double mu1) {
    b.copy(w, G);
    b.axpby(1.0 / nd, d, lambda, G);  // G = d/n + λw
    if (!(mu1 > 0)) return b.norm_inf(G);
    map(b, OwlqnPseudoGradientRule{mu1}, {w, G, *pg});
    return b.norm_inf(*pg);
  }

  /// Monitoring pass: the exact objective; deliberately not counted in passes.
  static double objective(Objective& obj, const Vector& w) {
    Backend& b = obj.backend();
    double f = b.evaluate(obj.corpus(), w, all_sentences(obj.corpus()), nullptr, 1.0);
    if (obj.c2() > 0) f += obj.c2() * b.norm2sq(w);
    return f + obj.l1_term(w);
  }

  bool saga_;
};

}  // namespace

std::unique_ptr<Trainer> make_sag_trainer() { return std::make_unique<SagTrainer>(false); }
std::unique_ptr<Trainer> make_saga_trainer() { return std::make_unique<SagTrainer>(true); }

}  // namespace crfx
