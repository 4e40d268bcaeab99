// crfx — the check that a trainer resumed from a checkpoint ends where the uninterrupted run ends,
// bit for bit: shared by the CPU suite (tests/test_checkpoint.cpp) and the GPU suites
// (tests/gpu/test_cuda_checkpoint.cpp, run on the emulated device in CI).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "crfx/backend.hpp"
#include "crfx/checkpoint.hpp"
#include "crfx/trainer.hpp"
#include "random_problem.hpp"
#include "test_util.hpp"

namespace crfx::test {

/// One report of a run: what must continue unchanged after a resume.
struct Report {
  int iteration;
  double passes, objective;
};

struct Run {
  std::vector<double> w;
  double f = 0;
  std::vector<Report> reports;
  std::string stop_reason;
};

/// Trains `info` on p with `o` on a backend from `make`. With `stop_at` > 0 the run saves a
/// checkpoint to `path` at the report of that iteration and stops there; with `resume` it starts
/// from the checkpoint at `path`.
inline Run train_run(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p,
                     const TrainerInfo& info, const TrainOptions& o, int stop_at, const std::string& path,
                     bool resume) {
  BackendPtr b = make(p.dims);
  auto corpus = b->upload(p.corpus);
  Objective obj(*b, *corpus, o.c1, o.c2, o.loss);
  auto w = b->vector(p.dims.num_weights());
  auto trainer = info.make();
  std::unique_ptr<Checkpoint> ck;
  if (resume) {
    ck = std::make_unique<Checkpoint>(path);
    trainer->resume_from(&ck->state());
  }
  Run run;
  const ProgressFn progress = [&](const Progress& pr, const Vector&) {
    run.reports.push_back({pr.iteration, pr.passes, pr.objective});
    if (pr.iteration != stop_at) return true;
    EXPECT_NE(pr.state, nullptr) << "no state at iteration " << pr.iteration;
    if (!pr.state) return false;
    std::ofstream out(path, std::ios::binary);
    write_checkpoint([&](const char* d, std::size_t n) { out.write(d, std::streamsize(n)); },
                     {{"test", info.name}}, {}, *pr.state);
    return false;
  };
  run.f = trainer->train(obj, *w, o, progress);
  if (ck) ck->finish();
  run.w = to_host(*b, *w);
  run.stop_reason = trainer->stop_reason();
  return run;
}

inline bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// Stops the run at (up to `max_stops`, spread over the run) reported iterations, resumes each from
/// its checkpoint and checks: the same final weights and objective bit for bit, the same stop
/// reason, and reports that go on from the next iteration with the uninterrupted run's figures.
inline void check_resume_is_exact(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p,
                                  const TrainerInfo& info, const TrainOptions& o, std::size_t max_stops) {
  const Run full = train_run(make, p, info, o, 0, "", false);
  ASSERT_GE(full.reports.size(), 2u) << "too short a run to stop in";
  const std::size_t n = full.reports.size();
  std::vector<std::size_t> stops;
  for (std::size_t i = 0; i < std::min(max_stops, n); ++i)
    stops.push_back(max_stops >= n ? i : i * (n - 1) / (max_stops - 1));
  const std::string path = temp_path(std::string("resume-") + info.name + ".ckpt");
  for (std::size_t at : stops) {
    const int stop = full.reports[at].iteration;
    SCOPED_TRACE(::testing::Message() << info.name << " stopped at iteration " << stop);
    const Run first = train_run(make, p, info, o, stop, path, false);
    ASSERT_EQ(first.reports.size(), at + 1);
    const Run rest = train_run(make, p, info, o, 0, path, true);
    EXPECT_TRUE(bitwise_equal(rest.w, full.w)) << "the resumed run ends with other weights";
    EXPECT_EQ(std::memcmp(&rest.f, &full.f, sizeof(double)), 0) << rest.f << " vs " << full.f;
    EXPECT_EQ(rest.stop_reason, full.stop_reason);
    ASSERT_EQ(rest.reports.size(), n - at - 1);
    for (std::size_t i = 0; i < rest.reports.size(); ++i) {
      const Report &r = rest.reports[i], &e = full.reports[at + 1 + i];
      EXPECT_EQ(r.iteration, e.iteration);
      EXPECT_EQ(r.passes, e.passes);
      EXPECT_EQ(std::memcmp(&r.objective, &e.objective, sizeof(double)), 0) << "iteration " << r.iteration;
    }
  }
}

/// Settings under which every trainer runs a few reports on a small problem, with the features
/// each state has to carry: L1 (OWL-QN, the cumulative penalty, the prox), L2 (lazy decays).
inline TrainOptions resume_options(const std::string& algo) {
  TrainOptions o;
  o.c2 = 0.3;
  o.c1 = (algo == "owlqn" || algo == "two-stage" || algo == "sgd-l1" || algo == "sag" || algo == "lbfgs-l1") ? 0.2 : 0;
  o.max_iterations = 12;
  o.epochs = 4;
  o.max_epochs = 4;
  o.sgd_epochs = 2;
  o.delta = 1e-7;
  o.period = 3;
  o.batch_size = algo == "saga" || algo == "adf" ? 3 : 1;
  return o;
}

}  // namespace crfx::test
