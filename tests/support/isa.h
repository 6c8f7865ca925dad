// ISA choices the tests share.
#pragma once

#include <vector>

#include "nanoinfer/isa.h"

namespace nanoinfer::test {

// The best tier here whose bf16 product keeps the activations in f32 (every tier but
// avx512-bf16, which rounds them to bf16): what a test pins when its reference assumes exact
// activations.
inline Isa exact_activation_isa() {
  CpuFeatures cpu = host_cpu_features();
  cpu.set(CpuFeature::Avx512bf16, false);
  return best_isa(cpu);
}

// Every ISA tier this CPU runs, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : all_isas())
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

}  // namespace nanoinfer::test
