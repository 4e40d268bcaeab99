// crfx — the library's tagger (include/crfx/tagger.hpp): Viterbi or list Viterbi for the paths,
// the forward pass for log Z (p(ŷ | x) = exp(score(ŷ) − log Z)), forward-backward for marginals,
// all through the Backend; and the text `crfx tag` prints.
#include "crfx/tagger.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "crfx/errors.hpp"
#include "crfx/internal/format.hpp"

namespace crfx {

Tagger::Tagger(Model model, BackendPtr backend, const TagOptions& options)
    : features_(std::move(model.features)), backend_(std::move(backend)), options_(options) {
  take_weights(model.weights);
}

void Tagger::take_weights(const std::vector<double>& weights) {
  if (!backend_) throw Error("internal: tagger without a backend");
  if (options_.nbest == 0 || options_.nbest > kMaxNbest)
    throw Error("n-best: the number of sequences must be between 1 and " + std::to_string(kMaxNbest) +
                ", got " + std::to_string(options_.nbest));
  const Dims dims = features_.dims();
  if (weights.size() != dims.num_weights())
    throw Error("internal: the model has " + std::to_string(weights.size()) + " weights, its features " +
                std::to_string(dims.num_weights()));
  weights_ = to_backend(*backend_, weights);
  probabilities_ = options_.probability || options_.nbest > 1;
  if (options_.marginals) {
    std::size_t room = 0;
    for (std::size_t y = 0; y < dims.L; ++y) {
      marginal_prefix_.push_back("\t" + features_.labels.at(std::uint32_t(y)) + ":");
      room += marginal_prefix_.back().size() + kFixed6MaxChars;
    }
    marginals_room_ = room;
  }
}

/// The most bytes of n-best label sequences one batch may hold.
constexpr std::size_t kMaxPathsBytes = std::size_t(1) << 30;

void Tagger::tag(const TextData& batch, Tagged& out) { tag(compile(features_, batch), out); }

std::vector<std::vector<std::string>> Tagger::labels(const TextData& batch) {
  Tagged tagged;
  tag(batch, tagged);
  std::vector<std::vector<std::string>> out;
  std::size_t first = 0;  // the sentence's first token among the compiled ones (empty ones are not)
  auto add = [&](std::size_t T) {
    out.emplace_back();
    for (std::size_t t = 0; t < T; ++t) out.back().push_back(features_.labels.at(tagged.paths[tagged.nbest * first + t]));
    first += T;
  };
  if (batch.format == InputFormat::conll)
    for (const ConllSentence& s : batch.conll) add(s.size());
  else
    for (const CrfsuiteSentence& s : batch.crfsuite) add(s.size());
  for (std::size_t i = 0; i < batch.crfsuite_lines.size(); ++i) add(batch.crfsuite_lines.tokens(i));
  return out;
}

void Tagger::tag(Corpus&& compiled, Tagged& out) {
  const std::size_t n = options_.nbest, L = features_.dims().L;
  BackendCorpusPtr up = backend_->upload(std::move(compiled));
  const SentenceSpan all = all_sentences(*up);
  const std::size_t S = up->num_sentences(), N = up->num_tokens();
  out.nbest = n;
  // n copies of the batch's labels: a sentence so long that they would not fit in kMaxPathsBytes
  // is refused before anything of that size is allocated.
  if (n > 1 && double(N) * double(n) * sizeof(std::uint32_t) > double(kMaxPathsBytes))
    throw Error("n-best output: " + std::to_string(n) + " label sequences of " + std::to_string(N) +
                " tokens (one batch of whole sentences) need " +
                std::to_string(int(double(N) * double(n) * 4.0 / double(1 << 30) + 0.5)) +
                " GiB at once (limit 1 GiB); ask for fewer paths");
  out.paths.resize(N * n);
  scores_.resize(probabilities_ ? S * n : 0);  // probabilities_ holds whenever n ≥ 2
  if (n > 1)
    backend_->viterbi_nbest(*up, *weights_, all, n, out.paths.data(), scores_.data());
  else
    backend_->viterbi(*up, *weights_, all, out.paths.data(), probabilities_ ? scores_.data() : nullptr);
  out.found.assign(S, n);
  if (n > 1)  // paths beyond a sentence's L^T have score −∞
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t r = 0; r < n; ++r)
        if (scores_[i * n + r] == -std::numeric_limits<double>::infinity()) {
          out.found[i] = r;
          break;
        }
  // log Z alone is the forward pass; node marginals add the backward pass.
  out.marginals.resize(options_.marginals ? N * L : 0);
  log_z_.resize(probabilities_ ? S : 0);
  if (options_.marginals || probabilities_)
    backend_->marginals(*up, *weights_, all, options_.marginals ? out.marginals.data() : nullptr,
                        probabilities_ ? log_z_.data() : nullptr);
  out.probability.resize(probabilities_ ? S * n : 0);
  // p(ŷ | x) = exp(score(ŷ) − log Z) is at most 1 up to rounding: clamped, so that it is one.
  for (std::size_t i = 0; i < out.probability.size(); ++i)
    out.probability[i] = std::min(1.0, std::exp(scores_[i] - log_z_[i / n]));
}

void Tagger::format(const TextData& batch, const Tagged& tagged, std::string& out,
                    std::vector<std::size_t>* sentence_ends) const {
  const std::size_t n = tagged.nbest, L = features_.dims().L;
  const bool conll = features_.format == InputFormat::conll;
  const bool probabilities = !tagged.probability.empty();
  const std::size_t S = batch.num_sentences();
  if (tagged.found.size() != S || (options_.marginals && tagged.marginals.empty()))
    throw Error("internal: the tagged batch does not match its text");
  std::vector<char> token_buf(marginals_room_);  // one token's marginals, formatted
  if (sentence_ends) sentence_ends->clear();
  std::size_t k0 = 0;  // the sentence's first token in the batch
  const CrfsuiteLines& lines = batch.crfsuite_lines;  // CRFsuite text as read for tagging
  const bool as_lines = !conll && lines.size() > 0;
  for (std::size_t i = 0; i < S; ++i) {
    const std::size_t T = conll ? batch.conll[i].size() : as_lines ? lines.tokens(i) : batch.crfsuite[i].size();
    for (std::size_t rank = 0; rank < tagged.found[i]; ++rank) {
      if (probabilities) {
        if (n > 1)
          out += (conll ? "# " : "@nbest\t") + std::to_string(rank) + (conll ? " " : "\t");
        else
          out += conll ? "# " : "@probability\t";
        append_fixed6(out, tagged.probability[i * n + rank]);
        out += '\n';
      }
      const std::uint32_t* y = tagged.paths.data() + n * k0 + rank * T;
      for (std::size_t t = 0; t < T; ++t) {
        if (conll) {
          const auto& columns = batch.conll[i][t].columns;
          for (std::size_t c = 0; c < columns.size(); ++c) {
            if (c) out += '\t';
            out += columns[c];
          }
          out += '\t';
        } else {
          const std::string_view label = as_lines ? CrfsuiteLines::label(lines.line(lines.first_token(i) + t))
                                                  : std::string_view(batch.crfsuite[i][t].label);
          if (!label.empty()) {
            out += label;
            out += '\t';
          }
        }
        out += features_.labels.at(y[t]);
        if (options_.marginals) {
          char* p = token_buf.data();  // one append per token, not 2·L
          const double* m = tagged.marginals.data() + (k0 + t) * L;
          for (std::size_t l = 0; l < L; ++l) {
            std::memcpy(p, marginal_prefix_[l].data(), marginal_prefix_[l].size());
            p = write_fixed6(p + marginal_prefix_[l].size(), m[l]);
          }
          out.append(token_buf.data(), std::size_t(p - token_buf.data()));
        }
        out += '\n';
      }
      out += '\n';
    }
    k0 += T;
    if (sentence_ends) sentence_ends->push_back(out.size());
  }
}

}  // namespace crfx
