// The dashboard page: polls /api/state, renders it, and posts the controls. No external scripts.
"use strict";

const $ = (id) => document.getElementById(id);
const POLL_MS = 600;
const MAX_LOG = 2000;
// The server's per-run token, put in the page by the server: every state-changing request sends it.
const TOKEN = document.querySelector('meta[name="dashboard-token"]').content;
let epoch = null;
let since = 0;
let last = {};  // JSON of what was rendered last, per part, so inputs and selections survive re-renders
let selected = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function show(text, kind = "info") {
  const box = $("message");
  box.textContent = text;
  box.className = "message " + kind;
}

async function api(path, body) {
  const options = { method: body === undefined ? "GET" : "POST", headers: {} };
  if (body !== undefined) {  // the server refuses a POST that is not JSON or lacks the token
    options.headers["Content-Type"] = "application/json";
    options.headers["X-Dashboard-Token"] = TOKEN;
    options.body = JSON.stringify(body ?? {});
  }
  let response, data;
  try {
    response = await fetch(path, options);
    data = await response.json();
  } catch (err) {
    show("the server cannot be reached: " + err, "error");
    throw err;
  }
  if (!response.ok) {
    show(`${response.status}: ${data.error || JSON.stringify(data)}`, "error");
    throw new Error(data.error);
  }
  if (data.message) show(data.message, "info");
  refresh();
  return data;
}

function changed(part, value) {
  const text = JSON.stringify(value);
  if (last[part] === text) return false;
  last[part] = text;
  return true;
}

// -- rendering -------------------------------------------------------------------------------------------------

function renderAgents(agents, played) {
  if (!changed("agents", [agents, played])) return;
  const body = $("agents").querySelector("tbody");
  body.replaceChildren();
  for (const a of agents) {
    const profile = `${a.gender}, ${a.age}; ${a.career}; ${a.traits}; likes ${a.interests.join(", ")}; ` +
      `${a.features.join(", ")}; friends ${a.friends.map((f) => "#" + f).join(" ") || "none"}`;
    const row = el("tr", { "data-agent": a.id, onclick: () => select(a.id) },
      el("td", {}, a.id), el("td", { class: "name" }, a.name + (a.edited ? " *" : "") + (a.id === played ? " (you)" : "")),
      el("td", {}, el("span", { class: "st " + a.status }, a.status)),
      el("td", { class: "profile" }, profile), el("td", {}, a.watched));
    if (a.id === selected) row.classList.add("selected");
    body.append(row);
  }
  for (const select of document.querySelectorAll(".agent-select")) {
    const keep = select.value;
    select.replaceChildren(...agents.map((a) => el("option", { value: "#" + a.id }, `${a.name} (#${a.id})`)));
    if (keep) select.value = keep;
  }
}

function select(id) {
  selected = id;
  for (const row of $("agents").querySelectorAll("tr[data-agent]")) {
    row.classList.toggle("selected", Number(row.dataset.agent) === id);
  }
  for (const select of document.querySelectorAll(".agent-select")) select.value = "#" + id;
}

function renderLog(log) {
  const list = $("log");
  const atBottom = list.parentElement.scrollTop + list.parentElement.clientHeight >= list.parentElement.scrollHeight - 20;
  for (const line of log.lines) {
    list.append(el("li", { class: line.kind === "notice" || line.kind === "error" ? line.kind : "event" }, line.text));
  }
  while (list.children.length > MAX_LOG) list.firstChild.remove();
  since = log.next;
  if (atBottom && log.lines.length) list.parentElement.scrollTop = list.parentElement.scrollHeight;
}

function dl(node, pairs) {
  node.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderSystem(s, usage, recommenders) {
  $("clock").textContent = `${s.run} · round ${s.round}/${s.rounds} · ${s.clock}`;
  if (changed("system", s)) {
    dl($("system"), [
      ["dataset", s.dataset], ["users", s.users], ["items", s.items],
      ["interactions so far", s.interactions], ["recommender", s.recommender], ["execution", s.execution],
      ["language model", s.llm_backend], ["round", `${s.round} of ${s.rounds}`],
    ]);
    $("popular").replaceChildren(...s.most_popular.map((p) => el("li", {}, `${p.title} (${p.watches})`)));
    if (document.activeElement !== $("mode")) $("mode").value = s.execution;
  }
  if (changed("recommenders", recommenders)) {
    $("recommender").replaceChildren(...recommenders.map((r) => el("option", {}, r)));
  }
  if (changed("recommender", s.recommender)) $("recommender").value = s.recommender;
  dl($("usage"), [
    ["calls", usage.calls], ["prompt tokens", usage.prompt_tokens], ["completion tokens", usage.completion_tokens],
    ["cost (USD)", usage.cost_usd.toFixed(4)],
  ]);
}

const CHART_FONT_PX = 12;  // CSS pixels: the canvas is drawn at its displayed size, so this is what one sees

function drawChart(canvas, xs, ys, color, digits) {
  // Size the bitmap to the canvas's displayed box (times the pixel ratio): nothing is scaled down afterwards.
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  if (!w || !h) return;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  canvas.dataset.fontPx = CHART_FONT_PX;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = `${CHART_FONT_PX}px system-ui, sans-serif`;
  const top = Math.max(0, ...ys) || 1;  // all zeros: a unit scale rather than a collapsed axis
  const yTicks = digits ? [0, top / 2, top] : [...new Set([0, Math.round(top / 2), top])];  // counts: whole ticks
  const tickText = (v) => v.toFixed(digits);
  const left = 10 + Math.ceil(Math.max(...yTicks.map((v) => ctx.measureText(tickText(v)).width)));
  const upper = CHART_FONT_PX / 2 + 4, right = 12, bottom = 2 * CHART_FONT_PX + 12;
  const plotW = w - left - right, plotH = h - upper - bottom;
  const y = (v) => upper + plotH - (v / top) * plotH;
  ctx.strokeStyle = "#99a";
  ctx.fillStyle = "#444";
  ctx.beginPath();
  ctx.moveTo(left, upper); ctx.lineTo(left, upper + plotH); ctx.lineTo(left + plotW, upper + plotH);
  ctx.stroke();
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const v of yTicks) {
    ctx.fillText(tickText(v), left - 6, y(v));
    ctx.beginPath(); ctx.moveTo(left - 3, y(v)); ctx.lineTo(left, y(v)); ctx.stroke();
  }
  ctx.textAlign = "right";
  ctx.textBaseline = "bottom";
  ctx.fillText("round", w - 2, h - 1);
  if (!ys.length) {
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText("no rounds yet", left + plotW / 2, upper + plotH / 2);
    return;
  }
  const step = plotW / ys.length;
  const x = (i) => left + step * (i + 0.5);
  ctx.fillStyle = color;
  ctx.strokeStyle = color;
  ctx.lineWidth = 2;
  ctx.beginPath();
  ys.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
  ctx.stroke();
  ys.forEach((v, i) => {
    ctx.beginPath(); ctx.arc(x(i), y(v), 3.5, 0, 2 * Math.PI); ctx.fill();
  });
  ctx.fillStyle = "#444";
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const labelW = Math.max(...xs.map((r) => ctx.measureText(String(r)).width)) + CHART_FONT_PX;
  const every = Math.ceil(xs.length / Math.max(1, Math.floor(plotW / labelW)));  // labels never overlap
  xs.forEach((r, i) => { if (i % every === 0) ctx.fillText(String(r), x(i), upper + plotH + 4); });
}

let charts = null;
function renderCharts(data) {
  if (!changed("charts", data)) return;
  charts = data;
  drawChart($("chart-watches"), data.round, data.watches, "#1971c2", 0);
  drawChart($("chart-entropy"), data.round, data.entropy, "#e8590c", 2);
}
// A resized canvas is redrawn at its new size (the bitmap follows the displayed box, see drawChart).
new ResizeObserver(() => { if (charts) { delete last.charts; renderCharts(charts); } })
  .observe($("chart-watches"));

function renderCheckpoints(list) {
  if (!changed("checkpoints", list)) return;
  $("ckpt-list").replaceChildren(...list.slice().reverse().map((c) => el("li", { "data-id": c.id },
    `${c.id}${c.latest ? " (latest)" : ""}${c.current_run ? " · current run" : ""} `,
    el("button", { class: "load", onclick: () => api("/api/checkpoints/load", { id: c.id }) }, "Load"))));
}

function human(kind, extra = {}) {
  return api("/api/human/act", { kind, ...extra });
}

function renderHuman(h) {
  $("play-who").textContent = h.agent === null ? "nobody is played" : `you play ${h.name} (#${h.agent})`;
  $("play-transcript").textContent = h.transcript.join("\n");
  if (!changed("question", h.question)) return;
  const box = $("play-question");
  box.replaceChildren();
  const q = h.question;
  box.dataset.seq = q ? q.seq : "";
  if (!q) return;
  box.append(el("div", { class: "prompt" }, q.prompt));
  if (q.kind === "action") {
    for (const k of ["recommender", "social", "nothing"]) box.append(el("button", { class: "act-" + k, onclick: () => human(k) }, k));
  } else if (q.kind === "page") {
    const rating = el("select", { id: "play-rating" }, el("option", { value: "" }, "no rating"),
      ...[1, 2, 3, 4, 5].map((r) => el("option", { value: r }, `${r} stars`)));
    box.append(el("ol", { class: "items" }, ...q.items.map((it) => el("li", { title: it.text }, `${it.title} `,
      el("button", { class: "watch", onclick: () => human("watch", rating.value ? { n: it.n, rating: Number(rating.value) } : { n: it.n }) }, "Watch")))));
    const query = el("input", { id: "play-query", placeholder: "search the catalogue" });
    box.append(rating, " ", el("button", { class: "act-next", onclick: () => human("next") }, "Next page"), " ",
      el("button", { class: "act-leave", onclick: () => human("leave") }, "Leave"), el("br"), query,
      el("button", { class: "act-search", onclick: () => human("search", { query: query.value }) }, "Search"));
  } else if (q.kind === "social") {
    const friend = el("select", { id: "play-friend" }, ...q.friends.map((f) => el("option", { value: "#" + f.id }, f.name)));
    const text = el("input", { id: "play-text", placeholder: "message or post" });
    box.append(friend, text, el("br"),
      el("button", { class: "act-chat", onclick: () => human("chat", { friend: friend.value, text: text.value }) }, "Chat"),
      el("button", { class: "act-post", onclick: () => human("post", { text: text.value }) }, "Post"),
      el("button", { class: "act-skip", onclick: () => human("skip") }, "Skip"));
  }
  box.append(" ", el("button", { class: "act-give-up", onclick: () => human("give_up") }, "Give up"));
}

function render(state) {
  if (state.epoch !== epoch) {
    epoch = state.epoch;
    $("log").replaceChildren();
    if (since !== 0) { since = 0; return false; }  // the run was replaced: read its log from the start
  }
  const status = $("status");
  status.textContent = state.status.replaceAll("_", " ");
  status.className = "badge " + state.status;
  status.dataset.status = state.status;
  if (state.error && changed("error", state.error)) show(state.error, "error");
  renderAgents(state.agents, state.human.agent);
  renderLog(state.log);
  renderSystem(state.system, state.usage, state.recommenders);
  renderCharts(state.charts);
  renderCheckpoints(state.checkpoints);
  renderHuman(state.human);
  return true;
}

let polling = false;
async function refresh() {
  if (polling) return;
  polling = true;
  try {
    for (let tries = 0; tries < 2; tries++) {
      const response = await fetch("/api/state?since=" + since);
      if (!response.ok) throw new Error("state: " + response.status);
      if (render(await response.json())) break;
    }
  } catch (err) {
    show("lost the server: " + err.message, "error");
  } finally {
    polling = false;
  }
}

// -- controls --------------------------------------------------------------------------------------------------

function onSubmit(id, handler) {
  $(id).addEventListener("submit", (event) => { event.preventDefault(); handler().catch(() => {}); });
}
function onClick(id, handler) {
  $(id).addEventListener("click", () => handler().catch(() => {}));
}

onClick("start", () => api("/api/start", { rounds: Number($("rounds").value) }));
onClick("pause", () => api("/api/pause", null));
onClick("step", () => api("/api/step", null));
onClick("reset", () => api("/api/reset", null));
$("mode").addEventListener("change", () => api("/api/mode", { execution: $("mode").value }).catch(() => {}));
onClick("swap", () => api("/api/recommender", { model: $("recommender").value }));

onSubmit("edit-form", () => {
  const body = {};
  for (const key of ["traits", "career"]) if ($("edit-" + key).value.trim()) body[key] = $("edit-" + key).value;
  if ($("edit-interests").value.trim()) body.interests = $("edit-interests").value.split(",").map((s) => s.trim());
  if ($("edit-age").value !== "") body.age = Number($("edit-age").value);
  const who = encodeURIComponent($("edit-agent").value);
  return api(`/api/agents/${who}/profile`, body);
});
onSubmit("post-form", () => api("/api/posts", { author: $("post-author").value, text: $("post-text").value }));
onSubmit("interview-form", async () => {
  const who = encodeURIComponent($("interview-agent").value);
  $("interview-answer").textContent = "asking...";
  try {
    const data = await api(`/api/agents/${who}/interview`, { question: $("interview-question").value });
    $("interview-answer").textContent = `${data.name}: ${data.answer}`;
  } catch (err) {
    $("interview-answer").textContent = "";
    throw err;
  }
});
onClick("ckpt-save", () => api("/api/checkpoints/save", null));
onClick("play-start", () => api("/api/human/play", { agent: $("play-agent").value }));
onClick("play-stop", () => api("/api/human/stop", null));

refresh();
setInterval(refresh, POLL_MS);
