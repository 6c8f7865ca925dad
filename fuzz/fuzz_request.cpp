// libFuzzer target for the request side of `nanoinfer serve` (src/serve/api.h): any body, on
// either endpoint, is parsed into a validated request or refused with a 400 whose message is
// one line and whose error JSON parses; a validated request satisfies the documented
// invariants and encodes to prompt tokens of the default model's tokenizer, every id valid,
// without the user's text becoming turn markers. The first input byte chooses the endpoint.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/tokenizer.h"
#include "serve/api.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_request: %s\n", what);
    std::abort();
  }
}

bool one_line(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return !s.empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanoinfer;
  static const Tokenizer tok = Tokenizer::load(NANOINFER_SOURCE_DIR "/data/default-model");
  static const std::optional<int32_t> im_start = tok.token_id("<|im_start|>");
  if (size == 0) return 0;
  const serve::Endpoint endpoint = data[0] & 1 ? serve::Endpoint::Chat : serve::Endpoint::Completion;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  serve::CompletionRequest r;
  try {
    r = serve::parse_request(body, endpoint);
  } catch (const serve::ApiError& e) {
    check(e.status == 400, "a parse error that is not a 400");
    check(one_line(e.what()), "an error message that is empty or not one line");
    check(!e.code.empty() && !e.type.empty(), "an error without code or type");
    const std::string j = serve::error_json(e);
    check(j.find('\n') == std::string::npos, "error JSON over several lines");
    const nlohmann::json parsed = nlohmann::json::parse(j);  // throws (a crash) if invalid
    check(parsed.at("error").at("message").is_string(), "error JSON without a message");
    return 0;
  }
  check(r.endpoint == endpoint, "the endpoint changed");
  if (endpoint == serve::Endpoint::Chat) {
    check(!r.messages.empty(), "a chat request without messages");
    for (const ChatMessage& m : r.messages) {
      check(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool",
            "an unknown role passed");
      check(m.tool_calls.empty() || m.role == "assistant", "tool calls on a message that is not the assistant's");
    }
  } else {
    // Token ids are checked against the vocabulary when the job is made (the server's make_job).
    check(!r.prompt.empty() || !r.prompt_ids.empty(), "an empty prompt passed");
    for (int32_t id : r.prompt_ids) check(id >= 0, "a negative token id passed");
  }
  check(!r.max_tokens || *r.max_tokens >= 0, "a negative max_tokens passed");
  check(r.stop.size() <= 16, "more than 16 stop strings passed");
  for (const std::string& s : r.stop) check(!s.empty(), "an empty stop string passed");
  check(!(r.return_token_ids && r.stream), "return_token_ids with stream passed");

  std::vector<std::string> tools;  // as the server renders them
  for (const serve::ToolDef& t : r.tools.tools) tools.push_back(t.rendered);
  const std::vector<int32_t> ids = endpoint == serve::Endpoint::Chat
                                       ? encode_chat(tok, r.messages, true, SpecialTokens::AsText, tools)
                                       : encode_raw_prompt(tok, r.prompt);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size(), "a token id out of range");
  if (endpoint == serve::Endpoint::Chat && im_start) {
    // One turn marker per message, the generation prompt's and at most a default system
    // turn: text typed into a message never becomes one.
    size_t turns = 0;
    for (int32_t id : ids) turns += id == *im_start;
    check(turns <= r.messages.size() + 2, "message text became turn markers");
  }
  // The response side takes any text the model makes of it.
  const serve::ResponseId rid{"cmpl-1", 0, r.model};
  const std::string text = r.stop.empty() ? r.prompt : r.stop.front();
  for (const std::string& out : {serve::response_json(endpoint, rid, text, serve::FinishReason::Stop, {ids.size(), 0}),
                                 serve::chunk_json(endpoint, rid, {.text = text})}) {
    check(out.find('\n') == std::string::npos, "response JSON over several lines");
    (void)nlohmann::json::parse(out);
  }
  // Tool calls: any text parses into content and calls, whose arguments are JSON objects.
  if (r.tools.parse()) {
    const serve::ParsedOutput parsed = serve::parse_tool_output(text, r.tools);
    for (const serve::ToolCall& c : parsed.calls)
      check(nlohmann::json::parse(c.arguments).is_object(), "call arguments not an object");
    const nlohmann::json response =
        nlohmann::json::parse(serve::response_json(endpoint, rid, parsed.content, serve::FinishReason::ToolCalls,
                                                   {ids.size(), 0}, nullptr, nullptr, &parsed.calls));
    check(response.at("choices").at(0).at("message").contains("tool_calls") == !parsed.calls.empty(),
          "tool_calls lost");
  }
  return 0;
}
