// `nanoinfer bench quant [-m DIR] -f FILE`: a quantization sweep in one table. Each level is
// quantized into a temporary directory with the library's quantizer (exactly what `nanoinfer
// quantize` writes), loaded from there, and compared position by position with the base model
// (as stored) over FILE: perplexity, Delta PPL, KL divergence, top-1 agreement (the protocol of
// `perplexity --kl-base`). Prints a markdown table and appends one JSON line per level.
#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>

#include "bench/bench_record.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/perplexity.h"
#include "nanoinfer/quantize_model.h"

namespace nanoinfer::cli {
namespace {

namespace fs = std::filesystem;

constexpr size_t kDefaultWindow = 512;
constexpr const char* kDefaultLevels = "base,int8,int4-rtn,int4-gptq";

struct QuantBenchFlags {
  ModelFlags model;
  std::string file;
  std::string levels = kDefaultLevels;
  std::string calib;
  int64_t calib_windows = 0;
  std::string output = "bench/results.jsonl";
};

// "base", or "<type>[-<method>]" (method default: gptq, as in `quantize`).
struct Level {
  std::string name;
  bool base = false;
  QuantizeOptions options;
};

// A level's name: "base", or "<type>[-<method>][:head=<type>][:group=<G>]": the suffixes set the
// type of the matrix that computes the logits (default: the quantization scheme's, int8) and
// the weights per scale of the level type's matrices (rtn only; default the block, 32).
std::vector<Level> parse_levels(const std::string& list) {
  constexpr const char* kForm =
      "base or int8|int4[-rtn|-imatrix|-gptq][:head=f32|bf16|int8|int4][:group=32|64|..|4096, rtn]";
  std::vector<Level> levels;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    Level level{name};
    if (name == "base") {
      level.base = true;
    } else {
      std::stringstream parts(name);
      std::string spec, suffix;
      std::getline(parts, spec, ':');
      while (std::getline(parts, suffix, ':')) {
        if (suffix.rfind("head=", 0) == 0) {
          level.options.head_type = weight_type_from_name(suffix.substr(5));
          if (!level.options.head_type) fail("--levels: '{}' is not {}", name, kForm);
        } else if (suffix.rfind("group=", 0) == 0) {
          const std::string g = suffix.substr(6);
          if (g.empty() || g.size() > 4 || g.find_first_not_of("0123456789") != std::string::npos) {
            fail("--levels: '{}' is not {}", name, kForm);
          }
          level.options.scale_group = std::stoul(g);
        } else {
          fail("--levels: '{}' is not {}", name, kForm);
        }
      }
      const size_t dash = spec.find('-');
      const std::string type = spec.substr(0, dash);
      const std::optional<WeightType> t = weight_type_from_name(type);
      if (!t || !weight_type_info(*t).scaled_blocks()) fail("--levels: '{}' is not {}", name, kForm);
      level.options.type = *t;
      if (dash != std::string::npos) {
        level.options.method = quant_method_from_name(spec.substr(dash + 1));
        if (!level.options.method) fail("--levels: '{}' is not {}", name, kForm);
      }
      const size_t block = weight_type_info(*t).block_elems, group = level.options.scale_group;
      if (group != 0 && (group % block != 0 || group > 4096)) {
        fail("--levels: '{}': the group must be a multiple of {} up to 4096", name, block);
      }
      if (group > block && level.options.method != QuantMethod::Rtn) {
        fail("--levels: '{}': groups beyond {} are measured with -rtn only", name, block);
      }
    }
    levels.push_back(level);
  }
  if (levels.empty()) fail("--levels is empty");
  return levels;
}

struct Row {
  std::string level, type, method, head = "-";
  uint64_t bytes = 0;
  double bits = 0, ppl = 0, delta = 0, kld = 0, top1 = 1, rel_error = 0;
};

void run(const QuantBenchFlags& f) {
  const std::vector<Level> levels = parse_levels(f.levels);
  if (f.calib_windows < 0) fail("--calib-windows must be >= 1 (or 0 = the default), got {}", f.calib_windows);
  bench::check_bench_results_path(f.output);
  const std::string text = read_file(f.file, kMaxTextFileBytes);
  OpenOptions base_options = open_options(f.model);
  base_options.model.weights.reset();  // the base is the model as stored
  const OpenedModel base = open_model(f.model.model_dir, base_options);
  const size_t ctx = f.model.context > 0 ? static_cast<size_t>(f.model.context)
                                         : std::min(kDefaultWindow, base.model.max_context());
  const std::vector<int32_t> tokens = base.tokenizer.encode(text);
  if (tokens.size() < 2) fail("'{}' has {} token(s); perplexity needs at least 2", f.file, tokens.size());
  // The quantized levels, removed with their directory.
  const ScratchDir scratch(fs::temp_directory_path(), "nanoinfer-bench-quant");
  uint64_t base_bytes = 0, base_params = 0;
  {
    // The base's size as stored, from the report `inspect` prints.
    const ModelReport report = inspect_model(f.model.model_dir);
    for (const InspectedTensor& t : report.tensors) base_bytes += t.bytes, base_params += t.params;
  }

  std::vector<Row> rows;
  std::optional<PerplexityResult> base_ppl;
  for (const Level& level : levels) {
    Row row;
    row.level = level.name;
    nlohmann::json record = bench::bench_context(base.model.threads(), base.model.isa());
    record["bench"] = "quant";
    record["model"] = base.dir.string();
    record["file"] = f.file;
    record["level"] = level.name;
    record["ctx"] = ctx;
    record["tokens"] = tokens.size();
    const auto start = std::chrono::steady_clock::now();
    if (level.base) {
      if (!base_ppl) base_ppl = perplexity(base.model, tokens, ctx);
      row.type = std::string(weight_type_name(base.model.weight_type()));
      row.method = "-";
      row.bytes = base_bytes;
      row.bits = 8.0 * static_cast<double>(base_bytes) / static_cast<double>(base_params);
      row.ppl = base_ppl->perplexity;
      record["ppl"] = row.ppl;
      record["ppl_base"] = row.ppl;
      record["delta_ppl_pct"] = 0.0;
      record["kld_mean"] = 0.0;
      record["top1_agreement"] = 1.0;
    } else {
      QuantizeOptions options = level.options;
      options.calibration = f.calib;
      options.calib_windows = static_cast<size_t>(f.calib_windows);
      options.threads = base.model.threads();  // -t as clamped (and warned about) once, by open_options
      fmt::print(stderr, "bench quant: {}: quantizing\n", level.name);
      const QuantizeResult q = quantize_model(f.model.model_dir, scratch.path() / level.name, options);
      OpenOptions quant_options = base_options;
      const OpenedModel m = open_model((scratch.path() / level.name).string(), quant_options);
      fmt::print(stderr, "bench quant: {}: comparing over {} tokens\n", level.name, tokens.size());
      const KlDivergenceResult r = kl_divergence(m.model, base.model, tokens, ctx);
      if (!base_ppl) base_ppl = r.base;
      row.type = std::string(weight_type_name(q.type));
      row.method = std::string(quant_method_name(q.method));
      row.head = std::string(weight_type_name(q.head_type));
      // The size a format with this group would have: the repeated scales of a simulated
      // group (quantize_model's scale_group) are not counted.
      row.bytes = q.tensor_bytes - q.repeated_scale_bytes;
      row.bits = 8.0 * static_cast<double>(row.bytes) / static_cast<double>(q.params);
      row.ppl = r.model.perplexity;
      row.delta = r.delta_ppl_pct;
      row.kld = r.kld_mean;
      row.top1 = r.top1_agreement;
      row.rel_error = q.weight_relative_error;
      record["weight_type"] = row.type;
      record["method"] = row.method;
      record["head_type"] = row.head;
      // Weights per scale in the level type's matrices. Q8_0 / Q4_0 blocks hold 32; a larger
      // group is simulated (its blocks share the group's scale), so the values are that
      // format's and `bytes` is its size, while the file written (`stored_bytes`) repeats the
      // scale in every block.
      record["group_size"] = q.scale_group;
      record["group_simulated"] = q.repeated_scale_bytes > 0;
      record["stored_bytes"] = q.tensor_bytes;
      record["file_bytes"] = q.file_bytes;
      record["matrix_bits_per_weight"] =
          8.0 * static_cast<double>(q.matrix_bytes - q.repeated_scale_bytes) / static_cast<double>(q.matrix_params);
      record["calib_tokens"] = q.calib_tokens;
      record["quantize_seconds"] = q.seconds;
      record["quantize_threads"] = q.threads;
      record["ppl"] = r.model.perplexity;
      record["ppl_stderr"] = r.model.perplexity_stderr;
      record["ppl_base"] = r.base.perplexity;
      record["delta_ppl_pct"] = r.delta_ppl_pct;
      record["delta_ppl_pct_stderr"] = r.delta_ppl_pct_stderr;
      record["kld_mean"] = r.kld_mean;
      record["kld_stderr"] = r.kld_stderr;
      record["kld_p99"] = r.kld_p99;
      record["kld_max"] = r.kld_max;
      record["top1_agreement"] = r.top1_agreement;
      record["top1_stderr"] = r.top1_stderr;
      record["scored"] = r.scored;
    }
    record["bytes"] = row.bytes;
    record["bits_per_weight"] = row.bits;
    record["weight_relative_error"] = row.rel_error;
    record["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bench::append_bench_record(record, f.output);
    rows.push_back(row);
  }

  fmt::print("bench quant: {} over {} ({} tokens, windows of {})\n\n", base.dir.string(), f.file, tokens.size(), ctx);
  fmt::print("| level | type | method | logits matrix | bytes | bits/weight | PPL | ΔPPL % | KLD mean | top-1 % | weight rel. error |\n");
  fmt::print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    fmt::print("| {} | {} | {} | {} | {} | {:.3f} | {:.4f} | {:+.3f} | {:.3e} | {:.2f} | {:.4f} |\n", r.level, r.type,
               r.method, r.head, r.bytes, r.bits, r.ppl, r.delta, r.kld, 100.0 * r.top1, r.rel_error);
  }
  fmt::print("\nappended {} record(s) to {}\n", rows.size(), f.output);
}

const bool registered_bench_quant = register_command({
    "bench",
    "quant",
    "Quantization sweep: size, bits per weight, PPL, KL divergence and top-1 against the base, per level",
    [](CLI::App& sub) {
      auto f = std::make_shared<QuantBenchFlags>();
      add_model_flags(sub, f->model);
      sub.add_option("-f,--file", f->file, "Text file to score (e.g. data/default-model/heldout.txt)")->required();
      sub.add_option("--levels", f->levels,
                     "Comma-separated levels: base, or int8|int4 with -rtn, -imatrix or -gptq (default method gptq), "
                     "optionally :head=TYPE for the logits matrix (f32, bf16, int8, int4; default int8), e.g. "
                     "int4-rtn:head=int4; and :group=G for G weights per scale (a multiple of 32, -rtn only: the "
                     "blocks of a group share its scale, and the size reported is that of a format with groups of G), "
                     "e.g. int4-rtn:group=128")
          ->capture_default_str();
      sub.add_option("--calib", f->calib, "Calibration text (default: the training part of data/tinyshakespeare.txt)");
      sub.add_option("--calib-windows", f->calib_windows, "Calibration windows (0 = quantize's default: 64, fewer for a large model)")->capture_default_str();
      sub.add_option("-o,--output", f->output, "JSON-lines file the records are appended to")->capture_default_str();
      sub.callback([f] { run(*f); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
