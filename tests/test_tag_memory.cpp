// crfx tag reads, compiles, decodes and writes in bounded batches (--batch-tokens, --batch-bytes):
// a 1 GB input — a CRFsuite attribute file, and a CoNLL file — tags on two threads under an
// address-space limit (ulimit -v) of the model plus 256 MB, into the output that tagging its
// pieces gives (compared as it streams from the tagger's standard output: no second gigabyte on
// disk). With batches bounded by tokens alone such a file's batches held a quarter of a gigabyte
// of strings each; holding the input, it would need its size.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace crfx {
namespace {

constexpr std::size_t kInputBytes = std::size_t(1) << 30;
constexpr std::size_t kBudgetKiB = 256 * 1024;  // above the model

/// `piece` (whole sentences) repeated into `path` until it holds kInputBytes; the copies.
std::size_t write_copies(const std::string& piece, const std::string& path) {
  const std::size_t copies = kInputBytes / piece.size() + 1;
  std::ofstream out(path, std::ios::binary);
  for (std::size_t i = 0; i < copies; ++i) out << piece;
  out.close();
  EXPECT_TRUE(out) << "writing " << path;
  return copies;
}

/// Tags `input` under `ulimit -v` of the model + kBudgetKiB on two threads; how many times the
/// output repeats `one` (the piece's output), and whether nothing follows.
std::size_t tag_and_count(const std::string& input, const std::string& model, const std::string& one, bool* exact) {
  struct stat st {};
  EXPECT_EQ(stat(model.c_str(), &st), 0);
  const std::size_t limit = std::size_t(st.st_size) / 1024 + kBudgetKiB;
  const std::string cmd = "ulimit -v " + std::to_string(limit) + "; " + test::crfx_binary() + " tag " + input +
                          " -m " + model + " --device cpu --threads 2 -q";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return 0;
  std::string chunk(one.size(), '\0');
  std::size_t same = 0;
  while (std::fread(&chunk[0], 1, one.size(), pipe) == one.size() && chunk == one) ++same;
  *exact = std::fgetc(pipe) == EOF;
  while (std::fgetc(pipe) != EOF) {
  }
  EXPECT_EQ(pclose(pipe), 0) << cmd;
  return same;
}

/// Trains a model (`crfx train ` + train_args), tags `piece` with it, then tags `piece` repeated to
/// a gigabyte within the model + kBudgetKiB: the piece's output, as many times over.
void expect_a_gigabyte_tagged_as_its_pieces(const std::string& piece, const std::string& name,
                                            const std::string& train_args) {
  const std::string small = test::temp_path("piece." + name), big = test::temp_path("big." + name);
  const std::string model = test::temp_path(name + ".model"), piece_out = test::temp_path("piece." + name + ".tagged");
  test::write_text(small, piece);
  std::string log;
  ASSERT_EQ(test::run(test::crfx_binary() + " train " + train_args + " --max-iterations 5 -q --device cpu -m " + model,
                      &log),
            0)
      << log;
  ASSERT_EQ(test::run(test::crfx_binary() + " tag " + small + " -m " + model + " --device cpu -q -o " + piece_out, &log),
            0)
      << log;
  const std::size_t copies = write_copies(piece, big);
  bool exact = false;
  EXPECT_EQ(tag_and_count(big, model, test::read_text(piece_out), &exact), copies);
  EXPECT_TRUE(exact) << "output beyond the copies";
  std::remove(big.c_str());
}

TEST(TagMemory, AGigabyteAttributeFileTagsWithinTheModelAndAFixedBudget) {
  std::string piece = test::read_text(test::data_path("conll2000.test30.crfsuite.txt"));
  ASSERT_GT(piece.size(), 10000u);
  if (piece.back() == '\n' && piece[piece.size() - 2] != '\n') piece += '\n';  // sentences apart
  expect_a_gigabyte_tagged_as_its_pieces(
      piece, "crfsuite.txt", test::data_path("conll2000.train60.crfsuite.txt") + " --format crfsuite");
}

// CoNLL columns with 300-character words (a gigabyte of text in 3 M tokens, not 100 M); the
// model's template reads the tag column only, so the words are read and carried to the output,
// not expanded.
TEST(TagMemory, AGigabyteConllFileTagsWithinTheModelAndAFixedBudget) {
  const std::string lines = test::read_text(test::data_path("conll2000.test100.txt"));
  std::string piece;
  std::size_t start = 0;
  while (start < lines.size()) {
    std::size_t end = lines.find('\n', start);
    if (end == std::string::npos) end = lines.size();
    const std::string line = lines.substr(start, end - start);
    const std::size_t space = line.find(' ');
    piece += space == std::string::npos ? line : line.substr(0, space) + std::string(300, 'w') + line.substr(space);
    piece += '\n';
    start = end + 1;
  }
  if (piece.size() < 2 || piece[piece.size() - 2] != '\n') piece += '\n';
  const std::string tmpl = test::temp_path("tag.template");
  test::write_text(tmpl, "U00:%x[0,1]\nU01:%x[-1,1]/%x[0,1]\nB\n");
  expect_a_gigabyte_tagged_as_its_pieces(piece, "conll.txt", test::data_path("conll2000.train300.txt") + " -t " + tmpl);
}

}  // namespace
}  // namespace crfx
