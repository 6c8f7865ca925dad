// Q3_K against llama.cpp itself: its own Q3_K files (`llama-quantize` Q3_K_S and Q3_K_M of the
// default model) and ours (`quantize --type q3_k`), each dequantized by llama.cpp
// (`llama-quantize --allow-requantize FILE OUT F32`), must equal our dequantization of every
// Q3_K tensor bitwise. Skipped, with a line saying so, unless NANOINFER_LLAMA_CPP_BIN names a
// llama.cpp build/bin (as tests/llama-interop/llama_interop_test.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/quantize_model.h"
#include "nanoinfer/weight_type.h"
#include "support/files.h"

namespace nanoinfer::q3_k_llama_test {
namespace {

namespace fs = std::filesystem;

void run_tool(const std::string& command) {
  ASSERT_EQ(std::system((command + " > /dev/null 2>&1").c_str()), 0) << command;
}

// The Q3_K tensors of `quantized` dequantized here, compared with the F32 tensors of the same
// names in `dequantized`; returns how many were compared.
size_t compare_q3_k(const fs::path& quantized, const fs::path& dequantized) {
  const std::vector<std::byte> qb = test::read_bytes(quantized), fb = test::read_bytes(dequantized);
  const GgufLayout q = parse_gguf(qb, quantized.string()), f = parse_gguf(fb, dequantized.string());
  size_t compared = 0;
  for (const GgufTensorInfo& t : q.tensors) {
    if (static_cast<uint32_t>(t.type) != weight_type_info(WeightType::Q3_K).gguf_type) continue;
    const GgufTensorInfo* ref = f.find_tensor(t.name);
    if (ref == nullptr || static_cast<uint32_t>(ref->type) != 0) {
      ADD_FAILURE() << t.name << ": no F32 tensor of that name in " << dequantized;
      continue;
    }
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<float> ours(n), theirs(n);
    dequantize_row(WeightType::Q3_K, qb.data() + q.data_offset + t.offset, ours.data(), n);
    std::memcpy(theirs.data(), fb.data() + f.data_offset + ref->offset, n * sizeof(float));
    EXPECT_EQ(std::memcmp(ours.data(), theirs.data(), n * sizeof(float)), 0) << t.name << " of " << quantized;
    ++compared;
  }
  return compared;
}

TEST(Q3kLlamaCpp, DequantizationIsBitwiseLlamaCppsForItsFilesAndOurs) {
  const char* bin = std::getenv("NANOINFER_LLAMA_CPP_BIN");
  if (bin == nullptr || *bin == '\0') GTEST_SKIP() << "set NANOINFER_LLAMA_CPP_BIN to a llama.cpp build/bin";
  const std::string quantize = (fs::path(bin) / "llama-quantize").string();
  const test::TempDir dir;
  export_gguf(test::default_model_dir(), dir / "f32.gguf", WeightType::F32);
  QuantizeOptions o;
  o.type = WeightType::Q3_K;
  o.method = QuantMethod::Rtn;
  quantize_to_gguf(test::default_model_dir().string(), dir / "ours.gguf", o);
  std::vector<fs::path> files = {dir / "ours.gguf"};
  for (const char* type : {"Q3_K_S", "Q3_K_M"}) {
    files.push_back(dir / (std::string(type) + ".gguf"));
    run_tool(quantize + " " + (dir / "f32.gguf").string() + " " + files.back().string() + " " + type + " 2");
  }
  for (const fs::path& file : files) {
    const fs::path deq = fs::path(file).replace_extension(".f32.gguf");
    run_tool(quantize + " --allow-requantize " + file.string() + " " + deq.string() + " F32 2");
    EXPECT_GE(compare_q3_k(file, deq), 10u) << file;
  }
}

}  // namespace
}  // namespace nanoinfer::q3_k_llama_test
