// Which GGUF file of a repository a reference's :QUANT names. A GGUF repository holds one file
// per quantization (qwen2.5-0.5b-instruct-q4_k_m.gguf, ...-q8_0.gguf); pull chooses among the
// repository's listing and -m among a snapshot's files, by the same rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer::hub {

// Whether `path` names a GGUF file (by its suffix, any case).
bool is_gguf_name(std::string_view path);

// The quantization a GGUF file name ends with, upper-cased: "Q4_K_M" for
// "qwen2.5-0.5b-instruct-q4_k_m.gguf" (the last '-' or '.' separated part before .gguf).
std::string gguf_quant_label(std::string_view path);

// The one .gguf path among `paths` that `quant` names (compared without case, as a whole part of
// the name: Q4_K does not match q4_k_m), or the only one when `quant` is empty. Throws a
// one-line Error for none, several (listing the :QUANT choices), or a file split in parts
// (-00001-of-00003.gguf), which nanoinfer does not load. `repo` names the repository in messages.
std::string choose_gguf(const std::vector<std::string>& paths, std::string_view quant, std::string_view repo);

}  // namespace nanoinfer::hub
