// `jetengine serve` through the official `openai` npm client: chat and completions, plain and
// streamed, usage in the last stream chunk, seeds, max_tokens, stop strings, logprobs, a wrong
// model (404), an API key (401) and an aborted stream. tests/python/test_openai_node_client.py installs the
// client and starts the servers, then runs
//
//   node openai_client_test.mjs --openai-prefix DIR --base-url URL --auth-base-url URL --api-key KEY --model NAME
//
// DIR is an `npm install --prefix` folder holding `openai`; --base-url is a server with
// --max-active 1 and no key, --auth-base-url one with --api-key KEY. Prints one JSON line per
// check, {"check", "ok", "detail"} (detail: what was seen, or why it failed), and exits 1 when a
// check failed.
import { createRequire } from "node:module";
import path from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    "openai-prefix": { type: "string" },
    "base-url": { type: "string" },
    "auth-base-url": { type: "string" },
    "api-key": { type: "string" },
    model: { type: "string" },
    only: { type: "string" },  // comma-separated check names, for debugging
  },
});
for (const key of ["openai-prefix", "base-url", "auth-base-url", "api-key", "model"]) {
  if (!args[key]) throw new Error(`--${key} is missing`);
}
const require = createRequire(path.join(path.resolve(args["openai-prefix"]), "index.js"));
const OpenAI = require("openai");
const { NotFoundError, AuthenticationError, BadRequestError, APIUserAbortError } = OpenAI;

const MODEL = args.model;
// Node's own fetch: openai 4.x otherwise uses node-fetch 2, whose streams fail with "Premature
// close" on Node releases that carry the fix of CVE-2026-48931 (Debian's 18.20.4+dfsg-1~deb12u3
// among them; nodejs/node#63989), whatever the server sends.
const makeClient = (baseURL, apiKey) => new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000,
                                                     fetch: globalThis.fetch });
const client = makeClient(args["base-url"], "unused");
const QUESTION = [{ role: "user", content: "What is 4821 + 937?" }];  // the demo model answers 5758
const CHATML = "<|im_start|>user\nWhat is 4821 + 937?<|im_end|>\n<|im_start|>assistant\n";

class CheckFailed extends Error {}
function expect(condition, message) {
  if (!condition) throw new CheckFailed(message);
}
function equal(actual, expected, what) {
  const a = JSON.stringify(actual), e = JSON.stringify(expected);
  expect(a === e, `${what}: expected ${e}, got ${a}`);
}
// Awaits `promise`, which must reject with an instance of `type`; returns the error.
async function rejects(promise, type, what) {
  try {
    const value = await promise;
    throw new CheckFailed(`${what}: expected ${type.name}, got a result ${JSON.stringify(value).slice(0, 300)}`);
  } catch (e) {
    if (e instanceof CheckFailed) throw e;
    expect(e instanceof type, `${what}: expected ${type.name}, got ${e?.constructor?.name}: ${e?.message}`);
    return e;
  }
}

// A streamed request's chunks, and its text and finish_reason put together.
async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  let text = "", finish = null, role = null;
  for (const chunk of chunks) {
    for (const choice of chunk.choices) {
      text += choice.text ?? choice.delta?.content ?? "";
      if (choice.delta?.role) role = choice.delta.role;
      if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
        expect(finish === null, `a second finish_reason (${choice.finish_reason}) after ${finish}`);
        finish = choice.finish_reason;
      }
    }
  }
  return { chunks, text, finish, role };
}
const textOf = (r) => r.choices[0].text ?? r.choices[0].message.content;

// A sampled decode that goes on past the answer (ignore_eos), long enough to cut with stop strings.
const sampled = (seed, extra = {}) => ({ model: MODEL, prompt: "What is 12 + 30?", max_tokens: 64, temperature: 1,
                                         seed, ignore_eos: true, ...extra });
const sampledChat = (seed, extra = {}) => ({ model: MODEL, messages: QUESTION, max_tokens: 64, temperature: 1, seed,
                                             ignore_eos: true, ...extra });

async function metric(name) {
  const body = await (await fetch(new URL("/metrics", args["base-url"]))).text();
  const line = body.split("\n").find((l) => l.startsWith(name + " "));
  expect(line, `/metrics has no ${name}`);
  return Number(line.slice(name.length + 1));
}

const checks = {
  async models() {
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id);
    equal(ids, [MODEL], "models.list() ids");
    equal((await client.models.retrieve(MODEL)).id, MODEL, "models.retrieve(id).id");
    return { ids };
  },

  async chat_non_stream() {
    const r = await client.chat.completions.create({ model: MODEL, messages: QUESTION, temperature: 0 });
    equal(r.object, "chat.completion", "object");
    equal(r.model, MODEL, "model");
    equal(r.choices.length, 1, "choices");
    const { role, content } = r.choices[0].message;
    equal([role, content], ["assistant", "5758"], "message role, content");
    equal(r.choices[0].finish_reason, "stop", "finish_reason");
    const u = r.usage;
    expect(u.prompt_tokens > 0 && u.completion_tokens > 0, `usage ${JSON.stringify(u)}`);
    equal(u.total_tokens, u.prompt_tokens + u.completion_tokens, "total_tokens");
    return { content: r.choices[0].message.content, usage: u };
  },

  async completions_non_stream() {
    const r = await client.completions.create({ model: MODEL, prompt: CHATML, temperature: 0 });
    equal(r.object, "text_completion", "object");
    equal(r.choices[0].text, "5758", "text");
    equal(r.choices[0].finish_reason, "stop", "finish_reason");
    // The same prompt through the chat template: the same tokens.
    const chat = await client.chat.completions.create({ model: MODEL, messages: QUESTION, temperature: 0 });
    equal(r.usage, chat.usage, "usage of the ChatML prompt vs the chat request");
    return { text: r.choices[0].text, usage: r.usage };
  },

  async chat_stream() {
    const greedy = await collect(await client.chat.completions.create(
        { model: MODEL, messages: QUESTION, temperature: 0, stream: true }));
    equal([greedy.text, greedy.finish, greedy.role], ["5758", "stop", "assistant"], "greedy stream text, finish, role");
    for (const c of greedy.chunks) equal(c.object, "chat.completion.chunk", "chunk object");
    // A longer sampled reply: the stream's pieces make up the non-streamed text.
    const plain = await client.chat.completions.create(sampledChat(11));
    const streamed = await collect(await client.chat.completions.create(sampledChat(11, { stream: true })));
    expect(streamed.chunks.length > 2, `only ${streamed.chunks.length} chunks`);
    equal(streamed.text, plain.choices[0].message.content, "streamed text vs the non-streamed one (seed 11)");
    equal(streamed.finish, "length", "streamed finish_reason");
    return { chunks: streamed.chunks.length, text: streamed.text };
  },

  async completions_stream() {
    const greedy = await collect(await client.completions.create({ model: MODEL, prompt: CHATML, temperature: 0,
                                                                   stream: true }));
    equal([greedy.text, greedy.finish], ["5758", "stop"], "greedy stream text, finish");
    const plain = await client.completions.create(sampled(12));
    const streamed = await collect(await client.completions.create(sampled(12, { stream: true })));
    expect(streamed.chunks.length > 2, `only ${streamed.chunks.length} chunks`);
    for (const c of streamed.chunks) equal(c.object, "text_completion", "chunk object");
    equal(streamed.text, textOf(plain), "streamed text vs the non-streamed one (seed 12)");
    equal(streamed.finish, "length", "streamed finish_reason");
    return { chunks: streamed.chunks.length, text: streamed.text };
  },

  async stream_usage() {
    const seen = {};
    for (const [name, api, body] of [["chat", client.chat.completions, sampledChat(13, { max_tokens: 30 })],
                                     ["completions", client.completions, sampled(13, { max_tokens: 30 })]]) {
      const plain = await api.create(body);
      const s = await collect(await api.create({ ...body, stream: true, stream_options: { include_usage: true } }));
      const last = s.chunks.at(-1);
      equal(last.choices, [], `${name}: the last chunk's choices`);
      equal(last.usage, plain.usage, `${name}: the last chunk's usage vs the non-streamed usage`);
      equal(last.usage.completion_tokens, 30, `${name}: completion_tokens`);
      for (const c of s.chunks.slice(0, -1)) expect(c.usage == null, `${name}: usage before the last chunk`);
      equal(s.text, textOf(plain), `${name}: streamed text`);
      // Without stream_options no chunk has usage.
      const without = await collect(await api.create({ ...body, stream: true }));
      for (const c of without.chunks) expect(c.usage == null, `${name}: usage without include_usage`);
      expect(without.chunks.at(-1).choices.length === 1, `${name}: the last chunk without include_usage`);
      seen[name] = last.usage;
    }
    // The prompt count is the server's tokenizer's.
    const tokenized = await (await fetch(new URL("/tokenize", args["base-url"]), {
      method: "POST", body: JSON.stringify({ prompt: "What is 12 + 30?" }) })).json();
    equal(seen.completions.prompt_tokens, tokenized.count, "prompt_tokens vs /tokenize");
    return seen;
  },

  async seed() {
    const texts = [];
    for (const seed of [1, 2, 3, 4]) texts.push(textOf(await client.completions.create(sampled(seed))));
    const again = textOf(await client.completions.create(sampled(1)));
    equal(again, texts[0], "seed 1 twice");
    const chatA = await client.chat.completions.create(sampledChat(5));
    const chatB = await client.chat.completions.create(sampledChat(5));
    equal(chatB.choices[0].message.content, chatA.choices[0].message.content, "chat, seed 5 twice");
    expect(new Set(texts).size > 1, `seeds 1-4 all gave ${JSON.stringify(texts[0])}`);
    return { distinct_of_4: new Set(texts).size, seed1: texts[0] };
  },

  async max_tokens() {
    const seen = {};
    for (const n of [1, 5, 13]) {  // the demo model's blocks hold 4 tokens: 5 and 13 end inside one
      const c = await client.completions.create(sampled(21, { max_tokens: n }));
      equal([c.usage.completion_tokens, c.choices[0].finish_reason], [n, "length"], `completions, max_tokens ${n}`);
      const chat = await client.chat.completions.create(sampledChat(21, { max_tokens: n }));
      equal([chat.usage.completion_tokens, chat.choices[0].finish_reason], [n, "length"], `chat, max_tokens ${n}`);
      seen[n] = textOf(c);
    }
    const mct = await client.chat.completions.create(sampledChat(21, { max_tokens: undefined, max_completion_tokens: 7 }));
    equal(mct.usage.completion_tokens, 7, "chat, max_completion_tokens 7");
    const s = await collect(await client.completions.create(
        sampled(21, { max_tokens: 13, stream: true, stream_options: { include_usage: true } })));
    equal([s.chunks.at(-1).usage.completion_tokens, s.finish, s.text], [13, "length", seen[13]],
          "stream, max_tokens 13: completion_tokens, finish, text");
    return seen;
  },

  async stop() {
    const seen = {};
    for (const [name, api, make] of [["completions", client.completions, sampled],
                                     ["chat", client.chat.completions, sampledChat]]) {
      const base = await api.create(make(31));
      const text = textOf(base);
      equal(base.choices[0].finish_reason, "length", `${name}: finish_reason without stop`);
      // A 3-character piece from the middle whose first occurrence is not at the start.
      let stop = null;
      for (let i = Math.floor(text.length / 2); i + 3 <= text.length && stop === null; ++i) {
        if (text.indexOf(text.slice(i, i + 3)) > 0) stop = text.slice(i, i + 3);
      }
      expect(stop !== null, `${name}: no stop string to pick from ${JSON.stringify(text)}`);
      const expected = text.slice(0, text.indexOf(stop));
      const absent = "Zq#";
      expect(!text.includes(absent), `${name}: ${absent} is in the text`);

      const one = await api.create(make(31, { stop }));
      equal([textOf(one), one.choices[0].finish_reason], [expected, "stop"], `${name}: stop ${JSON.stringify(stop)}`);
      expect(one.usage.completion_tokens < base.usage.completion_tokens,
             `${name}: ${one.usage.completion_tokens} completion tokens with stop, ${base.usage.completion_tokens} without`);
      const list = await api.create(make(31, { stop: [absent, stop] }));
      equal([textOf(list), list.choices[0].finish_reason], [expected, "stop"], `${name}: stop [absent, piece]`);
      const none = await api.create(make(31, { stop: [absent] }));
      equal([textOf(none), none.choices[0].finish_reason], [text, "length"], `${name}: a stop string not in the text`);
      const s = await collect(await api.create(make(31, { stop, stream: true })));
      equal([s.text, s.finish], [expected, "stop"], `${name}: streamed with stop`);
      seen[name] = { text, stop, expected };
    }
    return seen;
  },

  async logprobs() {
    // Per token: its text (the texts make up the answer) and its log-probability; the same
    // tokens whole and streamed (each chunk with the tokens of its text).
    const seen = {};
    const chatTokens = (logprobs) => (logprobs?.content ?? []).map((t) => [t.token, t.logprob]);
    const legacyTokens = (logprobs) => (logprobs?.tokens ?? []).map((t, i) => [t, logprobs.token_logprobs[i]]);
    for (const [name, api, body, tokensOf] of [
      ["chat", client.chat.completions, sampledChat(41, { max_tokens: 24, logprobs: true, top_logprobs: 0 }),
       chatTokens],
      ["completions", client.completions, sampled(41, { max_tokens: 24, logprobs: 0 }), legacyTokens]]) {
      const plain = await api.create(body);
      const tokens = tokensOf(plain.choices[0].logprobs);
      equal(tokens.length, plain.usage.completion_tokens, `${name}: one entry per completion token`);
      equal(tokens.map(([t]) => t).join(""), textOf(plain), `${name}: the token texts vs the text`);
      for (const [t, lp] of tokens) {
        expect(Number.isFinite(lp) && lp <= 0, `${name}: logprob ${lp} of ${JSON.stringify(t)}`);
      }
      if (name === "chat") {
        const bytes = plain.choices[0].logprobs.content.flatMap((t) => t.bytes);
        equal(Buffer.from(bytes).toString("utf8"), textOf(plain), "chat: the bytes vs the text");
      } else {
        equal(plain.choices[0].logprobs.top_logprobs, null, "completions: top_logprobs");
      }
      const s = await collect(await api.create({ ...body, stream: true }));
      const streamed = [];
      for (const chunk of s.chunks) {
        const choice = chunk.choices[0];
        const piece = tokensOf(choice.logprobs);
        equal(piece.map(([t]) => t).join(""), choice.text ?? choice.delta?.content ?? "",
              `${name}: a chunk's tokens vs its text`);
        streamed.push(...piece);
      }
      equal(streamed, tokens, `${name}: the streamed tokens vs the whole answer's`);
      seen[name] = { tokens: tokens.length, first: tokens[0] };
    }
    // The engine computes no alternatives: asking for them is a 400 naming the field.
    const e = await rejects(
        client.chat.completions.create({ model: MODEL, messages: QUESTION, logprobs: true, top_logprobs: 2 }),
        BadRequestError, "top_logprobs 2");
    expect(e.message.includes("top_logprobs"), `the message names top_logprobs: ${e.message}`);
    const e2 = await rejects(client.completions.create({ model: MODEL, prompt: "1+1=", logprobs: 3 }),
                             BadRequestError, "completions, logprobs 3");
    expect(e2.message.includes("'logprobs'"), `the message names logprobs: ${e2.message}`);
    return seen;
  },

  async wrong_model() {
    const e1 = await rejects(client.chat.completions.create({ model: "no-such-model", messages: QUESTION }),
                             NotFoundError, "chat with a wrong model");
    const e2 = await rejects(client.completions.create({ model: "no-such-model", prompt: "1+1=" }),
                             NotFoundError, "completions with a wrong model");
    const e3 = await rejects(client.chat.completions.create({ model: "no-such-model", messages: QUESTION, stream: true }),
                             NotFoundError, "a stream with a wrong model");
    await rejects(client.models.retrieve("no-such-model"), NotFoundError, "models.retrieve of a wrong model");
    for (const e of [e1, e2, e3]) equal(e.status, 404, "status");
    expect(e1.message.includes("no-such-model"), `the message names the model: ${e1.message}`);
    return { message: e1.message };
  },

  async api_key() {
    const url = args["auth-base-url"];
    const seen = {};
    for (const key of ["", "wrong-key"]) {
      const bad = makeClient(url, key);
      const e = await rejects(bad.chat.completions.create({ model: MODEL, messages: QUESTION, temperature: 0 }),
                              AuthenticationError, `chat with the API key ${JSON.stringify(key)}`);
      equal(e.status, 401, "status");
      await rejects(bad.models.list(), AuthenticationError, `models.list() with the API key ${JSON.stringify(key)}`);
      seen[key || "(empty)"] = e.message;
    }
    const good = makeClient(url, args["api-key"]);
    const r = await good.chat.completions.create({ model: MODEL, messages: QUESTION, temperature: 0 });
    equal(r.choices[0].message.content, "5758", "the answer with the right key");
    const s = await collect(await good.completions.create({ model: MODEL, prompt: CHATML, temperature: 0, stream: true }));
    equal(s.text, "5758", "a stream with the right key");
    return seen;
  },

  async abort() {
    // The server decodes one request at a time (--max-active 1): the next request gets its turn
    // only once the aborted one has left. Undisturbed, this one would take over a minute.
    const abortedBefore = await metric('jetengine_requests_total{outcome="aborted"}');
    const controller = new AbortController();
    const stream = await client.completions.create(
        { model: MODEL, prompt: "1+1=", max_tokens: 3000, ignore_eos: true, temperature: 0, stream: true },
        { signal: controller.signal });
    let chunks = 0, text = "", finish = null, error = null;
    try {
      for await (const chunk of stream) {
        ++chunks;
        text += chunk.choices[0]?.text ?? "";
        finish ??= chunk.choices[0]?.finish_reason ?? null;
        if (chunks === 3) controller.abort();
      }
    } catch (e) {
      error = e;
    }
    // The client ends the loop quietly or with APIUserAbortError, by version; never with another error.
    expect(error === null || error instanceof APIUserAbortError, `the aborted loop threw ${error?.constructor?.name}: ${error}`);
    expect(chunks >= 3 && finish === null, `${chunks} chunks, finish_reason ${finish} after the abort`);
    const start = Date.now();
    const next = await client.chat.completions.create({ model: MODEL, messages: QUESTION, temperature: 0 },
                                                      { timeout: 30_000 });
    const seconds = (Date.now() - start) / 1000;
    equal(next.choices[0].message.content, "5758", "the next request's answer");
    let aborted = await metric('jetengine_requests_total{outcome="aborted"}');
    for (let i = 0; i < 50 && aborted === abortedBefore; ++i) {
      await new Promise((r) => setTimeout(r, 100));
      aborted = await metric('jetengine_requests_total{outcome="aborted"}');
    }
    equal(aborted - abortedBefore, 1, "aborted requests counted in /metrics");
    equal(await metric("jetengine_requests_running"), 0, "requests running after the next one");
    return { chunks, text_before_abort: text.length, threw: error?.constructor?.name ?? null, next_seconds: seconds };
  },
};

const only = args.only ? args.only.split(",") : Object.keys(checks);
let failed = 0;
for (const name of only) {
  const start = Date.now();
  let result;
  try {
    result = { check: name, ok: true, detail: await checks[name]() };
  } catch (e) {
    ++failed;
    result = { check: name, ok: false, detail: e instanceof CheckFailed ? e.message : `${e?.constructor?.name}: ${e?.stack ?? e}` };
  }
  result.seconds = (Date.now() - start) / 1000;
  console.log(JSON.stringify(result));
}
process.exit(failed ? 1 : 0);
