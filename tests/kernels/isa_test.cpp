// ISA dispatch that cannot crash: every tier is checked against exactly the CPU features its
// files are compiled with, and a tier the CPU lacks is refused, by name, before any of its
// code runs. The machine running the tests may support every tier, so the refusals are
// shown on made-up CPUs (a CpuFeatures value) and, end to end, on this one with features
// taken away by NANOINFER_CPU_DISABLE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::error_of;

using F = CpuFeature;

TEST(Isa, EveryTierIsRefusedWithExactlyTheFeatureItLacks) {
  const std::vector<Isa> isas = all_isas();
  ASSERT_EQ(isas.size(), 6u);
  EXPECT_EQ(isas.front(), Isa::Scalar);
  size_t refusals = 0;
  for (Isa isa : isas) {
    const std::vector<CpuFeature> req = isa_requirements(isa);
    EXPECT_TRUE(isa_supported(isa, CpuFeatures::all())) << isa_name(isa);
    EXPECT_EQ(&kernels::table(isa, CpuFeatures::all()), &kernels::table(isa, CpuFeatures::all()));
    EXPECT_EQ(kernels::table(isa, CpuFeatures::all()).isa, isa);
    for (CpuFeature f : req) {
      const CpuFeatures cpu = CpuFeatures::all().set(f, false);
      const std::string name(cpu_feature_name(f));
      EXPECT_EQ(isa_missing(isa, cpu), name) << isa_name(isa);
      EXPECT_FALSE(isa_supported(isa, cpu));
      // The table is never handed out, so none of the tier's code can be called.
      const std::string err = error_of([&] { kernels::table(isa, cpu); });
      EXPECT_EQ(err, "instruction set '" + std::string(isa_name(isa)) + "' is not supported here: missing " + name);
      EXPECT_EQ(error_of([&] { require_isa(isa, cpu); }), err);
      ++refusals;
    }
    // A feature outside the tier's list does not matter to it.
    for (size_t i = 0; i < kCpuFeatureCount; ++i) {
      const auto f = static_cast<CpuFeature>(i);
      if (std::find(req.begin(), req.end(), f) == req.end()) {
        EXPECT_TRUE(isa_supported(isa, CpuFeatures::all().set(f, false)))
            << isa_name(isa) << " " << cpu_feature_name(f);
      }
    }
  }
  // avx2: 10 features; avx2-vnni: +1; avx512: 10 + 5; avx512-vnni: +1; avx512-bf16: +1.
  EXPECT_EQ(refusals, 0u + 10 + 11 + 15 + 16 + 17);
}

TEST(Isa, NothingIsSupportedOnACpuWithoutFeaturesButScalar) {
  const CpuFeatures none;
  EXPECT_EQ(best_isa(none), Isa::Scalar);
  EXPECT_EQ(kernels::table(Isa::Scalar, none).isa, Isa::Scalar);
  EXPECT_EQ(isa_missing(Isa::Avx2, none), "sse3, ssse3, sse4.1, sse4.2, popcnt, avx, fma, f16c, avx2, OS YMM state");
  EXPECT_NE(error_of([&] { kernels::table(Isa::Avx512Vnni, none); }).find("missing sse3, ssse3, "), std::string::npos);
}

TEST(Isa, BestIsTheHighestTierTheCpuHas) {
  const CpuFeatures all = CpuFeatures::all();
  EXPECT_EQ(best_isa(all), Isa::Avx512Bf16);
  // Ice Lake, Zen 4 without BF16 reported: VNNI is the top.
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::Avx512bf16, false)), Isa::Avx512Vnni);
  // The bf16 tier sits on avx512-vnni: without VNNI it is not offered even with BF16.
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::Avx512vnni, false)), Isa::Avx512);
  EXPECT_EQ(isa_missing(Isa::Avx512Bf16, CpuFeatures::all().set(F::Avx512vnni, false).set(F::Avx512bf16, false)),
            "avx512vnni, avx512bf16");
  // Zen 2-3: AVX2 only.
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::Avx512f, false).set(F::AvxVnni, false)), Isa::Avx2);
  // Alder Lake: AVX-VNNI without AVX-512.
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::Avx512f, false)), Isa::Avx2Vnni);
  // An OS that does not save ZMM state: AVX-512 unusable although CPUID lists it.
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::OsZmm, false)), Isa::Avx2Vnni);
  EXPECT_EQ(best_isa(CpuFeatures::all().set(F::OsYmm, false)), Isa::Scalar);
}

TEST(Isa, NamesParse) {
  for (Isa isa : all_isas()) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(isa_name(Isa::Avx2Vnni), "avx2-vnni");
  EXPECT_EQ(isa_name(Isa::Avx512Vnni), "avx512-vnni");
  EXPECT_EQ(isa_name(Isa::Avx512Bf16), "avx512-bf16");
  EXPECT_EQ(cpu_feature_name(F::Avx512bf16), "avx512bf16");
  EXPECT_EQ(parse_isa("AVX2"), std::nullopt);
  EXPECT_EQ(parse_isa("avx512_vnni"), std::nullopt);
  for (size_t i = 0; i < kCpuFeatureCount; ++i) EXPECT_NE(cpu_feature_name(static_cast<CpuFeature>(i)), "unknown");
}

// Sets an environment variable for the child processes of one test, and restores what was
// there (the whole binary may run under NANOINFER_CPU_DISABLE; later tests check it is set).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class IsaCli : public ::testing::Test {
 protected:
  void SetUp() override { test::write_tiny_model_dir(dir_.path()); }
  std::string dir() const { return dir_.path().string(); }
  test::TempDir dir_;
};

TEST_F(IsaCli, GenerateRefusesAnIsaTheCpuLacksInOneLine) {
  // Asked before the variable is set: this process caches its own features on first use.
  const bool avx2_here = isa_supported(Isa::Avx2);
  // Whatever this machine has, these features are gone for the child, so the message is the
  // same on a CPU with AVX-512 and on one without (every feature the tiers need is hidden).
  const ScopedEnv env("NANOINFER_CPU_DISABLE",
                      "avx512f,avx512dq,avx512bw,avx512vl,avx512vnni,OS ZMM state,avxvnni,avx512bf16");
  const std::string avx512 = "avx512f, avx512dq, avx512bw, avx512vl, OS ZMM state";
  test::expect_error_exactly(test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--isa", "avx512-vnni"}),
                             "instruction set 'avx512-vnni' is not supported here: missing " + avx512 + ", avx512vnni");
  test::expect_error_exactly(
      test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--isa", "avx512-bf16"}),
      "instruction set 'avx512-bf16' is not supported here: missing " + avx512 + ", avx512vnni, avx512bf16");
  test::expect_error_exactly(test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--isa", "avx2-vnni"}),
                             "instruction set 'avx2-vnni' is not supported here: missing avxvnni");
  // auto falls back to what is left.
  if (avx2_here) {
    const auto r = test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--verbose"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find(", avx2 kernels)"), std::string::npos) << r.err;
  }
}

// auto takes avx512-bf16 where the CPU has it; hiding avx512bf16 alone steps down to
// avx512-vnni (the exact-activation bf16 product).
TEST_F(IsaCli, AutoPicksTheBf16TierAndHidingItStepsDownOne) {
  if (!isa_supported(Isa::Avx512Bf16))
    GTEST_SKIP() << "this CPU/OS lacks avx512-bf16: " << isa_missing(Isa::Avx512Bf16);
  const auto best = test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--verbose"});
  ASSERT_EQ(best.status, 0) << best.err;
  EXPECT_NE(best.err.find(", avx512-bf16 kernels)"), std::string::npos) << best.err;
  const ScopedEnv env("NANOINFER_CPU_DISABLE", "avx512bf16");
  const auto r = test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--verbose"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(", avx512-vnni kernels)"), std::string::npos) << r.err;
  test::expect_error_exactly(test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1", "--isa", "avx512-bf16"}),
                             "instruction set 'avx512-bf16' is not supported here: missing avx512bf16");
}

TEST_F(IsaCli, HelpNamesEveryTier) {
  const auto r = test::run_cli({"generate", "--help"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (Isa isa : all_isas()) EXPECT_NE(r.out.find(std::string(isa_name(isa))), std::string::npos) << isa_name(isa);
  EXPECT_NE(r.out.find("NANOINFER_CPU_DISABLE"), std::string::npos);
}

TEST_F(IsaCli, UnknownFeatureToDisableIsAOneLineError) {
  (void)host_cpu_features();  // cached before the variable is set, as above
  const ScopedEnv env("NANOINFER_CPU_DISABLE", "avx1024");
  test::expect_error_exactly(test::run_cli({"generate", "-m", dir(), "-p", "x", "-n", "1"}),
                             "NANOINFER_CPU_DISABLE: unknown CPU feature 'avx1024'");
}

}  // namespace
}  // namespace nanoinfer
