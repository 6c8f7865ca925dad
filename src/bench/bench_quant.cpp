// bench quant's sweep (src/bench/bench_quant.h).
#include "bench_quant.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/perplexity.h"

namespace nanoinfer::bench {
namespace {

namespace fs = std::filesystem;

constexpr size_t kDefaultWindow = 512;
constexpr const char* kLevelForm =
    "base or int8|int4|q3_k[-rtn|-imatrix|-gptq][:head=f32|bf16|int8|int4][:group=32|64|..|4096, rtn]";

[[noreturn]] void bad_level(const std::string& name) {
  fail("--levels: '{}' is not {}", name, kLevelForm);
}

// A ":head=TYPE" or ":group=G" suffix of level `name`.
void parse_level_suffix(const std::string& name, const std::string& suffix, QuantLevel& level) {
  if (suffix.rfind("head=", 0) == 0) {
    level.options.head_type = weight_type_from_name(suffix.substr(5));
    if (!level.options.head_type) bad_level(name);
  } else if (suffix.rfind("group=", 0) == 0) {
    const std::string g = suffix.substr(6);
    if (g.empty() || g.size() > 4 || g.find_first_not_of("0123456789") != std::string::npos) {
      bad_level(name);
    }
    level.options.scale_group = std::stoul(g);
  } else {
    bad_level(name);
  }
}

QuantLevel parse_level(const std::string& name) {
  QuantLevel level{name};
  if (name == "base") {
    level.base = true;
    return level;
  }
  std::stringstream parts(name);
  std::string spec, suffix;
  std::getline(parts, spec, ':');
  while (std::getline(parts, suffix, ':')) parse_level_suffix(name, suffix, level);
  const size_t dash = spec.find('-');
  const std::string type = spec.substr(0, dash);
  const std::optional<WeightType> t = weight_type_from_name(type);
  if (!t || !weight_type_info(*t).quantizer_type()) bad_level(name);
  level.options.type = *t;
  if (dash != std::string::npos) {
    level.options.method = quant_method_from_name(spec.substr(dash + 1));
    if (!level.options.method) bad_level(name);
  }
  const size_t block = weight_type_info(*t).block_elems, group = level.options.scale_group;
  if (group != 0 && (group % block != 0 || group > 4096)) {
    fail("--levels: '{}': the group must be a multiple of {} up to 4096", name, block);
  }
  if (group > block && level.options.method != QuantMethod::Rtn) {
    fail("--levels: '{}': groups beyond {} are measured with -rtn only", name, block);
  }
  return level;
}

// What every level of one sweep shares.
struct SweepState {
  const QuantSweepInput& input;
  const OpenedModel& base;
  OpenOptions quant_options;  // the quantized levels open as the base does
  std::vector<int32_t> tokens;
  size_t ctx = 0;
  uint64_t base_bytes = 0, base_params = 0;  // the base as stored
  std::optional<PerplexityResult> base_ppl;  // computed once, by whichever level needs it first
  ScratchDir scratch;                        // the quantized levels, removed with it
};

void measure_base(SweepState& s, QuantRow& row, nlohmann::json& record) {
  if (!s.base_ppl) s.base_ppl = perplexity(s.base.model, s.tokens, s.ctx);
  row.type = std::string(weight_type_name(s.base.model.weight_type()));
  row.method = "-";
  row.bytes = s.base_bytes;
  row.bits = 8.0 * static_cast<double>(s.base_bytes) / static_cast<double>(s.base_params);
  row.ppl = s.base_ppl->perplexity;
  record.update(
      {{"ppl", row.ppl}, {"ppl_base", row.ppl}, {"delta_ppl_pct", 0.0}, {"kld_mean", 0.0}, {"top1_agreement", 1.0}});
}

// The quantizer's side of a level's record.
nlohmann::json quantize_fields(const QuantizeResult& q, const QuantRow& row) {
  const uint64_t matrix_bytes = q.matrix_bytes - q.repeated_scale_bytes;
  // Weights per scale in the level type's matrices. Q8_0 / Q4_0 blocks hold 32; a larger group
  // is simulated (its blocks share the group's scale), so the values are that format's and
  // `bytes` is its size, while the file written (`stored_bytes`) repeats the scale in every
  // block.
  return {{"weight_type", row.type},
          {"method", row.method},
          {"head_type", row.head},
          {"group_size", q.scale_group},
          {"group_simulated", q.repeated_scale_bytes > 0},
          {"stored_bytes", q.tensor_bytes},
          {"file_bytes", q.file_bytes},
          {"matrix_bits_per_weight", 8.0 * static_cast<double>(matrix_bytes) / static_cast<double>(q.matrix_params)},
          {"calib_tokens", q.calib_tokens},
          {"quantize_seconds", q.seconds},
          {"quantize_threads", q.threads}};
}

// The comparison's side: the level against the base over the text.
nlohmann::json comparison_fields(const KlDivergenceResult& r) {
  return {{"ppl", r.model.perplexity},
          {"ppl_stderr", r.model.perplexity_stderr},
          {"ppl_base", r.base.perplexity},
          {"delta_ppl_pct", r.delta_ppl_pct},
          {"delta_ppl_pct_stderr", r.delta_ppl_pct_stderr},
          {"kld_mean", r.kld_mean},
          {"kld_stderr", r.kld_stderr},
          {"kld_p99", r.kld_p99},
          {"kld_max", r.kld_max},
          {"top1_agreement", r.top1_agreement},
          {"top1_stderr", r.top1_stderr},
          {"scored", r.scored}};
}

void measure_quantized(SweepState& s, const QuantLevel& level, QuantRow& row, nlohmann::json& record) {
  QuantizeOptions options = level.options;
  options.calibration = s.input.calib;
  options.calib_windows = s.input.calib_windows;
  options.threads = s.base.model.threads();  // -t as clamped (and warned about) once, when opened
  const fs::path dir = s.scratch.path() / level.name;
  fmt::print(stderr, "bench quant: {}: quantizing\n", level.name);
  const QuantizeResult q = quantize_model(s.input.model_dir, dir, options);
  const OpenedModel m = open_model(dir.string(), s.quant_options);
  fmt::print(stderr, "bench quant: {}: comparing over {} tokens\n", level.name, s.tokens.size());
  const KlDivergenceResult r = kl_divergence(m.model, s.base.model, s.tokens, s.ctx);
  if (!s.base_ppl) s.base_ppl = r.base;
  row.type = std::string(weight_type_name(q.type));
  row.method = std::string(quant_method_name(q.method));
  row.head = std::string(weight_type_name(q.head_type));
  // The size a format with this group would have: the repeated scales of a simulated group
  // (quantize_model's scale_group) are not counted.
  row.bytes = q.tensor_bytes - q.repeated_scale_bytes;
  row.bits = 8.0 * static_cast<double>(row.bytes) / static_cast<double>(q.params);
  row.ppl = r.model.perplexity;
  row.delta = r.delta_ppl_pct;
  row.kld = r.kld_mean;
  row.top1 = r.top1_agreement;
  row.rel_error = q.weight_relative_error;
  record.update(quantize_fields(q, row));
  record.update(comparison_fields(r));
}

// One level, measured and its record appended.
QuantRow measure_level(SweepState& s, const QuantLevel& level) {
  QuantRow row;
  row.level = level.name;
  nlohmann::json record = bench_context(s.base.model.threads(), s.base.model.isa());
  record["bench"] = "quant";
  record["model"] = s.base.dir.string();
  record["file"] = s.input.file;
  record["level"] = level.name;
  record["ctx"] = s.ctx;
  record["tokens"] = s.tokens.size();
  const auto start = std::chrono::steady_clock::now();
  if (level.base) {
    measure_base(s, row, record);
  } else {
    measure_quantized(s, level, row, record);
  }
  record["bytes"] = row.bytes;
  record["bits_per_weight"] = row.bits;
  record["weight_relative_error"] = row.rel_error;
  record["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  append_bench_record(record, s.input.output);
  return row;
}

}  // namespace

std::vector<QuantLevel> parse_quant_levels(const std::string& list) {
  std::vector<QuantLevel> levels;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) levels.push_back(parse_level(name));
  if (levels.empty()) fail("--levels is empty");
  return levels;
}

QuantSweep run_quant_sweep(const std::vector<QuantLevel>& levels, const QuantSweepInput& input) {
  OpenOptions base_options = input.options;
  base_options.model.weights.reset();  // the base is the model as stored
  const OpenedModel base = open_model(input.model_dir, base_options);
  const size_t ctx =
      input.context > 0 ? static_cast<size_t>(input.context) : std::min(kDefaultWindow, base.model.max_context());
  std::vector<int32_t> tokens = base.tokenizer.encode(input.text);
  if (tokens.size() < 2) {
    fail("'{}' has {} token(s); perplexity needs at least 2", input.file, tokens.size());
  }
  SweepState s{.input = input,
               .base = base,
               .quant_options = base_options,
               .tokens = std::move(tokens),
               .ctx = ctx,
               .scratch = ScratchDir(fs::temp_directory_path(), "nanoinfer-bench-quant")};
  // The base's size as stored, from the report `inspect` prints.
  for (const InspectedTensor& t : inspect_model(input.model_dir).tensors) {
    s.base_bytes += t.bytes, s.base_params += t.params;
  }
  QuantSweep sweep{.model = base.dir.string(), .ctx = ctx, .tokens = s.tokens.size()};
  for (const QuantLevel& level : levels) sweep.rows.push_back(measure_level(s, level));
  return sweep;
}

}  // namespace nanoinfer::bench
