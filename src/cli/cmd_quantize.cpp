// `nanoinfer quantize -m DIR --type int8|int4|q3_k [--method rtn|imatrix|gptq] [--calib FILE] --out DIR2`:
// a quantized copy of a model directory (nanoinfer/quantize_model.h); with `--format gguf --out
// FILE.gguf` the same weights as one GGUF file (quantize_to_gguf in nanoinfer/gguf_export.h), and
// `--type f32|bf16 --format gguf` converts without quantizing (export_gguf). Progress on stderr
// when it is a terminal; SIGINT, SIGTERM or SIGHUP stops the run at the next progress step and
// removes the partial output (a second signal removes it at once and ends the process); the
// summary goes to stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/gguf_export.h"
#include "nanoinfer/interrupt.h"
#include "nanoinfer/quantize_model.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::cli {
namespace {

struct QuantizeFlags {
  std::string model_dir;
  std::string type;
  std::string method;
  std::string head_type;
  std::string calib;
  int64_t calib_windows = 0;
  int64_t calib_ctx = 0;
  std::optional<int> threads;  // unset: NANOINFER_THREADS, else 0
  std::string out;
  std::string format = "dir";
  const CLI::Option* calib_windows_flag = nullptr;
  const CLI::Option* calib_ctx_flag = nullptr;
};

// The flag combinations, checked before anything is read or written.
void check_format(const QuantizeFlags& f, WeightType type) {
  if (f.format != "dir" && f.format != "gguf") fail("--format must be dir or gguf, got '{}'", f.format);
  const bool gguf = f.format == "gguf";
  const bool named_gguf = std::filesystem::path(f.out).extension() == ".gguf";
  if (gguf && !named_gguf) fail("--out must name a .gguf file with --format gguf, got '{}'", f.out);
  if (!gguf && named_gguf) {
    fail("--out '{}' ends in .gguf but --format is dir (add --format gguf to write one GGUF file)", f.out);
  }
  if (weight_type_info(type).quantized) return;
  if (!gguf) {
    fail("--type {} writes a GGUF file only (add --format gguf); a model directory is already float",
         weight_type_name(type));
  }
  // A float export quantizes nothing: the quantizer's flags would be silently ignored.
  const std::pair<bool, const char*> quantizer_flags[] = {
      {!f.method.empty(), "--method"},
      {!f.calib.empty(), "--calib"},
      {!f.head_type.empty(), "--head-type"},
      {f.calib_windows_flag != nullptr && f.calib_windows_flag->count() > 0, "--calib-windows"},
      {f.calib_ctx_flag != nullptr && f.calib_ctx_flag->count() > 0, "--calib-ctx"}};
  for (const auto& [given, flag] : quantizer_flags) {
    if (given) {
      fail("{} applies to --type {} only, not {}", flag, weight_type_names(WeightTypeKind::Scaled),
           weight_type_name(type));
    }
  }
}

QuantizeOptions options_from(const QuantizeFlags& f) {
  QuantizeOptions o;
  const std::optional<WeightType> type = weight_type_from_name(f.type);
  if (!type || (weight_type_info(*type).quantized && !weight_type_info(*type).quantizer_type())) {
    fail("--type must be {} (or {} with --format gguf), got '{}'", weight_type_names(WeightTypeKind::Scaled),
         weight_type_names(WeightTypeKind::Float), f.type);
  }
  check_format(f, *type);
  o.type = *type;
  if (!f.method.empty()) {
    o.method = quant_method_from_name(f.method);
    if (!o.method) fail("--method must be rtn, imatrix or gptq, got '{}'", f.method);
  }
  if (!f.head_type.empty()) {
    o.head_type = weight_type_from_name(f.head_type);
    if (!o.head_type)
      fail("--head-type must be {}, got '{}'", weight_type_names(WeightTypeKind::Writable), f.head_type);
  }
  if (f.calib_windows < 0) fail("--calib-windows must be >= 1 (or 0 = the default), got {}", f.calib_windows);
  require_non_negative(f.calib_ctx, "--calib-ctx");
  o.threads = ThreadPool::clamp_threads(resolve_threads(f.threads));  // warns when it clamps, as every command does
  o.calibration = f.calib;
  o.calib_windows = static_cast<size_t>(f.calib_windows);
  o.calib_ctx = static_cast<size_t>(f.calib_ctx);
  return o;
}

void run(const QuantizeFlags& f) {
  const QuantizeOptions options = options_from(f);
  const bool gguf = f.format == "gguf";
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const InterruptScope interrupt_scope;
  // On a terminal: one line, redrawn when it changes (at most once a second while a stage's
  // count stays), with the time left in the stage at its pace so far.
  std::string shown;
  std::string_view stage;
  auto stage_start = std::chrono::steady_clock::now(), drawn = stage_start;
  const auto progress = [&](const QuantizeProgress& p) {
    if (InterruptScope::interrupted() != 0) fail("quantize: interrupted; {} was not written", f.out);
    if (!tty) return;
    const auto now = std::chrono::steady_clock::now();
    if (p.stage != stage) {
      stage = p.stage;
      stage_start = now;
    }
    std::string left;
    const double elapsed = std::chrono::duration<double>(now - stage_start).count();
    if (p.done > 0 && p.done < p.total && elapsed >= 2) {
      left = fmt::format(", about {:.0f} s left",
                         elapsed / static_cast<double>(p.done) * static_cast<double>(p.total - p.done));
    }
    std::string line;
    if (p.stage == "calibrate") {
      line = fmt::format("quantize: calibrating, window {}/{}", p.done, p.total);
    } else if (p.stage == "factor") {
      line = fmt::format("quantize: factoring the inputs' Gram matrices, {}/{}", p.done, p.total);
    } else if (p.stage == "gguf") {
      line = fmt::format("quantize: writing {}, {:.1f} / {:.1f} MiB", f.out, static_cast<double>(p.done) / (1 << 20),
                         static_cast<double>(p.total) / (1 << 20));
    } else {
      line = fmt::format("quantize: writing, {:.1f} / {:.1f} MiB", static_cast<double>(p.done) / (1 << 20),
                         static_cast<double>(p.total) / (1 << 20));
    }
    if (line == shown.substr(0, line.size()) && now - drawn < std::chrono::seconds(1)) return;
    line += left;
    if (line == shown) return;
    shown = line;
    drawn = now;
    fmt::print(stderr, "\r{}\x1b[K", line);
    std::fflush(stderr);
  };
  const bool quantized = weight_type_info(options.type).quantized;
  QuantizeResult r;
  const auto start = std::chrono::steady_clock::now();
  try {
    if (!quantized) {
      export_gguf(f.model_dir, f.out, options.type, [&](uint64_t done, uint64_t total) {
        progress({"gguf", done, total});
      });
    } else if (gguf) {
      r = quantize_to_gguf(f.model_dir, f.out, options, progress);
    } else {
      r = quantize_model(f.model_dir, f.out, options, progress);
    }
  } catch (...) {
    if (tty && !shown.empty()) fmt::print(stderr, "\n");
    throw;
  }
  if (tty && !shown.empty()) fmt::print(stderr, "\n");

  if (!quantized) {
    const auto bytes = std::filesystem::file_size(f.out);
    fmt::print("wrote {}: {} (converted, not quantized; norms and biases f32)\n", f.out,
               weight_type_name(options.type));
    fmt::print("  GGUF {} bytes ({})\n", bytes, format_bytes(static_cast<double>(bytes)));
    fmt::print("  {:.2f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return;
  }
  fmt::print("wrote {}: {} ({}; logits matrix {})\n", r.out.string(), weight_type_name(r.type),
             quant_method_name(r.method), weight_type_name(r.head_type));
  fmt::print("  {} {} bytes ({}), {:.3f} bits per weight overall, {:.3f} over the matrices\n",
             gguf ? "GGUF" : "model.safetensors", r.file_bytes, format_bytes(static_cast<double>(r.file_bytes)),
             r.bits_per_weight(), r.matrix_bits_per_weight());
  fmt::print("  weight relative error {:.5f}\n", r.weight_relative_error);
  if (r.calib_tokens > 0) fmt::print("  calibrated on {} tokens of {}\n", r.calib_tokens, r.calib_file.string());
  fmt::print("  {:.2f} s on {} threads\n", r.seconds, r.threads);
}

void setup_quantize(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  app.add_option("-m,--model", f->model_dir,
                 "Float model directory (default: the model built into this binary, data/default-model)");
  app.add_option("--type", f->type,
                 "Weight type: int8 (Q8_0 blocks), int4 (Q4_0 blocks) or q3_k (Q3_K super-blocks; int4 for "
                 "rows that are not whole super-blocks of 256); with --format gguf also f32 or bf16 "
                 "(a plain conversion, nothing quantized)")
      ->required();
  app.add_option("--method", f->method,
                 "rtn (round to nearest), imatrix (importance-weighted scale search on calibration "
                 "activations) or gptq (imatrix scales + error compensation over the columns); default: gptq");
  app.add_option("--calib", f->calib,
                 "Calibration text for imatrix and gptq (default: the training part of data/tinyshakespeare.txt, built "
                 "into the binary)");
  f->calib_windows_flag =
      app.add_option("--calib-windows", f->calib_windows,
                     "Calibration windows, from the start of the text (0 = 64, fewer for a large model: its f32 "
                     "forward over them kept to ~2e12 multiply-adds, at least 8; Qwen2.5-0.5B: 8)")
          ->capture_default_str();
  f->calib_ctx_flag =
      app.add_option("--calib-ctx", f->calib_ctx, "Tokens per calibration window (0 = min(512, the model's context))");
  app.add_option("--head-type", f->head_type,
                 "Type of the matrix computing the logits (tied embedding or lm_head): " +
                     weight_type_names(WeightTypeKind::Writable) +
                     " (default: int8 for every type; see docs/QUANTIZATION.md)");
  app.add_option("-t,--threads", f->threads, kThreadsHelp);
  app.add_option("--format", f->format,
                 "dir: a model directory (config.json, model.safetensors, tokenizer); gguf: one GGUF file that "
                 "llama.cpp and nanoinfer -m load, holding the same weights")
      ->capture_default_str();
  app.add_option("--out", f->out,
                 "Output: a model directory (must not exist, or be empty), or with --format gguf a new FILE.gguf")
      ->required();
  app.callback([f] { run(*f); });
}

const bool registered_quantize = register_command(
    {"", "quantize", "Write an int8, int4 or q3_k copy of a model (a directory or GGUF), or a GGUF f32/bf16 conversion",
     setup_quantize});

}  // namespace
}  // namespace nanoinfer::cli
