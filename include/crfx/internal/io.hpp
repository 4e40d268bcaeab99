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
#include <memory>
#include <string>
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

/// Why lines read as CRFsuite data look like CoNLL columns (CrfsuiteReader::conll_shape): `why`
/// is empty when they do not; `path` and `line` (the first line looked at) say where.
struct ConllShape {
  std::string path;
  std::size_t line = 0;
  std::string why;  // "lines 1–100 look like CoNLL columns, not CRFsuite attribute lines: …"
  bool found() const { return !why.empty(); }
};

/// Reads a CRFsuite attribute file one sequence at a time (the rules of read_crfsuite below).
class CrfsuiteReader {
 public:
  explicit CrfsuiteReader(const std::string& path);
  /// The next non-empty sequence into `out`; false at the end of the file.
  bool next(CrfsuiteSentence& out);
  const std::string& path() const { return reader_.path(); }
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }

  /// Whether the file's first lines (up to kShapeLines non-blank ones, those read so far) look
  /// like CoNLL columns rather than CRFsuite lines — the rule is at its definition in
  /// host/io/crfsuite.cpp. The reader refuses nothing on it (a CRFsuite model may be given
  /// anything at tag time); compile_training and compile (features.hpp) do. An error in an
  /// attribute of such a file says so.
  ConllShape conll_shape() const;
  static constexpr std::size_t kShapeLines = 100;

 private:
  /// What the first lines were like (conll_shape's evidence).
  struct ShapeStats {
    std::size_t lines = 0, first_line = 0, last_line = 0;
    std::size_t fields = 0;         // the tab-separated fields of every line (label included)
    bool same_fields = true;        // every line has `fields` fields
    std::size_t attributes = 0;     // fields after the first
    std::size_t named = 0;          // of those, written name=value or name:number
    std::size_t first_words = 0;    // first fields holding a lower-case ASCII letter
    std::size_t last_not_tags = 0;  // last fields that do not look like a tag
    std::vector<std::string> first_values, last_values;  // distinct (at most kShapeLines each)
  };

  void observe(const std::string& line);

  LineReader reader_;
  std::string line_;
  ShapeStats shape_;
};

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
