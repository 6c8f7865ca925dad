// POST /v1/embeddings (serve/embeddings.h).
#include "serve/embeddings.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <iterator>

#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"
#include "serve/api.h"

namespace nanoinfer::serve {
namespace {

using EmbedJson = nlohmann::json;

// OpenAI's limit on the inputs of one request.
constexpr size_t kMaxEmbeddingInputs = 2048;

// Base64 of the embedding as little-endian float32 bytes (what encoding_format "base64" means).
std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    for (size_t b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

// One token array: integers within the vocabulary.
std::vector<int32_t> token_input(const EmbedJson& a, size_t index, int32_t vocab) {
  std::vector<int32_t> ids;
  for (const EmbedJson& t : a) {
    if (!t.is_number_integer())
      bad_request("invalid_value", fmt::format("'input' {}: a token array holds only integers", index));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad_request("invalid_value",
                  fmt::format("'input' {}: token {} is outside the vocabulary of {}", index, id, vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// 'input': a string, an array of strings, one token array, or an array of token arrays.
std::vector<std::vector<int32_t>> parse_inputs(const EmbedJson& input, const OpenedModel& m) {
  const auto text = [&](const EmbedJson& s, size_t index) {
    if (s.get_ref<const std::string&>().empty())
      bad_request("invalid_value", fmt::format("'input' {} is empty", index));
    return embedding_tokens(m.tokenizer, s.get_ref<const std::string&>());
  };
  const int32_t vocab = static_cast<int32_t>(m.model.vocab_size());
  std::vector<std::vector<int32_t>> inputs;
  if (input.is_string()) {
    inputs.push_back(text(input, 0));
  } else if (input.is_array() && !input.empty() && input[0].is_number()) {
    inputs.push_back(token_input(input, 0, vocab));
  } else if (input.is_array() && !input.empty()) {
    if (input.size() > kMaxEmbeddingInputs)
      bad_request("invalid_value",
                  fmt::format("'input' holds {} inputs; at most {} are allowed", input.size(), kMaxEmbeddingInputs));
    for (size_t i = 0; i < input.size(); ++i) {
      if (input[i].is_string()) {
        inputs.push_back(text(input[i], i));
      } else if (input[i].is_array() && !input[i].empty()) {
        inputs.push_back(token_input(input[i], i, vocab));
      } else {
        bad_request("invalid_value",
                    fmt::format("'input' {}: expected a non-empty string or a non-empty array of token ids", i));
      }
    }
  } else {
    bad_request("invalid_value",
                "'input' must be a non-empty string, an array of strings, or an array of token ids (or of arrays)");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) bad_request("invalid_value", fmt::format("'input' {} encodes to no tokens", i));
    if (inputs[i].size() > m.model.max_context())
      bad_request("context_length_exceeded", fmt::format("'input' {} is {} tokens but the context holds {}", i,
                                                         inputs[i].size(), m.model.max_context()));
  }
  return inputs;
}

}  // namespace

std::string embeddings_model(std::string_view body_text) {
  EmbedJson body;
  if (std::string problem; !try_parse_json(body_text, body, problem) || !body.is_object()) return "";
  const auto it = body.find("model");
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string embeddings_response(std::string_view body_text, const OpenedModel& m, Pooling pooling,
                                const std::string& pooling_error, const std::string& model_id) {
  EmbedJson body;
  if (std::string problem; !try_parse_json(body_text, body, problem))
    bad_request("invalid_json", fmt::format("the body is not valid JSON: {}", problem));
  if (!body.is_object()) bad_request("invalid_json", "the body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key != "input" && key != "model" && key != "encoding_format" && key != "dimensions" && key != "user")
      bad_request("invalid_value", fmt::format("'{}' is not a field of an embeddings request", excerpt(key)));
  }
  if (const auto it = body.find("model"); it != body.end()) {
    if (!it->is_string()) bad_request("invalid_value", "'model' must be a string");
    if (!it->get_ref<const std::string&>().empty() && *it != model_id)
      throw ApiError(404, "invalid_request_error", "model_not_found",
                     fmt::format("the model '{}' does not exist; this server has '{}'",
                                 excerpt(it->get_ref<const std::string&>()), model_id));
  }
  bool base64 = false;
  if (const auto it = body.find("encoding_format"); it != body.end()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      bad_request("invalid_value", "'encoding_format' must be \"float\" or \"base64\"");
    base64 = *it == "base64";
  }
  if (const auto it = body.find("user"); it != body.end() && !it->is_string())
    bad_request("invalid_value", "'user' must be a string");
  const size_t hidden = static_cast<size_t>(m.model.config().hidden_size);
  EmbedOptions options{.pooling = pooling};
  if (const auto it = body.find("dimensions"); it != body.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > static_cast<int64_t>(hidden))
      bad_request("invalid_value", fmt::format("'dimensions' must be an integer in 1..{} (the model's size)", hidden));
    options.dimensions = it->get<size_t>();
  }
  const auto input = body.find("input");
  if (input == body.end()) bad_request("invalid_value", "'input' is required");
  if (!pooling_error.empty()) bad_request("unsupported_pooling", pooling_error);
  const std::vector<std::vector<int32_t>> inputs = parse_inputs(*input, m);

  std::vector<std::vector<float>> vectors;
  try {
    vectors = embed(m.model, inputs, options);
  } catch (const Error& e) {
    throw ApiError(500, "server_error", "embedding_failed", e.what());
  }
  size_t tokens = 0;
  std::string out = R"({"object":"list","data":[)";
  for (size_t i = 0; i < vectors.size(); ++i) {
    tokens += inputs[i].size();
    fmt::format_to(std::back_inserter(out), R"({}{{"object":"embedding","index":{},"embedding":)", i ? "," : "", i);
    if (base64) {
      fmt::format_to(std::back_inserter(out), "\"{}\"}}", base64_floats(vectors[i]));
      continue;
    }
    out += '[';
    for (size_t d = 0; d < vectors[i].size(); ++d)
      fmt::format_to(std::back_inserter(out), "{}{}", d ? "," : "", vectors[i][d]);
    out += "]}";
  }
  fmt::format_to(std::back_inserter(out), R"(],"model":{},"usage":{{"prompt_tokens":{},"total_tokens":{}}}}})",
                 EmbedJson(model_id).dump(-1, ' ', false, EmbedJson::error_handler_t::replace), tokens, tokens);
  return out;
}

}  // namespace nanoinfer::serve
