// Instruction sets the kernels are built for, detected at run time. A model is opened with
// one of them (ModelOptions::isa); nothing in the process is global, so two models in one
// process may run on different ISAs (the tests do, to compare them).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

enum class Isa { Scalar, Avx2, Avx512 };

std::string_view isa_name(Isa isa);                    // "scalar", "avx2", "avx512"
std::optional<Isa> parse_isa(std::string_view name);   // those names; nullopt otherwise ("auto" is the caller's)
std::vector<Isa> all_isas();                           // every ISA this build knows, scalar first
// CPUID says the instructions exist and the OS has enabled their register state.
bool isa_supported(Isa isa);
Isa best_isa();
// What this CPU/OS lacks for `isa` ("avx512bw, OS ZMM state"), empty when supported.
std::string isa_missing(Isa isa);
// Throws a one-line Error naming the ISA and what is missing when it is unsupported.
void require_isa(Isa isa);

}  // namespace nanoinfer
