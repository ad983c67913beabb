// The denoising visualizer's page (viz_page.h). One document, no external resources, so it works
// on a machine without internet access. It streams POST /v1/completions with return_tokens,
// where each chunk's tokens are one committed block, and replays each block's denoise steps in
// order: the tokens a step unmasked appear together, coloured by that step's place in the block.
// With "chat template" ticked it streams /v1/chat/completions of one user message instead.
// URL parameters (prompt, chat, strategy, steps, threshold, temperature, max_tokens, ignore_eos,
// delay, key) prefill the form and run=1 starts it, so a headless browser needs no clicks; when the
// stream has ended and the replay is over, <body data-done="1">.
#include "viz_page.h"

namespace jet::server {

namespace {

constexpr std::string_view kPage = R"VIZ(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>JetEngine denoising visualizer</title>
<style>
  [hidden] { display: none !important; }
  body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 70em; }
  h1 { font-size: 1.3em; margin: 0 0 0.3em; }
  #meta { color: #666; margin-bottom: 1em; }
  form { display: flex; flex-wrap: wrap; gap: 0.6em 1.2em; align-items: end; margin-bottom: 1em; }
  label { display: flex; flex-direction: column; font-size: 0.85em; color: #444; }
  textarea { width: 100%; min-height: 3.5em; font: inherit; }
  input[type=number] { width: 6em; }
  #prompt-label { flex-basis: 100%; }
  button { padding: 0.4em 1.4em; font-size: 1em; }
  #stats { margin: 0.8em 0; font-variant-numeric: tabular-nums; }
  #stats b { font-weight: 600; }
  #error { color: #b00; white-space: pre-wrap; }
  #legend span { display: inline-block; padding: 0.1em 0.5em; margin-right: 0.3em; border-radius: 3px; font-size: 0.85em; }
  #blocks { display: flex; flex-wrap: wrap; gap: 0.5em; margin-top: 0.8em; }
  .block { display: flex; border: 1px solid #bbb; border-radius: 4px; padding: 2px; gap: 2px; }
  .block span { font-family: ui-monospace, monospace; min-width: 1.6em; padding: 0.15em 0.3em; text-align: center;
                border-radius: 3px; white-space: pre; }
  .mask { background: #eee; color: #aaa; }
  .prompt { background: none; color: #ccc; }
  .tok { cursor: help; }
  #text { white-space: pre-wrap; font-family: ui-monospace, monospace; background: #f7f7f7; padding: 0.6em;
          margin-top: 1em; min-height: 1.5em; }
</style>
</head>
<body>
<h1>Denoising visualizer</h1>
<div id="meta">loading the server's settings…</div>
<form id="form">
  <label id="prompt-label">prompt<textarea id="prompt">What is 4821 + 937?</textarea></label>
  <label>chat template<input id="chat" type="checkbox" checked></label>
  <label>strategy<select id="strategy"></select></label>
  <label>S (denoising steps)<input id="steps" type="number" min="1" value="4"></label>
  <label>threshold<input id="threshold" type="number" min="0" max="1" step="0.05" value="0.9"></label>
  <label>temperature<input id="temperature" type="number" min="0" step="0.1" value="0"></label>
  <label>max_tokens<input id="max_tokens" type="number" min="1" value="32"></label>
  <label>ignore EOS<input id="ignore_eos" type="checkbox"></label>
  <label>replay ms / step<input id="delay" type="number" min="0" value="150"></label>
  <label id="key-label" hidden>API key<input id="key" type="password" autocomplete="off"></label>
  <button id="run" type="submit" disabled>Run</button>
</form>
<div id="legend"></div>
<div id="stats">tokens <b id="token-count">0</b> · denoise forwards <b id="forwards">0</b> ·
  tokens per forward <b id="tpf">–</b> · <span id="finish"></span></div>
<div id="error"></div>
<div id="blocks"></div>
<div id="text"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);
let B = 0;

// Step k (1-based) of S within a block: blue for the first, through green, to red for the last.
function colour(k, S) {
  const hue = 220 - 220 * (Math.min(k, S) - 1) / Math.max(S - 1, 1);
  return `hsl(${hue}, 75%, 80%)`;
}
function visible(text) {
  return text === "" ? "∅" : text.replace(/ /g, "␣").replace(/\n/g, "↵");
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function init() {
  const config = await (await fetch("/viz/config")).json();
  B = config.block_length;
  $("meta").textContent = `model ${config.model} · B (block length) = ${B}`;
  for (const name of config.strategies) $("strategy").add(new Option(name, name));
  const d = config.defaults;
  $("strategy").value = d.remasking_strategy;
  $("steps").value = Math.min(d.denoising_steps, B);
  $("steps").max = B;
  $("threshold").value = d.dynamic_threshold;
  $("max_tokens").value = d.max_tokens;
  $("key-label").hidden = !config.api_key_required && !query.has("key");
  const fields = { prompt: "prompt", strategy: "strategy", steps: "steps", threshold: "threshold",
                   temperature: "temperature", max_tokens: "max_tokens", delay: "delay", key: "key" };
  for (const [param, id] of Object.entries(fields)) if (query.has(param)) $(id).value = query.get(param);
  for (const id of ["chat", "ignore_eos"]) if (query.has(id)) $(id).checked = query.get(id) === "1";
  $("run").disabled = false;
  if (query.get("run") === "1") run();
}

// One run: the stream fills `blocks`; replay() shows them, one step at a time.
async function run() {
  $("run").disabled = true;
  delete document.body.dataset.done;
  for (const id of ["blocks", "text", "error", "finish", "legend"]) $(id).textContent = "";
  const S = Number($("steps").value), delay = Number($("delay").value);
  for (let k = 1; k <= S; ++k) {
    const swatch = document.createElement("span");
    swatch.textContent = `step ${k}`;
    swatch.style.background = colour(k, S);
    $("legend").append(swatch);
  }
  const state = { blocks: [], ended: false, tokens: 0, lastStep: 0, wake: null };
  const replaying = replay(state, S, delay);
  try {
    await stream(state);
  } catch (e) {
    $("error").textContent = String(e.message || e);
  }
  state.ended = true;
  if (state.wake) state.wake();
  await replaying;
  $("run").disabled = false;
  document.body.dataset.done = "1";
}

async function stream(state) {
  const headers = { "Content-Type": "application/json" };
  if ($("key").value) headers["Authorization"] = "Bearer " + $("key").value;
  const chat = $("chat").checked;
  const body = {
    stream: true, return_tokens: true,
    remasking_strategy: $("strategy").value, denoising_steps: Number($("steps").value),
    dynamic_threshold: Number($("threshold").value), temperature: Number($("temperature").value),
    max_tokens: Number($("max_tokens").value), ignore_eos: $("ignore_eos").checked,
  };
  if (chat) body.messages = [{ role: "user", content: $("prompt").value }];
  else body.prompt = $("prompt").value;
  const response = await fetch(chat ? "/v1/chat/completions" : "/v1/completions",
                               { method: "POST", headers, body: JSON.stringify(body) });
  if (!response.ok) {
    const text = await response.text();
    let message = text;
    try { message = JSON.parse(text).error.message; } catch (_) { /* not JSON: show it as it is */ }
    throw new Error(`${response.status}: ${message}`);
  }
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ")) continue;
      const data = event.slice(6);
      if (data === "[DONE]") return;
      const choice = JSON.parse(data).choices[0];
      const text = (chat ? choice.delta.content : choice.text) || "";
      if (choice.tokens.length) state.blocks.push({ tokens: choice.tokens, text });
      else if (text) state.blocks.push({ tokens: [], text });
      if (choice.finish_reason) state.blocks.push({ finish: choice.finish_reason });
      if (state.wake) state.wake();
    }
  }
}

// Shows the blocks as they come: B cells each, masked first; then each denoise step of the block
// in order unmasks the tokens it committed. The first block shares its head with the prompt.
async function replay(state, S, delay) {
  for (let i = 0; ; ++i) {
    while (i >= state.blocks.length) {
      if (state.ended) return;
      await new Promise((resolve) => { state.wake = resolve; });
      state.wake = null;
    }
    const item = state.blocks[i];
    if (item.finish) {
      $("finish").textContent = `finish: ${item.finish}`;
      continue;
    }
    if (item.tokens.length) await show_block(state, item.tokens, S, delay, i === 0);
    $("text").textContent += item.text;
  }
}

async function show_block(state, tokens, S, delay, first) {
  const row = document.createElement("div");
  row.className = "block";
  const pad = first ? Math.max(B - tokens.length, 0) : 0;
  for (let j = 0; j < pad; ++j) {
    const cell = document.createElement("span");
    cell.className = "prompt";
    cell.textContent = "·";
    cell.title = "the prompt's tail";
    row.append(cell);
  }
  const cells = tokens.map(() => {
    const cell = document.createElement("span");
    cell.className = "mask";
    cell.textContent = "▒";
    row.append(cell);
    return cell;
  });
  $("blocks").append(row);
  // A block's steps follow the previous block's last one (global steps count across blocks).
  const base = state.lastStep;
  const steps = [...new Set(tokens.map((t) => t.step))].sort((a, b) => a - b);
  for (const step of steps) {
    if (delay > 0) await sleep(delay);
    const k = step - base;
    tokens.forEach((t, j) => {
      if (t.step !== step) return;
      const cell = cells[j];
      cell.className = "tok";
      cell.textContent = visible(t.text);
      cell.style.background = colour(k, S);
      cell.dataset.step = String(step);
      cell.dataset.blockStep = String(k);
      cell.dataset.logprob = String(t.logprob);
      cell.title = `token ${t.id} ${JSON.stringify(t.text)}\nstep ${step} (step ${k} of its block)\n` +
                   `confidence ${(100 * Math.exp(t.logprob)).toFixed(1)}%`;
    });
    state.tokens += tokens.filter((t) => t.step === step).length;
    state.lastStep = Math.max(state.lastStep, step);
    $("token-count").textContent = String(state.tokens);
    // Every step commits a token of its block, so the last step seen counts the forwards (bar
    // steps of a last block that unmasked only positions past max_tokens or a stop).
    $("forwards").textContent = String(state.lastStep);
    $("tpf").textContent = (state.tokens / state.lastStep).toFixed(2);
  }
}

$("form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
init().catch((e) => { $("error").textContent = "could not load /viz/config: " + e; });
</script>
</body>
</html>
)VIZ";

}  // namespace

std::string_view viz_page() { return kPage; }

}  // namespace jet::server
