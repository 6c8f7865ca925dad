// The weight-type table and the kernel tables keyed by it: every type has every function it
// needs, on every ISA, and every row's scalar references agree with one another. The types
// come from the table itself, so a new type is checked here by existing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/weight_blocks.h"
#include "io/gguf_blocks.h"
#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/weight_type.h"
#include "support/quant_problem.h"
#include "support/random.h"

namespace nanoinfer {
namespace {

std::string name(const WeightTypeInfo& t) {
  return std::string(t.name);
}

TEST(WeightTypeTable, RowsAreIndexedByTheirTypeAndNamedOnce) {
  ASSERT_EQ(all_weight_types().size(), kWeightTypeCount);
  for (size_t i = 0; i < all_weight_types().size(); ++i) {
    const WeightTypeInfo& t = all_weight_types()[i];
    EXPECT_EQ(static_cast<size_t>(t.type), i);
    EXPECT_EQ(&weight_type_info(t.type), &t);
    EXPECT_EQ(weight_type_from_name(t.name), t.type);
    EXPECT_EQ(weight_type_from_name(t.gguf_name), t.type);
    EXPECT_EQ(weight_type_from_gguf(t.gguf_type), t.type);
    EXPECT_EQ(weight_row_bytes(t.type, 4 * t.block_elems), 4 * t.block_bytes);
  }
}

// Help and error text lists the types from the table: "a, b or c", in table order.
TEST(WeightTypeTable, NamesJoinedForHelpText) {
  const auto join = [](const std::vector<std::string_view>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
      out += names[i];
    }
    return out;
  };
  std::vector<std::string_view> all, quantized, floats, quantized_gguf;
  for (const WeightTypeInfo& t : all_weight_types()) {
    all.push_back(t.name);
    (t.quantized ? quantized : floats).push_back(t.name);
    if (t.quantized) quantized_gguf.push_back(t.gguf_name);
  }
  EXPECT_EQ(weight_type_names(), join(all));
  EXPECT_EQ(weight_type_names(WeightTypeKind::Quantized), join(quantized));
  EXPECT_EQ(weight_type_names(WeightTypeKind::Float), join(floats));
  EXPECT_EQ(weight_type_names(WeightTypeKind::Quantized, true), join(quantized_gguf));
}

// The GGUF reader describes a weight type through its row: the same id, name and geometry.
TEST(WeightTypeTable, GgufTypesOfTheWeightTypesComeFromTheRows) {
  for (const WeightTypeInfo& t : all_weight_types()) {
    const std::optional<GgmlTypeInfo> g = ggml_type_info(t.gguf_type);
    ASSERT_TRUE(g.has_value()) << name(t);
    EXPECT_EQ(g->name, t.gguf_name);
    EXPECT_EQ(static_cast<uint32_t>(g->type), t.gguf_type);
    EXPECT_EQ(ggml_type_name(t.gguf_type), t.gguf_name);
    EXPECT_EQ(g->block_elems, t.block_elems);
    EXPECT_EQ(g->block_bytes, t.block_bytes);
  }
}

TEST(WeightTypeTable, EveryRowCarriesItsFunctions) {
  for (const WeightTypeInfo& t : all_weight_types()) {
    EXPECT_NE(t.dequantize_row, nullptr) << name(t);
    EXPECT_NE(t.quantize_row, nullptr) << name(t);
    EXPECT_NE(t.finite_row, nullptr) << name(t);
    // int8 and int4 carry the ScaledBlock codec; the types only files bring (the K types,
    // super-blocks of 256, and Q4_1 / Q5_0 / Q5_1) none.
    EXPECT_EQ(t.unpack_block != nullptr, t.pack_block != nullptr) << name(t);
    EXPECT_EQ(t.scaled_blocks(), t.type == WeightType::Q8_0 || t.type == WeightType::Q4_0) << name(t);
    if (t.quantized) {
      EXPECT_TRUE(t.block_elems == kQuantBlock || t.block_elems == kSuperBlock) << name(t);
      EXPECT_LE(t.q_min, 0) << name(t);
      EXPECT_GT(t.q_max, 0) << name(t);
    }
  }
}

// quantize -> dequantize of a row the type holds exactly gives it back; for block types,
// unpack -> pack rewrites every block byte for byte, its integers lie in [q_min, q_max], and
// dequantize is d * q of the unpacked block.
TEST(WeightTypeTable, ScalarReferencesAgreeWithEachOther) {
  const size_t cols = kSuperBlock;  // whole blocks of every type
  const std::vector<float> x = test::random_floats(cols, 7);
  for (const WeightTypeInfo& t : all_weight_types()) {
    std::vector<std::byte> row(weight_row_bytes(t.type, cols));
    t.quantize_row(x.data(), row.data(), cols);
    EXPECT_TRUE(t.finite_row(row.data(), cols)) << name(t);
    std::vector<float> back(cols), again(cols);
    t.dequantize_row(row.data(), back.data(), cols);
    std::vector<std::byte> row2(row.size());
    t.quantize_row(back.data(), row2.data(), cols);
    t.dequantize_row(row2.data(), again.data(), cols);
    // The K types' round-to-nearest reference re-derives sub-block scales from the range, which
    // a dequantized row need not reproduce: tests/kernels/k_quant_test.cpp bounds it instead.
    if (t.scaled_blocks() || !t.quantized) {
      EXPECT_EQ(back, again) << name(t) << ": a dequantized row requantizes to itself";
    }
    if (!t.scaled_blocks()) {
      if (t.quantized) {
        const uint16_t inf = 0x7c00;
        std::memcpy(row.data() + (t.type == WeightType::Q6_K   ? 208
                                  : t.type == WeightType::Q3_K ? 108
                                                               : 0),
                    &inf, sizeof inf);
        EXPECT_FALSE(t.finite_row(row.data(), cols)) << name(t);
      }
      continue;
    }
    for (size_t b = 0; b < cols / kQuantBlock; ++b) {
      ScaledBlock s;
      t.unpack_block(row.data() + b * t.block_bytes, s);
      std::vector<std::byte> packed(t.block_bytes);
      t.pack_block(s, packed.data());
      EXPECT_EQ(std::memcmp(packed.data(), row.data() + b * t.block_bytes, t.block_bytes), 0) << name(t) << " " << b;
      for (size_t i = 0; i < kQuantBlock; ++i) {
        EXPECT_GE(s.q[i], t.q_min) << name(t);
        EXPECT_LE(s.q[i], t.q_max) << name(t);
        EXPECT_EQ(back[b * kQuantBlock + i], f16_to_f32(s.d) * static_cast<float>(s.q[i])) << name(t);
      }
    }
    // An infinite scale is caught by the finite check.
    const uint16_t inf = 0x7c00;
    std::memcpy(row.data() + t.block_bytes, &inf, sizeof inf);
    EXPECT_FALSE(t.finite_row(row.data(), cols)) << name(t);
  }
}

// Every ISA's table has a product for every type: the float types' from float activations,
// the quantized types' from quantized activations, and a packed product on every SIMD tier
// (none on the scalar reference).
TEST(WeightTypeTable, EveryKernelTableHasAnEntryForEveryType) {
  std::vector<const kernels::Kernels*> tables = {&kernels::scalar_table()};
  for (Isa isa : test::supported_isas()) tables.push_back(&kernels::table(isa));
  for (const kernels::Kernels* k : tables) {
    const std::string isa(isa_name(k->isa));
    EXPECT_NE(k->quantize_activations, nullptr) << isa;
    EXPECT_NE(k->dot_rows_f32, nullptr) << isa;
    EXPECT_NE(k->axpy_rows_f32, nullptr) << isa;
    EXPECT_NE(k->attention.f32, nullptr) << isa;
    EXPECT_NE(k->attention.bf16, nullptr) << isa;
    EXPECT_NE(k->attention.f16, nullptr) << isa;
    EXPECT_NE(k->exp_f32, nullptr) << isa;
    const bool simd = k->isa != Isa::Scalar;
    for (const WeightTypeInfo& t : all_weight_types()) {
      const bool packed = t.quantized && simd;
      EXPECT_EQ(k->matmul_for(t.type) != nullptr, !t.quantized) << isa << " " << name(t);
      EXPECT_EQ(k->matmul_quantized_for(t.type) != nullptr, t.quantized) << isa << " " << name(t);
      EXPECT_EQ(k->matmul_packed_for(t.type) != nullptr, packed) << isa << " " << name(t);
    }
  }
}

}  // namespace
}  // namespace nanoinfer
