// Item evaluation for any tag set (POS, morphology, classification-style labels): token and
// sentence accuracy, per-label precision / recall / F1 with macro and micro averages (as
// CRFsuite's `tag -qt` reports them), the confusion matrix; and the choice between this report
// and conlleval's chunk report from the labels (Evaluation).
//
// Conventions: a label's precision is 0 when it is never guessed and its recall 0 when it is
// never in gold (sklearn's zero_division=0); the macro average is the plain mean over every
// label seen in gold or guess; with one label per token the micro average of precision, recall
// and F1 is the token accuracy.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/eval.hpp"
#include "eval/text.hpp"

namespace crfx {

using eval_detail::format;

namespace {
/// The outside label, or B, I, E, S alone or followed by "-TYPE".
bool chunk_tag(const std::string& label, const std::string& outside) {
  if (label == outside || label == "O") return true;
  if (label.empty() || (label[0] != 'B' && label[0] != 'I' && label[0] != 'E' && label[0] != 'S')) return false;
  return label.size() == 1 || (label[1] == '-' && label.size() > 2);
}

double percent(std::size_t part, std::size_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }
}  // namespace

std::string first_non_chunk_label(const std::set<std::string>& labels, const std::string& outside) {
  for (const std::string& l : labels)
    if (!chunk_tag(l, outside)) return l;
  return std::string();
}

bool chunk_tag_set(const std::set<std::string>& labels, const std::string& outside) {
  return first_non_chunk_label(labels, outside).empty();  // labels are never empty strings
}

EvalMode resolve_mode(const EvalOptions& options, const std::set<std::string>& labels) {
  if (options.mode != EvalMode::automatic) return options.mode;
  if (options.raw) return EvalMode::chunk;  // conlleval -r asks for its report
  return chunk_tag_set(labels, options.outside) ? EvalMode::chunk : EvalMode::item;
}

void ItemEvaluator::add(const std::vector<std::string>& gold, const std::vector<std::string>& guess) {
  if (gold.size() != guess.size()) {
    throw Error("item evaluation: a sentence has " + std::to_string(gold.size()) + " gold labels but " +
                std::to_string(guess.size()) + " guessed labels");
  }
  bool all = true;
  for (std::size_t i = 0; i < gold.size(); ++i) {
    ++by_label_[gold[i]].gold;
    ++by_label_[guess[i]].guessed;
    if (gold[i] == guess[i]) {
      ++by_label_[gold[i]].correct;
      ++correct_tokens_;
    } else {
      ++confusions_[{gold[i], guess[i]}];
      all = false;
    }
  }
  tokens_ += gold.size();
  ++sentences_;
  correct_sentences_ += all;
}

double ItemEvaluator::accuracy() const { return percent(correct_tokens_, tokens_); }
double ItemEvaluator::sentence_accuracy() const { return percent(correct_sentences_, sentences_); }

double ItemEvaluator::macro(double (LabelCounts::*figure)() const) const {
  double s = 0;
  for (const auto& [label, c] : by_label_) s += (c.*figure)();
  return by_label_.empty() ? 0.0 : s / double(by_label_.size());
}
double ItemEvaluator::macro_precision() const { return macro(&LabelCounts::precision); }
double ItemEvaluator::macro_recall() const { return macro(&LabelCounts::recall); }
double ItemEvaluator::macro_f1() const { return macro(&LabelCounts::f1); }

std::string ItemEvaluator::report() const {
  std::string out = format("processed %zu tokens in %zu sentences; %zu labels.\n", tokens_, sentences_,
                           by_label_.size());
  out += format("accuracy: %6.2f%% (%zu of %zu tokens); sentence accuracy: %6.2f%% (%zu of %zu)\n", accuracy(),
                correct_tokens_, tokens_, sentence_accuracy(), correct_sentences_, sentences_);
  int width = 13;  // "macro average"
  for (const auto& [label, c] : by_label_) width = std::max(width, int(label.size()));
  out += format("%-*s %9s %9s %9s %9s %9s %9s\n", width, "label", "gold", "guessed", "correct", "precision",
                "recall", "F1");
  for (const auto& [label, c] : by_label_)
    out += format("%-*s %9zu %9zu %9zu %9.2f %9.2f %9.2f\n", width, label.c_str(), c.gold, c.guessed, c.correct,
                  c.precision(), c.recall(), c.f1());
  out += format("%-*s %9s %9s %9s %9.2f %9.2f %9.2f\n", width, "macro average", "", "", "", macro_precision(),
                macro_recall(), macro_f1());
  out += format("%-*s %9zu %9zu %9zu %9.2f %9.2f %9.2f\n", width, "micro average", tokens_, tokens_,
                correct_tokens_, accuracy(), accuracy(), accuracy());
  return out;
}

std::string ItemEvaluator::confusion_report(std::size_t max_labels) const {
  if (confusions_.empty()) return "confusion: no errors.\n";
  std::map<std::string, std::size_t> errors;
  for (const auto& [pair, n] : confusions_) {
    errors[pair.first] += n;
    errors[pair.second] += n;
  }
  std::vector<std::pair<std::string, std::size_t>> order(errors.begin(), errors.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (order.size() > max_labels) order.resize(max_labels);
  std::vector<std::string> labels;
  for (const auto& o : order) labels.push_back(o.first);
  std::sort(labels.begin(), labels.end());

  auto count = [&](const std::string& gold, const std::string& guess) -> std::size_t {
    if (gold == guess) {
      const auto it = by_label_.find(gold);
      return it == by_label_.end() ? 0 : it->second.correct;
    }
    const auto it = confusions_.find({gold, guess});
    return it == confusions_.end() ? 0 : it->second;
  };
  int row_width = 4;  // "gold"
  int col_width = 1;
  for (const std::string& g : labels) {
    row_width = std::max(row_width, int(g.size()));
    col_width = std::max(col_width, int(g.size()));
    for (const std::string& p : labels) col_width = std::max(col_width, int(std::to_string(count(g, p)).size()));
  }
  std::string out = format("confusion of the %zu labels with the most errors (rows: gold, columns: guessed; "
                           "%zu of %zu tokens wrong):\n",
                           labels.size(), tokens_ - correct_tokens_, tokens_);
  out += format("%-*s", row_width, "gold");
  for (const std::string& p : labels) out += format(" %*s", col_width, p.c_str());
  out += "\n";
  for (const std::string& g : labels) {
    out += format("%-*s", row_width, g.c_str());
    for (const std::string& p : labels) out += format(" %*zu", col_width, count(g, p));
    out += "\n";
  }
  return out;
}

namespace {
void add_counts(LabelCounts& to, const LabelCounts& from) {
  to.correct += from.correct;
  to.gold += from.gold;
  to.guessed += from.guessed;
}
}  // namespace

void ItemEvaluator::merge(const ItemEvaluator& other) {
  tokens_ += other.tokens_;
  correct_tokens_ += other.correct_tokens_;
  sentences_ += other.sentences_;
  correct_sentences_ += other.correct_sentences_;
  for (const auto& [label, c] : other.by_label_) add_counts(by_label_[label], c);
  for (const auto& [pair, n] : other.confusions_) confusions_[pair] += n;
}

void ChunkEvaluator::merge(const ChunkEvaluator& other) {
  tokens_ += other.tokens_;
  correct_tokens_ += other.correct_tokens_;
  add_counts(overall_, other.overall_);
  for (const auto& [type, c] : other.by_type_) add_counts(by_type_[type], c);
}

void Evaluation::merge(const Evaluation& other, const EvalOptions& options) {
  chunk.merge(other.chunk);
  item.merge(other.item);
  labels.insert(other.labels.begin(), other.labels.end());
  mode = resolve_mode(options, labels);
}

std::string Evaluation::report(bool confusion) const {
  std::string out = mode == EvalMode::item ? item.report() : chunk.report();
  if (confusion) out += item.confusion_report();
  return out;
}

double Evaluation::headline() const { return mode == EvalMode::item ? item.accuracy() : chunk.overall().f1(); }

const char* Evaluation::headline_name() const { return mode == EvalMode::item ? "accuracy" : "F1"; }

Evaluation evaluate(const std::vector<std::vector<std::string>>& gold,
                    const std::vector<std::vector<std::string>>& guess, EvalOptions options) {
  if (gold.size() != guess.size())
    throw Error("evaluation: " + std::to_string(gold.size()) + " gold sentences but " +
                std::to_string(guess.size()) + " guessed");
  Evaluation e{ChunkEvaluator(options), ItemEvaluator(), {}, EvalMode::chunk};
  for (std::size_t s = 0; s < gold.size(); ++s) {
    e.chunk.add(gold[s], guess[s]);
    e.item.add(gold[s], guess[s]);
    e.labels.insert(gold[s].begin(), gold[s].end());
    e.labels.insert(guess[s].begin(), guess[s].end());
  }
  e.mode = resolve_mode(options, e.labels);
  return e;
}

}  // namespace crfx
