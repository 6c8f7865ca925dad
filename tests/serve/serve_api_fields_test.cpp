// The request fields of structured output, logprobs and OpenAI's penalties in `serve`'s wire
// format (src/serve/api.h): parsed, range-checked, refused by name when not enforceable or not
// implemented, and the logprobs response shapes; the field table (unknown fields, vendor fields
// accepted and ignored, OpenAI's ranges), the prompt forms of /v1/completions, random ids.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cfloat>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/logit_processor.h"
#include "nanoinfer/sampler.h"
#include "serve/api.h"

namespace nanoinfer::serve {
namespace {

using json = nlohmann::json;

CompletionRequest chat(const json& extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  if (!extra.is_null()) body.update(extra);
  return parse_request(body.dump(), Endpoint::Chat);
}

std::string refusal(const json& extra, Endpoint endpoint = Endpoint::Chat) {
  json body = endpoint == Endpoint::Chat ? json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}
                                         : json{{"prompt", "hi"}};
  if (!extra.is_null()) body.update(extra);
  try {
    parse_request(body.dump(), endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.what();
  }
  return "";
}

TEST(ServeApiFields, ResponseFormatAndGrammarCompile) {
  EXPECT_EQ(chat({}).grammar, nullptr);
  EXPECT_EQ(chat({{"response_format", {{"type", "text"}}}}).grammar, nullptr);
  const CompletionRequest o = chat({{"response_format", {{"type", "json_object"}}}});
  ASSERT_NE(o.grammar, nullptr);
  GrammarState s(*o.grammar);
  EXPECT_TRUE(s.advance(std::string_view(R"({"a":1})")) && s.complete());
  const CompletionRequest j =
      chat({{"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", {{"type", "boolean"}}}}}}}});
  ASSERT_NE(j.grammar, nullptr);
  GrammarState b(*j.grammar);
  EXPECT_TRUE(b.advance(std::string_view("false")) && b.complete());
  const CompletionRequest g = parse_request(R"({"prompt":"p","grammar":"root ::= \"x\""})", Endpoint::Completion);
  ASSERT_NE(g.grammar, nullptr);
}

TEST(ServeApiFields, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","format":"uri"}}}})",
       "'format'"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})", "schema"},
      {R"({"response_format":{"type":"yaml"}})", "response_format.type"},
      {R"({"response_format":{"type":"json_object"},"grammar":"root ::= \"a\""})", "'grammar'"},
      {R"({"grammar":"root ::= undefined-rule"})", "undefined-rule"},
      {R"({"tools":[{"type":"function"}]})", "tools[0].function"},
      {R"({"tool_choice":"required"})", "'tool_choice'"},
      {R"({"functions":[]})", "'functions'"},
      {R"({"modalities":["audio"]})", "'modalities'"},
      {R"({"top_logprobs":2})", "'top_logprobs'"},
      {R"({"logprobs":true,"top_logprobs":21})", "'top_logprobs'"},
      {R"({"logprobs":3})", "'logprobs'"},
      {R"({"frequency_penalty":2.5})", "'frequency_penalty'"},
      {R"({"presence_penalty":-3})", "'presence_penalty'"},
      {R"({"logit_bias":{"x1":1}})", "'logit_bias'"},
      {R"({"logit_bias":{"12":200}})", "'logit_bias'"},
      {R"({"n":3})", "'n'"},
  };
  for (const auto& [extra, needle] : cases) {
    const std::string e = refusal(json::parse(extra));
    EXPECT_NE(e.find(needle), std::string::npos) << extra << " gave '" << e << "'";
  }
  EXPECT_NE(refusal({{"echo", true}}, Endpoint::Completion).find("'echo'"), std::string::npos);
  EXPECT_NE(refusal({{"best_of", 2}}, Endpoint::Completion).find("'best_of'"), std::string::npos);
  EXPECT_NE(refusal({{"suffix", "s"}}, Endpoint::Completion).find("'suffix'"), std::string::npos);
  EXPECT_NE(refusal({{"logprobs", true}}, Endpoint::Completion).find("'logprobs'"), std::string::npos);
  // What changes nothing is accepted.
  EXPECT_EQ(refusal({{"tools", json::array()}, {"tool_choice", "none"}, {"user", "u"}, {"parallel_tool_calls", true}}),
            "");
}

TEST(ServeApiFields, LogprobsAndPenalties) {
  EXPECT_EQ(chat({}).top_logprobs, -1);
  EXPECT_EQ(chat({{"logprobs", false}}).top_logprobs, -1);
  EXPECT_EQ(chat({{"logprobs", true}}).top_logprobs, 0);
  EXPECT_EQ(chat({{"logprobs", true}, {"top_logprobs", 20}}).top_logprobs, 20);
  EXPECT_EQ(parse_request(R"({"prompt":"p","logprobs":5})", Endpoint::Completion).top_logprobs, 5);
  const CompletionRequest p =
      chat({{"frequency_penalty", 0.5}, {"presence_penalty", -1}, {"logit_bias", {{"7", -100}, {"3", 2.5}}}});
  EXPECT_EQ(p.frequency_penalty, 0.5);
  EXPECT_EQ(p.presence_penalty, -1);
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, double>{{3, 2.5}, {7, -100}}));
}

// Sampling values are refused at validation (400 naming the field) unless every token can be
// sampled with them: before, a repetition_penalty of 1e308 or a temperature of 1e-320 was
// accepted and failed at the first generated token, a 500.
TEST(ServeApiFields, SamplingValuesThatWouldOverflowAreRefusedByName) {
  const std::vector<std::pair<json, std::string>> refused = {
      {{{"repetition_penalty", 1e308}}, "'repetition_penalty'"},
      {{{"repetition_penalty", 1e-320}}, "'repetition_penalty'"},
      {{{"repetition_penalty", 100.5}}, "'repetition_penalty'"},
      {{{"repetition_penalty", 0.005}}, "'repetition_penalty'"},
      {{{"temperature", 1e-320}}, "'temperature'"},
      {{{"temperature", 1e-6}}, "'temperature'"},
  };
  for (const auto& [extra, needle] : refused) {
    const std::string e = refusal(extra);
    EXPECT_NE(e.find(needle), std::string::npos) << extra.dump() << " gave '" << e << "'";
  }
  // The extremes accepted, with the largest logits a model can produce (finite floats), the
  // OpenAI penalties and biases at their bounds: every score stays finite, nothing throws.
  for (const double penalty : {0.01, 100.0}) {
    const CompletionRequest r = chat({{"temperature", 1e-5},
                                      {"repetition_penalty", penalty},
                                      {"frequency_penalty", -2},
                                      {"presence_penalty", -2},
                                      {"logit_bias", {{"0", 100}, {"1", -100}}}});
    SamplerParams params{.temperature = *r.sampling.temperature, .top_k = 0, .top_p = 1.0};
    Sampler sampler(4, params);
    const std::vector<float> logits = {FLT_MAX, -FLT_MAX, FLT_MAX, 0.0f};
    const std::vector<int32_t> context = {0, 1, 2, 3, 0, 0};
    std::span<double> scores = sampler.load(logits);
    RepetitionPenalty(4, *r.sampling.repetition_penalty).process(scores, context);
    FrequencyPresencePenalty openai(4, r.frequency_penalty, r.presence_penalty);
    for (int i = 0; i < 1000; ++i) openai.accept(0);
    openai.process(scores, context);
    LogitBias(r.logit_bias).process(scores, context);
    Candidates c;
    ASSERT_NO_THROW(c = sampler.select()) << penalty;
    ASSERT_FALSE(c.ids.empty());
    for (const double p : c.probs) EXPECT_TRUE(std::isfinite(p));
  }
  EXPECT_EQ(refusal({{"temperature", 0}}), "");
  EXPECT_EQ(refusal({{"temperature", 2}}), "");
  // Past OpenAI's range, [0, 2]: refused as OpenAI refuses it.
  EXPECT_NE(refusal({{"temperature", 1e300}}).find("'temperature'"), std::string::npos);
}

TEST(ServeApiFields, LogprobsShapes) {
  const ResponseId id{"x", 1, "m"};
  const std::vector<TokenLogprob> lps = {{"He", -0.5, {{"He", -0.5}, {"A", -1.25}}}, {"\xe2\x82", -2.0, {}}};
  const json c = json::parse(response_json(Endpoint::Chat, id, "He", FinishReason::Stop, {1, 2}, nullptr, &lps));
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "He");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], json::array({72, 101}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "A");
  EXPECT_EQ(content[1]["bytes"], json::array({0xe2, 0x82}));
  EXPECT_TRUE(json::parse(response_json(Endpoint::Chat, id, "He", FinishReason::Stop, {1, 2}))["choices"][0]["logprobs"]
                  .is_null());
  const json t =
      json::parse(response_json(Endpoint::Completion, id, "He", FinishReason::Length, {1, 2}, nullptr, &lps));
  const json& l = t["choices"][0]["logprobs"];
  EXPECT_EQ(l["token_logprobs"], json::array({-0.5, -2.0}));
  EXPECT_EQ(l["top_logprobs"][0]["A"], -1.25);
  EXPECT_EQ(l["text_offset"], json::array({0, 2}));
  const json chunk =
      json::parse(chunk_json(Endpoint::Completion, id, {.text = "x", .logprobs = &lps, .text_offset = 10}));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], json::array({10, 12}));
}

TEST(ServeFieldTable, UnknownFieldsAreRefusedAndVendorFieldsAccepted) {
  EXPECT_EQ(refusal(json({{"temprature", 0.5}})), "Unrecognized request argument supplied: temprature");
  EXPECT_EQ(refusal({{"messages", json::array()}}, Endpoint::Completion),
            "Unrecognized request argument supplied: messages");
  EXPECT_EQ(refusal(json({{"messages", json::array({{{"role", "user"}, {"content", "hi"}, {"mood", "x"}}})}})),
            "Unrecognized request argument supplied: messages[0].mood");
  // What clients send besides the output's own fields: accepted and ignored.
  EXPECT_EQ(refusal(json({{"user", "u1"},
                          {"metadata", {{"k", "v"}}},
                          {"store", false},
                          {"service_tier", "auto"},
                          {"safety_identifier", "s"},
                          {"prompt_cache_key", "c"},
                          {"prompt_cache_retention", "in-memory"},
                          {"verbosity", "medium"},
                          {"modalities", {"text"}},
                          {"stream_options", {{"include_usage", true}}},
                          {"messages", json::array({{{"role", "user"}, {"content", "hi"}, {"name", "ann"}}})}})),
            "");
  EXPECT_EQ(refusal({{"user", "u"}, {"echo", false}, {"best_of", 1}, {"suffix", nullptr}}, Endpoint::Completion), "");
  // Ignored fields are still checked for their type; output-changing ones are refused by name.
  EXPECT_NE(refusal(json({{"metadata", {{"k", 1}}}})).find("'metadata.k'"), std::string::npos);
  EXPECT_NE(refusal(json({{"store", "yes"}})).find("'store'"), std::string::npos);
  for (const char* name : {"reasoning_effort", "verbosity", "web_search_options", "audio", "prediction"}) {
    EXPECT_NE(refusal(json({{name, "high"}})).find(fmt::format("'{}' is not supported", name)), std::string::npos)
        << name;
  }
  EXPECT_NE(refusal(json({{"chat_template_kwargs", {{"tools_in_user_message", true}}}}))
                .find("'chat_template_kwargs.tools_in_user_message'"),
            std::string::npos);
}

TEST(ServeFieldTable, OpenAIsRangesAreRefusedLikeOpenAI) {
  EXPECT_EQ(refusal(json({{"temperature", 2}})), "");
  EXPECT_NE(refusal(json({{"temperature", 2.01}})).find("'temperature' must be in [0, 2]"), std::string::npos);
  EXPECT_NE(refusal(json({{"top_logprobs", 21}, {"logprobs", true}})).find("'top_logprobs'"), std::string::npos);
  EXPECT_NE(refusal(json({{"presence_penalty", -2.5}})).find("'presence_penalty'"), std::string::npos);
  EXPECT_NE(refusal(json({{"logit_bias", {{"5", 101}}}})).find("'logit_bias'"), std::string::npos);
}

TEST(ServeFieldTable, PromptFormsAndTemplateKwargs) {
  EXPECT_EQ(parse_request(R"({"prompt": ["Once"]})", Endpoint::Completion).prompt, "Once");
  EXPECT_EQ(parse_request(R"({"prompt": [5, 6, 7]})", Endpoint::Completion).prompt_ids,
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(parse_request(R"({"prompt": [[5, 6]]})", Endpoint::Completion).prompt_ids, (std::vector<int32_t>{5, 6}));
  const CompletionRequest batch = parse_request(R"({"prompt": ["a", [5, 6], "c"]})", Endpoint::Completion);
  ASSERT_EQ(batch.batch.size(), 3u);
  EXPECT_EQ(batch.batch[0].text, "a");
  EXPECT_EQ(batch.batch[1].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(batch.batch[2].text, "c");
  EXPECT_NE(refusal({{"prompt", json(std::vector<std::string>(65, "a"))}}, Endpoint::Completion).find("at most 64"),
            std::string::npos);
  EXPECT_NE(refusal({{"prompt", {"a", ""}}}, Endpoint::Completion).find("must not be empty"), std::string::npos);
  EXPECT_NE(refusal({{"prompt", {1, -2}}}, Endpoint::Completion).find("not a token id"), std::string::npos);
  EXPECT_NE(refusal({{"prompt", json::array()}}, Endpoint::Completion).find("must not be empty"), std::string::npos);
  EXPECT_EQ(chat({{"chat_template_kwargs", {{"enable_thinking", false}}}}).enable_thinking, false);
  EXPECT_FALSE(chat(nullptr).enable_thinking.has_value());
  // A reply's reasoning sent back: the template's think block again.
  const CompletionRequest r = parse_request(
      R"({"messages": [{"role": "user", "content": "q"},
                       {"role": "assistant", "content": "A.", "reasoning_content": "hmm"}]})",
      Endpoint::Chat);
  EXPECT_EQ(r.messages[1].content, "<think>\nhmm\n</think>\n\nA.");
  EXPECT_EQ(render_chat(r.messages, false, {}, ChatFormat::Qwen3),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nA.<|im_end|>\n");
}

TEST(ServeFieldTable, ResponseIdsAreRandomAndModelsHaveTheirOwnObject) {
  const std::string a = random_id("chatcmpl-"), b = random_id("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), std::string("chatcmpl-").size() + 24);
  const json m = json::parse(model_json({"m1", true}, 7));
  EXPECT_EQ(m, json({{"id", "m1"}, {"object", "model"}, {"created", 7}, {"owned_by", "nanoinfer"}, {"loaded", true}}));
}

TEST(ServeFieldTable, StreamOptionsAndReasoningContent) {
  EXPECT_EQ(refusal({{"stream", true}, {"stream_options", {{"include_usage", true}, {"include_obfuscation", false}}}}),
            "");
  EXPECT_EQ(refusal({{"stream_options", {{"chunk_size", 4}}}}),
            "Unrecognized request argument supplied: stream_options.chunk_size");
  const ResponseId id{"chatcmpl-x", 1, "m"};
  const json whole = json::parse(
      response_json(Endpoint::Chat, id, "Paris.", FinishReason::Stop, {3, 9}, nullptr, nullptr, nullptr, "thinking"));
  EXPECT_EQ(whole["choices"][0]["message"]["reasoning_content"], "thinking");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Paris.");
  EXPECT_FALSE(
      json::parse(response_json(Endpoint::Chat, id, "x", FinishReason::Stop, {}))["choices"][0]["message"].contains(
          "reasoning_content"));
  const json chunk = json::parse(chunk_json(Endpoint::Chat, id, {.reasoning = "hmm"}));
  EXPECT_EQ(chunk["choices"][0]["delta"], json({{"reasoning_content", "hmm"}}));
}

}  // namespace
}  // namespace nanoinfer::serve
