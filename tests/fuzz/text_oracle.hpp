// Shared by the libFuzzer targets: the structure of plain (not gzip) CoNLL and CRFsuite input by
// their definition (README, io.hpp), written the simple way — lines cut at '\n', one trailing
// '\r' dropped, a NUL byte anywhere an error — to hold the readers (LineReader's block reads,
// ConllReader, CrfsuiteReader) against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crfx_fuzz {

/// The lines of `bytes` with their 1-based numbers; false when the readers must refuse the input
/// for a NUL byte.
inline bool plain_lines(const std::uint8_t* bytes, std::size_t size, std::vector<std::string>& lines) {
  lines.clear();
  std::size_t begin = 0;
  while (begin < size) {
    std::size_t end = begin;
    while (end < size && bytes[end] != '\n') ++end;
    std::string line(reinterpret_cast<const char*>(bytes) + begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find('\0') != std::string::npos) return false;
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  return true;
}

inline std::vector<std::string> split_on(const std::string& line, const char* separators, bool keep_empty) {
  std::vector<std::string> out;
  std::string field;
  for (char c : line) {
    bool sep = false;
    for (const char* s = separators; *s; ++s) sep = sep || c == *s;
    if (!sep) {
      field.push_back(c);
      continue;
    }
    if (keep_empty || !field.empty()) out.push_back(field);
    field.clear();
  }
  if (keep_empty || !field.empty()) out.push_back(field);
  return out;
}

/// CoNLL: sentences of tokens (columns, line number); false when the input must be refused
/// (a NUL byte, or tokens with different column counts).
struct PlainToken {
  std::vector<std::string> fields;
  std::size_t line = 0;
};
using PlainSentences = std::vector<std::vector<PlainToken>>;

inline bool plain_conll(const std::uint8_t* bytes, std::size_t size, PlainSentences& out) {
  out.clear();
  std::vector<std::string> lines;
  if (!plain_lines(bytes, size, lines)) return false;
  std::vector<PlainToken> sentence;
  std::size_t columns = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> cols = split_on(lines[i], " \t", false);
    if (cols.empty() || cols[0].compare(0, 10, "-DOCSTART-") == 0) {
      if (!sentence.empty()) out.push_back(std::move(sentence));
      sentence.clear();
      continue;
    }
    if (columns == 0) columns = cols.size();
    if (cols.size() != columns) return false;
    sentence.push_back({std::move(cols), i + 1});
  }
  if (!sentence.empty()) out.push_back(std::move(sentence));
  return true;
}

/// CRFsuite: sequences of tokens, fields = the label then each non-empty attribute field as
/// written (escapes and values not decoded); false for a NUL byte or a space in a label. (Bad
/// attributes are refused too; the caller checks that separately.)
inline bool plain_crfsuite(const std::uint8_t* bytes, std::size_t size, PlainSentences& out) {
  out.clear();
  std::vector<std::string> lines;
  if (!plain_lines(bytes, size, lines)) return false;
  std::vector<PlainToken> sentence;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t") == std::string::npos) {
      if (!sentence.empty()) out.push_back(std::move(sentence));
      sentence.clear();
      continue;
    }
    std::vector<std::string> fields = split_on(lines[i], "\t", true);
    PlainToken tok;
    tok.line = i + 1;
    tok.fields.push_back(fields[0]);
    if (fields[0].find(' ') != std::string::npos) return false;
    for (std::size_t f = 1; f < fields.size(); ++f)
      if (!fields[f].empty()) tok.fields.push_back(fields[f]);
    sentence.push_back(std::move(tok));
  }
  if (!sentence.empty()) out.push_back(std::move(sentence));
  return true;
}

/// Whether the readers see gzip (LineReader: a regular file starting 1f 8b).
inline bool is_gzip(const std::uint8_t* bytes, std::size_t size) {
  return size >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

}  // namespace crfx_fuzz
