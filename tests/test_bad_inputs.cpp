// One table of bad inputs (issue 17, item 6): for each case the command line, the input files it
// is given, the exact message crfx prints on standard error, the exit status, and what becomes of
// an output that existed before the run (kept byte for byte, unless the case says otherwise).
//
// The same table generates docs/BAD_INPUTS.md; BadInputs.DocIsCurrent fails when that file differs
// from what the table gives, and rewrites it when run with CRFX_UPDATE_DOCS=1:
//
//   CRFX_UPDATE_DOCS=1 build/tests/crfx_tests --gtest_filter='BadInputs.DocIsCurrent'
//
// Each case runs in a fresh directory holding the fixture (kFixture below) and its own inputs;
// commands name files relative to it, so messages read as a user sees them. Temporary names
// (.tmp.PID.RAND) and iteration counts are normalised.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fault/spawn.hpp"
#include "test_util.hpp"

namespace crfx::test {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// ---- the table ---------------------------------------------------------------------------------

/// How an input file of a case is made.
enum class Make {
  Text,           // `text` as it is
  Gzip,           // `text` gzip-compressed
  TruncatedGzip,  // `text` gzip-compressed, cut after 12 bytes (the header and a little)
  Copy,           // a copy of tests/data/`text`
  ModelCut,       // the fixture's m.model cut to `at` bytes
  ModelPatch,     // the fixture's m.model with `text` written over its bytes from `at`
  Dir,            // an (empty) directory
  Fifo,           // a named pipe (the signal cases write nothing to it)
  ReadOnly,       // `text`, mode 0444
};

struct Input {
  Make make;
  const char* name;
  std::string text = "";  // (a std::string: it may hold NUL bytes)
  std::size_t at = 0;
};

/// What becomes of an output file.
enum class Expect {
  Kept,      // made before the run with known content (if it does not exist) and unchanged after
  Replaced,  // made before the run with known content, and replaced by the run
  Absent,    // does not exist before the run, nor after
};

struct Output {
  const char* name;
  Expect expect;
};

/// Signals sent while the command runs.
enum class Signals {
  None,
  IntDuringTraining,         // SIGINT once the training log has a row
  TermDuringTraining,        // SIGTERM once the training log has a row
  IntThenTermDuringTraining, // SIGINT and SIGTERM together (a second signal while stopping)
  IntTwiceDuringTraining,    // SIGINT, then SIGINT again 20 ms later (timeout -s INT: process, then group)
  IntDuringTagDir,           // SIGINT while crfx tag reads its second input (a FIFO kept empty)
};

struct BadInput {
  const char* name;      // the case (unique; the test's name)
  const char* input;     // what is wrong, in words (for the doc)
  const char* command;   // words separated by single spaces; "< FILE" redirects standard input
  std::vector<Input> inputs;
  const char* message;   // standard error, exactly ("" for none)
  int status;            // exit status; 128 + N for a process ended by signal N
  std::vector<Output> outputs;
  Signals signals = Signals::None;
};

// The fixture, in every case's directory (the doc lists it):
//   train.txt  2 CoNLL sentences (word, POS, chunk tag)   t.tpl  U00:%x[0,0], U01:%x[0,1], B
//   m.model    trained on them                           test.txt  a copy of train.txt
//   tagged.txt crfx tag's output for test.txt (gold and predicted labels)
//   train.cs   the same sentences as CRFsuite attribute lines
const char* const kTrainText =
    "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ndeficit NN I-NP\n\n"
    "Chancellor NNP O\nof IN B-PP\nthe DT B-NP\nExchequer NNP I-NP\n";
const char* const kTemplate = "U00:%x[0,0]\nU01:%x[0,1]\nB\n";
const char* const kTrainCrfsuite =
    "B-NP\tw=He\tpos=PRP\nB-VP\tw=reckons\tpos=VBZ\nB-NP\tw=the\tpos=DT\nI-NP\tw=deficit\tpos=NN\n\n"
    "O\tw=Chancellor\tpos=NNP\nB-PP\tw=of\tpos=IN\nB-NP\tw=the\tpos=DT\nI-NP\tw=Exchequer\tpos=NNP\n";

/// train.txt with tabs between its columns (CoNLL all the same, read as CRFsuite lines it parses).
const char* const kTrainTabs =
    "He\tPRP\tB-NP\nreckons\tVBZ\tB-VP\nthe\tDT\tB-NP\ndeficit\tNN\tI-NP\n\n"
    "Chancellor\tNNP\tO\nof\tIN\tB-PP\nthe\tDT\tB-NP\nExchequer\tNNP\tI-NP\n";
/// train.txt's words and chunk tags, without the POS column, 7 times (56 tokens: enough for the
/// column check, which needs 50).
const std::string kWordChunk7 = [] {
  const std::string one =
      "He B-NP\nreckons B-VP\nthe B-NP\ndeficit I-NP\n\nChancellor O\nof B-PP\nthe B-NP\nExchequer I-NP\n\n";
  std::string all;
  for (int i = 0; i < 7; ++i) all += one;
  return all;
}();

/// The training run the signal cases interrupt: 300 sentences, a million epochs of SGD (no other
/// stopping rule), one thread (so that two signals sent together are handled one after the other).
#define LONG_TRAINING "crfx train big.txt -t t.tpl -m out.model --log log.csv -a sgd-l1 --epochs 1000000 --threads 1 -q"

const std::vector<BadInput> kCases = {
    // ---- data: CoNLL columns --------------------------------------------------------------------
    {"ConllColumnMissing", "bad.txt: line 2 has 2 columns, line 1 has 3", "crfx train bad.txt -t t.tpl -m out.model -q",
     {{Make::Text, "bad.txt", "He PRP B-NP\nreckons VBZ\n"}},
     "crfx train: bad.txt:2: inconsistent column count: expected 3 columns (as on line 1), got 2", 1,
     {{"out.model", Expect::Kept}}},
    {"ConllEmptyLabel", "bad.txt: tab-separated, the label field of line 2 empty",
     "crfx train bad.txt -t t.tpl -m out.model -q", {{Make::Text, "bad.txt", "He\tPRP\tB-NP\nreckons\tVBZ\t\n"}},
     "crfx train: bad.txt:2: inconsistent column count: expected 3 columns (as on line 1), got 2", 1,
     {{"out.model", Expect::Kept}}},
    {"ConllOneColumn", "bad.txt: words only, no label column", "crfx train bad.txt -t t.tpl -m out.model -q",
     {{Make::Text, "bad.txt", "He\nreckons\n"}},
     "crfx train: bad.txt:1: training data needs feature columns and a label column (the last); this token has 1 "
     "column",
     1, {{"out.model", Expect::Kept}}},
    {"ConllEmptyFile", "empty.txt: empty", "crfx train empty.txt -t t.tpl -m out.model -q",
     {{Make::Text, "empty.txt", ""}}, "crfx train: empty.txt: no sentences in the training data", 1,
     {{"out.model", Expect::Kept}}},
    {"ConllBinaryGarbage", "bin.txt: binary bytes, a NUL among them", "crfx train bin.txt -t t.tpl -m out.model -q",
     {{Make::Text, "bin.txt", "\x89PNG\r\n\x1a\n\x00\x01\x02\xff\n"s}},
     "crfx train: bin.txt:3: NUL byte in line (binary file?)", 1, {{"out.model", Expect::Kept}}},
    {"ConllTruncatedGzip", "trunc.txt.gz: train.txt gzip-compressed, cut after 12 bytes",
     "crfx train trunc.txt.gz -t t.tpl -m out.model -q", {{Make::TruncatedGzip, "trunc.txt.gz", kTrainText}},
     "crfx train: trunc.txt.gz:1: read error (corrupt or truncated file?): unexpected end of file", 1,
     {{"out.model", Expect::Kept}}},
    {"ConllInvalidUtf8IsAccepted", "latin1.txt: a word in Latin-1, not UTF-8 (accepted: crfx reads bytes)",
     "crfx train latin1.txt -t t.tpl -m out.model -q", {{Make::Text, "latin1.txt", "He PRP B-NP\nna\xefve JJ B-ADJP\n"}},
     "", 0, {{"out.model", Expect::Replaced}}},
    {"TagTooManyColumns", "bad.txt: 4 columns for a model of 2 feature columns", "crfx tag bad.txt -m m.model -o out.txt -q",
     {{Make::Text, "bad.txt", "He PRP B-NP x\n"}}, "crfx tag: bad.txt:1: expected 2 or 3 columns, got 4", 1,
     {{"out.txt", Expect::Kept}}},
    {"TagCrfsuiteLinesWithConllModel", "bad.txt: CRFsuite attribute lines, the model is CoNLL's",
     "crfx tag bad.txt -m m.model -o out.txt -q",
     {{Make::Text, "bad.txt", "B-NP\tw=He\tpos=PRP\tw[1]=reckons\nB-VP\tw=reckons\tpos=VBZ\tw[-1]=He\n"}},
     "crfx tag: bad.txt:1: expected 2 or 3 columns, got 4 (this looks like CRFsuite attribute lines, LABEL<TAB>attr…: "
     "read them with --format crfsuite, or tag them with a model trained on CRFsuite data)",
     1, {{"out.txt", Expect::Kept}}},
    {"TagMissingFeatureColumn",
     "bad.txt: word and chunk tag (train.txt without its POS column, 7 times); m.model reads word and POS",
     "crfx tag bad.txt -m m.model -o out.txt -q", {{Make::Text, "bad.txt", kWordChunk7}},
     "crfx tag: bad.txt:1: column 1 does not hold what the model was trained on: 56 of the first 56 tokens have a "
     "value there that the model never saw in that column (B-NP, B-VP, I-NP, …; 5 distinct values), where it learnt "
     "values such as PRP, VBZ, DT, … (template line 2, U01:%x[0,1]). The model reads 2 feature columns, then "
     "optionally the gold label, and this data has 2 columns: is a column missing or out of order (e.g. the gold "
     "labels where a feature column belongs)?",
     1, {{"out.txt", Expect::Kept}}},
    {"DevLabelUnseenInTrainingIsAccepted", "dev.txt: a gold label (B-XX) the training data lacks (scored as a miss)",
     "crfx train train.txt -t t.tpl --dev dev.txt -m out.model -q", {{Make::Text, "dev.txt", "He PRP B-XX\n"}}, "", 0,
     {{"out.model", Expect::Replaced}}},
    // ---- data: crfx eval -------------------------------------------------------------------------
    {"EvalUntagged", "test100.txt: CoNLL-2000 test data, not tagged", "crfx eval test100.txt",
     {{Make::Copy, "test100.txt", "conll2000.test100.txt"}},
     "crfx eval: test100.txt: the last two columns share no label in 2279 tokens (e.g. gold '$', guessed 'B-ADJP'): is "
     "the file tagged? crfx eval scores the gold label (next to last column) against the predicted one (last), which "
     "crfx tag appends",
     1, {}},
    {"EvalColumnCount", "ev.txt: line 3 has 4 columns, line 1 has 3", "crfx eval ev.txt",
     {{Make::Text, "ev.txt", "a B-NP B-NP\n\nb B-NP I-NP x\n"}},
     "crfx eval: ev.txt:3: expected 3 columns (as on line 1), got 4", 1, {}},
    {"EvalOneColumn", "ev.txt: one column", "crfx eval ev.txt", {{Make::Text, "ev.txt", "B-NP\n"}},
     "crfx eval: ev.txt:1: a token needs at least 2 columns (gold and guessed label), got 1", 1, {}},
    {"EvalEmpty", "empty.txt: empty", "crfx eval empty.txt", {{Make::Text, "empty.txt", ""}},
     "crfx eval: empty.txt: no tokens to evaluate (the file is empty or has only boundaries)", 1, {}},
    {"EvalNbestOutput", "nb.txt: crfx tag -n 2 output", "crfx eval nb.txt",
     {{Make::Text, "nb.txt", "# 0 0.6\nHe PRP B-NP B-NP\n\n# 1 0.4\nHe PRP B-NP I-NP\n\n"}},
     "crfx eval: nb.txt:1: n-best output (crfx tag --nbest) holds several label sequences per sentence; score the output "
     "of a run without --nbest",
     1, {}},
    {"EvalLabelUnseenInTrainingIsAccepted", "tagged2.txt: a gold label (B-XX) the model never saw (scored as a miss)",
     "crfx eval tagged2.txt", {{Make::Text, "tagged2.txt", "He PRP B-NP B-NP\nreckons VBZ B-XX B-VP\n"}}, "", 0, {}},
    // ---- data: CRFsuite attribute lines ---------------------------------------------------------
    {"CrfsuiteValueNotANumber", "bad.cs: attribute w=He:abc", "crfx train bad.cs --format crfsuite -m out.model -q",
     {{Make::Text, "bad.cs", "B-NP\tw=He:abc\n"}},
     "crfx train: bad.cs:1: attribute 'w=He:abc': value 'abc' is not a finite number", 1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteValueOverflows", "bad.cs: attribute w=He:1e999 (inf as a double)",
     "crfx train bad.cs --format crfsuite -m out.model -q", {{Make::Text, "bad.cs", "B-NP\tpos=PRP\tw=He:1e999\n"}},
     "crfx train: bad.cs:1: attribute 'w=He:1e999': value '1e999' is not a finite number", 1,
     {{"out.model", Expect::Kept}}},
    {"CrfsuiteValueNan", "bad.cs: attribute w=He:nan on line 2", "crfx train bad.cs --format crfsuite -m out.model -q",
     {{Make::Text, "bad.cs", "B-NP\tpos=PRP\nB-VP\tw=He:nan\n"}},
     "crfx train: bad.cs:2: attribute 'w=He:nan': value 'nan' is not a finite number", 1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteValueTooLarge", "bad.cs: attribute w=He:1e300", "crfx train bad.cs --format crfsuite -m out.model -q",
     {{Make::Text, "bad.cs", "B-NP\tw=He:1e300\n"}},
     "crfx train: bad.cs:1: attribute 'w=He:1e300': value 1e300 is beyond ±1e10, the range crfx accepts (scale the "
     "values down)",
     1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteMissingLabel", "bad.cs: line 2 starts with a tab", "crfx train bad.cs --format crfsuite -m out.model -q",
     {{Make::Text, "bad.cs", "B-NP\tw=He\n\tw=reckons\n"}},
     "crfx train: bad.cs:2: missing label (the first field) in training data", 1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteEmptyAttributeName", "bad.cs: attribute :2", "crfx train bad.cs --format crfsuite -m out.model -q",
     {{Make::Text, "bad.cs", "B-NP\t:2\n"}}, "crfx train: bad.cs:1: empty attribute name in ':2'", 1,
     {{"out.model", Expect::Kept}}},
    {"CrfsuiteReadingConllColumns", "train.txt (CoNLL columns) read with --format crfsuite",
     "crfx train train.txt --format crfsuite -m out.model -q", {},
     "crfx train: train.txt:1: 'He PRP B-NP' has spaces before its first tab: CRFsuite lines are LABEL<TAB>attr<TAB>…; "
     "for CoNLL columns train with --format conll and a --template (a model keeps its training format)",
     1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteReadingTabSeparatedConll",
     "train.tsv: train.txt with tabs between its columns, read with --format crfsuite",
     "crfx train train.tsv --format crfsuite -m out.model -q", {{Make::Text, "train.tsv", kTrainTabs}},
     "crfx train: train.tsv:1: lines 1–9 look like CoNLL columns, not CRFsuite attribute lines: each has 3 "
     "tab-separated fields, the attributes are not written name=value or name:value, and the last field looks like a "
     "tag (B-NP, B-VP, I-NP, …) where a CRFsuite line has its label first ('He' would be a label); for CoNLL columns "
     "train with --format conll and a --template (a model keeps its training format)",
     1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteTagTabSeparatedConll",
     "test.tsv: train.txt with tabs between its columns, tagged with cs.model (CRFsuite)",
     "crfx tag test.tsv -m cs.model -o out.txt -q", {{Make::Text, "test.tsv", kTrainTabs}},
     "crfx tag: test.tsv:1: lines 1–9 look like CoNLL columns, not CRFsuite attribute lines: each has 3 "
     "tab-separated fields, the attributes are not written name=value or name:value, and the last field looks like a "
     "tag (B-NP, B-VP, I-NP, …) where a CRFsuite line has its label first ('He' would be a label); 16 of 16 "
     "attributes are unknown to the model, which was trained on CRFsuite attribute lines (a model keeps its training "
     "format): tag CoNLL columns with a model trained with --format conll and a --template",
     1, {{"out.txt", Expect::Kept}}},
    {"CrfsuiteColonInName", "bad.cs: attribute w=a:b:c (colons meant in the name)",
     "crfx train bad.cs --format crfsuite -m out.model -q", {{Make::Text, "bad.cs", "B-NP\tw=a:b:c\n"}},
     "crfx train: bad.cs:1: attribute 'w=a:b:c': value 'c' is not a finite number (write \\: for a colon inside an "
     "attribute name, as in 'w=a\\:b\\:c'; the value, when there is one, follows the last unescaped ':')",
     1, {{"out.model", Expect::Kept}}},
    {"CrfsuiteTagWithNanValue", "bad.cs: w=He:NaN, tagged with a CRFsuite model",
     "crfx tag bad.cs -m cs.model -o out.txt -q",
     {{Make::Text, "bad.cs", "B-NP\tw=He:NaN\n"}},
     "crfx tag: bad.cs:1: attribute 'w=He:NaN': value 'NaN' is not a finite number", 1, {{"out.txt", Expect::Kept}}},
    // ---- templates ----------------------------------------------------------------------------------
    {"TemplateUnclosedMacro", "bad.tpl: U00:%x[0,0", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "# words\nU00:%x[0,0\n"}},
     "crfx train: bad.tpl:2: bad macro at column 5 of template 'U00:%x[0,0': ']' expected after the column (expected "
     "%x[ROW,COL], e.g. %x[-1,0])",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateUnknownLineType", "bad.tpl: X00:%x[0,0]", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "X00:%x[0,0]\n"}},
     "crfx train: bad.tpl:1: unknown template type 'X00:%x[0,0]' (a template line starts with U (unigram) or B "
     "(bigram))",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateNotAMacro", "bad.tpl: U00:%y[0,0]", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "U00:%y[0,0]\n"}},
     "crfx train: bad.tpl:1: bad macro at column 5 of template 'U00:%y[0,0]': '%' must be followed by x[ (expected "
     "%x[ROW,COL], e.g. %x[-1,0])",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateRowNotANumber", "bad.tpl: U00:%x[a,0]", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "U00:%x[a,0]\n"}},
     "crfx train: bad.tpl:1: bad macro at column 5 of template 'U00:%x[a,0]': row is not a number (expected "
     "%x[ROW,COL], e.g. %x[-1,0])",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateRowOutOfRange", "bad.tpl: U00:%x[-9999999,0]", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "U00:%x[-9999999,0]\n"}},
     "crfx train: bad.tpl:1: bad macro at column 5 of template 'U00:%x[-9999999,0]': row beyond ±1000000 (expected "
     "%x[ROW,COL], e.g. %x[-1,0])",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateNegativeColumn", "bad.tpl: U00:%x[0,-1]", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "U00:%x[0,-1]\n"}},
     "crfx train: bad.tpl:1: bad macro at column 5 of template 'U00:%x[0,-1]': column is not a non-negative number "
     "(expected %x[ROW,COL], e.g. %x[-1,0])",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateColumnOutOfRange", "bad.tpl: line 2 reads column 5; the data has 2 feature columns",
     "crfx train train.txt -t bad.tpl -m out.model -q", {{Make::Text, "bad.tpl", "U00:%x[0,0]\nU01:%x[0,5]\n"}},
     "crfx train: train.txt:1: template column 5 but the data has only 2 feature columns (read by line 2 of the "
     "template; columns count from 0, and the last one is the label)",
     1, {{"out.model", Expect::Kept}}},
    {"TemplateWithoutUnigrams", "bad.tpl: only B", "crfx train train.txt -t bad.tpl -m out.model -q",
     {{Make::Text, "bad.tpl", "B\n"}},
     "crfx train: bad.tpl: the template generates no attributes (no U line, or none that fires after --min-freq): the "
     "model would have nothing to learn from",
     1, {{"out.model", Expect::Kept}}},
    // ---- models -------------------------------------------------------------------------------------
    {"ModelTruncated", "cut.model: m.model cut after 100 bytes", "crfx tag test.txt -m cut.model -o out.txt -q",
     {{Make::ModelCut, "cut.model", "", 100}},
     "crfx tag: cut.model: truncated file (the checksum section is not at its end)", 1, {{"out.txt", Expect::Kept}}},
    {"ModelWrongMagic", "bad.model: m.model with XXXX over its first 4 bytes", "crfx dump bad.model",
     {{Make::ModelPatch, "bad.model", "XXXX", 0}}, "crfx dump: bad.model: not a crfx model (no CRFXMODL signature)", 1,
     {}},
    {"ModelNewerVersion", "new.model: m.model with format version 9", "crfx dump new.model",
     {{Make::ModelPatch, "new.model", "\x09", 8}},
     "crfx dump: new.model: unsupported model file version 9 (this crfx reads versions 1 to 3)", 1, {}},
    {"ModelCorrupt", "bad.model: m.model with one byte changed", "crfx tag test.txt -m bad.model -o out.txt -q",
     {{Make::ModelPatch, "bad.model", "Z", 72}}, "crfx tag: bad.model: checksum mismatch: file is corrupt", 1,
     {{"out.txt", Expect::Kept}}},
    {"ModelIsATextFile", "the template given as the model", "crfx tag test.txt -m t.tpl -o out.txt -q", {},
     "crfx tag: t.tpl: not a crfx model (no CRFXMODL signature)", 1, {{"out.txt", Expect::Kept}}},
    {"ModelEmpty", "empty.model: empty", "crfx dump empty.model", {{Make::Text, "empty.model", ""}},
     "crfx dump: empty.model: not a crfx model (no CRFXMODL signature)", 1, {}},
    {"ModelIsADirectory", "dir: a directory", "crfx tag test.txt -m dir -q", {{Make::Dir, "dir"}},
     "crfx tag: dir: a directory, not a model file", 1, {}},
    {"ModelMissing", "no such file", "crfx dump missing.model", {},
     "crfx dump: missing.model: cannot open model file: No such file or directory", 1, {}},
    // Not detected: three tab-separated fields read as 2 feature columns and a gold label.
    {"ModelOfTheOtherFormatIsNotDetected",
     "train.cs (CRFsuite lines, 2 attributes each) tagged with m.model (CoNLL, 2 feature columns): tagged as columns "
     "(8 tokens: too few for the column check, which needs 50)",
     "crfx tag train.cs -m m.model -o out.txt -q", {}, "", 0, {{"out.txt", Expect::Replaced}}},
    // ---- options ------------------------------------------------------------------------------------
    {"UnknownAlgorithm", "", "crfx train train.txt -t t.tpl -m out.model -a foo -q", {},
     "crfx train: -a: unknown training algorithm 'foo' (known: lbfgs, owlqn, rprop, sag, saga, sgd-l1, two-stage, adf, l2sgd, ap, pa, arow, mira, bcd, boost, gis, iis, scgis, cd) (crfx train --algo list describes them)",
     2, {{"out.model", Expect::Kept}}},
    {"NegativeC2", "", "crfx train train.txt -t t.tpl -m out.model --c2 -1 -q", {},
     "crfx train: --c2: must be ≥ 0, got -1", 2, {{"out.model", Expect::Kept}}},
    {"C2NotANumber", "", "crfx train train.txt -t t.tpl -m out.model --c2 nan -q", {},
     "crfx train: --c2: 'nan' is not a finite number", 2, {{"out.model", Expect::Kept}}},
    {"SettingOfAnotherAlgorithm", "", "crfx train train.txt -t t.tpl -m out.model -a sag --max-iterations 5 -q", {},
     "crfx train: --max-iterations is not a setting of sag; sag stops by --max-epochs ('crfx train --algo list' shows "
     "each algorithm's settings)",
     2, {{"out.model", Expect::Kept}}},
    {"UnknownOption", "", "crfx train train.txt -t t.tpl -m out.model --bogus -q", {},
     "crfx train: Option ‘bogus’ does not exist (see 'crfx train --help')", 2, {{"out.model", Expect::Kept}}},
    {"CrfppOption", "CRF++'s -c", "crfx train train.txt -t t.tpl -m out.model -c 4 -q", {},
     "crfx train: Option ‘c’ does not exist; CRF++'s -c C is --c2 here, with c2 = 1/(2·C) (-c 4 → --c2 0.125); with "
     "-a MIRA it is --mira-c C (see 'crfx train --help')",
     2, {{"out.model", Expect::Kept}}},
    {"UnknownFormat", "", "crfx train train.txt -m out.model --format xml -q", {},
     "crfx train: unknown --format 'xml' (expected conll or crfsuite)", 2, {{"out.model", Expect::Kept}}},
    {"TrainWithoutModel", "", "crfx train train.txt -t t.tpl -q", {},
     "crfx train: missing -m/--model: where to write the model", 2, {}},
    {"TrainWithoutTemplate", "", "crfx train train.txt -m out.model -q", {},
     "crfx train: CoNLL data needs --template (or use --format crfsuite)", 2, {{"out.model", Expect::Kept}}},
    {"TrainWithoutData", "", "crfx train -t t.tpl -m out.model -q", {},
     "crfx train: missing training data (crfx train DATA -m MODEL ...)", 2, {{"out.model", Expect::Kept}}},
    {"TemplateWithCrfsuiteData", "", "crfx train train.cs --format crfsuite -t t.tpl -m out.model -q", {},
     "crfx train: --template applies to CoNLL data, not --format crfsuite", 2, {{"out.model", Expect::Kept}}},
    {"TagWithoutModel", "", "crfx tag test.txt -o out.txt", {}, "crfx tag: missing -m/--model", 2,
     {{"out.txt", Expect::Kept}}},
    {"TagOneOutputAndOnePerInput", "", "crfx tag test.txt -m m.model -o out.txt -O od", {},
     "crfx tag: -o (one output) and -O (one per input) exclude each other", 2, {{"out.txt", Expect::Kept}}},
    {"TagKeepGoingWithoutDir", "", "crfx tag test.txt -m m.model -o out.txt --keep-going", {},
     "crfx tag: --keep-going goes with -O DIR (one output per input): in one stream, a failed input's output already "
     "written could not be taken back",
     2, {{"out.txt", Expect::Kept}}},
    {"TagNbestZero", "", "crfx tag test.txt -m m.model -o out.txt -n 0", {},
     "crfx tag: --nbest must be between 1 and 100000, got 0", 2, {{"out.txt", Expect::Kept}}},
    {"EvalUnknownMode", "", "crfx eval tagged.txt --mode foo", {},
     "crfx eval: --mode: 'foo' is none of auto, chunk, item", 2, {}},
    {"EvalWithoutFile", "", "crfx eval", {}, "crfx eval: missing a file to evaluate (crfx eval FILE...)", 2, {}},
    {"DumpTwoModels", "", "crfx dump m.model m.model", {},
     "crfx dump: unexpected argument 'm.model': crfx dump takes one input file (see 'crfx dump --help')", 2, {}},
    {"DumpWithoutModel", "", "crfx dump", {}, "crfx dump: missing a model file (crfx dump MODEL)", 2, {}},
    // ---- paths -------------------------------------------------------------------------------------
    {"TrainDataMissing", "", "crfx train missing.txt -t t.tpl -m out.model -q", {},
     "crfx train: missing.txt: cannot open: No such file or directory", 1, {{"out.model", Expect::Kept}}},
    {"TrainDataIsADirectory", "dir: a directory", "crfx train dir -t t.tpl -m out.model -q", {{Make::Dir, "dir"}},
     "crfx train: dir: cannot open: Is a directory", 1, {{"out.model", Expect::Kept}}},
    {"TemplateMissing", "", "crfx train train.txt -t missing.tpl -m out.model -q", {},
     "crfx train: missing.tpl: cannot open: No such file or directory", 1, {{"out.model", Expect::Kept}}},
    {"ModelIntoMissingDirectory", "", "crfx train train.txt -t t.tpl -m nodir/out.model -q", {},
     "crfx train: cannot write nodir/out.model: directory nodir: No such file or directory", 1,
     {{"nodir", Expect::Absent}}},
    {"ModelIsTheData", "", "crfx train train.txt -t t.tpl -m train.txt -q", {},
     "crfx train: cannot write train.txt: it is an input of this run; choose another name", 1,
     {{"train.txt", Expect::Kept}}},
    {"ModelIsTheTemplate", "", "crfx train train.txt -t t.tpl -m t.tpl -q", {},
     "crfx train: cannot write t.tpl: it is an input of this run; choose another name", 1, {{"t.tpl", Expect::Kept}}},
    {"ModelIsADirectoryToWrite", "dir: a directory", "crfx train train.txt -t t.tpl -m dir -q", {{Make::Dir, "dir"}},
     "crfx train: cannot write dir: it is a directory", 1, {}},
    {"ModelIsReadOnly", "ro.model: mode 0444", "crfx train train.txt -t t.tpl -m ro.model -q",
     {{Make::ReadOnly, "ro.model", "old\n"}},
     "crfx train: cannot write ro.model: it is read-only (mode 0444); --force replaces it, or make it writable or "
     "choose another name",
     1, {{"ro.model", Expect::Kept}}},
    {"LogIsTheModel", "", "crfx train train.txt -t t.tpl -m new.model --log new.model -q", {},
     "crfx train: cannot write new.model: it is also the model file (-m) of this run; choose another name", 1,
     {{"new.model", Expect::Absent}}},
    {"LogIsTheData", "", "crfx train train.txt -t t.tpl -m out.model --log train.txt -q", {},
     "crfx train: cannot write train.txt: it is an input of this run; choose another name", 1,
     {{"train.txt", Expect::Kept}, {"out.model", Expect::Kept}}},
    {"TagDataMissing", "", "crfx tag missing.txt -m m.model -o out.txt -q", {},
     "crfx tag: missing.txt: cannot open: No such file or directory", 1, {{"out.txt", Expect::Kept}}},
    {"TagDirectoryWithoutRecursive", "dir: a directory", "crfx tag dir -m m.model -o out.txt -q", {{Make::Dir, "dir"}},
     "crfx tag: dir: a directory (--recursive reads every file below it)", 1, {{"out.txt", Expect::Kept}}},
    {"TagOutputIsTheInput", "", "crfx tag test.txt -m m.model -o test.txt -q", {},
     "crfx tag: cannot write test.txt: it is an input of this run; choose another name", 1, {{"test.txt", Expect::Kept}}},
    {"TagOutputIsTheModel", "", "crfx tag test.txt -m m.model -o m.model -q", {},
     "crfx tag: cannot write m.model: it is an input of this run; choose another name", 1, {{"m.model", Expect::Kept}}},
    {"TagOutputIntoMissingDirectory", "", "crfx tag test.txt -m m.model -o nodir/out.txt -q", {},
     "crfx tag: cannot write nodir/out.txt: directory nodir: No such file or directory", 1, {{"nodir", Expect::Absent}}},
    {"TagOutputIsADirectory", "dir: a directory", "crfx tag test.txt -m m.model -o dir -q", {{Make::Dir, "dir"}},
     "crfx tag: cannot write dir: it is a directory", 1, {}},
    {"TagOutputDirOntoTheInputs", "", "crfx tag test.txt -m m.model -O . -q", {},
     "crfx tag: cannot write ./test.txt: it is the input test.txt of this run; choose another name", 1,
     {{"test.txt", Expect::Kept}}},
    {"TagTwoInputsOneOutput", "a/x.txt and b/x.txt: copies of test.txt", "crfx tag a/x.txt b/x.txt -m m.model -O od -q",
     {{Make::Dir, "a"}, {Make::Dir, "b"}, {Make::Text, "a/x.txt", kTrainText}, {Make::Text, "b/x.txt", kTrainText}},
     "crfx tag: a/x.txt and b/x.txt would both be written to od/x.txt (give them different names, or tag them in two "
     "runs)",
     1, {{"od", Expect::Absent}}},
    {"TagStandardInputToDir", "test.txt on standard input", "crfx tag - -m m.model -O od -q < test.txt", {},
     "crfx tag: standard input ('-') has no name to write its output under od", 1, {{"od", Expect::Absent}}},
    {"EvalFileMissing", "", "crfx eval missing.txt", {},
     "crfx eval: missing.txt: cannot open: No such file or directory", 1, {}},
    // ---- checkpoints ---------------------------------------------------------------------------------
    {"ResumeFromATextFile", "the template given as the checkpoint", "crfx train train.txt -t t.tpl -m out.model --resume t.tpl -q",
     {}, "crfx train: t.tpl: not a crfx checkpoint (crfx train --checkpoint writes them)", 1,
     {{"out.model", Expect::Kept}}},
    {"ResumeFromAMissingFile", "", "crfx train train.txt -t t.tpl -m out.model --resume missing.ckpt -q", {},
     "crfx train: missing.ckpt: cannot open the checkpoint: No such file or directory", 1,
     {{"out.model", Expect::Kept}}},
    {"CheckpointIsTheModel", "", "crfx train train.txt -t t.tpl -m out.model --checkpoint out.model -q", {},
     "crfx train: cannot write out.model: it is also the model file (-m) of this run; choose another name", 1,
     {{"out.model", Expect::Kept}}},
    {"CheckpointEveryWithoutCheckpoint", "", "crfx train train.txt -t t.tpl -m out.model --checkpoint-every 5 -q", {},
     "crfx train: --checkpoint-every needs --checkpoint FILE", 2, {{"out.model", Expect::Kept}}},
    // ---- signals -------------------------------------------------------------------------------------
    {"SigintDuringTraining", "big.txt: 300 CoNLL-2000 sentences; SIGINT once log.csv has a row", LONG_TRAINING,
     {{Make::Copy, "big.txt", "conll2000.train300.txt"}},
     "crfx train: stopped by SIGINT at iteration N; model written to out.model", 3, {{"out.model", Expect::Replaced}},
     Signals::IntDuringTraining},
    {"SigtermDuringTraining", "big.txt: as above; SIGTERM once log.csv has a row", LONG_TRAINING,
     {{Make::Copy, "big.txt", "conll2000.train300.txt"}},
     "crfx train: stopped by SIGTERM at iteration N; model written to out.model", 3, {{"out.model", Expect::Replaced}},
     Signals::TermDuringTraining},
    {"SecondSignalDuringTraining", "big.txt: as above; SIGINT, then SIGTERM while it stops", LONG_TRAINING,
     {{Make::Copy, "big.txt", "conll2000.train300.txt"}}, "", 128 + SIGTERM, {{"out.model", Expect::Kept}},
     Signals::IntThenTermDuringTraining},
    {"SigintTwiceAtOnce", "big.txt: as above; SIGINT, and again 20 ms later (as `timeout -s INT` sends it)",
     LONG_TRAINING, {{Make::Copy, "big.txt", "conll2000.train300.txt"}},
     "crfx train: stopped by SIGINT at iteration N; model written to out.model", 3, {{"out.model", Expect::Replaced}},
     Signals::IntTwiceDuringTraining},
    {"SigintDuringTagDir", "fifo: a named pipe after test.txt; SIGINT while crfx waits for its data",
     "crfx tag test.txt fifo -m m.model -O od -q", {{Make::Fifo, "fifo"}, {Make::Dir, "od"}}, "", 128 + SIGINT,
     {{"od/test.txt", Expect::Kept}, {"od/fifo", Expect::Absent}}, Signals::IntDuringTagDir},
};

// ---- running a case ------------------------------------------------------------------------------

std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  std::istringstream in(command);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// The fixture, made once (see above).
const std::string& fixture() {
  static const std::string dir = [] {
    const std::string d = temp_dir();
    write_text(d + "/train.txt", kTrainText);
    write_text(d + "/test.txt", kTrainText);
    write_text(d + "/t.tpl", kTemplate);
    write_text(d + "/train.cs", kTrainCrfsuite);
    const std::string b = crfx_binary();
    std::string out;
    if (run("cd " + d + " && " + b + " train train.txt -t t.tpl -m m.model -q && " + b +
                " train train.cs --format crfsuite -m cs.model -q && " + b +
                " tag test.txt -m m.model -o tagged.txt -q",
            &out) != 0)
      throw std::runtime_error("the fixture: " + out);
    return d;
  }();
  return dir;
}

const std::string kOldContent = "an output that was there before the run\n";

/// Makes the case's inputs in `dir` (a copy of the fixture).
void make_inputs(const BadInput& c, const std::string& dir) {
  for (const Input& in : c.inputs) {
    const std::string path = dir + "/" + in.name;
    switch (in.make) {
      case Make::Text:
        write_text(path, in.text);
        break;
      case Make::Gzip:
        write_gz(path, in.text);
        break;
      case Make::TruncatedGzip:
        write_gz(path, in.text);
        write_text(path, read_text(path).substr(0, 12));
        break;
      case Make::Copy:
        fs::copy_file(data_path(in.text), path);
        break;
      case Make::ModelCut:
        write_text(path, read_text(dir + "/m.model").substr(0, in.at));
        break;
      case Make::ModelPatch: {
        std::string bytes = read_text(dir + "/m.model");
        bytes.replace(in.at, in.text.size(), in.text);
        write_text(path, bytes);
        break;
      }
      case Make::Dir:
        fs::create_directories(path);
        break;
      case Make::Fifo:
        if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
        break;
      case Make::ReadOnly:
        write_text(path, in.text);
        fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
        break;
    }
  }
}

/// Whether `pid` has ended (without reaping it).
bool ended(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/// Polls `ready` every 10 ms while the process runs; false when it ended first or a minute passed
/// (a cap for a broken run, not a timing the test depends on).
bool wait_for(pid_t pid, const std::function<bool()>& ready) {
  for (int i = 0; i < 6000; ++i) {
    if (ready()) return true;
    if (ended(pid)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::size_t lines_in(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

/// Sends the case's signals once the command is where they should find it; a message when the
/// run never got there (the test fails with it).
std::string send_signals(const BadInput& c, const std::string& dir, pid_t pid) {
  if (c.signals == Signals::IntDuringTagDir) {
    const std::string fifo = dir + "/fifo";
    int writer = -1;  // opens once crfx has opened the FIFO to read it; held open so that it waits
    if (!wait_for(pid, [&] { return (writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) >= 0; })) {
      ::kill(pid, SIGKILL);
      return "crfx tag never opened the FIFO";
    }
    ::kill(pid, SIGINT);
    const bool died = wait_for(pid, [] { return false; }) || ended(pid);
    ::close(writer);
    if (!died) {
      ::kill(pid, SIGKILL);
      return "crfx tag did not end after SIGINT";
    }
    return "";
  }
  // Training: once the log has its header and a row, training is under way.
  if (!wait_for(pid, [&] { return lines_in(dir + "/log.csv") >= 2; })) {
    ::kill(pid, SIGKILL);
    return "training never wrote a log row";
  }
  if (c.signals == Signals::IntThenTermDuringTraining) {
    // Both pending at once (a stopped process), delivered in signal order when it continues:
    // SIGINT asks for the graceful stop, SIGTERM follows while it is stopping.
    ::kill(pid, SIGSTOP);
    ::kill(pid, SIGINT);
    ::kill(pid, SIGTERM);
    ::kill(pid, SIGCONT);
  } else if (c.signals == Signals::IntTwiceDuringTraining) {
    ::kill(pid, SIGINT);  // handled before the second arrives: two deliveries, one request
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(pid, SIGINT);
  } else {
    ::kill(pid, c.signals == Signals::IntDuringTraining ? SIGINT : SIGTERM);
  }
  return "";
}

/// Standard error as the table gives it: no trailing newline, temporaries' names and iteration
/// counts normalised.
std::string normalise(std::string err) {
  while (!err.empty() && err.back() == '\n') err.pop_back();
  err = std::regex_replace(err, std::regex(R"(\.tmp\.[0-9]+\.[0-9a-f]{8})"), ".tmp.PID.RAND");
  err = std::regex_replace(err, std::regex(R"(at iteration [0-9]+;)"), "at iteration N;");
  // A stochastic trainer stops inside an epoch or at its end, as the signal falls (the message
  // inside an epoch is checked in test_checkpoint.cpp).
  err = std::regex_replace(err, std::regex(R"(in epoch [0-9]+ after [0-9]+ of [0-9]+ sentences;)"), "at iteration N;");
  return err;
}

class BadInputCase : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputCase, MessageStatusAndOutputs) {
  const BadInput& c = GetParam();
  const std::string dir = temp_dir();
  fs::copy(fixture(), dir, fs::copy_options::recursive);
  make_inputs(c, dir);
  std::map<std::string, std::string> before;  // the outputs' content before the run
  for (const Output& o : c.outputs) {
    const std::string path = dir + "/" + o.name;
    if (o.expect == Expect::Absent) {
      ASSERT_FALSE(fs::exists(path)) << o.name << " exists before the run";
      continue;
    }
    if (!fs::exists(path)) write_text(path, kOldContent);
    before[o.name] = read_text(path);
  }

  std::vector<std::string> argv = words(c.command);
  SpawnOptions opt;
  opt.cwd = dir;
  const auto redirect = std::find(argv.begin(), argv.end(), "<");
  if (redirect != argv.end()) {
    opt.stdin_path = dir + "/" + *(redirect + 1);
    argv.erase(redirect, argv.end());
  }
  ASSERT_EQ(argv.at(0), "crfx");
  argv[0] = crfx_binary();
  std::string signal_problem;
  const Spawned r = spawn(argv, opt, temp_dir(), [&](pid_t pid) {
    if (c.signals != Signals::None) signal_problem = send_signals(c, dir, pid);
  });
  ASSERT_EQ(signal_problem, "");

  EXPECT_EQ(normalise(r.err), c.message);
  EXPECT_EQ(r.status, c.status) << r.err;
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{}) << "temporary files left behind";
  for (const Output& o : c.outputs) {
    const std::string path = dir + "/" + o.name;
    switch (o.expect) {
      case Expect::Absent:
        EXPECT_FALSE(fs::exists(path)) << o.name << " was written";
        break;
      case Expect::Kept:
        EXPECT_EQ(read_text(path), before[o.name]) << o.name << " changed";
        break;
      case Expect::Replaced:
        EXPECT_NE(read_text(path), before[o.name]) << o.name << " was not written";
        break;
    }
  }
}

void PrintTo(const BadInput& c, std::ostream* os) { *os << c.name; }

INSTANTIATE_TEST_SUITE_P(BadInput, BadInputCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

// ---- the table as a whole, and docs/BAD_INPUTS.md -------------------------------------------------

TEST(BadInputs, TableCoversEveryCommandWithUniqueNames) {
  std::set<std::string> names;
  std::map<std::string, int> per_command;
  for (const BadInput& c : kCases) {
    EXPECT_TRUE(names.insert(c.name).second) << "two cases named " << c.name;
    const std::vector<std::string> w = words(c.command);
    ASSERT_GE(w.size(), 2u) << c.name;
    ++per_command[w[1]];
  }
  EXPECT_GE(kCases.size(), 30u);
  for (const char* command : {"train", "tag", "eval", "dump"}) EXPECT_GE(per_command[command], 3) << command;
}

std::string cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n') out += "<br>";
    else out += ch;
  }
  return out;
}

std::string code(const std::string& text) { return text.empty() ? "" : "`" + cell(text) + "`"; }

std::string status_text(int status) {
  if (status == 128 + SIGINT) return "killed by SIGINT (130)";
  if (status == 128 + SIGTERM) return "killed by SIGTERM (143)";
  return std::to_string(status);
}

std::string outputs_text(const BadInput& c) {
  std::string out;
  for (const Output& o : c.outputs) {
    out += out.empty() ? "" : ", ";
    out += std::string("`") + o.name + "` " +
           (o.expect == Expect::Kept ? "kept" : o.expect == Expect::Replaced ? "replaced" : "not made");
  }
  return out;
}

std::string signals_text(Signals s) {
  switch (s) {
    case Signals::None: return "";
    case Signals::IntDuringTraining: return " (SIGINT during training)";
    case Signals::TermDuringTraining: return " (SIGTERM during training)";
    case Signals::IntThenTermDuringTraining: return " (SIGINT, then SIGTERM while it stops)";
    case Signals::IntTwiceDuringTraining: return " (SIGINT twice, 20 ms apart)";
    case Signals::IntDuringTagDir: return " (SIGINT while it waits for the FIFO)";
  }
  return "";
}

std::string doc() {
  std::string d =
      "# Bad inputs\n"
      "\n"
      "What crfx says, and the exit status, for bad data, templates, models, options and paths, and\n"
      "when it is interrupted. Generated from the table in `tests/test_bad_inputs.cpp`, whose tests run\n"
      "every case and compare standard error exactly, the exit status, and the outputs (an output that\n"
      "existed before the run is byte for byte the same after it, unless it says \"replaced\"; no\n"
      "temporary file is left). Do not edit by hand: change the table, then regenerate this file with\n"
      "\n"
      "```sh\n"
      "CRFX_UPDATE_DOCS=1 build/tests/crfx_tests --gtest_filter='BadInputs.DocIsCurrent'\n"
      "```\n"
      "\n"
      "(the test fails while this file differs from the table).\n"
      "\n"
      "Exit statuses: 0 success, 1 failure (bad input, I/O), 2 usage error, 3 training stopped by a\n"
      "signal with its model written; a process ended by signal N is shown as a shell shows it, 128 + N.\n"
      "Every case runs in a fresh directory holding `train.txt` (2 CoNLL sentences: word, POS, chunk\n"
      "tag), `test.txt` (the same), `t.tpl` (`U00:%x[0,0]`, `U01:%x[0,1]`, `B`), `m.model` (trained on\n"
      "them), `tagged.txt` (crfx tag's output for `test.txt`), `train.cs` (the sentences as CRFsuite\n"
      "attribute lines) and `cs.model` (trained on those), plus the case's own inputs. Iteration\n"
      "numbers are shown as N.\n"
      "\n"
      "| case | input | command | standard error | exit | outputs |\n"
      "|---|---|---|---|---|---|\n";
  for (const BadInput& c : kCases)
    d += std::string("| ") + c.name + " | " + (*c.input ? cell(c.input) : "—") + " | " + code(c.command) + cell(signals_text(c.signals)) +
         " | " + code(c.message) + " | " + status_text(c.status) + " | " + outputs_text(c) + " |\n";
  return d;
}

TEST(BadInputs, DocIsCurrent) {
  const std::string path = std::string(CRFX_TEST_DATA) + "/../../docs/BAD_INPUTS.md";
  const std::string want = doc();
  const char* update = std::getenv("CRFX_UPDATE_DOCS");
  if (update && std::string(update) == "1") {
    write_text(path, want);
    return;
  }
  std::string have;
  if (fs::exists(path)) have = read_text(path);
  if (have == want) return;
  // The first line that differs, not both files whole.
  std::istringstream h(have), w(want);
  std::string hl, wl;
  int line = 0;
  do {
    ++line;
    if (!std::getline(h, hl)) hl = "(end of file)";
    if (!std::getline(w, wl)) wl = "(end of file)";
  } while (hl == wl);
  ADD_FAILURE() << "docs/BAD_INPUTS.md differs from the table in tests/test_bad_inputs.cpp (first at line " << line
                << ":\n  the file:  " << hl << "\n  the table: " << wl
                << "\n); regenerate it with: CRFX_UPDATE_DOCS=1 build/tests/crfx_tests "
                   "--gtest_filter='BadInputs.DocIsCurrent'";
}

}  // namespace
}  // namespace crfx::test
