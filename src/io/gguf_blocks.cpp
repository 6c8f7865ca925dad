// Scalar dequantization references for the ggml block types (layouts in gguf_blocks.h).
#include "io/gguf_blocks.h"

#include <array>
#include <cstring>
#include <string>

#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

namespace {

// The file-only type; the weight types' rows come from the weight-type table.
constexpr GgmlTypeInfo kF16{GgmlType::F16, "F16", 1, 2};

// Every id ggml has assigned, indexed by id; "" marks ids that were retired.
constexpr std::array<std::string_view, 40> kAllNames{
    "F32",    "F16",   "Q4_0",  "Q4_1",   "",      "",      "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
    "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
    "BF16",   "",      "",      "",       "TQ1_0", "TQ2_0", "",        "",       "",        "MXFP4",
};

uint16_t load_u16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<uint16_t>(p[0]) | static_cast<uint16_t>(p[1]) << 8);
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  if (const std::optional<WeightType> w = weight_type_from_gguf(id)) {
    const WeightTypeInfo& info = weight_type_info(*w);
    return GgmlTypeInfo{static_cast<GgmlType>(id), info.gguf_name, static_cast<uint32_t>(info.block_elems),
                        static_cast<uint32_t>(info.block_bytes)};
  }
  if (id == static_cast<uint32_t>(kF16.type)) return kF16;
  return std::nullopt;
}

GgmlType ggml_type_of(WeightType type) {
  return static_cast<GgmlType>(weight_type_info(type).gguf_type);
}

GgmlTypeInfo ggml_type_info(GgmlType type) {
  if (const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type))) return *info;
  fail("ggml type id {} is not supported", static_cast<uint32_t>(type));
}

std::string_view ggml_type_name(uint32_t id) {
  if (id < kAllNames.size() && !kAllNames[id].empty()) return kAllNames[id];
  return "?";
}

std::string ggml_supported_type_names() {
  std::string out;
  for (uint32_t id = 0; id < kAllNames.size(); ++id) {
    if (!ggml_type_info(id)) continue;
    if (!out.empty()) out += ", ";
    out += kAllNames[id];
  }
  return out;
}

size_t ggml_row_bytes(GgmlType type, uint64_t n) {
  const GgmlTypeInfo info = ggml_type_info(type);
  if (n % info.block_elems != 0)
    fail("{}: {} elements are not a whole number of {}-element blocks", info.name, n, info.block_elems);
  return static_cast<size_t>(n / info.block_elems * info.block_bytes);
}

void dequantize_row_f16(const std::byte* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
}

void dequantize_row(GgmlType type, const std::byte* src, float* dst, size_t n) {
  (void)ggml_row_bytes(type, n);  // rejects partial blocks and unsupported types
  if (const std::optional<WeightType> w = weight_type_from_gguf(static_cast<uint32_t>(type)))
    return dequantize_row(*w, src, dst, n);
  return dequantize_row_f16(src, dst, n);  // the one file-only type
}

}  // namespace nanoinfer
