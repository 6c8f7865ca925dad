// An application written with the Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`) against
// `nanoinfer serve`: generateObject with a zod schema, streamText, and generateText with a tool
// over two steps, each checked on what the app receives (and, for the tool, on what it sends
// back). The model is tests/apps' synthetic Qwen2 (apps_common.mjs). Run by CTest
// (`apps_ai_sdk`):
//
//   node tests/apps/ai_sdk.test.mjs --nanoinfer build/release/nanoinfer --deps .deps/apps-test \
//     --tokenizer .deps/qwen-tokenizer
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MODEL_ID, appTest, recordingFetch, serveForTests } from './apps_common.mjs';

const { args, require } = appTest('ai_sdk', ['ai', '@ai-sdk/openai-compatible', 'zod']);
const { generateObject, generateText, stepCountIs, streamText, tool } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { z } = require('zod');

const server = serveForTests(args);

// supportsStructuredOutputs: schemas go out as OpenAI's json_schema response format;
// includeUsage: streams ask for the usage chunk (stream_options.include_usage).
function model(fetchImpl = undefined) {
  const provider = createOpenAICompatible({
    name: 'nanoinfer', baseURL: server.api, apiKey: 'none', supportsStructuredOutputs: true, includeUsage: true,
    ...(fetchImpl ? { fetch: fetchImpl } : {}),
  });
  return provider.chatModel(MODEL_ID);
}
const settings = { temperature: 0, maxOutputTokens: 48, maxRetries: 0 };

const Order = z.object({
  item: z.enum(['tea', 'coffee', 'juice']),
  quantity: z.number().int().min(1).max(9),
  takeaway: z.boolean(),
  notes: z.array(z.enum(['hot', 'iced', 'sweet'])).max(2),
});

test('generateObject returns an object the zod schema accepts', async () => {
  const recorder = recordingFetch();
  const { object, finishReason, usage } = await generateObject({
    model: model(recorder.fetch), schema: Order, schemaName: 'order', prompt: 'One order, please.', ...settings,
  });
  assert.deepEqual(Order.parse(object), object);
  assert.deepEqual(Object.keys(object).sort(), ['item', 'notes', 'quantity', 'takeaway']);
  assert.equal(finishReason, 'stop');
  assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0);
  assert.equal(recorder.bodies[0].body.response_format.type, 'json_schema');
});

test('streamText: the text deltas concatenate to what the same greedy request returns whole', async () => {
  const prompt = 'Write two lines about the sea.';
  const result = streamText({ model: model(), prompt, ...settings });
  const deltas = [];
  for await (const delta of result.textStream) deltas.push(delta);
  assert.ok(deltas.length > 1, `expected several deltas, got ${deltas.length}`);
  assert.equal(deltas.join(''), await result.text);
  const whole = await generateText({ model: model(), prompt, ...settings });
  assert.ok(whole.text.length > 0);
  assert.equal(deltas.join(''), whole.text);
  assert.equal((await result.usage).outputTokens, whole.usage.outputTokens);
});

test('tools: a required call with schema-valid input, executed, its result sent back in step two', async () => {
  const Input = z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), days: z.number().int().min(1).max(7) });
  const executed = [];
  const recorder = recordingFetch();
  const result = await generateText({
    model: model(recorder.fetch), prompt: 'What will the weather be in Lima?', ...settings,
    maxOutputTokens: 256,  // room for the call's markup, which a random model spells in short tokens
    tools: {
      forecast: tool({
        description: 'The forecast of a city for some days',
        inputSchema: Input,
        execute: async (input) => {
          executed.push(input);
          return { city: input.city, days: input.days, sky: 'clear' };
        },
      }),
    },
    // Step one must call the tool; step two answers in text with the result in hand.
    prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }),
    stopWhen: stepCountIs(2),
  });
  assert.equal(result.steps.length, 2);
  const calls = result.steps[0].toolCalls;
  assert.ok(calls.length >= 1);
  for (const call of calls) {
    assert.equal(call.toolName, 'forecast');
    assert.deepEqual(Input.parse(call.input), call.input);
  }
  assert.deepEqual(executed, calls.map((c) => c.input));
  assert.deepEqual(result.steps[0].toolResults.map((r) => r.output),
    executed.map((i) => ({ city: i.city, days: i.days, sky: 'clear' })));
  assert.equal(result.steps[0].finishReason, 'tool-calls');
  // Step two's request carried each call and its result, under the call's id.
  assert.equal(recorder.bodies.length, 2);
  assert.equal(recorder.bodies[0].body.tool_choice, 'required');
  const sent = recorder.bodies[1].body.messages;
  const toolMessages = sent.filter((m) => m.role === 'tool');
  assert.deepEqual(toolMessages.map((m) => m.tool_call_id), calls.map((c) => c.toolCallId));
  assert.deepEqual(toolMessages.map((m) => JSON.parse(m.content)), executed.map((i) => ({ city: i.city, days: i.days, sky: 'clear' })));
  assert.deepEqual(result.steps[1].toolCalls, []);
  assert.ok(result.text.length > 0);
  assert.equal(result.text, result.steps[1].text);
});
