// lockstep's server through the official `openai` npm package (pinned in package-lock.json,
// installed by scripts/fetch-clients): a client nobody here wrote. Starts `lockstep serve` on the
// embedded model (and a second one with an API key), then chats, streams, replays seeds, aborts,
// parses structured output with zod, calls tools, and checks that refusals reach the client as
// its own error types.
//
//   LOCKSTEP_BINARY=build/lockstep node tests/clients/openai_client_test.mjs
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const binary = process.env.LOCKSTEP_BINARY ?? 'build/lockstep';

// Starts a server on a free port; resolves to [process, base URL] once it listens.
function serve(extra = []) {
  return new Promise((resolve, reject) => {
    const server = spawn(binary, ['serve', '--port', '0', '--parallel', '4', '--prompt-cache-gib', '0', ...extra], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    server.stderr.on('data', (data) => {
      log += data;
      const match = log.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (match) resolve([server, `http://127.0.0.1:${match[1]}/v1`]);
    });
    server.on('exit', (code) => reject(new Error(`lockstep serve exited (${code}): ${log}`)));
  });
}

let server, keyed, client, url;
before(async () => {
  [server, url] = await serve(['--served-model-name', 'tiny-arith', '--served-model-name', 'org/tiny-arith']);
  client = new OpenAI({ baseURL: url, apiKey: 'none', maxRetries: 0 });
});
after(() => {
  server?.kill('SIGTERM');
  keyed?.kill('SIGTERM');
});

const ask = (content, extra = {}) => ({ model: 'tiny-arith', messages: [{ role: 'user', content }], ...extra });

test('a chat reply, and the same reply streamed', async () => {
  const reply = await client.chat.completions.create(ask('What is 1234 + 4321?'));
  assert.equal(reply.choices[0].message.content, '5555');
  assert.equal(reply.choices[0].finish_reason, 'stop');
  assert.ok(reply.usage.completion_tokens > 0);
  const stream = await client.chat.completions.create(ask('What is 1234 + 4321?', { stream: true }));
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, '5555');
});

test("the stream helper's final completion is the whole reply, logprobs included", async () => {
  const body = ask('What is 1234 + 4321?', { logprobs: true, top_logprobs: 2 });
  const whole = await client.chat.completions.create(body);
  const final = await client.chat.completions.stream(body).finalChatCompletion();
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
  assert.deepEqual(final.choices[0].logprobs.content, whole.choices[0].logprobs.content);
});

test('a seed the reply reports gives the same sampled reply again', async () => {
  const first = await client.chat.completions.create(ask('Reverse the word planet.', { temperature: 1.5 }));
  assert.ok(Number.isSafeInteger(first.seed), `seed ${first.seed} is a safe JavaScript integer`);
  const again = await client.chat.completions.create(ask('Reverse the word planet.', { temperature: 1.5, seed: first.seed }));
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
});

test('completions and models', async () => {
  const reply = await client.completions.create({
    model: 'tiny-arith',
    prompt: '<|im_start|>user\nWhat is 1234 + 4321?<|im_end|>\n<|im_start|>assistant\n',
    max_tokens: 8,
  });
  assert.equal(reply.choices[0].text, '5555');
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'tiny-arith');
  assert.equal((await client.models.retrieve('tiny-arith')).id, 'tiny-arith');
  await assert.rejects(client.models.retrieve('nope'), OpenAI.NotFoundError);
  // A name with a '/' (the client escapes it as %2F in the path).
  assert.equal((await client.models.retrieve('org/tiny-arith')).id, 'org/tiny-arith');
});

test('loglikelihood as lm-eval-harness asks it: echo, logprobs, max_tokens 0, a list of prompts', async () => {
  const context = '<|im_start|>user\nWhat is 1234 + 4321?<|im_end|>\n<|im_start|>assistant\n';
  const answers = ['5555', '5565'];
  const reply = await client.completions.create({
    model: 'tiny-arith', prompt: answers.map((a) => context + a), echo: true, logprobs: 0, max_tokens: 0,
  });
  assert.equal(reply.choices.length, 2);
  const scores = reply.choices.map((choice, i) => {
    assert.equal(choice.text, context + answers[i]);
    const lp = choice.logprobs;
    assert.equal(lp.token_logprobs[0], null);
    // The answer's tokens start at the answer's offset in the echoed text.
    const first = lp.text_offset.findIndex((offset) => offset >= context.length);
    assert.equal(lp.text_offset[first], context.length);
    return lp.token_logprobs.slice(first).reduce((sum, x) => sum + x, 0);
  });
  assert.ok(scores[0] > scores[1], `the right answer is the likelier (${scores})`);
});

test('an aborted stream ends on the client, and the server serves on', async () => {
  const stream = await client.chat.completions.create(
    ask('Sort these numbers: 42 7 19 88 3', { stream: true, max_tokens: 64, ignore_eos: true }));
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      if (++chunks === 2) stream.controller.abort();
    }
  } catch (error) {
    assert.ok(error instanceof OpenAI.APIUserAbortError, `${error}`);
  }
  assert.ok(chunks < 64, `the stream stopped after the abort (${chunks} chunks)`);
  const reply = await client.chat.completions.create(ask('What is 1234 + 4321?'));
  assert.equal(reply.choices[0].message.content, '5555');
});

test('refusals are the client\'s own error types, naming the field', async () => {
  await assert.rejects(client.chat.completions.create(ask('hi', { max_tokens: 0 })), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, 'max_tokens');
    return true;
  });
  const tool = { type: 'function', function: { name: 'add', parameters: { type: 'object', properties: {} } } };
  const unknown = { type: 'function', function: { name: 'subtract' } };
  await assert.rejects(client.chat.completions.create(ask('hi', { tools: [tool], tool_choice: unknown })), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError);
    assert.equal(error.param, 'tool_choice');
    return true;
  });
});

test('tool calls, required and named, whole and streamed', async () => {
  const tools = [
    { type: 'function', function: { name: 'add', description: 'Adds two numbers', parameters: {
      type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } } },
    { type: 'function', function: { name: 'sort', parameters: {
      type: 'object', properties: { numbers: { type: 'array', items: { type: 'integer' }, maxItems: 4 } },
      required: ['numbers'] } } },
  ];
  const request = ask('What is 2 + 3?', { tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 400, seed: 7 });
  const reply = await client.chat.completions.create(request);
  assert.equal(reply.choices[0].finish_reason, 'tool_calls');
  assert.equal(reply.choices[0].message.tool_calls.length, 1);
  const call = reply.choices[0].message.tool_calls[0];
  assert.ok(['add', 'sort'].includes(call.function.name));
  assert.equal(typeof JSON.parse(call.function.arguments), 'object');
  // Streamed (the same seed: the same call id): the call's id and name first, then its arguments,
  // folded as a client folds them.
  const calls = [];
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    for (const delta of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[delta.index] ??= { id: delta.id, name: delta.function?.name, arguments: '' };
      calls[delta.index].arguments += delta.function?.arguments ?? '';
    }
  }
  assert.deepEqual(calls, [{ id: call.id, name: call.function.name, arguments: call.function.arguments }]);
  const named = await client.chat.completions.create(
    ask('Sort 3, 1, 2', { tools, tool_choice: { type: 'function', function: { name: 'sort' } }, max_tokens: 400 }),
  );
  assert.equal(named.choices[0].finish_reason, 'stop');
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'sort');
  assert.ok(Array.isArray(JSON.parse(named.choices[0].message.tool_calls[0].function.arguments).numbers));
});

test('chat.completions.parse with a zod schema gets an object it validates', async () => {
  const Sum = z.object({ sum: z.number(), sure: z.boolean(), unit: z.enum(['none', 'apples']) });
  const reply = await client.chat.completions.parse(
    ask('What is 2 + 2?', { max_tokens: 120, response_format: zodResponseFormat(Sum, 'sum') }),
  );
  const parsed = reply.choices[0].message.parsed;
  assert.equal(reply.choices[0].finish_reason, 'stop');
  assert.equal(typeof parsed.sum, 'number');
  assert.equal(typeof parsed.sure, 'boolean');
  assert.ok(['none', 'apples'].includes(parsed.unit));
  // The same request again: the same reply, token for token.
  const again = await client.chat.completions.parse(
    ask('What is 2 + 2?', { max_tokens: 120, response_format: zodResponseFormat(Sum, 'sum') }),
  );
  assert.equal(again.choices[0].message.content, reply.choices[0].message.content);
});

test('an API key: the wrong one is an AuthenticationError, the right one works', async () => {
  let keyedUrl;
  [keyed, keyedUrl] = await serve(['--api-key', 'right-key']);
  const wrong = new OpenAI({ baseURL: keyedUrl, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
  const right = new OpenAI({ baseURL: keyedUrl, apiKey: 'right-key', maxRetries: 0 });
  assert.equal((await right.models.list()).data[0].id, 'tiny-arith');
});
