// A complete, runnable model directory for generation tests: a tiny random Qwen2 from
// tests/data/models (which ship without a tokenizer) plus a byte-level BPE tokenizer.json
// written here to match its vocabulary of 300: the 256 byte tokens, 41 merges (ids 256-296)
// and <|endoftext|>, <|im_start|>, <|im_end|> as ids 297, 298, 299 (the model's
// generation_config.json names 299 as end of sequence).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "nanoinfer/weight_type.h"

namespace nanoinfer::test {

inline constexpr int32_t kTinyImEnd = 299;

std::string tiny_tokenizer_json();

// Copies tests/data/models/tiny-untied into `dir` and adds tokenizer.json.
void write_tiny_model_dir(const std::filesystem::path& dir);

// Sets every element of the F32 tensor `name` in dir/model.safetensors to `value`.
void fill_f32_tensor(const std::filesystem::path& dir, std::string_view name, float value);

// Makes the tiny model in `dir` produce non-finite logits from finite weights: the final
// norm and lm_head set to 3e38, so every lm_head product is (n * 3e38) * 3e38 = +-inf. No
// weight is NaN or infinite, so a load-time check for non-finite weights lets it through.
void make_logits_overflow(const std::filesystem::path& dir);

// Writes the default model as the GGUF file `file` with its matrices as `type` (Q4_K, Q5_K or
// Q6_K) and every block's scale d (the super-blocks', and the Q8_0 tied embedding's) set to
// 65504, the largest finite f16: every weight is finite, so the load checks pass, but the keys
// of layer 0 reach ~1e9 and the logits ~1e8.
void write_huge_k_scale_gguf(const std::filesystem::path& file, WeightType type);

}  // namespace nanoinfer::test
