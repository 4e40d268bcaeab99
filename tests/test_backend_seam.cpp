// crfx — the Backend seam is narrow (include/crfx/internal/backend.hpp): a backend is its 11 pure virtuals
// — name, upload, vector, write, read, swap, apply_rule and the CRF core (evaluate, viterbi,
// viterbi_nbest, marginals) — and the vector algebra (fill … sub_dot) comes with apply_rule, as
// element rules (host/backend/vector_rules.hpp). Shown by a third backend over host arrays that
// implements exactly those (its CRF core refuses): it compiles and instantiates only while Backend
// has no other pure virtual, and its algebra is the CPU backend's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "crfx/errors.hpp"
#include "crfx/internal/backend.hpp"
#include "fused_check.hpp"
#include "rules/rule_set.hpp"
#include "random_problem.hpp"

namespace crfx {
namespace {

struct HostVector final : Vector {
  explicit HostVector(std::size_t n) : data(n, 0.0) {}
  std::size_t size() const override { return data.size(); }
  std::vector<double> data;
};

std::vector<double>& H(Vector& v) { return dynamic_cast<HostVector&>(v).data; }
const std::vector<double>& H(const Vector& v) { return dynamic_cast<const HostVector&>(v).data; }

/// The least a backend implements: one thread, sums in index order, no CRF core.
class HostBackend final : public Backend {
 public:
  explicit HostBackend(const Dims& d) : Backend(d) {}
  std::string name() const override { return "host arrays (test)"; }
  BackendCorpusPtr upload(const Corpus&) override { throw Error("host arrays: no CRF core"); }
  VectorPtr vector(std::size_t n) override { return std::make_unique<HostVector>(n); }
  void write(Vector& dst, const double* src) override { std::copy(src, src + dst.size(), H(dst).begin()); }
  void read(const Vector& src, double* dst) override { std::copy(H(src).begin(), H(src).end(), dst); }
  void swap(Vector& x, Vector& y) override { H(x).swap(H(y)); }

  double apply_rule(const MapRule& rule, const MapOperands& ops, const SparseVector* over, bool sum) override {
    if (over) throw Error("host arrays: no sparse vectors");
    ++rules_run;
    return dispatch_rule(rule, [&](const auto& r) {
      using R = std::decay_t<decltype(r)>;
      const std::size_t n = rule_operand_size<R>(ops);
      RuleMemo<R> memo{};
      double fold = 0;
      for (std::size_t i = 0; i < n; ++i) {
        double* p[MapOperands::kMax] = {};
        for (int k = 0; k < R::kOperands; ++k)
          if (ops.v[k]) p[k] = H(*ops.v[k]).data() + i;
        const double t = apply_element(r, 0.0, p, memo);
        fold = rule_folds_max<R> ? std::max(fold, t) : fold + t;
      }
      return sum ? fold : 0.0;
    });
  }

  double evaluate(const BackendCorpus&, const Vector&, SentenceSpan, Vector*, double, SequenceLoss) override {
    throw Error("host arrays: no CRF core");
  }
  void viterbi(const BackendCorpus&, const Vector&, SentenceSpan, std::uint32_t*, double*) override {
    throw Error("host arrays: no CRF core");
  }
  void viterbi_nbest(const BackendCorpus&, const Vector&, SentenceSpan, std::size_t, std::uint32_t*,
                     double*) override {
    throw Error("host arrays: no CRF core");
  }
  void marginals(const BackendCorpus&, const Vector&, SentenceSpan, double*, double*) override {
    throw Error("host arrays: no CRF core");
  }

  std::size_t rules_run = 0;
};
static_assert(!std::is_abstract_v<HostBackend>, "Backend has a pure virtual beyond the narrow seam");

TEST(BackendSeam, TheVectorAlgebraComesWithApplyRule) {
  const std::size_t n = 70001;  // several of the CPU's reduction blocks, ragged end
  HostBackend h(test::vector_dims(n));
  CpuBackend c(test::vector_dims(n), 3);
  std::vector<double> x = test::random_weights(n, 1.0, 7), y = test::random_weights(n, 2.0, 8);
  for (std::size_t i = 0; i < n; i += 5) y[i] = 0.0;
  auto hx = to_backend(h, x), hy = to_backend(h, y), hz = h.vector(n);
  auto cx = to_backend(c, x), cy = to_backend(c, y), cz = c.vector(n);

  // Maps: the same element expressions, so the same bits.
  h.sub(*hx, *hy, *hz);
  c.sub(*cx, *cy, *cz);
  h.axpby(0.5, *hz, -2.0, *hy);
  c.axpby(0.5, *cz, -2.0, *cy);
  h.axpy(1.25, *hx, *hy);
  c.axpy(1.25, *cx, *cy);
  h.scale(-3.0, *hz);
  c.scale(-3.0, *cz);
  EXPECT_EQ(to_host(h, *hy), to_host(c, *cy));
  EXPECT_EQ(to_host(h, *hz), to_host(c, *cz));
  h.copy(*hy, *hz);
  EXPECT_EQ(to_host(h, *hz), to_host(h, *hy));
  h.fill(*hz, 0.75);
  EXPECT_EQ(to_host(h, *hz), std::vector<double>(n, 0.75));
  EXPECT_GE(h.rules_run, 6u);  // every call above went through apply_rule

  // Folds: the maximum and the count exactly, sums to rounding (index order here, lanes and
  // blocks on the CPU).
  auto hv = to_backend(h, y), cv = to_backend(c, y);
  EXPECT_EQ(h.norm_inf(*hv), c.norm_inf(*cv));
  EXPECT_GT(h.norm_inf(*hv), 0.0);
  EXPECT_EQ(h.count_nonzero(*hv), n - std::size_t(std::count(y.begin(), y.end(), 0.0)));
  EXPECT_EQ(c.count_nonzero(*cv), h.count_nonzero(*hv));
  EXPECT_NEAR(h.dot(*hx, *hv), c.dot(*cx, *cv), 1e-9 * n);
  EXPECT_NEAR(h.norm1(*hv), c.norm1(*cv), 1e-9 * n);
  EXPECT_NEAR(h.norm2sq(*hv), c.norm2sq(*cv), 1e-9 * n);
}

TEST(BackendSeam, TheFusedFormsEqualTheSeparateCallsOnAnyBackend) {
  for (std::size_t n : {std::size_t(1), std::size_t(1000)}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    HostBackend h(test::vector_dims(n));
    test::check_fused_equals_unfused(h, n);
  }
}

TEST(BackendSeam, OperandsOfDifferentSizesAreRefused) {
  HostBackend h(test::vector_dims(4));
  auto a = h.vector(4), b = h.vector(3);
  EXPECT_THROW(h.axpy(1.0, *a, *b), Error);
  EXPECT_THROW(h.dot(*a, *b), Error);
  EXPECT_THROW(h.sub_dot(*a, *a, *b, *a), Error);
}

}  // namespace
}  // namespace crfx
