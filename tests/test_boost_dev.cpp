// Boosting's held-out stopping rule (`crfx train -a boost --dev D --dev-patience K`; seed 002 §5.2,
// apps/cmd_train.cpp): the run stops K rounds after the best dev figure, or a fifth of the rounds
// to the best where that is more, and writes that round's model — the written model tagged and
// scored gives the log's best figure; with K = 0 it runs all its rounds and writes the last one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace crfx {
namespace {

std::string q(const std::string& s) { return "'" + s + "'"; }

/// The dev_f1 column of a --log file.
std::vector<double> dev_column(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find(",dev_f1"), std::string::npos) << line;
  std::vector<double> dev;
  while (std::getline(in, line)) dev.push_back(std::stod(line.substr(line.rfind(',') + 1)));
  return dev;
}

/// The F1 of `model` on the dev data, by crfx tag and crfx eval.
double tagged_f1(const std::string& model, const std::string& dev, const std::string& tagged) {
  std::string out;
  EXPECT_EQ(test::run(test::crfx_binary() + " tag " + q(dev) + " -m " + q(model) + " -o " + q(tagged), &out), 0) << out;
  EXPECT_EQ(test::run(test::crfx_binary() + " eval " + q(tagged), &out), 0) << out;
  const std::size_t at = out.find("FB1:");
  return at == std::string::npos ? -1 : std::stod(out.substr(at + 4));
}

TEST(BoostDev, StopsAfterThePatienceAndWritesTheBestRound) {
  const std::string dir = test::temp_path("boost-dev");
  const std::string model = dir + ".model", log = dir + ".csv", tagged = dir + ".tagged";
  const std::string dev = test::data_path("conll2000.test100.txt");
  const std::string train = test::crfx_binary() + " train " + q(test::data_path("conll2000.train300.txt")) + " -t " +
                            q(test::data_path("chunking.template")) + " -a boost --boost-rule gradient --threads 1 --dev " +
                            q(dev) + " -m " + q(model) + " --log " + q(log);
  std::string out;
  // Without --max-iterations the rule alone ends the run (no cap of 1,000 rounds), as it says.
  ASSERT_EQ(test::run(train + " --dev-patience 15", &out), 0) << out;
  EXPECT_NE(out.find("note: -a boost with --dev runs until its dev figure stops rising"), std::string::npos) << out;
  const std::vector<double> f1 = dev_column(log);
  ASSERT_FALSE(f1.empty());
  const std::size_t best = std::size_t(std::max_element(f1.begin(), f1.end()) - f1.begin());  // the first best
  ASSERT_LT(f1.size(), 1000u) << "the patience never ran out";
  // A fifth of the rounds to the best (round 106 here: 21), as that is more than 15; none better.
  const std::size_t patience = std::max<std::size_t>(15, (best + 1) / 5);
  EXPECT_GT(patience, 15u) << "the run no longer tells the two parts of the rule apart";
  EXPECT_EQ(f1.size(), best + 1 + patience) << out;
  for (std::size_t k = best + 1; k < f1.size(); ++k) EXPECT_LE(f1[k], f1[best]) << "round " << k + 1;
  EXPECT_NE(out.find("for " + std::to_string(patience) + " iterations (--dev-patience 15, "), std::string::npos) << out;
  EXPECT_NE(out.find("the model of iteration " + std::to_string(best + 1)), std::string::npos) << out;
  EXPECT_NEAR(tagged_f1(model, dev, tagged), f1[best], 0.006);
  // No patience: every round, the last one's model.
  ASSERT_EQ(test::run(train + " --max-iterations " + std::to_string(f1.size() + 5) + " --dev-patience 0", &out), 0)
      << out;
  const std::vector<double> all = dev_column(log);
  ASSERT_EQ(all.size(), f1.size() + 5);
  for (std::size_t k = 0; k < f1.size(); ++k) EXPECT_EQ(all[k], f1[k]) << "round " << k + 1;
  EXPECT_NEAR(tagged_f1(model, dev, tagged), all.back(), 0.006);
}

// A run stopped between its best round and the patience's end, resumed from its checkpoint, keeps
// that round (the checkpoint's dev-best note): it stops where the uninterrupted run stops and
// writes the same model bytes and the same closing objective (the best round's, not the last's).
TEST(BoostDev, AResumedRunKeepsTheBestRoundOfTheCheckpoint) {
  const std::string dir = test::temp_path("boost-dev-resume");
  const std::string dev = test::data_path("conll2000.test100.txt");
  const std::string train = test::crfx_binary() + " train " + q(test::data_path("conll2000.train300.txt")) + " -t " +
                            q(test::data_path("chunking.template")) + " -a boost --boost-rule gradient --threads 1 --dev " +
                            q(dev) + " --dev-patience 3 --log " + q(dir + ".csv");
  std::string whole_out, out;
  ASSERT_EQ(test::run(train + " --max-iterations 1000 -m " + q(dir + ".whole"), &whole_out), 0) << whole_out;
  const std::vector<double> f1 = dev_column(dir + ".csv");
  const std::size_t best = std::size_t(std::max_element(f1.begin(), f1.end()) - f1.begin()) + 1;  // its round
  ASSERT_EQ(f1.size(), best + std::max<std::size_t>(3, best / 5));
  ASSERT_EQ(test::run(train + " --max-iterations " + std::to_string(best + 3) + " -m " + q(dir + ".part") +
                          " --checkpoint " + q(dir + ".ckpt") + " --checkpoint-every 1",
                      &out),
            0)
      << out;
  ASSERT_EQ(test::run(train + " --max-iterations 1000 -m " + q(dir + ".resumed") + " --resume " + q(dir + ".ckpt"), &out),
            0)
      << out;
  EXPECT_EQ(dev_column(dir + ".csv").size(), f1.size()) << out;
  EXPECT_NE(out.find("the model of iteration " + std::to_string(best)), std::string::npos) << out;
  EXPECT_TRUE(test::read_text(dir + ".resumed") == test::read_text(dir + ".whole")) << "the model differs";
  auto objective = [](const std::string& text) {  // the "done:" line's objective
    const std::size_t at = text.find(" passes, objective ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find(',', at + 19) - at);
  };
  EXPECT_FALSE(objective(out).empty()) << out;
  EXPECT_EQ(objective(out), objective(whole_out));
  // The closing objective is the best round's, the one its log row has.
  std::ifstream log(dir + ".csv");
  std::string row;
  for (std::size_t k = 0; k <= best && std::getline(log, row);) ++k;
  ASSERT_FALSE(row.empty());
  const double logged = std::stod(row.substr(row.find(',', row.find(',') + 1) + 1));
  const std::string said = objective(whole_out);
  ASSERT_FALSE(said.empty()) << whole_out;
  EXPECT_NEAR(std::stod(said.substr(19)), logged, 1e-6 * std::max(1.0, std::fabs(logged))) << row;
}

}  // namespace
}  // namespace crfx
