// Tool calls in `serve` (src/serve/tools.h, api.h): OpenAI requests with tools, tool_calls and
// tool messages rendered byte for byte as Qwen2.5's Jinja template renders them (golden file
// tests/data/tokenizer/chat_template_tool_cases.json, written by
// tools/chat-template-reference/render_tools.py); the model's <tool_call> blocks parsed into
// calls, the same whether the text comes whole or split at any byte; the 400s; the response and
// chunk shapes; and `required` / a named function decoded under the grammar with the default
// model at temperature 1, whose calls always parse and validate.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/open_model.h"
#include "serve/api.h"
#include "serve/scheduler.h"
#include "serve/tools.h"

namespace nanoinfer::serve {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::vector<std::string> rendered_tools(const CompletionRequest& r) {
  std::vector<std::string> out;
  for (const ToolDef& t : r.tools.tools) out.push_back(t.rendered);
  return out;
}

TEST(ServeTools, RequestsRenderAsTheJinjaTemplateOnEveryGoldenCase) {
  std::ifstream in(std::string(NANOINFER_SOURCE_DIR) + "/tests/data/tokenizer/chat_template_tool_cases.json");
  ASSERT_TRUE(in) << "tests/data/tokenizer/chat_template_tool_cases.json missing";
  const ojson golden = ojson::parse(in);
  size_t checked = 0;
  for (const ojson& c : golden["cases"]) {
    ojson body = {{"messages", c["messages"]}};
    if (c.contains("tools")) body["tools"] = c["tools"];
    const CompletionRequest r = parse_request(body.dump(), Endpoint::Chat);
    const std::vector<std::string> tools = rendered_tools(r);
    EXPECT_EQ(render_chat(r.messages, c["add_generation_prompt"].get<bool>(), tools), c["rendered"].get<std::string>())
        << "case " << checked << ": " << body.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 14u);
}

TEST(ServeTools, TemplateJsonIsPythonsJsonDumps) {
  const ojson v =
      ojson::parse(R"({"b": 1, "a": [1, 2.5, "x\u00e9\n\"\u0001", true, null, {}, []], "c": {"z": -0.0, "y": 1e-05}})");
  EXPECT_EQ(template_json(v),
            "{\"b\": 1, \"a\": [1, 2.5, \"x\xC3\xA9\\n\\\"\\u0001\", true, null, {}, []], \"c\": {\"z\": -0.0, \"y\": "
            "1e-05}}");
}

ToolRequest two_tools() {
  ToolRequest t;
  t.tools = {
      {"get_weather", "",
       R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city"],"additionalProperties":false})"},
      {"get_time", "", ""}};
  return t;
}

const std::string kTwoCalls =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
    "\"c\"}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n";

TEST(ServeTools, ParsesSeveralCallsAndKeepsTheTextOutsideThem) {
  const ParsedOutput p = parse_tool_output(kTwoCalls, two_tools());
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","unit":"c"})");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  for (const ToolCall& c : p.calls) {
    EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
    EXPECT_EQ(c.id.size(), 29u) << c.id;
  }
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  // Only calls: no content. Arguments given as a string holding JSON are kept as they are.
  const ParsedOutput q = parse_tool_output(
      "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>", two_tools());
  EXPECT_EQ(q.content, "");
  ASSERT_EQ(q.calls.size(), 1u);
  EXPECT_EQ(q.calls[0].arguments, R"({"tz": "UTC"})");
}

TEST(ServeTools, MalformedBlocksStayText) {
  for (const std::string& text : {
           std::string("plain answer, trailing space and newline \n"),
           std::string("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}\n</tool_call>"),    // bad JSON
           std::string("<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"),     // unknown tool
           std::string("<tool_call>\n{\"arguments\": {}}\n</tool_call>"),                           // no name
           std::string("<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]}\n</tool_call>"),  // not an object
           std::string("a <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"),             // unterminated
           std::string("ends with a partial tag <tool_ca"),
       }) {
    const ParsedOutput p = parse_tool_output(text, two_tools());
    EXPECT_EQ(p.calls.size(), 0u) << text;
    EXPECT_EQ(p.content, text);
  }
  // A malformed block next to a good one: the good one is a call, the bad one text.
  const ParsedOutput p = parse_tool_output(
      "<tool_call>oops</tool_call> then <tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
      two_tools());
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "<tool_call>oops</tool_call> then");
}

TEST(ServeTools, ParallelToolCallsFalseKeepsTheFirstCall) {
  ToolRequest t = two_tools();
  t.parallel = false;
  const ParsedOutput p = parse_tool_output(kTwoCalls + "more text", t);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.content, "Let me check.");
}

// Streaming: the text split in two at every byte (and fed byte by byte) gives the same content
// and calls as the whole; a call is released only once its block is complete, and content
// before a block is released before the block is.
TEST(ServeTools, StreamingSplitsAtEveryBytePositionAgree) {
  const std::string text = kTwoCalls + "Done <tool_call>bad</tool_call>.";
  const ParsedOutput whole = parse_tool_output(text, two_tools());
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.content, "Let me check.Done <tool_call>bad</tool_call>.");
  const size_t first_close = text.find("</tool_call>") + std::string("</tool_call>").size();
  auto check = [&](const std::vector<size_t>& cuts) {
    ToolCallParser parser({"get_weather", "get_time"}, ToolRequest::kMaxParallelCalls);
    std::string content;
    std::vector<ToolCall> calls;
    size_t fed = 0;
    std::vector<ToolCallParser::Event> events;
    auto take = [&](bool finished) {
      for (auto& e : events) {
        if (e.call) {
          // The first call cannot be released before its closing tag was fed.
          if (calls.empty()) {
            EXPECT_GE(fed, first_close) << "cut at " << cuts[0];
          }
          calls.push_back(*e.call);
        } else {
          EXPECT_FALSE(e.content.empty());
          content += e.content;
        }
      }
      events.clear();
      (void)finished;
    };
    size_t at = 0;
    for (size_t cut : cuts) {
      parser.feed(std::string_view(text).substr(at, cut - at), events);
      fed = cut;
      take(false);
      // The content before the first block is out once the block started.
      if (fed > text.find("<tool_call>") + 11 && fed < first_close) {
        EXPECT_EQ(content, "Let me check.");
      }
      at = cut;
    }
    parser.feed(std::string_view(text).substr(at), events);
    fed = text.size();
    take(false);
    parser.finish(events);
    take(true);
    EXPECT_EQ(content, whole.content) << "cut at " << cuts[0];
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].arguments, whole.calls[0].arguments);
    EXPECT_EQ(calls[1].name, "get_time");
  };
  for (size_t i = 0; i <= text.size(); ++i) check({i});
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  check(every);
}

CompletionRequest chat_with(const std::string& extra) {
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])" +
                           extra + "}";
  return parse_request(body, Endpoint::Chat);
}

std::string tool_refusal(const std::string& body) {
  try {
    parse_request(body, Endpoint::Chat);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.what();
  }
  return "(accepted)";
}

TEST(ServeTools, ToolChoiceSetsTheGrammar) {
  EXPECT_EQ(chat_with("").tools.choice, ToolChoice::Auto);
  EXPECT_EQ(chat_with("").grammar, nullptr);
  EXPECT_EQ(chat_with(R"(, "tool_choice": "none")").tools.choice, ToolChoice::None);
  EXPECT_FALSE(chat_with(R"(, "tool_choice": "none")").tools.parse());
  const CompletionRequest req = chat_with(R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  ASSERT_NE(req.grammar, nullptr);
  EXPECT_FALSE(req.tools.parallel);
  GrammarState s(*req.grammar);
  EXPECT_TRUE(s.advance(
      std::string_view("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>")));
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(GrammarState(*req.grammar).advance(std::string_view("<tool_call>\n{\"name\": \"get_time\"")));
  EXPECT_FALSE(GrammarState(*req.grammar)
                   .advance(std::string_view("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}")));
  const CompletionRequest named =
      chat_with(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.tools.choice, ToolChoice::Named);
  ASSERT_NE(named.grammar, nullptr);
}

TEST(ServeTools, BadToolRequestsAre400sNamingTheProblem) {
  const std::string user = R"({"messages": [{"role": "user", "content": "hi"}], )";
  EXPECT_NE(tool_refusal(user + R"("tools": [{"type": "function", "function": {"description": "x"}}]})")
                .find("tools[0].function.name"),
            std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("tools": [{"type": "function"}]})").find("tools[0].function"), std::string::npos);
  EXPECT_NE(
      tool_refusal(user + R"("tools": [{"type": "retrieval", "function": {"name": "f"}}]})").find("tools[0].type"),
      std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("tools": [{"type": "function", "function": {"name": "bad name!"}}]})")
                .find("tools[0].function.name"),
            std::string::npos);
  EXPECT_NE(
      tool_refusal(
          user +
          R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})")
          .find("'f'"),
      std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("tools": {"name": "f"}})").find("'tools'"), std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("tool_choice": "required"})").find("'tool_choice'"), std::string::npos);
  EXPECT_NE(
      tool_refusal(user + R"("tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}]})")
          .find("'tool_choice'"),
      std::string::npos);
  EXPECT_NE(
      tool_refusal(
          user +
          R"("tool_choice": {"type": "function", "function": {"name": "g"}}, "tools": [{"type": "function", "function": {"name": "f"}}]})")
          .find("'g'"),
      std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("parallel_tool_calls": "yes"})").find("'parallel_tool_calls'"), std::string::npos);
  // A parameters schema the grammar cannot enforce, under required: named, never loosened.
  const std::string not_schema = tool_refusal(
      user +
      R"("tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"not": {"type": "null"}}}}]})");
  EXPECT_NE(not_schema.find("'not'"), std::string::npos) << not_schema;
  EXPECT_NE(not_schema.find("'f'"), std::string::npos) << not_schema;
  EXPECT_NE(
      tool_refusal(
          user +
          R"("tool_choice": "required", "response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}]})")
          .find("response_format"),
      std::string::npos);
  EXPECT_NE(tool_refusal(R"({"messages": [{"role": "tool", "content": "21"}]})").find("tool_call_id"),
            std::string::npos);
  EXPECT_NE(
      tool_refusal(
          R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]})")
          .find("arguments"),
      std::string::npos);
  EXPECT_NE(
      tool_refusal(
          R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}]})")
          .find("tool_calls[0].function.name"),
      std::string::npos);
  EXPECT_NE(tool_refusal(R"({"messages": [{"role": "assistant", "content": null}]})").find("messages[0].content"),
            std::string::npos);
  EXPECT_NE(tool_refusal(user + R"("functions": [{"name": "f"}]})").find("'functions'"), std::string::npos);
  // Nesting deep enough to overflow a recursive writer: a 400, not a crash.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(
      tool_refusal(user + R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"default": )" +
                   deep + "}}}]}")
          .find("deeper"),
      std::string::npos);
  EXPECT_NE(
      tool_refusal(
          R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ")" +
          deep + R"("}}]}]})")
          .find("deeper"),
      std::string::npos);
}

TEST(ServeTools, DeeplyNestedResponseFormatSchemaIsA400) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(tool_refusal(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema",
      "json_schema": {"name": "x", "schema": {"type": "object", "default": )" +
                         deep + "}}}}")
                .find("deeper"),
            std::string::npos);
}

TEST(ServeTools, DeeplyNestedGbnfGroupsAreA400) {
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= )" +
                           std::string(100000, '(') + R"( \"a\" )" + std::string(100000, ')') + "\"}";
  EXPECT_NE(tool_refusal(body).find("nested deeper"), std::string::npos);
  const std::string stars = R"({"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= \"a\")" +
                            std::string(100000, '*') + "\"}";
  EXPECT_NE(tool_refusal(stars).find("repetition operators"), std::string::npos);
  // 64 levels are fine.
  const std::string ok = R"({"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= )" +
                         std::string(64, '(') + R"( \"a\" )" + std::string(64, ')') + "\"}";
  EXPECT_NE(parse_request(ok, Endpoint::Chat).grammar, nullptr);
}

TEST(ServeTools, DeeplyNestedModelOutputStaysText) {
  const std::string text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"a\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}}</tool_call>";
  const ParsedOutput p = parse_tool_output(text, two_tools());
  EXPECT_EQ(p.calls.size(), 0u);
  EXPECT_EQ(p.content, text);
}

TEST(ServeTools, ResponseAndChunkShapes) {
  const ResponseId id{"chatcmpl-1", 1, "m"};
  const std::vector<ToolCall> calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"}};
  const json r =
      json::parse(response_json(Endpoint::Chat, id, "", FinishReason::ToolCalls, {3, 4}, nullptr, nullptr, &calls));
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"], json::parse(R"([{"id": "call_abc", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}])"));
  const json with_text = json::parse(
      response_json(Endpoint::Chat, id, "Sure.", FinishReason::ToolCalls, {3, 4}, nullptr, nullptr, &calls));
  EXPECT_EQ(with_text["choices"][0]["message"]["content"], "Sure.");
  const std::vector<ToolCall> none;
  const json plain =
      json::parse(response_json(Endpoint::Chat, id, "", FinishReason::Stop, {3, 4}, nullptr, nullptr, &none));
  EXPECT_EQ(plain["choices"][0]["message"]["content"], "");
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  const json chunk = json::parse(chunk_json(Endpoint::Chat, id, {.tool_call = &calls[0], .tool_index = 1}));
  EXPECT_EQ(chunk["choices"][0]["delta"],
            json::parse(R"({"tool_calls": [{"index": 1, "id": "call_abc", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})"));
  EXPECT_EQ(
      json::parse(chunk_json(Endpoint::Chat, id, {.finish = FinishReason::ToolCalls}))["choices"][0]["finish_reason"],
      "tool_calls");
}

// On Qwen2.5's own vocabulary the grammar of `required` lets the model write its <tool_call>
// and </tool_call> tokens (non-special added tokens, what its template and training use), as
// well as the same text spelled by ordinary tokens; special tokens never, end of sequence only
// after a whole call.
TEST(ServeTools, TheGrammarAllowsQwensToolCallTokens) {
  const std::filesystem::path dir = std::filesystem::path(NANOINFER_SOURCE_DIR) / ".deps/qwen-tokenizer";
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    GTEST_SKIP() << dir << " is missing: run scripts/fetch-test-assets.sh";
  const Tokenizer tok = Tokenizer::load(dir);
  const std::optional<int32_t> open = tok.token_id("<tool_call>"), close = tok.token_id("</tool_call>"),
                               im_end = tok.token_id("<|im_end|>"), lt = tok.token_id("<");
  ASSERT_TRUE(open && close && im_end && lt);
  const CompletionRequest r = chat_with(R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  const auto trie = VocabTrie::of(tok);
  GrammarProcessor processor(*r.grammar, trie, {*im_end});
  std::vector<double> scores(static_cast<size_t>(tok.vocab_size()), 0.0);
  processor.process(scores, {});
  EXPECT_EQ(scores[static_cast<size_t>(*open)], 0.0);
  EXPECT_EQ(scores[static_cast<size_t>(*lt)], 0.0);
  EXPECT_EQ(scores[static_cast<size_t>(*im_end)], -INFINITY);
  EXPECT_EQ(scores[static_cast<size_t>(*close)], -INFINITY);
  // Through a whole call written with the added tokens: </tool_call> allowed where it closes,
  // then only end of sequence.
  const std::vector<int32_t> call =
      tok.encode("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>");
  ASSERT_EQ(call.front(), *open);
  ASSERT_EQ(call.back(), *close);
  for (size_t i = 0; i < call.size(); ++i) {
    std::fill(scores.begin(), scores.end(), 0.0);
    processor.process(scores, {});
    ASSERT_EQ(scores[static_cast<size_t>(call[i])], 0.0) << "token " << i << " '" << tok.token_bytes(call[i]) << "'";
    if (i + 1 < call.size()) {
      EXPECT_EQ(scores[static_cast<size_t>(*im_end)], -INFINITY) << i;
    }
    processor.accept(call[i]);
  }
  std::fill(scores.begin(), scores.end(), 0.0);
  processor.process(scores, {});
  EXPECT_EQ(scores[static_cast<size_t>(*im_end)], 0.0);
  EXPECT_EQ(std::count(scores.begin(), scores.end(), 0.0), 1);
}

// `required` and a named function with the untrained default model at temperature 1: every
// generation that ends by end of sequence is calls only, each parsing and validating against
// its function's parameters (checked here by hand for this schema; the node test runs ajv).
//
// The default model's config allows 256 positions and the tools block alone is longer in its
// small vocabulary, so it is opened from a copy whose config allows 1024 (same weights, same
// tokenizer: RoPE is defined at any position; the model is untrained either way).
std::filesystem::path default_model_with_context(size_t positions) {
  const std::filesystem::path src = std::filesystem::path(NANOINFER_SOURCE_DIR) / "data/default-model";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("nanoinfer-tools-test-{}", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(src)) {
    if (entry.path().filename() != "config.json")
      std::filesystem::create_symlink(entry.path(), dir / entry.path().filename());
  }
  std::ifstream in(src / "config.json");
  json config = json::parse(in);
  config["max_position_embeddings"] = positions;
  std::ofstream(dir / "config.json") << config.dump(1);
  return dir;
}

TEST(ServeTools, ConstrainedCallsAlwaysParseAndValidate) {
  if (!std::filesystem::exists(std::filesystem::path(NANOINFER_SOURCE_DIR) / "data/default-model/model.safetensors")) {
    GTEST_SKIP() << "data/default-model is missing";
  }
  const std::filesystem::path dir = default_model_with_context(1024);
  OpenOptions options;
  options.model.threads = 2;
  const OpenedModel m = open_model(dir.string(), options);
  std::filesystem::remove_all(dir);
  Metrics metrics;
  Scheduler scheduler(m.model, m.tokenizer, {.parallel = 4, .queue = 16}, metrics);
  const auto trie = VocabTrie::of(m.tokenizer);
  const std::string tools = R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])";
  struct Run {
    std::string choice;
    bool parallel;
    std::shared_ptr<Channel> channel;
    CompletionRequest r;
  };
  std::vector<Run> runs;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::string choice =
        seed % 2 ? R"("required")" : R"({"type": "function", "function": {"name": "get_weather"}})";
    const bool parallel = seed % 4 != 3;
    const std::string body = R"({"messages": [{"role": "user", "content": "Weather?"}], "tool_choice": )" + choice +
                             ", \"parallel_tool_calls\": " + (parallel ? "true" : "false") + ", " + tools + "}";
    CompletionRequest r = parse_request(body, Endpoint::Chat);
    ASSERT_NE(r.grammar, nullptr);
    Job job;
    job.prompt = encode_chat(m.tokenizer, r.messages, true, SpecialTokens::AllAsText, rendered_tools(r));
    job.max_tokens = 400;
    job.sampling = SamplerParams{.temperature = 1.0, .seed = seed};
    job.eos_ids = stop_token_ids(m.generation, m.tokenizer, true);
    job.grammar = r.grammar;
    job.trie = trie;
    runs.push_back({choice, parallel, scheduler.submit(job), std::move(r)});
  }
  int ended = 0;
  for (Run& run : runs) {
    std::string text;
    for (Channel::Piece p = run.channel->next();; p = run.channel->next()) {
      text += p.text;
      if (p.done) break;
    }
    ASSERT_EQ(run.channel->outcome(), Outcome::Finished) << run.channel->error();
    if (run.channel->finish_reason() != FinishReason::Stop) continue;
    ++ended;
    const ParsedOutput p = parse_tool_output(text, run.r.tools);
    EXPECT_EQ(p.content, "") << text;
    ASSERT_GE(p.calls.size(), 1u) << text;
    if (!run.parallel || run.r.tools.choice == ToolChoice::Named) {
      EXPECT_EQ(p.calls.size(), 1u) << text;
    }
    for (const ToolCall& c : p.calls) {
      const json args = json::parse(c.arguments);
      ASSERT_TRUE(args.is_object());
      if (run.r.tools.choice == ToolChoice::Named) {
        EXPECT_EQ(c.name, "get_weather");
      }
      if (c.name == "get_time") {
        EXPECT_EQ(args, json::object()) << c.arguments;
        continue;
      }
      ASSERT_EQ(c.name, "get_weather");
      ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << c.arguments;
      EXPECT_LE(args["city"].get<std::string>().size(), 8u * 4) << c.arguments;  // 8 code points
      ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << c.arguments;
      EXPECT_GE(args["days"].get<int>(), 1);
      EXPECT_LE(args["days"].get<int>(), 7);
      if (args.contains("unit")) {
        EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << c.arguments;
      }
      for (const auto& item : args.items())
        EXPECT_TRUE(item.key() == "city" || item.key() == "unit" || item.key() == "days");
    }
  }
  EXPECT_GE(ended, 4);
}

}  // namespace
}  // namespace nanoinfer::serve
