// reme view: one page over run records (served live by `reme view`, or exported whole).
// Every text that comes from a run (model output, tool output, memory items) is put on the
// page as text (textContent), never as markup: model output is untrusted.
"use strict";

// ------------------------------------------------------------------ data
const EMBEDDED = (() => {
  const el = document.getElementById("reme-data");
  return el ? JSON.parse(el.textContent) : null;
})();
const fetched = new Map();

async function get(key) {
  if (EMBEDDED) {
    let value = EMBEDDED[key];
    if (value === undefined) throw new Error(`this export holds no page ${key}`);
    if (typeof value === "string") { value = JSON.parse(value); EMBEDDED[key] = value; }  // parsed when first shown
    return value;
  }
  if (!fetched.has(key)) {
    fetched.set(key, fetch("api/" + key.split("/").map(encodeURIComponent).join("/"), {cache: "no-store"})
      .then(async (r) => {
        const body = await r.json().catch(() => ({}));
        if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
        return body;
      }));
  }
  return fetched.get(key);
}

// ------------------------------------------------------------------ DOM
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}
const link = (href, ...kids) => h("a", {href}, ...kids);
const enc = encodeURIComponent;
const pre = (text, cls) => h("pre", {class: cls}, text ?? "");
const fold = (label, ...body) => h("details", {}, h("summary", {}, label), ...body);
const pill = (text, cls) => h("span", {class: "pill " + (cls || "")}, text);

// A heading written "#name" is a column of numbers (right-aligned).
function table(head, rows, opts = {}) {
  return h("table", {class: opts.class, id: opts.id},
    h("thead", {}, h("tr", {}, head.map((c) => c.startsWith("#") ? h("th", {class: "num"}, c.slice(1)) : h("th", {}, c)))),
    h("tbody", {}, rows));
}
function td(value, cls) { return h("td", {class: cls}, value); }
const num = (v) => td(v, "num");

// ------------------------------------------------------------------ formats
const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(1);
const fixed = (x, d = 2) => (x === null || x === undefined) ? "–" : Number(x).toFixed(d);
function meanStd(mean, std) { return mean === null || mean === undefined ? "–" : `${pct(mean)} ± ${pct(std)}`; }
function ci(pair) { return pair && pair[0] !== null ? `[${pct(pair[0])}, ${pct(pair[1])}]` : ""; }
function clip(text, n) { text = text || ""; return text.length > n ? text.slice(0, n - 1) + "…" : text; }
function naturalCmp(a, b) { return String(a).localeCompare(String(b), undefined, {numeric: true}); }
function outcome(s) { return s === null ? pill("error", "bad") : s ? pill("solved", "ok") : pill("failed", "bad"); }
function numbers(n) {
  if (!n) return "–";
  return Object.entries(n).map(([k, v]) => `${k}=${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(2) : v}`).join(" ");
}

// ------------------------------------------------------------------ routing
let INDEX = null;
const RUN_PAGES = ["units", "memory", "health"];

function parseRoute() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = (path || "overview").split("/").map(decodeURIComponent);
  return {page: parts[0] || "overview", args: parts.slice(1), params: new URLSearchParams(query || "")};
}
function runById(id) { return INDEX.runs.find((r) => r.id === id); }
function runName(r) { return r ? `${r.suite_name ? r.suite_name + " / " : ""}${r.label}` : "?"; }
function defaultRun(page) {
  const memory = INDEX.runs.find((r) => r.has_memory);
  return page !== "units" && memory ? memory.id : (INDEX.runs[0] || {}).id;
}
function runSelect(current, page, only) {
  const runs = INDEX.runs.filter(only || (() => true));
  return h("label", {}, "run ", h("select", {id: "run-select", onchange: (e) => { location.hash = `#/${page}/${e.target.value}`; }},
    runs.map((r) => h("option", {value: r.id, selected: r.id === current}, `${runName(r)} — ${r.setting}`))));
}

function nav(route) {
  const run = route.args[0] && runById(route.args[0]) ? route.args[0] : null;
  const items = [["overview", "#/overview", "Overview"], ["grid", "#/grid", "Task grid"]];
  for (const p of RUN_PAGES) items.push([p, `#/${p}/${run || defaultRun(p) || ""}`, p[0].toUpperCase() + p.slice(1)]);
  const navEl = document.getElementById("nav");
  navEl.replaceChildren(...items.map(([p, href, text]) =>
    h("a", {href, class: route.page === p || (p === "units" && route.page === "unit") ? "here" : null, id: "nav-" + p}, text)));
}

async function render() {
  const main = document.getElementById("main");
  const route = parseRoute();
  try {
    if (!INDEX) INDEX = await get("index");
    nav(route);
    const pages = {overview: pageOverview, grid: pageGrid, units: pageUnits, unit: pageUnit, memory: pageMemory, health: pageHealth};
    const page = pages[route.page] || pageOverview;
    const body = await page(route);
    main.replaceChildren(...[body].flat(Infinity).filter((x) => x !== null && x !== undefined && x !== false));
    main.dataset.page = route.page;
    window.scrollTo(0, 0);
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);  // for tests and benchmarks
  } catch (err) {
    main.replaceChildren(h("p", {class: "err", id: "page-error"}, "Could not show this page: " + err.message));
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  }
}
window.addEventListener("hashchange", render);

function header() {
  const source = document.getElementById("source");
  source.textContent = INDEX.live ? `live · ${INDEX.sources.join(", ")} · reload for new units`
                                  : `exported ${INDEX.generated_at} · ${INDEX.sources.join(", ")}`;
  const doubles = INDEX.runs.filter((r) => r.test_double);
  const banner = document.getElementById("banner");
  if (doubles.length) {
    banner.hidden = false;
    banner.textContent = `${doubles.length} of ${INDEX.runs.length} run(s) were scored against reme's scripted server, ` +
      "a test double that answers from a script: their numbers are not model results.";
  }
}

// ------------------------------------------------------------------ overview
async function pageOverview() {
  const rows = [];
  let suite;
  for (const r of INDEX.runs) {
    if (r.suite_name !== suite) {
      suite = r.suite_name;
      rows.push(h("tr", {class: "group"}, h("td", {colspan: 11}, suite ? `suite ${suite}` : "runs")));
    }
    const k = r.k;
    rows.push(h("tr", {class: "run-row", "data-run": r.id},
      td(h("div", {}, h("b", {}, r.label), h("div", {class: "muted small"}, `${r.benchmark} · ${r.model}`))),
      td(r.setting),
      num(h("span", {}, meanStd(r.avg_mean, r.avg_std), h("div", {class: "muted small"}, ci(r.avg_ci)))),
      num(h("span", {}, meanStd(r.pass_mean, r.pass_std), h("div", {class: "muted small"}, ci(r.pass_ci)))),
      num(r.first_avg_mean !== r.avg_mean ? pct(r.first_avg_mean) : "="),
      num(`${r.n_units}/${r.expected_units}`),
      num(r.n_errors || 0),
      td(pill(r.status + (r.partial ? " †" : ""), r.status === "complete" && !r.partial ? "ok" : "warn")),
      td(r.fidelity.map((n) => pill(n, /test double|smoke/.test(n) ? "warn" : ""))),
      td(h("span", {}, link(`#/grid?a=${r.id}`, "grid"), " · ", link(`#/units/${r.id}`, "units"),
        r.has_memory ? [" · ", link(`#/memory/${r.id}`, "memory")] : null, " · ", link(`#/health/${r.id}`, "health"))),
      td(h("span", {class: "muted small"}, `k=${k}, seeds=${r.seeds}`))));
  }
  const k = INDEX.runs.length ? INDEX.runs[0].k : "k";
  return [h("h1", {}, "Overview"),
    h("p", {class: "muted"}, `Avg@k and Pass@k in %: mean ± std over seeds, and below it a 95% interval (tasks resampled). ` +
      "First trial: Avg@k over each unit's first trial where a method retried (= when none did). † partial: units missing or errored."),
    table(["run", "setting", "#Avg@k", "#Pass@k", "#first trial", "#units", "#errors", "status", "fidelity notes", "", ""], rows, {id: "overview"})];
}

// ------------------------------------------------------------------ task grid
async function allUnits(ids) {
  const out = {};
  await Promise.all(ids.map(async (id) => { out[id] = await get("units/" + id); }));
  return out;
}
function byTask(units, filter) {
  const m = new Map();
  for (let i = 0; i < units.unit.length; i++) {
    if (filter && !filter(i)) continue;
    const t = units.task[i];
    if (!m.has(t)) m.set(t, []);
    m.get(t).push(i);
  }
  return m;
}
function rate(units, idx) {
  const scored = idx.filter((i) => units.success[i] !== null);
  return {n: scored.length, s: scored.reduce((a, i) => a + units.success[i], 0)};
}

async function pageGrid(route) {
  const ids = INDEX.runs.map((r) => r.id);
  const data = await allUnits(ids);
  const tasks = [...new Set(ids.flatMap((id) => data[id].task))].sort(naturalCmp);
  const panel = h("div", {id: "cell-units"});
  const rows = [];
  for (const r of INDEX.runs) {
    const u = data[r.id];
    const seeds = [...new Set(u.seed)].sort((a, b) => a - b);
    for (const seed of seeds) {
      const tmap = byTask(u, (i) => u.seed[i] === seed);
      rows.push(h("tr", {},
        h("th", {title: r.setting}, `${runName(r)} · seed ${seed}`),
        tasks.map((t) => {
          const idx = tmap.get(t) || [];
          const {n, s} = rate(u, idx);
          const cls = !idx.length ? "" : n === 0 ? "" : s === n ? "r1" : s === 0 ? "r0" : "rm";
          return h("td", {}, h("span", {class: "cell " + cls, title: `${t} · ${r.label} · seed ${seed}: ${s}/${n} solved`,
            "data-task": t, "data-run": r.id,
            onclick: () => showUnits(panel, r, u, idx, `${t} · ${runName(r)} · seed ${seed}`)}));
        })));
    }
  }
  const legend = h("div", {class: "legend small"}, h("span", {}, h("i", {style: "background:var(--ok)"}), "every run solved it"),
    h("span", {}, h("i", {style: "background:var(--mid)"}), "some runs"), h("span", {}, h("i", {style: "background:var(--bad)"}), "none"),
    h("span", {}, h("i", {style: "background:var(--none)"}), "not run / errored"));
  const head = h("tr", {}, h("th", {}, ""), tasks.map((t) => h("th", {class: "task-head", title: t}, t)));
  return [h("h1", {}, "Task grid"),
    h("p", {class: "muted"}, `${tasks.length} tasks (columns) × runs and seeds (rows); a cell holds the seed's k runs of the task. Click a cell for its units.`),
    legend, h("div", {style: "overflow:auto"}, h("table", {class: "grid", id: "grid"}, h("thead", {}, head), h("tbody", {}, rows))), panel,
    await compare(route, data)];
}

function showUnits(panel, run, u, idx, title) {
  panel.replaceChildren(h("h3", {}, title),
    h("ul", {}, idx.map((i) => h("li", {}, link(`#/unit/${run.id}/${enc(u.unit[i])}`, u.unit[i]), " ",
      outcome(u.success[i]), u.attempts[i] > 1 ? pill(`${u.attempts[i]} trials`) : null))));
  panel.scrollIntoView({block: "nearest"});
}

async function compare(route, data) {
  const runs = INDEX.runs;
  if (runs.length < 2) return h("p", {class: "muted"}, "Give two runs or more to compare them.");
  const none = runs.find((r) => r.mode === "none");
  const a = route.params.get("a") && runById(route.params.get("a")) ? route.params.get("a") : (none || runs[0]).id;
  const other = runs.find((r) => r.id !== a && r.has_memory) || runs.find((r) => r.id !== a);
  const b = route.params.get("b") && runById(route.params.get("b")) ? route.params.get("b") : other.id;
  const pick = (name, value) => h("select", {id: "cmp-" + name, onchange: (e) => {
    const p = new URLSearchParams({a, b}); p.set(name, e.target.value); location.hash = "#/grid?" + p.toString(); }},
    runs.map((r) => h("option", {value: r.id, selected: r.id === value}, `${runName(r)} — ${r.setting}`)));
  const ua = data[a], ub = data[b];
  const ta = byTask(ua), tb = byTask(ub);
  const groups = {fixed: [], broke: [], alone: []};
  for (const t of [...ta.keys()].filter((t) => tb.has(t)).sort(naturalCmp)) {
    const ra = rate(ua, ta.get(t)), rb = rate(ub, tb.get(t));
    if (!ra.n || !rb.n) continue;
    const d = rb.s / rb.n - ra.s / ra.n;
    groups[d > 0 ? "fixed" : d < 0 ? "broke" : "alone"].push({t, ra, rb});
  }
  const list = (name, title, items) => h("div", {id: "cmp-" + name},
    h("h3", {}, `${title} (${items.length})`),
    items.length ? h("ul", {}, items.map(({t, ra, rb}) => h("li", {"data-task": t}, h("b", {}, t), " ",
      h("span", {class: "muted"}, `${ra.s}/${ra.n} → ${rb.s}/${rb.n}`), " ",
      link(`#/units/${a}?task=${enc(t)}`, "A's units"), " · ", link(`#/units/${b}?task=${enc(t)}`, "B's units"))))
      : h("p", {class: "muted"}, "none"));
  return [h("h2", {}, "Compare two runs"),
    h("div", {class: "controls"}, h("label", {}, "A ", pick("a", a)), h("label", {}, "B ", pick("b", b))),
    h("p", {class: "muted"}, "Per task, over all seeds and runs: fixed = B solves it more often than A; broke = less often; left alone = as often."),
    h("div", {class: "cols"}, list("fixed", "Memory fixed", groups.fixed), list("broke", "Memory broke", groups.broke),
      list("alone", "Left alone", groups.alone))];
}

// ------------------------------------------------------------------ units
const PAGE = 50;

async function pageUnits(route) {
  const id = route.args[0] || defaultRun("units");
  const r = runById(id);
  if (!r) return h("p", {class: "err"}, `no run ${id}`);
  const u = await get("units/" + id);
  const task = route.params.get("task") || "";
  const show = route.params.get("show") || "all";
  const page = Number(route.params.get("page") || 0);
  let idx = [...u.unit.keys()];
  if (task) idx = idx.filter((i) => u.task[i].includes(task));
  if (show === "failed") idx = idx.filter((i) => u.success[i] === 0);
  if (show === "solved") idx = idx.filter((i) => u.success[i] === 1);
  if (show === "error") idx = idx.filter((i) => u.success[i] === null);
  if (show === "retried") idx = idx.filter((i) => u.attempts[i] > 1);
  const go = (changes) => {
    const p = new URLSearchParams({task, show, page: 0, ...changes});
    location.hash = `#/units/${id}?${p.toString()}`;
  };
  const pages = Math.max(1, Math.ceil(idx.length / PAGE));
  const rows = idx.slice(page * PAGE, page * PAGE + PAGE).map((i) => h("tr", {class: "click unit-row",
    onclick: () => { location.hash = `#/unit/${id}/${enc(u.unit[i])}`; }},
    td(link(`#/unit/${id}/${enc(u.unit[i])}`, u.unit[i])), td(u.task[i]), num(u.seed[i]), num(u.run[i]), num(u.position[i]),
    td(outcome(u.success[i])), num(u.attempts[i]), td(u.stop[i]), num(u.steps[i]), num(u.tokens[i] ?? "–"),
    num(u.retrieved[i]), num(fixed(u.best_score[i], 3)), num(fixed(u.wall_s[i], 1))));
  return [h("h1", {}, "Units"),
    h("div", {class: "controls"}, runSelect(id, "units"),
      h("label", {}, "task ", h("input", {id: "task-filter", value: task, placeholder: "task id", onchange: (e) => go({task: e.target.value})})),
      h("label", {}, "show ", h("select", {onchange: (e) => go({show: e.target.value})},
        ["all", "solved", "failed", "retried", "error"].map((s) => h("option", {value: s, selected: s === show}, s))))),
    h("p", {class: "muted"}, `${idx.length} of ${u.unit.length} units · ${r.setting} · ${runName(r)}`),
    pager(page, pages, (p) => go({page: p})),
    table(["unit", "task", "#seed", "#run", "#pos", "result", "#attempts", "stop", "#steps", "#tokens", "#retrieved", "#best score", "#wall s"], rows, {id: "units"}),
    pager(page, pages, (p) => go({page: p}))];
}

function pager(page, pages, go) {
  if (pages <= 1) return null;
  return h("div", {class: "pager"},
    h("button", {disabled: page <= 0, onclick: () => go(page - 1)}, "‹ previous"),
    h("span", {}, `page ${page + 1} of ${pages}`),
    h("button", {disabled: page >= pages - 1, onclick: () => go(page + 1)}, "next ›"));
}

// ------------------------------------------------------------------ one unit
async function pageUnit(route) {
  const [id, key] = route.args;
  const r = runById(id);
  const u = await get(`unit/${id}/${key}`);
  const tokens = u.tokens || {};
  const cards = h("div", {class: "cards"},
    h("div", {class: "card"}, "result", h("b", {}, u.error ? "error" : u.success ? "solved" : "failed")),
    h("div", {class: "card"}, "first trial", h("b", {}, u.first_success ? "solved" : "failed")),
    h("div", {class: "card"}, "trials", h("b", {}, u.attempts)),
    h("div", {class: "card"}, "stop reason", h("b", {}, u.stop_reason)),
    h("div", {class: "card"}, "tokens (prompt / completion)", h("b", {}, `${tokens.prompt ?? "–"} / ${tokens.completion ?? "–"}`)),
    h("div", {class: "card"}, "LLM latency / wall", h("b", {}, `${fixed(u.llm_latency_s, 1)} s / ${fixed(u.wall_s, 1)} s`)),
    u.retrieval_s !== null && u.retrieval_s !== undefined ? h("div", {class: "card"}, "retrieval", h("b", {}, `${fixed(u.retrieval_s, 3)} s`)) : null);
  const out = [h("h1", {}, `Unit ${u.unit}`),
    h("p", {class: "muted"}, `task ${u.task_id} · seed ${u.seed} · run ${u.run} · position ${u.position} · `,
      link(`#/units/${id}?task=${enc(u.task_id)}`, `${runName(r)} (${r.setting})`)), cards];
  if (u.error) out.push(h("h2", {}, "Error"), pre(u.error, "err"), fold("traceback", pre(u.traceback)));
  out.push(h("h2", {}, "Retrieved"), retrievedTable(id, u.retrieved));
  out.push(h("h2", {}, "Guidance sent"), u.guidance ? pre(u.guidance) : h("p", {class: "muted"}, "none: the task went without guidance"));
  if (u.first_message) out.push(fold("the first user message as sent (task text, then the guidance)", pre(u.first_message)));
  const trials = Array.isArray((u.method || {}).trials) ? u.method.trials : [];
  const attempts = [...(u.earlier_attempts || []).map((a) => ({...a, final: false})), {success: u.success, checker: u.checker, trajectory: u.trajectory, final: true}];
  out.push(h("h2", {}, `Trials (${attempts.length})`));
  attempts.forEach((a, i) => out.push(trialBlock(id, a, i, trials[i], (u.trial_retrievals || [])[i])));
  out.push(h("h2", {}, "What the method recorded"), fold("method record (JSON)", pre(JSON.stringify(u.method, null, 2))),
    fold("checker (JSON)", pre(JSON.stringify(u.checker, null, 2))));
  if (u.truncated) out.push(h("p", {class: "muted"}, `Stored strings were cut to ${u.truncated.max_chars} characters (${u.truncated.fields} fields).`));
  return out;
}

function retrievedTable(runId, items) {
  if (!items || !items.length) return h("p", {class: "muted"}, "nothing");
  return table(["##", "id", "when to use", "content", "#score", "numbers then"], items.map((e, i) => h("tr", {class: "retrieved", "data-id": e.id},
    num(i + 1), td(link(`#/memory/${runId}?item=${enc(e.id)}`, e.id)),
    td(e.title ?? h("span", {class: "muted"}, e.known ? "" : "(not in any state reme can read)")), td(h("div", {}, clip(e.text, 600))),
    num(fixed(e.score, 3)), td(h("span", {title: e.numbers_from || ""}, numbers(e.numbers))))), {class: "retrieved-table"});
}

function trialBlock(runId, a, i, trial, retrieval) {
  const traj = a.trajectory || {};
  const guided = trial ? trial.guided_by : null;
  const head = h("h3", {}, `Trial ${i + 1}${a.final ? " (scored)" : ""} `, outcome(a.success),
    guided ? pill(guided === "retrieval" ? "guided by retrieval" : "guided by the previous trial's summary") : null,
    pill(traj.stop_reason || ""));
  const body = [head];
  if (trial && trial.guidance) body.push(fold("guidance of this trial (the previous trial's summary)", pre(trial.guidance)));
  if (i > 0 && retrieval && retrieval.length) body.push(fold("what this trial retrieved", retrievedTable(runId, retrieval)));
  const user = traj.user || [];
  (traj.turns || []).forEach((steps, t) => {
    body.push(h("div", {class: "muted small"}, `turn ${t + 1}`));
    for (const msg of user[t] || []) body.push(h("div", {class: "step"}, h("b", {}, "user: "), pre(msg)));
    steps.forEach((s, j) => body.push(stepBlock(s, j)));
  });
  if (traj.stop_detail) body.push(pre(traj.stop_detail, "err"));
  return h("div", {class: "trial"}, body);
}

function stepBlock(s, j) {
  return h("div", {class: "step"},
    h("div", {class: "muted small"}, `step ${j + 1} · ${s.prompt_tokens}+${s.completion_tokens} tokens · ${fixed(s.latency_s, 2)} s${s.cached ? " · cached" : ""}`),
    s.reasoning ? fold("reasoning", pre(s.reasoning)) : null,
    s.text ? pre(s.text) : null,
    s.code !== null && s.code !== undefined ? [h("div", {}, "code:"), pre(s.code), h("div", {}, "output:"), pre(s.code_output)] :
      (s.calls || []).map((c) => h("div", {class: "call"}, h("code", {}, c.call || c.name), " ",
        fold("arguments and output", pre(typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments)),
          pre(c.output, c.error ? "err" : null)))));
}

// ------------------------------------------------------------------ memory
async function pageMemory(route) {
  const id = route.args[0] || defaultRun("memory");
  const r = runById(id);
  if (!r) return h("p", {class: "err"}, `no run ${id}`);
  const m = await get("memory/" + id);
  const out = [h("h1", {}, "Memory"), h("div", {class: "controls"}, runSelect(id, "memory", (x) => x.has_memory))];
  if (m.mode === "none") return [...out, h("p", {class: "muted"}, "This run used no memory.")];
  if (m.note) out.push(h("p", {class: "err"}, m.note));
  if (m.start) {
    out.push(h("h2", {}, "Start state"), h("p", {class: "muted"}, m.start.path), summaryCards(m.start.summary));
  } else if (m.start_note) out.push(h("h2", {}, "Start state"), h("p", {class: "muted"}, m.start_note));
  if (!m.streams.length) return [...out, h("p", {class: "muted"}, "No saved state to show.")];
  const streamName = route.params.get("stream") || m.streams[0].name;
  const s = m.streams.find((x) => x.name === streamName) || m.streams[0];
  const q = route.params.get("q") || "";
  const sort = route.params.get("sort") || "stored";
  const itemId = route.params.get("item");
  const page = Number(route.params.get("page") || 0);
  const go = (changes) => {
    const p = new URLSearchParams({stream: s.name, q, sort, page: 0, ...changes});
    if (!("item" in changes) && itemId) p.set("item", itemId);
    for (const [k, v] of [...p.entries()]) if (v === "") p.delete(k);
    location.hash = `#/memory/${id}?${p.toString()}`;
  };
  if (m.streams.length > 1 || m.mode === "dynamic") {
    out.push(h("h2", {}, m.mode === "dynamic" ? "Stream" : "State"),
      h("div", {class: "controls"}, h("select", {id: "stream-select", onchange: (e) => go({stream: e.target.value, item: ""})},
        m.streams.map((x) => h("option", {value: x.name, selected: x.name === s.name}, x.name)))));
  }
  if (itemId) out.push(lifePanel(id, m, s, itemId));
  if (s.timeline && s.timeline.seq.length) {
    const t = s.timeline;
    let add = 0, del = 0;
    out.push(h("p", {class: "muted"}, `${t.seq.length} commits · ${t.added.reduce((a, b) => a + b, 0)} added · ` +
      `${t.deleted.reduce((a, b) => a + b, 0)} deleted · ${t.updated.reduce((a, b) => a + b, 0)} updated`),
      h("div", {class: "cols"}, h("div", {}, lineChart([{name: "items in the state", ys: t.size, color: "#2857b8"}], "commit", {width: 460})),
        h("div", {}, lineChart([{name: "added so far", ys: t.added.map((x) => (add += x)), color: "#1f9d55"},
          {name: "deleted so far", ys: t.deleted.map((x) => (del += x)), color: "#d64545"}], "commit", {width: 460}))),
      fold("each commit", table(["#seq", "unit", "#added", "#deleted", "#updated", "#items"], t.seq.map((seq, i) => h("tr", {},
        num(seq), td(link(`#/unit/${id}/${enc(t.unit[i])}`, t.unit[i])), num(t.added[i]), num(t.deleted[i]), num(t.updated[i]), num(t.size[i]))))));
  }
  if (s.text) out.push(fold("the state as the agent sees it (its text)", pre(s.text)));
  const ids = itemIds(m, s);
  const used = (i) => (((s.lives || {})[i] || {}).retrieved_by || []).length;
  if (sort === "retrieved") ids.sort((a, b) => used(b) - used(a));
  if (sort === "newest") ids.reverse();
  const needle = q.toLowerCase();
  const hits = ids.filter((i) => !needle || i.toLowerCase().includes(needle) ||
    ((m.items[i] || {}).title || "").toLowerCase().includes(needle) || ((m.items[i] || {}).text || "").toLowerCase().includes(needle));
  const pages = Math.max(1, Math.ceil(hits.length / PAGE));
  out.push(h("h2", {}, "Items"),
    h("div", {class: "controls"}, h("input", {id: "memory-search", type: "search", placeholder: "search the items' text", value: q,
      onchange: (e) => go({q: e.target.value})}),
      h("label", {}, "order ", h("select", {id: "memory-sort", onchange: (e) => go({sort: e.target.value})},
        [["stored", "as stored"], ["retrieved", "most retrieved"], ["newest", "newest first"]].map(([v, t]) => h("option", {value: v, selected: v === sort}, t)))),
      h("span", {class: "muted"}, `${hits.length} of ${ids.length}`)),
    pager(page, pages, (p) => go({page: p})),
    table(["id", "kind", "what it is for", "text", "numbers", "life"], hits.slice(page * PAGE, page * PAGE + PAGE).map((i) => {
      const it = m.items[i] || {};
      const life = (s.lives || {})[i] || {};
      return h("tr", {class: "click item-row", "data-id": i, onclick: () => go({item: i, page})},
        td(link(`#/memory/${id}?stream=${enc(s.name)}&item=${enc(i)}`, clip(i, 18))), td(it.kind || ""), td(clip(it.title, 160)),
        td(clip(it.text, 220)), td(numbers((s.numbers || {})[i])),
        td(h("span", {class: "small"}, life.added_by ? `added by ${life.added_by}` : "start", life.deleted_by ? ` · deleted at commit ${life.deleted_seq}` : "",
          ` · retrieved ${(life.retrieved_by || []).length}×`)));
    }), {id: "items"}));
  return out;
}

function itemIds(m, s) {
  return [...(s.order || s.present || [])];  // every item the state held: as stored, then as added
}

function summaryCards(summary) {
  return h("div", {class: "cards"}, Object.entries(summary || {}).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) =>
    h("div", {class: "card"}, k, h("b", {}, typeof v === "object" ? Object.entries(v).map(([a, b]) => `${a} ${b}`).join(", ") : String(v)))));
}

function lifePanel(runId, m, s, itemId) {
  const it = m.items[itemId];
  const life = (s.lives || {})[itemId];
  const unitLink = (u) => link(`#/unit/${runId}/${enc(u)}`, u);
  return h("div", {class: "life", id: "life"},
    h("h3", {}, `Item ${itemId}`, it && it.kind ? pill(it.kind) : null),
    it ? [it.title ? [h("div", {class: "muted"}, "what it is for (when to use)"), pre(it.title)] : null,
      h("div", {class: "muted"}, "text"), pre(it.text),
      Object.keys(it.fields || {}).length ? fold("more fields", pre(JSON.stringify(it.fields, null, 2))) : null,
      it.origin ? h("p", {class: "muted"}, `from ${it.origin}${it.created_at ? " · " + it.created_at : ""}`) : null]
      : h("p", {class: "muted"}, "This id is in no state reme can read here."),
    h("p", {}, "numbers now: ", numbers((s.numbers || {})[itemId])),
    life ? [
      h("p", {}, life.added_by ? ["added by ", unitLink(life.added_by), ` (commit ${life.added_seq})`] : "in the start state"),
      life.updated_by.length ? h("p", {}, "updated by ", life.updated_by.map(([u, seq]) => [unitLink(u), ` (commit ${seq}) `])) : null,
      h("p", {}, `retrieved by ${life.retrieved_by.length} unit(s): `, life.retrieved_by.map(([u, seq]) => [unitLink(u), seq !== null ? ` (commit ${seq})` : "", " "])),
      life.deleted_by ? h("p", {class: "err"}, "deleted by ", unitLink(life.deleted_by), `'s commit (${life.deleted_seq})`) : null]
      : h("p", {class: "muted"}, "Never retrieved in this " + (m.mode === "dynamic" ? "stream." : "run.")));
}

// ------------------------------------------------------------------ charts
function lineChart(series, xlabel, opts = {}) {
  const W = opts.width || 640, H = opts.height || 180, L = 42, B = 24, T = 10, R = 10;
  const n = Math.max(...series.map((s) => s.ys.length), 1);
  const ymax = opts.ymax ?? Math.max(1e-9, ...series.flatMap((s) => s.ys.filter((y) => y !== null)));
  const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  const ns = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); if (text !== undefined) e.textContent = text; return e; };
  const svg = el("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "chart"});
  svg.append(el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#aaa"}), el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#aaa"}),
    el("text", {x: 2, y: T + 8}, opts.yfmt ? opts.yfmt(ymax) : String(+ymax.toFixed(2))), el("text", {x: 2, y: H - B}, "0"),
    el("text", {x: W - R - 60, y: H - 6}, `${xlabel} (${n})`));
  series.forEach((s, k) => {
    const pts = s.ys.map((v, i) => v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`).filter(Boolean).join(" ");
    svg.append(el("polyline", {points: pts, fill: "none", stroke: s.color, "stroke-width": 1.6}));
    svg.append(el("text", {x: L + 8 + k * 130, y: T + 10, fill: s.color, style: `fill:${s.color}`}, s.name));
  });
  return svg;
}

function movingAverage(ys, w) {
  return ys.map((_, i) => { const part = ys.slice(Math.max(0, i - w + 1), i + 1); return part.reduce((a, b) => a + b, 0) / part.length; });
}

// ------------------------------------------------------------------ health
async function pageHealth(route) {
  const id = route.args[0] || defaultRun("health");
  const floor = Number(route.params.get("floor") || 0.5);
  const ids = INDEX.runs.map((r) => r.id);
  const all = {};
  await Promise.all(ids.map(async (i) => { all[i] = await get("health/" + i); }));
  const setFloor = (v) => { location.hash = `#/health/${id}?floor=${v}`; };
  const hitRate = (m) => {
    const known = m ? m.best_scores.filter((x) => x !== null) : [];
    if (!known.length) return "–";  // the method scores nothing it retrieves (ACE, DC-Cu inject all)
    return `${pct(known.filter((x) => x >= floor).length / known.length)} (${known.length})`;
  };
  const rows = INDEX.runs.map((r) => {
    const hlt = all[r.id], m = hlt.memory, t = hlt.task;
    const adds = m ? m.streams.reduce((a, s) => a + s.adds, 0) : null, dels = m ? m.streams.reduce((a, s) => a + s.deletes, 0) : null;
    return h("tr", {class: "click health-row", "data-run": r.id, onclick: () => { location.hash = `#/health/${r.id}?floor=${floor}`; }},
      td(h("div", {}, h("b", {}, r.label), h("div", {class: "muted small"}, r.suite_name || ""))), td(r.setting), num(pct(t.success)), num(t.steps ? fixed(t.steps.mean, 1) : "–"),
      num(t.time_to_solve_s ? fixed(t.time_to_solve_s.mean, 1) : "–"),
      num(m && m.utility ? `${fixed(m.utility.mean)} ± ${fixed(m.utility.std)}` : "–"),
      num(adds ?? "–"), num(dels ?? "–"), num(m ? hitRate(m) : "–"),
      num(m && m.latency_s ? `${fixed(m.latency_s.median, 3)} / ${fixed(m.latency_s.max, 3)}` : "–"),
      num(m && m.rewritten ? `${m.rewritten.used}/${m.rewritten.retrievals}` : "–"),
      num(t.summaries && t.summaries.summaries ? `${t.summaries.failed}/${t.summaries.summaries}` : "–"));
  });
  const out = [h("h1", {}, "Health"),
    h("div", {class: "controls"}, h("label", {}, "similarity floor for a retrieval hit ",
      h("input", {id: "floor", type: "number", step: "0.05", min: 0, max: 1, value: floor, onchange: (e) => setFloor(e.target.value)}))),
    table(["run", "setting", "#success %", "#mean steps", "#time to solve s", "#mean u/f ± std", "#adds", "#deletes",
      `#hit rate % (best ≥ ${floor})`, "#retrieval s (median / max)", "#rewritten used", "#summaries failed"], rows, {id: "health"}),
    h("p", {class: "muted small"}, "u/f over the items retrieved at least once, at the end of each stream (fixed: the start state). " +
      "Hit rate: share of retrievals whose best hit's similarity reaches the floor. Time to solve: wall seconds of solved units. " +
      "Summaries failed: trial summaries that raised; those trials kept their reward and added nothing.")];
  const r = runById(id);
  const hlt = all[id];
  if (!r || !hlt) return out;
  out.push(h("h2", {}, `${runName(r)} — ${r.setting}`), h("div", {class: "controls"}, runSelect(id, "health")));
  const along = hlt.task.along_stream;
  if (along.position.length > 1) {
    const w = Math.max(1, Math.round(along.position.length / 10));
    out.push(h("h3", {}, "Along a stream (mean over the run's streams at each position)"),
      lineChart([{name: `success (moving avg, ${w})`, ys: movingAverage(along.success, w), color: "#1f9d55"}], "position", {ymax: 1, yfmt: () => "100%"}),
      lineChart([{name: "mean steps", ys: along.steps, color: "#2857b8"}, {name: "mean wall s", ys: along.wall_s, color: "#e0a526"}], "position"));
  }
  const m = hlt.memory;
  if (m) {
    for (const s of m.streams) {
      out.push(h("h3", {}, `State ${s.name}: ${s.items} items`),
        h("p", {class: "muted"}, "u/f: ", s.utility ? `mean ${fixed(s.utility.mean)}, std ${fixed(s.utility.std)}, median ${fixed(s.utility.median)} over ${s.utility.n}` : "no item retrieved yet",
          ` · ${s.adds} added, ${s.deletes} deleted`));
      if (s.timeline && s.timeline.seq.length > 1) {
        let a = 0, d = 0;
        out.push(lineChart([{name: "additions", ys: s.timeline.added.map((x) => (a += x)), color: "#1f9d55"},
          {name: "deletions", ys: s.timeline.deleted.map((x) => (d += x)), color: "#d64545"}], "commit", {height: 140}));
      }
      const conf = Object.entries(s.confidence || {});
      if (conf.length) out.push(fold("confidence by source (items per bin of 0.1)", table(["source", ...Array.from({length: 10}, (_, i) => "#" + (i / 10).toFixed(1))],
        conf.map(([k, bins]) => h("tr", {}, td(k), bins.map((b) => num(b)))))));
    }
  }
  return out;
}

// ------------------------------------------------------------------ start
(async () => {
  try {
    INDEX = await get("index");
    header();
  } catch (err) {
    document.getElementById("main").replaceChildren(h("p", {class: "err"}, "Could not load the runs: " + err.message));
    return;
  }
  await render();
  document.body.dataset.ready = "1";
})();
