// Chunk evaluation with the rules of conlleval.pl (CoNLL-2000 shared task, version 2004-01-26).
//
// conlleval reads a stream of (gold, guess) tag pairs and runs one state machine over it:
//   - a label "B-NP" splits at its first hyphen into the tag "B" and the type "NP" (a label
//     without a hyphen has the empty type; the type "0" also counts as empty, a Perl truthiness
//     quirk kept here);
//   - with -r (raw) a label equal to the outside label becomes "O", and every other label other
//     than "O" becomes "B-<label>": tag B, the whole label as type, so each token is a chunk;
//     without -r the outside label is not consulted (as in conlleval);
//   - a sentence boundary (blank line, or a line whose first field is conlleval's "-X-") is an
//     uncounted token tagged O / O, so it closes open chunks; "-DOCSTART-" lines are boundaries too;
//   - chunk starts and ends between two tokens come from startOfChunk / endOfChunk below, and a
//     chunk counts as correct when gold and guess start it together with the same type and end it
//     together with the same type (conlleval's $inCorrect);
//   - whatever chunk is still open at the end of the input is closed there (directly after the
//     last token when the file does not end with a blank line, as conlleval does).
// Columns are split on runs of spaces and tabs (conlleval splits on single spaces), a trailing CR
// is dropped, and every line must have as many columns as the first one ("-DOCSTART-" lines,
// skipped like read_conll skips them, are exempt). The sentence-probability line that
// `crfx tag --probability` writes before a sentence ("# p" as CRF++ -v1, "@probability<TAB>p" as
// CRFsuite -p) is skipped too, but only there: first in a sentence, exactly two fields, the
// second a number in [0, 1] — so a token "#" whose guessed label is a word is still a token.
// The rank line of `crfx tag --nbest` ("# RANK p", "@nbest<TAB>RANK<TAB>p") in the same place is
// an error: such output holds several label sequences per sentence. The LABEL:p columns that
// `crfx tag --marginals` appends (p exactly as "%.6f" writes it, in [0, 1]) are not labels: gold
// and guess are the two columns before them.
// IOBES: conlleval knows B, I, E, O, '[', ']' and '.'; like the common ports its rules are
// extended here so that S-X is a single-token chunk and E-X followed by B-X (two adjacent chunks
// in IOBES) ends one chunk and starts the next. Those additions only involve S, or E followed by
// B, which never occur in the IOB1 / IOB2 / IOE1 / IOE2 / bracket schemes conlleval was written
// for, so on those schemes the counts are conlleval's own.
#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/eval.hpp"
#include "crfx/internal/io.hpp"
#include "eval/text.hpp"

namespace crfx {

namespace {

using eval_detail::format;

struct Tag {
  std::string tag;   // B, I, E, S, O, [, ], . (or anything else)
  std::string type;  // NP, PER, … ("" for none)
};

Tag parse_label(const std::string& label, const EvalOptions& options) {
  Tag t;
  if (options.raw) {
    // conlleval -r: the outside label becomes O, every other label L (not "O") becomes "B-L".
    if (label == options.outside || label == "O") {
      t.tag = "O";
    } else {
      t.tag = "B";
      t.type = label;
    }
  } else {
    const std::size_t hyphen = label.find('-');
    if (hyphen == std::string::npos) {
      t.tag = label;
    } else {
      t.tag = label.substr(0, hyphen);
      t.type = label.substr(hyphen + 1);
    }
  }
  if (t.type == "0") t.type.clear();  // Perl: `$type = $type ? $type : ""`
  return t;
}

bool is(const std::string& s, const char* v) { return s == v; }

/// A chunk ended between the previous token and this one (conlleval endOfChunk, plus IOBES S and
/// E→B).
bool end_of_chunk(const Tag& prev, const Tag& cur) {
  const std::string& p = prev.tag;
  const std::string& t = cur.tag;
  bool end = false;
  if (is(p, "B") && (is(t, "B") || is(t, "O"))) end = true;
  if (is(p, "I") && (is(t, "B") || is(t, "O"))) end = true;
  if (is(p, "E") && (is(t, "E") || is(t, "I") || is(t, "O"))) end = true;
  // IOBES extension.
  if (is(p, "E") && is(t, "B")) end = true;
  if (is(p, "S")) end = true;
  if ((is(p, "B") || is(p, "I") || is(p, "E")) && is(t, "S")) end = true;

  if (!is(p, "O") && !is(p, ".") && prev.type != cur.type) end = true;
  // conlleval (corrected 1998-12-22): bracket chunks have length 1.
  if (is(p, "]") || is(p, "[")) end = true;
  return end;
}

/// A chunk started between the previous token and this one (conlleval startOfChunk, plus IOBES S
/// and E→B).
bool start_of_chunk(const Tag& prev, const Tag& cur) {
  const std::string& p = prev.tag;
  const std::string& t = cur.tag;
  bool start = false;
  if (is(t, "B") && (is(p, "B") || is(p, "I") || is(p, "O"))) start = true;
  if (is(p, "O") && (is(t, "I") || is(t, "E"))) start = true;
  if (is(p, "E") && (is(t, "E") || is(t, "I"))) start = true;
  // IOBES extension.
  if (is(t, "S")) start = true;
  if (is(p, "E") && is(t, "B")) start = true;
  if (is(p, "S") && (is(t, "B") || is(t, "I") || is(t, "E"))) start = true;

  if (!is(t, "O") && !is(t, ".") && prev.type != cur.type) start = true;
  if (is(t, "[") || is(t, "]")) start = true;
  return start;
}

void split_fields(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  std::size_t i = 0;
  const std::size_t n = line.size();
  while (i < n) {
    while (i < n && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == n) break;
    const std::size_t begin = i;
    while (i < n && line[i] != ' ' && line[i] != '\t') ++i;
    out.emplace_back(line, begin, i - begin);
  }
}

std::string columns_text(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " column" : " columns");
}

/// conlleval's state machine over the token stream, updating an evaluator's counts. `Rules` says
/// how its labels (Rules::Label) relate: end(prev, cur) and start(prev, cur), a chunk ended or
/// started between them; same_type(a, b); same(a, b), tag and type; outside(), O with no type; and
/// counts(a), the ChunkCounts of a's type.
template <class Rules>
struct Stream {
  using Label = typename Rules::Label;
  Rules& rules;
  ChunkCounts& overall;
  std::size_t& tokens;
  std::size_t& correct_tokens;
  bool& in_correct;  // conlleval's $inCorrect: the open chunk is correct so far
  // The state after a boundary and at the start of the input: both sides O, no type.
  Label last_gold = rules.outside(), last_guess = rules.outside();

  /// One token (or, with `boundary`, an uncounted O / O boundary token).
  void step(const Label& c, const Label& g, bool boundary) {
    const bool end_c = rules.end(last_gold, c), end_g = rules.end(last_guess, g);
    const bool start_c = rules.start(last_gold, c), start_g = rules.start(last_guess, g);
    if (in_correct) {
      if (end_c && end_g && rules.same_type(last_guess, last_gold)) {
        in_correct = false;
        ++overall.correct;
        ++rules.counts(last_gold).correct;
      } else if (end_c != end_g || !rules.same_type(g, c)) {
        in_correct = false;
      }
    }
    if (start_c && start_g && rules.same_type(g, c)) in_correct = true;
    if (start_c) {
      ++overall.gold;
      ++rules.counts(c).gold;
    }
    if (start_g) {
      ++overall.guessed;
      ++rules.counts(g).guessed;
    }
    if (!boundary) {
      if (rules.same(c, g)) ++correct_tokens;
      ++tokens;
    }
    last_gold = c;
    last_guess = g;
  }
  void boundary() { step(rules.outside(), rules.outside(), true); }
  /// End of input: conlleval counts a chunk still open as correct (under the last gold type).
  void close() {
    if (!in_correct) return;
    ++overall.correct;
    ++rules.counts(last_gold).correct;
  }
  /// Takes back close() after a boundary (the type is then ""): the input goes on.
  void reopen() {
    if (!in_correct) return;
    --overall.correct;
    --rules.counts(rules.outside()).correct;
  }
};

/// Labels as parsed tags, counted by type name (ChunkEvaluator).
struct TagRules {
  using Label = Tag;
  std::map<std::string, ChunkCounts>& by_type;
  static bool end(const Tag& p, const Tag& c) { return end_of_chunk(p, c); }
  static bool start(const Tag& p, const Tag& c) { return start_of_chunk(p, c); }
  static bool same_type(const Tag& a, const Tag& b) { return a.type == b.type; }
  static bool same(const Tag& a, const Tag& b) { return a.tag == b.tag && a.type == b.type; }
  static Tag outside() { return Tag{"O", ""}; }
  ChunkCounts& counts(const Tag& a) { return by_type[a.type]; }
};

/// One sentence of n tokens through the stream `s`: tags(i) is token i's (gold, guess); then a
/// boundary, or not (the input's end).
template <class Rules, class Tags>
void stream_sentence(Stream<Rules> s, std::size_t n, const Tags& tags, bool boundary) {
  s.reopen();
  for (std::size_t i = 0; i < n; ++i) {
    const auto [c, g] = tags(i);
    s.step(c, g, false);
  }
  if (boundary) s.boundary();
  s.close();
}

}  // namespace

/// Labels as ids into parsed tags, their relations tabled once (up to kTabled labels) and their
/// types numbered (LabelIdScorer).
struct LabelIdScorer::Tags {
  using Label = std::uint32_t;
  static constexpr std::size_t kTabled = 1024;
  std::vector<Tag> tag;             // by id; the last: O with no type
  std::vector<std::uint32_t> type;  // by id: its type's number
  std::vector<std::uint32_t> key;   // by id: its (tag, type)'s number
  std::vector<char> ends, starts;   // [prev · n + cur] where n ≤ kTabled
  std::vector<ChunkCounts> by_type;  // by type number

  explicit Tags(std::vector<Tag> tags) : tag(std::move(tags)) {
    tag.push_back(TagRules::outside());
    const std::size_t n = tag.size();
    std::map<std::string, std::uint32_t> types;
    std::map<std::pair<std::string, std::string>, std::uint32_t> keys;
    for (const Tag& t : tag) {
      type.push_back(types.emplace(t.type, std::uint32_t(types.size())).first->second);
      key.push_back(keys.emplace(std::make_pair(t.tag, t.type), std::uint32_t(keys.size())).first->second);
    }
    if (n <= kTabled) {
      ends.resize(n * n);
      starts.resize(n * n);
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t c = 0; c < n; ++c) {
          ends[p * n + c] = end_of_chunk(tag[p], tag[c]);
          starts[p * n + c] = start_of_chunk(tag[p], tag[c]);
        }
    }
    by_type.resize(types.size());
  }
  bool end(Label p, Label c) const { return ends.empty() ? end_of_chunk(tag[p], tag[c]) : ends[p * tag.size() + c]; }
  bool start(Label p, Label c) const {
    return starts.empty() ? start_of_chunk(tag[p], tag[c]) : starts[p * tag.size() + c];
  }
  bool same_type(Label a, Label b) const { return type[a] == type[b]; }
  bool same(Label a, Label b) const { return key[a] == key[b]; }
  Label outside() const { return Label(tag.size() - 1); }
  ChunkCounts& counts(Label a) { return by_type[type[a]]; }
};

LabelIdScorer::LabelIdScorer(const std::vector<std::string>& labels, const std::vector<std::string>& gold,
                             std::vector<std::size_t> offsets, EvalMode mode)
    : offsets_(std::move(offsets)), mode_(mode) {
  if (offsets_.empty() || offsets_.front() != 0 || offsets_.back() != gold.size())
    throw Error("LabelIdScorer: the sentence offsets do not span the gold labels");
  std::vector<Tag> tags;  // by id: the labels' (a label given twice has two), then gold's others
  std::map<std::string, std::uint32_t> id;
  for (const std::string& l : labels) {
    id.emplace(l, std::uint32_t(tags.size()));
    tags.push_back(parse_label(l, EvalOptions{}));
  }
  gold_.reserve(gold.size());
  for (const std::string& l : gold) {
    const auto [it, fresh] = id.emplace(l, std::uint32_t(tags.size()));
    if (fresh) tags.push_back(parse_label(l, EvalOptions{}));
    gold_.push_back(it->second);
  }
  tags_ = std::make_unique<Tags>(std::move(tags));
}

LabelIdScorer::~LabelIdScorer() = default;
LabelIdScorer::LabelIdScorer(LabelIdScorer&&) noexcept = default;

double LabelIdScorer::headline(const std::uint32_t* guess) const {
  const std::size_t n = gold_.size();
  if (mode_ == EvalMode::item) {
    std::size_t correct = 0;
    for (std::size_t t = 0; t < n; ++t) correct += gold_[t] == guess[t];
    return n ? 100.0 * double(correct) / double(n) : 0.0;
  }
  ChunkCounts overall;
  std::size_t tokens = 0, correct_tokens = 0;
  bool in_correct = false;
  Tags& rules = *tags_;
  std::fill(rules.by_type.begin(), rules.by_type.end(), ChunkCounts{});
  for (std::size_t s = 0; s + 1 < offsets_.size(); ++s) {
    const std::uint32_t* c = gold_.data() + offsets_[s];
    const std::uint32_t* g = guess + offsets_[s];
    stream_sentence(Stream<Tags>{rules, overall, tokens, correct_tokens, in_correct}, offsets_[s + 1] - offsets_[s],
                    [&](std::size_t i) { return std::make_pair(c[i], g[i]); }, true);
  }
  return overall.f1();
}

double ChunkCounts::precision() const { return guessed ? 100.0 * double(correct) / double(guessed) : 0.0; }

double ChunkCounts::recall() const { return gold ? 100.0 * double(correct) / double(gold) : 0.0; }

double ChunkCounts::f1() const {
  const double p = precision(), r = recall();
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

ChunkEvaluator::ChunkEvaluator(EvalOptions options) : options_(std::move(options)) {}

double ChunkEvaluator::accuracy() const {
  return tokens_ ? 100.0 * double(correct_tokens_) / double(tokens_) : 0.0;
}

void ChunkEvaluator::add(const std::vector<std::string>& gold, const std::vector<std::string>& guess) {
  // Each sentence is followed by a boundary, and the input may end after it: a chunk still open
  // then is closed provisionally, and the next sentence takes that back first.
  add_sentence(gold, guess, true);
}

void ChunkEvaluator::add_last(const std::vector<std::string>& gold, const std::vector<std::string>& guess) {
  // The input ends right after a token, with no boundary: conlleval closes the open chunk
  // without the boundary step (which can differ for tags that a boundary does not end).
  add_sentence(gold, guess, false);
  in_correct_ = false;  // the input is over
}

void ChunkEvaluator::add_sentence(const std::vector<std::string>& gold, const std::vector<std::string>& guess,
                                  bool boundary) {
  if (gold.size() != guess.size()) {
    throw Error("chunk evaluation: a sentence has " + std::to_string(gold.size()) +
                " gold labels but " + std::to_string(guess.size()) + " guessed labels");
  }
  TagRules rules{by_type_};
  stream_sentence(Stream<TagRules>{rules, overall_, tokens_, correct_tokens_, in_correct_}, gold.size(),
                  [&](std::size_t i) { return std::make_pair(parse_label(gold[i], options_), parse_label(guess[i], options_)); },
                  boundary);
}

std::string ChunkEvaluator::report() const {
  const ChunkCounts& o = overall_;
  std::string out = format("processed %zu tokens with %zu phrases; found: %zu phrases; correct: %zu.\n",
                           tokens_, o.gold, o.guessed, o.correct);
  if (tokens_ > 0) {
    out += format("accuracy: %6.2f%%; precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f\n", accuracy(),
                  o.precision(), o.recall(), o.f1());
  }
  // Every type found in gold or guess, sorted bytewise. conlleval's de-duplication of the sorted
  // key list skips a repeat only after a true (non-empty) name, so the empty type, when both gold
  // and guess have it, is listed twice.
  for (const auto& [type, c] : by_type_) {
    if (c.gold == 0 && c.guessed == 0) continue;
    const int copies = (type.empty() && c.gold > 0 && c.guessed > 0) ? 2 : 1;
    for (int k = 0; k < copies; ++k) {
      out += format("%17s: precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f  %zu\n", type.c_str(),
                    c.precision(), c.recall(), c.f1(), c.guessed);
    }
  }
  return out;
}

namespace {
bool is_probability(const std::string& p) {
  if (p.empty() || p.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  char* end = nullptr;
  const double v = std::strtod(p.c_str(), &end);
  return end == p.c_str() + p.size() && v >= 0.0 && v <= 1.0;
}

/// A column `crfx tag --marginals` appends: "LABEL:p" with p written as "%.6f" in [0, 1], i.e.
/// ":0.dddddd" or ":1.000000" at its end after a non-empty label.
bool marginal_field(const std::string& f) {
  if (f.size() < 10) return false;
  const std::size_t c = f.size() - 9;  // where the ':' must be
  if (f[c] != ':' || f[c + 2] != '.' || (f[c + 1] != '0' && f[c + 1] != '1')) return false;
  for (std::size_t i = c + 3; i < f.size(); ++i)
    if (f[i] < '0' || f[i] > '9') return false;
  return f[c + 1] == '0' || f.compare(c + 1, 8, "1.000000") == 0;
}

/// The line `crfx tag --probability` writes before each sentence (see the top of this file).
bool probability_line(const std::vector<std::string>& fields) {
  return fields.size() == 2 && (fields[0] == "#" || fields[0] == "@probability") && is_probability(fields[1]);
}

/// The line `crfx tag --nbest` writes before each of a sentence's paths: "# RANK p" or
/// "@nbest<TAB>RANK<TAB>p".
bool nbest_line(const std::vector<std::string>& fields) {
  return fields.size() == 3 && (fields[0] == "#" || fields[0] == "@nbest") && !fields[1].empty() &&
         fields[1].find_first_not_of("0123456789") == std::string::npos && is_probability(fields[2]);
}
}  // namespace

namespace {
/// Tokens from which the two label columns sharing no label at all means untagged data.
constexpr std::size_t kUntaggedTokens = 20;

/// Reads a conlleval input file into `ev` (and `item` when given); see evaluate_file.
void read_labelled(const std::string& path, ChunkEvaluator& ev, ItemEvaluator* item,
                   std::set<std::string>* labels) {
  LineReader in(path);  // plain or .gz; CR stripped
  std::vector<std::string> gold, guess, fields;
  std::set<std::string> gold_set, guess_set;
  std::size_t matches = 0;
  auto flush = [&] {
    if (gold.empty()) return;
    ev.add(gold, guess);
    if (item) item->add(gold, guess);
    gold.clear();
    guess.clear();
  };
  std::string line;
  std::size_t line_no = 0, columns = 0, columns_line = 0;
  while (in.next(line)) {
    line_no = in.line_number();
    split_fields(line, fields);
    if (fields.empty()) {  // blank: sentence boundary
      flush();
      continue;
    }
    if (fields[0].compare(0, 10, "-DOCSTART-") == 0) {  // CoNLL-2003 document marker
      flush();
      continue;
    }
    if (gold.empty() && probability_line(fields)) continue;  // tag --probability's line
    if (gold.empty() && nbest_line(fields))
      throw InputError(path, line_no,
                       "n-best output (crfx tag --nbest) holds several label sequences per "
                       "sentence; score the output of a run without --nbest");
    const std::size_t n = fields.size();
    if (columns == 0) {
      columns = n;
      columns_line = line_no;
    } else if (n != columns) {
      throw InputError(path, line_no,
                       "expected " + columns_text(columns) + " (as on line " +
                           std::to_string(columns_line) + "), got " + std::to_string(n));
    }
    if (fields[0] == "-X-") {  // conlleval's own boundary marker
      flush();
      continue;
    }
    // `crfx tag --marginals` appends LABEL:p columns after the guess; they are not labels.
    std::size_t m = n;
    while (m > 0 && marginal_field(fields[m - 1])) --m;
    if (m < 2) {
      throw InputError(path, line_no,
                       "a token needs at least 2 columns (gold and guessed label), got " +
                           std::to_string(m) + (m < n ? " before its LABEL:p columns" : ""));
    }
    gold.push_back(fields[m - 2]);
    guess.push_back(fields[m - 1]);
    matches += gold.back() == guess.back();
    gold_set.insert(gold.back());
    guess_set.insert(guess.back());
  }
  if (labels) {
    labels->insert(gold_set.begin(), gold_set.end());
    labels->insert(guess_set.begin(), guess_set.end());
  }
  if (!gold.empty()) {
    ev.add_last(gold, guess);
    if (item) item->add(gold, guess);
  }
  // conlleval reports 0 tokens and succeeds; an empty file here is almost always a pipeline
  // that failed upstream, so say so rather than print a score of nothing.
  if (ev.tokens() == 0)
    throw InputError(path, 0, "no tokens to evaluate (the file is empty or has only boundaries)");
  // Untagged data (e.g. CoNLL-2000's word, POS, chunk) read as gold and guess: the last two
  // columns then share no label at all. A tagger's output of some size never looks like that.
  if (matches == 0 && ev.tokens() >= kUntaggedTokens) {
    bool shared = false;
    for (const auto& l : guess_set) shared = shared || gold_set.count(l);
    if (!shared)
      throw InputError(path, 0,
                       "the last two columns share no label in " + std::to_string(ev.tokens()) +
                           " tokens (e.g. gold '" + *gold_set.begin() + "', guessed '" + *guess_set.begin() +
                           "'): is the file tagged? crfx eval scores the gold label (next to last column) "
                           "against the predicted one (last), which crfx tag appends");
  }
}
}  // namespace

ChunkEvaluator evaluate_file(const std::string& path, EvalOptions options) {
  ChunkEvaluator ev(std::move(options));
  read_labelled(path, ev, nullptr, nullptr);
  return ev;
}

Evaluation evaluate_labels_file(const std::string& path, EvalOptions options) {
  Evaluation e{ChunkEvaluator(options), ItemEvaluator(), {}, EvalMode::chunk};
  read_labelled(path, e.chunk, &e.item, &e.labels);
  e.mode = resolve_mode(options, e.labels);
  return e;
}

}  // namespace crfx
