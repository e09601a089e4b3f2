"use strict";
// The gymenvs trajectory viewer: a run page, an episode page and a token page, drawn from JSON: the viewer
// server's api/run and api/episode/N, or the data element of a self-contained file. No library, nothing fetched
// from anywhere else.

const EMBEDDED = (() => {
  const element = document.getElementById("gymenvs-data");
  return element ? JSON.parse(element.textContent) : null;
})();
const loaded = {};
const page = document.getElementById("page");
const COLUMNS = [["id", "#"], ["file", "file"], ["task", "task"], ["reward", "reward"], ["outcome", "outcome"],
  ["end", "end"], ["turns", "turns"], ["tokens", "tokens"], ["seconds", "time (s)"]];
const MOST_TASKS = 25;
const runView = { sort: "id", descending: false, show: "all", task: "", text: "" };

async function load(path) {
  if (EMBEDDED) return path === "run" ? EMBEDDED.run : EMBEDDED.episodes[path.split("/")[1]];
  if (!(path in loaded) || path === "run") {  // the run is asked for afresh: a run being written grows
    const response = await fetch(path === "run" ? "api/run" : `api/${path}`);
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    loaded[path] = body;
  }
  return loaded[path];
}

const esc = (value) => String(value ?? "").replace(/[&<>"']/g,
  (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const num = (value, digits = 3) => (value == null ? "–" : String(Number(Number(value).toFixed(digits))));
const seconds = (value) => (value == null ? "–" : num(value, value < 1 ? 4 : 2));
const text = (content) => (Array.isArray(content)
  ? content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join("") : content ?? "");
const json = (value) => JSON.stringify(value, null, 2);
const failed = (row) => row.end === "failed" || row.reward == null || row.reward <= 0;

function ready(name) {
  document.body.dataset.ready = name;
}

function where(html) {
  document.getElementById("where").innerHTML = html;
}

// ---- the run page -------------------------------------------------------------------------------------------

async function runPage() {
  const run = await load("run");
  const rows = run.episodes;
  where(esc(run.root));
  const rewards = rows.filter((row) => row.reward != null);
  const mean = rewards.length ? rewards.reduce((sum, row) => sum + row.reward, 0) / rewards.length : null;
  const outcomes = counts(rows.map((row) => row.outcome ?? "–"));
  const tasks = [...new Set(rows.map((row) => row.task))].sort();
  page.innerHTML = `
    <section class="summary">
      <p><b>${rows.length}</b> episodes · mean reward <b>${num(mean)}</b> · solved <b>${rows.length - rows.filter(failed).length}</b>
      ${run.skipped.length ? ` · <details class="inline"><summary>${run.skipped.length} files skipped</summary>
        <ul>${run.skipped.map((s) => `<li>${esc(s.file)}: ${esc(s.why)}</li>`).join("")}</ul></details>` : ""}</p>
      <p id="outcomes">outcomes: ${outcomes.map(([name, n]) => `<span class="chip" data-outcome="${esc(name)}">${esc(name)} <b>${n}</b></span>`).join(" ")}</p>
    </section>
    <section class="charts">
      <figure id="reward-by-task"><figcaption>mean reward by task</figcaption>${rewardByTask(rows)}</figure>
      <figure id="turns-histogram"><figcaption>turns per episode</figcaption>${turnsHistogram(rows)}</figure>
    </section>
    <section class="filters">
      <label>show <select id="show">
        <option value="all">all</option><option value="failed">failed only</option><option value="infra">infra only</option>
        ${outcomes.map(([name]) => name).filter((name) => name !== "infra").map((name) => `<option value="outcome:${esc(name)}">outcome ${esc(name)}</option>`).join("")}
      </select></label>
      <label>task <select id="task"><option value="">all tasks</option>
        ${tasks.map((task) => `<option value="${esc(task)}">${esc(task)}</option>`).join("")}</select></label>
      <label>file <input id="text" type="search" placeholder="contains…"></label>
      <span id="shown"></span>
    </section>
    <table id="episodes"><thead><tr>${COLUMNS.map(([key, label]) => `<th data-key="${key}">${label}</th>`).join("")}</tr></thead>
    <tbody></tbody></table>`;
  for (const id of ["show", "task", "text"]) {
    const control = document.getElementById(id);
    control.value = runView[id];
    control.addEventListener("input", () => { runView[id] = control.value; drawRows(rows); });
  }
  for (const chip of document.querySelectorAll("#outcomes .chip")) {
    chip.addEventListener("click", () => {
      const outcome = chip.dataset.outcome;
      runView.show = outcome === "infra" ? "infra" : `outcome:${outcome}`;
      document.getElementById("show").value = runView.show;
      drawRows(rows);
    });
  }
  for (const header of document.querySelectorAll("#episodes th")) {
    header.addEventListener("click", () => {
      runView.descending = runView.sort === header.dataset.key ? !runView.descending : false;
      runView.sort = header.dataset.key;
      drawRows(rows);
    });
  }
  drawRows(rows);
  ready("run");
}

function shown(rows) {
  const { show, task, text: part } = runView;
  return rows.filter((row) => (show === "all" || (show === "failed" && failed(row)) || (show === "infra" && row.outcome === "infra")
      || (show.startsWith("outcome:") && (row.outcome ?? "–") === show.slice(8)))
    && (!task || row.task === task) && (!part || row.file.includes(part)));
}

function drawRows(rows) {
  const { sort, descending } = runView;
  const order = descending ? -1 : 1;
  const sorted = shown(rows).sort((a, b) => compare(a[sort], b[sort]) * order || a.id - b.id);
  document.querySelector("#episodes tbody").innerHTML = sorted.map((row) => `
    <tr class="${failed(row) ? "failed" : "solved"}" data-id="${row.id}">
      <td>${row.id}</td><td><a href="#/episode/${row.id}">${esc(row.file)}</a></td><td>${esc(row.task)}</td>
      <td class="n">${num(row.reward)}</td><td>${esc(row.outcome ?? "–")}${row.outcome_reason ? ` <span class="muted">${esc(row.outcome_reason)}</span>` : ""}</td>
      <td>${esc(row.end ?? "–")}</td><td class="n">${row.turns ?? "–"}</td><td class="n">${row.tokens ?? "–"}</td>
      <td class="n">${seconds(row.seconds)}</td></tr>`).join("");
  for (const header of document.querySelectorAll("#episodes th")) {
    header.className = header.dataset.key === sort ? (descending ? "sorted down" : "sorted up") : "";
  }
  document.getElementById("shown").textContent = `${sorted.length} of ${rows.length} shown`;
}

function compare(a, b) {
  if (a == null || b == null) return (a == null) - (b == null);  // unknowns last
  return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b), undefined, { numeric: true });
}

function counts(values) {
  const found = new Map();
  for (const value of values) found.set(value, (found.get(value) || 0) + 1);
  return [...found.entries()].sort((a, b) => b[1] - a[1]);
}

function rewardByTask(rows) {
  const byTask = new Map();
  for (const row of rows.filter((r) => r.reward != null)) {
    if (!byTask.has(row.task)) byTask.set(row.task, []);
    byTask.get(row.task).push(row.reward);
  }
  const all = [...byTask.entries()].map(([task, rewards]) => [task, rewards.reduce((s, r) => s + r, 0) / rewards.length, rewards.length]);
  if (!all.length) return `<p class="muted">no rewards</p>`;
  const bars = all.sort((a, b) => b[2] - a[2] || a[0].localeCompare(b[0])).slice(0, MOST_TASKS).sort((a, b) => a[0].localeCompare(b[0]));
  const low = Math.min(0, ...bars.map((bar) => bar[1]));
  const high = Math.max(1, ...bars.map((bar) => bar[1]));
  const [label, width, height] = [170, 260, 16];
  const x = (value) => label + ((value - low) / (high - low)) * width;
  const svg = bars.map(([task, mean, n], i) => `
    <g class="bar"><title>${esc(task)}: mean ${num(mean)} over ${n} episodes</title>
      <text x="${label - 6}" y="${i * height + 12}" text-anchor="end">${esc(task.length > 26 ? task.slice(0, 25) + "…" : task)}</text>
      <rect x="${Math.min(x(0), x(mean))}" y="${i * height + 2}" width="${Math.max(1, Math.abs(x(mean) - x(0)))}" height="${height - 4}"></rect>
      <text x="${Math.max(x(0), x(mean)) + 4}" y="${i * height + 12}">${num(mean, 2)}</text></g>`).join("");
  const note = all.length > bars.length ? `<p class="muted">the ${bars.length} tasks with most episodes, of ${all.length}</p>` : "";
  return `<svg width="${label + width + 40}" height="${bars.length * height + 4}">${svg}</svg>${note}`;
}

function turnsHistogram(rows) {
  const turns = rows.map((row) => row.turns).filter((value) => value != null);
  if (!turns.length) return `<p class="muted">no turns</p>`;
  const [low, high] = [Math.min(...turns), Math.max(...turns)];
  const binCount = Math.min(20, high - low + 1);
  const size = (high - low + 1) / binCount;
  const bins = Array.from({ length: binCount }, () => 0);
  for (const value of turns) bins[Math.min(binCount - 1, Math.floor((value - low) / size))] += 1;
  const most = Math.max(...bins);
  const [width, height, barWidth] = [binCount * 22, 120, 20];
  const bars = bins.map((n, i) => {
    const from = Math.ceil(low + i * size);
    const to = Math.ceil(low + (i + 1) * size) - 1;
    const tall = (n / most) * height;
    return `<g class="bar"><title>${from === to ? from : `${from}–${to}`} turns: ${n} episodes</title>
      <rect x="${i * 22}" y="${height - tall}" width="${barWidth}" height="${tall}"></rect></g>`;
  }).join("");
  return `<svg width="${width}" height="${height + 16}">${bars}
    <text x="0" y="${height + 14}">${low}</text>${high > low ? `<text x="${width}" y="${height + 14}" text-anchor="end">${high}</text>` : ""}</svg>`;
}

// ---- the episode page ---------------------------------------------------------------------------------------

async function episodePage(id, stepId) {
  const episode = await load(`episode/${id}`);
  const { row, trajectory } = episode;
  const info = (trajectory.extra || {}).gymenvs || {};
  where(esc(row.file));
  page.innerHTML = `
    <nav>${EMBEDDED ? "" : `<a href="#/">← run</a> · <a href="#/episode/${episode.previous}" ${episode.previous == null ? "hidden" : ""}>‹ previous</a>
      <a href="#/episode/${episode.next}" ${episode.next == null ? "hidden" : ""}>next ›</a> · <a href="export/${id}.html" download>save as one HTML file</a>`}
      ${episode.samples.length ? ` · <a href="#/tokens/${id}" id="token-link">tokens</a>` : ""}</nav>
    <h1>${esc(row.task)} <span class="${failed(row) ? "failed" : "solved"}">reward ${num(row.reward)}</span></h1>
    ${facts(trajectory, row, info)}
    ${tools(trajectory.agent.tool_definitions)}
    <section id="steps">${trajectory.steps.map(stepHtml).join("")}</section>
    ${container(info)}`;
  ready("episode");
  if (stepId) document.getElementById(`step-${stepId}`)?.scrollIntoView();
}

function facts(trajectory, row, info) {
  const items = [["env", row.env], ["seed", row.seed], ["agent", `${trajectory.agent.name} ${trajectory.agent.version}`],
    ["model", trajectory.agent.model_name], ["outcome", [info.outcome, info.outcome_reason, info.outcome_detail].filter((x) => x != null).join(" · ")],
    ["end", row.end], ["turns", row.turns], ["steps", row.steps], ["tokens", row.tokens], ["time", row.seconds == null ? null : `${seconds(row.seconds)} s`],
    ["session", trajectory.session_id], ["error", info.error]];
  return `<dl class="facts">${items.filter(([, value]) => value != null && value !== "")
    .map(([name, value]) => `<dt>${name}</dt><dd class="${name === "error" ? "error" : ""}">${esc(value)}</dd>`).join("")}</dl>`;
}

function tools(definitions) {
  if (!definitions || !definitions.length) return "";
  const items = definitions.map((tool) => tool.function || tool).map((tool) => `<li><b>${esc(tool.name)}</b> ${esc(tool.description)}
    <pre>${esc(json(tool.parameters))}</pre></li>`);
  return `<details class="tools"><summary>${definitions.length} tools</summary><ul>${items.join("")}</ul></details>`;
}

function stepHtml(step) {
  const extra = step.extra || {};
  const side = extra.side_call;
  const body = `
    ${step.message && text(step.message) ? `<pre class="message">${esc(text(step.message))}</pre>` : ""}
    ${step.reasoning_content ? `<details class="reasoning"><summary>reasoning</summary><pre>${esc(step.reasoning_content)}</pre></details>` : ""}
    ${(step.tool_calls || []).map((call) => `<div class="call"><span class="name">${esc(call.function_name)}</span>
      <span class="muted">${esc(call.tool_call_id)}</span><pre>${esc(json(call.arguments))}</pre></div>`).join("")}
    ${extra.error ? `<p class="error">invalid action: ${esc(extra.error)}</p>` : ""}
    ${((step.observation || {}).results || []).map((result) => `<div class="result">
      <span class="muted">${result.source_call_id ? `→ ${esc(result.source_call_id)}` : "→ env"}</span>
      <pre>${esc(text(result.content))}</pre></div>`).join("")}`;
  const notes = [extra.reward != null ? `reward ${num(extra.reward)}` : "", metrics(step.metrics), call(extra.call)].filter(Boolean).join(" · ");
  const head = `<span class="badge">${esc(step.source)}</span> step ${step.step_id}
    ${side ? `<span class="badge side">side call: ${esc(side)}</span>` : ""} <span class="muted">${esc(notes)}</span>`;
  const classes = `step source-${esc(step.source)}${side ? " side-call" : ""}${extra.error ? " invalid" : ""}`;
  return side
    ? `<details class="${classes}" id="step-${step.step_id}"><summary>${head}</summary>${body}<pre>${esc(json(extra.call || {}))}</pre></details>`
    : `<article class="${classes}" id="step-${step.step_id}"><header>${head}</header>${body}</article>`;
}

function metrics(m) {
  if (!m) return "";
  const prompt = m.prompt_tokens ?? (m.prompt_token_ids || []).length;
  const completion = m.completion_tokens ?? (m.completion_token_ids || []).length;
  return prompt || completion ? `${prompt} prompt + ${completion} completion tokens` : "";
}

function call(c) {
  if (!c) return "";
  return [c.wire, c.status, c.agent_seconds != null ? `agent ${num(c.agent_seconds, 2)} s` : "",
    c.policy_seconds != null ? `policy ${num(c.policy_seconds, 2)} s` : ""].filter(Boolean).join(", ");
}

function container(info) {
  const report = info.report;
  if (!info.patch && !report) return "";
  const scores = info.scores && Object.keys(info.scores).length
    ? `<table class="scores">${Object.entries(info.scores).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="n">${num(v)}</td></tr>`).join("")}</table>` : "";
  const { log, ...rest } = report || {};
  return `<section id="grading"><h2>grading</h2>${scores}
    ${info.patch ? `<details open id="diff"><summary>the diff graded (${info.patch.split("\n").length} lines)</summary><pre class="diff">${diff(info.patch)}</pre></details>` : ""}
    ${log ? `<details id="log"><summary>the grading log (${log.split("\n").length} lines)</summary><pre class="log">${esc(log)}</pre></details>` : ""}
    ${report ? `<details id="report"><summary>the report</summary><pre>${esc(json(rest))}</pre></details>` : ""}</section>`;
}

function diff(patch) {
  return patch.split("\n").map((line) => {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    return `<span class="${kind}">${esc(line)}</span>`;
  }).join("\n");
}

// ---- the token page -----------------------------------------------------------------------------------------

async function tokenPage(id) {
  const episode = await load(`episode/${id}`);
  const { row, trajectory, samples } = episode;
  where(esc(row.file));
  const turnOf = new Map(trajectory.steps.filter((s) => s.source === "agent" && !(s.extra || {}).side_call).map((s, i) => [s.step_id, i + 1]));
  page.innerHTML = `
    <nav><a href="#/episode/${id}">← episode</a></nav>
    <h1>tokens of ${esc(row.task)} <span class="${failed(row) ? "failed" : "solved"}">reward ${num(row.reward)}</span></h1>
    <p class="legend"><span class="tok p-prompt">prompt</span> <span class="tok p-policy" data-mask="1" style="--shade:0">sampled by the policy (env mask 1)</span>
      <span class="tok p-policy" data-mask="1" style="--shade:0.8">a sampled token of low probability</span>
      <span class="tok p-env" data-mask="0">written by the env and the template (env mask 0)</span>
      · hover a token for its id, logprob and mask</p>
    ${samples.length ? samples.map((sample, i) => sampleHtml(sample, i, samples.length, id, turnOf)).join("")
      : `<p class="muted">This trajectory holds no token ids: training rollouts record them (make_rollout_func(..., trajectories=DIR)).</p>`}`;
  ready("tokens");
}

function sampleHtml(segments, index, total, id, turnOf) {
  const counted = { prompt: 0, policy: 0, env: 0 };
  const logprobs = [];
  for (const segment of segments) {
    counted[segment.producer] += segment.ids.length;
    logprobs.push(...(segment.logprobs || []));
  }
  const meanLogprob = logprobs.length ? logprobs.reduce((s, v) => s + v, 0) / logprobs.length : null;
  const groups = [];
  for (const segment of segments) {
    const key = segment.producer === "prompt" ? "prompt" : segment.step_id ?? "earlier";
    if (!groups.length || groups[groups.length - 1].key !== key) groups.push({ key, segments: [] });
    groups[groups.length - 1].segments.push(segment);
  }
  const turns = groups.map((group) => {
    const label = group.key === "prompt" ? "prompt" : group.key === "earlier" ? "its turns (their messages were rewritten)"
      : `<a href="#/episode/${id}/step/${group.key}">step ${group.key}${turnOf.has(group.key) ? ` · turn ${turnOf.get(group.key)}` : ""}</a>`;
    return `<div class="turn"><div class="turn-head">${label}</div><div class="tokens">${group.segments.map(tokensHtml).join("")}</div></div>`;
  }).join("");
  return `<section class="sample" data-sample="${index}">
    <h2>${total > 1 ? `sample ${index + 1} of ${total}` : "the sample trained on"}</h2>
    <p>${counted.prompt} prompt tokens · ${counted.policy} sampled (mean logprob ${num(meanLogprob)}) · ${counted.env} from the env</p>
    ${turns}</section>`;
}

function tokensHtml(segment) {
  const mask = segment.producer === "policy" ? "1" : segment.producer === "env" ? "0" : "";
  return segment.ids.map((tokenId, i) => {
    const logprob = segment.logprobs ? segment.logprobs[i] : null;
    const shade = logprob == null ? 0 : 1 - Math.exp(logprob);
    const shown = segment.texts ? segment.texts[i] : `${tokenId} `;
    const title = `id ${tokenId}${segment.texts ? ` ${JSON.stringify(segment.texts[i])}` : ""}${logprob == null ? "" : ` · logprob ${num(logprob, 4)} (p ${num(Math.exp(logprob))})`}${mask ? ` · env mask ${mask}` : ""}`;
    return `<span class="tok p-${segment.producer}" data-id="${tokenId}"${mask ? ` data-mask="${mask}"` : ""} style="--shade:${shade.toFixed(3)}" title="${esc(title)}">${visible(shown)}</span>`;
  }).join("");
}

function visible(token) {
  return esc(token).replace(/\n/g, "↵\n").replace(/\t/g, "→\t");
}

// ---- routes -------------------------------------------------------------------------------------------------

function route() {
  const [name, id, , stepId] = location.hash.replace(/^#\/?/, "").split("/");
  delete document.body.dataset.ready;
  const first = EMBEDDED ? Object.keys(EMBEDDED.episodes)[0] : null;
  const view = name === "episode" ? episodePage(Number(id), stepId) : name === "tokens" ? tokenPage(Number(id))
    : first != null ? episodePage(Number(first)) : runPage();
  view.catch((error) => {
    page.innerHTML = `<p class="error">${esc(error.message)}</p>`;
    ready("error");
  });
}

window.addEventListener("hashchange", route);
route();
