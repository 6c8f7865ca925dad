// Instruction sets the kernels are built for, detected at run time. A model is opened with
// one of them (ModelOptions::isa); nothing in the process is global, so two models in one
// process may run on different ISAs (the tests do, to compare them).
//
// The ISAs are tiers: each adds instructions to the one below it and has its own kernel
// files, compiled with exactly the flags its runtime check covers (CMakeLists.txt, by file
// name). A tier without its own kernel for something reuses the lower tier's.
//
//   scalar        plain C++, any x86-64
//   avx2          AVX2 + FMA + F16C (and the SSE3..SSE4.2/POPCNT they imply), YMM state
//   avx2-vnni     avx2 + AVX-VNNI (vpdpbusd on ymm)
//   avx512        avx2 + AVX-512 F/DQ/BW/VL, opmask and ZMM state
//   avx512-vnni   avx512 + AVX512-VNNI (vpdpbusd on zmm)
//   avx512-bf16   avx512-vnni + AVX512-BF16 (vdpbf16ps on zmm). Only its bf16 product is new,
//                 and it rounds the activations to bf16 (kernels/scalar_bf16_dot.cpp states
//                 the rule and its bound); every other entry is avx512-vnni's, bit for bit.
//
// AMX is not a tier: no kernel uses it yet, and a tier is only worth its check once it has
// code behind it.
#pragma once

#include <bitset>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

enum class Isa { Scalar, Avx2, Avx2Vnni, Avx512, Avx512Vnni, Avx512Bf16 };

// What the CPU reports (CPUID) and the OS has enabled (XCR0, read with XGETBV): the only
// input of every support decision below.
enum class CpuFeature {
  Sse3,
  Ssse3,
  Sse41,
  Sse42,
  Popcnt,
  Avx,
  Fma,
  F16c,
  Avx2,  // CPUID
  Avx512f,
  Avx512dq,
  Avx512bw,
  Avx512vl,
  Avx512vnni,
  AvxVnni,
  Avx512bf16,
  OsYmm,  // XCR0 bits 1-2: the OS saves SSE and AVX state
  OsZmm,  // XCR0 bits 5-7: the OS saves opmask, ZMM_Hi256 and Hi16_ZMM state
  Count
};
inline constexpr size_t kCpuFeatureCount = static_cast<size_t>(CpuFeature::Count);

// "sse4.2", "avx512vnni", "avxvnni", "avx512bf16", "OS ZMM state", ... (the /proc/cpuinfo spelling without
// its underscores for CPUID bits).
std::string_view cpu_feature_name(CpuFeature f);

struct CpuFeatures {
  std::bitset<kCpuFeatureCount> bits;
  bool has(CpuFeature f) const { return bits.test(static_cast<size_t>(f)); }
  CpuFeatures& set(CpuFeature f, bool on = true) {
    bits.set(static_cast<size_t>(f), on);
    return *this;
  }
  static CpuFeatures all() { return CpuFeatures{std::bitset<kCpuFeatureCount>().set()}; }
};

// This machine, read once: CPUID + XGETBV, minus the features named in the environment
// variable NANOINFER_CPU_DISABLE (comma-separated cpu_feature_name spellings, e.g.
// "avx512vnni" or "OS ZMM state"). The variable can only take features away, so it can
// never make an unsupported ISA run; it lets a user (or a test) try a lower tier as if on an
// older CPU. An unknown name there is an Error.
const CpuFeatures& host_cpu_features();

std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-bf16"
std::optional<Isa> parse_isa(std::string_view name);  // those names; nullopt otherwise ("auto" is the caller's)
std::vector<Isa> all_isas();                          // every ISA this build knows, lowest tier first
std::vector<CpuFeature> isa_requirements(Isa isa);    // everything the ISA's check covers

// Each question below has a host form (host_cpu_features()) and one that takes the features,
// so tests can ask about a CPU that is not this one.
// What `cpu` lacks for `isa` ("avx512bw, OS ZMM state"), empty when supported.
std::string isa_missing(Isa isa, const CpuFeatures& cpu);
std::string isa_missing(Isa isa);
bool isa_supported(Isa isa, const CpuFeatures& cpu);
bool isa_supported(Isa isa);
// The highest supported tier.
Isa best_isa(const CpuFeatures& cpu);
Isa best_isa();
// Throws a one-line Error naming the ISA and what is missing when it is unsupported.
void require_isa(Isa isa, const CpuFeatures& cpu);
void require_isa(Isa isa);

}  // namespace nanoinfer
