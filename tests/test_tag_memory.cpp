// crfx tag reads, compiles, decodes and writes in bounded batches (--batch-tokens, --batch-bytes):
// a 250 MB CRFsuite attribute file tags under a 200 MB address-space limit (ulimit -v), on two
// threads, into the output that tagging its pieces gives. (With batches bounded by tokens alone
// such a file's batches held a quarter of a gigabyte of attribute strings each.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace crfx {
namespace {

TEST(TagMemory, AnAttributeFileLargerThanTheMemoryLimitTagsInBoundedBatches) {
  const std::string piece = test::data_path("conll2000.test30.crfsuite.txt");
  const std::string text = test::read_text(piece);
  ASSERT_GT(text.size(), 10000u);
  const std::size_t copies = (std::size_t(250) << 20) / text.size() + 1;
  const std::string big = test::temp_path("big.crfsuite.txt"), model = test::temp_path("cs.model");
  const std::string piece_out = test::temp_path("piece.tagged"), big_out = test::temp_path("big.tagged");
  {
    std::ofstream out(big, std::ios::binary);
    for (std::size_t i = 0; i < copies; ++i) out << text << (text.back() == '\n' ? "\n" : "\n\n");
  }
  std::string log;
  ASSERT_EQ(test::run(test::crfx_binary() + " train " + test::data_path("conll2000.train60.crfsuite.txt") +
                          " --format crfsuite --max-iterations 5 -q --device cpu -m " + model,
                      &log),
            0)
      << log;
  ASSERT_EQ(test::run(test::crfx_binary() + " tag " + piece + " -m " + model + " --device cpu -q -o " + piece_out,
                      &log),
            0)
      << log;
  ASSERT_EQ(test::run("ulimit -v 200000; " + test::crfx_binary() + " tag " + big + " -m " + model +
                          " --device cpu --threads 2 -q -o " + big_out,
                      &log),
            0)
      << log;
  // The big output is the piece's, `copies` times over (compared as it streams).
  const std::string one = test::read_text(piece_out);
  std::ifstream in(big_out, std::ios::binary);
  std::string chunk(one.size(), '\0');
  std::size_t same = 0;
  while (in.read(&chunk[0], std::streamsize(one.size())) && chunk == one) ++same;
  EXPECT_EQ(same, copies);
  EXPECT_EQ(in.peek(), EOF);
  std::remove(big.c_str());
  std::remove(big_out.c_str());
}

}  // namespace
}  // namespace crfx
