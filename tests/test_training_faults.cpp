// Numerical faults during training: attribute values large enough to overflow the weights
// (1e300, 1e150, 1e20). Every trainer either ends with finite weights or throws an Error naming
// the iteration or epoch where the objective stopped being finite; no report (and so no
// checkpoint) ever carries a non-finite objective.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/trainer.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

TEST(TrainingFaults, OverflowingValuesNeverGiveNonFiniteWeightsOrReports) {
  int errors = 0, finished = 0;
  for (double big : {1e300, 1e150, 1e20}) {
    auto p = test::random_problem(3, 20, 1, 30, 6, 5);
    p.corpus.state_values[3] = big;
    p.corpus.edge_values[2] = -big;
    for (const TrainerInfo& info : trainer_registry()) {
      if (info.maxent_only) continue;  // on Maxent models: tests/test_maxent.cpp
      SCOPED_TRACE(::testing::Message() << info.name << " value " << big);
      CpuBackend b(p.dims, 1);
      auto corpus = b.upload(p.corpus);
      TrainOptions o;
      o.max_iterations = 30;
      o.epochs = o.max_epochs = 5;
      o.sgd_epochs = 2;
      const std::string name = info.name;
      o.c1 = name == "owlqn" || name == "two-stage" ? 0.5 : 0;
      Objective obj(b, *corpus, o.c1, 1.0);
      auto w = b.vector(p.dims.num_weights());
      int last = 0;
      try {
        info.make()->train(obj, *w, o, [&](const Progress& pr, const Vector&) {
          EXPECT_TRUE(std::isfinite(pr.objective)) << "iteration " << pr.iteration;
          last = pr.iteration;
          return true;
        });
        for (double x : to_host(b, *w)) ASSERT_TRUE(std::isfinite(x));
        ++finished;
      } catch (const Error& e) {
        // "sag: the objective is NaN after epoch 2: the weights overflowed (…)", the epoch after the last report
        const std::string what = e.what();
        std::smatch m;
        ASSERT_TRUE(std::regex_search(what, m, std::regex("the objective is (NaN|infinite) after (epoch|iteration) ([0-9]+): "
                                                          "the weights overflowed")))
            << what;
        EXPECT_EQ(std::stoi(m[3]), last + 1) << what;
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0);  // both outcomes occur: the test sees each
  EXPECT_GT(finished, 0);
}

}  // namespace
}  // namespace crfx
