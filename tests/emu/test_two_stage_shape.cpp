// crfx — two-stage's handover on the device (issue 37 item 4), counted by the emulated device:
// stage 1 (SGD-L1 with its line search) ends and stage 2 (OWL-QN) starts on the same uploaded
// corpus and the same weight vector, so the handover copies to the device what OWL-QN's first
// iteration copies on its own — the gradient's gather plans, built at the first full gradient
// (stage 1's steps and monitoring passes need none) — and not the corpus again.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../gpu/gpu_check.hpp"
#include "crfx/internal/trainer.hpp"
#include "emu/emu_launch.hpp"

namespace crfx::test {
namespace {

struct Windows {
  std::size_t upload_bytes = 0;           // the corpus's upload
  std::vector<emu::HostCounters> report;  // from one report (or the start) to the next
};

Windows windows(const char* algo, std::uint32_t sentences) {
  const auto p = random_problem(5, 30, 3, sentences, 12, 71);
  TrainOptions o;
  o.c1 = 0.1;
  o.c2 = 0;
  o.sgd_epochs = 2;
  o.max_iterations = 3;
  o.seed = 5;
  BackendPtr b = gpu_backend(p.dims);
  Windows out;
  emu::reset_host_counters();
  auto corpus = b->upload(p.corpus);
  out.upload_bytes = emu::host_counters().to_device_bytes;
  Objective obj(*b, *corpus, o.c1, o.c2);
  auto w = b->vector(p.dims.num_weights());
  emu::reset_host_counters();
  find_trainer(algo).make()->train(obj, *w, o, [&](const Progress&, const Vector&) {
    out.report.push_back(emu::host_counters());
    emu::reset_host_counters();
    return true;
  });
  return out;
}

// The window from stage 1's last report to stage 2's first holds OWL-QN's first iteration: it
// copies to the device what owlqn's own first iteration copies, and a later iteration nothing; a
// re-upload of the corpus would add its bytes.
TEST(TwoStageShape, StagesHandOverOnTheDevice) {
  REQUIRE_GPU();
  for (std::uint32_t n : {30u, 300u}) {
    SCOPED_TRACE(::testing::Message() << n << " sentences");
    const Windows w = windows("two-stage", n), alone = windows("owlqn", n);
    ASSERT_GE(alone.report.size(), 1u);
    ASSERT_GE(w.report.size(), 4u) << "2 SGD epochs and OWL-QN iterations reported";
    const emu::HostCounters& handover = w.report[2];  // after report 2 (stage 1's last)
    const emu::HostCounters& later = w.report[3];
    RecordProperty("n" + std::to_string(n) + "_upload_bytes", std::to_string(w.upload_bytes));
    RecordProperty("n" + std::to_string(n) + "_handover_bytes", std::to_string(handover.to_device_bytes));
    RecordProperty("n" + std::to_string(n) + "_later_iteration_bytes", std::to_string(later.to_device_bytes));
    RecordProperty("n" + std::to_string(n) + "_owlqn_first_bytes", std::to_string(alone.report[0].to_device_bytes));
    EXPECT_LE(handover.to_device_bytes, alone.report[0].to_device_bytes) << "owlqn's first iteration's copies, no more";
    EXPECT_EQ(later.to_device_bytes, 0u) << "an OWL-QN iteration after the first";
    EXPECT_EQ(alone.upload_bytes, w.upload_bytes);
  }
}

}  // namespace
}  // namespace crfx::test
