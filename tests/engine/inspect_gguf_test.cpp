// `nanoinfer inspect` on a GGUF file: the same report as for the model directory it was
// exported from (tensors, shapes, types, parameter counts), the file's own facts, and its
// problems (missing, unexpected, mis-shaped tensors, NaNs) named by the file's tensor names;
// a truncated or foreign file is a one-line error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/gguf_config.h"
#include "nanoinfer/error.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/quantize_model.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// tests/data/models/tiny-untied: hidden 128, 3 layers, kv dim 64, intermediate 256, vocab 300:
// embed and lm_head 38,400 each, per layer 147,968 (q 16,384 + 128, k and v 8,192 + 64 each,
// o 16,384, norms 256, MLP 98,304), final norm 128.
constexpr uint64_t kTinyParams = 520832;
constexpr size_t kTinyTensors = 39;  // embed, 3 x 12, final norm, lm_head

std::map<std::string, InspectedTensor> by_name(const ModelReport& r) {
  std::map<std::string, InspectedTensor> out;
  for (const InspectedTensor& t : r.tensors) out.emplace(t.name, t);
  return out;
}

uint64_t total_params(const ModelReport& r) {
  uint64_t n = 0;
  for (const InspectedTensor& t : r.tensors) n += t.params;
  return n;
}

// The CLI report from the parameter breakdown to the verdict: what a directory and a GGUF file
// holding the same weights print alike.
std::string summary(const std::string& out) {
  const size_t at = out.find("\nparameters: ");
  return at == std::string::npos ? std::string() : out.substr(at);
}

// The first line of `text` that contains `needle`, without its newline.
std::string line_with(const std::string& text, std::string_view needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return {};
  const size_t begin = text.rfind('\n', at) + 1;  // npos + 1 == 0
  return text.substr(begin, text.find('\n', at) - begin);
}

// `src` written again as `out`: its metadata (then `edit`), and its tensors passed through
// `tensor`, which may change a tensor's dims or drop it (returning false).
void rewrite(const GgufFile& src, const fs::path& out,
             const std::function<bool(const GgufTensorInfo&, std::vector<uint64_t>& dims)>& tensor,
             const std::function<void(GgufWriter&)>& edit = {}) {
  GgufWriter w(out);
  for (const GgufKeyValue& kv : src.layout().metadata) w.set(kv.key, kv.value);
  if (edit) edit(w);
  for (const GgufTensorInfo& t : src.tensors()) {
    std::vector<uint64_t> dims = t.dims;
    if (tensor && !tensor(t, dims)) continue;
    w.add(t.name, t.type, dims, src.data(t));
  }
  w.write();
}

// Runs `inspect` and checks it failed with exactly one error line.
test::CliResult inspect_fails(const fs::path& model) {
  test::CliResult r = run_cli({"inspect", model.string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("nanoinfer: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  return r;
}

// The tiny model directory and two GGUF exports of it, written once for the suite.
class InspectGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    test::write_tiny_model_dir(*dir_ / "m");
    export_gguf(*dir_ / "m", *dir_ / "f32.gguf", std::nullopt);  // as stored: F32
    export_gguf(*dir_ / "m", *dir_ / "q8.gguf", WeightType::Q8_0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path path(std::string_view name) { return *dir_ / name; }

  test::TempDir tmp_;
  static test::TempDir* dir_;
};

test::TempDir* InspectGguf::dir_ = nullptr;

TEST_F(InspectGguf, SameTensorsShapesAndCountsAsTheDirectory) {
  const ModelReport d = inspect_model(path("m"));
  const ModelReport g = inspect_model(path("f32.gguf"));
  EXPECT_FALSE(d.gguf.has_value());
  ASSERT_TRUE(g.gguf.has_value());
  EXPECT_EQ(d.problems, std::vector<std::string>{});
  EXPECT_EQ(g.problems, std::vector<std::string>{});
  ASSERT_EQ(d.tensors.size(), kTinyTensors);
  ASSERT_EQ(g.tensors.size(), kTinyTensors);
  EXPECT_EQ(total_params(d), kTinyParams);
  EXPECT_EQ(total_params(g), kTinyParams);
  EXPECT_EQ(g.config.parameter_count(), kTinyParams);
  const auto dt = by_name(d), gt = by_name(g);
  ASSERT_EQ(gt.size(), kTinyTensors);  // distinct names
  for (const auto& [name, want] : dt) {
    const auto it = gt.find(name);
    ASSERT_NE(it, gt.end()) << name;
    const InspectedTensor& got = it->second;
    EXPECT_EQ(want.file_name, name);
    EXPECT_EQ(got.file_name, gguf_name_from_hf(name)) << name;
    EXPECT_EQ(got.type, "F32") << name;
    EXPECT_EQ(got.dtype, want.dtype) << name;
    EXPECT_EQ(got.shape, want.shape) << name;
    EXPECT_EQ(got.stored_shape, want.stored_shape) << name;
    EXPECT_EQ(got.bytes, want.bytes) << name;
    EXPECT_EQ(got.params, want.params) << name;
    EXPECT_EQ(got.role, want.role) << name;
    EXPECT_FALSE(got.role.empty()) << name;
  }
  EXPECT_EQ(gt.at("model.layers.2.mlp.down_proj.weight").shape, (std::vector<uint64_t>{128, 256}));
  EXPECT_EQ(gt.at("model.layers.2.mlp.down_proj.weight").file_name, "blk.2.ffn_down.weight");

  // The config read from qwen2.* metadata is the directory's (rms_norm_eps went through f32).
  EXPECT_EQ(g.config.num_hidden_layers, d.config.num_hidden_layers);
  EXPECT_EQ(g.config.hidden_size, d.config.hidden_size);
  EXPECT_EQ(g.config.intermediate_size, d.config.intermediate_size);
  EXPECT_EQ(g.config.num_key_value_heads, d.config.num_key_value_heads);
  EXPECT_EQ(g.config.vocab_size, d.config.vocab_size);
  EXPECT_EQ(g.config.tie_word_embeddings, d.config.tie_word_embeddings);
  EXPECT_EQ(g.config.rms_norm_eps, static_cast<double>(static_cast<float>(d.config.rms_norm_eps)));

  // The file's own facts.
  const GgufFacts& f = *g.gguf;
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(g.header_bytes, f.data_offset);
  EXPECT_EQ(f.data_offset % 32, 0u);
  EXPECT_EQ(g.file_bytes, fs::file_size(path("f32.gguf")));
  EXPECT_EQ(g.files.weights, path("f32.gguf"));
  EXPECT_EQ(f.architecture, "qwen2");
  EXPECT_EQ(f.name, "m");
  EXPECT_EQ(f.file_type, 0u);
  EXPECT_EQ(f.file_type_name, "ALL_F32");
  EXPECT_EQ(f.tokenizer_model, "gpt2");
  EXPECT_EQ(f.tokenizer_pre, "qwen2");
  EXPECT_EQ(f.tokens, 300u);
  EXPECT_EQ(f.merges, 41u);
  EXPECT_EQ(f.eos_token_id, std::nullopt);  // the tiny tokenizer names none
  EXPECT_FALSE(f.chat_template);
  EXPECT_EQ(f.metadata_keys, GgufFile::open(path("f32.gguf")).layout().metadata.size());

  // Q8_0: the matrices in 34-byte blocks of 32, the norms and biases F32; nothing else differs.
  const ModelReport q = inspect_model(path("q8.gguf"));
  EXPECT_EQ(q.problems, std::vector<std::string>{});
  EXPECT_EQ(total_params(q), kTinyParams);
  EXPECT_EQ(q.gguf->file_type_name, "Q8_0");
  size_t matrices = 0;
  for (const auto& [name, got] : by_name(q)) {
    const InspectedTensor& want = dt.at(name);
    EXPECT_EQ(got.shape, want.shape) << name;
    EXPECT_EQ(got.role, want.role) << name;
    if (got.shape.size() == 2) {
      ++matrices;
      EXPECT_EQ(got.type, "Q8_0") << name;
      EXPECT_EQ(got.bytes, got.shape[0] * got.shape[1] / 32 * 34) << name;
    } else {
      EXPECT_EQ(got.type, "F32") << name;
      EXPECT_EQ(got.bytes, want.bytes) << name;
    }
  }
  EXPECT_EQ(matrices, 2u + 3u * 7u);
}

TEST_F(InspectGguf, CliPrintsTheDirectorysSummary) {
  const test::CliResult d = run_cli({"inspect", path("m").string()});
  const test::CliResult g = run_cli({"inspect", "-m", path("f32.gguf").string()});
  const test::CliResult p = run_cli({"inspect", path("f32.gguf").string()});
  ASSERT_EQ(d.status, 0) << d.err;
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(g.err, "");
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_EQ(p.out, g.out);  // MODEL and -m MODEL are one
  EXPECT_THAT(d.out, HasSubstr("parameters: 520,832\n"));
  EXPECT_EQ(summary(g.out), summary(d.out));
  EXPECT_THAT(g.out, HasSubstr("verdict: OK, all 39 tensors match"));
  EXPECT_THAT(g.out, HasSubstr("gguf:   version 3, alignment 32, tensor data at byte "));
  EXPECT_THAT(g.out, HasSubstr("architecture qwen2, name \"m\", file type 0 (ALL_F32)\n"));
  EXPECT_THAT(g.out, HasSubstr("tokenizer: gpt2 (pre-tokenizer qwen2), 300 tokens, 41 merges\n"));
  // Both names on one line, then the type and the row-major shape.
  EXPECT_THAT(
      line_with(g.out, "  model.layers.2.mlp.down_proj.weight "),
      ::testing::MatchesRegex(" +model\\.layers\\.2\\.mlp\\.down_proj\\.weight +blk\\.2\\.ffn_down\\.weight +F32 +"
                              "\\[128, 256\\] +131,072"));
  EXPECT_THAT(d.out, Not(HasSubstr("gguf")));

  const test::CliResult q = run_cli({"inspect", "-m", path("q8.gguf").string()});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_THAT(q.out, HasSubstr("parameters: 520,832\n"));
  EXPECT_THAT(q.out, HasSubstr("dtypes: F32 x16, Q8_0 x23\n"));

  rewrite(GgufFile::open(path("f32.gguf")), tmp_ / "eos.gguf", {}, [](GgufWriter& w) {
    w.set_u32("tokenizer.ggml.eos_token_id", 299);
    w.set_string("tokenizer.chat_template", "{{ messages }}");
  });
  const test::CliResult e = run_cli({"inspect", (tmp_ / "eos.gguf").string()});
  EXPECT_EQ(e.status, 0) << e.err;
  EXPECT_THAT(e.out,
              HasSubstr("tokenizer: gpt2 (pre-tokenizer qwen2), 300 tokens, 41 merges, eos 299, chat template\n"));

  const test::CliResult both = run_cli({"inspect", path("m").string(), "-m", path("f32.gguf").string()});
  EXPECT_NE(both.status, 0);
  // Neither: the model built into the binary, read in place.
  const test::CliResult none = run_cli({"inspect"});
  EXPECT_EQ(none.status, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("model:  (embedded)/default-model\n"));
  EXPECT_THAT(none.out, HasSubstr("verdict: OK, all "));
}

// A quantized directory and the GGUF file of it (its blocks copied unchanged) report the same
// weights: type, shape, bytes and count for every tensor, and how they were made.
TEST_F(InspectGguf, QuantizedDirectoryAndItsGgufAgree) {
  QuantizeOptions o;
  o.type = WeightType::Q4_0;
  o.method = QuantMethod::Rtn;
  o.threads = 1;
  quantize_model(path("m").string(), tmp_ / "q4", o);
  export_gguf(tmp_ / "q4", tmp_ / "q4.gguf", std::nullopt);
  const ModelReport d = inspect_model(tmp_ / "q4");
  const ModelReport g = inspect_model(tmp_ / "q4.gguf");
  EXPECT_EQ(d.problems, std::vector<std::string>{});
  EXPECT_EQ(g.problems, std::vector<std::string>{});
  ASSERT_EQ(g.tensors.size(), kTinyTensors);
  const auto gt = by_name(g);
  std::map<std::string, size_t> types;
  for (const auto& [name, want] : by_name(d)) {
    const InspectedTensor& got = gt.at(name);
    EXPECT_EQ(got.type, want.type) << name;
    EXPECT_EQ(got.shape, want.shape) << name;
    EXPECT_EQ(got.bytes, want.bytes) << name;
    EXPECT_EQ(got.params, want.params) << name;
    ++types[got.type];
  }
  // 21 layer matrices and the embedding in int4, the untied logits matrix int8.
  EXPECT_EQ(types, (std::map<std::string, size_t>{{"F32", 16}, {"Q4_0", 22}, {"Q8_0", 1}}));
  EXPECT_EQ(gt.at("lm_head.weight").type, "Q8_0");
  EXPECT_FALSE(d.quantization.empty());
  EXPECT_EQ(g.quantization, d.quantization);
  EXPECT_EQ(g.gguf->file_type_name, "Q4_0");
}

// The byte offset in `file` of element `col` of row `row` of the tensor `gguf_name`.
uint64_t element_offset(const fs::path& file, std::string_view gguf_name, uint64_t row, uint64_t col) {
  const GgufFile f = GgufFile::open(file);
  const GgufTensorInfo& t = f.get(gguf_name);
  const uint64_t row_bytes = ggml_row_bytes(t.type, t.dims[0]);
  return f.layout().data_offset + t.offset + row * row_bytes + ggml_row_bytes(t.type, col);
}

TEST_F(InspectGguf, NonFiniteValuesAreProblemsNamingTheTensor) {
  // A NaN at [5][7] of an F32 matrix.
  std::vector<std::byte> bytes = test::read_bytes(path("f32.gguf"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + element_offset(path("f32.gguf"), "blk.1.ffn_up.weight", 5, 7), &nan, 4);
  test::write_bytes(tmp_ / "nan.gguf", bytes);
  const ModelReport r = inspect_model(tmp_ / "nan.gguf");
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{"tensor 'blk.1.ffn_up.weight' (model.layers.1.mlp.up_proj.weight) holds a NaN or "
                                      "infinite value (row 5)"}));
  const test::CliResult c = inspect_fails(tmp_ / "nan.gguf");
  EXPECT_EQ(c.err, "nanoinfer: error: " + (tmp_ / "nan.gguf").string() +
                       ": tensor 'blk.1.ffn_up.weight' (model.layers.1.mlp.up_proj.weight) holds a NaN or "
                       "infinite value (row 5)\n");
  EXPECT_THAT(c.out, HasSubstr("verdict: FAIL, 1 problem(s)"));

  // A Q8_0 block whose f16 scale is +inf (every value of its 32 is then inf or NaN), in the
  // third block of row 2; and an infinite final norm weight.
  bytes = test::read_bytes(path("q8.gguf"));
  const uint16_t inf16 = 0x7C00;
  std::memcpy(bytes.data() + element_offset(path("q8.gguf"), "blk.0.attn_k.weight", 2, 64), &inf16, 2);
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(bytes.data() + element_offset(path("q8.gguf"), "output_norm.weight", 0, 127), &inf, 4);
  test::write_bytes(tmp_ / "inf.gguf", bytes);
  EXPECT_EQ(inspect_model(tmp_ / "inf.gguf").problems,
            (std::vector<std::string>{
                "tensor 'blk.0.attn_k.weight' (model.layers.0.self_attn.k_proj.weight) holds a NaN or infinite "
                "value (row 2)",
                "tensor 'output_norm.weight' (model.norm.weight) holds a NaN or infinite value (row 0)"}));
  EXPECT_THAT(inspect_fails(tmp_ / "inf.gguf").err, HasSubstr("(and 1 more problem(s) listed above)"));
}

TEST_F(InspectGguf, MissingUnexpectedAndMisShapedTensorsAreNamedAsInTheFile) {
  const GgufFile src = GgufFile::open(path("f32.gguf"));
  rewrite(src, tmp_ / "bad.gguf", [](const GgufTensorInfo& t, std::vector<uint64_t>& dims) {
    if (t.name == "blk.1.ffn_up.weight") return false;
    if (t.name == "blk.0.ffn_down.weight") std::reverse(dims.begin(), dims.end());  // transposed
    return true;
  });
  // Loading names the same problems the Hugging Face way (and no safetensors hint about U8).
  try {
    open_model((tmp_ / "bad.gguf").string());
    ADD_FAILURE() << "bad.gguf loaded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              (tmp_ / "bad.gguf").string() +
                  ": tensor 'model.layers.0.mlp.down_proj.weight': expected shape [128, 256], found [256, 128]; "
                  "missing tensor 'model.layers.1.mlp.up_proj.weight' (expected shape [256, 128])");
  }
  {
    // A tensor llama.cpp's qwen2 files do not have, spelled like a Hugging Face one.
    const GgufFile bad = GgufFile::open(tmp_ / "bad.gguf");
    const std::vector<std::byte> norm(128 * 4);
    GgufWriter w(tmp_ / "bad2.gguf");
    for (const GgufKeyValue& kv : bad.layout().metadata) w.set(kv.key, kv.value);
    for (const GgufTensorInfo& t : bad.tensors()) w.add(t.name, t.type, t.dims, bad.data(t));
    w.add("model.norm.weight", ggml_type_of(WeightType::F32), {128}, norm);
    w.write();
  }
  const ModelReport r = inspect_model(tmp_ / "bad2.gguf");
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{
                "tensor 'blk.0.ffn_down.weight' (model.layers.0.mlp.down_proj.weight): expected shape [128, 256], "
                "found [256, 128]",
                "missing tensor 'blk.1.ffn_up.weight' (model.layers.1.mlp.up_proj.weight) (expected shape [256, 128])",
                "unexpected tensor 'model.norm.weight' (shape [128]): not a tensor of any supported architecture"}));
  EXPECT_EQ(r.tensors.size(), kTinyTensors);  // one dropped, one added
  const test::CliResult c = inspect_fails(tmp_ / "bad2.gguf");
  EXPECT_THAT(c.err, HasSubstr("bad2.gguf: tensor 'blk.0.ffn_down.weight' (model.layers.0.mlp.down_proj.weight): "
                               "expected shape [128, 256], found [256, 128] (and 2 more problem(s) listed above)"));
  EXPECT_THAT(c.out, HasSubstr("verdict: FAIL, 3 problem(s)"));
}

TEST_F(InspectGguf, UnreadableFilesAreOneLineErrors) {
  const std::vector<std::byte> good = test::read_bytes(path("f32.gguf"));
  std::vector<std::byte> b(good.begin(), good.end() - 100);
  test::write_bytes(tmp_ / "cut.gguf", b);
  // The last tensor, lm_head [300][128] f32, now ends 100 bytes past the data.
  const GgufFile gf = GgufFile::open(path("f32.gguf"));
  const GgufLayout& layout = gf.layout();
  const uint64_t data_bytes = good.size() - layout.data_offset;
  EXPECT_EQ(layout.tensors.back().offset + 153600, data_bytes);
  EXPECT_THAT(inspect_fails(tmp_ / "cut.gguf").err,
              HasSubstr("cut.gguf: tensor 'output.weight': data [" + std::to_string(data_bytes - 153600) +
                        ", +153600 bytes) runs past the end of the data section (" + std::to_string(data_bytes - 100) +
                        " bytes from file offset " + std::to_string(layout.data_offset) + ")\n"));
  b.assign(good.begin(), good.begin() + 40);  // the 24-byte header and 16 bytes of metadata
  test::write_bytes(tmp_ / "head.gguf", b);
  EXPECT_THAT(inspect_fails(tmp_ / "head.gguf").err,
              HasSubstr("head.gguf: header: metadata_kv_count " + std::to_string(layout.metadata.size()) +
                        " needs at least 14 bytes per pair, but only 16 bytes follow the header\n"));
  test::write_bytes(tmp_ / "empty.gguf", {});
  EXPECT_THAT(inspect_fails(tmp_ / "empty.gguf").err, HasSubstr("empty.gguf: file is empty"));
  EXPECT_THAT(inspect_fails(tmp_ / "absent.gguf").err, HasSubstr("absent.gguf: no such GGUF file"));

  rewrite(GgufFile::open(path("f32.gguf")), tmp_ / "gemma3.gguf", {},
          [](GgufWriter& w) { w.set_string("general.architecture", "gemma3"); });
  EXPECT_THAT(inspect_fails(tmp_ / "gemma3.gguf").err,
              HasSubstr("gemma3.gguf: general.architecture 'gemma3' is not supported (nanoinfer supports 'qwen2' "
                        "(Qwen2 / Qwen2.5), 'qwen3' (Qwen3, dense), 'llama' (Llama 3.x))\n"));
}

// A GGUF file's hyper-parameters pass the same range checks as config.json's: an rms epsilon
// of 1e30 would otherwise pass inspect as OK and generate "\f\f\f..." with exit 0.
TEST_F(InspectGguf, HyperParametersAreRangeCheckedLikeConfigJson) {
  rewrite(GgufFile::open(path("f32.gguf")), tmp_ / "eps.gguf", {},
          [](GgufWriter& w) { w.set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e30f); });
  EXPECT_THAT(inspect_fails(tmp_ / "eps.gguf").err,
              HasSubstr("eps.gguf: metadata 'qwen2.attention.layer_norm_rms_epsilon': expected a small positive "
                        "number in (0, 0.01], found 1.0000000150474662e+30\n"));
  const test::CliResult g = run_cli({"generate", "-m", (tmp_ / "eps.gguf").string(), "-p", "hi", "-n", "2"});
  EXPECT_EQ(g.status, 1) << g.out;
  EXPECT_EQ(g.out, "");
  rewrite(GgufFile::open(path("f32.gguf")), tmp_ / "theta.gguf", {},
          [](GgufWriter& w) { w.set_f32("qwen2.rope.freq_base", std::numeric_limits<float>::infinity()); });
  EXPECT_THAT(inspect_fails(tmp_ / "theta.gguf").err,
              HasSubstr("theta.gguf: metadata 'qwen2.rope.freq_base': expected a number in [1, 1000000000000], "
                        "found inf\n"));
}

// inspect checks a GGUF file's tokenizer as generate does, so no file passes inspect whose
// tokenizer generate refuses.
TEST_F(InspectGguf, TokenizerIsCheckedLikeGenerate) {
  rewrite(GgufFile::open(path("f32.gguf")), tmp_ / "tok.gguf", {},
          [](GgufWriter& w) { w.set_array("tokenizer.ggml.merges", {std::vector<std::string>{"no-space-here"}}); });
  const test::CliResult g = run_cli({"generate", "-m", (tmp_ / "tok.gguf").string(), "-p", "hi", "-n", "1"});
  ASSERT_EQ(g.status, 1);
  const test::CliResult r = inspect_fails(tmp_ / "tok.gguf");
  EXPECT_THAT(r.out, HasSubstr("verdict: FAIL"));
  EXPECT_THAT(r.err, HasSubstr("tok.gguf: tokenizer: "));
}

}  // namespace
}  // namespace nanoinfer
