// TextChunker and parse_conll_chunk: the reading of host/io/conll.cpp, a chunk of whole
// sentences at a time, so that the chunks of one file can be parsed on several threads. A chunk
// ends after a blank line, which ends a sentence whatever comes next (read_conll's rules); its
// lines are cut, checked and split as LineReader::next and ConllReader::next do (the same errors
// at the same lines), into views of the chunk's text instead of a string per column.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "crfx/errors.hpp"
#include "io/text_chunks.hpp"

namespace crfx {

namespace {
constexpr std::size_t kMinRead = std::size_t(1) << 16;  // bytes asked of the file at a time, at least

/// A line (without its '\n') that reads as no columns: spaces and tabs, then perhaps the '\r'
/// that LineReader strips.
bool blank(const char* b, const char* e) {
  if (e > b && e[-1] == '\r') --e;
  for (; b < e; ++b)
    if (*b != ' ' && *b != '\t') return false;
  return true;
}

/// Whether CoNLL line [b, e) (without its '\n') holds a token: conll_not_a_token of its split,
/// without splitting it.
bool conll_token(const char* b, const char* e) {
  if (e > b && e[-1] == '\r') --e;
  while (b < e && (*b == ' ' || *b == '\t')) ++b;
  return b < e && !(e - b >= 10 && std::memcmp(b, "-DOCSTART-", 10) == 0);
}

/// Whether CRFsuite line `line` holds no '\\', ':' or NUL byte: no attribute has an escape or a
/// value (check_crfsuite_line refuses none of them), and LineReader would not refuse it. One pass
/// without a branch a byte (the compiler vectorises it).
bool plain_line(std::string_view line) {
  bool plain = true;
  for (const char c : line) plain &= (c != '\\') & (c != ':') & (c != '\0');
  return plain;
}

constexpr std::size_t kScanRead = std::size_t(1) << 18;  // bytes the scanners ask for at a time

/// The scanners' reading: up to kScanRead more bytes of `reader` onto `buf` (a read error names
/// line `line`, the one under way); false at the end of the file.
bool scan_more(LineReader& reader, std::string& buf, std::size_t line) {
  const std::size_t old = buf.size();
  buf.resize(old + kScanRead);
  const std::size_t got = reader.read_bytes(&buf[old], kScanRead, line);
  buf.resize(old + got);
  return got > 0;
}

/// Where the scanners' append stops reading: `max_bytes` after `read` bytes (saturated).
std::uint64_t scan_end(std::uint64_t read, std::uint64_t max_bytes) {
  return max_bytes > ~std::uint64_t(0) - read ? ~std::uint64_t(0) : read + max_bytes;
}

}  // namespace

void split_whitespace(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  const char* p = line.data();
  const char* const e = p + line.size();
  while (p < e) {
    while (p < e && (*p == ' ' || *p == '\t')) ++p;
    if (p == e) break;
    const char* b = p;
    while (p < e && *p != ' ' && *p != '\t') ++p;
    out.emplace_back(b, std::size_t(p - b));
  }
}

bool TextChunker::read_more(std::string& text, std::size_t want) {
  if (eof_) return false;
  const std::size_t old = text.size();
  want = std::max(want, kMinRead);
  text.resize(old + want);
  // A read error names the line being read: the one after the last complete line.
  const std::size_t line = line_ + std::size_t(std::count(text.data(), text.data() + old, '\n'));
  const std::size_t got = reader_.read_bytes(&text[old], want, line);
  text.resize(old + got);
  if (got == 0) eof_ = true;
  return got > 0;
}

bool TextChunker::next(TextChunk& out, std::size_t target) {
  out.text.swap(carry_);
  carry_.clear();
  out.first_line = line_;
  std::string& text = out.text;
  while (text.size() < target && read_more(text, target - text.size())) {
  }
  // The cut: after the first blank line starting at or after `target` (the lines before it are
  // not looked at), else the end of the file, else where a line passes the limit.
  std::size_t p = 0;  // the start of the next line to look at
  if (target > 0 && text.size() >= target) {
    std::size_t nl = text.find('\n', target - 1);
    if (nl == std::string::npos) nl = text.rfind('\n');  // the line under way: read on
    p = nl == std::string::npos ? 0 : nl + 1;
  } else {
    p = text.size();  // the end of the file is the cut
  }
  std::size_t cut = std::string::npos;
  const std::size_t max = LineReader::max_line_bytes();
  while (cut == std::string::npos) {
    const std::size_t nl = text.find('\n', p);
    if (nl != std::string::npos) {
      if (blank(text.data() + p, text.data() + nl)) cut = nl + 1;
      p = nl + 1;
    } else if (text.size() - p > max || !read_more(text, std::min(text.size() / 2, kMinRead))) {
      cut = text.size();
    }
  }
  if (cut < text.size()) carry_.assign(text, cut, std::string::npos);
  text.resize(cut);
  line_ += std::size_t(std::count(text.begin(), text.end(), '\n'));
  return !text.empty();
}

void parse_conll_chunk(const TextChunk& chunk, const std::string& path, std::size_t columns,
                       std::size_t first_line, ConllChunk& out) {
  out.columns = columns;
  out.cells.clear();
  out.sentence_ends.clear();
  out.sentence_lines.clear();
  std::vector<std::string_view> split;
  std::size_t tokens = 0;
  bool open = false;  // a sentence is under way
  for_each_chunk_line(chunk, path, [&](std::string_view line, std::size_t number) {
    split_whitespace(line, split);
    if (conll_not_a_token(split)) {
      if (open) out.sentence_ends.push_back(tokens);
      open = false;
      return true;
    }
    if (split.size() != columns)
      throw InputError(path, number, conll_column_problem(columns, first_line, line, split));
    if (!open) out.sentence_lines.push_back(number);
    open = true;
    out.cells.insert(out.cells.end(), split.begin(), split.end());
    ++tokens;
    return true;
  });
  if (open) out.sentence_ends.push_back(tokens);
}

bool first_conll_token(const TextChunk& chunk, const std::string& path, std::size_t& columns,
                       std::size_t& line) {
  std::vector<std::string_view> split;
  bool found = false;
  for_each_chunk_line(chunk, path, [&](std::string_view text, std::size_t number) {
    split_whitespace(text, split);
    if (conll_not_a_token(split)) return true;
    columns = split.size();
    line = number;
    found = true;
    return false;
  });
  return found;
}

ConllScanner::ConllScanner(const std::string& path, std::size_t expected_columns, bool allow_one_more)
    : reader_(path) {
  rule_.expected = expected_columns;
  rule_.allow_one_more = allow_one_more;
}

void ConllScanner::flush(TextChunk& out) {
  out.text.append(buf_, 0, pos_);
  buf_.erase(0, pos_);
  pos_ = 0;
}

void ConllScanner::more() { eof_ = !scan_more(reader_, buf_, line_); }

std::size_t ConllScanner::append(TextChunk& out, std::size_t max_tokens, std::uint64_t max_bytes) {
  if (out.text.empty()) out.first_line = line_;
  const std::uint64_t bytes_end = scan_end(bytes_read(), max_bytes);
  const std::size_t max = LineReader::max_line_bytes();
  std::size_t tokens = 0;
  bool open = false;  // a sentence is under way
  std::vector<std::string_view> split;
  while (open || (tokens < max_tokens && (tokens == 0 || bytes_read() < bytes_end))) {
    const char* b = buf_.data() + pos_;
    const char* const end = buf_.data() + buf_.size();
    const char* nl = static_cast<const char*>(std::memchr(b, '\n', std::size_t(end - b)));
    const char* e = nl ? nl : end;
    if (std::size_t(e - b) > max) {
      flush(out);
      throw InputError(reader_.path(), line_, line_too_long_problem());
    }
    if (!nl && !eof_) {  // the line goes on past what was read
      flush(out);
      more();  // (a read error: out holds the lines before it)
      continue;
    }
    if (b == end) {  // the end of the file
      exhausted_ = true;
      break;
    }
    if (conll_token(b, e)) {
      if (rule_.first_line == 0) {  // the file's first token sets its columns (ConllReader)
        std::string_view line(b, std::size_t(e - b));
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        split_whitespace(line, split);
        rule_.columns = split.size();
        rule_.first_line = line_;
      }
      ++tokens;
      open = true;
    } else {
      open = false;  // (a line that holds no token ends the sentence under way)
    }
    pos_ = std::size_t((nl ? nl + 1 : end) - buf_.data());
    ++line_;
  }
  flush(out);
  return tokens;
}

void ConllSpares::keep(std::vector<ConllSentence>& from) {
  for (ConllSentence& s : from) sentences.push_back(std::move(s));
  from.clear();
}

std::size_t parse_conll_lines(const TextChunk& chunk, const std::string& path, const ConllColumns& rule,
                              bool whole, std::vector<ConllSentence>& out, ConllSpares& spares) {
  std::vector<std::string_view> split;
  ConllSentence s;    // its first n tokens are the sentence under way, the others spare storage
  std::size_t n = 0;
  std::size_t tokens = 0;
  auto close = [&] {
    for (std::size_t i = n; i < s.size(); ++i) spares.tokens.push_back(std::move(s[i]));
    s.resize(n);
    tokens += n;
    out.push_back(std::move(s));
    s = ConllSentence();
    n = 0;
  };
  for_each_chunk_line(chunk, path, [&](std::string_view line, std::size_t number) {
    split_whitespace(line, split);
    if (conll_not_a_token(split)) {
      if (n > 0) close();
      return true;
    }
    if (number == rule.first_line) {
      std::string problem = conll_expected_problem(rule, line, split);
      if (!problem.empty()) throw InputError(path, number, problem);
    } else if (split.size() != rule.columns) {
      throw InputError(path, number, conll_column_problem(rule.columns, rule.first_line, line, split));
    }
    if (n == 0 && s.empty() && !spares.sentences.empty()) {
      s = std::move(spares.sentences.back());
      spares.sentences.pop_back();
    }
    if (n == s.size()) {
      if (spares.tokens.empty()) {
        s.emplace_back();
      } else {
        s.push_back(std::move(spares.tokens.back()));
        spares.tokens.pop_back();
      }
    }
    ConllToken& token = s[n++];
    token.columns.resize(split.size());
    for (std::size_t c = 0; c < split.size(); ++c) token.columns[c].assign(split[c].data(), split[c].size());
    token.line = number;
    return true;
  });
  if (whole && n > 0) close();
  return tokens;
}

void CrfsuiteScanner::more() {
  buf_.erase(0, pos_);  // (the lines before pos_ are in the caller's CrfsuiteLines)
  pos_ = 0;
  eof_ = !scan_more(reader_, buf_, line_);
}

std::size_t CrfsuiteScanner::append(CrfsuiteLines& out, std::size_t max_tokens, std::uint64_t max_bytes) {
  const std::uint64_t bytes_end = scan_end(bytes_read(), max_bytes);
  const std::size_t max = LineReader::max_line_bytes();
  std::size_t tokens = 0;
  bool open = false;  // a sequence is under way
  partial_ = false;
  try {
    while (open || (tokens < max_tokens && (tokens == 0 || bytes_read() < bytes_end))) {
      const char* b = buf_.data() + pos_;
      const char* const end = buf_.data() + buf_.size();
      const char* nl = static_cast<const char*>(std::memchr(b, '\n', std::size_t(end - b)));
      const char* e = nl ? nl : end;
      if (std::size_t(e - b) > max) throw InputError(reader_.path(), line_, line_too_long_problem());
      if (!nl && !eof_) {  // the line goes on past what was read
        more();            // (a read error: out holds the lines before it)
        continue;
      }
      if (b == end) {  // the end of the file
        exhausted_ = true;
        break;
      }
      if (e > b && e[-1] == '\r') --e;  // (as LineReader strips it)
      if (crfsuite_blank(std::string_view(b, std::size_t(e - b)))) {
        if (open) out.sentence_ends.push_back(out.token_ends.size());
        open = false;
      } else {
        if (!open) out.sentence_lines.push_back(line_);
        open = true;
        if (!shape_.full()) shape_.observe(std::string_view(b, std::size_t(e - b)), line_);
        out.text.append(b, std::size_t(e - b));
        out.token_ends.push_back(out.text.size());
        ++tokens;
      }
      pos_ = std::size_t((nl ? nl + 1 : end) - buf_.data());
      ++line_;
    }
  } catch (const InputError&) {
    partial_ = open;
    if (open) out.sentence_ends.push_back(out.token_ends.size());
    throw;
  }
  if (open) out.sentence_ends.push_back(out.token_ends.size());  // (the end of the file ends it)
  return tokens;
}

std::size_t check_crfsuite_lines(const CrfsuiteLines& lines, std::size_t first, std::size_t end,
                                 const std::string& path, CrfsuiteShape& shape, std::exception_ptr& error) {
  CrfsuiteAttribute scratch;
  for (std::size_t i = first; i < end; ++i) {
    std::size_t number = lines.sentence_lines[i];
    try {
      for (std::size_t k = lines.first_token(i); k < lines.sentence_ends[i]; ++k, ++number) {
        const std::string_view line = lines.line(k);
        if (shape.full() && plain_line(line)) {  // the usual line: only its label to check
          crfsuite_label_end(line, path, number);
          continue;
        }
        if (std::memchr(line.data(), '\0', line.size())) throw InputError(path, number, nul_byte_problem());
        check_crfsuite_line(line, path, number, shape, scratch);
      }
    } catch (const InputError&) {
      error = std::current_exception();
      return i;
    }
  }
  return end;
}

}  // namespace crfx
