// `nanoinfer quantize --format gguf`: the quantized weights in one GGUF file are exactly the
// ones the model directory holds (bitwise equal logits, identical block bytes), a float model
// converts with --type f32|bf16, and every failure leaves neither the file nor the scratch
// directory behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/quantize_model.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

using test::entries;

namespace fs = std::filesystem;
using test::run_cli;

std::vector<float> logits_of(const fs::path& model, const std::string& text) {
  OpenOptions opts;
  opts.model.threads = 2;
  const OpenedModel m = open_model(model.string(), opts);
  Sequence seq = m.model.new_sequence();
  const auto out = m.model.forward(m.tokenizer.encode(text), seq, true);
  return {out.begin(), out.end()};
}

void expect_same_logits(const fs::path& a, const fs::path& b) {
  const std::string text = "the king said to the queen";
  const std::vector<float> la = logits_of(a, text), lb = logits_of(b, text);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float))) << a << " vs " << b;
}

// Every block tensor of the directory's model.safetensors equals the GGUF tensor of the same
// weights byte for byte, with the declared type.
void expect_same_blocks(const fs::path& dir, const fs::path& gguf_file) {
  const SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
  const GgufFile gg = GgufFile::open(gguf_file);
  const auto types = nlohmann::json::parse(st.layout().metadata.at("nanoinfer.weight_types"));
  ASSERT_GT(types.size(), 0u);
  for (const auto& [name, type] : types.items()) {
    const GgufTensorInfo* t = gg.find(*gguf_name_from_hf(name));
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(ggml_type_info(static_cast<uint32_t>(t->type))->name, type.get<std::string>()) << name;
    const TensorInfo* info = st.find(name);
    std::vector<std::byte> a(info->nbytes());
    st.read(*info, 0, a);
    const auto b = gg.data(*t);
    ASSERT_EQ(a.size(), b.size()) << name;
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << name;
  }
}

class QuantizeGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_tiny_model_dir(dir_ / "m");
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the king said to the queen, and the queen said nothing at all. ";
    test::write_text(dir_ / "text.txt", text);
  }
  std::string path(std::string_view name) const { return (dir_ / name).string(); }
  std::vector<std::string> quantize(std::vector<std::string> extra) const {
    std::vector<std::string> args = {
        "quantize",    "-m", path("m"), "--calib", path("text.txt"), "--calib-windows", "2",
        "--calib-ctx", "64", "-t",      "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  test::TempDir dir_;
};

TEST_F(QuantizeGguf, HoldsExactlyTheDirectorysWeights) {
  const std::pair<const char*, const char*> runs[] = {{"int4", "gptq"}, {"int8", "imatrix"}, {"int8", "rtn"}};
  for (const auto& [type, method] : runs) {
    const std::string name = std::string(type) + "-" + method;
    const auto d = run_cli(quantize({"--type", type, "--method", method, "--out", path(name)}));
    ASSERT_EQ(d.status, 0) << d.err;
    const auto g =
        run_cli(quantize({"--type", type, "--method", method, "--format", "gguf", "--out", path(name + ".gguf")}));
    ASSERT_EQ(g.status, 0) << g.err;
    EXPECT_EQ(g.err, "");
    EXPECT_NE(g.out.find("wrote " + path(name + ".gguf") + ": " + type + " (" + method + "; logits matrix int8)"),
              std::string::npos)
        << g.out;
    EXPECT_NE(g.out.find("  GGUF " + std::to_string(fs::file_size(dir_ / (name + ".gguf"))) + " bytes"),
              std::string::npos)
        << g.out;
    expect_same_blocks(dir_ / name, dir_ / (name + ".gguf"));
    expect_same_logits(dir_ / name, dir_ / (name + ".gguf"));
  }
  // Nothing but the outputs: no scratch directory, no temporary file.
  EXPECT_EQ(entries(dir_.path()),
            (std::vector<std::string>{"int4-gptq", "int4-gptq.gguf", "int8-imatrix", "int8-imatrix.gguf", "int8-rtn",
                                      "int8-rtn.gguf", "m", "text.txt"}));
  // The file says how it was made, and what llama.cpp reads as its type.
  const GgufFile gg = GgufFile::open(dir_ / "int4-gptq.gguf");
  EXPECT_EQ(gg.layout().get_u32("general.file_type"), 2u);  // llama.cpp's MOSTLY_Q4_0
  EXPECT_EQ(gg.layout().get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(gg.layout().get_string("general.name"), "m");
  EXPECT_NE(gg.layout().get_string("nanoinfer.quantization").find("\"method\":\"gptq\""), std::string::npos);
  EXPECT_EQ(GgufFile::open(dir_ / "int8-rtn.gguf").layout().get_u32("general.file_type"), 7u);  // MOSTLY_Q8_0
}

// The embedded default model (tied embedding, BF16): int4 keeps the embedding int8 in both
// formats, and a --head-type choice (a float, int8, or the 3-bit K type) carries over.
TEST_F(QuantizeGguf, DefaultModelTiedEmbedding) {
  for (const char* head : {"int8", "bf16", "q3_k"}) {
    const std::string name = std::string("d-") + head;
    const std::vector<std::string> common = {"quantize", "--type", "int4", "--method", "rtn", "--head-type", head};
    auto dir_args = common, gguf_args = common;
    dir_args.insert(dir_args.end(), {"--out", path(name)});
    gguf_args.insert(gguf_args.end(), {"--format", "gguf", "--out", path(name + ".gguf")});
    ASSERT_EQ(run_cli(dir_args).status, 0);
    const auto g = run_cli(gguf_args);
    ASSERT_EQ(g.status, 0) << g.err;
    const GgufFile gg = GgufFile::open(dir_ / (name + ".gguf"));
    EXPECT_EQ(gg.find("output.weight"), nullptr);  // tied: one matrix
    EXPECT_EQ(gg.find("token_embd.weight")->type, ggml_type_of(*weight_type_from_name(head)));
    EXPECT_EQ(gg.find("blk.0.ffn_up.weight")->type, ggml_type_of(WeightType::Q4_0));
    EXPECT_EQ(gg.layout().get_string("general.name"), "default-model");
    EXPECT_EQ(gg.layout().get_u32("tokenizer.ggml.bos_token_id"), 2045u);
    EXPECT_NE(gg.layout().get_string("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);
    expect_same_logits(dir_ / name, dir_ / (name + ".gguf"));
  }
}

// --type f32 / bf16: a conversion. bf16 of a BF16 checkpoint copies the matrices' bytes; both
// give the logits of the directory loaded with --dtype of that type.
TEST_F(QuantizeGguf, FloatConversion) {
  for (const char* type : {"f32", "bf16"}) {
    const std::string file = path(std::string("d-") + type + ".gguf");
    const auto r = run_cli({"quantize", "--type", type, "--format", "gguf", "--out", file});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + file + ": " + type + " (converted, not quantized; norms and biases f32)"),
              std::string::npos)
        << r.out;
    const GgufFile gg = GgufFile::open(file);
    EXPECT_EQ(gg.layout().get_u32("general.file_type"), std::string(type) == "f32" ? 0u : 32u);
    EXPECT_EQ(gg.layout().find("general.quantization_version"), nullptr);
    EXPECT_EQ(gg.layout().find("nanoinfer.quantization"), nullptr);
    OpenOptions opts;
    opts.model.threads = 2;
    opts.model.weights = weight_type_from_name(type);
    const OpenedModel st = open_model("", opts);
    opts.model.weights.reset();
    const OpenedModel g = open_model(file, opts);
    EXPECT_EQ(g.model.weight_type(), *weight_type_from_name(type));
    const std::vector<int32_t> ids = st.tokenizer.encode("ROMEO:\nBut soft");
    Sequence sa = st.model.new_sequence(), sb = g.model.new_sequence();
    const auto a = st.model.forward(ids, sa, true);
    const auto b = g.model.forward(ids, sb, true);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << type;
  }
  // The matrices of the BF16 checkpoint pass through unchanged.
  const SafetensorsFile st = SafetensorsFile::open(test::default_model_dir() / "model.safetensors");
  const GgufFile gg = GgufFile::open(dir_ / "d-bf16.gguf");
  const TensorInfo* up = st.find("model.layers.2.mlp.up_proj.weight");
  std::vector<std::byte> a(up->nbytes());
  st.read(*up, 0, a);
  const auto b = gg.data(*gg.find("blk.2.ffn_up.weight"));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

// Refusals that need more than the bad-input table checks: an existing file is left as it was.
TEST_F(QuantizeGguf, ExistingFileIsNotTouched) {
  test::write_text(dir_ / "x.gguf", "precious");
  for (const char* type : {"int4", "f32"}) {
    const auto r = run_cli({"quantize", "-m", path("m"), "--type", type, "--format", "gguf", "--out", path("x.gguf")});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "nanoinfer: error: " + path("x.gguf") + ": already exists; remove it or choose another name\n");
    EXPECT_EQ(test::read_text(dir_ / "x.gguf"), "precious");
  }
  EXPECT_THROW(export_gguf(dir_ / "m", dir_ / "x.gguf", WeightType::F32), Error);
  EXPECT_EQ(test::read_text(dir_ / "x.gguf"), "precious");
  EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt", "x.gguf"}));
}

// An exception from the progress callback (what the CLI throws on SIGINT) at any stage,
// including the GGUF write, leaves neither the file nor the scratch directory.
TEST_F(QuantizeGguf, InterruptedRunLeavesNothing) {
  for (const char* stage : {"calibrate", "factor", "write", "gguf"}) {
    QuantizeOptions o;
    o.calibration = dir_ / "text.txt";
    o.calib_ctx = 64;
    o.calib_windows = 2;
    o.threads = 1;
    size_t seen = 0;
    const auto progress = [&](const QuantizeProgress& p) {
      if (p.stage == stage && ++seen == 2) throw Error("interrupted");
    };
    EXPECT_THROW(quantize_to_gguf(path("m"), dir_ / "q.gguf", o, progress), Error) << stage;
    EXPECT_EQ(seen, 2u) << stage;
    EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt"})) << stage;
  }
  size_t calls = 0;
  EXPECT_THROW(export_gguf(dir_ / "m", dir_ / "f.gguf", WeightType::F32,
                           [&](uint64_t, uint64_t) {
                             if (++calls == 3) throw Error("interrupted");
                           }),
               Error);
  EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt"}));
}

}  // namespace
}  // namespace nanoinfer
