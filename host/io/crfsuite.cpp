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
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "crfx/error.hpp"
#include "crfx/io.hpp"

namespace crfx {

namespace {

constexpr const char* kBeyondRange = " is beyond ±1e10, the range crfx accepts (scale the values down)";

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t") == std::string::npos;
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
    if (ok) {
      char* end = nullptr;
      v = std::strtod(text.c_str(), &end);
      ok = end == text.c_str() + text.size() && std::isfinite(v);
    }
    if (!ok)
      throw InputError(path, line, "attribute '" + std::string(raw, n) +
                                       "': value '" + text + "' is not a finite number");
    if (std::fabs(v) > kMaxAttributeValue)
      throw InputError(path, line, "attribute '" + std::string(raw, n) + "': value " + text + kBeyondRange);
    attr.value = v;
  }
}

}  // namespace

CrfsuiteReader::CrfsuiteReader(const std::string& path) : reader_(path) {}

bool CrfsuiteReader::next(CrfsuiteSentence& out) {
  out.clear();
  while (reader_.next(line_)) {
    if (blank(line_)) {
      if (!out.empty()) return true;
      continue;
    }
    const std::string& line = line_;
    CrfsuiteToken token;
    token.line = reader_.line_number();
    std::size_t tab = line.find('\t');
    token.label.assign(line, 0, tab);
    // A space in the label field is CoNLL columns read as CRFsuite lines (no tab: the whole line
    // would become one label): refused, rather than trained or tagged into nonsense.
    if (token.label.find(' ') != std::string::npos)
      throw InputError(reader_.path(), token.line,
                       "'" + token.label.substr(0, 60) + (token.label.size() > 60 ? "…" : "") +
                           "' has spaces before its first tab: CRFsuite lines are LABEL<TAB>attr<TAB>…; "
                           "for CoNLL columns train with --format conll and a --template (a model "
                           "keeps its training format)");
    while (tab != std::string::npos) {
      const std::size_t b = tab + 1;
      tab = line.find('\t', b);
      const std::size_t e = tab == std::string::npos ? line.size() : tab;
      if (e == b) continue;  // empty field: skipped, as CRFsuite does
      token.attributes.emplace_back();
      parse_attribute(line.data() + b, e - b, reader_.path(), token.line, token.attributes.back());
    }
    out.push_back(std::move(token));
  }
  return !out.empty();
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
