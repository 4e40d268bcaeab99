// crfx train stopped by a signal inside a long first iteration (1,500 labels: an iteration takes
// tens of seconds) ends within a second or so, says so, exits with status 3 and writes no model.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <string>

#include "test_util.hpp"

namespace crfx {
namespace {

TEST(StopInPass, ASignalInsideTheFirstIterationEndsTheRunWithoutAModel) {
  const std::string data = test::temp_path("many-labels.txt"), tpl = test::temp_path("many-labels.tpl");
  const std::string model = test::temp_path("many-labels.model"), err = test::temp_path("many-labels.err");
  {
    std::mt19937 rng(1);
    std::ofstream out(data);
    for (int s = 0; s < 800; ++s) {
      for (int t = 0; t < 12; ++t) {
        const unsigned y = rng() % 1500;
        out << "w" << y % 300 << " p" << y % 40 << " L" << y << "\n";
      }
      out << "\n";
    }
  }
  test::write_text(tpl, "U00:%x[0,0]\nU01:%x[0,1]\nB\n");
  const auto start = std::chrono::steady_clock::now();
  std::string out;
  // The signal 3 s in: past reading and compiling, inside the first pass.
  const int status = test::run("( " + test::crfx_binary() + " train " + data + " -t " + tpl + " -m " + model +
                                   " --device cpu --threads 2 2> " + err + " & pid=$!; sleep 3; kill -TERM $pid; "
                                   "wait $pid; echo status=$? )",
                               &out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("status=3"), std::string::npos) << out << test::read_text(err);
  EXPECT_LT(seconds, 12.0) << "the run went on after the signal";
  EXPECT_NE(test::read_text(err).find("crfx train: stopped by SIGTERM inside iteration 1, before any iteration "
                                      "ended: no model written"),
            std::string::npos)
      << test::read_text(err);
  EXPECT_NE(test::run("test -e " + model), 0) << "a model was written";
}

}  // namespace
}  // namespace crfx
