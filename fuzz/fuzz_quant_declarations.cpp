// libFuzzer target for a quantized file's declarations: the bytes are a safetensors file whose
// "__metadata__" may declare block tensors ("nanoinfer.weight_types", JSON in a string). The
// declarations are parsed and checked against a small Qwen2 manifest, as the loader and
// `inspect` do: any input must give a map and a list of problems, or throw nanoinfer::Error
// with a one-line message of bounded length. Crashes, sanitizer reports, other exceptions and
// long or multi-line messages are findings. The declaration is JSON inside a header string, so
// run with -max_len well above the ~150 bytes that nest it past the 64-level limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "io/safetensors.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "nanoinfer/config.h"
#include "nanoinfer/error.h"

namespace {

// hidden 64, 2 layers, intermediate 96 (3 blocks of 32), vocab 64, tied.
const nanoinfer::ModelConfig& config() {
  static const nanoinfer::ModelConfig cfg = nanoinfer::ModelConfig::parse(
      R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64, "max_position_embeddings": 128,
          "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu"})",
      "fuzz config");
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const nanoinfer::SafetensorsLayout layout = nanoinfer::parse_safetensors(bytes, "fuzz");
    const auto types = nanoinfer::declared_block_types(layout, "fuzz");
    (void)nanoinfer::manifest_problems(nanoinfer::tensor_manifest(config()), layout.tensors, types);
  } catch (const nanoinfer::Error& e) {
    // Rejected input: names and values are quoted as short excerpts, never dumped.
    const std::string_view m = e.what();
    if (m.size() > 1000 || m.find('\n') != std::string_view::npos) std::abort();
  }
  return 0;
}
