#include "nanoinfer/weight_type.h"

#include <array>
#include <vector>

#include "base/weight_blocks.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

// One row per WeightType, in enum order (checked below). The GGUF ids are ggml's (part of the
// file format); the file types are llama.cpp's llama_ftype values.
constexpr std::array<WeightTypeInfo, kWeightTypeCount> kTypes{{
    {.type = WeightType::F32,
     .name = "f32",
     .gguf_name = "F32",
     .gguf_type = 0,
     .gguf_file_type = 0,
     .block_elems = 1,
     .block_bytes = 4,
     .quantized = false,
     .q_min = 0,
     .q_max = 0,
     .dequantize_row = dequantize_row_f32,
     .quantize_row = quantize_row_f32,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_f32,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::BF16,
     .name = "bf16",
     .gguf_name = "BF16",
     .gguf_type = 30,
     .gguf_file_type = 32,
     .block_elems = 1,
     .block_bytes = 2,
     .quantized = false,
     .q_min = 0,
     .q_max = 0,
     .dequantize_row = dequantize_row_bf16,
     .quantize_row = quantize_row_bf16,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_bf16,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q8_0,
     .name = "int8",
     .gguf_name = "Q8_0",
     .gguf_type = 8,
     .gguf_file_type = 7,
     .block_elems = kQuantBlock,
     .block_bytes = sizeof(BlockQ8_0),
     .quantized = true,
     .q_min = -127,
     .q_max = 127,
     .dequantize_row = dequantize_row_q8_0,
     .quantize_row = quantize_row_q8_0,
     .quantize_row_grouped = quantize_row_q8_0_grouped,
     .finite_row = finite_row_q8_0,
     .unpack_block = unpack_block_q8_0,
     .pack_block = pack_block_q8_0},
    {.type = WeightType::Q4_0,
     .name = "int4",
     .gguf_name = "Q4_0",
     .gguf_type = 2,
     .gguf_file_type = 2,
     .block_elems = kQuantBlock,
     .block_bytes = sizeof(BlockQ4_0),
     .quantized = true,
     .q_min = -8,
     .q_max = 7,
     .dequantize_row = dequantize_row_q4_0,
     .quantize_row = quantize_row_q4_0,
     .quantize_row_grouped = quantize_row_q4_0_grouped,
     .finite_row = finite_row_q4_0,
     .unpack_block = unpack_block_q4_0,
     .pack_block = pack_block_q4_0},
    {.type = WeightType::Q4_1,
     .name = "q4_1",
     .gguf_name = "Q4_1",
     .gguf_type = 3,
     .gguf_file_type = 3,
     .block_elems = kQuantBlock,
     .block_bytes = sizeof(BlockQ4_1),
     .quantized = true,
     .q_min = 0,
     .q_max = 15,
     .dequantize_row = dequantize_row_q4_1,
     .quantize_row = quantize_row_q4_1,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q4_1,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q5_0,
     .name = "q5_0",
     .gguf_name = "Q5_0",
     .gguf_type = 6,
     .gguf_file_type = 8,
     .block_elems = kQuantBlock,
     .block_bytes = sizeof(BlockQ5_0),
     .quantized = true,
     .q_min = -16,
     .q_max = 15,
     .dequantize_row = dequantize_row_q5_0,
     .quantize_row = quantize_row_q5_0,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q5_0,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q5_1,
     .name = "q5_1",
     .gguf_name = "Q5_1",
     .gguf_type = 7,
     .gguf_file_type = 9,
     .block_elems = kQuantBlock,
     .block_bytes = sizeof(BlockQ5_1),
     .quantized = true,
     .q_min = 0,
     .q_max = 31,
     .dequantize_row = dequantize_row_q5_1,
     .quantize_row = quantize_row_q5_1,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q5_1,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q4_K,
     .name = "q4_k",
     .gguf_name = "Q4_K",
     .gguf_type = 12,
     .gguf_file_type = 15,  // Q4_K_M
     .block_elems = kSuperBlock,
     .block_bytes = sizeof(BlockQ4_K),
     .quantized = true,
     .q_min = 0,
     .q_max = 15,
     .dequantize_row = dequantize_row_q4_k,
     .quantize_row = quantize_row_q4_k,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q4_k,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q5_K,
     .name = "q5_k",
     .gguf_name = "Q5_K",
     .gguf_type = 13,
     .gguf_file_type = 17,  // Q5_K_M
     .block_elems = kSuperBlock,
     .block_bytes = sizeof(BlockQ5_K),
     .quantized = true,
     .q_min = 0,
     .q_max = 31,
     .dequantize_row = dequantize_row_q5_k,
     .quantize_row = quantize_row_q5_k,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q5_k,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q6_K,
     .name = "q6_k",
     .gguf_name = "Q6_K",
     .gguf_type = 14,
     .gguf_file_type = 18,
     .block_elems = kSuperBlock,
     .block_bytes = sizeof(BlockQ6_K),
     .quantized = true,
     .q_min = -32,
     .q_max = 31,
     .dequantize_row = dequantize_row_q6_k,
     .quantize_row = quantize_row_q6_k,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q6_k,
     .unpack_block = nullptr,
     .pack_block = nullptr},
    {.type = WeightType::Q3_K,
     .name = "q3_k",
     .gguf_name = "Q3_K",
     .gguf_type = 11,
     .gguf_file_type = 12,  // Q3_K_M: what `quantize --type q3_k` writes (docs/QUANTIZATION.md)
     .block_elems = kSuperBlock,
     .block_bytes = sizeof(BlockQ3_K),
     .quantized = true,
     .q_min = -4,
     .q_max = 3,
     .dequantize_row = dequantize_row_q3_k,
     .quantize_row = quantize_row_q3_k,
     .quantize_row_grouped = nullptr,
     .finite_row = finite_row_q3_k,
     .unpack_block = nullptr,
     .pack_block = nullptr},
}};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < kTypes.size(); ++i)
    if (static_cast<size_t>(kTypes[i].type) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kTypes is indexed by WeightType");

}  // namespace

const WeightTypeInfo& weight_type_info(WeightType type) {
  return kTypes[static_cast<size_t>(type)];
}

std::span<const WeightTypeInfo> all_weight_types() {
  return kTypes;
}

std::optional<WeightType> weight_type_from_name(std::string_view name) {
  for (const WeightTypeInfo& info : kTypes)
    if (info.name == name || info.gguf_name == name) return info.type;
  return std::nullopt;
}

std::optional<WeightType> weight_type_from_gguf(uint32_t gguf_type) {
  for (const WeightTypeInfo& info : kTypes)
    if (info.gguf_type == gguf_type) return info.type;
  return std::nullopt;
}

std::string weight_type_names(WeightTypeKind kind, bool gguf) {
  std::vector<std::string_view> names;
  for (const WeightTypeInfo& info : kTypes) {
    const bool wanted = kind == WeightTypeKind::All || (kind == WeightTypeKind::Scaled && info.quantizer_type()) ||
                        (kind == WeightTypeKind::Quantized && info.quantized) ||
                        (kind == WeightTypeKind::Float && !info.quantized) ||
                        (kind == WeightTypeKind::Writable && (!info.quantized || info.quantizer_type()));
    if (wanted) names.push_back(gguf ? info.gguf_name : info.name);
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

size_t weight_row_bytes(WeightType type, size_t cols) {
  const WeightTypeInfo& info = weight_type_info(type);
  if (cols % info.block_elems != 0) {
    fail("{} weights come in blocks of {}, but a row has {} columns", info.name, info.block_elems, cols);
  }
  return cols / info.block_elems * info.block_bytes;
}

}  // namespace nanoinfer
