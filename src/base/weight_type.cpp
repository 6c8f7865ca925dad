#include "nanoinfer/weight_type.h"

#include <array>

#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

constexpr std::array<WeightTypeInfo, kWeightTypeCount> kTypes{{
    {WeightType::F32, "f32", "F32", 1, 4, false},
    {WeightType::BF16, "bf16", "BF16", 1, 2, false},
    {WeightType::Q8_0, "int8", "Q8_0", 32, 34, true},
    {WeightType::Q4_0, "int4", "Q4_0", 32, 18, true},
}};

}  // namespace

const WeightTypeInfo& weight_type_info(WeightType type) { return kTypes[static_cast<size_t>(type)]; }

std::optional<WeightType> weight_type_from_name(std::string_view name) {
  for (const WeightTypeInfo& info : kTypes)
    if (info.name == name || info.gguf_name == name) return info.type;
  return std::nullopt;
}

size_t weight_row_bytes(WeightType type, size_t cols) {
  const WeightTypeInfo& info = weight_type_info(type);
  if (cols % info.block_elems != 0) {
    fail("{} weights come in blocks of {}, but a row has {} columns", info.name, info.block_elems, cols);
  }
  return cols / info.block_elems * info.block_bytes;
}

}  // namespace nanoinfer
