// crfx — the check that a trainer resumed from a checkpoint ends where the uninterrupted run ends,
// bit for bit: shared by the CPU suite (tests/test_checkpoint.cpp) and the GPU suites
// (tests/gpu/test_cuda_checkpoint.cpp, run on the emulated device in CI).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "crfx/internal/backend.hpp"
#include "crfx/internal/checkpoint.hpp"
#include "crfx/internal/trainer.hpp"
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

/// What a test run of a trainer holds: the backend, the uploaded corpus, the objective, the weights
/// and the trainer — resuming from the checkpoint at `path` when `resume`.
struct TrainSetup {
  TrainSetup(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p, const TrainerInfo& info,
             const TrainOptions& o, const std::string& path, bool resume)
      : b(make(p.dims)), corpus(b->upload(p.corpus)), obj(*b, *corpus, o.c1, o.c2, o.loss),
        w(b->vector(p.dims.num_weights())), trainer(info.make()) {
    if (resume) {
      ck = std::make_unique<Checkpoint>(path);
      trainer->resume_from(&ck->state());
    }
  }
  /// Trains with `progress` into `run`: its objective, the checkpoint read whole (when resumed),
  /// the weights and the stop reason.
  void train(const TrainOptions& o, const ProgressFn& progress, Run& run) {
    run.f = trainer->train(obj, *w, o, progress);
    if (ck) ck->finish();
    run.w = to_host(*b, *w);
    run.stop_reason = trainer->stop_reason();
  }
  BackendPtr b;
  BackendCorpusPtr corpus;
  Objective obj;
  VectorPtr w;
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<Checkpoint> ck;
};

/// Writes the state a report hands over as a checkpoint file at `path`.
inline void save_state(const std::string& path, const TrainerInfo& info, const StateFn& state) {
  std::ofstream out(path, std::ios::binary);
  write_checkpoint([&](const char* d, std::size_t n) { out.write(d, std::streamsize(n)); }, {{"test", info.name}},
                   {}, state);
}

/// Trains `info` on p with `o` on a backend from `make`. With `stop_at` > 0 the run saves a
/// checkpoint to `path` at the report of that iteration and stops there; with `resume` it starts
/// from the checkpoint at `path`.
inline Run train_run(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p,
                     const TrainerInfo& info, const TrainOptions& o, int stop_at, const std::string& path,
                     bool resume) {
  TrainSetup ts(make, p, info, o, path, resume);
  Run run;
  ts.train(o, [&](const Progress& pr, const Vector&) {
    run.reports.push_back({pr.iteration, pr.passes, pr.objective});
    if (pr.iteration != stop_at) return true;
    EXPECT_NE(pr.state, nullptr) << "no state at iteration " << pr.iteration;
    if (!pr.state) return false;
    save_state(path, info, *pr.state);
    return false;
  }, run);
  return run;
}

inline bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  // (empty vectors may have no data(): memcmp must not be given a null pointer even for 0 bytes)
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
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

// ---- stops inside an epoch (Trainer::stop_when) ----------------------------------------------

/// Where a stochastic trainer stands between its mini-batches: how many batches an epoch has
/// (the poll is asked after every one but the last), the sentences per batch, and whether only
/// the first `polled_epochs` epochs poll (two-stage: its SGD stage).
struct BatchPlan {
  std::size_t batches = 0, batch = 0, sentences = 0;  // per epoch; sentences: of a whole epoch
  int polled_epochs = 0;
  std::size_t polls() const { return std::size_t(polled_epochs) * (batches - 1); }
  /// The epoch and the sentences done in it at the `k`-th poll (1-based).
  std::pair<int, std::size_t> at(std::size_t k) const {
    const std::size_t per = batches - 1;
    return {int((k - 1) / per) + 1, std::min(sentences, ((k - 1) % per + 1) * batch)};
  }
};

inline BatchPlan batch_plan(const std::string& algo, const TrainOptions& o, std::size_t n) {
  BatchPlan plan;
  const bool sag = algo == "sag" || algo == "saga";
  plan.batch = sag ? std::min(o.batch_size, n) : o.batch_size;
  plan.batches = (n + plan.batch - 1) / plan.batch;
  plan.sentences = sag ? plan.batches * plan.batch : n;  // sag, saga: sentences drawn
  plan.polled_epochs = sag ? o.max_epochs : algo == "two-stage" ? o.sgd_epochs : o.epochs;
  return plan;
}

/// A run whose poll (stop_when) says stop at its `stop_at`-th question (0: never), saving a
/// checkpoint to `path` (or `save_to`) at the report inside the epoch that follows; with
/// `resume`, from the checkpoint at `path`. `polls`: how often the poll was asked; `within`: that
/// last report.
struct StoppedRun : Run {
  std::size_t polls = 0;
  std::vector<Progress> within;
  std::vector<double> handed;  // the weights handed to the report inside the epoch
};

inline StoppedRun train_stopped(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p,
                                const TrainerInfo& info, const TrainOptions& o, std::size_t stop_at,
                                const std::string& path, bool resume, const std::string& save_to = "") {
  TrainSetup ts(make, p, info, o, path, resume);
  StoppedRun run;
  ts.trainer->stop_when([&] { return ++run.polls == stop_at; });
  ts.train(o, [&](const Progress& pr, const Vector& x) {
    if (!pr.within_iteration()) {
      run.reports.push_back({pr.iteration, pr.passes, pr.objective});
      return true;
    }
    run.within.push_back(pr);
    run.within.back().state = nullptr;
    run.handed = to_host(*ts.b, x);
    EXPECT_NE(pr.state, nullptr);
    if (!pr.state) return false;
    save_state(save_to.empty() ? path : save_to, info, *pr.state);
    return true;  // ignored: the poll stopped it
  }, run);
  return run;
}

/// Stops a stochastic trainer by its poll after each of `stops` mini-batches (counted over the
/// run; the poll's k-th question follows batch k of the epochs' batches but their last) and
/// checks: the poll is asked after every batch but an epoch's last, and nowhere else; the stop
/// comes right after the batch asked (the report inside the epoch names its epoch and the
/// sentences done, and no epoch report follows); a fresh trainer resumed from that state ends
/// with the uninterrupted run's weights and objective bit for bit, the same stop reason, and
/// the uninterrupted run's reports from that epoch on, each once.
inline void check_stop_within_is_exact(const std::function<BackendPtr(const Dims&)>& make, const RandomProblem& p,
                                       const TrainerInfo& info, const TrainOptions& o,
                                       const std::vector<std::size_t>& stops) {
  const BatchPlan plan = batch_plan(info.name, o, p.corpus.num_sentences());
  ASSERT_GE(plan.batches, 2u) << "one batch per epoch: nothing to stop inside";
  const std::string path = temp_path(std::string("within-") + info.name + ".ckpt");
  const StoppedRun full = train_stopped(make, p, info, o, 0, path, false);
  EXPECT_EQ(full.polls, plan.polls()) << "the poll is asked after every mini-batch but an epoch's last";
  EXPECT_TRUE(full.within.empty());
  for (std::size_t k : stops) {
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, plan.polls());
    const auto [epoch, done] = plan.at(k);
    SCOPED_TRACE(::testing::Message() << info.name << " stopped after mini-batch " << k << " (epoch " << epoch
                                      << ", " << done << " sentences)");
    const StoppedRun first = train_stopped(make, p, info, o, k, path, false);
    EXPECT_EQ(first.polls, k) << "asked again after the stop";
    ASSERT_EQ(first.within.size(), 1u) << "no report inside the epoch";
    EXPECT_EQ(first.within[0].iteration, epoch);
    EXPECT_EQ(first.within[0].sentences, done);
    EXPECT_EQ(first.within[0].epoch_sentences, plan.sentences);
    EXPECT_TRUE(std::isnan(first.within[0].objective));
    EXPECT_TRUE(std::isnan(first.f));
    EXPECT_EQ(first.stop_reason, stop_by_caller());
    // The epochs before it reported, as in the uninterrupted run; none after.
    std::size_t before = 0;
    while (before < full.reports.size() && full.reports[before].iteration < epoch) ++before;
    ASSERT_EQ(first.reports.size(), before);
    for (std::size_t i = 0; i < before; ++i) EXPECT_EQ(first.reports[i].iteration, full.reports[i].iteration);
    EXPECT_GT(first.within[0].passes, before ? full.reports[before - 1].passes : 0.0);
    if (before < full.reports.size()) {
      EXPECT_LT(first.within[0].passes, full.reports[before].passes);
    }
    if (std::string(info.name) == "ap") {  // the model is the average handed to the report
      EXPECT_TRUE(bitwise_equal(first.w, first.handed));
    } else if (o.c2 > 0 && info.uses_objective && std::string(info.name) != "adf") {
      // The lazy L2 decay (sag, saga: the lazy steps) applied to the model. (adf: unless the stop
      // follows a window's end, where every weight was brought up to date for the new rates; pa,
      // arow, mira: c2 takes no part in their steps.)
      EXPECT_FALSE(bitwise_equal(first.w, first.handed)) << "the model is the working weights";
    }

    const StoppedRun rest = train_stopped(make, p, info, o, 0, path, true);
    EXPECT_EQ(rest.polls, full.polls - k);
    EXPECT_TRUE(bitwise_equal(rest.w, full.w)) << "the resumed run ends with other weights";
    EXPECT_EQ(std::memcmp(&rest.f, &full.f, sizeof(double)), 0) << rest.f << " vs " << full.f;
    EXPECT_EQ(rest.stop_reason, full.stop_reason);
    ASSERT_EQ(rest.reports.size(), full.reports.size() - before);
    for (std::size_t i = 0; i < rest.reports.size(); ++i) {
      const Report &r = rest.reports[i], &e = full.reports[before + i];
      EXPECT_EQ(r.iteration, e.iteration);
      EXPECT_EQ(r.passes, e.passes);
      EXPECT_EQ(std::memcmp(&r.objective, &e.objective, sizeof(double)), 0) << "iteration " << r.iteration;
    }
    // A resumed run stopped inside an epoch again (its second question) and resumed once more.
    if (full.polls - k >= 2) {
      const std::string again = path + ".again";
      const StoppedRun second = train_stopped(make, p, info, o, 2, path, true, again);
      ASSERT_EQ(second.within.size(), 1u);
      const StoppedRun last = train_stopped(make, p, info, o, 0, again, true);
      EXPECT_EQ(last.polls, full.polls - k - 2);
      EXPECT_TRUE(bitwise_equal(last.w, full.w)) << "resumed twice: other weights";
    }
  }
}

/// The poll's questions to stop at: the first and the last of the first epoch's, the first of the
/// second epoch, one in the middle of the run and the very last.
inline std::vector<std::size_t> within_stops(const std::string& algo, const TrainOptions& o, std::size_t n) {
  const BatchPlan plan = batch_plan(algo, o, n);
  const std::size_t per = plan.batches - 1, total = plan.polls();
  std::vector<std::size_t> k = {1, per, per + 1, total / 2 + 1, total};
  std::sort(k.begin(), k.end());
  k.erase(std::unique(k.begin(), k.end()), k.end());
  k.erase(std::remove_if(k.begin(), k.end(), [&](std::size_t x) { return x < 1 || x > total; }), k.end());
  return k;
}

/// Settings under which every trainer runs a few reports on a small problem, with the features
/// each state has to carry: L1 (OWL-QN, the cumulative penalty, the prox), L2 (lazy decays).
inline TrainOptions resume_options(const std::string& algo) {
  TrainOptions o;
  o.c2 = 0.3;
  o.c1 = (algo == "owlqn" || algo == "two-stage" || algo == "sgd-l1" || algo == "sag" || algo == "bcd" ||
          algo == "lbfgs-l1")
             ? 0.2
             : 0;
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
