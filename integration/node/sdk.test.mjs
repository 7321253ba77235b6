// The official Node SDKs (openai 6.x, the last for Node 20, and
// @anthropic-ai/sdk 1.x, pinned in package.json and package-lock.json,
// installed by `make node-sdks`) against Vajra: what a user checks (text,
// usage, ids that chain, stream equal to non-stream, error classes and
// codes). The Go test TestNodeSDKs (integration/node_test.go) starts the
// server on the real model and runs this file with node --test, describing
// it in the environment: VAJRA_BASE_URL, VAJRA_API_KEY, VAJRA_MODEL.
// TestVLLMCoreWorker runs the tests named "(any model)" in front of vLLM's
// engine core, whose random-weight model answers chat with newlines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suite through the Go test TestNodeSDKs`);
  return v;
}

const base = env('VAJRA_BASE_URL');
const key = env('VAJRA_API_KEY');
const model = env('VAJRA_MODEL');
const oai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 });
const ant = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 60_000 });

const Q = [{ role: 'user', content: 'What is the capital of France?' }];
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

test('chat', async () => {
  const r = await oai.chat.completions.create({ model, messages: Q, max_tokens: 16, temperature: 0 });
  const c = r.choices[0];
  assert.ok(r.id.startsWith('chatcmpl-'));
  assert.equal(r.model, model);
  assert.equal(c.message.role, 'assistant');
  assert.ok(c.message.content.trim(), 'an answer that is not blank');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 16);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat stream equals non-stream (any model)', async () => {
  const kw = { model, messages: Q, max_tokens: 16, temperature: 0 };
  const whole = await oai.chat.completions.create(kw);
  const stream = await oai.chat.completions.create({ ...kw, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      text += ch.delta.content ?? '';
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('chat stream helper (any model)', async () => {
  // The SDK's own accumulator: finalChatCompletion() of a stream.
  const runner = oai.chat.completions.stream({ model, messages: Q, max_tokens: 8, temperature: 0 });
  const final = await runner.finalChatCompletion();
  const whole = await oai.chat.completions.create({ model, messages: Q, max_tokens: 8, temperature: 0 });
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  assert.equal(final.choices[0].finish_reason, whole.choices[0].finish_reason);
});

test('chat tools, required, streamed (any model)', async () => {
  // The city an enum: a model of random weights would fill a free string
  // until max_tokens.
  const tool = structuredClone(WEATHER);
  tool.function.parameters.properties.city.enum = ['Paris', 'Oslo'];
  tool.function.parameters.additionalProperties = false;
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const stream = await oai.chat.completions.create({
    model, messages, tools: [tool], tool_choice: 'required', max_tokens: 128, temperature: 0, stream: true,
  });
  let name = '';
  let args = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      for (const tc of ch.delta.tool_calls ?? []) {
        name += tc.function?.name ?? '';
        args += tc.function?.arguments ?? '';
      }
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.equal(name, 'get_weather', args);
  assert.equal(finish, 'tool_calls', `${name}(${args})`);
  assert.ok(['Paris', 'Oslo'].includes(JSON.parse(args).city), args);
});

test('chat structured_outputs choice (any model)', async () => {
  // vLLM's extension, through the SDK's untyped body fields.
  const r = await oai.chat.completions.create({
    model, messages: Q, max_tokens: 16, temperature: 0,
    structured_outputs: { choice: ['Paris', 'London', 'Rome'] },
  });
  assert.ok(['Paris', 'London', 'Rome'].includes(r.choices[0].message.content), r.choices[0].message.content);
});

test('completions', async () => {
  const r = await oai.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0, logprobs: 2 });
  const c = r.choices[0];
  assert.ok(c.text.trim());
  assert.equal(c.logprobs.tokens.join(''), c.text);
  assert.equal(r.usage.completion_tokens, c.logprobs.tokens.length);
  const stream = await oai.completions.create({ model, prompt: 'The capital of France is', max_tokens: 8, temperature: 0, stream: true });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, c.text);
});

test('responses stream and retrieve (any model)', async () => {
  const stream = oai.responses.stream({ model, input: 'Name a colour.', max_output_tokens: 16, temperature: 0 });
  const types = [];
  let text = '';
  let done = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') done = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)));
  assert.ok(done.id.startsWith('resp_'));
  assert.equal(text, done.output.flatMap((o) => o.content ?? []).map((p) => p.text ?? '').join(''));
  const got = await oai.responses.retrieve(done.id);
  assert.equal(got.id, done.id);
  assert.equal(got.output_text, text);
});

test('models (any model)', async () => {
  const ids = [];
  for await (const m of oai.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), ids.join(','));
  assert.equal((await oai.models.retrieve(model)).id, model);
});

test('errors are the SDK classes (any model)', async () => {
  await assert.rejects(oai.chat.completions.create({ model, messages: Q, max_tokens: 8, temperature: 7 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(oai.chat.completions.create({ model: 'no-such-model', messages: Q, max_tokens: 8 }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(ant.messages.create({ model, max_tokens: 16, messages: [] }), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.error.type, 'invalid_request_error');
    return true;
  });
});

test('a wrong API key is the SDKs\' AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model, messages: Q, max_tokens: 8 }), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_api_key');
    return true;
  });
  const badAnt = new Anthropic({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(badAnt.messages.create({ model, max_tokens: 16, messages: Q }), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError);
    assert.equal(e.error.error.type, 'authentication_error');
    return true;
  });
});

test('messages', async () => {
  const m = await ant.messages.create({ model, max_tokens: 16, messages: Q, temperature: 0 });
  assert.ok(m.id.startsWith('msg_'));
  assert.equal(m.role, 'assistant');
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.trim());
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
});

test('messages stream equals non-stream (any model)', async () => {
  const kw = { model, max_tokens: 16, messages: Q, temperature: 0, system: 'Answer in one word.' };
  const whole = await ant.messages.create(kw);
  const stream = ant.messages.stream(kw);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  const count = await ant.messages.countTokens({ model, messages: Q, system: 'Answer in one word.' });
  assert.equal(count.input_tokens, whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0));
});

test('messages tools', async () => {
  const tool = {
    name: 'get_weather', description: 'Get the current weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  };
  const m = await ant.messages.create({
    model, max_tokens: 48, temperature: 0, tools: [tool], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  });
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
});
