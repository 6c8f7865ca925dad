// `nanoinfer inspect [MODEL]` (or `-m MODEL`; neither: the model built into the binary): every
// tensor of a model directory or GGUF file checked against the manifest its config implies,
// with a parameter breakdown and a verdict.
// Exits non-zero, naming the tensor, on any missing, unexpected or mis-shaped tensor, or one
// holding a NaN or infinity.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>

#include "command.h"
#include "nanoinfer/error.h"
#include "nanoinfer/inspect.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/model_files.h"

namespace nanoinfer::cli {
namespace {

std::string with_commas(uint64_t v) {
  std::string digits = std::to_string(v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The lines only a GGUF file has: its header and what its tokenizer metadata holds.
void print_gguf_facts(const GgufFacts& g) {
  std::string file_type;
  if (g.file_type) {
    file_type = fmt::format(", file type {}", *g.file_type);
    if (!g.file_type_name.empty()) file_type += fmt::format(" ({})", g.file_type_name);
  }
  fmt::print("gguf:   version {}, alignment {}, tensor data at byte {}, {} metadata keys; architecture {}{}{}\n",
             g.version, g.alignment, with_commas(g.data_offset), g.metadata_keys, g.architecture,
             g.name.empty() ? "" : fmt::format(", name \"{}\"", g.name), file_type);
  if (g.tokenizer_model.empty() && g.tokens == 0) {
    fmt::print("tokenizer: none in the file\n");
    return;
  }
  fmt::print("tokenizer: {} (pre-tokenizer {}), {} tokens, {} merges{}{}\n", g.tokenizer_model,
             g.tokenizer_pre.empty() ? "none" : g.tokenizer_pre, with_commas(g.tokens), with_commas(g.merges),
             g.eos_token_id ? fmt::format(", eos {}", *g.eos_token_id) : "", g.chat_template ? ", chat template" : "");
}

void inspect(const std::filesystem::path& path) {
  const ModelReport r = inspect_model(path);
  const ModelConfig& cfg = r.config;
  const bool gguf = r.gguf.has_value();

  // A model name (ORG/NAME[@REVISION][:QUANT]) is shown with the path the hub cache gave it.
  const std::filesystem::path resolved = gguf ? r.files.weights : r.files.dir;
  if (path.empty()) {
    fmt::print("model:  {}\n", embedded_model_label().string());
  } else if (resolved != path) {
    fmt::print("model:  {} ({})\n", escape_control(path.string()), escape_control(resolved.string()));
  } else {
    fmt::print("model:  {}\n", escape_control(path.string()));
  }
  fmt::print(
      "config: {}, {} layers, hidden {}, heads {} (kv {}, head dim {}), intermediate {}, "
      "vocab {}, {} embeddings\n",
      cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
      cfg.head_dim(), cfg.intermediate_size, cfg.vocab_size, cfg.tie_word_embeddings ? "tied" : "untied");
  if (gguf) print_gguf_facts(*r.gguf);
  fmt::print("file:   {}{}, {} bytes ({:.1f} MiB), header {} bytes, {} tensors\n\n", r.files.weights.string(),
             r.files.sharded() ? fmt::format(" ({} shards)", r.shards) : "", with_commas(r.file_bytes),
             mib(r.file_bytes), with_commas(r.header_bytes), r.tensors.size());

  // A GGUF file's tensors are listed under both names: the manifest's and the file's own.
  size_t name_width = 4, file_width = 9;
  for (const auto& t : r.tensors) {
    name_width = std::max(name_width, t.name.size());
    file_width = std::max(file_width, t.file_name.size());
  }
  const auto row = [&](std::string_view name, std::string_view file_name, std::string_view type, std::string_view shape,
                       std::string_view bytes) {
    fmt::print("  {:<{}}  ", name, name_width);
    if (gguf) fmt::print("{:<{}}  ", file_name, file_width);
    fmt::print("{:<5}  {:<14}  {:>13}\n", type, shape, bytes);
  };
  row("name", "gguf name", "type", "shape", "bytes");
  std::map<std::string, uint64_t> params;  // by role, over tensors the manifest knows
  struct TypeTotals {
    size_t tensors = 0;
    uint64_t params = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> types;
  uint64_t tensor_bytes = 0, all_params = 0;
  for (const auto& t : r.tensors) {
    row(t.name, t.file_name, t.type, fmt::format("[{}]", fmt::join(t.shape, ", ")), with_commas(t.bytes));
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
  for (const auto& [role, label] :
       {std::pair{"embedding", "embeddings"}, std::pair{"attention", "attention"}, std::pair{"mlp", "mlp"},
        std::pair{"norm", "norms"}, std::pair{"output", "lm_head"}}) {
    const uint64_t n = params[role];
    if (std::string_view(role) == "output" && n == 0) continue;  // tied: nothing stored
    fmt::print("  {:<11} {:>13}  {:6.2f}%\n", label, with_commas(n),
               total == 0 ? 0.0 : 100.0 * static_cast<double>(n) / static_cast<double>(total));
  }
  std::vector<std::string> type_counts;
  for (const auto& [type, tt] : types) type_counts.push_back(fmt::format("{} x{}", type, tt.tensors));
  fmt::print("tensor data: {} bytes ({:.1f} MiB); dtypes: {}\n", with_commas(tensor_bytes), mib(tensor_bytes),
             fmt::join(type_counts, ", "));
  const auto bits = [](uint64_t bytes, uint64_t n) {
    return n == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(n);
  };
  fmt::print("bits per weight: {:.3f} overall", bits(tensor_bytes, all_params));
  for (const auto& [type, tt] : types)
    fmt::print("; {} {:.3f} ({} weights)", type, bits(tt.bytes, tt.params), with_commas(tt.params));
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

const bool registered_inspect = register_command({
    "",
    "inspect",
    "Check a model's tensors (directory or .gguf file) against its config; print shapes, counts and a verdict",
    [](CLI::App& sub) {
      auto positional = std::make_shared<std::string>();
      auto flag = std::make_shared<std::string>();
      const char* help =
          "Model directory (config.json + model.safetensors), a .gguf file, or ORG/NAME[@REVISION][:QUANT] of a "
          "model in the Hugging Face cache (default: the model built into the binary)";
      CLI::Option* pos = sub.add_option("MODEL", *positional, help);
      sub.add_option("-m,--model", *flag, help)->excludes(pos);
      sub.callback([positional, flag] {
        inspect(positional->empty() ? *flag : *positional);  // both empty: the embedded model
      });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
