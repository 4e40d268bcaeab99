// crfx — the backend of one rank of a data-parallel run (distributed_backend,
// include/crfx/internal/collective.hpp): the rank's own backend, with every whole-corpus evaluate summed
// across the ranks. Forwarding, nothing else: the trainers above see one Backend and one
// objective, the ranks below each hold a shard.
//
// Why evaluate alone: of the Backend's calls, only the batch primitives read the corpus, and of
// those only evaluate is a sum the trainers need over all sentences (Objective's NLL and
// gradient, log_seq_exp's H and ∇H; host/optim/objective.cpp, host/optim/exp_loss.cpp). viterbi
// and marginals give per-sentence results of a corpus the caller holds (crfx train's --dev, on
// rank 0), not sums. Everything else works on the weights and vectors of the trainers, which are
// the same on every rank because every rank starts from the same weights and takes the same
// step from the same summed objective and gradient: their norms, dots and rules need no
// exchange. What cannot be summed is refused: evaluate over part of a corpus (log_seq_exp's
// per-sentence way where H overflows a double, a mini-batch), the stochastic and incremental
// capabilities, host_corpus (the Maxent trainers would see one shard as the corpus).
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/collective.hpp"

namespace crfx {
namespace {

class DistributedBackend final : public Backend {
 public:
  DistributedBackend(BackendPtr inner, Collective& c, const DeviceSumMaker& device)
      : Backend(inner->dims()), b_(std::move(inner)), c_(c) {
    const char* env = std::getenv("CRFX_NCCL");
    const bool wanted = device.usable && device.make && !(env && std::string(env) == "0");
    // Every rank asks (a collective call), so that all or none of them take the device's way.
    if (c_.all(wanted && device.usable(*b_)))
      device_ = device.make(*b_, c_.rank(), c_.size(),
                            [this](void* data, std::size_t bytes) { c_.broadcast(data, bytes, 0); });
  }

  std::string name() const override {
    return b_->name() + ", rank " + std::to_string(c_.rank()) + " of " + std::to_string(c_.size()) +
           (device_ ? ", gradients summed by " + device_->name() : "");
  }
  unsigned host_threads() const override { return b_->host_threads(); }
  std::size_t memory_available() override { return b_->memory_available(); }
  void set_memory_limits(std::size_t limit, std::size_t reserved, std::size_t host_limit) override {
    b_->set_memory_limits(limit, reserved, host_limit);
  }
  std::string corpus_note(const BackendCorpus& corpus) const override { return b_->corpus_note(corpus); }
  std::size_t upload_bytes(const Corpus& corpus) const override { return b_->upload_bytes(corpus); }
  /// The inner backend's, with the gradient's scratch vector and its host copy (the collective's
  /// own buffers are bounded blocks).
  std::size_t workspace_bytes(const Corpus& corpus, SequenceLoss loss) const override {
    return b_->workspace_bytes(corpus, loss) + 2 * (dims_.num_weights() + 1) * sizeof(double);
  }

  BackendCorpusPtr upload(const Corpus& corpus) override { return b_->upload(corpus); }
  BackendCorpusPtr upload(Corpus&& corpus) override { return b_->upload(std::move(corpus)); }
  const Corpus* host_corpus(const BackendCorpus&) const override { return nullptr; }

  VectorPtr vector(std::size_t n) override { return b_->vector(n); }
  void write(Vector& dst, const double* src) override { b_->write(dst, src); }
  void read(const Vector& src, double* dst) override { b_->read(src, dst); }
  // The vector algebra (Backend's non-virtual members) reaches the inner backend through
  // apply_rule.
  void swap(Vector& x, Vector& y) override { b_->swap(x, y); }
  double apply_rule(const MapRule& rule, const MapOperands& operands, const SparseVector* over, bool sum) override {
    return b_->apply_rule(rule, operands, over, sum);
  }

  double evaluate(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences, Vector* grad, double scale,
                  SequenceLoss loss) override {
    if (sentences.ids || sentences.count != corpus.num_sentences())
      throw Error("across " + std::to_string(c_.size()) +
                  " processes only passes over the whole training data are summed; this run asked for part of it "
                  "(a sentence or a mini-batch: with --loss seq-exp, H beyond a double); run it as one process");
    if (device_ && grad) return evaluate_on_device(corpus, w, sentences, *grad, scale, loss);
    const std::size_t W = grad ? grad->size() : 0;
    host_.resize(W + 1);
    if (grad) {
      if (!scratch_ || scratch_->size() != W)
        scratch_ = b_->vector(W);  // zero-filled
      else
        b_->fill(*scratch_, 0.0);
      host_[W] = b_->evaluate(corpus, w, sentences, scratch_.get(), scale, loss);
      b_->read(*scratch_, host_.data());
    } else {
      host_[0] = b_->evaluate(corpus, w, sentences, nullptr, scale, loss);
    }
    c_.sum(host_.data(), W + 1);  // the loss travels with the gradient: one exchange a pass
    if (!grad) return host_[0];
    b_->write(*scratch_, host_.data());
    b_->axpy(1.0, *scratch_, *grad);
    return host_[W];
  }
  void viterbi(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences, std::uint32_t* labels,
               double* best_scores) override {
    b_->viterbi(corpus, w, sentences, labels, best_scores);
  }
  void viterbi_nbest(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences, std::size_t n,
                     std::uint32_t* labels, double* path_scores) override {
    b_->viterbi_nbest(corpus, w, sentences, n, labels, path_scores);
  }
  void marginals(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences, double* node_marginals,
                 double* log_z) override {
    b_->marginals(corpus, w, sentences, node_marginals, log_z);
  }

 private:
  /// evaluate with the gradient summed by the device sum, the loss through the host.
  double evaluate_on_device(const BackendCorpus& corpus, const Vector& w, SentenceSpan sentences, Vector& grad,
                            double scale, SequenceLoss loss) {
    if (!scratch_ || scratch_->size() != grad.size())
      scratch_ = b_->vector(grad.size());
    else
      b_->fill(*scratch_, 0.0);
    double f = b_->evaluate(corpus, w, sentences, scratch_.get(), scale, loss);
    device_->sum(*scratch_);
    c_.sum(&f, 1);
    b_->axpy(1.0, *scratch_, grad);
    return f;
  }

  BackendPtr b_;
  Collective& c_;
  std::unique_ptr<DeviceSum> device_;  // null: the gradient goes through the host
  VectorPtr scratch_;         // [W] the rank's gradient contribution, then the sum
  std::vector<double> host_;  // [W + 1] its host copy, the loss last
};

}  // namespace

BackendPtr distributed_backend(BackendPtr inner, Collective& collective, const DeviceSumMaker& device) {
  if (!inner) throw Error("internal: distributed_backend without a backend");
  return std::make_unique<DistributedBackend>(std::move(inner), collective, device);
}

}  // namespace crfx
