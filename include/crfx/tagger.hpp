// crfx — tagging with a trained model: load once, tag batches of sentences (best path, n-best
// paths, sequence probabilities, token marginals) on any backend, and format them as `crfx tag`
// prints them. The CLI's `tag` command is a loop over this class; so is any program that tags
// document sets.
//
//   crfx::Tagger tagger(crfx::load_model("chunk.model"));     // the best device, one best path
//   crfx::TextReader reader(tagger.features(), "test.txt");
//   crfx::TextData batch;
//   crfx::Tagged tagged;
//   std::string out;
//   while (reader.next(batch, 1 << 18)) {
//     tagger.tag(batch, tagged);
//     out.clear();
//     tagger.format(batch, tagged, out);
//     fwrite(out.data(), 1, out.size(), stdout);
//   }
//
// Entry points meant to stay stable (README, "As a library"): Tagger,
//  TagOptions, Tagged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/features.hpp"
#include "crfx/model.hpp"

namespace crfx {

/// The most label sequences per sentence that n-best tagging returns.
constexpr std::size_t kMaxNbest = 100000;

struct TagOptions {
  /// Label sequences per sentence, best first (1 ≤ nbest ≤ kMaxNbest); with nbest ≥ 2 every
  /// sequence carries its probability (as CRF++ -n prints it).
  std::size_t nbest = 1;
  /// p(ŷ | x) of each returned sequence.
  bool probability = false;
  /// Every label's marginal probability p(y_t = y | x) at every token.
  bool marginals = false;
};

/// One tagged batch, in the batch's sentence order.
struct Tagged {
  std::size_t nbest = 1;
  /// Label ids: sentence i's sequence of rank r is T_i ids from nbest · first_token(i) + r · T_i.
  std::vector<std::uint32_t> paths;
  /// Sequences found per sentence (fewer than nbest when the sentence has fewer).
  std::vector<std::size_t> found;
  /// p(sequence | x) per [sentence][rank], when probabilities were asked for (else empty).
  std::vector<double> probability;
  /// p(y_t = y | x) per [token][label], when marginals were asked for (else empty).
  std::vector<double> marginals;
};

class Tagger {
 public:
  /// Takes the model's weights onto `backend` (made for model.features.dims()). Throws
  /// crfx::Error for options out of range or a backend of other dimensions.
  Tagger(Model model, BackendPtr backend, const TagOptions& options);
  /// The same on the backend `device` asks for (by default a usable GPU, else every core of the
  /// CPU; crfx::Error where the device asked for cannot be had).
  explicit Tagger(Model model, const TagOptions& options = {}, const BackendOptions& device = {});

  const FeatureSpace& features() const { return features_; }
  const TagOptions& options() const { return options_; }
  /// The backend's name ("cpu (8 threads)", the GPU's), for messages.
  std::string device() const { return backend_->name(); }

  /// Tags every sentence of `batch` (read with features(), e.g. by TextReader) into `out`.
  void tag(const TextData& batch, Tagged& out);
  /// The same for a batch already compiled with features() (crfx::compile), taken over. Compiling
  /// is the larger part of tagging and needs nothing of the tagger's state: programs that tag on
  /// several threads compile batches in parallel and call this one at a time (a Tagger, like its
  /// Backend, serves one call at a time; format() may run on any number of threads).
  void tag(Corpus&& compiled, Tagged& out);
  /// The best label sequence of every sentence of `batch` (sentences in memory: conll_data,
  /// attribute_data in crfx/train.hpp, or read), as label strings, in the batch's order.
  std::vector<std::vector<std::string>> labels(const TextData& batch);

  /// Appends `batch` as `crfx tag` prints it: each token's input columns (CoNLL) or gold label
  /// (CRFsuite, when present), a tab and the predicted label, then `\tLABEL:p` per label with
  /// marginals; a blank line after each sentence. With probabilities a line before each sequence:
  /// `# p` / `@probability\tp` (one sequence), `# RANK p` / `@nbest\tRANK\tp` (n-best), CoNLL /
  /// CRFsuite data respectively, p with six decimals (as CRF++ -v1 / -n and CRFsuite -p print it).
  /// With `sentence_ends`, the size of `out` after each sentence is appended to it (so that a
  /// batch gathered from several inputs can be cut back into their outputs).
  void format(const TextData& batch, const Tagged& tagged, std::string& out,
              std::vector<std::size_t>* sentence_ends = nullptr) const;

 private:
  void take_weights(const std::vector<double>& weights);  // the constructors' common part

  FeatureSpace features_;
  BackendPtr backend_;
  VectorPtr weights_;
  TagOptions options_;
  bool probabilities_ = false;  // asked for, or implied by nbest ≥ 2
  std::vector<double> scores_, log_z_;
  std::vector<std::string> marginal_prefix_;  // "\tLABEL:" per label
  std::size_t marginals_room_ = 0;            // the most bytes one token's marginals take
};

}  // namespace crfx
