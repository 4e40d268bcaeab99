// crfx — the trainer registry: one table (Wapiti's style), each trainer with its settings;
// `crfx train --algo list` prints it.
#include <algorithm>
#include <cstdio>

#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "optim/maxent_problem.hpp"
#include "optim/trainers.hpp"

namespace crfx {

std::unique_ptr<Trainer> make_boost_trainer();  // boost.cpp (seed 002 §5.2)

namespace {
// Each trainer's settings (OptionSpec tables, options.cpp): the ones its train() reads.
const std::vector<const char*> kQuasiNewton = {"max-iterations", "period", "delta", "epsilon", "memory",
                                               "max-linesearch"};
const std::vector<const char*> kIncremental = {"batch-size", "epsilon", "max-epochs", "sampling", "seed"};


// Weight-sized vectors besides w (TrainerInfo::state_vectors), counted from each trainer's
// allocations (its train() and the backend state behind the primitives it calls).
std::size_t owlqn_vectors(const TrainOptions& o) { return 6 + 2 * std::size_t(std::max(o.memory, 0)); }
std::size_t lbfgs_vectors(const TrainOptions& o) {  // g, x0, g0, d and the m pairs; OWL-QN with c1
  return o.c1 > 0 ? owlqn_vectors(o) : 4 + 2 * std::size_t(std::max(o.memory, 0));
}
std::size_t rprop_vectors(const TrainOptions& o) { return 3 + (o.c1 > 0); }  // g, last, step (pg)
std::size_t sag_vectors(const TrainOptions& o) { return 3 + (o.c1 > 0); }    // d, G (pg); the span gradient
std::size_t sgd_vectors(const TrainOptions& o) { return 1 + (o.c1 > 0) + (o.c2 > 0); }  // q, stamp; the dense gradient
std::size_t two_stage_vectors(const TrainOptions& o) { return std::max(sgd_vectors(o), owlqn_vectors(o)); }
std::size_t adf_vectors(const TrainOptions& o) { return 3 + (o.c2 > 0); }    // rate, count (stamp); the dense gradient
std::size_t l2sgd_vectors(const TrainOptions&) { return 3; }                 // stamp, the best epoch's w; the dense gradient
std::size_t ap_vectors(const TrainOptions&) { return 3; }                    // u, avg; the dense difference
std::size_t pa_vectors(const TrainOptions& o) { return o.averaging ? 3 : 1; }  // (u, avg;) the dense difference
std::size_t arow_vectors(const TrainOptions&) { return 2; }                  // the variances; the dense difference
std::size_t mira_vectors(const TrainOptions&) { return 1; }                  // the dense difference (bounds: per sentence)
std::size_t bcd_vectors(const TrainOptions&) { return 0; }  // a block's g, h, w on the host; the forward passes' none
std::size_t boost_vectors(const TrainOptions&) { return 5; }  // r; on the host w, r and the bounds U, L
// gis, iis, scgis, cd: w and P̃ on the host, E (parallel) or the gradient; S_w, T_w per token as
// "stored marginals" (iis also keeps f#(x, y) per token and label).
std::size_t maxent_vectors(const TrainOptions&) { return 3; }
const std::vector<const char*> kMaxent = {"max-iterations", "period", "delta", "epsilon"};
}  // namespace

const std::vector<TrainerInfo>& trainer_registry() {
  static const std::vector<TrainerInfo> table = {
      {"lbfgs", "L-BFGS on NLL + c2·‖w‖² with a strong-Wolfe line search (with c1 > 0 it runs OWL-QN)",
       make_lbfgs_trainer, kQuasiNewton, true, lbfgs_vectors},
      {"owlqn", "OWL-QN (Andrew & Gao 2007) on NLL + c1·‖w‖₁ + c2·‖w‖²: sparse models",
       make_owlqn_trainer, kQuasiNewton, true, owlqn_vectors},
      {"rprop", "RPROP (Riedmiller & Braun 1993; iRprop−, Igel & Hüsken 2000), as Wapiti's rprop: per-weight "
                "steps that follow the gradient's sign; c1 through the pseudo-gradient",
       make_rprop_trainer, {"max-iterations", "period", "delta", "epsilon"}, true, rprop_vectors},
      {"sag", "SAG with stored marginals, Lipschitz line search and non-uniform sampling (Schmidt et al. 2015; --sampling)",
       make_sag_trainer, kIncremental, true, sag_vectors, /*stored_marginals=*/true},
      {"saga", "SAGA (Defazio et al. 2014, as Schmidt et al. 2015 use it), same memory, line search and sampling as sag",
       make_saga_trainer, kIncremental, true, sag_vectors, /*stored_marginals=*/true},
      {"sgd-l1", "mini-batch SGD with the cumulative L1 penalty (Tsuruoka et al. 2009), "
                 "η = eta0·alpha^(k/N); --line-search heuristic (Zhou et al. 2011)",
       make_sgd_l1_trainer, {"batch-size", "epochs", "eta0", "alpha", "line-search", "seed"}, true, sgd_vectors},
      {"two-stage", "sgd_epochs of SGD-L1 with the heuristic line search, then OWL-QN (Zhou et al. 2011)",
       make_two_stage_trainer,
       {"sgd-epochs", "batch-size", "eta0", "alpha", "seed", "max-iterations", "period", "delta", "epsilon", "memory",
        "max-linesearch"},
       true, two_stage_vectors},
      {"adf", "online SGD with frequency-adaptive per-feature rates (Sun et al. 2012); L2 prior c2",
       make_adf_trainer, {"batch-size", "epochs", "eta0", "adf-alpha", "adf-beta", "adf-windows", "seed"}, true,
       adf_vectors},
      {"l2sgd", "CRFsuite's l2sgd: online SGD on NLL + c2·‖w‖², rate 1/(λ·(t0 + t)) with λ = 2·c2/N (Pegasos, "
                "Shalev-Shwartz et al. 2007), t0 calibrated on a sample (Bottou's sgd); the model is the best epoch's",
       make_l2sgd_trainer,
       {"epochs", "period", "delta", "calibration-eta", "calibration-rate", "calibration-samples",
        "calibration-candidates", "calibration-max-trials", "seed"},
       true, l2sgd_vectors},
      {"ap", "averaged structured perceptron on Viterbi (Collins 2002); ignores c1, c2",
       make_perceptron_trainer, {"batch-size", "epochs", "seed"}, /*uses_objective=*/false, ap_vectors},
      {"pa", "passive-aggressive on Viterbi (Crammer et al. 2006), CRFsuite's pa: PA, PA-I, PA-II, cost-sensitive, "
             "averaged; ignores c1, c2",
       make_passive_aggressive_trainer,
       {"pa-type", "pa-c", "error-sensitive", "averaging", "epochs", "epsilon", "batch-size", "seed"},
       /*uses_objective=*/false, pa_vectors},
      {"arow", "AROW on Viterbi (Mejer & Crammer 2010), CRFsuite's arow: confidence-weighted steps per weight; "
               "ignores c1, c2",
       make_arow_trainer, {"variance", "gamma", "epochs", "epsilon", "batch-size", "seed"}, /*uses_objective=*/false,
       arow_vectors},
      {"mira", "CRF++'s MIRA (-a MIRA): 1-best MIRA on Viterbi (Crammer & Singer 2003), a sentence's steps summed at "
               "most --mira-c, sentences right --shrinking-size epochs running skipped; corpus order; ignores c1, c2",
       make_mira_trainer, {"mira-c", "shrinking-size", "epochs"}, /*uses_objective=*/false, mira_vectors},
      {"bcd", "Wapiti's bcd: blockwise coordinate descent on NLL + c1·‖w‖₁ + c2·‖w‖² (Lavergne, Cappé & Yvon "
              "2010 §3.2): per block (an attribute's weights, the transitions) the gradient and a curvature bound "
              "×κ over its sentences, a soft-thresholded step; stops on Wapiti's error-rate window; CPU only",
       make_bcd_trainer, {"max-iterations", "bcd-kappa", "stop-window", "stop-epsilon"}, true, bcd_vectors,
       /*stored_marginals=*/false, /*maxent_only=*/false, kBcdCpuOnly},
      {"boost", "sequence boosting (Altun, Hofmann & Johnson 2002): one feature a round on the seq-exp loss, "
                "sparse models: --boost-rule bound (the paper's bound, the default) or gradient (the steepest, "
                "stepped to the loss's minimum along it); --max-iterations 0 = 1000 rounds, or with --dev until "
                "--dev-patience rounds (or a fifth of the rounds to the best) pass without a better dev figure, "
                "keeping the best round; no c1, c2",
       make_boost_trainer, {"max-iterations", "boost-rule", "dev-patience", "period", "delta"}, /*uses_objective=*/false, boost_vectors},
      // Seed 001 (Huang, Hsieh, Chang & Lin 2009): Maxent models only, on the CPU.
      {"gis", "Maxent (--type maxent): generalized iterative scaling (Darroch & Ratcliff 1972), parallel update, "
              "features ≥ 0; CPU only: iterative scaling and coordinate descent are sequential",
       make_gis_trainer, kMaxent, true, maxent_vectors, /*stored_marginals=*/true, /*maxent_only=*/true,
       kMaxentCpuOnly},
      {"iis", "Maxent (--type maxent): improved iterative scaling (Della Pietra et al. 1997), parallel update, "
              "features ≥ 0; CPU only: iterative scaling and coordinate descent are sequential",
       make_iis_trainer, kMaxent, true, maxent_vectors, /*stored_marginals=*/true, /*maxent_only=*/true,
       kMaxentCpuOnly},
      {"scgis", "Maxent (--type maxent): sequential conditional GIS (Goodman 2002), one feature at a time, "
                "features ≥ 0; CPU only: iterative scaling and coordinate descent are sequential",
       make_scgis_trainer, kMaxent, true, maxent_vectors, /*stored_marginals=*/true, /*maxent_only=*/true,
       kMaxentCpuOnly},
      {"cd", "Maxent (--type maxent): coordinate descent, one Newton step and a backtracking line search per "
             "feature (Huang et al. 2009); CPU only: iterative scaling and coordinate descent are sequential",
       make_cd_trainer, {"max-iterations", "period", "delta", "epsilon", "max-linesearch"}, true, maxent_vectors,
       /*stored_marginals=*/true, /*maxent_only=*/true, kMaxentCpuOnly},
  };
  return table;
}

MemoryEstimate estimate_memory(const TrainerInfo& trainer, const TrainOptions& options, const Dims& dims,
                               const Corpus& c) {
  MemoryEstimate m;
  const std::size_t W = dims.num_weights(), L = dims.L, LL = L * L;
  m.weights = W * sizeof(double);
  if (dims.layout)  // the rows: an offset per group, a slot per weight
    m.weights += dims.layout->offsets.size() * sizeof(std::size_t) + dims.layout->slots.size() * sizeof(std::uint32_t);
  m.vectors = trainer.state_vectors ? trainer.state_vectors(options) : 0;
  m.optimizer = m.vectors * W * sizeof(double);
  if (trainer.stored_marginals) {  // per token [L], per sentence [L][L], per edge position [L][L]
    std::size_t edge_positions = 0;
    for (std::size_t t = 0; t + 1 < c.edge_offsets.size(); ++t) edge_positions += c.edge_offsets[t + 1] > c.edge_offsets[t];
    m.optimizer += (c.num_tokens() * L + (c.num_sentences() + edge_positions) * LL) * sizeof(double);
  }
  m.corpus = c.sentence_offsets.size() * sizeof(std::size_t) + c.state_offsets.size() * sizeof(std::size_t) +
             c.state_ids.size() * sizeof(std::uint32_t) + c.state_values.size() * sizeof(double) +
             c.edge_offsets.size() * sizeof(std::size_t) + c.edge_ids.size() * sizeof(std::uint32_t) +
             c.edge_values.size() * sizeof(double) + c.labels.size() * sizeof(std::uint32_t);
  return m;
}

std::string bytes_text(double bytes) {
  const char* unit[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, unit[u]);
  return buf;
}

MemoryCheck check_memory(const TrainerInfo& trainer, const TrainOptions& options, const Dims& dims,
                         const Corpus& corpus, Backend& backend, double limit, std::size_t dictionaries) {
  MemoryEstimate m = estimate_memory(trainer, options, dims, corpus);
  m.dictionaries = dictionaries;
  // The CPU backend takes the compiled corpus over (already in memory); the CUDA backend copies it.
  const std::size_t upload = backend.upload_bytes(corpus);
  const std::size_t buffers = backend.workspace_bytes(corpus, options.loss);
  const double needed = double(m.weights) + double(m.optimizer) + double(upload) + double(buffers) +
                        double(m.dictionaries);
  double available = double(backend.memory_available());
  // The limit that decides, where it is the process's (ulimit, cgroup) rather than the free memory.
  const HostMemory host = host_memory();
  std::string why = !host.limit.empty() && double(host.bytes) == available ? " (" + host.limit + ")" : "";
  if (limit > 0 && (available <= 0 || limit < available)) {
    available = limit;
    why = " (the limit given)";
  }
  const std::string state = "optimizer state " + bytes_text(double(m.optimizer)) + " (" + std::to_string(m.vectors) +
                            " weight vectors" + (trainer.stored_marginals ? " and stored marginals" : "") + ")";
  MemoryCheck c;
  c.estimate = m;
  c.figures = "weights " + bytes_text(double(m.weights)) + ", " + state + ", corpus " +
              bytes_text(double(m.corpus) + double(upload)) + ", buffers " + bytes_text(double(buffers)) +
              (m.dictionaries ? ", dictionaries " + bytes_text(double(m.dictionaries)) : std::string()) + "; " +
              bytes_text(double(m.total()) + double(upload) + double(buffers)) + " estimated, " +
              (available > 0 ? bytes_text(available) + " available" + why : "availability unknown");
  // What the run still allocates against what is free (or the limit); and, with a limit, the whole
  // estimate (the corpus and dictionaries already held included) against it.
  const double total = double(m.total()) + double(upload) + double(buffers);
  const bool over_limit = limit > 0 && total > limit;
  const bool room = available <= 0 || needed <= available;
  c.fits = room && !over_limit;
  // The refusal's parts: what the run still allocates (the corpus's copy) or, against a limit,
  // everything (the corpus held).
  auto parts = [&](const std::string& corpus_part) {
    return "(weights " + bytes_text(double(m.weights)) + ", " + state + corpus_part +
           (buffers ? ", buffers " + bytes_text(double(buffers)) : std::string()) +
           (m.dictionaries ? ", dictionaries " + bytes_text(double(m.dictionaries)) : std::string()) + ")";
  };
  if (!c.fits && room)
    c.shortfall = "needs an estimated " + bytes_text(total) + " in all " +
                  parts(", corpus " + bytes_text(double(m.corpus) + double(upload))) + " but " + bytes_text(limit) +
                  " is the limit given";
  else if (!c.fits)
    c.shortfall = "needs an estimated " + bytes_text(needed) + " more " +
                  parts(upload ? ", the corpus's copy " + bytes_text(double(upload)) : std::string()) + " but " +
                  bytes_text(available) + " is available on " + backend.name() + why;
  return c;
}

std::string loss_refusal(const TrainerInfo& trainer, SequenceLoss loss) {
  if (loss == SequenceLoss::seq_log) return "";
  const std::string name = trainer.name, loss_name = sequence_loss_name(loss);
  const std::string others = "; lbfgs, owlqn, rprop, sgd-l1, two-stage and adf train every loss";
  if (name == "boost")
    return name + " minimises the sequential exponential loss (seq-exp) by construction and takes no --loss (--loss " +
           loss_name + " given)" + others;
  if (!trainer.uses_objective)
    return name + " minimises no loss (" + (name == "ap" ? "the perceptron updates" : "it updates") +
           " on its Viterbi mistakes): --loss " + loss_name +
           " does not apply" + others;
  if (trainer.stored_marginals && !trainer.maxent_only)
    return name + " stores each sentence's gradient as the marginals of the log-loss, so it trains --loss seq-log only, not " +
           loss_name + others;
  if (trainer.maxent_only)
    return name + " minimises the Maxent log-loss only (--loss seq-log), not " + loss_name + others;
  if (name == "bcd")
    return name + " is Wapiti's blockwise coordinate descent: its curvature bound is the log-loss's (marginals "
           "p·(1 − p)), so it trains --loss seq-log only, not " + loss_name + others;
  if (name == "l2sgd")
    return name + " is CRFsuite's SGD on the L2-regularised log-likelihood (its rate calibration and stopping test "
           "are CRFsuite's, on that loss): --loss seq-log only, not " + loss_name + others;
  return "";
}

void check_loss(const char* trainer, SequenceLoss loss) {
  const std::string why = loss_refusal(find_trainer(trainer), loss);
  if (!why.empty()) throw Error(why);
}

const TrainerInfo& find_trainer(const std::string& name) {
  std::string known;
  for (const auto& t : trainer_registry()) {
    if (name == t.name) return t;
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  throw Error("unknown training algorithm '" + name + "' (known: " + known + ")");
}

LineSearch parse_line_search(const std::string& name) {
  if (name == "none") return LineSearch::none;
  if (name == "heuristic") return LineSearch::heuristic;
  throw Error("unknown line search '" + name + "' for sgd-l1 (known: none, heuristic)");
}

BoostRule parse_boost_rule(const std::string& name) {
  if (name == "bound") return BoostRule::bound;
  if (name == "gradient") return BoostRule::gradient;
  throw Error("unknown rule '" + name + "' for boost (known: bound, gradient)");
}

const char* name_of(BoostRule v) { return v == BoostRule::bound ? "bound" : "gradient"; }

const char* name_of(LineSearch v) { return v == LineSearch::heuristic ? "heuristic" : "none"; }

const char* name_of(Sampling v) {
  return v == Sampling::uniform ? "uniform" : v == Sampling::lipschitz ? "lipschitz" : "mixed";
}

Sampling parse_sampling(const std::string& name) {
  if (name == "uniform") return Sampling::uniform;
  if (name == "lipschitz") return Sampling::lipschitz;
  if (name == "mixed") return Sampling::mixed;
  throw Error("unknown sampling '" + name + "' for sag/saga (known: uniform, lipschitz, mixed)");
}

}  // namespace crfx
