// crfx — the trainers' settings tables (OptionSpec, crfx/internal/trainer.hpp): every name a trainer lists
// exists, values round-trip through text, bad values are refused, and a setting a trainer does not
// list never changes what it trains (so its table is the whole of what it reads).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

/// Every setting's value as text, in table order.
std::vector<std::string> values(const TrainOptions& o) {
  std::vector<std::string> v;
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& s : *table) v.push_back(s.get(o));
  return v;
}

TEST(TrainerSettings, EveryListedNameExistsOnceAndRoundTrips) {
  std::set<std::string> names;
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& s : *table) EXPECT_TRUE(names.insert(s.name).second) << s.name << " twice";
  for (const auto& t : trainer_registry())
    for (const char* name : t.options) EXPECT_NE(find_option(name), nullptr) << t.name << ": " << name;
  EXPECT_EQ(find_option("no-such-setting"), nullptr);
  // The library's defaults read back through their own text.
  const TrainOptions d;
  TrainOptions o;
  o.c1 = 7;
  o.epochs = 99;
  o.sampling = Sampling::uniform;
  for (const auto* table : {&objective_options(), &trainer_options()})
    for (const OptionSpec& s : *table)
      if (!s.get(d).empty()) s.set(o, s.get(d));
  EXPECT_EQ(values(o), values(d));
  EXPECT_FALSE(d.eta0.has_value());
  find_option("eta0")->set(o, "0.05");
  EXPECT_EQ(o.eta0, 0.05);
}

TEST(TrainerSettings, BadValuesAreRefused) {
  TrainOptions o;
  const std::pair<const char*, const char*> bad[] = {
      {"c1", "-1"},          {"c2", "nan"},          {"c2", "abc"},        {"c2", "1e999"},
      {"delta", "-0.1"},     {"epsilon", ""},        {"memory", "0"},      {"max-linesearch", "0"},
      {"max-iterations", "-5"}, {"period", "2.5"},   {"epochs", "0"},      {"batch-size", "0"},
      {"seed", "-1"},        {"seed", "18446744073709551616"}, {"alpha", "0"}, {"line-search", "bogus"},
      {"sampling", "random"}, {"adf-beta", "-1"},    {"eta0", "x"},        {"sgd-epochs", "99999999999"},
      {"pa-type", "3"},      {"pa-c", "0"},          {"error-sensitive", "2"}, {"averaging", "yes"},
      {"variance", "0"},     {"gamma", "-1"},        {"boost-rule", "steepest"},
  };
  for (const auto& [name, text] : bad) {
    const OptionSpec* s = find_option(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_THROW(s->set(o, text), Error) << name << " = '" << text << "'";
  }
  EXPECT_EQ(values(o), values(TrainOptions{}));  // nothing half-set
}

/// A valid value other than the default, for every setting.
std::string other_value(const OptionSpec& s) {
  const std::string n = s.name;
  if (n == "line-search") return "heuristic";
  if (n == "sampling") return "uniform";
  if (n == "boost-rule") return "gradient";
  if (n == "seed") return "12345";
  if (n == "eta0") return "0.0123";
  if (n == "alpha" || n == "adf-alpha" || n == "adf-beta") return "0.5";
  if (n == "pa-type") return "2";
  if (n == "error-sensitive" || n == "averaging") return "0";
  if (std::string(s.kind) == "integer") return "3";
  return "0.25";
}

TEST(TrainerSettings, ASettingATrainerDoesNotListChangesNothing) {
  auto p = test::random_problem(3, 12, 0, 12, 6, 21);
  TrainOptions base;
  base.max_iterations = 4;
  base.epochs = 2;
  base.max_epochs = 2;
  base.sgd_epochs = 1;
  auto train = [&](const TrainerInfo& t, const TrainOptions& o) {
    CpuBackend b(p.dims, 1);
    auto corpus = b.upload(p.corpus);
    Objective obj(b, *corpus, 0.1, 0.2);
    auto w = b.vector(p.dims.num_weights());
    t.make()->train(obj, *w, o, nullptr);
    return to_host(b, *w);
  };
  for (const auto& t : trainer_registry()) {
    if (t.maxent_only) continue;  // on Maxent models: tests/test_maxent.cpp
    const std::vector<double> want = train(t, base);
    for (const OptionSpec& s : trainer_options()) {
      if (t.takes(s.name)) continue;
      TrainOptions o = base;
      s.set(o, other_value(s));
      ASSERT_NE(s.get(o), s.get(base)) << s.name;
      EXPECT_EQ(train(t, o), want) << t.name << " changed with --" << s.name << " " << other_value(s);
    }
  }
}

}  // namespace
}  // namespace crfx
