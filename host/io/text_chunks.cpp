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

}  // namespace crfx
