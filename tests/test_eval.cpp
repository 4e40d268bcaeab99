// Chunk evaluation: conlleval's counts, rules and report format.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "crfx/errors.hpp"
#include "crfx/internal/eval.hpp"
#include "test_util.hpp"

namespace crfx {
namespace {

using Labels = std::vector<std::string>;

ChunkEvaluator eval_one(const Labels& gold, const Labels& guess, EvalOptions options = {}) {
  ChunkEvaluator ev(options);
  ev.add(gold, guess);
  return ev;
}

void expect_counts(const ChunkCounts& c, std::size_t correct, std::size_t gold, std::size_t guessed) {
  EXPECT_EQ(c.correct, correct);
  EXPECT_EQ(c.gold, gold);
  EXPECT_EQ(c.guessed, guessed);
}

ChunkEvaluator eval_text(const std::string& text, EvalOptions options = {}) {
  const std::string path = test::temp_path("eval.txt");
  test::write_text(path, text);
  return evaluate_file(path, options);
}

std::string error_of(const std::string& text, EvalOptions options = {}, std::string* path_out = nullptr) {
  const std::string path = test::temp_path("bad.txt");
  if (path_out) *path_out = path;
  test::write_text(path, text);
  try {
    evaluate_file(path, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChunkCounts, Formulas) {
  ChunkCounts c;
  c.correct = 3;
  c.gold = 4;
  c.guessed = 6;
  EXPECT_DOUBLE_EQ(c.precision(), 50.0);
  EXPECT_DOUBLE_EQ(c.recall(), 75.0);
  EXPECT_DOUBLE_EQ(c.f1(), 60.0);  // 2·50·75 / 125

  ChunkCounts none;  // nothing guessed, nothing in gold: all zero, no division by zero
  EXPECT_EQ(none.precision(), 0.0);
  EXPECT_EQ(none.recall(), 0.0);
  EXPECT_EQ(none.f1(), 0.0);

  ChunkCounts unguessed;
  unguessed.gold = 4;
  EXPECT_EQ(unguessed.precision(), 0.0);
  EXPECT_EQ(unguessed.recall(), 0.0);
  EXPECT_EQ(unguessed.f1(), 0.0);
}

TEST(ChunkEvaluator, Iob2CountsAndExactReport) {
  // gold: NP(0-1) VP(3) PP(4) NP(5-6); guess: NP(0-1) VP(3) NP(4) NP(5-6); 3 correct.
  const auto ev = eval_one({"B-NP", "I-NP", "O", "B-VP", "B-PP", "B-NP", "I-NP"},
                           {"B-NP", "I-NP", "O", "B-VP", "B-NP", "B-NP", "I-NP"});
  EXPECT_EQ(ev.tokens(), 7u);
  EXPECT_EQ(ev.correct_tokens(), 6u);
  EXPECT_NEAR(ev.accuracy(), 600.0 / 7, 1e-12);
  expect_counts(ev.overall(), 3, 4, 4);
  ASSERT_EQ(ev.by_type().size(), 3u);
  expect_counts(ev.by_type().at("NP"), 2, 2, 3);
  expect_counts(ev.by_type().at("VP"), 1, 1, 1);
  expect_counts(ev.by_type().at("PP"), 0, 1, 0);
  // Computed by hand (and what conlleval.pl prints for the same input).
  EXPECT_EQ(ev.report(),
            "processed 7 tokens with 4 phrases; found: 4 phrases; correct: 3.\n"
            "accuracy:  85.71%; precision:  75.00%; recall:  75.00%; FB1:  75.00\n"
            "               NP: precision:  66.67%; recall: 100.00%; FB1:  80.00  3\n"
            "               PP: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n"
            "               VP: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n");
}

TEST(ChunkEvaluator, Iob1IStartsAChunkAfterO) {
  // IOB1: I- opens a chunk after O or another type; B- only splits two adjacent same-type chunks.
  // gold: NP(0-1) NP(2) VP(4); guess: NP(0-2) VP(4).
  const auto ev = eval_one({"I-NP", "I-NP", "B-NP", "O", "I-VP"}, {"I-NP", "I-NP", "I-NP", "O", "I-VP"});
  expect_counts(ev.overall(), 1, 3, 2);
  expect_counts(ev.by_type().at("NP"), 0, 2, 1);
  expect_counts(ev.by_type().at("VP"), 1, 1, 1);
  EXPECT_EQ(ev.correct_tokens(), 4u);
}

TEST(ChunkEvaluator, Iobes) {
  // gold: PER(0-1) LOC(2) ORG(4-6) PER(7) PER(8)
  // guess: PER(0-1) LOC(2) ORG(4-5) ORG(6) PER(7) PER(8, B- then the sentence ends)
  const auto ev = eval_one({"B-PER", "E-PER", "S-LOC", "O", "B-ORG", "I-ORG", "E-ORG", "S-PER", "S-PER"},
                           {"B-PER", "E-PER", "S-LOC", "O", "B-ORG", "E-ORG", "S-ORG", "S-PER", "B-PER"});
  expect_counts(ev.overall(), 4, 5, 6);
  expect_counts(ev.by_type().at("PER"), 3, 3, 3);
  expect_counts(ev.by_type().at("LOC"), 1, 1, 1);
  expect_counts(ev.by_type().at("ORG"), 0, 1, 2);
  EXPECT_EQ(ev.correct_tokens(), 6u);
}

TEST(ChunkEvaluator, IobesAdjacentChunksOfOneType) {
  // E- followed by B- of the same type: two chunks (gold), against one long chunk (guess).
  const auto ev = eval_one({"B-NP", "E-NP", "B-NP", "E-NP"}, {"B-NP", "I-NP", "I-NP", "E-NP"});
  expect_counts(ev.overall(), 0, 2, 1);
  const auto same = eval_one({"B-NP", "E-NP", "B-NP", "E-NP"}, {"B-NP", "E-NP", "B-NP", "E-NP"});
  expect_counts(same.overall(), 2, 2, 2);
  // S- next to S- of the same type: two single-token chunks.
  const auto singles = eval_one({"S-NP", "S-NP"}, {"B-NP", "E-NP"});
  expect_counts(singles.overall(), 0, 2, 1);
}

TEST(ChunkEvaluator, IoeSchemes) {
  // IOE1: E- only closes a chunk followed by one of the same type. gold: NP(0-1) NP(2-3).
  const auto ev = eval_one({"I-NP", "E-NP", "I-NP", "I-NP", "O"}, {"I-NP", "I-NP", "I-NP", "I-NP", "O"});
  expect_counts(ev.overall(), 0, 2, 1);
  const auto ok = eval_one({"I-NP", "E-NP", "I-NP", "I-NP", "O"}, {"I-NP", "E-NP", "I-NP", "I-NP", "O"});
  expect_counts(ok.overall(), 2, 2, 2);
}

TEST(ChunkEvaluator, TypeChangeMidChunk) {
  // I-VP after I-NP starts a new (VP) chunk, so the guess splits the gold NP in two.
  const auto ev = eval_one({"B-NP", "I-NP", "I-NP"}, {"B-NP", "I-NP", "I-VP"});
  expect_counts(ev.overall(), 0, 1, 2);
  expect_counts(ev.by_type().at("NP"), 0, 1, 1);
  expect_counts(ev.by_type().at("VP"), 0, 0, 1);
  EXPECT_EQ(ev.correct_tokens(), 2u);
  // A chunk whose type differs but whose span matches is not correct either.
  const auto typed = eval_one({"B-NP", "I-NP", "O"}, {"B-VP", "I-VP", "O"});
  expect_counts(typed.overall(), 0, 1, 1);
  // The guess ending one token late is wrong.
  const auto late = eval_one({"B-NP", "I-NP", "O"}, {"B-NP", "I-NP", "I-NP"});
  expect_counts(late.overall(), 0, 1, 1);
}

TEST(ChunkEvaluator, ChunkAtSentenceEndAndSentenceBoundaries) {
  ChunkEvaluator ev;
  ev.add({"O", "B-NP", "I-NP"}, {"O", "B-NP", "I-NP"});  // chunk closed by the end of the sentence
  expect_counts(ev.overall(), 1, 1, 1);
  // IOB1: an I-NP opening the next sentence starts a new chunk (the boundary is an O).
  ev.add({"I-NP", "O"}, {"I-NP", "O"});
  expect_counts(ev.overall(), 2, 2, 2);
  EXPECT_EQ(ev.tokens(), 5u);
  // Empty sentences change nothing.
  ev.add({}, {});
  expect_counts(ev.overall(), 2, 2, 2);
  EXPECT_EQ(ev.tokens(), 5u);
}

TEST(ChunkEvaluator, AllOutside) {
  const auto ev = eval_one({"O", "O", "O"}, {"O", "O", "O"});
  expect_counts(ev.overall(), 0, 0, 0);
  EXPECT_TRUE(ev.by_type().empty());
  EXPECT_EQ(ev.accuracy(), 100.0);
  EXPECT_EQ(ev.report(),
            "processed 3 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"
            "accuracy: 100.00%; precision:   0.00%; recall:   0.00%; FB1:   0.00\n");
}

TEST(ChunkEvaluator, NothingGuessed) {
  const auto ev = eval_one({"B-NP", "O", "B-VP"}, {"O", "O", "O"});
  expect_counts(ev.overall(), 0, 2, 0);
  EXPECT_EQ(ev.report(),
            "processed 3 tokens with 2 phrases; found: 0 phrases; correct: 0.\n"
            "accuracy:  33.33%; precision:   0.00%; recall:   0.00%; FB1:   0.00\n"
            "               NP: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n"
            "               VP: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n");
}

TEST(ChunkEvaluator, EmptyInputReport) {
  ChunkEvaluator ev;
  EXPECT_EQ(ev.accuracy(), 0.0);
  EXPECT_EQ(ev.report(), "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n");
}

TEST(ChunkEvaluator, TypesWithHyphensAndGuessOnlyTypes) {
  // The label splits at its first hyphen only; a type seen only in the guess is listed too.
  const auto ev = eval_one({"B-A-B", "I-A-B", "O"}, {"B-A-B", "I-A-B", "B-XY"});
  expect_counts(ev.by_type().at("A-B"), 1, 1, 1);
  expect_counts(ev.by_type().at("XY"), 0, 0, 1);
  EXPECT_EQ(ev.report(),
            "processed 3 tokens with 1 phrases; found: 2 phrases; correct: 1.\n"
            "accuracy:  66.67%; precision:  50.00%; recall: 100.00%; FB1:  66.67\n"
            "              A-B: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
            "               XY: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n");
}

TEST(ChunkEvaluator, UntypedTagsListedTwiceLikeConlleval) {
  // Tags without a type ("B", "I") form chunks of the empty type. conlleval's de-duplication of
  // the sorted type list does not catch the empty name, so its line appears twice.
  const auto ev = eval_one({"B", "I", "O", "B"}, {"I", "I", "O", "O"});
  expect_counts(ev.overall(), 1, 2, 1);
  EXPECT_EQ(ev.report(),
            "processed 4 tokens with 2 phrases; found: 1 phrases; correct: 1.\n"
            "accuracy:  50.00%; precision: 100.00%; recall:  50.00%; FB1:  66.67\n"
            "                 : precision: 100.00%; recall:  50.00%; FB1:  66.67  1\n"
            "                 : precision: 100.00%; recall:  50.00%; FB1:  66.67  1\n");
}

TEST(ChunkEvaluator, BracketTagsAreSingleTokenChunks) {
  // conlleval's '[' / ']' tags: chunks of length 1; '.' is neither a start nor an end.
  const auto ev = eval_one({"[-NP", "]-NP", ".", "[-VP"}, {"[-NP", "]-NP", ".", "O"});
  expect_counts(ev.overall(), 2, 3, 2);
}

TEST(ChunkEvaluator, RawLabels) {
  // -r: no prefixes; every label other than the outside one is a one-token chunk of its own type.
  EvalOptions raw;
  raw.raw = true;
  raw.outside = "NONE";
  const auto ev = eval_one({"PER", "PER", "NONE", "LOC", "O"}, {"PER", "O", "NONE", "LOC", "PER"}, raw);
  expect_counts(ev.overall(), 2, 3, 3);  // "O" counts as outside too
  expect_counts(ev.by_type().at("PER"), 1, 2, 2);
  expect_counts(ev.by_type().at("LOC"), 1, 1, 1);
  EXPECT_EQ(ev.correct_tokens(), 3u);
  EXPECT_EQ(ev.report(),
            "processed 5 tokens with 3 phrases; found: 3 phrases; correct: 2.\n"
            "accuracy:  60.00%; precision:  66.67%; recall:  66.67%; FB1:  66.67\n"
            "              LOC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
            "              PER: precision:  50.00%; recall:  50.00%; FB1:  50.00  2\n");
  // In raw mode a prefixed label is just a type name.
  const auto prefixed = eval_one({"B-NP", "I-NP"}, {"B-NP", "B-NP"}, raw);
  expect_counts(prefixed.overall(), 1, 2, 2);
  expect_counts(prefixed.by_type().at("B-NP"), 1, 1, 2);
}

TEST(ChunkEvaluator, OutsideLabelOnlyMattersInRawMode) {
  // As in conlleval, -o is consulted only with -r; otherwise "NONE" is a tag of no type.
  EvalOptions opt;
  opt.outside = "NONE";
  const auto ev = eval_one({"B-NP", "NONE", "B-NP"}, {"B-NP", "NONE", "B-NP"}, opt);
  EXPECT_EQ(ev.overall().gold, 3u);  // NP, a chunk of empty type ("NONE"), NP
  EXPECT_EQ(ev.overall().gold, ev.overall().guessed);
  EXPECT_EQ(ev.overall().correct, ev.overall().gold);
  EXPECT_EQ(ev.by_type().at("NP").correct, 2u);
  EXPECT_EQ(ev.by_type().count(""), 1u);
  // With -r, "NONE" is the outside label: two chunks only.
  opt.raw = true;
  const auto raw = eval_one({"NP", "NONE", "NP"}, {"NP", "NONE", "NP"}, opt);
  EXPECT_EQ(raw.overall().gold, 2u);
  EXPECT_EQ(raw.by_type().count(""), 0u);
}

TEST(ChunkEvaluator, MismatchedLengthsThrow) {
  ChunkEvaluator ev;
  EXPECT_THROW(ev.add({"O", "O"}, {"O"}), Error);
}

TEST(EvaluateFile, ColumnsSentencesAndDocstart) {
  const std::string text =
      "-DOCSTART- -X- O O\n"
      "\n"
      "He PRP B-NP B-NP\n"
      "reckons VBZ B-VP B-VP\n"
      "the DT B-NP B-NP\n"
      "deficit NN I-NP I-NP\n"
      "-DOCSTART- -X- O O\n"  // a boundary: the I-NP below opens a new chunk
      "growth NN I-NP I-NP\n"
      "\n"
      "\n"
      "will MD B-VP B-NP\n"
      "narrow VB I-VP I-VP\n"
      "-X- -X- O O\n"  // conlleval's own boundary marker
      "to TO B-PP B-PP\n";  // no newline at the end
  const auto ev = eval_text(text);
  EXPECT_EQ(ev.tokens(), 8u);  // -DOCSTART- and -X- lines are not tokens
  EXPECT_EQ(ev.correct_tokens(), 7u);
  expect_counts(ev.overall(), 5, 6, 7);
  expect_counts(ev.by_type().at("NP"), 3, 3, 4);
  expect_counts(ev.by_type().at("VP"), 1, 2, 2);
  expect_counts(ev.by_type().at("PP"), 1, 1, 1);
}

TEST(EvaluateFile, SameCountsAsAddingSentences) {
  const std::string text =
      "a B-NP B-NP\r\n"
      "b I-NP B-NP\r\n"
      "\r\n"
      "c\tO\tB-VP\r\n"  // tabs and CRLF are fine
      "d  B-VP   I-VP\r\n"
      "\r\n";
  const auto file = eval_text(text);
  ChunkEvaluator ev;
  ev.add({"B-NP", "I-NP"}, {"B-NP", "B-NP"});
  ev.add({"O", "B-VP"}, {"B-VP", "I-VP"});
  EXPECT_EQ(file.report(), ev.report());
  EXPECT_EQ(file.tokens(), 4u);
  expect_counts(file.overall(), 0, 2, 3);
}

TEST(EvaluateFile, SentenceProbabilityLinesAreSkippedOnlyBeforeASentence) {
  // What `crfx tag --probability` writes: "# p" (CoNLL data, as CRF++ -v1) or
  // "@probability<TAB>p" (CRFsuite data) before each sentence, whatever the token width.
  const std::string plain = "He PRP B-NP B-NP\nreckons VBZ B-VP B-NP\n\nthe DT B-NP B-NP\n";
  const std::string with_p =
      "# 0.912345\nHe PRP B-NP B-NP\nreckons VBZ B-VP B-NP\n\n# 1.000000\nthe DT B-NP B-NP\n";
  EXPECT_EQ(eval_text(with_p).report(), eval_text(plain).report());
  EXPECT_EQ(eval_text(with_p).tokens(), 3u);
  const std::string two = "B-NP\tB-NP\nI-NP\tB-NP\n\nO\tO\n";
  const std::string two_p = "@probability\t0.250000\nB-NP\tB-NP\nI-NP\tB-NP\n\n"
                            "@probability\t0.000001\nO\tO\n";
  EXPECT_EQ(eval_text(two_p).report(), eval_text(two).report());
  // Anywhere else, or not a probability, such a line is a token like any other: "#" with a label
  // as its guess is the pound-sign token of CoNLL-2000 (2 columns here), a number out of [0, 1]
  // or a line inside a sentence is not the probability line.
  EXPECT_EQ(eval_text("# B-NP\n$ I-NP\n").tokens(), 2u);
  EXPECT_EQ(eval_text("# 1.5\na B-NP\n").tokens(), 2u);
  EXPECT_EQ(eval_text("a O\n# 0.5\n").tokens(), 2u);
  std::string path;
  std::string e = error_of("a B B-NP B-NP\n# 0.5\n", {}, &path);
  EXPECT_EQ(e, path + ":2: expected 4 columns (as on line 1), got 2");
  // n-best output is refused where its rank line stands; elsewhere such a line is a token.
  for (const char* text : {"# 0 0.912345\na B-NP B-NP\n", "a B-NP B-NP\n\n# 1 0.1\nb O O\n",
                           "@nbest\t0\t0.5\nB-NP\tB-NP\n"}) {
    e = error_of(text, {}, &path);
    EXPECT_NE(e.find(path + ":"), std::string::npos) << e;
    EXPECT_NE(e.find("n-best output (crfx tag --nbest)"), std::string::npos) << e;
  }
  EXPECT_EQ(eval_text("# 0 B-NP\n$ CD I-NP\n").tokens(), 2u);  // "#" tagged B-NP: a token
}

TEST(EvaluateFile, MarginalColumnsAfterTheGuessAreNotLabels) {
  // `crfx tag --marginals` appends LABEL:p (p as "%.6f") after the guess.
  const std::string plain = "He PRP B-NP B-NP\nreckons VBZ B-VP B-NP\n\nthe DT B-NP I-NP\n";
  const std::string marg =
      "He PRP B-NP B-NP B-NP:0.912345 B-VP:0.087655\nreckons VBZ B-VP B-NP B-NP:0.600000 B-VP:0.400000\n\n"
      "the DT B-NP I-NP B-NP:0.000000 B-VP:1.000000\n";
  EXPECT_EQ(eval_text(marg).report(), eval_text(plain).report());
  // Not that format: labels like any other (no six decimals, out of [0, 1], no label before ':').
  EXPECT_EQ(eval_text("a B-X:0.5 B-X:0.5\n").by_type().count("X:0.5"), 1u);
  EXPECT_EQ(eval_text("a B-X:2.000000 B-X:2.000000\n").by_type().count("X:2.000000"), 1u);
  EXPECT_EQ(eval_text("a :0.500000 :0.500000\n").tokens(), 1u);
  std::string path;
  const std::string e = error_of("B-NP:0.500000 I-NP:0.500000\n", {}, &path);
  EXPECT_EQ(e, path + ":1: a token needs at least 2 columns (gold and guessed label), got 0 before its LABEL:p columns");
}

TEST(EvaluateFile, EndOfInputWithoutBoundary) {
  // conlleval closes the chunk open at the end of the input without a boundary step; for an
  // unknown tag ("X") that a boundary would not end, the counts depend on the final blank line.
  const auto no_blank = eval_text("a B-NP B-NP\nb X I\n");
  expect_counts(no_blank.overall(), 2, 2, 2);
  const auto blank = eval_text("a B-NP B-NP\nb X I\n\n");
  expect_counts(blank.overall(), 1, 2, 2);
}

TEST(EvaluateFile, GzipAndCrlfReadLikePlain) {
  // Two gold/guess mismatches so the counts are not trivially all-correct.
  const std::string text =
      "He B-NP B-NP\r\nreckons B-VP B-VP\r\nthe B-NP I-NP\r\ndeficit I-NP I-NP\r\n\r\n"
      "will B-VP B-VP\nnarrow I-VP O\n";
  const std::string gz = test::temp_path("tagged.txt.gz");
  test::write_gz(gz, text);
  const auto a = evaluate_file(gz);
  const auto b = eval_text(text);
  EXPECT_EQ(a.report(), b.report());
  EXPECT_EQ(a.tokens(), 6u);
  EXPECT_EQ(a.correct_tokens(), 4u);
  // Guessed I-NP after B-VP opens a chunk (conlleval): "the deficit" is still right; "will" alone
  // is a wrong VP.
  expect_counts(a.overall(), 3, 4, 4);
}

TEST(EvaluateFile, RawOption) {
  EvalOptions raw;
  raw.raw = true;
  const auto ev = eval_text("a PER PER\nb O PER\n\nc LOC O\n", raw);
  expect_counts(ev.overall(), 1, 2, 2);
}

TEST(EvaluateFile, MalformedInput) {
  std::string path;
  std::string e = error_of("a B B-NP B-NP\nb I I-NP I-NP\n\nc I-NP I-NP\n", {}, &path);
  EXPECT_EQ(e, path + ":4: expected 4 columns (as on line 1), got 3");
  e = error_of("\n\nB-NP\n", {}, &path);
  EXPECT_EQ(e, path + ":3: a token needs at least 2 columns (gold and guessed label), got 1");
  e = error_of("a B-NP B-NP\n-X- O\n", {}, &path);  // a -X- boundary line must match too
  EXPECT_EQ(e, path + ":2: expected 3 columns (as on line 1), got 2");
  // -DOCSTART- lines are skipped whatever their width.
  EXPECT_EQ(error_of("-DOCSTART- O\na B-NP B-NP\n"), "(no error)");
  // A file without a single token is an error, not a score of nothing.
  for (const char* text : {"", "\n\n", "-DOCSTART- -X- O O\n\n", "-X- O O\n"}) {
    e = error_of(text, {}, &path);
    EXPECT_EQ(e, path + ": no tokens to evaluate (the file is empty or has only boundaries)")
        << '"' << text << '"';
  }

  const std::string missing = test::temp_dir() + "/missing.txt";
  try {
    evaluate_file(missing);
    FAIL() << "no error for a missing file";
  } catch (const InputError& err) {
    EXPECT_EQ(err.file(), missing);
    EXPECT_EQ(err.line(), 0u);
  }
}

TEST(EvaluateFile, BundledData) {
  // Gold against itself: every chunk of the CoNLL-2000 slice is found.
  const std::string src = test::read_text(test::data_path("conll2000.test100.txt"));
  std::string text;
  std::size_t pos = 0;
  while (pos < src.size()) {
    std::size_t end = src.find('\n', pos);
    if (end == std::string::npos) end = src.size();
    std::string line = src.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos)
      line += " " + line.substr(line.find_last_of(" \t") + 1);
    text += line + "\n";
    pos = end + 1;
  }
  const auto ev = eval_text(text);
  EXPECT_GT(ev.tokens(), 1000u);
  EXPECT_EQ(ev.correct_tokens(), ev.tokens());
  EXPECT_GT(ev.overall().gold, 100u);
  EXPECT_EQ(ev.overall().correct, ev.overall().gold);
  EXPECT_EQ(ev.overall().guessed, ev.overall().gold);
  EXPECT_NE(ev.report().find("FB1: 100.00\n"), std::string::npos);
}

// ---- item evaluation (any tag set) ---------------------------------------------------------

TEST(ChunkTagSet, RecognisesChunkSchemesAndNothingElse) {
  using S = std::set<std::string>;
  EXPECT_TRUE(chunk_tag_set(S{"B-NP", "I-NP", "O"}));
  EXPECT_TRUE(chunk_tag_set(S{"B-PER", "I-PER", "E-PER", "S-PER", "O"}));  // IOBES
  EXPECT_TRUE(chunk_tag_set(S{"B", "I", "O"}));                            // untyped IOB
  EXPECT_TRUE(chunk_tag_set(S{"O"}));
  EXPECT_TRUE(chunk_tag_set(S{}));
  EXPECT_TRUE(chunk_tag_set(S{"B-NP", "OUT"}, "OUT"));
  EXPECT_FALSE(chunk_tag_set(S{"B-NP", "OUT"}));
  EXPECT_FALSE(chunk_tag_set(S{"NOUN", "VERB", "DET"}));  // UD POS
  EXPECT_FALSE(chunk_tag_set(S{"NN", "IN", "B-NP"}));     // one label without a prefix is enough
  EXPECT_FALSE(chunk_tag_set(S{"B-"}));                   // a prefix needs a type after the hyphen
  EXPECT_FALSE(chunk_tag_set(S{"BX", "O"}));
  EXPECT_FALSE(chunk_tag_set(S{"Sing"}));
  EXPECT_EQ(first_non_chunk_label(S{"B-NP", "NN", "VB"}), "NN");
  EXPECT_EQ(first_non_chunk_label(S{"B-NP", "O"}), "");
}

// Hand-computed: 7 tokens, 3 sentences; DET 2/2/2, NOUN gold 3 guessed 3 correct 2, VERB gold 2
// guessed 1 correct 1, ADJ gold 0 guessed 1 (only guessed).
ItemEvaluator small_items() {
  ItemEvaluator ev;
  ev.add({"DET", "NOUN", "VERB"}, {"DET", "NOUN", "NOUN"});
  ev.add({"DET", "NOUN"}, {"DET", "NOUN"});
  ev.add({"NOUN", "VERB"}, {"ADJ", "VERB"});
  return ev;
}

TEST(ItemEvaluator, CountsAndAveragesByHand) {
  const ItemEvaluator ev = small_items();
  EXPECT_EQ(ev.tokens(), 7u);
  EXPECT_EQ(ev.correct_tokens(), 5u);
  EXPECT_EQ(ev.sentences(), 3u);
  EXPECT_EQ(ev.correct_sentences(), 1u);
  EXPECT_DOUBLE_EQ(ev.accuracy(), 500.0 / 7);
  EXPECT_DOUBLE_EQ(ev.sentence_accuracy(), 100.0 / 3);
  ASSERT_EQ(ev.by_label().size(), 4u);
  const LabelCounts& noun = ev.by_label().at("NOUN");
  EXPECT_EQ(noun.gold, 3u);
  EXPECT_EQ(noun.guessed, 3u);
  EXPECT_EQ(noun.correct, 2u);
  const LabelCounts& verb = ev.by_label().at("VERB");
  EXPECT_DOUBLE_EQ(verb.precision(), 100.0);
  EXPECT_DOUBLE_EQ(verb.recall(), 50.0);
  EXPECT_DOUBLE_EQ(verb.f1(), 200.0 / 3);
  const LabelCounts& adj = ev.by_label().at("ADJ");  // only guessed: every figure 0
  EXPECT_EQ(adj.gold, 0u);
  EXPECT_EQ(adj.precision(), 0.0);
  EXPECT_EQ(adj.recall(), 0.0);
  EXPECT_EQ(adj.f1(), 0.0);
  // Macro over ADJ, DET, NOUN, VERB: P (0 + 100 + 66.67 + 100) / 4, R (0 + 100 + 66.67 + 50) / 4.
  EXPECT_DOUBLE_EQ(ev.macro_precision(), (0 + 100 + 200.0 / 3 + 100) / 4);
  EXPECT_DOUBLE_EQ(ev.macro_recall(), (0 + 100 + 200.0 / 3 + 50) / 4);
  EXPECT_DOUBLE_EQ(ev.macro_f1(), (0 + 100 + 200.0 / 3 + 200.0 / 3) / 4);
  EXPECT_EQ(ev.confusions().size(), 2u);
  EXPECT_EQ(ev.confusions().at({"VERB", "NOUN"}), 1u);
  EXPECT_EQ(ev.confusions().at({"NOUN", "ADJ"}), 1u);
  EXPECT_THROW(ItemEvaluator().add({"A"}, {"A", "B"}), Error);
}

TEST(ItemEvaluator, ExactReportAndConfusionMatrix) {
  const ItemEvaluator ev = small_items();
  EXPECT_EQ(ev.report(),
            "processed 7 tokens in 3 sentences; 4 labels.\n"
            "accuracy:  71.43% (5 of 7 tokens); sentence accuracy:  33.33% (1 of 3)\n"
            "label              gold   guessed   correct precision    recall        F1\n"
            "ADJ                   0         1         0      0.00      0.00      0.00\n"
            "DET                   2         2         2    100.00    100.00    100.00\n"
            "NOUN                  3         3         2     66.67     66.67     66.67\n"
            "VERB                  2         1         1    100.00     50.00     66.67\n"
            "macro average                                   66.67     54.17     58.33\n"
            "micro average         7         7         5     71.43     71.43     71.43\n");
  // NOUN is in both errors (2), ADJ and VERB in one each; with 2 labels: NOUN, then ADJ (by name).
  EXPECT_EQ(ev.confusion_report(2),
            "confusion of the 2 labels with the most errors (rows: gold, columns: guessed; 2 of 7 tokens wrong):\n"
            "gold  ADJ NOUN\n"
            "ADJ     0    0\n"
            "NOUN    1    2\n");
  ItemEvaluator perfect;
  perfect.add({"X", "Y"}, {"X", "Y"});
  EXPECT_EQ(perfect.confusion_report(), "confusion: no errors.\n");
}

TEST(Evaluation, ChoosesTheReportFromTheLabels) {
  const std::string pos = "the DT DT\ndog NN NN\nran VBD NN\n\n";
  const std::string path = test::temp_path("pos.txt");
  test::write_text(path, pos);
  const Evaluation item = evaluate_labels_file(path);
  EXPECT_EQ(item.mode, EvalMode::item);
  EXPECT_EQ(item.report(), item.item.report());
  EXPECT_DOUBLE_EQ(item.headline(), 200.0 / 3);
  EXPECT_STREQ(item.headline_name(), "accuracy");

  // Chunk tags: conlleval's report, byte for byte the chunk evaluator's.
  const std::string chunks = "He B-NP B-NP\nran B-VP I-NP\n\nit B-NP B-NP\n";
  test::write_text(path, chunks);
  const Evaluation chunk = evaluate_labels_file(path);
  EXPECT_EQ(chunk.mode, EvalMode::chunk);
  EXPECT_EQ(chunk.report(), evaluate_file(path).report());
  EXPECT_DOUBLE_EQ(chunk.headline(), chunk.chunk.overall().f1());
  EXPECT_STREQ(chunk.headline_name(), "F1");
  EXPECT_EQ(chunk.report(true), chunk.chunk.report() + chunk.item.confusion_report());

  // Forced modes, and -r (raw labels) keeps conlleval's report.
  EvalOptions o;
  o.mode = EvalMode::item;
  EXPECT_EQ(evaluate_labels_file(path, o).report(), evaluate_labels_file(path, o).item.report());
  test::write_text(path, pos);
  o.mode = EvalMode::chunk;
  EXPECT_EQ(evaluate_labels_file(path, o).mode, EvalMode::chunk);
  EvalOptions raw;
  raw.raw = true;
  EXPECT_EQ(evaluate_labels_file(path, raw).mode, EvalMode::chunk);

  // The in-memory form gives the same as the file.
  const Evaluation mem = evaluate({{"DT", "NN", "VBD"}}, {{"DT", "NN", "NN"}});
  EXPECT_EQ(mem.mode, EvalMode::item);
  EXPECT_EQ(mem.report(), item.report());
  EXPECT_THROW(evaluate({{"A"}}, {}), Error);
}

// The dev figure from label ids is evaluate()'s on the strings, in both modes, over random
// sentences of labels that exercise every rule (IOBES, brackets, type changes, the type "0",
// hyphenated types, gold labels the guesses never use).
TEST(LabelIdScorer, GivesTheFigureOfTheStrings) {
  const Labels model = {"O", "B-NP", "I-NP", "B-VP", "I-VP", "E-NP", "S-NP", "B-0", "I-A-B", "[", "]", ".", "B"};
  const Labels extra = {"I-PP", "S-VP", "E-X"};  // gold only
  const Labels pos = {"DT", "NN", "VB", "JJ"};
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    const bool chunk = round % 4 != 3;
    const Labels& labels = chunk ? model : pos;
    std::vector<std::size_t> offsets{0};
    Labels gold_tokens;
    std::vector<std::uint32_t> guess;
    std::vector<Labels> gold, guessed;
    const int sentences = 1 + int(rng() % 6);
    for (int s = 0; s < sentences; ++s) {
      gold.emplace_back();
      guessed.emplace_back();
      const int n = int(rng() % 9);  // empty sentences too
      for (int t = 0; t < n; ++t) {
        const std::uint32_t k = std::uint32_t(rng() % labels.size());
        guess.push_back(k);
        guessed.back().push_back(labels[k]);
        const bool other = chunk && rng() % 5 == 0;
        gold.back().push_back(other ? extra[rng() % extra.size()] : labels[rng() % labels.size()]);
        gold_tokens.push_back(gold.back().back());
      }
      offsets.push_back(gold_tokens.size());
    }
    EvalOptions o;
    o.mode = chunk ? EvalMode::chunk : EvalMode::item;
    const LabelIdScorer scorer(labels, gold_tokens, offsets, o.mode);
    EXPECT_DOUBLE_EQ(scorer.headline(guess.data()), evaluate(gold, guessed, o).headline()) << "round " << round;
  }
  EXPECT_THROW(LabelIdScorer(model, {"O"}, {0}, EvalMode::chunk), Error);

  // Past 1,024 labels the relations are not tabled: the same figures.
  Labels many = {"O"};
  for (int t = 0; t < 600; ++t) {
    many.push_back("B-T" + std::to_string(t % 7 == 0 ? 0 : t));
    many.push_back("I-T" + std::to_string(t));
  }
  std::vector<std::uint32_t> guess;
  Labels gold_tokens;
  std::vector<Labels> gold(50), guessed(50);
  std::vector<std::size_t> offsets{0};
  for (int s = 0; s < 50; ++s) {
    for (int t = 0; t < 12; ++t) {  // few types a sentence, so that some chunks match
      const std::uint32_t k = std::uint32_t(rng() % 3 == 0 ? 0 : 1 + (s * 2 + rng() % 4) % (many.size() - 1));
      guess.push_back(k);
      guessed[s].push_back(many[k]);
      gold[s].push_back(rng() % 3 == 0 ? many[k] : many[1 + (s * 2 + rng() % 4) % (many.size() - 1)]);
      gold_tokens.push_back(gold[s].back());
    }
    offsets.push_back(gold_tokens.size());
  }
  EvalOptions o;
  o.mode = EvalMode::chunk;
  const double f1 = evaluate(gold, guessed, o).headline();
  EXPECT_GT(f1, 0.0);
  EXPECT_DOUBLE_EQ(LabelIdScorer(many, gold_tokens, offsets, EvalMode::chunk).headline(guess.data()), f1);
}

// Untagged data read as gold and guess (columns that share no label) is refused from 20 tokens;
// below that, or with a single shared label, it is scored.
TEST(EvaluateFile, UntaggedDataIsRefused) {
  auto text = [](int tokens, const char* guess) {
    std::string t;
    for (int i = 0; i < tokens; ++i) t += std::string("w NN ") + guess + "\n";
    return t;
  };
  EXPECT_NE(error_of(text(20, "B-NP")).find("the last two columns share no label in 20 tokens (e.g. gold 'NN', "
                                             "guessed 'B-NP'): is the file tagged?"),
            std::string::npos);
  EXPECT_EQ(eval_text(text(19, "B-NP")).tokens(), 19u);
  EXPECT_EQ(eval_text(text(20, "B-NP") + "w NN NN\n").tokens(), 21u);
}

}  // namespace
}  // namespace crfx
