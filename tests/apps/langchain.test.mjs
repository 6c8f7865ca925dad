// An application written with LangChain.js (@langchain/openai's ChatOpenAI) against `nanoinfer
// serve`: structured output with a zod schema, a tool-calling agent loop over two turns, and
// streaming, each checked on what the app receives (and, for the loop, on what it sends). The
// model is tests/apps' synthetic Qwen2 (apps_common.mjs). Run by CTest (`apps_langchain`):
//
//   node tests/apps/langchain.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/apps-test \
//     --tokenizer .deps/qwen-tokenizer
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MODEL_ID, appTest, recordingFetch, serveForTests } from './apps_common.mjs';

const { args, require } = appTest('langchain', ['@langchain/openai', '@langchain/core/messages', 'zod']);
const { ChatOpenAI } = require('@langchain/openai');
const { AIMessage, AIMessageChunk, HumanMessage, ToolMessage } = require('@langchain/core/messages');
const { tool } = require('@langchain/core/tools');
const { z } = require('zod');

const server = serveForTests(args);

function chatModel(options = {}, fetchImpl = undefined) {
  return new ChatOpenAI({
    model: MODEL_ID, apiKey: 'none', temperature: 0, maxTokens: 48, maxRetries: 0,
    configuration: { baseURL: server.api, ...(fetchImpl ? { fetch: fetchImpl } : {}) }, ...options,
  });
}

const Forecast = z.object({
  city: z.enum(['Paris', 'Oslo', 'Lima']),
  celsius: z.number().int().min(-40).max(50),
  sky: z.enum(['clear', 'cloudy', 'rain']),
  windy: z.boolean(),
}).strict();

test('withStructuredOutput(zod schema) returns an object the schema accepts', async () => {
  const recorder = recordingFetch();
  const structured = chatModel({}, recorder.fetch).withStructuredOutput(Forecast, { name: 'forecast', method: 'jsonSchema' });
  const forecast = await structured.invoke('The weather in one of the three cities, please.');
  assert.deepEqual(Forecast.parse(forecast), forecast);
  assert.deepEqual(Object.keys(forecast).sort(), ['celsius', 'city', 'sky', 'windy']);
  // It went out as OpenAI's json_schema response format, which the server turns into a grammar.
  assert.equal(recorder.bodies.length, 1);
  assert.equal(recorder.bodies[0].body.response_format.type, 'json_schema');
  assert.equal(recorder.bodies[0].body.response_format.json_schema.name, 'forecast');
});

test('a tool-calling agent loop: the call has schema-valid args, the second turn gets the tool result', async () => {
  const calls = [];
  const getWeather = tool(async ({ city, unit }) => {
    calls.push({ city, unit });
    return JSON.stringify({ city, temperature: 14, unit });
  }, {
    name: 'get_weather',
    description: 'The current temperature of a city',
    schema: z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), unit: z.enum(['celsius', 'fahrenheit']) }),
  });
  const recorder = recordingFetch();
  // Room for the call's markup, which a random model spells one short token at a time.
  const model = chatModel({ maxTokens: 256 }, recorder.fetch);
  const messages = [new HumanMessage('How warm is it in Oslo?')];
  // Turn 1: a call is required (the grammar makes it valid; the model's weights are random).
  const first = await model.bindTools([getWeather], { tool_choice: 'required' }).invoke(messages);
  assert.ok(first instanceof AIMessage);
  assert.ok(first.tool_calls.length >= 1, JSON.stringify(first));
  for (const call of first.tool_calls) {
    assert.equal(call.name, 'get_weather');
    assert.equal(typeof call.id, 'string');
    assert.ok(call.id.length > 0);
  }
  messages.push(first);
  for (const call of first.tool_calls) messages.push(await getWeather.invoke(call));
  assert.deepEqual(calls, first.tool_calls.map((c) => c.args));
  // Turn 2: the tool results go back; tool_choice none asks for a text answer.
  const second = await model.bindTools([getWeather], { tool_choice: 'none' }).invoke(messages);
  assert.ok(second instanceof AIMessage);
  assert.deepEqual(second.tool_calls, []);
  assert.equal(typeof second.content, 'string');
  assert.ok(second.content.length > 0);
  // What the server received on turn 2: the assistant's calls and one tool message per call,
  // carrying the tool's output under the call's id; and it prompted for all of it.
  assert.equal(recorder.bodies.length, 2);
  const sent = recorder.bodies[1].body.messages;
  assert.deepEqual(sent[1].tool_calls.map((c) => c.id), first.tool_calls.map((c) => c.id));
  const toolMessages = sent.filter((m) => m.role === 'tool');
  assert.deepEqual(toolMessages.map((m) => m.tool_call_id), first.tool_calls.map((c) => c.id));
  assert.deepEqual(toolMessages.map((m) => JSON.parse(m.content)),
    calls.map(({ city, unit }) => ({ city, temperature: 14, unit })));
  assert.ok(messages.slice(2).every((m) => m instanceof ToolMessage));
  assert.ok(second.usage_metadata.input_tokens > first.usage_metadata.input_tokens);
});

test('streamed chunks concatenate to the text the same greedy request returns whole', async () => {
  const prompt = 'Tell me a short story.';
  const chunks = [];
  for await (const chunk of await chatModel({ streaming: true }).stream(prompt)) {
    assert.ok(chunk instanceof AIMessageChunk);
    chunks.push(chunk);
  }
  const texts = chunks.map((c) => c.content).filter((t) => t !== '');
  assert.ok(texts.length > 1, `expected several text chunks, got ${texts.length}`);
  const whole = await chatModel().invoke(prompt);
  assert.equal(texts.join(''), whole.content);
  assert.ok(whole.content.length > 0);
  const merged = chunks.reduce((a, b) => a.concat(b));
  assert.equal(merged.content, whole.content);
});
