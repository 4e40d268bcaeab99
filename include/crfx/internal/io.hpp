// crfx — text readers.
//
//   FILE (plain or .gz, UTF-8, LF or CRLF)
//     → LineReader        one line at a time, CR stripped, line numbers kept
//     → read_conll        Sentence: [T] tokens × [C] whitespace-separated columns
//     → read_crfsuite     Sentence: [T] tokens × (label, attr[:value]…)
//     → features.hpp      Corpus (CSR attribute ids + values, label ids)
//
// Internal: may change between versions (the stable API: crfx/train.hpp, tagger.hpp, model.hpp,
// errors.hpp). Programs that go beyond it use: list_inputs,
//  InputFile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace crfx {

/// Reads a text file line by line; gzip-compressed files are decompressed transparently.
/// A trailing '\r' is removed from each line (CRLF tolerated).
class LineReader {
 public:
  /// `path` "-" reads standard input. Throws InputError(path, 0, …) when unreadable.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Next line without its terminator; false at end of file. Throws InputError on read errors
  /// (e.g. a corrupt .gz stream) and on a NUL byte inside a line.
  bool next(std::string& line);
  /// The longest line read (a corrupt or binary file must not grow one string without bound):
  /// 64 MiB, or CRFX_MAX_LINE_MB from the environment. Longer: InputError.
  static constexpr std::size_t kDefaultMaxLineMB = 64;
  static std::size_t max_line_bytes();
  /// Bytes taken from the file so far (compressed bytes for a .gz file, read ahead included):
  /// the progress of a long read against the file's size.
  std::uint64_t bytes_read() const;
  /// 1-based number of the line last returned by next().
  std::size_t line_number() const { return line_no_; }
  /// Raw bytes instead of lines (TextChunker, host/io/text_chunks.hpp): up to `n` bytes into
  /// `p`, those next() has read ahead first; 0 at the end. A read error names line `line`.
  std::size_t read_bytes(char* p, std::size_t n, std::size_t line);
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::size_t line_no_ = 0;
};

/// One token of a CoNLL file: its columns, and the source line (for error messages).
struct ConllToken {
  std::vector<std::string> columns;
  std::size_t line = 0;
};
using ConllSentence = std::vector<ConllToken>;

/// Reads a CoNLL column file one sentence at a time (the rules of read_conll below).
class ConllReader {
 public:
  ConllReader(const std::string& path, std::size_t expected_columns = 0, bool allow_one_more = false);
  /// The next non-empty sentence into `out`; false at the end of the file.
  bool next(ConllSentence& out);
  const std::string& path() const { return reader_.path(); }
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }

 private:
  LineReader reader_;
  std::size_t expected_, columns_ = 0, first_line_ = 0;
  bool allow_one_more_;
  std::string line_;
};

/// Reads a CoNLL column file: whitespace- or tab-separated columns, one token per line, a blank
/// (or whitespace-only) line between sentences. Lines starting with "-DOCSTART-" end the current
/// sentence and are otherwise skipped. Every token of the file must have the same number of
/// columns (InputError naming the line otherwise). `expected_columns` > 0 additionally requires
/// that count (or, if `allow_one_more`, that count + 1).
std::vector<ConllSentence> read_conll(const std::string& path, std::size_t expected_columns = 0,
                                      bool allow_one_more = false);

/// One item of a CRFsuite attribute line.
struct CrfsuiteAttribute {
  std::string name;
  double value = 1.0;
};
struct CrfsuiteToken {
  std::string label;  // may be empty at tag time
  std::vector<CrfsuiteAttribute> attributes;
  std::size_t line = 0;
};
using CrfsuiteSentence = std::vector<CrfsuiteToken>;

/// CRFsuite sequences kept as the text of their lines (TextReader::keep_lines, for tagging): a
/// token is its line, looked at where it is used (compile looks attribute names up as views of
/// it), so that a batch holds its text and a few offsets a token instead of a string per
/// attribute. Token k of the batch is line(k); sentence i holds tokens [end(i − 1), end(i)),
/// on the file's lines sentence_lines[i], +1, … (no blank line inside a sequence).
struct CrfsuiteLines {
  std::string text;                         // the tokens' lines, one after the other
  std::vector<std::size_t> token_ends;      // [N] one past each token's line in text
  std::vector<std::size_t> sentence_ends;   // [S] one past each sentence's last token
  std::vector<std::size_t> sentence_lines;  // [S] the line of each sentence's first token
  std::size_t size() const { return sentence_ends.size(); }
  std::size_t first_token(std::size_t i) const { return i == 0 ? 0 : sentence_ends[i - 1]; }
  std::size_t tokens(std::size_t i) const { return sentence_ends[i] - first_token(i); }
  std::string_view line(std::size_t k) const {
    const std::size_t b = k == 0 ? 0 : token_ends[k - 1];
    return std::string_view(text).substr(b, token_ends[k] - b);
  }
  /// A line's label: its first field (empty when the line starts with a tab).
  static std::string_view label(std::string_view line) { return line.substr(0, line.find('\t')); }
  /// Removes sentences [first, end) (those after them move up).
  void erase(std::size_t first, std::size_t end);
  void clear() {
    text.clear();
    token_ends.clear();
    sentence_ends.clear();
    sentence_lines.clear();
  }
};

/// Whether CRFsuite attribute field `field` has no escape and no value: its name is the field as it
/// is, which read_crfsuite never refuses (the usual case, taken without decoding).
inline bool crfsuite_plain_field(std::string_view field) {
  return field.find_first_of("\\:") == std::string_view::npos;
}

/// Attribute field `field` (non-empty) of a CRFsuite line, decoded by read_crfsuite's rules:
/// `name` is a view of the field, or of `scratch` when the name has escapes or a value follows
/// it. An InputError (`path`:`line`) for a field read_crfsuite refuses.
void decode_attribute(std::string_view field, const std::string& path, std::size_t line,
                      CrfsuiteAttribute& scratch, std::string_view& name, double& value);

/// Calls fn(name, value) for every attribute of CRFsuite line `text` (the fields after the
/// label, empty ones skipped), as read_crfsuite reads them; `path` and `line` name it in errors.
template <class Fn>
void for_each_attribute(std::string_view text, const std::string& path, std::size_t line, Fn&& fn) {
  CrfsuiteAttribute scratch;
  std::string_view name;
  double value = 1.0;
  // One pass over the bytes: the fields cut at tabs, and those without '\\' or ':' (no escape, no
  // value: the name as it is, the usual case) spared decode_attribute's own look.
  const char* const end = text.data() + text.size();
  const char* p = text.empty() ? nullptr : static_cast<const char*>(std::memchr(text.data(), '\t', text.size()));
  if (!p) return;
  for (const char* b = ++p;; b = ++p) {
    bool plain = true;
    for (; p < end && *p != '\t'; ++p) plain &= (*p != '\\') & (*p != ':');
    if (p > b) {  // (an empty field is skipped, as CRFsuite does)
      const std::string_view field(b, std::size_t(p - b));
      if (plain) {
        fn(field, 1.0);
      } else {
        decode_attribute(field, path, line, scratch, name, value);
        fn(name, value);
      }
    }
    if (p == end) return;
  }
}

/// Why lines read as CRFsuite data look like CoNLL columns (CrfsuiteReader::conll_shape): `why`
/// is empty when they do not; `path` and `line` (the first line looked at) say where.
struct ConllShape {
  std::string path;
  std::size_t line = 0;
  std::string why;  // "lines 1–100 look like CoNLL columns, not CRFsuite attribute lines: …"
  bool found() const { return !why.empty(); }
};

/// The evidence CrfsuiteReader::conll_shape judges: what the first kLines non-blank lines of a
/// file read as CRFsuite lines were like (the rule is at its definition in host/io/crfsuite.cpp).
/// The training compile's shards (host/features/compile_shards.cpp) keep it apart from a reader.
class CrfsuiteShape {
 public:
  static constexpr std::size_t kLines = 100;
  bool full() const { return lines_ >= kLines; }
  /// Takes non-blank line `line`, the file's line `number`, as evidence (ignored once full()).
  void observe(std::string_view line, std::size_t number);
  /// The verdict on the lines observed so far, naming file `path`.
  ConllShape verdict(const std::string& path) const;

 private:
  std::size_t lines_ = 0, first_line_ = 0, last_line_ = 0;
  std::size_t fields_ = 0;         // the tab-separated fields of every line (label included)
  bool same_fields_ = true;        // every line has `fields_` fields
  std::size_t attributes_ = 0;     // fields after the first
  std::size_t named_ = 0;          // of those, written name=value or name:number
  std::size_t first_words_ = 0;    // first fields holding a lower-case ASCII letter
  std::size_t last_not_tags_ = 0;  // last fields that do not look like a tag
  std::vector<std::string> first_values_, last_values_;  // distinct (at most kLines each)
};

/// Reads a CRFsuite attribute file one sequence at a time (the rules of read_crfsuite below).
class CrfsuiteReader {
 public:
  explicit CrfsuiteReader(const std::string& path);
  /// The next non-empty sequence into `out`; false at the end of the file.
  bool next(CrfsuiteSentence& out);
  /// The same, appended to `out` as its lines' text (checked as next(CrfsuiteSentence&) checks
  /// them: the same errors at the same lines); false at the end of the file.
  bool next(CrfsuiteLines& out);
  const std::string& path() const { return reader_.path(); }
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }

  /// Whether the file's first lines (up to kShapeLines non-blank ones, those read so far) look
  /// like CoNLL columns rather than CRFsuite lines — the rule is at its definition in
  /// host/io/crfsuite.cpp. The reader refuses nothing on it (a CRFsuite model may be given
  /// anything at tag time); compile_training and compile (features.hpp) do. An error in an
  /// attribute of such a file says so.
  ConllShape conll_shape() const { return shape_.verdict(reader_.path()); }
  static constexpr std::size_t kShapeLines = CrfsuiteShape::kLines;

 private:
  /// Checks line_ (non-blank), the token at the reader's line: its label, then every attribute
  /// (parsed into `attr`, `token` given each one when not null). Returns the label's end.
  std::size_t check_line(CrfsuiteAttribute& attr, CrfsuiteToken* token);

  LineReader reader_;
  std::string line_;
  CrfsuiteShape shape_;
  CrfsuiteAttribute scratch_;  // next(CrfsuiteLines&)'s parse of an attribute, checked and dropped
};

/// Whether a CRFsuite line holds no token (spaces and tabs only).
inline bool crfsuite_blank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }
/// Where the label of CRFsuite line `line` (non-blank), the file's line `number`, ends (its first
/// tab, or the line's end); an InputError for a space in it (CoNLL columns read as CRFsuite lines).
std::size_t crfsuite_label_end(std::string_view line, const std::string& path, std::size_t number);
/// Checks non-blank CRFsuite line `line`, the file's line `number`, as CrfsuiteReader reads it:
/// `shape` observes it, then its label and every attribute (parsed into `attr`; each one given to
/// `token` when not null) — an InputError for the first bad one, saying so when `shape` finds
/// CoNLL columns. Returns the label's end.
std::size_t check_crfsuite_line(std::string_view line, const std::string& path, std::size_t number,
                                CrfsuiteShape& shape, CrfsuiteAttribute& attr, CrfsuiteToken* token = nullptr);
/// The problem of an attribute error (`problem`) in lines that look like CoNLL columns (`shape`
/// found): the likely cause first, then the error.
std::string shape_problem(const ConllShape& shape, const std::string& problem);

/// Reads a CRFsuite attribute file: `LABEL<TAB>attr[:value]<TAB>…`, a blank line between
/// sequences. In attribute names `\:` stands for ':' and `\\` for '\'; the value follows the last
/// unescaped ':' and must be a finite number (an error where that text is empty, or not a number
/// and the name holds another ':', suggests `\:`). Empty attribute names are errors.
std::vector<CrfsuiteSentence> read_crfsuite(const std::string& path);

/// The largest attribute value magnitude crfx accepts: scores are Σ value · weight, and values
/// far beyond any feature scale make the first gradient so large that no step is taken (an
/// all-zero model).
constexpr double kMaxAttributeValue = 1e10;
/// Why attribute `name` cannot have `value` (not finite, or beyond ±kMaxAttributeValue), or "".
/// The readers and the checks of data made in memory (crfx::train) give the same words.
std::string attribute_value_problem(const std::string& name, double value);

/// One input file of a run over many (crfx tag, crfx eval).
struct InputFile {
  std::string path;  // as opened ("-": standard input)
  /// Its name relative to the argument that named it: a file argument's own file name, a file
  /// found under a directory argument its path below that directory ("-" for standard input).
  std::string name;
  std::uint64_t bytes = 0;  // its size (0 for standard input and other streams)
  std::uint64_t device = 0, inode = 0;  // which file it is (0, 0 for standard input)
};

/// The files that `arguments` name, in order: a file stands for itself ("-" for standard input,
/// at most once); a directory needs `recursive` and stands for every file below it, sorted by
/// path (links to files followed, links to directories not). Throws InputError naming the
/// argument for one that does not exist, cannot be read, is a directory without `recursive`,
/// or holds something other than files and directories (a socket, a FIFO).
std::vector<InputFile> list_inputs(const std::vector<std::string>& arguments, bool recursive);

/// Splits `line` on runs of spaces and tabs (no empty fields).
void split_whitespace(const std::string& line, std::vector<std::string>& out);

}  // namespace crfx
