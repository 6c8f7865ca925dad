// Choosing the kernel table: CPUID for what the CPU implements, XGETBV for what the OS saves
// on a context switch. An OS that does not enable the AVX or AVX-512 register state (XCR0)
// makes those instructions fault even though CPUID lists them, so both must agree.
//
// This file is compiled with the baseline flags; it only names the tiers' kernels. The tables
// are copies of function addresses (the tier files' ByType lists are constant-initialised), so
// building, choosing or refusing a tier runs no code compiled for it.
#include <cpuid.h>

#include <cstdlib>
#include <initializer_list>

#include "kernels/kernels.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

using F = CpuFeature;

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const auto bit = [](unsigned reg, int n) { return (reg >> n & 1u) != 0; };
  f.set(F::Sse3, bit(ecx, 0)).set(F::Ssse3, bit(ecx, 9)).set(F::Fma, bit(ecx, 12)).set(F::Sse41, bit(ecx, 19));
  f.set(F::Sse42, bit(ecx, 20)).set(F::Popcnt, bit(ecx, 23)).set(F::Avx, bit(ecx, 28)).set(F::F16c, bit(ecx, 29));
  // XGETBV exists only when the OS has set CR4.OSXSAVE (CPUID.1:ECX bit 27).
  if (bit(ecx, 27)) {
    const uint64_t xcr0 = read_xcr0();
    f.set(F::OsYmm, (xcr0 & 0x6) == 0x6);    // SSE and AVX state
    f.set(F::OsZmm, (xcr0 & 0xe0) == 0xe0);  // opmask, ZMM_Hi256, Hi16_ZMM
  }
  unsigned max_leaf = 0;
  if (!__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx) || max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const unsigned max_subleaf = eax;
  f.set(F::Avx2, bit(ebx, 5)).set(F::Avx512f, bit(ebx, 16)).set(F::Avx512dq, bit(ebx, 17));
  f.set(F::Avx512bw, bit(ebx, 30)).set(F::Avx512vl, bit(ebx, 31)).set(F::Avx512vnni, bit(ecx, 11));
  if (max_subleaf >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.set(F::AvxVnni, bit(eax, 4)).set(F::Avx512bf16, bit(eax, 5));
  }
  return f;
}

CpuFeatures detect_host() {
  CpuFeatures f = detect();
  const char* env = std::getenv("NANOINFER_CPU_DISABLE");
  if (!env) return f;
  const std::string_view list(env);
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = list.find(',', begin);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view name = list.substr(begin, end - begin);
    if (!name.empty()) {
      bool known = false;
      for (size_t i = 0; i < kCpuFeatureCount; ++i) {
        if (cpu_feature_name(static_cast<F>(i)) == name) {
          f.set(static_cast<F>(i), false);
          known = true;
        }
      }
      if (!known) fail("NANOINFER_CPU_DISABLE: unknown CPU feature '{}'", name);
    }
    begin = end + 1;
  }
  return f;
}

}  // namespace

std::string_view cpu_feature_name(CpuFeature f) {
  switch (f) {
    case F::Sse3:
      return "sse3";
    case F::Ssse3:
      return "ssse3";
    case F::Sse41:
      return "sse4.1";
    case F::Sse42:
      return "sse4.2";
    case F::Popcnt:
      return "popcnt";
    case F::Avx:
      return "avx";
    case F::Fma:
      return "fma";
    case F::F16c:
      return "f16c";
    case F::Avx2:
      return "avx2";
    case F::Avx512f:
      return "avx512f";
    case F::Avx512dq:
      return "avx512dq";
    case F::Avx512bw:
      return "avx512bw";
    case F::Avx512vl:
      return "avx512vl";
    case F::Avx512vnni:
      return "avx512vnni";
    case F::AvxVnni:
      return "avxvnni";
    case F::Avx512bf16:
      return "avx512bf16";
    case F::OsYmm:
      return "OS YMM state";
    case F::OsZmm:
      return "OS ZMM state";
    case F::Count:
      break;
  }
  return "unknown";
}

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures f = detect_host();
  return f;
}

std::vector<Isa> all_isas() {
  return {Isa::Scalar, Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512, Isa::Avx512Vnni, Isa::Avx512Bf16};
}

// What each tier's files are compiled with, feature for feature (CMakeLists.txt): GCC's
// -mavx2 also enables SSE3..SSE4.2 and POPCNT, so the check covers those too.
std::vector<CpuFeature> isa_requirements(Isa isa) {
  const std::initializer_list<F> avx2 = {F::Sse3, F::Ssse3, F::Sse41, F::Sse42, F::Popcnt,
                                         F::Avx,  F::Fma,   F::F16c,  F::Avx2,  F::OsYmm};
  const std::initializer_list<F> avx512 = {F::Avx512f, F::Avx512dq, F::Avx512bw, F::Avx512vl, F::OsZmm};
  std::vector<F> req;
  switch (isa) {
    case Isa::Scalar:
      break;
    case Isa::Avx2:
      req.assign(avx2);
      break;
    case Isa::Avx2Vnni:
      req.assign(avx2);
      req.push_back(F::AvxVnni);
      break;
    case Isa::Avx512:
      req.assign(avx2);
      req.insert(req.end(), avx512);
      break;
    case Isa::Avx512Vnni:
      req.assign(avx2);
      req.insert(req.end(), avx512);
      req.push_back(F::Avx512vnni);
      break;
    case Isa::Avx512Bf16:
      req.assign(avx2);
      req.insert(req.end(), avx512);
      req.push_back(F::Avx512vnni);
      req.push_back(F::Avx512bf16);
      break;
  }
  return req;
}

std::string isa_missing(Isa isa, const CpuFeatures& cpu) {
  std::string missing;
  for (F f : isa_requirements(isa)) {
    if (cpu.has(f)) continue;
    if (!missing.empty()) missing += ", ";
    missing += cpu_feature_name(f);
  }
  return missing;
}
std::string isa_missing(Isa isa) {
  return isa_missing(isa, host_cpu_features());
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) {
  return isa_missing(isa, cpu).empty();
}
bool isa_supported(Isa isa) {
  return isa_supported(isa, host_cpu_features());
}

void require_isa(Isa isa, const CpuFeatures& cpu) {
  const std::string missing = isa_missing(isa, cpu);
  if (!missing.empty()) fail("instruction set '{}' is not supported here: missing {}", isa_name(isa), missing);
}
void require_isa(Isa isa) {
  require_isa(isa, host_cpu_features());
}

Isa best_isa(const CpuFeatures& cpu) {
  const std::vector<Isa> isas = all_isas();
  for (auto it = isas.rbegin(); it != isas.rend(); ++it)
    if (isa_supported(*it, cpu)) return *it;
  return Isa::Scalar;
}
Isa best_isa() {
  return best_isa(host_cpu_features());
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx2Vnni:
      return "avx2-vnni";
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx512Vnni:
      return "avx512-vnni";
    case Isa::Avx512Bf16:
      return "avx512-bf16";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : all_isas())
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

}  // namespace nanoinfer

namespace nanoinfer::kernels {
namespace {

// Each tier's table is the table of the tier below it with the kernels the tier adds; every
// entry it does not set is the lower tier's, ultimately the scalar reference.
Kernels scalar_kernels() {
  return Kernels{
      .isa = Isa::Scalar,
      .matmul = {.f32 = scalar::matmul_f32, .bf16 = scalar::matmul_bf16},
      .matmul_quantized = matmul_quantized_scaled.with(matmul_quantized_file).with(matmul_quantized_k),
      .quantize_activations = quantize_activations,
      .dot_rows_f32 = scalar::dot_rows_f32,
      .axpy_rows_f32 = scalar::axpy_rows_f32,
      .attention = {.f32 = scalar::attention_f32, .bf16 = scalar::attention_bf16, .f16 = scalar::attention_f16},
      .exp_f32 = scalar::exp_f32,
      .silu_mul_f32 = scalar::silu_mul_f32,
      .score_block = score_block,
      .refit_block = refit_block,
  };
}

// Every SIMD tier quantizes activations and runs the quantizer's search steps with the AVX2
// code (bitwise the scalar reference, like everything else).
Kernels avx2_kernels() {
  Kernels k = scalar_kernels();
  k.isa = Isa::Avx2;
  k.matmul = avx2::matmul;
  k.matmul_quantized = k.matmul_quantized.with(avx2::matmul_quantized);
  k.quantize_activations = avx2::quantize_activations;
  k.matmul_packed = avx2::matmul_packed;
  k.dot_rows_f32 = avx2::dot_rows_f32;
  k.axpy_rows_f32 = avx2::axpy_rows_f32;
  k.attention = avx2::attention;
  k.exp_f32 = avx2::exp_f32;
  k.silu_mul_f32 = avx2::silu_mul_f32;
  k.score_block = avx2::score_block;
  k.refit_block = avx2::refit_block;
  return k;
}

Kernels avx2_vnni_kernels() {
  Kernels k = avx2_kernels();
  k.isa = Isa::Avx2Vnni;
  k.matmul_quantized = k.matmul_quantized.with(avx2_vnni::matmul_quantized);
  k.matmul_packed = k.matmul_packed.with(avx2_vnni::matmul_packed);
  return k;
}

// Without VNNI, 512-bit integer dot products gain little over the AVX2 ones (vpmaddubsw has
// no zmm sign trick), so the avx512 tier keeps AVX2's quantized kernels.
Kernels avx512_kernels() {
  Kernels k = avx2_kernels();
  k.isa = Isa::Avx512;
  k.matmul = avx512::matmul;
  k.matmul_packed_float = avx512::matmul_packed_float;
  k.dot_rows_f32 = avx512::dot_rows_f32;
  k.axpy_rows_f32 = avx512::axpy_rows_f32;
  k.attention = avx512::attention;
  k.exp_f32 = avx512::exp_f32;
  k.silu_mul_f32 = avx512::silu_mul_f32;
  return k;
}

Kernels avx512_vnni_kernels() {
  Kernels k = avx512_kernels();
  k.isa = Isa::Avx512Vnni;
  k.matmul_quantized = k.matmul_quantized.with(avx512_vnni::matmul_quantized);
  k.matmul_packed = k.matmul_packed.with(avx512_vnni::matmul_packed);
  return k;
}

// avx512-vnni's table with one change: the bf16 product on vdpbf16ps, which rounds the
// activations to bf16 (kernels/scalar_bf16_dot.cpp). Nothing else differs by a bit.
Kernels avx512_bf16_kernels() {
  Kernels k = avx512_vnni_kernels();
  k.isa = Isa::Avx512Bf16;
  k.matmul.bf16 = avx512_bf16::matmul_bf16;
  k.round_activations_bf16 = avx512_bf16::round_activations;
  k.matmul_bf16_rounded = avx512_bf16::matmul_bf16_rounded;
  k.matmul_packed_float.bf16 = avx512_bf16::matmul_bf16_packed;
  k.matmul_bf16_rounded_packed = avx512_bf16::matmul_bf16_rounded_packed;
  return k;
}

Kernels kernels_of(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return scalar_kernels();
    case Isa::Avx2:
      return avx2_kernels();
    case Isa::Avx2Vnni:
      return avx2_vnni_kernels();
    case Isa::Avx512:
      return avx512_kernels();
    case Isa::Avx512Vnni:
      return avx512_vnni_kernels();
    case Isa::Avx512Bf16:
      return avx512_bf16_kernels();
  }
  fail("unknown instruction set {}", static_cast<int>(isa));
}

// Every tier's table, built once on first use; indexed by Isa.
const std::vector<Kernels>& all_tables() {
  static const std::vector<Kernels> tables = [] {
    std::vector<Kernels> t;
    for (Isa isa : all_isas()) t.push_back(kernels_of(isa));
    return t;
  }();
  return tables;
}

}  // namespace

const Kernels& scalar_table() {
  return all_tables()[static_cast<size_t>(Isa::Scalar)];
}

const Kernels& table(Isa isa, const CpuFeatures& cpu) {
  require_isa(isa, cpu);
  return all_tables().at(static_cast<size_t>(isa));
}

const Kernels& table(Isa isa) {
  return table(isa, host_cpu_features());
}

}  // namespace nanoinfer::kernels
