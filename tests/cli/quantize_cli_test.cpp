// `nanoinfer quantize`, quantized directories in `inspect`, `generate`, `perplexity --kl-base`
// and `bench quant`, end to end on the tiny test model with its tokenizer; the refusals; an
// interrupted run leaving nothing; the loader's checks of a quantized file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "nanoinfer/error.h"
#include "nanoinfer/interrupt.h"
#include "nanoinfer/model.h"
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
using Json = nlohmann::ordered_json;

// Plain text for calibration and scoring (the tiny tokenizer covers every byte).
std::string some_text() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "the king said to the queen, and the queen said nothing at all. ";
  return s;
}

// Entries of `dir` (names), sorted: to see that nothing was left behind.
// A safetensors file's bytes with its header JSON replaced by edit(header) (data unchanged).
std::vector<std::byte> edit_header(const std::vector<std::byte>& bytes, const std::function<void(Json&)>& edit) {
  const SafetensorsLayout layout = parse_safetensors(bytes, "file");
  Json header = Json::parse(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, layout.header_len));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out = test::raw_safetensors(text, 0);
  out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(layout.data_offset), bytes.end());
  return out;
}

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_tiny_model_dir(dir_ / "m");
    test::write_text(dir_ / "text.txt", some_text());
  }
  std::string path(std::string_view name) const { return (dir_ / name).string(); }

  test::TempDir dir_;
};

// Without --calib-windows a small model calibrates on 64 windows (a 0.5B model on fewer:
// its forward over them is bounded; see default_calib_windows).
TEST_F(QuantizeCli, DefaultCalibrationIs64WindowsForASmallModel) {
  const auto q = run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "imatrix", "--calib",
                          path("text.txt"), "--calib-ctx", "8", "--out", path("q")});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_NE(q.out.find("calibrated on 512 tokens"), std::string::npos) << q.out;
  const Json config = Json::parse(test::read_text(dir_ / "q/config.json"));
  EXPECT_EQ(config.at("quantization_config").at("calibration").at("windows"), 64);
}

TEST_F(QuantizeCli, WritesADirectoryThatEveryCommandRuns) {
  const auto q = run_cli({"quantize", "-m", path("m"), "--type", "int4", "--calib", path("text.txt"), "--calib-windows",
                          "3", "--calib-ctx", "64", "-t", "2", "--out", path("q")});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_EQ(q.err, "");  // no progress when stderr is not a terminal
  EXPECT_NE(q.out.find("wrote " + path("q") + ": int4 (gptq; logits matrix int8)"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("bits per weight overall"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("calibrated on 192 tokens"), std::string::npos) << q.out;      // 3 windows of 64
  EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "q", "text.txt"}));  // no temporary left
  EXPECT_EQ(entries(dir_ / "q"),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"}));
  EXPECT_EQ(test::read_text(dir_ / "q/tokenizer.json"), test::read_text(dir_ / "m/tokenizer.json"));

  const Json config = Json::parse(test::read_text(dir_ / "q/config.json"));
  const Json& qc = config.at("quantization_config");
  EXPECT_EQ(qc.at("weight_type"), "int4");
  EXPECT_EQ(qc.at("method"), "gptq");
  EXPECT_EQ(qc.at("head_type"), "int8");
  EXPECT_EQ(qc.at("calibration").at("tokens"), 192);

  // tiny-untied: 3 layers x 7 matrices in Q4_0, the embedding Q4_0 (untied: only looked up),
  // lm_head Q8_0; norms and biases F32.
  const SafetensorsFile f = SafetensorsFile::open(dir_ / "q/model.safetensors");
  const Json types = Json::parse(f.layout().metadata.at("nanoinfer.weight_types"));
  EXPECT_EQ(types.size(), 23u);
  for (const auto& [name, type] : types.items()) EXPECT_EQ(type, name == "lm_head.weight" ? "Q8_0" : "Q4_0") << name;
  for (const TensorInfo& t : f.tensors()) EXPECT_TRUE(t.dtype == DType::U8 || t.dtype == DType::F32) << t.name;
  EXPECT_EQ(f.find("model.layers.0.mlp.up_proj.weight")->shape,
            (std::vector<uint64_t>{256, 72}));  // 128 cols: 4 blocks of 18 bytes

  const auto inspect = run_cli({"inspect", path("q")});
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("Q4_0 4.500"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("Q8_0 8.500 (38,400 weights)"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("model.layers.0.mlp.up_proj.weight"), std::string::npos);
  EXPECT_NE(inspect.out.find("Q4_0   [256, 128]"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("quantization: {\"quant_method\":\"nanoinfer\""), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("verdict: OK"), std::string::npos);

  const auto gen = run_cli({"generate", "-m", path("q"), "-p", "the king", "-n", "8", "--temp", "0", "-t", "1"});
  EXPECT_EQ(gen.status, 0) << gen.err;

  const auto ppl = run_cli(
      {"perplexity", "-m", path("q"), "-f", path("text.txt"), "--kl-base", path("m"), "-c", "64", "--json", "-t", "2"});
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  const Json j = Json::parse(ppl.out);
  for (const char* field : {"ppl", "ppl_base", "delta_ppl_pct", "kld_mean", "kld_p99", "kld_max", "top1_agreement",
                            "tokens", "kld_stderr", "top1_stderr", "delta_ppl_pct_stderr"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_GT(j.at("kld_mean").get<double>(), 0.0);
  EXPECT_LE(j.at("kld_mean").get<double>(), j.at("kld_max").get<double>());
  EXPECT_LE(j.at("kld_p99").get<double>(), j.at("kld_max").get<double>());
  EXPECT_GE(j.at("top1_agreement").get<double>(), 0.0);
  EXPECT_LE(j.at("top1_agreement").get<double>(), 1.0);
  const double ratio = j.at("ppl").get<double>() / j.at("ppl_base").get<double>();
  EXPECT_NEAR(j.at("delta_ppl_pct").get<double>(), 100.0 * (ratio - 1.0), 1e-9 * 100);
  // The base's perplexity is the plain `perplexity` of the base.
  const auto base = run_cli({"perplexity", "-m", path("m"), "-f", path("text.txt"), "-c", "64", "--json", "-t", "2"});
  ASSERT_EQ(base.status, 0) << base.err;
  EXPECT_EQ(Json::parse(base.out).at("perplexity").get<double>(), j.at("ppl_base").get<double>());
  EXPECT_EQ(Json::parse(base.out).at("tokens"), j.at("tokens"));

  // The human-readable form names every quantity once.
  const auto text =
      run_cli({"perplexity", "-m", path("q"), "-f", path("text.txt"), "--kl-base", path("m"), "-c", "64"});
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* word : {"base ", "delta   PPL", "KLD     mean", "p99", "top-1"}) {
    EXPECT_NE(text.out.find(word), std::string::npos) << word << "\n" << text.out;
  }
}

TEST_F(QuantizeCli, Refusals) {
  const auto q = run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--out", path("q")});
  ASSERT_EQ(q.status, 0) << q.err;
  test::expect_one_line_error(run_cli({"quantize", "-m", path("q"), "--type", "int4", "--out", path("x")}),
                              "already quantized");
  test::expect_one_line_error(
      run_cli({"quantize", "-m", path("m"), "--type", "int4", "--method", "rtn", "--out", path("q")}),
      "already exists");
  test::expect_one_line_error(run_cli({"quantize", "-m", path("m"), "--type", "int4", "--out", path("no-such-dir/x")}),
                              "does not exist");
  test::expect_one_line_error(run_cli({"quantize", "-m", path("m"), "--type", "int3", "--out", path("x")}),
                              "--type must be int8, int4 or q3_k");
  test::expect_one_line_error(
      run_cli({"quantize", "-m", path("m"), "--type", "int4", "--method", "awq", "--out", path("x")}),
      "--method must be rtn, imatrix or gptq");
  // The K-quants other than q3_k are read and run, not written: neither as the weights' type nor the logits matrix's.
  test::expect_one_line_error(run_cli({"quantize", "-m", path("m"), "--type", "q4_k", "--out", path("x")}),
                              "--type must be int8, int4 or q3_k");
  test::expect_one_line_error(run_cli({"quantize", "-m", path("m"), "--type", "int4", "--head-type", "q6_k", "--method",
                                       "rtn", "--out", path("x")}),
                              "quantize: the logits matrix's type must be f32, bf16, int8, int4 or q3_k, got q6_k");
  test::expect_one_line_error(
      run_cli({"quantize", "-m", path("m"), "--type", "int4", "--calib", path("none.txt"), "--out", path("x")}),
      "cannot read calibration text");

  // A NaN among the weights, found before any calibration, naming the tensor.
  std::vector<std::byte> bytes = test::read_bytes(dir_ / "m/model.safetensors");
  const SafetensorsLayout layout = parse_safetensors(bytes, "m");
  for (const TensorInfo& t : layout.tensors) {
    if (t.name != "model.layers.1.mlp.down_proj.weight") continue;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + layout.data_offset + t.begin + 4 * 17, &nan, 4);
  }
  test::write_bytes(dir_ / "m/model.safetensors", bytes);
  for (const char* method : {"rtn", "gptq"}) {
    test::expect_one_line_error(run_cli({"quantize", "-m", path("m"), "--type", "int4", "--method", method, "--calib",
                                         path("text.txt"), "--out", path("x")}),
                                "tensor 'model.layers.1.mlp.down_proj.weight' holds nan at element 17");
  }
  EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "q", "text.txt"}));
}

// An exception from the progress callback (what the CLI throws on SIGINT) at any stage leaves
// no output and no temporary directory.
TEST_F(QuantizeCli, InterruptedRunLeavesNothing) {
  for (const char* stage : {"calibrate", "factor", "write"}) {
    QuantizeOptions o;
    o.calibration = dir_ / "text.txt";
    o.calib_ctx = 64;
    o.threads = 1;
    const auto progress = [&](const QuantizeProgress& p) {
      if (p.stage == stage) throw Error("interrupted");
    };
    EXPECT_THROW(quantize_model(path("m"), dir_ / "q", o, progress), Error) << stage;
    EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt"})) << stage;
  }
}

using test::in_child;

// A signal does not unwind: SIGHUP, or a second SIGINT while the first is being honoured, ends
// the process at once, and the staging directory (with the part-written weights in it) must go
// with it.
TEST_F(QuantizeCli, HangUpOrSecondInterruptLeavesNothing) {
  QuantizeOptions o;
  o.calibration = dir_ / "text.txt";
  o.calib_ctx = 64;
  o.threads = 1;
  for (const char* stage : {"calibrate", "write"}) {
    int status = in_child([&] {
      quantize_model(path("m"), dir_ / "q", o, [&](const QuantizeProgress& p) {
        if (p.stage == stage) ::raise(SIGHUP);
      });
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << stage << " " << status;
    EXPECT_EQ(WTERMSIG(status), SIGHUP);
    EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt"})) << stage;

    // Inside an InterruptScope (what the CLI runs in) the first SIGINT is only recorded; the
    // second ends the process, removing what is registered.
    int recorded = 0;
    status = in_child([&] {
      const InterruptScope scope;
      quantize_model(path("m"), dir_ / "q", o, [&](const QuantizeProgress& p) {
        if (p.stage != stage) return;
        ::raise(SIGINT);
        recorded = InterruptScope::interrupted();
        if (recorded != SIGINT) ::_exit(3);
        ::raise(SIGINT);
      });
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << stage << " " << status;
    EXPECT_EQ(WTERMSIG(status), SIGINT);
    EXPECT_EQ(entries(dir_.path()), (std::vector<std::string>{"m", "text.txt"})) << stage;
  }
}

// What a run killed outright (SIGKILL) left, in the naming of its own temporaries with a process
// id that no longer exists, is removed by a later run writing the same output; a live process's
// and names of another form are left alone.
TEST_F(QuantizeCli, StaleTemporariesOfAKilledRunAreRemovedByTheNext) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale_dir = ".q.tmp." + std::to_string(dead) + ".AbC123";
  const std::string stale_file = ".q.gguf.tmp." + std::to_string(dead) + ".xYz789";
  const std::string live_dir = ".q.tmp." + std::to_string(::getpid()) + ".LiVe12";
  const std::string other = ".q.tmp.notapid";
  fs::create_directories(dir_ / stale_dir / ".model.tmp.1.abcdef");
  test::write_text(dir_ / stale_dir / "model.safetensors", "376 MB of it");
  test::write_text(dir_ / stale_file, "half a GGUF file");
  fs::create_directories(dir_ / live_dir);
  test::write_text(dir_ / other, "not ours");

  const auto q = run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--out", path("q")});
  ASSERT_EQ(q.status, 0) << q.err;
  const auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(entries(dir_.path()), sorted({live_dir, other, "m", "q", stale_file, "text.txt"}));
  const auto g = run_cli(
      {"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--format", "gguf", "--out", path("q.gguf")});
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(entries(dir_.path()), sorted({live_dir, other, "m", "q", "q.gguf", "text.txt"}));
}

// "--out newdir/" names newdir (before: "the directory newdir does not exist"), and a calibration
// file is read only as far as its windows need: a sparse 2 GiB file, twice the cap on text
// read whole, calibrates on its first lines.
TEST_F(QuantizeCli, OutWithATrailingSlashAndALargeCalibrationFile) {
  const auto q = run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "rtn", "--out", path("q") + "/"});
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_TRUE(fs::exists(dir_ / "q/model.safetensors"));
  {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the king said to the queen, and the queen said nothing at all.\n";
    test::write_text(dir_ / "big.txt", text);
    fs::resize_file(dir_ / "big.txt", uint64_t{2} << 30);  // the rest reads as NUL bytes, stored nowhere
  }
  const auto c = run_cli({"quantize", "-m", path("m"), "--type", "int8", "--method", "imatrix", "--calib",
                          path("big.txt"), "--calib-windows", "2", "--calib-ctx", "32", "--out", path("c")});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("calibrated on 64 tokens"), std::string::npos) << c.out;
}

// GPTQ's result does not depend on the thread count: calibration, Gram matrices, factors and
// the sweep are each computed the same way on any split.
TEST_F(QuantizeCli, GptqBytesIdenticalAtOneAndThreeThreads) {
  QuantizeOptions o;
  o.calibration = dir_ / "text.txt";
  o.calib_ctx = 64;
  o.threads = 1;
  quantize_model(path("m"), dir_ / "q1", o);
  o.threads = 3;
  quantize_model(path("m"), dir_ / "q3", o);
  EXPECT_EQ(test::read_bytes(dir_ / "q1/model.safetensors"), test::read_bytes(dir_ / "q3/model.safetensors"));
}

// The loader holds a quantized file to its declarations.
TEST_F(QuantizeCli, LoaderChecksTheDeclarations) {
  QuantizeOptions o;
  o.method = QuantMethod::Rtn;
  quantize_model(path("m"), dir_ / "q", o);
  const std::vector<std::byte> good = test::read_bytes(dir_ / "q/model.safetensors");
  const auto load_error = [&](const std::function<void(Json&)>& edit) -> std::string {
    test::write_bytes(dir_ / "q/model.safetensors", edit_header(good, edit));
    try {
      open_model_alone(dir_ / "q", {.threads = 1});
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  const auto types = [](Json& h) -> Json {
    return Json::parse(h["__metadata__"]["nanoinfer.weight_types"].get<std::string>());
  };
  const auto set_types = [](Json& h, const Json& t) { h["__metadata__"]["nanoinfer.weight_types"] = t.dump(); };

  EXPECT_NE(load_error([](Json& h) { h["__metadata__"].erase("nanoinfer.weight_types"); })
                .find("tensor 'model.embed_tokens.weight': expected shape [300, 128], found [300, 72] of U8 (U8 blocks "
                      "need a type in __metadata__ \"nanoinfer.weight_types\")"),
            std::string::npos);
  EXPECT_NE(
      load_error([](Json& h) { h["__metadata__"]["nanoinfer.weight_types"] = "[1, 2]"; }).find("is not a JSON object"),
      std::string::npos);
  EXPECT_NE(load_error([&](Json& h) {
              Json t = types(h);
              t["lm_head.weight"] = "Q2_K";
              set_types(h, t);
            }).find("tensor 'lm_head.weight' has type \"Q2_K\", expected a block type"),
            std::string::npos);
  // Declared int8 but holding int4-sized rows.
  EXPECT_NE(load_error([&](Json& h) {
              Json t = types(h);
              t["model.layers.0.mlp.up_proj.weight"] = "Q8_0";
              set_types(h, t);
            })
                .find("tensor 'model.layers.0.mlp.up_proj.weight': expected shape [256, 136] (bytes of Q8_0 blocks), "
                      "found [256, 72]"),
            std::string::npos);
  EXPECT_NE(load_error([&](Json& h) {
              Json t = types(h);
              t["model.norm.weight"] = "Q8_0";
              set_types(h, t);
            }).find("tensor 'model.norm.weight' is declared Q8_0 but is not a matrix"),
            std::string::npos);
  EXPECT_NE(load_error([&](Json& h) {
              Json t = types(h);
              t["model.layers.9.mlp.up_proj.weight"] = "Q8_0";
              set_types(h, t);
            }).find("is declared Q8_0 but is not in the manifest"),
            std::string::npos);
  EXPECT_EQ(load_error([](Json&) {}), "(loaded)");
}

TEST_F(QuantizeCli, BenchQuantTableAndRecords) {
  const auto r = run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "-c", "64", "-t", "2", "--levels",
                          "base,int8-rtn,int4-rtn,int4-imatrix,int4-rtn:head=int4", "--calib", path("text.txt"),
                          "--calib-windows", "2", "-o", path("out.jsonl")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.out.find("| level | type | method | logits matrix | bytes | bits/weight | PPL | ΔPPL % | KLD mean | top-1 % | "
                 "weight rel. error |"),
      std::string::npos)
      << r.out;
  std::stringstream lines(test::read_text(dir_ / "out.jsonl"));
  std::vector<Json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(Json::parse(line));
  ASSERT_EQ(records.size(), 5u);
  const char* levels[] = {"base", "int8-rtn", "int4-rtn", "int4-imatrix", "int4-rtn:head=int4"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(records[i].at("bench"), "quant");
    EXPECT_EQ(records[i].at("level"), levels[i]);
    for (const char* field : {"bytes", "bits_per_weight", "ppl", "ppl_base", "delta_ppl_pct", "kld_mean",
                              "top1_agreement", "weight_relative_error", "commit", "threads"}) {
      EXPECT_TRUE(records[i].contains(field)) << levels[i] << " " << field;
    }
  }
  EXPECT_EQ(records[0].at("kld_mean"), 0.0);
  EXPECT_EQ(records[0].at("bits_per_weight"), 32.0);  // tiny-untied is stored in f32
  // Sizes follow the formats: int8 > int4; errors grow as bits shrink.
  EXPECT_GT(records[1].at("bytes").get<uint64_t>(), records[2].at("bytes").get<uint64_t>());
  EXPECT_EQ(records[2].at("bytes"), records[3].at("bytes"));
  EXPECT_LT(records[1].at("kld_mean").get<double>(), records[2].at("kld_mean").get<double>());
  EXPECT_LT(records[1].at("weight_relative_error").get<double>(), records[2].at("weight_relative_error").get<double>());
  EXPECT_EQ(records[0].at("ppl"), records[1].at("ppl_base"));
  // The logits-matrix axis: the scheme's int8 by default, int4 when asked; a smaller file.
  EXPECT_EQ(records[2].at("head_type"), "int8");
  EXPECT_EQ(records[4].at("head_type"), "int4");
  EXPECT_EQ(records[4].at("method"), "rtn");
  EXPECT_LT(records[4].at("bytes").get<uint64_t>(), records[2].at("bytes").get<uint64_t>());
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(records[i].at("group_size"), 32) << levels[i];

  test::expect_one_line_error(run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int5"}),
                              "--levels: 'int5' is not base or int8|int4");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int4-rtn:head=int3"}),
      "--levels: 'int4-rtn:head=int3' is not base or int8|int4|q3_k[-rtn|-imatrix|-gptq][:head=");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "q4_k-rtn"}),
      "--levels: 'q4_k-rtn' is not base or int8|int4");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int4-gptq:group=128"}),
      "--levels: 'int4-gptq:group=128': groups beyond 32 are measured with -rtn only");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int4-rtn:group=100"}),
      "--levels: 'int4-rtn:group=100': the group must be a multiple of 32 up to 4096");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int4-rtn:group=x"}),
      "--levels: 'int4-rtn:group=x' is not");
  test::expect_one_line_error(
      run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "--levels", "int4-rtn:size=2"}),
      "--levels: 'int4-rtn:size=2' is not");
}

// The group-size axis: int4 with one scale per 128 weights, simulated in Q4_0 blocks that share
// their group's scale; the record gives the size a group-128 format would have.
TEST_F(QuantizeCli, BenchQuantGroupAxis) {
  const auto r = run_cli({"bench", "quant", "-m", path("m"), "-f", path("text.txt"), "-c", "64", "-t", "2", "--levels",
                          "int4-rtn,int4-rtn:group=128", "-o", path("out.jsonl")});
  ASSERT_EQ(r.status, 0) << r.err;
  std::stringstream lines(test::read_text(dir_ / "out.jsonl"));
  std::vector<Json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(Json::parse(line));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].at("group_size"), 32);
  EXPECT_EQ(records[0].at("group_simulated"), false);
  EXPECT_EQ(records[0].at("bytes"), records[0].at("stored_bytes"));
  EXPECT_EQ(records[1].at("group_size"), 128);
  EXPECT_EQ(records[1].at("group_simulated"), true);
  EXPECT_EQ(records[1].at("stored_bytes"), records[0].at("stored_bytes"));  // the same blocks are written
  // Scales a group-128 format would not store: rows x (blocks - groups) x 2 bytes over the int4
  // matrices of tiny-untied (hidden 128, intermediate 256, 3 layers, kv 64; the untied embedding
  // is int4, lm_head keeps the scheme's int8 and its blocks of 32):
  // per layer q 128x6 + k 64x6 + v 64x6 + o 128x6 + gate 256x6 + up 256x6 + down 128x12 = 6,912.
  const uint64_t saved = 3 * 6912 + 300 * 6;
  EXPECT_EQ(records[1].at("bytes").get<uint64_t>(), records[1].at("stored_bytes").get<uint64_t>() - saved);
  EXPECT_LT(records[1].at("bits_per_weight").get<double>(), records[0].at("bits_per_weight").get<double>());
  EXPECT_GT(records[1].at("weight_relative_error").get<double>(), records[0].at("weight_relative_error").get<double>());
}

}  // namespace
}  // namespace nanoinfer
