// The fused products of the forward pass (q/k/v as one stacked matrix, gate/up as one
// interleaved matrix with SwiGLU applied on the way out: src/model/linear.h) against the same
// model loaded with every matrix apart (ModelOptions::fuse_products = false): bitwise the same
// logits for every weight type on every ISA, in prefill and in decode. A file that mixes types
// within a group keeps that group apart and still gives bitwise the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "kernels/kernels.h"
#include "model/quant_scheme.h"
#include "model/weights.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/synth.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/quant_problem.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

using test::same_bits;
using test::supported_isas;

Model load(const fs::path& dir, std::optional<WeightType> weights, Isa isa, bool fuse, int threads = 2) {
  ModelOptions o;
  o.weights = weights;
  o.isa = isa;
  o.fuse_products = fuse;
  o.threads = threads;
  return open_model_alone(dir, o);
}

const std::vector<int32_t> kPrompt = {1, 7, 42, 100, 3, 3, 250, 17, 9, 64, 128, 5};

// The logits of every prompt position (prefill, 12 tokens in one chunk), then of four decode
// steps through the cache (one token each: the matrix-vector kernels).
std::vector<float> logits(const Model& model) {
  Sequence seq = model.new_sequence();
  const auto prefill = model.forward(kPrompt, seq, true);
  std::vector<float> out(prefill.begin(), prefill.end());
  for (int32_t token : {11, 0, 255, 64}) {
    const auto step = model.forward({&token, 1}, seq);
    out.insert(out.end(), step.begin(), step.end());
  }
  return out;
}

// Whether a model's matrices are whole blocks of a type (the K types' 256 fit none of the tiny
// models; data/default-model, hidden 256 and intermediate 512, fits them).
bool fits(const fs::path& dir, WeightType type) {
  const ModelConfig cfg = ModelConfig::load(dir / "config.json");
  const size_t be = weight_type_info(type).block_elems;
  return static_cast<size_t>(cfg.hidden_size) % be == 0 && static_cast<size_t>(cfg.intermediate_size) % be == 0 &&
         static_cast<size_t>(cfg.num_attention_heads * cfg.head_dim()) % be == 0;
}
fs::path default_model_dir() {
  return fs::path(NANOINFER_SOURCE_DIR) / "data/default-model";
}

// The 32-block types only llama.cpp's files bring (Q4_1, Q5_0, Q5_1).
bool file32(const WeightTypeInfo& t) {
  return t.quantized && !t.scaled_blocks() && t.block_elems == kQuantBlock;
}
size_t file32_count() {
  return static_cast<size_t>(std::count_if(all_weight_types().begin(), all_weight_types().end(), file32));
}

// The ISAs a whole-model comparison runs on: every supported one; under the sanitizers the
// scalar reference and the best (fusing and packing change how rows are grouped and laid out,
// not the kernels, which tests/kernels/k_quant_test.cpp and the kernel tests hold bitwise on every ISA;
// six ISAs of whole models took minutes there).
std::vector<Isa> model_isas() {
  std::vector<Isa> all = supported_isas();
  if (!test::kSanitized || all.size() <= 2) return all;
  return {all.front(), all.back()};
}

TEST(FusedProducts, LogitsBitwiseEqualToSeparateProductsForEveryTypeAndIsa) {
  const std::vector<fs::path> dirs = test::tiny_model_dirs("config.json");
  ASSERT_EQ(dirs.size(), 5u);  // three Qwen2, tiny-qwen3, tiny-llama
  size_t compared = 0, runs = 0;
  for (const fs::path& dir : dirs) {
    for (const WeightTypeInfo& mode : all_weight_types()) {
      if (!fits(dir, mode.type)) continue;
      // Under the sanitizers the 32-block types only files bring (their kernels held bitwise on
      // every ISA by tests/kernels/k_quant_test.cpp) take the first tiny model only.
      if (test::kSanitized && file32(mode) && dir != dirs.front()) continue;
      ++runs;
      for (Isa isa : model_isas()) {
        const std::vector<float> apart = logits(load(dir, mode.type, isa, false));
        // The fused model at one and at three threads: ranges of whole gate/up pairs either way.
        for (int threads : {1, 3}) {
          const std::vector<float> fused = logits(load(dir, mode.type, isa, true, threads));
          EXPECT_TRUE(same_bits(fused, apart))
              << dir.filename() << " " << mode.name << " " << isa_name(isa) << " threads " << threads;
          ++compared;
        }
      }
    }
  }
  // The K types on the default model (whose matrices are whole super-blocks).
  for (WeightType t : test::k_quant_types()) {
    ASSERT_TRUE(fits(default_model_dir(), t));
    ++runs;
    for (Isa isa : model_isas()) {
      const std::vector<float> apart = logits(load(default_model_dir(), t, isa, false));
      for (int threads : {1, 3}) {
        EXPECT_TRUE(same_bits(logits(load(default_model_dir(), t, isa, true, threads)), apart))
            << "default model " << weight_type_name(t) << " " << isa_name(isa) << " threads " << threads;
        ++compared;
      }
    }
  }
  const size_t k_types = test::k_quant_types().size(), f32 = file32_count();
  EXPECT_EQ(runs, 5 * (all_weight_types().size() - k_types - f32) + (test::kSanitized ? 1 : 5) * f32 + k_types);
  EXPECT_EQ(compared, runs * model_isas().size() * 2);
}

// An intermediate size that 16 does not divide (200 = 12 * 16 + 8): the last gate/up pair is
// two half blocks. Quantized types need whole blocks of 32 columns in down_proj, so only the
// float types can have such a size.
TEST(FusedProducts, ShortLastGateUpPairIsBitwiseEqualToSeparateProducts) {
  const test::TempDir tmp;
  std::string json = test::small_qwen2_config_json();
  json.replace(json.find("\"intermediate_size\": 160"), 24, "\"intermediate_size\": 200");
  test::write_text(tmp / "config.json", json);
  SynthOptions so;
  so.seed = 3;
  so.dtype = DType::F32;
  synth_model_dir(tmp / "config.json", tmp / "m", so);
  ASSERT_EQ(ModelConfig::load(tmp / "m" / "config.json").intermediate_size, 200);
  for (const WeightTypeInfo& info : all_weight_types()) {
    if (info.quantized) continue;
    const WeightType type = info.type;
    for (Isa isa : supported_isas()) {
      const std::vector<float> apart = logits(load(tmp / "m", type, isa, false));
      EXPECT_TRUE(same_bits(logits(load(tmp / "m", type, isa, true)), apart)) << isa_name(isa);
      EXPECT_TRUE(same_bits(logits(load(tmp / "m", type, isa, true, 3)), apart)) << isa_name(isa) << " 3 threads";
    }
  }
}

// tiny-gqa7 rewritten with mixed types, as GGUF K-quant mixes have them: layer 0 holds q in
// int8, k in f32, v in int4, gate in int4 and up in int8 (both groups must stay apart);
// layer 1 holds q/k/v in int4 and gate/up in int8 (both groups fuse).
const std::map<std::string, WeightType> kMixed = {
    {"model.layers.0.self_attn.q_proj.weight", WeightType::Q8_0},
    {"model.layers.0.self_attn.v_proj.weight", WeightType::Q4_0},
    {"model.layers.0.mlp.gate_proj.weight", WeightType::Q4_0},
    {"model.layers.0.mlp.up_proj.weight", WeightType::Q8_0},
    {"model.layers.1.self_attn.q_proj.weight", WeightType::Q4_0},
    {"model.layers.1.self_attn.k_proj.weight", WeightType::Q4_0},
    {"model.layers.1.self_attn.v_proj.weight", WeightType::Q4_0},
    {"model.layers.1.mlp.gate_proj.weight", WeightType::Q8_0},
    {"model.layers.1.mlp.up_proj.weight", WeightType::Q8_0},
};

void write_mixed_model(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  fs::copy_file(from / "config.json", to / "config.json");
  const SafetensorsFile in = SafetensorsFile::open(from / "model.safetensors");
  SafetensorsWriter out(to / "model.safetensors");
  std::vector<std::vector<std::byte>> blocks;  // alive until write()
  for (const TensorInfo& info : in.tensors()) {
    const TensorView t = in.view(info);
    const auto it = kMixed.find(info.name);
    if (it == kMixed.end()) {
      out.add(info.name, t.dtype(), t.shape(), {t.data, t.nbytes()});
      continue;
    }
    ASSERT_EQ(t.dtype(), DType::F32) << info.name;
    const size_t rows = t.shape()[0], cols = t.shape()[1], row_bytes = weight_row_bytes(it->second, cols);
    std::vector<std::byte>& bytes = blocks.emplace_back(rows * row_bytes);
    for (size_t r = 0; r < rows; ++r)
      quantize_row(it->second, reinterpret_cast<const float*>(t.data) + r * cols, bytes.data() + r * row_bytes, cols);
    out.add(info.name, DType::U8, {rows, row_bytes}, bytes);
  }
  out.set_metadata(std::string(kWeightTypesKey), block_types_json(kMixed));
  out.write();
}

TEST(FusedProducts, MixedTypeGroupsStayApartAndGiveBitwiseTheSameLogits) {
  const test::TempDir tmp;
  const fs::path from = fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/tiny-gqa7";
  write_mixed_model(from, tmp / "mixed");

  // The layout the loader chose, group by group.
  const ModelConfig cfg = ModelConfig::load(tmp / "mixed" / "config.json");
  const SafetensorsFile file = SafetensorsFile::open(tmp / "mixed" / "model.safetensors");
  ThreadPool pool(2);
  const ModelWeights w = load_weights(safetensors_source(file), cfg, std::nullopt, pool);
  ASSERT_EQ(w.layers.size(), 2u);
  const LayerWeights &l0 = w.layers[0], &l1 = w.layers[1];
  ASSERT_EQ(l0.qkv.parts.size(), 3u);
  EXPECT_EQ(l0.qkv.parts[0].type, WeightType::Q8_0);
  EXPECT_EQ(l0.qkv.parts[1].type, WeightType::F32);
  EXPECT_EQ(l0.qkv.parts[2].type, WeightType::Q4_0);
  EXPECT_EQ(l0.qkv.rows, 448u + 64 + 64);
  EXPECT_EQ(l0.gate_up.fused.data, nullptr);
  EXPECT_EQ(l0.gate_up.gate.type, WeightType::Q4_0);
  EXPECT_EQ(l0.gate_up.up.type, WeightType::Q8_0);
  ASSERT_EQ(l1.qkv.parts.size(), 1u);
  EXPECT_EQ(l1.qkv.parts[0].type, WeightType::Q4_0);
  EXPECT_EQ(l1.qkv.parts[0].rows, 448u + 64 + 64);
  EXPECT_NE(l1.gate_up.fused.data, nullptr);
  EXPECT_EQ(l1.gate_up.fused.type, WeightType::Q8_0);
  EXPECT_EQ(l1.gate_up.fused.rows, 2u * 128);

  size_t compared = 0;
  for (Isa isa : supported_isas()) {
    const std::vector<float> apart = logits(load(tmp / "mixed", std::nullopt, isa, false));
    for (int threads : {1, 2, 3}) {
      EXPECT_TRUE(same_bits(logits(load(tmp / "mixed", std::nullopt, isa, true, threads)), apart))
          << isa_name(isa) << " threads " << threads;
      ++compared;
    }
  }
  EXPECT_EQ(compared, supported_isas().size() * 3);
}

// Fusing moves rows, never changes what is held: the same bytes and counts either way.
TEST(FusedProducts, WeightBytesAreTheSameFusedOrApart) {
  const fs::path dir = fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models/tiny-untied";
  for (const WeightTypeInfo& mode : all_weight_types()) {
    if (!fits(dir, mode.type)) continue;
    const Model fused = load(dir, mode.type, Isa::Scalar, true), apart = load(dir, mode.type, Isa::Scalar, false);
    EXPECT_EQ(fused.weight_bytes(), apart.weight_bytes()) << mode.name;
    EXPECT_EQ(fused.bytes_per_token(), apart.bytes_per_token()) << mode.name;
    EXPECT_EQ(fused.weight_type(), apart.weight_type()) << mode.name;
  }
}

}  // namespace
}  // namespace nanoinfer

namespace nanoinfer {
namespace {

// The model at `dir` held as `type` on `isa`, with and without ModelOptions::pack_weights:
// bitwise the same logits at one and at three threads. Returns the comparisons made.
size_t expect_packing_keeps_bits(const fs::path& dir, WeightType type, Isa isa) {
  ModelOptions o;
  o.weights = type;
  o.isa = isa;
  o.pack_weights = false;
  const std::vector<float> unpacked = logits(open_model_alone(dir, o));
  o.pack_weights = true;
  size_t compared = 0;
  for (int threads : {1, 3}) {
    o.threads = threads;
    EXPECT_TRUE(same_bits(logits(open_model_alone(dir, o)), unpacked))
        << dir.filename() << " " << weight_type_name(type) << " " << isa_name(isa) << " threads " << threads;
    ++compared;
  }
  return compared;
}

// Packed int8/int4 matrices (ModelOptions::pack_weights, kernels/quant_blocks.h) against the
// file's row order: bitwise the same logits on every ISA, at one and at three threads; and the
// loader packs exactly where the ISA has a packed product, embedding lookups of a packed
// (tied) table included.
TEST(PackedWeights, LogitsBitwiseEqualToUnpackedAndPackedWhereTheIsaHasAProduct) {
  std::vector<fs::path> dirs = test::tiny_model_dirs("config.json");
  dirs.push_back(default_model_dir());  // the K types fit only this one
  size_t compared = 0, packed_models = 0, runs = 0;
  for (const fs::path& dir : dirs) {
    const ModelConfig cfg = ModelConfig::load(dir / "config.json");
    const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
    for (const WeightTypeInfo& info : all_weight_types()) {
      if (!info.quantized || !fits(dir, info.type)) continue;
      // The default model for the K types only (the tiny ones cover int8 and int4).
      if (dir == default_model_dir() && info.scaled_blocks()) continue;
      if (test::kSanitized && file32(info) && dir != dirs.front() && dir != default_model_dir()) continue;
      ++runs;
      const WeightType type = info.type;
      for (Isa isa : model_isas()) {
        compared += expect_packing_keeps_bits(dir, type, isa);
        const kernels::Kernels& k = kernels::table(isa);
        ThreadPool pool(2);
        const ModelWeights w = load_weights(safetensors_source(file), cfg, type, pool, true, &k);
        const bool expect = k.matmul_packed_for(type) != nullptr;
        EXPECT_EQ(w.layers[0].qkv.parts[0].packed, expect) << isa_name(isa);
        EXPECT_EQ(w.layers[0].gate_up.fused.packed, expect) << isa_name(isa);
        EXPECT_EQ(w.layers[0].o.packed, expect) << isa_name(isa);
        EXPECT_EQ(w.layers[0].down.packed, expect) << isa_name(isa);
        // The head is packed when it is quantized; the embedding table only when it is the head.
        const bool head_packed = w.lm_head.packed;
        EXPECT_EQ(head_packed, expect && kernels::table(isa).matmul_packed_for(w.lm_head.type) != nullptr);
        if (!cfg.tie_word_embeddings) {
          EXPECT_FALSE(w.embed.packed);
        }
        packed_models += expect;
      }
    }
  }
  // Every tiny model: the 32-block types; the default model: the types only files bring.
  const size_t tiny32 = test::kSanitized ? 1 : dirs.size() - 1;  // tiny models running the file 32-blocks
  EXPECT_EQ(runs, (dirs.size() - 1) * test::quant_types().size() + tiny32 * file32_count() + test::file_types().size());
  EXPECT_EQ(compared, runs * model_isas().size() * 2);
  if (packed_models == 0)
    GTEST_SKIP() << "no instruction set of this CPU has a packed product (every SIMD tier has one)";
}

// f32 and bf16 matrices in the float packed layout (kernels.h) against rows one after another:
// bitwise the same logits on every ISA at one and three threads, and the loader packs every
// matrix the products read exactly where the ISA has the product and the shape allows (a tied
// embedding table too, whose lookups then unpack its rows).
TEST(PackedWeights, FloatLogitsBitwiseEqualToUnpackedAndPackedWhereTheIsaHasTheProduct) {
  const std::vector<fs::path> dirs = test::tiny_model_dirs("config.json");
  size_t compared = 0, packed_models = 0;
  for (const fs::path& dir : dirs) {
    const ModelConfig cfg = ModelConfig::load(dir / "config.json");
    const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      for (Isa isa : model_isas()) {
        compared += expect_packing_keeps_bits(dir, type, isa);
        const kernels::Kernels& k = kernels::table(isa);
        ThreadPool pool(2);
        const ModelWeights w = load_weights(safetensors_source(file), cfg, type, pool, true, &k);
        const bool has = k.matmul_packed_float[type] != nullptr;
        for (const Weight* m :
             {&w.layers[0].qkv.parts[0], &w.layers[0].gate_up.fused, &w.layers[0].o, &w.layers[0].down, &w.lm_head}) {
          EXPECT_EQ(m->packed, has && kernels::float_packable(type, m->rows, m->cols))
              << dir.filename() << " " << weight_type_name(type) << " " << isa_name(isa) << " " << m->rows << "x"
              << m->cols;
        }
        if (!cfg.tie_word_embeddings) {
          EXPECT_FALSE(w.embed.packed);
        }
        packed_models += has && w.layers[0].down.packed;
      }
    }
  }
  EXPECT_EQ(compared, dirs.size() * 2 * model_isas().size() * 2);
  if (packed_models == 0) GTEST_SKIP() << "no instruction set of this CPU has a float packed product (AVX-512 has)";
}

}  // namespace
}  // namespace nanoinfer
