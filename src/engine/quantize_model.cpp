// quantize_model: a float model directory in, a quantized one out (nanoinfer/quantize_model.h).
//
//   check the input (float, finite) and the target (absent or an empty directory)
//   -> make a temporary directory beside the target
//   -> imatrix, gptq: load the model (its weights as stored) and calibrate (quant/calibrate.h)
//   -> write model.safetensors (quant/quantize.h), config.json with quantization_config, copy
//      the tokenizer and generation files
//   -> rename the temporary directory to the target.
// Any error (or an exception thrown by the progress callback) removes the temporary directory.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/json_object.h"
#include "engine/default_model.h"
#include "engine/model_pooling.h"
#include "engine/model_source.h"
#include "io/safetensors.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/quantize_model.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/tokenizer.h"
#include "quant/calibrate.h"
#include "quant/gptq.h"
#include "quant/quantize.h"

namespace nanoinfer {

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::Rtn:
      return "rtn";
    case QuantMethod::Imatrix:
      return "imatrix";
    case QuantMethod::Gptq:
      return "gptq";
  }
  return "?";
}

std::optional<QuantMethod> quant_method_from_name(std::string_view name) {
  for (QuantMethod m : {QuantMethod::Rtn, QuantMethod::Imatrix, QuantMethod::Gptq})
    if (quant_method_name(m) == name) return m;
  return std::nullopt;
}

namespace {

// The default calibration text: the part of data/tinyshakespeare.txt (built into the binary
// beside the default model, engine/default_model.h) that the default model was trained on — its
// first 90% of characters, cut forward to the next line start, as tools/train/train_tokenizer.py
// splits it. Never any of the held-out part.
std::string default_calibration_text(std::filesystem::path* source) {
  const std::span<const std::byte> bytes = embedded_calibration_text();
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  // 90% of the characters (code points, as Python counts them), then forward to a line start.
  size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xc0) != 0x80;
  const size_t target = chars * 9 / 10;
  size_t cut = 0;
  for (size_t seen = 0; cut < text.size(); ++cut) {
    if ((static_cast<unsigned char>(text[cut]) & 0xc0) != 0x80 && seen++ == target) break;
  }
  const size_t newline = text.find('\n', cut);
  text.resize(newline == std::string::npos ? text.size() : newline + 1);
  if (source != nullptr) *source = embedded_model_label().parent_path() / "tinyshakespeare.txt";
  return text;
}

namespace fs = std::filesystem;

constexpr size_t kDefaultCalibCtx = 512;

// The default number of calibration windows: 64, fewer for a large model, so that the
// forward over them stays within ~2e12 multiply-adds (a minute or so on two cores) - at least
// 8. The default model calibrates on 64 windows; Qwen2.5-0.5B (4.9e8 matrix weights) at 512
// tokens a window on 8. On the default model 16 windows instead of 64 raise int4 gptq's KL
// divergence by ~10% and 8 by ~13% (docs/QUANTIZATION.md), so more is better where there is
// time for it: --calib-windows.
constexpr double kCalibBudget = 2e12;
size_t default_calib_windows(const ModelConfig& cfg, size_t ctx) {
  double params = 0;
  for (const TensorSpec& spec : tensor_manifest(cfg))
    if (spec.is_matrix()) params += static_cast<double>(spec.shape[0]) * static_cast<double>(spec.shape[1]);
  const double fit = kCalibBudget / std::max(1.0, params * static_cast<double>(ctx));
  return static_cast<size_t>(std::clamp(fit, 8.0, 64.0));
}

// The directory the output is built in, beside the target: refused when the target exists
// (and is not an empty directory), removed unless committed.
ScratchDir staging_dir(const fs::path& target) {
  std::error_code ec;
  if (fs::exists(target, ec) && !(fs::is_directory(target, ec) && fs::is_empty(target, ec))) {
    fail("{}: already exists; quantize writes a new model directory (remove it or choose another --out)",
         target.string());
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) fail("{}: the directory {} does not exist", target.string(), parent.string());
  return ScratchDir::beside(target);
}

// The source's config.json as it is (it is copied into the output).
nlohmann::ordered_json read_config_json(const ModelSource& src) {
  const std::optional<std::string> text = src.read_text("config.json", kMaxConfigFileBytes);
  if (!text) fail("{}: not found", src.files.config.string());
  nlohmann::ordered_json j = parse_ordered_json(*text, src.files.config.string());
  if (!j.is_object()) fail("{}: not a JSON object", src.files.config.string());
  return j;
}

// The files copied beside the weights, checked as the commands that load the output will check
// them (a generation_config.json nested 100,000 deep once made an output `generate` refused).
void check_copied_files(const ModelSource& src) {
  if (const auto text = src.read_text("generation_config.json", kMaxConfigFileBytes)) {
    GenerationConfig::parse(*text, src.path_of("generation_config.json").string());
  }
  if (src.has("tokenizer.json")) {
    load_tokenizer(src);  // tokenizer.json with its tokenizer_config.json
  } else if (const auto text = src.read_text("tokenizer_config.json", kMaxConfigFileBytes)) {
    parse_json_object(*text, src.path_of("tokenizer_config.json").string());
  }
}

void refuse_quantized(const nlohmann::ordered_json& config, const fs::path& config_path, const SafetensorsFile& in) {
  if (config.contains("quantization_config")) {
    fail("{}: the model is already quantized (config.json has a quantization_config); quantize its float original",
         config_path.string());
  }
  if (!declared_block_types(in.layout(), in.path().string()).empty()) {
    fail("{}: the model is already quantized (it declares block tensors); quantize its float original",
         in.path().string());
  }
  for (const TensorInfo& t : in.tensors()) {
    if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16) {
      fail("{}: tensor '{}' is {}; quantize reads a float model (F32, BF16 or F16)", in.path().string(), t.name,
           dtype_name(t.dtype));
    }
  }
}

struct CalibrationRun {
  Calibration cal;
  fs::path file;
};

// The tokens of the calibration text that the windows use (and a few more), reading only as
// much of the file as they need: a prefix cut at a line start, doubled until it holds enough
// tokens. Tokens well before the cut are those of the whole text; the margin keeps the cut's
// neighbourhood out of the windows.
std::vector<int32_t> calibration_tokens(const fs::path& file, const Tokenizer& tokenizer, size_t needed) {
  constexpr size_t kMargin = 64;
  // A token is rarely more than 16 bytes of text; no file this reads holds more than
  // kMaxTextFileBytes tokens, so a larger count (many windows) asks for all of it.
  uint64_t want = needed >= kMaxTextFileBytes
                      ? kMaxTextFileBytes
                      : std::max<uint64_t>(uint64_t{1} << 16, uint64_t{16} * (needed + kMargin));
  for (;;) {
    want = std::min(want, kMaxTextFileBytes);
    std::string text = read_file_head(file, want);
    if (text.size() < want) return tokenizer.encode(text);  // the whole file
    const size_t line_start = text.rfind('\n');
    if (line_start != std::string::npos) {
      text.resize(line_start + 1);
      std::vector<int32_t> tokens = tokenizer.encode(text);
      if (tokens.size() >= needed + kMargin) {
        tokens.resize(needed);
        return tokens;
      }
    }
    if (want == kMaxTextFileBytes) {
      fail("{}: the first {} bytes hold too few whole lines for {} calibration tokens", file.string(),
           kMaxTextFileBytes, needed);
    }
    want *= 2;
  }
}

CalibrationRun run_calibration(const ModelSource& src, const QuantizeOptions& o, const QuantizeProgressFn& progress) {
  const ModelConfig& cfg = src.config;
  CalibrationRun run;
  const size_t limit = static_cast<size_t>(cfg.max_position_embeddings);
  const size_t ctx = o.calib_ctx > 0 ? o.calib_ctx : std::min(kDefaultCalibCtx, limit);
  if (ctx > limit) fail("--calib-ctx {} exceeds the model's limit of {} positions", ctx, limit);
  const size_t windows = o.calib_windows > 0 ? o.calib_windows : default_calib_windows(cfg, ctx);
  const Tokenizer tokenizer = load_tokenizer(src);
  std::vector<int32_t> tokens;
  if (o.calibration.empty()) {
    tokens = tokenizer.encode(default_calibration_text(&run.file));
  } else {
    run.file = o.calibration;
    try {
      size_t needed = 0;
      if (__builtin_mul_overflow(ctx, windows, &needed)) needed = SIZE_MAX - 64;
      tokens = calibration_tokens(o.calibration, tokenizer, needed);
    } catch (const Error& e) {
      fail("cannot read calibration text: {}", e.what());
    }
  }
  // The weights as stored: a bf16 file computes in f32 from its exact bf16 values, as the f32
  // copy would, without a second, f32 copy of the model in memory (2 GB for Qwen2.5-0.5B).
  // Except on avx512-bf16, whose bf16 product rounds the activations to bf16: calibration
  // takes avx512-vnni there, which multiplies them as they are (bit for bit its other entries).
  ModelOptions mo;
  mo.threads = o.threads;
  if (best_isa() == Isa::Avx512Bf16) mo.isa = Isa::Avx512Vnni;
  mo.max_context = ctx;
  const Model model = load_model(src, mo);  // from the file already open
  const bool gram = o.method.value_or(QuantMethod::Gptq) == QuantMethod::Gptq;
  run.cal = calibrate(model, tokens, ctx, windows, gram, o.threads, [&](size_t done, size_t total) {
    if (progress) progress({"calibrate", done, total});
  });
  return run;
}

}  // namespace

QuantizeResult quantize_model(std::string_view model_path, const fs::path& out_arg, const QuantizeOptions& options,
                              const QuantizeProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (out_arg.empty()) fail("quantize: --out is empty; name the model directory to write");
  // "newdir/" names newdir: its parent is the current directory, not newdir itself.
  const fs::path out_dir = out_arg.has_filename() ? out_arg : out_arg.parent_path();
  // The one clamp every command's -t goes through (the CLI has warned about it already).
  QuantizeOptions o = options;
  std::string clamped;
  o.threads = ThreadPool::clamp_threads(options.threads, &clamped);
  if (!weight_type_info(o.type).quantizer_type()) {
    fail("quantize: the type must be {}, got {}", weight_type_names(WeightTypeKind::Scaled), weight_type_name(o.type));
  }
  if (o.head_type && weight_type_info(*o.head_type).quantized && !weight_type_info(*o.head_type).quantizer_type()) {
    fail("quantize: the logits matrix's type must be {}, got {}", weight_type_names(WeightTypeKind::Writable),
         weight_type_name(*o.head_type));
  }
  QuantizeResult result;
  result.out = out_dir;
  result.type = o.type;
  result.method = o.method.value_or(QuantMethod::Gptq);
  const size_t block = weight_type_info(o.type).block_elems;
  if (o.scale_group != 0 && (o.scale_group % block != 0 || o.scale_group > 4096)) {
    fail("quantize: a scale group of {} weights is not a multiple of {}'s block of {} (up to 4096)", o.scale_group,
         weight_type_name(o.type), block);
  }
  if (o.scale_group > block && result.method != QuantMethod::Rtn) {
    fail("quantize: scale groups beyond the block ({}) are for --method rtn, not {}", block,
         quant_method_name(result.method));
  }
  result.scale_group = o.scale_group == 0 ? block : o.scale_group;
  result.threads = o.threads;

  const std::unique_ptr<const ModelSource> opened = open_model_directory(model_path);
  const ModelFiles& files = opened->files;
  const ModelConfig& cfg = opened->config;
  const SafetensorsFile& in = *opened->safetensors;
  nlohmann::ordered_json config_json = read_config_json(*opened);  // copied into the output as it is
  refuse_quantized(config_json, files.config, in);
  const std::vector<TensorSpec> manifest = stored_manifest(cfg, in.tensors());
  if (const auto problems = manifest_problems(manifest, in.tensors()); !problems.empty()) {
    fail("{}: {}", files.weights.string(), problems.front());
  }
  if (result.method != QuantMethod::Rtn && !opened->has("tokenizer.json")) {
    fail("{}: not found; calibration ({}) tokenizes text (use --method rtn for a model without a tokenizer)",
         opened->path_of("tokenizer.json").string(), quant_method_name(result.method));
  }
  check_copied_files(*opened);
  if (result.method != QuantMethod::Rtn && !o.calibration.empty()) {
    try {  // a FIFO, a device or a directory is refused before any work, never opened
      require_regular_file(o.calibration);
    } catch (const Error& e) {
      fail("cannot read calibration text: {}", e.what());
    }
  }
  ScratchDir staging = staging_dir(out_dir);
  // Errors name --out, never the hidden directory the output is built in.
  try {
    CalibrationRun calib;
    if (result.method != QuantMethod::Rtn) {
      {
        ThreadPool pool(o.threads);
        check_finite_weights(in, cfg, pool);  // before spending time on calibration
      }
      calib = run_calibration(*opened, o, progress);
      result.calib_tokens = calib.cal.tokens;
      result.calib_file = calib.file;
    }

    // GPTQ's factors, one per distinct input (q, k and v share theirs, as do gate and up).
    std::map<std::pair<std::string, int>, std::shared_ptr<const GptqFactor>> factors;
    if (result.method == QuantMethod::Gptq) {
      ThreadPool pool(o.threads);
      size_t done = 0;
      for (auto& [key, gram] : calib.cal.gram) {
        if (progress) progress({"factor", done, calib.cal.gram.size()});
        const size_t dim = calib.cal.mean_sq.at(key).size();
        const size_t total = calib.cal.gram.size();
        factors[key] = std::make_shared<const GptqFactor>(gptq_factor(gram.data(), dim, pool, calib.cal.isa, [&] {
          if (progress) progress({"factor", done, total});
        }));
        std::vector<float>().swap(gram);  // the Gram matrix is no longer needed
        ++done;
      }
    }

    // The plan: every matrix's type by the scheme, the importances of its input.
    std::map<std::string, MatrixQuantization> plan;
    for (const TensorSpec& spec : manifest) {
      if (!spec.is_matrix()) continue;
      MatrixQuantization& m = plan[spec.name];
      m.type = scheme_type(spec, o.type, cfg.tie_word_embeddings, o.head_type);
      if (is_logits_matrix(spec, cfg.tie_word_embeddings)) result.head_type = m.type;
      if (!weight_type_info(m.type).quantized) continue;
      if (m.type == o.type) m.scale_group = result.scale_group;
      // A matrix without calibration inputs (an untied embedding) gets the uniform search.
      m.search = result.method != QuantMethod::Rtn;
      if (const auto tap = input_tap(spec, cfg.tie_word_embeddings); tap && m.search) {
        const auto it = calib.cal.mean_sq.find(*tap);
        if (it == calib.cal.mean_sq.end()) fail("calibration recorded no inputs for '{}'", spec.name);
        m.importance = it->second;
        if (const auto f = factors.find(*tap); f != factors.end()) m.gptq_factor = f->second;
      }
    }

    nlohmann::ordered_json qc = {{"quant_method", "nanoinfer"},
                                 {"weight_type", std::string(weight_type_name(o.type))},
                                 {"block_format", std::string(weight_type_info(o.type).gguf_name)},
                                 {"block_size", weight_type_info(o.type).block_elems},
                                 {"method", std::string(quant_method_name(result.method))},
                                 {"head_type", std::string(weight_type_name(result.head_type))}};
    if (result.scale_group != block) qc["scale_group"] = result.scale_group;  // blocks of one group share a scale
    if (result.method != QuantMethod::Rtn) {
      qc["calibration"] = {{"file", calib.file.filename().string()},
                           {"tokens", calib.cal.tokens},
                           {"windows", calib.cal.windows},
                           {"ctx", calib.cal.ctx}};
    }
    const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"nanoinfer.quantization", qc.dump()}};

    QuantizedFileStats written;
    {
      ThreadPool pool(o.threads);
      written = write_quantized_weights(in, cfg, plan, metadata, staging.path() / "model.safetensors", pool,
                                        [&](uint64_t done, uint64_t total) {
                                          if (progress) progress({"write", done, total});
                                        });
    }
    result.matrix_params = written.matrix_params;
    result.matrix_bytes = written.matrix_bytes;
    result.params = written.params;
    result.tensor_bytes = written.tensor_bytes;
    result.repeated_scale_bytes = written.repeated_scale_bytes;
    result.weight_relative_error = written.weight_sq > 0 ? std::sqrt(written.error_sq / written.weight_sq) : 0.0;
    result.file_bytes = fs::file_size(staging.path() / "model.safetensors");

    qc["bits_per_weight"] = result.bits_per_weight();
    config_json["quantization_config"] = qc;
    write_file_atomically(staging.path() / "config.json", config_json.dump(2) + "\n");
    // Through the atomic writer like every output: a failure (a full disk) names the output and
    // the reason, and nothing half-copied stays.
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
      const uint64_t cap = std::string_view(name) == "tokenizer.json" ? kMaxTokenizerFileBytes : kMaxConfigFileBytes;
      if (const auto text = opened->read_text(name, cap)) write_file_atomically(staging.path() / name, *text);
    }
    for (const std::string& name : pooling_files(*opened)) {  // an embedding model keeps its pooling
      fs::create_directories((staging.path() / name).parent_path());
      write_file_atomically(staging.path() / name, *opened->read_text(name, kMaxConfigFileBytes));
    }
    staging.commit(out_dir);
  } catch (const Error& e) {
    std::string message = e.what();
    const std::string hidden = staging.path().string();
    for (size_t at = message.find(hidden); at != std::string::npos; at = message.find(hidden, at)) {
      message.replace(at, hidden.size(), out_dir.string());
      at += out_dir.string().size();
    }
    throw Error(message);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace nanoinfer
