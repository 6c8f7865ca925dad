// The wire format of `nanoinfer serve` without a socket: request parsing and validation (each
// rule by the status and code it answers with) and the JSON of responses and stream chunks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/api.h"
#include "serve/secret.h"

namespace nanoinfer::serve {
namespace {

using json = nlohmann::json;

// The code of the ApiError parsing `body` throws, or "" if it parses.
std::string rejection(std::string_view body, Endpoint endpoint = Endpoint::Chat) {
  try {
    parse_request(body, endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error");
    return e.code;
  }
  return "";
}

constexpr std::string_view kUser = R"("messages": [{"role": "user", "content": "hi"}])";

std::string with(std::string_view extra) {
  return fmt::format("{{{}, {}}}", kUser, extra);
}

TEST(ServeApi, ParsesAFullChatRequest) {
  const CompletionRequest r = parse_request(
      R"({"model": "m", "messages": [{"role": "system", "content": "be brief"},
          {"role": "user", "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]},
          {"role": "assistant", "content": "hi"}],
          "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 7,
          "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1,
          "seed": 42, "stop": ["a", "bc"], "n": 1, "user": "ignored"})",
      Endpoint::Chat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.5);
  EXPECT_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
}

// Error messages are one line, control characters escaped, cut at 2 KiB on a character
// boundary however long the text a request echoed into them.
TEST(ServeApi, ErrorMessagesAreOneBoundedLine) {
  EXPECT_EQ(ApiError(400, "t", "c", "a\nb\tc\x01").what(), std::string("a\\nb\\tc\\x01"));
  std::string text(2047, 'x');
  text += "\xc3\xa9";  // 'e' with an acute accent across the 2 KiB mark
  text += std::string(10000, '\n');
  const std::string got = ApiError(400, "t", "c", text).what();
  EXPECT_EQ(got, std::string(2047, 'x') + "... (cut)");
  EXPECT_EQ(ApiError(400, "t", "c", std::string(2048, 'y')).what(), std::string(2048, 'y'));  // fits: no cut
  const std::string escaped = ApiError(400, "t", "c", std::string(1000, '\n')).what();        // 2000 bytes escaped
  EXPECT_EQ(escaped.size(), 2000u);
  EXPECT_EQ(escaped.find('\n'), std::string::npos);
}

// OpenAI's "developer" role is the system role by its newer name; an assistant message whose
// content is null (as clients send after tool calls) has empty content.
TEST(ServeApi, DeveloperIsTheSystemRoleAndNullContentIsEmpty) {
  const CompletionRequest r = parse_request(
      R"({"messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
           "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "42"}]})",
      Endpoint::Chat);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "be brief");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
  try {
    parse_request(R"({"messages": [{"role": "narrator", "content": "x"}]})", Endpoint::Chat);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("developer"), std::string::npos) << e.what();
  }
}

TEST(ServeApi, UnsetFieldsStayUnset) {
  const CompletionRequest r = parse_request(with(R"("temperature": null, "stop": "x")"), Endpoint::Chat);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.max_tokens);
  EXPECT_FALSE(r.sampling.temperature);
  EXPECT_FALSE(r.sampling.seed);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.model, "");
}

TEST(ServeApi, SmallerOfTheTwoTokenLimitsWins) {
  EXPECT_EQ(parse_request(with(R"("max_tokens": 9, "max_completion_tokens": 4)"), Endpoint::Chat).max_tokens, 4);
  EXPECT_EQ(parse_request(with(R"("max_tokens": 16.0)"), Endpoint::Chat).max_tokens, 16);
}

TEST(ServeApi, ParsesACompletionRequest) {
  const CompletionRequest r = parse_request(R"({"prompt": "Once", "max_tokens": 0})", Endpoint::Completion);
  EXPECT_EQ(r.endpoint, Endpoint::Completion);
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.max_tokens, 0);
}

TEST(ServeApi, RejectsEachBadRequestWithItsCode) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "invalid_json"},
      {"", "invalid_json"},
      {"[1, 2]", "invalid_json"},
      {"{}", "missing_field"},
      {R"({"messages": "hi"})", "invalid_type"},
      {R"({"messages": []})", "invalid_value"},
      {R"({"messages": [3]})", "invalid_type"},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "invalid_value"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "invalid_value"},
      {R"({"messages": [{"content": "x"}]})", "invalid_value"},
      {R"({"messages": [{"role": "user"}]})", "invalid_value"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "invalid_type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "invalid_value"},
      {with(R"("max_tokens": -1)"), "invalid_value"},
      {with(R"("max_completion_tokens": -5)"), "invalid_value"},
      {with(R"("max_tokens": "10")"), "invalid_type"},
      {with(R"("max_tokens": 2.5)"), "invalid_type"},
      {with(R"("temperature": -0.1)"), "invalid_value"},
      {with(R"("temperature": "hot")"), "invalid_type"},
      {with(R"("top_p": 0)"), "invalid_value"},
      {with(R"("top_p": 1.5)"), "invalid_value"},
      {with(R"("min_p": 2)"), "invalid_value"},
      {with(R"("top_k": -1)"), "invalid_value"},
      {with(R"("repetition_penalty": 0)"), "invalid_value"},
      {with(R"("seed": "abc")"), "invalid_type"},
      {with(R"("stream": "yes")"), "invalid_type"},
      {with(R"("stream_options": true)"), "invalid_type"},
      {with(R"("stop": 5)"), "invalid_type"},
      {with(R"("stop": ["a", 1])"), "invalid_type"},
      {with(R"("stop": "")"), "invalid_value"},
      {with(R"("n": 2)"), "invalid_value"},
      {with(R"("model": 7)"), "invalid_type"},
  };
  for (const auto& [body, code] : cases) EXPECT_EQ(rejection(body), code) << body;
  EXPECT_EQ(rejection(R"({"prompt": 3})", Endpoint::Completion), "invalid_type");
  EXPECT_EQ(rejection(R"({"prompt": ""})", Endpoint::Completion), "invalid_value");
  EXPECT_EQ(rejection(R"({"messages": []})", Endpoint::Completion), "missing_field");
}

TEST(ServeApi, ErrorJsonHasOpenAIsShape) {
  const json j = json::parse(error_json(ApiError(401, "authentication_error", "invalid_api_key", "nope")));
  EXPECT_EQ(
      j, json::parse(R"({"error": {"message": "nope", "type": "authentication_error", "code": "invalid_api_key"}})"));
}

TEST(ServeApi, ChatResponseAndChunks) {
  const ResponseId id{"chatcmpl-1", 1700000000, "m"};
  const json r = json::parse(response_json(Endpoint::Chat, id, "Hello", FinishReason::Length, {5, 3}));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8})"));

  const json first = json::parse(chunk_json(Endpoint::Chat, id, {.role = true}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json text = json::parse(chunk_json(Endpoint::Chat, id, {.text = "lo"}));
  EXPECT_EQ(text["choices"][0]["delta"], json::parse(R"({"content": "lo"})"));
  const json last = json::parse(chunk_json(Endpoint::Chat, id, {.finish = FinishReason::Stop}));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const json usage = json::parse(chunk_json(Endpoint::Chat, id, {.usage = Usage{2, 1}}));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 3);
}

TEST(ServeApi, CompletionResponseAndModels) {
  const ResponseId id{"cmpl-2", 1, "m"};
  const json r = json::parse(response_json(Endpoint::Completion, id, "abc", FinishReason::Stop, {1, 1}));
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "abc");
  EXPECT_EQ(json::parse(chunk_json(Endpoint::Completion, id, {.text = "x"}))["choices"][0]["text"], "x");
  const json models = json::parse(models_json("default-model", 5));
  EXPECT_EQ(models["data"][0]["id"], "default-model");
  EXPECT_EQ(models["object"], "list");
}

// Bytes that count how often they are read: the key compare's work, counted exactly.
struct CountedBytes {
  std::string_view text;
  size_t* reads;
  size_t size() const { return text.size(); }
  char operator[](size_t i) const {
    ++*reads;
    return text[i];
  }
};

// The API key compare reads every byte of both keys whatever the first difference (an early
// exit would let a client time how much of its guess is right): the number of reads depends
// only on the lengths. Verdicts are exact.
TEST(ServeApi, KeyCompareReadsEveryByteWhateverTheFirstDifference) {
  const std::string key = "sk-0123456789abcdef0123456789abcdef";
  struct Case {
    std::string given;
    bool same;
  };
  std::string first = key, middle = key, last = key;
  first[0] = 'X';
  middle[key.size() / 2] = 'X';
  last.back() = 'X';
  for (const Case& c : {Case{key, true}, Case{first, false}, Case{middle, false}, Case{last, false},
                        Case{key.substr(0, 1), false}, Case{key + "0", false}, Case{"", false}}) {
    size_t given_reads = 0, key_reads = 0;
    EXPECT_EQ(same_secret(CountedBytes{c.given, &given_reads}, CountedBytes{key, &key_reads}), c.same) << c.given;
    EXPECT_EQ(given_reads, c.given.size()) << c.given;
    EXPECT_EQ(key_reads, key.size()) << c.given;
  }
  EXPECT_FALSE(same_secret(std::string_view(""), std::string_view("k")));
  EXPECT_TRUE(same_secret(std::string_view(""), std::string_view("")));
}

}  // namespace
}  // namespace nanoinfer::serve
