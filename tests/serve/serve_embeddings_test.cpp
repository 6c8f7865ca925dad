// POST /v1/embeddings without a socket (serve/embeddings.h) on the embedded default model: the
// response's shape and values (equal to the library's), base64 as little-endian float32, every
// input form, and each refusal by its status and code.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanoinfer/embedding.h"
#include "nanoinfer/open_model.h"
#include "serve/api.h"
#include "serve/embeddings.h"

namespace nanoinfer::serve {
namespace {

using EmbedJson = nlohmann::json;

const OpenedModel& embed_model() {
  static const OpenedModel m = open_model("", {.model = {.threads = 1, .max_context = 64}});
  return m;
}

EmbedJson answer(const std::string& body, const std::string& pooling_error = "") {
  return EmbedJson::parse(embeddings_response(body, embed_model(), Pooling::Last, pooling_error, "tiny"));
}

// The status and code of the ApiError the body gets ("" when it is answered).
std::string embed_refusal(const std::string& body, int status = 400, const std::string& pooling_error = "") {
  try {
    answer(body, pooling_error);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, status) << body;
    return e.code;
  }
  return "";
}

std::vector<float> library_embedding(const std::vector<int32_t>& tokens, size_t dims = 0) {
  return embed(embed_model().model, {&tokens, 1}, {.pooling = Pooling::Last, .dimensions = dims})[0];
}

// Base64 text back to floats, decoded independently of the server's encoder.
std::vector<float> from_base64(const std::string& text) {
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    if (c == '=') break;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = (acc << 6) | static_cast<uint32_t>(std::strchr(alphabet, c) - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (size_t b = 0; b < 4; ++b) u |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + b])) << (8 * b);
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

TEST(ServeEmbeddings, AnswersInOpenAisShapeWithTheLibrarysValues) {
  const OpenedModel& m = embed_model();
  const std::vector<int32_t> romeo = embedding_tokens(m.tokenizer, "ROMEO:");
  const std::vector<int32_t> juliet = embedding_tokens(m.tokenizer, "JULIET: wherefore");
  const EmbedJson r = answer(R"({"model": "tiny", "input": ["ROMEO:", "JULIET: wherefore"], "user": "u"})");
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "tiny");
  EXPECT_EQ(r["usage"]["prompt_tokens"], romeo.size() + juliet.size());
  EXPECT_EQ(r["usage"]["total_tokens"], romeo.size() + juliet.size());
  ASSERT_EQ(r["data"].size(), 2u);
  EXPECT_EQ(r["data"][1]["object"], "embedding");
  EXPECT_EQ(r["data"][1]["index"], 1);
  EXPECT_EQ(r["data"][0]["embedding"].get<std::vector<float>>(), library_embedding(romeo));
  EXPECT_EQ(r["data"][1]["embedding"].get<std::vector<float>>(), library_embedding(juliet));

  // A string, a token array, an array of token arrays: the same embedding for the same tokens.
  EXPECT_EQ(answer(R"({"input": "ROMEO:"})")["data"][0]["embedding"], r["data"][0]["embedding"]);
  EXPECT_EQ(answer(EmbedJson{{"input", romeo}}.dump())["data"][0]["embedding"], r["data"][0]["embedding"]);
  EXPECT_EQ(answer(EmbedJson{{"input", {juliet, romeo}}}.dump())["data"][1]["embedding"], r["data"][0]["embedding"]);

  const EmbedJson b = answer(R"({"input": ["ROMEO:"], "encoding_format": "base64", "dimensions": 8})");
  EXPECT_EQ(from_base64(b["data"][0]["embedding"].get<std::string>()), library_embedding(romeo, 8));
}

TEST(ServeEmbeddings, RefusesWhatItCannotAnswer) {
  EXPECT_EQ(embed_refusal("not json"), "invalid_json");
  EXPECT_EQ(embed_refusal("[1]"), "invalid_json");
  EXPECT_EQ(embed_refusal(R"({})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": ""})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": []})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": ["a", ""]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": ["a", 3]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": [[1, 2], []]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": [1, 1.5]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": [1, 100000]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": [-1]})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": {"a": 1}})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "encoding_format": "hex"})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "dimensions": 0})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "dimensions": 100000})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "dimensions": 2.5})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "normalize": false})"), "invalid_value");
  EXPECT_EQ(embed_refusal(R"({"input": "a", "model": "other"})", 404), "model_not_found");
  EXPECT_EQ(embed_refusal(R"({"input": "a"})", 400, "no pooling"), "unsupported_pooling");
  // Too long for the context of 64: named by its index.
  const std::string long_text(2000, 'x');
  try {
    answer(EmbedJson{{"input", {"short", long_text}}}.dump());
    ADD_FAILURE() << "a text past the context was answered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(std::string(e.what()).rfind("'input' 1 is ", 0), 0u) << e.what();
  }
  std::vector<std::string> many(2049, "a");
  EXPECT_EQ(embed_refusal(EmbedJson{{"input", many}}.dump()), "invalid_value");
}

}  // namespace
}  // namespace nanoinfer::serve
