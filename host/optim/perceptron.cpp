// crfx — ap: the averaged structured perceptron (Collins 2002; seed 002 Algorithm 1) on Viterbi
// decoding (Backend::viterbi, ties → smallest label).
//
// Per batch (batch_size = 1: per sentence, the classic algorithm): decode with the current w, then
//     Δ = Σ_{i∈B} f(x_i, y_i) − f(x_i, ŷ_i)      (Backend::feature_difference)
//     w ← w + Δ
// Averaging with the lazy trick (Daumé 2006): with t = 1, 2, … the update steps and
//     u ← u + (t − 1)·Δ   at step t,
// after T steps the average of the T weight vectors w_1 … w_T (w_t after step t) is
//     w_avg = w − u / T
// (w_t = w_0 + Σ_{j≤t} Δ_j, so Σ_t w_t / T = w_0 + Σ_j Δ_j·(T − j + 1)/T). Only the batch's
// support is touched per step; steps with Δ = 0 (no mistake) skip the updates. The final model is
// w_avg; the objective reported per epoch (and returned) is the full f of w_avg with the
// Objective's c1 and c2 (the perceptron does not use them). Passes: a Viterbi decode is counted as
// a forward-only evaluation (m/N per batch). Where the backend can (SparseGradients::
// perceptron_step: the CUDA backend, batches of up to 256 sentences) the decode, Δ and both
// updates stay on its device, gated there by the mistakes: nothing is read back per step (issue 37);
// pa's and arow's steps too, at any batch size ap's takes, and mira's sentence steps
// (SparseGradients::peer_step; their loss, or mira's state, read back at the epoch's end). At batch
// size 1 ap's, pa's and arow's steps go to the backend in runs (SparseGradients::perceptron_steps,
// peer_steps: the CUDA backend takes a few hundred in one launch).
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "crfx/errors.hpp"
#include "optim/quasi_newton.hpp"
#include "optim/sgd_l1.hpp"
#include "optim/trainers.hpp"

namespace crfx {

double MistakeDrivenTrainer::train(Objective& obj, Vector& w, const TrainOptions& opt, const ProgressFn& progress) {
  check_loss(name_, obj.loss());  // no loss of the Objective is minimised
  Backend& b = obj.backend();
  const BackendCorpus& corpus = obj.corpus();
  const std::size_t n = corpus.num_sentences();
  const double N = double(n);
  validate_stochastic_options(opt, opt.epochs);
  const std::size_t nw = w.size(), batch = batch_size(opt);
  const bool averaging = averaged(opt), shuffling = shuffles();
  VectorPtr u = averaging ? b.vector(nw) : nullptr, avg = averaging ? b.vector(nw) : nullptr;
  Vector& model = averaging ? *avg : w;  // what is reported and returned
  prepare(b, nw, n, opt);
  SparseVectorPtr delta = sparse_gradients(b).sparse_vector();
  std::vector<std::uint32_t> labels(corpus.num_tokens());  // ≥ the tokens of any span
  EpochShuffler shuffler(n, opt.seed);  // (without shuffles(): the corpus order it starts with)
  Stopwatch clock;
  double t = 0;  // update steps so far
  double f = std::numeric_limits<double>::quiet_NaN();
  double loss = 0;  // the loss summed over the epoch so far (has_loss)
  bool have_avg = false;
  on_device_ = device_refused_ = false;
  int epoch = 0;
  auto average = [&] {  // w_avg = w − u/T
    if (!averaging) return;
    b.copy(w, *avg);
    b.axpy(-1.0 / t, *u, *avg);
    have_avg = true;
  };
  std::size_t done = 0;  // sentences of epoch `epoch` processed: 0 after an epoch's end
  // The state after an epoch's report (which shows the model; w and u go on), or inside epoch
  // `epoch` after `done` sentences (a stop requested by the poll; the shuffler holds the epoch's
  // permutation). The average is derived: restoring recomputes it.
  const StateFn state = [&](StateArchive& ar) {
    common_state(ar, epoch, obj, clock);
    ar.value("epoch.sentences_done", done);
    if (ar.restoring() && done >= n)
      throw Error(std::string("checkpoint: ") + name_ + "'s position in the epoch is beyond the corpus");
    ar.value("f", f);
    ar.value("t", t);
    if (!ar.restoring()) sync_device(b, loss);
    if (has_loss()) ar.value("epoch.loss", loss);
    if (ar.restoring()) on_device_ = false;
    if (shuffling) shuffler.state(ar);
    ar.vector("w", b, w);
    if (averaging) ar.vector("u", b, *u);
    own_state(ar, b);
    if (ar.restoring()) average();
  };
  restore(state);

  // ap, pa, arow, mira at batch size 1 in runs where the backend has them: the sentences visited
  // queued (run_ids_) as they come, counted and polled for, taken at the epoch's end or a stop.
  const bool runs = batch == 1 && run_step(opt) && take_run(obj, {}, w, u.get(), 0.0, *delta, loss);
  stop_reason_ = stop_at_limit("epochs", opt.epochs);
  for (epoch += done > 0 ? 0 : 1; epoch <= opt.epochs; ++epoch) {
    if (done == 0) {  // (resumed inside the epoch: its permutation and loss are restored)
      if (epoch > 1 && stops_after(epoch - 1, loss / N, opt.epsilon)) break;
      if (shuffling) shuffler.next();
      loss = 0;
    }
    const std::vector<std::uint32_t>& perm = shuffler.permutation();
    const double run_t0 = t;  // the epoch's run's first step's (runs)
    for (std::size_t start = done; start < n; start += batch) {
      const std::size_t m = std::min(batch, n - start);
      const SentenceSpan span{perm.data() + start, m};
      if (visits(span)) {
        t += 1;
        obj.add_passes(double(span.count) / N);
        if (runs) run_ids_.push_back(span[0]);
        else learn(obj, w, span, *delta, labels.data(), u.get(), t, opt, loss);
      }
      done = start + m;
      if (done < n && stop_requested()) {  // stop inside the epoch: the model is the average so far
        if (runs) take_run(obj, {run_ids_.data(), run_ids_.size()}, w, u.get(), run_t0, *delta, loss);
        average();
        Progress pr = progress_within(epoch, done, n, obj, model, 0.0, clock);
        pr.state = &state;
        if (progress) progress(pr, model);
        if (averaging) b.copy(*avg, w);
        stop_reason_ = stop_by_caller();
        return std::numeric_limits<double>::quiet_NaN();
      }
    }
    if (runs) take_run(obj, {run_ids_.data(), run_ids_.size()}, w, u.get(), run_t0, *delta, loss);
    done = 0;
    sync_device(b, loss);
    end_epoch();
    average();
    f = monitor_objective(obj, model);
    require_finite(name_, "epoch", epoch, f);
    Progress pr = progress_at(epoch, obj, model, f, kNoGradientNorm, 0.0, clock);
    pr.state = &state;
    if (progress && !progress(pr, model)) {
      stop_reason_ = stop_by_caller();
      break;
    }
  }
  if (have_avg) b.copy(*avg, w);
  return f;
}

bool MistakeDrivenTrainer::run_step(const TrainOptions& opt) {
  run_ids_.clear();
  if (adds_difference()) return true;  // ap: perceptron_steps
  run_peer_ = PeerStep{};
  return device_step(opt, run_peer_);
}

bool MistakeDrivenTrainer::take_run(Objective& obj, SentenceSpan run, Vector& w, Vector* u, double t0,
                                    SparseVector& scratch, double& loss) {
  SparseGradients& sg = sparse_gradients(obj.backend());
  bool taken = false;
  if (adds_difference()) {
    taken = sg.perceptron_steps(obj.corpus(), run, w, u, t0);
  } else {
    if (run.count && !on_device_) {  // the epoch's loss so far goes with the steps (from_device: back)
      to_device(sg, loss);
      on_device_ = true;
    }
    taken = sg.peer_steps(obj.corpus(), run, run_peer_, w, u, t0, scratch);
  }
  if (run.count && !taken)
    throw Error(std::string("internal: ") + name_ + "'s backend refused a run of steps it had accepted");
  run_ids_.clear();
  return taken;
}

bool MistakeDrivenTrainer::stops_after(int last, double mean_loss, double epsilon) {
  // Tested before the next epoch, not after this one, so that a resume from its report stops too.
  if (has_loss() && converged(mean_loss, epsilon)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the mean loss of epoch %d, %.6g, reached --epsilon %g", last, mean_loss,
                  epsilon);
    stop_reason_ = buf;
    return true;
  }
  std::string why;
  if (!finished(last, why)) return false;
  stop_reason_ = why;
  return true;
}

void MistakeDrivenTrainer::learn(Objective& obj, Vector& w, SentenceSpan span, SparseVector& delta,
                                 std::uint32_t* labels, Vector* u, double t, const TrainOptions& opt,
                                 double& loss) {
  Backend& b = obj.backend();
  // ap: the whole step on the backend where it can keep it there (no path read back, no wait).
  Vector* u_step = t > 1 ? u : nullptr;  // (t − 1)·τ·Δ, τ = 1: nothing at the first step
  if (adds_difference() && sparse_gradients(b).perceptron_step(obj.corpus(), span, w, u_step, t - 1, delta)) return;
  // pa, arow, mira: the step and its loss (mira's state) on the device where it can (pa, arow: a
  // batch as ap's; mira: one sentence). A backend that refuses the step right after to_device (the
  // CPU's, a streamed corpus) is not asked again in this run; a refusal later takes the state back
  // for that step alone.
  PeerStep step;
  if (!device_refused_ && device_step(opt, step)) {
    const bool fresh = !on_device_;
    if (fresh) to_device(sparse_gradients(b), loss);
    if (sparse_gradients(b).peer_step(obj.corpus(), span, step, w, u_step, t - 1, delta)) {
      on_device_ = true;
      return;
    }
    device_refused_ = fresh;
  }
  sync_device(b, loss);
  b.viterbi(obj.corpus(), w, span, labels, nullptr);
  const std::size_t wrong = sparse_gradients(b).feature_difference(obj.corpus(), span, labels, delta, 1.0);
  decoded(span, wrong);
  if (!wrong) return;
  double tau = 0;
  loss += update(b, w, delta, wrong, opt, tau);
  if (u && t > 1 && tau != 0) sparse_gradients(b).sparse_axpy((t - 1) * tau, delta, *u);
}

void MistakeDrivenTrainer::sync_device(Backend& b, double& loss) {
  if (!on_device_) return;
  from_device(sparse_gradients(b), loss);
  on_device_ = false;
}

namespace {

class PerceptronTrainer final : public MistakeDrivenTrainer {
 public:
  PerceptronTrainer() : MistakeDrivenTrainer("ap") {}

 protected:
  bool averaged(const TrainOptions&) const override { return true; }
  bool adds_difference() const override { return true; }
  double update(Backend& b, Vector& w, const SparseVector& delta, std::size_t, const TrainOptions&,
                double& tau) override {
    tau = 1.0;  // w ← w + Δ
    sparse_gradients(b).sparse_axpy(1.0, delta, w);
    return 0.0;
  }
};

}  // namespace

std::unique_ptr<Trainer> make_perceptron_trainer() { return std::make_unique<PerceptronTrainer>(); }

}  // namespace crfx
