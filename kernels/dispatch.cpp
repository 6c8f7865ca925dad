// Choosing the kernel table: CPUID for what the CPU implements, XGETBV for what the OS saves
// on a context switch. An OS that does not enable the AVX-512 state (XCR0 bits 5-7) makes
// every AVX-512 instruction fault even though CPUID lists it, so both must agree.
#include <cpuid.h>


#include "kernels/kernels.h"
#include "nanoinfer/error.h"

namespace nanoinfer::kernels {
namespace {

struct CpuFeatures {
  bool avx2 = false;    // AVX2 + FMA + F16C, YMM state enabled by the OS
  bool avx512 = false;  // AVX-512 F/BW/DQ/VL, ZMM and opmask state enabled by the OS
};

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), fma = ecx & (1u << 12), f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;   // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const bool avx2 = ebx & (1u << 5);
  const bool avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17), avx512bw = ebx & (1u << 30),
             avx512vl = ebx & (1u << 31);
  f.avx2 = ymm_state && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512dq && avx512bw && avx512vl;
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace

const Kernels& table(Isa isa) {
  require_isa(isa);
  switch (isa) {
    case Isa::Scalar: return scalar_table();
    case Isa::Avx2: return avx2_table();
    case Isa::Avx512: return avx512_table();
  }
  return scalar_table();
}

}  // namespace nanoinfer::kernels

namespace nanoinfer {

std::vector<Isa> all_isas() { return {Isa::Scalar, Isa::Avx2, Isa::Avx512}; }

bool isa_supported(Isa isa) {
  const auto& f = kernels::features();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return f.avx2;
    case Isa::Avx512: return f.avx512;
  }
  return false;
}

std::string isa_missing(Isa isa) { return isa_supported(isa) ? "" : "CPU or OS support"; }

void require_isa(Isa isa) {
  if (!isa_supported(isa)) fail("instruction set '{}' is not supported here: missing {}", isa_name(isa), isa_missing(isa));
}

Isa best_isa() {
  if (isa_supported(Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : all_isas())
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

}  // namespace nanoinfer
