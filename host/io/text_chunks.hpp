// crfx — a text file in chunks of whole sentences, for reading it on several threads (the
// training compile's shards, host/features/compile_shards.cpp).
//
//   TextChunker        the file's bytes cut after a blank line every `target` bytes or so: no
//                      sentence spans two chunks, and each chunk knows its first line's number
//   parse_conll_chunk  a chunk's lines → tokens × columns as views into the chunk, by
//                      read_conll's rules and with its errors (file and line)
//   for_each_chunk_line  a chunk's lines as LineReader gives them (the CRFsuite shards' reading)
//   ConllScanner       crfx tag's reading (host/tag/tag_run.cpp): whole sentences' lines up to a
//                      token or byte count, cut at the line that ends a sentence, not split
//   parse_conll_lines  those lines → ConllSentences, on a worker, with ConllReader's errors
//   CrfsuiteScanner    the same reading for CRFsuite attribute files: whole sequences' lines
//                      appended to CrfsuiteLines, not checked
//   check_crfsuite_lines  those lines checked on a worker, with CrfsuiteReader's errors
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"

namespace crfx {

/// Whole lines of a text file (the last one may lack its '\n').
struct TextChunk {
  std::string text;
  std::size_t first_line = 1;  // the 1-based number of text's first line
};

class TextChunker {
 public:
  explicit TextChunker(const std::string& path) : reader_(path) {}
  /// The next chunk into `out`: about `target` bytes, then to the end of the next blank line (or
  /// of the file); false at the end of the file. A line longer than LineReader::max_line_bytes()
  /// ends a chunk where it passes the limit (parse_conll_chunk reports it at its line).
  bool next(TextChunk& out, std::size_t target);
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }
  /// bytes_read() less what was read past the last chunk (of a plain file: the chunks' bytes).
  std::uint64_t bytes_done() const {
    const std::uint64_t read = reader_.bytes_read();
    return read > carry_.size() ? read - carry_.size() : 0;
  }
  const std::string& path() const { return reader_.path(); }

 private:
  bool read_more(std::string& text, std::size_t want);  // false at the end of the file
  LineReader reader_;
  std::string carry_;      // bytes read past the last chunk
  std::size_t line_ = 1;   // the number of carry_'s first line
  bool eof_ = false;
};

/// A chunk's tokens: column c of token k is cells[k · columns + c].
struct ConllChunk {
  std::size_t columns = 0;
  std::vector<std::string_view> cells;
  std::vector<std::size_t> sentence_ends;   // [S] one past each sentence's last token
  std::vector<std::size_t> sentence_lines;  // [S] each sentence's first line
  std::size_t tokens() const { return sentence_ends.empty() ? 0 : sentence_ends.back(); }
};

/// Parses `chunk` of file `path` by read_conll's rules, every token with `columns` columns, as
/// the file's first token (on line `first_line`) had: an InputError for its first bad line.
void parse_conll_chunk(const TextChunk& chunk, const std::string& path, std::size_t columns,
                       std::size_t first_line, ConllChunk& out);

/// The column count and line of the first token of `chunk` (read_conll's rules); false when it
/// has none. An InputError for a bad line before it.
bool first_conll_token(const TextChunk& chunk, const std::string& path, std::size_t& columns,
                       std::size_t& line);

/// Splits `line` at runs of spaces and tabs into views of it (the string overload, crfx/internal/io.hpp,
/// copies these).
void split_whitespace(std::string_view line, std::vector<std::string_view>& out);

/// Whether a CoNLL line split into `columns` holds no token: no columns (blank or whitespace
/// only), or a "-DOCSTART-" document marker — both end the sentence (ConllReader and the chunks).
template <class Columns>
bool conll_not_a_token(const Columns& columns) {
  return columns.empty() || std::string_view(columns[0]).substr(0, 10) == "-DOCSTART-";
}

/// LineReader's problems for a line longer than max_line_bytes() and for a NUL byte in a line,
/// and ConllReader's for a token of `line` (split into `columns`) whose column count differs
/// from the file's first token's.
std::string line_too_long_problem();
std::string nul_byte_problem();
std::string conll_column_problem(std::size_t expected, std::size_t first_line, std::string_view line,
                                 const std::vector<std::string_view>& columns);

/// A CoNLL file's column rule as ConllReader applies it: its first token (on line first_line,
/// `columns` columns; 0: none seen yet) must have `expected` columns, or one more when
/// allow_one_more (expected 0: any count); every other token as many as the first.
struct ConllColumns {
  std::size_t expected = 0;
  bool allow_one_more = false;
  std::size_t columns = 0, first_line = 0;
};

/// ConllReader's problem for the file's first token (of `line`, split into `columns`) when its
/// column count breaks `rule`; "" when it does not.
std::string conll_expected_problem(const ConllColumns& rule, std::string_view line,
                                   const std::vector<std::string_view>& columns);

/// A CoNLL file's lines, whole sentences at a time, classified (token or not) but not split:
/// the serial part of crfx tag's reading, the columns parsed on the workers (parse_conll_lines).
/// A sentence ends at its first line that holds no token (conll_not_a_token), which ends the
/// text appended; the next append starts after it.
class ConllScanner {
 public:
  ConllScanner(const std::string& path, std::size_t expected_columns, bool allow_one_more);
  /// Appends whole sentences' lines to `out` (out.first_line set when it is empty) until
  /// `max_tokens` tokens were appended or `max_bytes` bytes of the file read (at least one
  /// sentence); returns how many tokens. A line too long, or a read error: an InputError, `out`
  /// then holds every line before it (the last sentence perhaps unfinished).
  std::size_t append(TextChunk& out, std::size_t max_tokens, std::uint64_t max_bytes);
  /// The file has no more lines.
  bool exhausted() const { return exhausted_; }
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }
  /// The rule, with the file's first token once a line of it was appended.
  const ConllColumns& columns() const { return rule_; }

 private:
  void flush(TextChunk& out);  // buf_'s scanned lines onto out
  void more();                 // reads on (eof_ at the end)
  LineReader reader_;
  ConllColumns rule_;
  std::string buf_;
  std::size_t pos_ = 0;    // the first line not scanned (buf_'s lines before it are flushed)
  std::size_t line_ = 1;   // its number
  bool eof_ = false, exhausted_ = false;
};

/// Sentences and tokens of a batch before, kept for their storage: parse_conll_lines fills them
/// again instead of allocating a vector (and long strings) per token — on several threads at
/// once those allocations wait for each other in the allocator.
struct ConllSpares {
  std::vector<ConllSentence> sentences;
  std::vector<ConllToken> tokens;
  /// Takes `from`'s sentences (their storage), leaving it empty.
  void keep(std::vector<ConllSentence>& from);
};

/// Parses the lines of `chunk` (of file `path`, scanned by ConllScanner) by ConllReader's rules
/// into sentences appended to `out`, and returns their tokens; an InputError at the first bad
/// line (the sentences before it stay in `out`). `whole`: the chunk's last sentence is complete
/// (false: the reading stopped in it, which is dropped). The sentences reuse `spares`' storage.
std::size_t parse_conll_lines(const TextChunk& chunk, const std::string& path, const ConllColumns& rule,
                              bool whole, std::vector<ConllSentence>& out, ConllSpares& spares);

/// A CRFsuite attribute file's sequences, whole ones at a time, appended to CrfsuiteLines as
/// CrfsuiteReader::next(CrfsuiteLines&) appends them but not checked: the serial part of crfx tag's
/// reading, the lines checked on the workers (check_crfsuite_lines). A sequence ends at a line of
/// spaces and tabs only. The first CrfsuiteShape::kLines non-blank lines are observed (shape()).
class CrfsuiteScanner {
 public:
  explicit CrfsuiteScanner(const std::string& path) : reader_(path) {}
  /// Appends whole sequences to `out` until `max_tokens` tokens were appended or `max_bytes` bytes
  /// of the file read (at least one sequence); returns how many tokens. A line too long, or a read
  /// error: an InputError, `out` then holding every line before it, the sequence under way closed
  /// and partial() set.
  std::size_t append(CrfsuiteLines& out, std::size_t max_tokens, std::uint64_t max_bytes);
  /// The file has no more lines.
  bool exhausted() const { return exhausted_; }
  /// The last append stopped (its InputError) inside its last sequence, which is unfinished.
  bool partial() const { return partial_; }
  std::uint64_t bytes_read() const { return reader_.bytes_read(); }
  /// The evidence of the file's lines appended so far (at most its first CrfsuiteShape::kLines).
  const CrfsuiteShape& shape() const { return shape_; }

 private:
  void more();  // reads on (eof_ at the end)
  LineReader reader_;
  CrfsuiteShape shape_;
  std::string buf_;
  std::size_t pos_ = 0;   // the first line not scanned
  std::size_t line_ = 1;  // its number
  bool eof_ = false, exhausted_ = false, partial_ = false;
};

/// Checks sequences [first, end) of `lines` (of file `path`, appended by CrfsuiteScanner) as
/// CrfsuiteReader reads them — a NUL byte, then check_crfsuite_line, `shape` observing on from
/// the file's lines before them. Returns the sequence of the first bad line, its InputError in
/// `error`; `end` when every line is good.
std::size_t check_crfsuite_lines(const CrfsuiteLines& lines, std::size_t first, std::size_t end,
                                 const std::string& path, CrfsuiteShape& shape, std::exception_ptr& error);

/// Calls fn(line, number) for every line of `chunk` as LineReader::next gives it (too long a line
/// or a NUL byte: an InputError naming `path` and the line), until fn returns false.
template <class Fn>
void for_each_chunk_line(const TextChunk& chunk, const std::string& path, Fn fn) {
  const char* p = chunk.text.data();
  const char* const end = p + chunk.text.size();
  const std::size_t max = LineReader::max_line_bytes();
  for (std::size_t number = chunk.first_line; p < end; ++number) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', std::size_t(end - p)));
    const char* e = nl ? nl : end;
    if (std::size_t(e - p) > max) throw InputError(path, number, line_too_long_problem());
    std::string_view line(p, std::size_t(e - p));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\0') != std::string_view::npos) throw InputError(path, number, nul_byte_problem());
    if (!fn(line, number)) return;
    p = nl ? nl + 1 : end;
  }
}

}  // namespace crfx
