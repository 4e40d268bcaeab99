// Text readers: LineReader (plain, .gz, CRLF, long lines, NUL, corrupt streams), CoNLL and
// CRFsuite parsing with their error messages, write_file_atomic.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/io.hpp"
#include "crfx/internal/output.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

/// Passes when f() throws InputError whose what() starts with `prefix` and contains `fragment`.
::testing::AssertionResult throws_input_error(const std::function<void()>& f,
                                              const std::string& prefix,
                                              const std::string& fragment = "") {
  try {
    f();
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.compare(0, prefix.size(), prefix) != 0)
      return ::testing::AssertionFailure()
             << "message '" << what << "' lacks prefix '" << prefix << "'";
    if (what.find(fragment) == std::string::npos)
      return ::testing::AssertionFailure() << "message '" << what << "' lacks '" << fragment << "'";
    return ::testing::AssertionSuccess() << what;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "other exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

std::vector<std::string> all_lines(const std::string& path) {
  LineReader r(path);
  std::vector<std::string> out;
  std::string line;
  while (r.next(line)) {
    out.push_back(line);
    EXPECT_EQ(r.line_number(), out.size());
  }
  return out;
}

using Lines = std::vector<std::string>;

// ---- LineReader ----------------------------------------------------------------------------

TEST(LineReader, PlainLinesCrlfAndMissingFinalNewline) {
  const std::string p = temp_path("a.txt");
  write_text(p, "one\r\ntwo\n\n  \nlast");
  EXPECT_EQ(all_lines(p), (Lines{"one", "two", "", "  ", "last"}));
  write_text(p, "");
  EXPECT_TRUE(all_lines(p).empty());
  write_text(p, "\n");
  EXPECT_EQ(all_lines(p), (Lines{""}));
  write_text(p, "x\r\r\n");  // only one CR is a line terminator
  EXPECT_EQ(all_lines(p), (Lines{"x\r"}));
}

TEST(LineReader, ArbitrarilyLongLines) {
  // Longer than the reader's 256 KiB block, so lines span several reads.
  std::string big(700000, 'a');
  for (std::size_t i = 0; i < big.size(); i += 997) big[i] = char('b' + i % 20);
  const std::string p = temp_path("long.txt");
  write_text(p, "short\n" + big + "\r\n" + big + "\nend\n");
  EXPECT_EQ(all_lines(p), (Lines{"short", big, big, "end"}));
  const std::string gz = temp_path("long.txt.gz");
  write_gz(gz, "short\n" + big + "\r\n" + big + "\nend\n");
  EXPECT_EQ(all_lines(gz), (Lines{"short", big, big, "end"}));
}

TEST(LineReader, GzipIsDecompressedTransparently) {
  const std::string p = temp_path("a.txt.gz");
  write_gz(p, "He PRP B-NP\r\nreckons VBZ B-VP\n\nnarrow VB I-VP\n");
  EXPECT_EQ(all_lines(p), (Lines{"He PRP B-NP", "reckons VBZ B-VP", "", "narrow VB I-VP"}));
  // The name does not matter: a gzip file without .gz, a plain file with .gz.
  const std::string q = temp_path("no-suffix");
  write_gz(q, "x\n");
  EXPECT_EQ(all_lines(q), (Lines{"x"}));
  const std::string r = temp_path("plain.gz");
  write_text(r, "y\n");
  EXPECT_EQ(all_lines(r), (Lines{"y"}));
}

TEST(LineReader, NulByteIsAnErrorNamingTheLine) {
  const std::string p = temp_path("nul.txt");
  write_text(p, std::string("ok\nbad\0byte\nok\n", 15));
  EXPECT_TRUE(throws_input_error([&] { all_lines(p); }, p + ":2: ", "NUL byte"));
}

TEST(LineReader, UnreadableFiles) {
  const std::string missing = temp_dir() + "/missing.txt";
  try {
    LineReader r(missing);
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open: No such file or directory");
    EXPECT_EQ(e.line(), 0u);
    EXPECT_EQ(e.file(), missing);
  }
  const std::string dir = temp_dir();
  EXPECT_TRUE(throws_input_error([&] { LineReader r(dir); }, dir + ": cannot open: ",
                                 "Is a directory"));
}

TEST(LineReader, CorruptAndTruncatedGzip) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "token" + std::to_string(i * 7919 % 1000) + " NN B-NP\n";
  const std::string good = temp_path("good.gz");
  write_gz(good, text);
  const std::string bytes = read_text(good);
  ASSERT_GT(bytes.size(), 200u);

  std::string corrupt = bytes;  // damage the deflate data (the header stays valid)
  for (std::size_t i = 40; i < 60; ++i) corrupt[i] = char(corrupt[i] ^ 0x55);
  const std::string bad = temp_path("corrupt.gz");
  write_text(bad, corrupt);
  EXPECT_TRUE(throws_input_error([&] { all_lines(bad); }, bad + ":1: ", "read error"));

  // A truncated file: its complete lines are read, and the error names the line where the data
  // stops (not the first line, nor the start of the block that held it).
  const std::string cut = temp_path("truncated.gz");
  write_text(cut, bytes.substr(0, bytes.size() / 2));
  LineReader reader(cut);
  std::string line, prefix;
  std::size_t lines = 0;
  try {
    while (reader.next(line)) {
      prefix += line + "\n";
      ++lines;
    }
    ADD_FAILURE() << "a truncated file read to its end";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find(cut + ":" + std::to_string(lines + 1) + ": read error"), 0u) << e.what();
  }
  EXPECT_GT(lines, 100u);
  EXPECT_LT(lines, 2000u);
  EXPECT_EQ(text.compare(0, prefix.size(), prefix), 0) << "the lines before the truncation are the file's";
}

TEST(SplitWhitespace, RunsOfSpacesAndTabs) {
  std::vector<std::string> out{"stale", "values", "here", "x", "y"};
  split_whitespace("  a\tb  \t c ", out);
  EXPECT_EQ(out, (Lines{"a", "b", "c"}));
  split_whitespace(" \t ", out);
  EXPECT_TRUE(out.empty());
  split_whitespace("caf\xc3\xa9 x", out);  // UTF-8 bytes pass through
  EXPECT_EQ(out, (Lines{"caf\xc3\xa9", "x"}));
}

// ---- CoNLL ---------------------------------------------------------------------------------

TEST(Conll, SentencesBlankLinesDocstartCrlf) {
  const std::string p = temp_path("a.conll");
  write_text(p,
             "-DOCSTART- -X- O\r\n"
             "\r\n"
             "He PRP B-NP\r\n"
             "reckons\tVBZ   B-VP\n"
             "\n\n \t \n"
             "the DT B-NP\n"
             "-DOCSTART- -X- O\n"
             "caf\xc3\xa9 NN I-NP\n");
  const auto s = read_conll(p);
  ASSERT_EQ(s.size(), 3u);
  ASSERT_EQ(s[0].size(), 2u);
  EXPECT_EQ(s[0][0].columns, (Lines{"He", "PRP", "B-NP"}));
  EXPECT_EQ(s[0][0].line, 3u);
  EXPECT_EQ(s[0][1].columns, (Lines{"reckons", "VBZ", "B-VP"}));
  EXPECT_EQ(s[0][1].line, 4u);
  ASSERT_EQ(s[1].size(), 1u);
  EXPECT_EQ(s[1][0].line, 8u);
  ASSERT_EQ(s[2].size(), 1u);
  EXPECT_EQ(s[2][0].columns[0], "caf\xc3\xa9");
  EXPECT_EQ(s[2][0].line, 10u);
}

TEST(Conll, EmptyFileGivesNoSentences) {
  const std::string p = temp_path("empty.conll");
  write_text(p, "\n\n");
  EXPECT_TRUE(read_conll(p).empty());
}

TEST(Conll, TestDataSlice) {
  const auto s = read_conll(data_path("conll2000.train300.txt"));
  EXPECT_EQ(s.size(), 300u);
  EXPECT_EQ(s[0][0].columns, (Lines{"Confidence", "NN", "B-NP"}));
}

TEST(Conll, GzipFile) {
  const std::string p = temp_path("a.conll.gz");
  write_gz(p, "a X B\nb Y I\n\nc Z O\n");
  const auto s = read_conll(p);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1][0].columns, (Lines{"c", "Z", "O"}));
  EXPECT_EQ(s[1][0].line, 4u);
}

TEST(Conll, InconsistentColumnsNameTheLine) {
  const std::string p = temp_path("bad.conll");
  write_text(p, "He PRP B-NP\nreckons VBZ B-VP\n\nthe DT\n");
  EXPECT_TRUE(throws_input_error([&] { read_conll(p); }, p + ":4: ",
                                 "expected 3 columns (as on line 1), got 2"));
}

TEST(Conll, ExpectedColumns) {
  const std::string two = temp_path("two.conll");
  write_text(two, "a X\nb Y\n");
  const std::string three = temp_path("three.conll");
  write_text(three, "a X B\nb Y I\n");
  EXPECT_EQ(read_conll(two, 2).size(), 1u);
  EXPECT_EQ(read_conll(two, 2, true).size(), 1u);
  EXPECT_EQ(read_conll(three, 2, true).size(), 1u);
  EXPECT_TRUE(throws_input_error([&] { read_conll(three, 2); }, three + ":1: ",
                                 "expected 2 columns, got 3"));
  EXPECT_TRUE(throws_input_error([&] { read_conll(two, 3, true); }, two + ":1: ",
                                 "expected 3 or 4 columns, got 2"));
  // All tokens must agree, even when both counts would be allowed.
  const std::string mixed = temp_path("mixed.conll");
  write_text(mixed, "a X\n\nb Y I\n");
  EXPECT_TRUE(throws_input_error([&] { read_conll(mixed, 2, true); }, mixed + ":3: ",
                                 "inconsistent column count"));
}

// ---- CRFsuite ------------------------------------------------------------------------------

TEST(Crfsuite, LabelsAttributesValuesEscapes) {
  const std::string p = temp_path("a.crfsuite");
  write_text(p,
             "B-NP\tw[0]=He\ta\\:b:2.5\tx\\\\y\tp\\:q\r\n"
             "I-NP\t\tpos=PRP:-1e-3\t\n"  // empty fields (double and trailing tab) are skipped
             "\n"
             "\tw=x:0\ta:b:7\tc\\\\:3\n"  // empty label; value after the LAST unescaped ':'
             "O\n");
  const auto s = read_crfsuite(p);
  ASSERT_EQ(s.size(), 2u);
  ASSERT_EQ(s[0].size(), 2u);
  const auto& t0 = s[0][0];
  EXPECT_EQ(t0.label, "B-NP");
  EXPECT_EQ(t0.line, 1u);
  ASSERT_EQ(t0.attributes.size(), 4u);
  EXPECT_EQ(t0.attributes[0].name, "w[0]=He");
  EXPECT_EQ(t0.attributes[0].value, 1.0);
  EXPECT_EQ(t0.attributes[1].name, "a:b");
  EXPECT_EQ(t0.attributes[1].value, 2.5);
  EXPECT_EQ(t0.attributes[2].name, "x\\y");
  EXPECT_EQ(t0.attributes[2].value, 1.0);
  EXPECT_EQ(t0.attributes[3].name, "p:q");
  EXPECT_EQ(t0.attributes[3].value, 1.0);
  const auto& t1 = s[0][1];
  ASSERT_EQ(t1.attributes.size(), 1u);
  EXPECT_EQ(t1.attributes[0].name, "pos=PRP");
  EXPECT_EQ(t1.attributes[0].value, -1e-3);
  ASSERT_EQ(s[1].size(), 2u);
  const auto& t2 = s[1][0];
  EXPECT_EQ(t2.label, "");
  EXPECT_EQ(t2.line, 4u);
  ASSERT_EQ(t2.attributes.size(), 3u);
  EXPECT_EQ(t2.attributes[0].name, "w=x");
  EXPECT_EQ(t2.attributes[0].value, 0.0);
  EXPECT_EQ(t2.attributes[1].name, "a:b");
  EXPECT_EQ(t2.attributes[1].value, 7.0);
  EXPECT_EQ(t2.attributes[2].name, "c\\");
  EXPECT_EQ(t2.attributes[2].value, 3.0);
  EXPECT_EQ(s[1][1].label, "O");
  EXPECT_TRUE(s[1][1].attributes.empty());
}

TEST(Crfsuite, TestDataSlice) {
  const auto s = read_crfsuite(data_path("conll2000.train60.crfsuite.txt"));
  ASSERT_EQ(s.size(), 60u);
  EXPECT_EQ(s[0][0].label, "B-NP");
  EXPECT_EQ(s[0][0].attributes[0].name, "w[0]=Confidence");
  EXPECT_EQ(s[0][0].attributes.back().name, "__BOS__");
}

TEST(Crfsuite, MalformedAttributesNameTheLine) {
  const std::string p = temp_path("bad.crfsuite");
  auto check = [&](const std::string& field, const std::string& fragment) {
    write_text(p, "B-NP\tok\n\nI-NP\tfine\t" + field + "\n");
    EXPECT_TRUE(throws_input_error([&] { read_crfsuite(p); }, p + ":3: ", fragment)) << field;
  };
  check("a:x", "not a finite number");
  check("a:nan", "not a finite number");
  check("a:inf", "not a finite number");
  check("a:-INF", "not a finite number");
  check("a:1e999", "not a finite number");
  check("a:2.5x", "not a finite number");
  check("a: 2", "not a finite number");
  check("a:", "not a finite number");
  check(":2", "empty attribute name");
  check("a::", "not a finite number");
  check(":", "empty attribute name");
  check("a\\/b:1\\", "not a finite number");
  check("a:1e20", "attribute 'a:1e20': value 1e20 is beyond ±1e10, the range crfx accepts");
  check("a:-2e10", "is beyond ±1e10");
  // CoNLL columns read as CRFsuite lines: a space before the first tab.
  write_text(p, "B-NP\tok\n\nConfidence NN B-NP\n");
  EXPECT_TRUE(throws_input_error([&] { read_crfsuite(p); }, p + ":3: ",
                                 "'Confidence NN B-NP' has spaces before its first tab: CRFsuite lines are "
                                 "LABEL<TAB>attr<TAB>…"));
  write_text(p, "B-NP\ta:1e10\tb:-1e10\n");  // the bounds themselves are accepted
  EXPECT_EQ(read_crfsuite(p)[0][0].attributes.size(), 2u);
}

TEST(Crfsuite, OtherBackslashesAreOrdinaryCharacters) {
  // As in CRFsuite's iwa.c; WSJ-derived data has "1\/2", "hotel\/casino", "\*".
  const std::string p = temp_path("wsj.crfsuite");
  write_text(p, "NP\tw[0]=hotel\\/casino\tw=\\*\\*\ttrail\\\tx\\q:2\n");
  const auto s = read_crfsuite(p);
  ASSERT_EQ(s.size(), 1u);
  const auto& a = s[0][0].attributes;
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].name, "w[0]=hotel\\/casino");
  EXPECT_EQ(a[1].name, "w=\\*\\*");
  EXPECT_EQ(a[2].name, "trail\\");
  EXPECT_EQ(a[3].name, "x\\q");
  EXPECT_EQ(a[3].value, 2.0);
}

TEST(Crfsuite, EscapedColonAloneIsAName) {
  const std::string p = temp_path("colon.crfsuite");
  write_text(p, "L\t\\:\t\\::4\n");
  const auto s = read_crfsuite(p);
  ASSERT_EQ(s[0][0].attributes.size(), 2u);
  EXPECT_EQ(s[0][0].attributes[0].name, ":");
  EXPECT_EQ(s[0][0].attributes[1].name, ":");
  EXPECT_EQ(s[0][0].attributes[1].value, 4.0);
}

// An unescaped ':' meant inside a name (issue 42): the error says to write \: and shows the field
// escaped — where the value text is empty, or not a number while the name holds another ':'.
TEST(Crfsuite, UnescapedColonInANameIsHinted) {
  const std::string p = temp_path("colon.crfsuite");
  auto message = [&](const std::string& field) {
    write_text(p, "B-NP\tw=x\t" + field + "\n");
    try {
      read_crfsuite(p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message("w=a:b:c"),
            p + ":1: attribute 'w=a:b:c': value 'c' is not a finite number (write \\: for a colon inside an "
                "attribute name, as in 'w=a\\:b\\:c'; the value, when there is one, follows the last unescaped ':')");
  EXPECT_EQ(message("w=Note:"),
            p + ":1: attribute 'w=Note:': value '' is not a finite number (write \\: for a colon inside an "
                "attribute name, as in 'w=Note\\:'; the value, when there is one, follows the last unescaped ':')");
  // An escaped colon is kept as written in the suggestion.
  EXPECT_NE(message("t=1\\:30:pm").find("as in 't=1\\:30\\:pm'"), std::string::npos) << message("t=1\\:30:pm");
  // One colon and a value that is not a number: a value may have been meant; no hint.
  EXPECT_EQ(message("w=He:abc"), p + ":1: attribute 'w=He:abc': value 'abc' is not a finite number");
  // The escaped form reads as the name the hint says.
  write_text(p, "B-NP\tw=a\\:b\\:c\tw=Note\\:\n");
  const auto s = read_crfsuite(p);
  EXPECT_EQ(s[0][0].attributes[0].name, "w=a:b:c");
  EXPECT_EQ(s[0][0].attributes[1].name, "w=Note:");
}

/// The reader's verdict (conll_shape) on `text`, after reading all of it.
ConllShape shape_of(const std::string& text) {
  const std::string p = temp_path("shape.txt");
  write_text(p, text);
  CrfsuiteReader r(p);
  CrfsuiteSentence s;
  while (r.next(s)) {
  }
  return r.conll_shape();
}

TEST(Crfsuite, ConllShapeOfTheFirstLines) {
  // Real CRFsuite files: varying field counts, '=' in every attribute.
  EXPECT_FALSE(shape_of(read_text(data_path("conll2000.train60.crfsuite.txt"))).found());
  EXPECT_FALSE(shape_of(read_text(data_path("conll2000.test30.crfsuite.txt"))).found());
  // Fixed count, name=value attributes (condition 2).
  EXPECT_FALSE(shape_of("B-NP\tw=He\tpos=PRP\nB-VP\tw=reckons\tpos=VBZ\nB-NP\tw=the\tpos=DT\n").found());
  // Plain attributes with a fixed count, but the label first (condition 4).
  EXPECT_FALSE(shape_of("B-NP\tHe\tPRP\nB-VP\treckons\tVBZ\nB-NP\tthe\tDT\nI-NP\tdeficit\tNN\n").found());
  // name:value attributes (condition 2).
  EXPECT_FALSE(shape_of("he\tx:1\tB:2\nreckons\tx:2\tB:1\nthe\tx:1\tB:1\n").found());
  // A last field with a lower-case letter is no tag (condition 3).
  EXPECT_FALSE(shape_of("He\tPRP\tb-np\nreckons\tVBZ\tB-VP\n").found());
  // One line is too few (condition 1); so is a varying count.
  EXPECT_FALSE(shape_of("He\tPRP\tB-NP\n").found());
  EXPECT_FALSE(shape_of("He\tPRP\tB-NP\nreckons\tB-VP\n").found());
  // Tab-separated CoNLL columns.
  const ConllShape conll = shape_of("He\tPRP\tB-NP\nreckons\tVBZ\tB-VP\n\nthe\tDT\tB-NP\ndeficit\tNN\tI-NP\n");
  ASSERT_TRUE(conll.found());
  EXPECT_EQ(conll.line, 1u);
  EXPECT_EQ(conll.why,
            "lines 1–5 look like CoNLL columns, not CRFsuite attribute lines: each has 3 tab-separated fields, the "
            "attributes are not written name=value or name:value, and the last field looks like a tag (B-NP, B-VP, "
            "I-NP) where a CRFsuite line has its label first ('He' would be a label)");
  // Words without lower-case ASCII letters: many distinct first fields against few last ones.
  EXPECT_TRUE(shape_of("中国\tNR\tB-NP\n经济\tNN\tI-NP\n发展\tNN\tI-NP\n很\tAD\tB-VP\n快\tVA\tI-VP\n"
                       "。\tPU\tO\n\n我们\tPN\tB-NP\n走\tVV\tB-VP\n了\tAS\tI-VP\n路\tNN\tB-NP\n。\tPU\tO\n")
                  .found());
  // Only the first kShapeLines lines are judged.
  std::string many;
  for (std::size_t i = 0; i < CrfsuiteReader::kShapeLines; ++i) many += "B-NP\tw=x\n";
  EXPECT_FALSE(shape_of(many + "He\tPRP\tB-NP\nreckons\tVBZ\tB-VP\n").found());
}

TEST(Crfsuite, AnAttributeErrorInConllColumnsNamesTheCause) {
  // The POS tag ':' is no attribute (an empty name); in lines that look like CoNLL columns the
  // error says what they are.
  const std::string p = temp_path("conll.tsv");
  write_text(p, "He\tPRP\tB-NP\nreckons\tVBZ\tB-VP\n:\t:\tO\n");
  EXPECT_TRUE(throws_input_error([&] { read_crfsuite(p); }, p + ":3: lines 1–3 look like CoNLL columns",
                                 "CoNLL columns are trained with --format conll and a --template, and tagged with a "
                                 "model so trained (a model keeps its training format). Read as CRFsuite, this line "
                                 "fails: empty attribute name in ':'"));
  write_text(p, "B-NP\tw=He\nB-VP\t:\n");  // CRFsuite lines: the error alone
  EXPECT_TRUE(throws_input_error([&] { read_crfsuite(p); }, p + ":2: empty attribute name in ':'"));
}

// ---- AtomicFile / write_file_atomic ------------------------------------------------------

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicWrite, WritesAndReplaces) {
  const std::string dir = temp_dir();
  const std::string p = dir + "/out.txt";
  write_file_atomic(p, "first\n");
  EXPECT_EQ(read_text(p), "first\n");
  write_file_atomic(p, std::string("second\0with nul", 15));
  EXPECT_EQ(read_text(p), std::string("second\0with nul", 15));
  write_file_atomic(p, "");
  EXPECT_EQ(read_text(p), "");
  EXPECT_EQ(dir_entries(dir), (Lines{"out.txt"}));  // no temporary files left behind
  ::chmod(p.c_str(), 0640);  // the mode of a replaced file is kept
  write_file_atomic(p, "x");
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(AtomicWrite, PiecesAndAbandon) {
  const std::string dir = temp_dir();
  const std::string p = dir + "/model.bin";
  write_text(p, "old\n");
  {  // abandoned half-way (e.g. an exception while streaming): the old file stays, no temp file
    AtomicFile f(p);
    f.write("new ", 4);
  }
  EXPECT_EQ(read_text(p), "old\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"model.bin"}));
  AtomicFile f(p);
  f.write("new ", 4);
  f.write("content\n", 8);
  EXPECT_EQ(read_text(p), "old\n");  // not visible before commit
  f.commit();
  EXPECT_EQ(read_text(p), "new content\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"model.bin"}));
  EXPECT_THROW(f.write("x", 1), Error);  // committed: no more writes
}

TEST(AtomicWrite, PathIsADirectory) {
  const std::string dir = temp_dir();
  const std::string target = dir + "/target";
  std::filesystem::create_directory(target);
  write_text(target + "/inside.txt", "precious\n");
  EXPECT_THROW(write_file_atomic(target, "data"), Error);
  EXPECT_TRUE(std::filesystem::is_directory(target));
  EXPECT_EQ(read_text(target + "/inside.txt"), "precious\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"target"}));
}

TEST(AtomicWrite, MissingDirectory) {
  const std::string p = temp_dir() + "/no/such/dir/out.txt";
  try {
    write_file_atomic(p, "data");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
}

TEST(AtomicWrite, CheckOutputPathRefusesWhatAWriteWouldFailOn) {
  const std::string dir = temp_dir();
  EXPECT_NO_THROW(check_output_path(dir + "/new.txt"));
  write_text(dir + "/file", "x");
  EXPECT_NO_THROW(check_output_path(dir + "/file"));  // overwriting is fine
  auto message = [](const std::string& p) {
    try {
      check_output_path(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message(""), "cannot write to an empty path");
  EXPECT_EQ(message(dir), "cannot write " + dir + ": it is a directory");
  EXPECT_EQ(message(dir + "/missing/x"),
            "cannot write " + dir + "/missing/x: directory " + dir + "/missing: No such file or directory");
  EXPECT_EQ(message(dir + "/file/x"), "cannot write " + dir + "/file/x: " + dir + "/file is not a directory");
  EXPECT_EQ(dir_entries(dir), (Lines{"file"}));  // nothing created
}

TEST(AtomicWrite, FailureMidwayLeavesFileUntouched) {
  // The file system refusing bytes after the first few KiB (a file-size limit here; a full disk
  // behaves alike): the error names the file, the old content stays, no temporary file remains.
  // Unlike the permission test below, this also runs as root.
  const std::string dir = temp_dir();
  const std::string p = dir + "/keep.txt";
  write_text(p, "precious\n");
  AtomicFile f(p);
  {
    FileSizeLimit limit(4096);
    f.write(std::string(3000, 'a').data(), 3000);  // within the limit
    try {
      f.write(std::string(3000, 'b').data(), 3000);  // crosses it: partial write, then EFBIG
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("File too large"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(f.commit(), Error);  // nothing to commit after a failure
  EXPECT_EQ(read_text(p), "precious\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"keep.txt"}));
}

TEST(AtomicWrite, UnwritableDirectoryLeavesFileUntouched) {
  const std::string dir = temp_dir();
  const std::string p = dir + "/keep.txt";
  write_text(p, "precious\n");
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  if (::access(dir.c_str(), W_OK) == 0) {  // root ignores directory permissions
    ::chmod(dir.c_str(), 0755);
    GTEST_SKIP() << "directory permissions are not enforced for this user (root?)";
  }
  EXPECT_THROW(write_file_atomic(p, "clobbered"), Error);
  ::chmod(dir.c_str(), 0755);
  EXPECT_EQ(read_text(p), "precious\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"keep.txt"}));
}

// ---- what an output path names -------------------------------------------------------------

TEST(AtomicWrite, ASymlinksTargetIsReplacedAndTheLinkKept) {
  const std::string dir = temp_dir();
  write_text(dir + "/target.txt", "old\n");
  ASSERT_EQ(::symlink("target.txt", (dir + "/link.txt").c_str()), 0);
  write_file_atomic(dir + "/link.txt", "new\n");
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/link.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(read_text(dir + "/target.txt"), "new\n");
  // A dangling link: its target is created.
  ASSERT_EQ(::symlink("made.txt", (dir + "/dangling.txt").c_str()), 0);
  write_file_atomic(dir + "/dangling.txt", "made\n");
  EXPECT_EQ(read_text(dir + "/made.txt"), "made\n");
  EXPECT_EQ(dir_entries(dir), (Lines{"dangling.txt", "link.txt", "made.txt", "target.txt"}));
}

TEST(AtomicWrite, AFifoIsWrittenInPlace) {
  const std::string dir = temp_dir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_text(fifo); });
  write_file_atomic(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a file";
  EXPECT_EQ(dir_entries(dir), (Lines{"fifo"}));
}

TEST(AtomicWrite, ACharacterDeviceIsWrittenInPlace) {
  const std::string dir = temp_dir();
  const std::string dev = dir + "/null";  // a /dev/null of our own
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "cannot create a device node here (mknod needs CAP_MKNOD): " << std::strerror(errno);
  AtomicFile f(dev);
  f.write("x", 1);
  f.commit();
  struct stat st;
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced by a file";
  EXPECT_EQ(dir_entries(dir), (Lines{"null"}));
}

TEST(AtomicWrite, ReadOnlyFilesLongNamesAndInputsAreRefused) {
  const std::string dir = temp_dir();
  const std::string ro = dir + "/ro.txt";
  write_text(ro, "keep\n");
  ASSERT_EQ(::chmod(ro.c_str(), 0444), 0);
  EXPECT_EQ(error_text([&] { write_file_atomic(ro, "x"); }),
            "cannot write " + ro + ": it is read-only (mode 0444); --force replaces it, or make it writable or "
            "choose another name");
  EXPECT_NE(error_text([&] { check_output_path(ro); }).find("it is read-only"), std::string::npos);
  EXPECT_EQ(read_text(ro), "keep\n");
  set_replace_read_only(true);  // --force: replaced, its mode kept
  write_file_atomic(ro, "forced\n");
  set_replace_read_only(false);
  EXPECT_EQ(read_text(ro), "forced\n");
  struct stat st;
  ASSERT_EQ(::stat(ro.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);

  const std::string long_name = dir + "/" + std::string(240, 'a');
  EXPECT_NE(error_text([&] { check_output_path(long_name); })
                .find("the file name is too long (240 characters; at most 231, to leave room for its temporary"),
            std::string::npos);
  EXPECT_EQ(error_text([&] { check_output_path(dir + "/" + std::string(231, 'b')); }), "(no error)");

  const std::string in = dir + "/in.txt";
  write_text(in, "data\n");
  ASSERT_EQ(::symlink("in.txt", (dir + "/alias.txt").c_str()), 0);
  EXPECT_EQ(error_text([&] { check_not_an_input(dir + "/alias.txt", {dir + "/other.txt", in}); }),
            "cannot write " + dir + "/alias.txt: it is the input " + in + " of this run; choose another name");
  EXPECT_EQ(error_text([&] { check_not_an_input(in, {in}); }),
            "cannot write " + in + ": it is an input of this run; choose another name");
  EXPECT_EQ(error_text([&] { check_not_an_input(dir + "/new.txt", {in}); }), "(no error)");
}

// A corrupt or binary input cannot grow one line without bound: 64 MiB (a small .gz can expand to
// gigabytes on one line).
TEST(LineReader, ALineBeyondTheCapIsAnError) {
  const std::string p = temp_path("long-line.gz");
  write_gz(p, "ok\n" + std::string((std::size_t(64) << 20) + 1, 'a') + "\n");
  LineReader in(p);
  std::string line;
  ASSERT_TRUE(in.next(line));
  EXPECT_EQ(line, "ok");
  EXPECT_TRUE(throws_input_error([&] { in.next(line); }, p + ":2: ",
                                 "a line longer than 64 MiB (a binary or corrupt file? CRFX_MAX_LINE_MB raises"));
}

}  // namespace
}  // namespace crfx::test

// A graceful stop (crfx train's first Ctrl-C): the first SIGINT is recorded; the same signal again
// within a second is that request delivered twice (`timeout -s INT` signals the process, then its
// process group) and is ignored; later, or another signal, ends the process. Each in a child.
namespace {
int graceful_child(const std::function<void()>& signals) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    crfx::remove_temporaries_on_signals();
    crfx::set_graceful_stop(true);
    signals();
    ::_exit(crfx::stop_signal() == SIGINT ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}
}  // namespace

TEST(GracefulStop, TheSameSignalTwiceAtOnceIsOneRequest) {
  int status = graceful_child([] {
    std::raise(SIGINT);  // (raise returns after the handler ran)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::raise(SIGINT);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  status = graceful_child([] {
    std::raise(SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    std::raise(SIGINT);  // a second Ctrl-C: ends it at once
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  status = graceful_child([] {
    std::raise(SIGINT);
    std::raise(SIGTERM);  // another signal while stopping: ends it at once
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
}
