// `nanoinfer inspect MODEL_DIR`: every tensor of a model directory checked against the
// manifest its config implies, with a parameter breakdown and a verdict. Exits non-zero,
// naming the tensor, on any missing, unexpected or mis-shaped tensor.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>

#include "command.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/error.h"

namespace nanoinfer::cli {
namespace {

std::string with_commas(uint64_t v) {
  std::string digits = std::to_string(v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

void inspect(const std::filesystem::path& dir) {
  const ModelReport r = inspect_model(dir);
  const ModelConfig& cfg = r.config;

  fmt::print("model:  {}\n", dir.string());
  fmt::print(
      "config: {}, {} layers, hidden {}, heads {} (kv {}, head dim {}), intermediate {}, "
      "vocab {}, {} embeddings\n",
      cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads,
      cfg.num_key_value_heads, cfg.head_dim(), cfg.intermediate_size, cfg.vocab_size,
      cfg.tie_word_embeddings ? "tied" : "untied");
  fmt::print("file:   {}, {} bytes ({:.1f} MiB), header {} bytes, {} tensors\n\n",
             r.files.weights.string(), with_commas(r.file_bytes), mib(r.file_bytes),
             with_commas(r.header_bytes), r.tensors.size());

  size_t name_width = 4;
  for (const auto& t : r.tensors) name_width = std::max(name_width, t.name.size());
  fmt::print("  {:<{}}  {:<5}  {:<14}  {:>13}\n", "name", name_width, "type", "shape", "bytes");
  std::map<std::string, uint64_t> params;  // by role, over tensors the manifest knows
  struct TypeTotals {
    size_t tensors = 0;
    uint64_t params = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> types;
  uint64_t tensor_bytes = 0, all_params = 0;
  for (const auto& t : r.tensors) {
    fmt::print("  {:<{}}  {:<5}  {:<14}  {:>13}\n", t.name, name_width, t.type,
               fmt::format("[{}]", fmt::join(t.shape, ", ")), with_commas(t.bytes));
    if (!t.role.empty()) params[t.role] += t.params;
    TypeTotals& tt = types[t.type];
    ++tt.tensors;
    tt.params += t.params;
    tt.bytes += t.bytes;
    tensor_bytes += t.bytes;
    all_params += t.params;
  }

  uint64_t total = 0;
  for (const auto& [role, n] : params) total += n;
  fmt::print("\nparameters: {}\n", with_commas(total));
  for (const auto& [role, label] : {std::pair{"embedding", "embeddings"}, std::pair{"attention", "attention"},
                                    std::pair{"mlp", "mlp"}, std::pair{"norm", "norms"},
                                    std::pair{"output", "lm_head"}}) {
    const uint64_t n = params[role];
    if (std::string_view(role) == "output" && n == 0) continue;  // tied: nothing stored
    fmt::print("  {:<11} {:>13}  {:6.2f}%\n", label, with_commas(n),
               total == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(total));
  }
  std::vector<std::string> type_counts;
  for (const auto& [type, tt] : types) type_counts.push_back(fmt::format("{} x{}", type, tt.tensors));
  fmt::print("tensor data: {} bytes ({:.1f} MiB); dtypes: {}\n", with_commas(tensor_bytes),
             mib(tensor_bytes), fmt::join(type_counts, ", "));
  const auto bits = [](uint64_t bytes, uint64_t n) { return n == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(n); };
  fmt::print("bits per weight: {:.3f} overall", bits(tensor_bytes, all_params));
  for (const auto& [type, tt] : types) fmt::print("; {} {:.3f} ({} weights)", type, bits(tt.bytes, tt.params), with_commas(tt.params));
  fmt::print("\n");
  if (!r.quantization.empty()) fmt::print("quantization: {}\n", r.quantization);

  if (!r.problems.empty()) {
    fmt::print("verdict: FAIL, {} problem(s):\n", r.problems.size());
    for (const auto& p : r.problems) fmt::print("  {}\n", p);
    if (r.problems.size() == 1) fail("{}: {}", r.files.weights.string(), r.problems[0]);
    fail("{}: {} (and {} more problem(s) listed above)", r.files.weights.string(), r.problems[0],
         r.problems.size() - 1);
  }
  fmt::print("verdict: OK, all {} tensors match the manifest of this config\n", r.tensors.size());
}

const bool registered = register_command({
    "",
    "inspect",
    "Check a model directory's tensors against its config; print shapes, counts and a verdict",
    [](CLI::App& sub) {
      auto dir = std::make_shared<std::string>();
      sub.add_option("MODEL_DIR", *dir, "Directory with config.json and model.safetensors")
          ->required();
      sub.callback([dir] { inspect(*dir); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
