// Embeddings (nanoinfer/embedding.h): batching inputs into forward passes without the head,
// pooling, normalisation; and the pooling a model's files declare (engine/model_pooling.h).
#include "nanoinfer/embedding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "base/json_object.h"
#include "engine/model_pooling.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

std::string_view pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

Pooling parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls" || name == "first") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  fail("pooling '{}': expected mean, cls (first token) or last", excerpt(name));
}

Pooling resolve_pooling(std::optional<Pooling> flag, const ModelPooling& model) {
  if (flag) return *flag;
  if (!model.unsupported.empty()) fail("{}: {} (choose one with --pooling)", model.origin, model.unsupported);
  return model.pooling.value_or(Pooling::Last);
}

std::vector<int32_t> embedding_tokens(const Tokenizer& tokenizer, std::string_view text) {
  const std::span<const int32_t> prefix = tokenizer.prompt_prefix(), suffix = tokenizer.prompt_suffix();
  std::vector<int32_t> ids(prefix.begin(), prefix.end());
  tokenizer.encode_append(text, ids);
  ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

namespace {

// One input's state while its rows go through the passes: its sequence (alive only while it
// has rows to push), the rows pushed so far, and the pooled sum or pick in double.
struct EmbedInput {
  std::unique_ptr<Sequence> seq;
  size_t done = 0;
  std::vector<double> pooled;
};

// Folds `rows` final-normed rows of an input, starting at its position `from` of `length`,
// into its pooled vector.
void pool_rows(Pooling pooling, const float* rows, size_t n, size_t from, size_t length, size_t dim,
               std::vector<double>& pooled) {
  const auto take = [&](const float* row) {
    for (size_t d = 0; d < dim; ++d) pooled[d] = row[d];
  };
  switch (pooling) {
    case Pooling::Mean:
      for (size_t r = 0; r < n; ++r)
        for (size_t d = 0; d < dim; ++d) pooled[d] += rows[r * dim + d];
      return;
    case Pooling::Cls:
      if (from == 0) take(rows);
      return;
    case Pooling::Last:
      if (from + n == length) take(rows + (n - 1) * dim);
      return;
  }
}

// The pooled vector as the caller gets it: averaged (mean), cut to `dims`, normalised.
std::vector<float> finish_embedding(const EmbedOptions& o, std::vector<double>& pooled, size_t length, size_t dims,
                                    size_t index) {
  if (o.pooling == Pooling::Mean)
    for (double& v : pooled) v /= static_cast<double>(length);
  double norm = 0;
  for (size_t d = 0; d < dims; ++d) norm += pooled[d] * pooled[d];
  norm = std::sqrt(norm);
  if (!std::isfinite(norm)) fail("input {}: the pooled hidden state is not finite", index);
  const double scale = o.normalize && norm > 0 ? 1.0 / norm : 1.0;
  std::vector<float> out(dims);
  for (size_t d = 0; d < dims; ++d) out[d] = static_cast<float>(pooled[d] * scale);
  return out;
}

void check_inputs(const Model& model, std::span<const std::vector<int32_t>> inputs, const EmbedOptions& o) {
  const size_t hidden = static_cast<size_t>(model.config().hidden_size);
  if (o.dimensions > hidden) fail("dimensions {} exceeds the model's {} (hidden size)", o.dimensions, hidden);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) fail("input {} is empty", i);
    if (inputs[i].size() > model.max_context())
      fail("input {} is {} tokens but the context holds {}", i, inputs[i].size(), model.max_context());
    for (const int32_t id : inputs[i]) {
      if (id < 0 || static_cast<size_t>(id) >= model.vocab_size())
        fail("input {}: token id {} is out of range for a vocabulary of {}", i, id, model.vocab_size());
    }
  }
}

}  // namespace

std::vector<std::vector<float>> embed(const Model& model, std::span<const std::vector<int32_t>> inputs,
                                      const EmbedOptions& options) {
  check_inputs(model, inputs, options);
  const size_t hidden = static_cast<size_t>(model.config().hidden_size);
  const size_t dims = options.dimensions == 0 ? hidden : options.dimensions;
  const size_t budget = options.batch_rows == 0 ? model.options().max_batch : options.batch_rows;
  std::vector<EmbedInput> state(inputs.size());
  std::vector<std::vector<float>> out(inputs.size());
  std::vector<Sequence*> seqs;
  std::vector<size_t> counts, owners;
  std::vector<int32_t> tokens;
  std::vector<float> rows;
  size_t next = 0;  // the first input with rows left
  while (next < inputs.size()) {
    // One pass: the rows left of inputs next, next + 1, ... up to the budget (the last one
    // may be cut and continue in the next pass).
    seqs.clear(), counts.clear(), owners.clear(), tokens.clear();
    for (size_t i = next, used = 0; i < inputs.size() && used < budget; ++i) {
      EmbedInput& s = state[i];
      if (!s.seq) {
        s.seq = std::make_unique<Sequence>(model.new_sequence(inputs[i].size()));
        s.pooled.assign(hidden, 0.0);
      }
      const size_t n = std::min(inputs[i].size() - s.done, budget - used);
      seqs.push_back(s.seq.get()), counts.push_back(n), owners.push_back(i);
      tokens.insert(tokens.end(), inputs[i].begin() + static_cast<ptrdiff_t>(s.done),
                    inputs[i].begin() + static_cast<ptrdiff_t>(s.done + n));
      used += n;
    }
    rows.resize(tokens.size() * hidden);
    model.hidden_states(seqs, tokens, counts, rows);
    const float* at = rows.data();
    for (size_t p = 0; p < owners.size(); ++p) {
      const size_t i = owners[p];
      EmbedInput& s = state[i];
      pool_rows(options.pooling, at, counts[p], s.done, inputs[i].size(), hidden, s.pooled);
      at += counts[p] * hidden;
      s.done += counts[p];
      if (s.done < inputs[i].size()) continue;
      out[i] = finish_embedding(options, s.pooled, inputs[i].size(), dims, i);
      s = {};  // its cache and sums are freed as soon as it is complete
      next = i + 1;
    }
  }
  return out;
}

// ---- the pooling a model's files declare ----------------------------------------------------

namespace {

// sentence-transformers' Pooling config: exactly one mode set, and one computed here.
ModelPooling pooling_from_config(const nlohmann::json& j, std::string origin) {
  ModelPooling p{.origin = std::move(origin)};
  const struct {
    const char* key;
    std::optional<Pooling> pooling;
  } modes[] = {{"pooling_mode_cls_token", Pooling::Cls},
               {"pooling_mode_mean_tokens", Pooling::Mean},
               {"pooling_mode_lasttoken", Pooling::Last},
               {"pooling_mode_max_tokens", std::nullopt},
               {"pooling_mode_mean_sqrt_len_tokens", std::nullopt},
               {"pooling_mode_weightedmean_tokens", std::nullopt}};
  size_t set = 0;
  for (const auto& m : modes) {
    const auto it = j.find(m.key);
    if (it == j.end() || !it->is_boolean() || !it->get<bool>()) continue;
    ++set;
    if (m.pooling) {
      p.pooling = m.pooling;
    } else {
      p.unsupported = fmt::format("{} is not computed (mean, cls and last are)", m.key);
    }
  }
  if (set > 1) p.unsupported = "more than one pooling mode is set (one of mean, cls and last is computed)";
  if (!p.unsupported.empty()) p.pooling.reset();
  return p;
}

// modules.json names the Pooling module's directory; without it, 1_Pooling is where
// sentence-transformers puts it.
std::string pooling_directory(const ModelSource& src) {
  const std::optional<std::string> text = src.read_text("modules.json", kMaxConfigFileBytes);
  if (!text) return "1_Pooling";
  const nlohmann::json j = parse_json(*text, src.path_of("modules.json").string());
  if (!j.is_array()) fail("{}: expected a JSON array of modules", src.path_of("modules.json").string());
  for (const nlohmann::json& m : j) {
    if (!m.is_object() || m.value("type", "") != "sentence_transformers.models.Pooling") continue;
    const auto path = m.find("path");
    if (path == m.end() || !path->is_string() || path->get<std::string>().empty() ||
        path->get<std::string>().find("..") != std::string::npos)
      fail("{}: the Pooling module has no usable \"path\"", src.path_of("modules.json").string());
    return path->get<std::string>();
  }
  return "";
}

}  // namespace

ModelPooling read_model_pooling(const ModelSource& src) {
  if (src.gguf) {
    const std::string key = fmt::format("{}.pooling_type", src.config.model_type);
    if (src.gguf->layout().find(key) == nullptr) return {};
    // llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
    const uint32_t type = src.gguf->layout().get_u32(key);
    ModelPooling p{.origin = fmt::format("{}: metadata '{}'", src.files.weights.string(), key)};
    if (type == 1) p.pooling = Pooling::Mean;
    if (type == 2) p.pooling = Pooling::Cls;
    if (type == 3) p.pooling = Pooling::Last;
    if (type > 3) p.unsupported = fmt::format("pooling type {} is not computed (1 mean, 2 cls and 3 last are)", type);
    return p;
  }
  const std::string dir = pooling_directory(src);
  if (dir.empty()) return {};
  const std::string name = dir + "/config.json";
  const std::optional<std::string> text = src.read_text(name, kMaxConfigFileBytes);
  if (!text) return {};
  return pooling_from_config(parse_json_object(*text, src.path_of(name).string()), src.path_of(name).string());
}

std::vector<std::string> pooling_files(const ModelSource& src) {
  if (src.gguf) return {};
  std::vector<std::string> files;
  if (src.has("modules.json")) files.push_back("modules.json");
  if (const std::string dir = pooling_directory(src); !dir.empty() && src.has(dir + "/config.json"))
    files.push_back(dir + "/config.json");
  return files;
}

}  // namespace nanoinfer
