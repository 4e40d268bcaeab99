// crfx — the sequential exp-loss in log space (declared and explained in optim/exp_loss.hpp).
#include "optim/exp_loss.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "crfx/error.hpp"

namespace crfx {

LogExpLoss log_seq_exp(Backend& b, const BackendCorpus& corpus, const Vector& w, Vector* r, double& passes,
                       bool per_sentence) {
  const std::size_t n = corpus.num_sentences();
  LogExpLoss out;
  if (!per_sentence) {
    if (r) b.fill(*r, 0.0);
    const double h = b.evaluate(corpus, w, all_sentences(corpus), r, 1.0, SequenceLoss::seq_exp);
    passes += 1;
    if (std::isfinite(h) && h > 0 && (!r || std::isfinite(b.norm_inf(*r)))) {
      if (r) b.scale(1.0 / h, *r);
      out.log_h = std::log(h);
      return out;
    }
    out.overflowed = true;
  }
  // In log space: −log p_i per sentence (forward passes), log H, then r = Σ_i D(i)·∇NLL_i.
  std::vector<double> nll(n);
  double top = -std::numeric_limits<double>::infinity();
  for (std::uint32_t i = 0; i < n; ++i) {
    nll[i] = b.evaluate(corpus, w, SentenceSpan{&i, 1}, nullptr, 1.0, SequenceLoss::seq_log);
    if (!std::isfinite(nll[i]))
      throw Error("seq-exp: −log p of sentence " + std::to_string(i + 1) + " is not finite");
    top = std::max(top, nll[i]);
  }
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += std::exp(nll[i] - top);
  out.log_h = n ? top + std::log(sum) : 0.0;
  passes += 1;
  if (!r) return out;
  b.fill(*r, 0.0);
  std::size_t evaluated = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const double d = std::exp(nll[i] - out.log_h);
    if (d == 0) continue;  // below the smallest double: nothing to add
    b.evaluate(corpus, w, SentenceSpan{&i, 1}, r, d, SequenceLoss::seq_log);
    ++evaluated;
  }
  passes += double(evaluated) / double(std::max<std::size_t>(n, 1));
  return out;
}

}  // namespace crfx
