// read_crfsuite: CRFsuite attribute files (`LABEL<TAB>attr[:value]<TAB>…`, blank line between
// sequences).
//
// Follows CRFsuite 0.12 (frontend/iwa.c) where it is well defined:
//   - fields are separated by TAB only (spaces belong to the field);
//   - empty fields (two TABs in a row, a trailing TAB) are skipped, as iwa.c skips runs of TABs;
//   - in attribute names `\:` stands for ':' and `\\` for '\'; a backslash before any other
//     character (or at the end of the field) is an ordinary character, as in iwa.c. This matters:
//     WSJ-derived data (CoNLL-2000) is full of `\/` and `\*` ("w[0]=1\/2"), which must load.
// and is stricter where CRFsuite silently guesses:
//   - the value follows the LAST unescaped ':' (so `a:b:2` is attribute "a:b" with value 2;
//     CRFsuite splits at the first ':' and atof()s the rest), and must be a finite number written
//     in full ("2.5", "-1e3"); "nan", "inf", "", "2x" are errors;
//   - an empty attribute name is an error.
// The label (first field) is taken verbatim: no escapes, no value. A line holding only spaces and
// tabs counts as blank.
//
// An attribute whose value text is empty ("w=Note:"), or not a number while the name holds another
// ':' ("w=a:b:c", "t=1\:30:pm"), is most likely a colon meant inside the name: the error says to
// write `\:` and shows the field so escaped. (One ':' and a value that is not a number, "w=He:abc",
// may be a value meant: no hint.)
//
// CoNLL columns read as CRFsuite lines (issue 42). A space before the first tab is refused at once
// (below, in next()). Tab-separated columns parse as CRFsuite lines — the word becomes the label,
// POS and chunk tag two attributes — so the reader keeps evidence over the first kShapeLines
// (100) non-blank lines and conll_shape() judges it. They look like CoNLL columns when ALL of:
//   1. at least 2 lines, each with the same number (≥ 2) of tab-separated fields — CRFsuite lines
//      usually vary (fewer context attributes at a sentence's ends);
//   2. at most 1 in 20 of the fields after the first is written name=value or name:number —
//      CRFsuite's convention (w[0]=He, pos[0]=PRP) puts '=' in nearly every attribute;
//   3. the LAST field looks like a tag on every line: 1 to 12 bytes, no lower-case ASCII letter,
//      no '=' (B-NP, I-PER, O, NN, PRP$, ",");
//   4. the FIRST field looks like a word, not a label: it holds a lower-case ASCII letter on at
//      least a quarter of the lines, or it takes at least twice as many distinct values as the
//      last field (and at least 5).
// Real CRFsuite files fail 1 and 2 (tests/data/conll2000.train60.crfsuite.txt, CoNLL-2000's
// crfsuite/*.txt.gz: 5 to 20 fields a line, '=' in every attribute), and a CRFsuite file of plain
// attributes with a fixed count still has its label first, failing 4. The reader refuses nothing
// on this verdict (a CRFsuite model may meet any text at tag time): compile_training refuses such
// data, compile refuses it when most of its attributes are unknown to the model
// (host/features/compile.cpp); an attribute error in such a file names the likely cause instead.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"

namespace crfx {

namespace {

constexpr const char* kBeyondRange = " is beyond ±1e10, the range crfx accepts (scale the values down)";

/// " (… write \: …)": the hint for a value that is most likely part of the name (the header), with
/// the field's unescaped ':'s escaped.
std::string colon_hint(const char* raw, std::size_t n) {
  std::string escaped;
  for (std::size_t i = 0; i < n; ++i) {
    if (raw[i] == '\\' && i + 1 < n && (raw[i + 1] == ':' || raw[i + 1] == '\\')) {
      escaped.push_back(raw[i]);
      escaped.push_back(raw[++i]);
    } else {
      if (raw[i] == ':') escaped.push_back('\\');
      escaped.push_back(raw[i]);
    }
  }
  return " (write \\: for a colon inside an attribute name, as in '" + escaped +
         "'; the value, when there is one, follows the last unescaped ':')";
}

/// Condition 3 of the CoNLL-shape rule (the header): 1 to 12 bytes, no lower-case ASCII letter, no '='.
bool looks_like_tag(const std::string& f) {
  if (f.empty() || f.size() > 12) return false;
  for (const char c : f)
    if ((c >= 'a' && c <= 'z') || c == '=') return false;
  return true;
}

/// Condition 2's "written name=value or name:number".
bool named_attribute(const std::string& f) {
  if (f.find('=') != std::string::npos) return true;
  const std::size_t colon = f.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == f.size()) return false;
  const char* text = f.c_str() + colon + 1;
  if (std::isspace(static_cast<unsigned char>(*text))) return false;
  char* end = nullptr;
  std::strtod(text, &end);
  return end == f.c_str() + f.size();
}

/// At most `n` bytes of `s`, not cutting a UTF-8 sequence ("…" added when cut).
std::string utf8_prefix(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "…";
}

void add_distinct(std::vector<std::string>& values, const std::string& v) {
  if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
}

/// Decodes one attribute field `raw` (non-empty) into `attr`; throws with `path`:`line`.
void parse_attribute(const char* raw, std::size_t n, const std::string& path, std::size_t line,
                     CrfsuiteAttribute& attr) {
  std::string& name = attr.name;
  name.clear();
  std::size_t colon_raw = std::string::npos;   // raw offset of the last unescaped ':'
  std::size_t colon_name = std::string::npos;  // where that ':' sits in the decoded name
  for (std::size_t i = 0; i < n; ++i) {
    const char c = raw[i];
    if (c == '\\' && i + 1 < n && (raw[i + 1] == ':' || raw[i + 1] == '\\')) {
      name.push_back(raw[++i]);  // \: or \\ (any other backslash is an ordinary character)
    } else {
      if (c == ':') {
        colon_raw = i;
        colon_name = name.size();
      }
      name.push_back(c);
    }
  }
  if (colon_raw != std::string::npos) name.resize(colon_name);  // the value is not in the name
  if (name.empty())
    throw InputError(path, line, "empty attribute name in '" + std::string(raw, n) + "'");
  attr.value = 1.0;
  if (colon_raw != std::string::npos) {
    const std::string text(raw + colon_raw + 1, n - colon_raw - 1);
    // strtod would skip leading white space; the whole text must be the number.
    bool ok = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0]));
    double v = 0.0;
    bool parsed = false;  // the whole text is a number, finite or not
    if (ok) {
      char* end = nullptr;
      v = std::strtod(text.c_str(), &end);
      parsed = end == text.c_str() + text.size();
      ok = parsed && std::isfinite(v);
    }
    if (!ok)
      throw InputError(path, line, "attribute '" + std::string(raw, n) + "': value '" + text +
                                       "' is not a finite number" +
                                       // nothing after the last ':', or a ':' in the name and after it
                                       // no number at all (inf, nan are numbers: values meant)
                                       (text.empty() || (name.find(':') != std::string::npos && !parsed)
                                            ? colon_hint(raw, n)
                                            : std::string()));
    if (std::fabs(v) > kMaxAttributeValue)
      throw InputError(path, line, "attribute '" + std::string(raw, n) + "': value " + text + kBeyondRange);
    attr.value = v;
  }
}

}  // namespace

CrfsuiteReader::CrfsuiteReader(const std::string& path) : reader_(path) {}

void decode_attribute(std::string_view field, const std::string& path, std::size_t line,
                      CrfsuiteAttribute& scratch, std::string_view& name, double& value) {
  if (crfsuite_plain_field(field)) {  // no escape, no value: the name as it is
    name = field;
    value = 1.0;
    return;
  }
  parse_attribute(field.data(), field.size(), path, line, scratch);
  name = scratch.name;
  value = scratch.value;
}

std::size_t crfsuite_label_end(std::string_view line, const std::string& path, std::size_t number) {
  const std::size_t label_end = std::min(line.find('\t'), line.size());
  // A space in the label field is CoNLL columns read as CRFsuite lines (no tab: the whole line
  // would become one label): refused, rather than trained or tagged into nonsense.
  if (line.substr(0, label_end).find(' ') != std::string_view::npos)
    throw InputError(path, number,
                     "'" + std::string(line.substr(0, std::min<std::size_t>(label_end, 60))) +
                         (label_end > 60 ? "…" : "") +
                         "' has spaces before its first tab: CRFsuite lines are LABEL<TAB>attr<TAB>…; "
                         "for CoNLL columns train with --format conll and a --template (a model "
                         "keeps its training format)");
  return label_end;
}

std::string shape_problem(const ConllShape& shape, const std::string& problem) {
  return shape.why + "; CoNLL columns are trained with --format conll and a --template, and "
                     "tagged with a model so trained (a model keeps its training format). "
                     "Read as CRFsuite, this line fails: " +
         problem;
}

std::size_t check_crfsuite_line(std::string_view line, const std::string& path, std::size_t number,
                                CrfsuiteShape& shape, CrfsuiteAttribute& attr, CrfsuiteToken* token) {
  shape.observe(line, number);
  std::size_t tab = line.find('\t');
  const std::size_t label_end = crfsuite_label_end(line, path, number);
  if (token) {
    token->line = number;
    token->label.assign(line.substr(0, label_end));
  }
  while (tab != std::string_view::npos) {
    const std::size_t b = tab + 1;
    tab = line.find('\t', b);
    const std::size_t e = tab == std::string_view::npos ? line.size() : tab;
    if (e == b) continue;  // empty field: skipped, as CRFsuite does
    if (!token && crfsuite_plain_field(line.substr(b, e - b))) continue;  // nothing to refuse
    CrfsuiteAttribute& a = token ? token->attributes.emplace_back() : attr;
    try {
      parse_attribute(line.data() + b, e - b, path, number, a);
    } catch (const InputError& error) {
      const ConllShape verdict = shape.verdict(path);
      if (!verdict.found()) throw;
      throw InputError(path, number, shape_problem(verdict, error.problem()));
    }
  }
  return label_end;
}

std::size_t CrfsuiteReader::check_line(CrfsuiteAttribute& attr, CrfsuiteToken* token) {
  return check_crfsuite_line(line_, reader_.path(), reader_.line_number(), shape_, attr, token);
}

bool CrfsuiteReader::next(CrfsuiteSentence& out) {
  out.clear();
  while (reader_.next(line_)) {
    if (crfsuite_blank(line_)) {
      if (!out.empty()) return true;
      continue;
    }
    CrfsuiteToken token;
    check_line(scratch_, &token);
    out.push_back(std::move(token));
  }
  return !out.empty();
}

bool CrfsuiteReader::next(CrfsuiteLines& out) {
  // A sequence with a bad line leaves `out` as it was (the sequences before it stay whole).
  const std::size_t text = out.text.size(), tokens = out.token_ends.size();
  try {
    while (reader_.next(line_)) {
      if (crfsuite_blank(line_)) {
        if (out.token_ends.size() > tokens) break;
        continue;
      }
      check_line(scratch_, nullptr);
      if (out.token_ends.size() == tokens) out.sentence_lines.push_back(reader_.line_number());
      out.text += line_;
      out.token_ends.push_back(out.text.size());
    }
  } catch (...) {
    out.text.resize(text);
    out.token_ends.resize(tokens);
    out.sentence_lines.resize(out.sentence_ends.size());
    throw;
  }
  if (out.token_ends.size() == tokens) return false;
  out.sentence_ends.push_back(out.token_ends.size());
  return true;
}

void CrfsuiteShape::observe(std::string_view line, std::size_t number) {
  if (full()) return;
  if (lines_ == 0) first_line_ = number;
  last_line_ = number;
  std::size_t fields = 0;
  std::string first, last;
  for (std::size_t b = 0;;) {  // the fields as the reader takes them: the label, then non-empty ones
    const std::size_t tab = line.find('\t', b);
    const std::size_t e = tab == std::string_view::npos ? line.size() : tab;
    if (fields == 0 || e > b) {
      std::string f(line.substr(b, e - b));
      if (fields == 0) {
        first = f;
      } else {
        ++attributes_;
        named_ += named_attribute(f);
      }
      last = std::move(f);
      ++fields;
    }
    if (tab == std::string_view::npos) break;
    b = tab + 1;
  }
  if (lines_ == 0) fields_ = fields;
  same_fields_ = same_fields_ && fields == fields_;
  first_words_ += std::any_of(first.begin(), first.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  last_not_tags_ += !looks_like_tag(last);
  add_distinct(first_values_, first);
  add_distinct(last_values_, last);
  ++lines_;
}

ConllShape CrfsuiteShape::verdict(const std::string& path) const {
  // The rule, with its numbers, is in the header.
  ConllShape shape;
  shape.path = path;
  shape.line = first_line_;
  const std::size_t D_first = first_values_.size(), D_last = last_values_.size();
  const bool word_first = 4 * first_words_ >= lines_ || (D_first >= 2 * D_last && D_first >= 5);
  if (lines_ < 2 || !same_fields_ || fields_ < 2 || 20 * named_ > attributes_ || last_not_tags_ > 0 || !word_first)
    return shape;
  std::string tags;
  for (std::size_t i = 0; i < last_values_.size() && i < 3; ++i) tags += (i ? ", " : "") + last_values_[i];
  if (last_values_.size() > 3) tags += ", …";
  shape.why = "lines " + std::to_string(first_line_) + "–" + std::to_string(last_line_) +
              " look like CoNLL columns, not CRFsuite attribute lines: each has " + std::to_string(fields_) +
              " tab-separated fields, the attributes are not written name=value or name:value, and the "
              "last field looks like a tag (" + tags + ") where a CRFsuite line has its label first ('" +
              utf8_prefix(first_values_.front(), 40) + "' would be a label)";
  return shape;
}

void CrfsuiteLines::erase(std::size_t first, std::size_t end) {
  if (first >= end) return;
  const std::size_t t0 = first_token(first), t1 = sentence_ends[end - 1];  // their tokens
  const std::size_t c0 = t0 == 0 ? 0 : token_ends[t0 - 1], c1 = token_ends[t1 - 1];  // and bytes
  text.erase(c0, c1 - c0);
  token_ends.erase(token_ends.begin() + std::ptrdiff_t(t0), token_ends.begin() + std::ptrdiff_t(t1));
  for (std::size_t k = t0; k < token_ends.size(); ++k) token_ends[k] -= c1 - c0;
  sentence_ends.erase(sentence_ends.begin() + std::ptrdiff_t(first), sentence_ends.begin() + std::ptrdiff_t(end));
  for (std::size_t i = first; i < sentence_ends.size(); ++i) sentence_ends[i] -= t1 - t0;
  sentence_lines.erase(sentence_lines.begin() + std::ptrdiff_t(first), sentence_lines.begin() + std::ptrdiff_t(end));
}

std::vector<CrfsuiteSentence> read_crfsuite(const std::string& path) {
  CrfsuiteReader reader(path);
  std::vector<CrfsuiteSentence> sentences;
  CrfsuiteSentence s;
  while (reader.next(s)) sentences.push_back(std::move(s));
  return sentences;
}

std::string attribute_value_problem(const std::string& name, double value) {
  if (!std::isfinite(value)) return "attribute '" + name + "': value " + std::to_string(value) + " is not a finite number";
  if (std::fabs(value) > kMaxAttributeValue) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return "attribute '" + name + "': value " + text + kBeyondRange;
  }
  return "";
}

}  // namespace crfx
