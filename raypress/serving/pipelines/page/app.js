// The raypress run page: plain DOM, hash routes, one bearer token kept in sessionStorage.
// Server text only ever reaches the page through textContent / attributes (never innerHTML).
"use strict";
(() => {
  const STATES = ["queued", "running", "succeeded", "failed", "cancelled", "crashed"];
  const TERMINAL = new Set(["succeeded", "failed", "cancelled", "crashed"]);
  const NODE_STATES = ["running", "failed", "cancelled", "succeeded", "skipped", "pending"];  // group colour priority
  const TOKEN_KEY = "raypress.token";
  const PAGE = 25;
  const LAYER_MAX = 12;
  const TIMELINE_MAX = 80;  // a DAG layer with more nodes than this collapses look-alike siblings
  const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;
  const HTML = /\.html?$/i;
  const MIME = {png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp",
                svg: "image/svg+xml"};
  const view = document.getElementById("view");
  const flashBox = document.getElementById("flash");
  const tokenForm = document.getElementById("token-form");
  const forget = document.getElementById("forget-token");

  // ---- DOM helpers ---------------------------------------------------------------------------

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = String(value);
      else if (key === "value") node.value = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  function append(node, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const h = (tag, attrs, ...kids) => { const n = document.createElement(tag); setAttrs(n, attrs); return append(n, kids); };
  const s = (tag, attrs, ...kids) => {
    const n = document.createElementNS("http://www.w3.org/2000/svg", tag); setAttrs(n, attrs); return append(n, kids);
  };
  const badge = (state, extra) => h("span", {class: `badge st-${state}`, "data-state": state, ...extra}, state);
  const dash = () => h("span", {class: "muted"}, "—");

  function flash(message) {
    flashBox.hidden = !message;
    flashBox.textContent = message || "";
  }

  // ---- formatting ----------------------------------------------------------------------------

  const nf = new Intl.NumberFormat();
  const num = (v) => (v === null || v === undefined ? "—" : Number.isInteger(v) ? nf.format(v) : String(+v.toFixed(4)));
  const when = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : "—");
  const clock = (ts) => new Date(ts * 1000).toLocaleTimeString([], {hour12: false});
  function duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "—";
    if (seconds < 10) return `${(+seconds.toFixed(3))} s`;
    if (seconds < 60) return `${seconds.toFixed(1)} s`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${String(Math.round(seconds % 60)).padStart(2, "0")} s`;
    return `${Math.floor(seconds / 3600)} h ${String(Math.round((seconds % 3600) / 60)).padStart(2, "0")} min`;
  }
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i ? n.toFixed(1) : n} ${units[i]}`;
  }
  const clip = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
  const runHref = (id) => `#/runs/${encodeURIComponent(id)}`;
  function rejectsHref(run, node, query) {
    return `${runHref(run)}/nodes/${encodeURIComponent(node)}/rejects?${new URLSearchParams(query)}`;
  }

  // ---- token and API -------------------------------------------------------------------------

  const token = () => sessionStorage.getItem(TOKEN_KEY);

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.error && body.error.message) || `the server answered HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, {method = "GET", body, headers = {}, signal, raw = false} = {}) {
    const options = {method, signal, headers: {...headers, Authorization: `Bearer ${token()}`}};
    if (body !== undefined) {
      options.body = JSON.stringify(body);
      options.headers["Content-Type"] = "application/json";
    }
    const res = await fetch(path, options);
    if (res.status === 401) {
      askToken("The server refused the token; enter it again.");
      throw new ApiError(401, null);
    }
    if (raw && res.ok) return res;
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  function askToken(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    closeScope();
    view.replaceChildren();
    forget.hidden = true;
    tokenForm.hidden = false;
    const error = document.getElementById("token-error");
    error.hidden = !message;
    error.textContent = message || "";
    document.getElementById("token").focus();
  }

  tokenForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("token");
    const error = document.getElementById("token-error");
    const res = await fetch("/v1/runs?limit=1", {headers: {Authorization: `Bearer ${input.value.trim()}`}});
    if (res.status === 401) {
      error.hidden = false;
      error.textContent = "The server refused this token.";
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    input.value = "";
    route();
  });
  forget.addEventListener("click", () => askToken(null));

  // ---- routing: one scope per view, closed (timers, streams, object URLs) on leaving it ---------

  let scope = null;
  function closeScope() {
    if (!scope) return;
    scope.alive = false;
    scope.cleanups.forEach((fn) => fn());
    scope = null;
  }
  function openScope() {
    closeScope();
    const timers = new Set();
    const abort = new AbortController();
    const sc = {alive: true, signal: abort.signal, cleanups: [() => abort.abort(), () => timers.forEach(clearTimeout)]};
    sc.every = (ms, fn) => { timers.add(setInterval(fn, ms)); };
    sc.later = (ms, fn) => {
      const t = setTimeout(() => { timers.delete(t); fn(); }, ms);
      timers.add(t);
      return t;
    };
    sc.url = (blob) => { const u = URL.createObjectURL(blob); sc.cleanups.push(() => URL.revokeObjectURL(u)); return u; };
    scope = sc;
    return sc;
  }
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function route() {
    const [path, query] = (location.hash || "#/runs").slice(1).split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    const sc = openScope();
    view.replaceChildren();
    flash(null);
    if (!token()) { askToken(null); return; }
    tokenForm.hidden = true;
    forget.hidden = false;
    document.getElementById("nav-runs").classList.toggle("here", parts[0] === "runs");
    document.getElementById("nav-new").classList.toggle("here", parts[0] === "new");
    if (parts[0] === "new") return newRunView(sc);
    if (parts[0] === "runs" && parts.length === 1) return runsView(sc);
    if (parts[0] === "runs" && parts.length === 2) return runView(sc, parts[1]);
    if (parts[0] === "runs" && parts[2] === "nodes" && parts[4] === "rejects") {
      return rejectsView(sc, parts[1], parts[3], new URLSearchParams(query || ""));
    }
    if (!parts.length) { location.hash = "#/runs"; return; }
    view.append(h("p", {}, "No such page. ", h("a", {href: "#/runs"}, "All runs")));
  }
  window.addEventListener("hashchange", route);

  function reportError(sc, error) {
    if (!sc.alive || error.name === "AbortError" || error.status === 401) return;
    flash(error.message);
  }

  // ---- run list ------------------------------------------------------------------------------

  const listFilters = {state: "", name: ""};

  function runsView(sc) {
    let pages = 1;
    let busy = false;
    const stateSelect = h("select", {id: "filter-state", "aria-label": "state"},
      h("option", {value: ""}, "all states"), STATES.map((st) => h("option", {value: st}, st)));
    stateSelect.value = listFilters.state;
    const nameInput = h("input", {id: "filter-name", type: "search", placeholder: "pipeline name",
                                  "aria-label": "pipeline name", value: listFilters.name});
    const body = h("tbody");
    const more = h("button", {id: "more", type: "button", hidden: true}, "more");
    view.append(
      h("div", {class: "bar"}, h("h1", {}, "Runs"), h("span", {class: "grow"}), stateSelect, nameInput,
        h("a", {class: "button primary", href: "#/new"}, "New run")),
      h("table", {id: "runs", class: "grid"},
        h("thead", {}, h("tr", {}, ["run", "pipeline", "state", "created", "attempts", "ledger"].map((t) => h("th", {}, t)))),
        body),
      h("p", {class: "center"}, more));

    async function refresh() {
      if (busy) return;
      busy = true;
      try {
        const runs = [];
        let cursor = null;
        for (let page = 0; page < pages; page += 1) {
          const q = new URLSearchParams({limit: PAGE});
          if (listFilters.state) q.set("state", listFilters.state);
          if (listFilters.name) q.set("name", listFilters.name);
          if (cursor) q.set("cursor", cursor);
          const data = await api(`/v1/runs?${q}`, {signal: sc.signal});
          runs.push(...data.runs);
          cursor = data.next_cursor;
          if (!cursor) break;
        }
        if (!sc.alive) return;
        body.replaceChildren(...runs.map(runRow));
        if (!runs.length) {
          body.append(h("tr", {}, h("td", {colspan: 6, class: "muted center"}, "No runs match. ",
            h("a", {href: "#/new"}, "Start one"))));
        }
        more.hidden = !cursor;
        flash(null);
      } catch (error) {
        reportError(sc, error);
      } finally {
        busy = false;
      }
    }
    function runRow(run) {
      return h("tr", {"data-run": run.id},
        h("td", {}, h("a", {href: runHref(run.id), class: "mono"}, run.id)),
        h("td", {}, run.name),
        h("td", {}, badge(run.state, {title: run.reason || null}),
          run.reason ? h("div", {class: "small muted"}, clip(run.reason, 90)) : null),
        h("td", {}, when(run.created)),
        h("td", {class: "num"}, run.attempts),
        h("td", {}, run.adds_up === false && run.unfinished
          ? h("span", {class: "badge st-pending", "data-adds-up": "false",
                       title: `${run.unfinished} node(s) did not finish`}, `incomplete: ${run.unfinished} unfinished`)
          : addsUpBadge(run.adds_up)));
    }
    let typing = null;
    stateSelect.addEventListener("change", () => { listFilters.state = stateSelect.value; pages = 1; refresh(); });
    nameInput.addEventListener("input", () => {
      clearTimeout(typing);
      typing = sc.later(300, () => { listFilters.name = nameInput.value.trim(); pages = 1; refresh(); });
    });
    more.addEventListener("click", () => { pages += 1; refresh(); });
    refresh();
    sc.every(2000, refresh);
  }

  function ledgerBadge(ledger) {  // a ledger with unfinished nodes cannot add up: said so, not as a fault
    const unfinished = (ledger.unfinished || []).length;
    const attrs = {id: "run-adds-up", title: "rows in = rows out + dropped + duplicates + quarantined, for every node"};
    if (ledger.adds_up === false && unfinished) {
      return h("span", {...attrs, class: "badge st-pending", "data-adds-up": "false",
        title: `${unfinished} node(s) did not finish: ${ledger.unfinished.join(", ")}`}, `incomplete: ${unfinished} unfinished`);
    }
    return addsUpBadge(ledger.adds_up, attrs);
  }

  function addsUpBadge(value, extra) {
    if (value === true) return h("span", {class: "badge ok", "data-adds-up": "true", ...extra}, "adds up");
    if (value === false) return h("span", {class: "badge bad", "data-adds-up": "false", ...extra}, "does not add up");
    return dash();
  }

  // ---- server-sent events over fetch (EventSource cannot send the token) -----------------------

  async function readEvents(body, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let event = {event: "message", data: [], id: null};
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, {stream: true});
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line === "") {
          if (event.data.length) onEvent({event: event.event, id: event.id, data: event.data.join("\n")});
          event = {event: "message", data: [], id: null};
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "data") event.data.push(text);
          else if (field === "event") event.event = text;
          else if (field === "id") event.id = text;
        }
      }
    }
  }

  // ---- run page ------------------------------------------------------------------------------

  function runView(sc, id) {
    let run = null;
    let seq = 0;
    let refreshTimer = null;
    let lastRefresh = 0;
    let follower = 0;
    let artifactsShown = null;
    let endTs = null;  // when the run ended, from its last event (run_finished, run_failed, run_cancelled)  // the attempt count the artifacts were listed for, once terminal
    const el = {
      name: h("span", {id: "run-name"}, "…"),
      state: h("span", {id: "run-state", class: "badge"}),
      reason: h("span", {id: "run-reason", class: "muted"}),
      ledger: h("span", {id: "run-ledger"}),
      times: h("span", {id: "run-times", class: "muted small"}),
      cancel: h("button", {id: "cancel", type: "button", class: "danger", hidden: true}, "Cancel run"),
      resume: h("button", {id: "resume", type: "button", hidden: true}, "Resume run"),
      dag: h("div", {id: "dag-wrap", class: "dag-wrap"}),
      nodes: h("tbody"),
      timeline: h("div", {id: "timeline"}),
      logNode: h("select", {id: "log-node", "aria-label": "node"}, h("option", {value: ""}, "all nodes")),
      logs: h("div", {id: "logs", class: "logs"}),
      artifacts: h("div", {id: "artifacts"}, h("p", {class: "muted"}, "Listed once the run has ended.")),
    };
    view.append(
      h("div", {class: "bar"},
        h("a", {href: "#/runs", class: "back"}, "← runs"),
        h("h1", {}, el.name, " ", h("span", {class: "mono small muted", id: "run-id"}, id)),
        el.state, el.ledger, h("span", {class: "grow"}), el.cancel, el.resume),
      h("p", {class: "sub"}, el.reason, el.times),
      h("section", {class: "card"}, h("h2", {}, "Pipeline"), el.dag, legend()),
      h("section", {class: "card"}, h("h2", {}, "Nodes"),
        h("div", {class: "scroll-x"}, h("table", {id: "nodes", class: "grid"},
          h("thead", {}, h("tr", {}, ["node", "state", "rows in", "rows out", "kept", "dropped", "dupli\u00adcates",
            "quaran\u00adtined", "seconds", "rows/s", "conservation"].map((t) => h("th", {}, t)))),
          el.nodes))),
      h("section", {class: "card"}, h("h2", {}, "Timeline"), el.timeline),
      h("section", {class: "card"}, h("div", {class: "bar"}, h("h2", {}, "Logs"), h("span", {class: "grow"}), el.logNode),
        el.logs),
      h("section", {class: "card"}, h("h2", {}, "Artifacts"), el.artifacts));

    let inflight = false;
    let again = false;
    async function refresh() {
      if (inflight) { again = true; return; }  // one request at a time; one more after it if asked
      inflight = true;
      const mine = ++seq;
      try {
        const data = await api(`/v1/runs/${encodeURIComponent(id)}`, {signal: sc.signal});
        if (!sc.alive || mine !== seq) return;
        run = data;
        render();
      } catch (error) {
        if (error.status === 404) { view.replaceChildren(h("p", {class: "error"}, error.message)); closeScope(); return; }
        reportError(sc, error);
      } finally {
        inflight = false;
        if (again && sc.alive) { again = false; soon(); }
      }
    }
    function soon() {  // at most two refreshes a second, however fast events come
      if (refreshTimer !== null) return;
      refreshTimer = sc.later(Math.max(0, lastRefresh + 500 - Date.now()), () => {
        refreshTimer = null;
        lastRefresh = Date.now();
        refresh();
      });
    }

    function render() {
      document.title = `${run.name} · ${run.state} · raypress`;
      el.name.textContent = run.name;
      el.state.className = `badge st-${run.state}`;
      el.state.dataset.state = run.state;
      el.state.textContent = run.cancel_requested ? `${run.state} (cancelling)` : run.state;
      el.reason.textContent = run.reason || "";
      el.ledger.replaceChildren(run.ledger ? ledgerBadge(run.ledger) : "");
      const finished = run.finished || endTs;
      const took = !run.started ? null : finished ? finished - run.started
        : TERMINAL.has(run.state) ? null : Date.now() / 1000 - run.started;
      el.times.textContent = `${run.reason ? " · " : ""}created ${when(run.created)}` + (run.started ? ` · started ${when(run.started)}` : "") +
        (took !== null ? ` · ${finished ? "took" : "running for"} ${duration(took)}` : "") +
        (run.attempts > 1 ? ` · attempt ${run.attempts}` : "");
      el.cancel.hidden = TERMINAL.has(run.state);
      el.cancel.disabled = run.cancel_requested;
      el.cancel.textContent = run.cancel_requested ? "Cancelling…" : "Cancel run";
      el.resume.hidden = !["failed", "cancelled", "crashed"].includes(run.state);
      el.dag.replaceChildren(drawDag(run.nodes, (node) => {
        const row = el.nodes.querySelector(`tr[data-node="${CSS.escape(node)}"]`);
        if (row) { row.scrollIntoView({block: "center", behavior: "smooth"}); row.classList.add("flash"); sc.later(1200, () => row.classList.remove("flash")); }
      }));
      el.nodes.replaceChildren(...run.nodes.map((node) => nodeRow(run.id, node)));
      el.timeline.replaceChildren(timeline(run, run.finished || endTs));
      const chosen = el.logNode.value;
      if (el.logNode.options.length !== run.nodes.length + 1) {
        el.logNode.replaceChildren(h("option", {value: ""}, "all nodes"), run.nodes.map((n) => h("option", {value: n.id}, n.id)));
        el.logNode.value = chosen;
      }
      if (TERMINAL.has(run.state) && artifactsShown !== run.attempts) {
        artifactsShown = run.attempts;
        showArtifacts(sc, id, el.artifacts);
      }
    }

    async function follow() {
      const me = ++follower;
      let cursor = null;
      while (sc.alive && me === follower) {
        let ended = false;
        try {
          const q = cursor ? `?cursor=${encodeURIComponent(cursor)}` : "";
          const res = await api(`/v1/runs/${encodeURIComponent(id)}/events${q}`,
            {raw: true, signal: sc.signal, headers: {Accept: "text/event-stream"}});
          await readEvents(res.body, (event) => {
            if (event.id) cursor = event.id;
            if (event.event === "message") {
              const record = JSON.parse(event.data);
              if (/^run_(finished|failed|cancelled)$/.test(record.event)) endTs = record.ts;
              else if (record.event === "run_started") endTs = null;
            }
            if (event.event === "state" || event.event === "end") {
              const now = JSON.parse(event.data);
              if (run && now.state !== run.state) {
                run.state = now.state;
                run.reason = now.reason;
                if (TERMINAL.has(now.state)) run.cancel_requested = false;  // the full view follows in a moment
                render();
              }
              if (event.event === "end") ended = true;
            }
            soon();
          });
        } catch (error) {
          if (!sc.alive || error.name === "AbortError" || error.status === 401) return;
          if (error.status === 404) return;
        }
        if (ended) return;
        await sleep(2000);  // the stream dropped: pick it up where it was
      }
    }

    // logs: polled with a cursor every 2 s while the run is live, once more when it has ended
    let logCursor = null;
    let logsBusy = false;
    let logsFinal = false;
    async function pollLogs() {
      if (logsBusy) return;
      logsBusy = true;
      const node = el.logNode.value;
      try {
        for (let round = 0; round < 20; round += 1) {
          const q = new URLSearchParams({limit: 500});
          if (logCursor) q.set("cursor", logCursor);
          if (node) q.set("node", node);
          const data = await api(`/v1/runs/${encodeURIComponent(id)}/logs?${q}`, {signal: sc.signal});
          if (!sc.alive || node !== el.logNode.value) return;
          logCursor = data.next_cursor;
          addLogLines(data.lines);
          if (data.lines.length < 500) break;
        }
      } catch (error) {
        reportError(sc, error);
      } finally {
        logsBusy = false;
      }
    }
    function addLogLines(lines) {
      if (!lines.length) return;
      const box = el.logs;
      const stick = box.scrollTop + box.clientHeight >= box.scrollHeight - 24;
      box.querySelector(".muted")?.remove();
      box.append(...lines.map((line) => h("div", {class: "logline", "data-stream": line.stream, "data-node": line.node || null},
        h("span", {class: "ts"}, clock(line.ts)), h("span", {class: "lnode"}, line.node || ""), h("span", {}, line.text))));
      while (box.childElementCount > 3000) box.firstElementChild.remove();
      if (stick) box.scrollTop = box.scrollHeight;
    }
    el.logNode.addEventListener("change", () => {
      logCursor = null;
      el.logs.replaceChildren();
      pollLogs();
    });
    sc.every(2000, () => {
      if (run && TERMINAL.has(run.state)) { if (logsFinal) return; logsFinal = true; }
      pollLogs();
    });

    el.cancel.addEventListener("click", async () => {
      el.cancel.disabled = true;
      try {
        await api(`/v1/runs/${encodeURIComponent(id)}/cancel`, {method: "POST"});
      } catch (error) {
        reportError(sc, error);
      }
      soon();
    });
    el.resume.addEventListener("click", async () => {
      el.resume.disabled = true;
      try {
        await api(`/v1/runs/${encodeURIComponent(id)}/resume`, {method: "POST"});
        logsFinal = false;
        await refresh();
        follow();
      } catch (error) {
        reportError(sc, error);
      } finally {
        el.resume.disabled = false;
      }
    });

    el.logs.append(h("p", {class: "muted"}, "No log lines yet."));
    refresh().then(() => { if (sc.alive) { follow(); pollLogs(); } });
    sc.every(1000, () => { if (run && !TERMINAL.has(run.state)) el.timeline.replaceChildren(timeline(run, run.finished || endTs)); });
  }

  function legend() {
    return h("p", {class: "legend small"}, ["pending", "running", "succeeded", "skipped", "failed", "cancelled"]
      .map((st) => h("span", {class: `key st-${st}`}, st)));
  }

  // ---- the DAG: layered by longest path from a source, look-alike siblings grouped ---------------

  function layout(nodes) {
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const depth = new Map();
    const depthOf = (id, seen = new Set()) => {
      if (depth.has(id)) return depth.get(id);
      if (seen.has(id)) return 0;  // a cycle: the server refuses these, but never loop
      seen.add(id);
      const inputs = (byId.get(id).inputs || []).filter((i) => byId.has(i));
      const d = inputs.length ? 1 + Math.max(...inputs.map((i) => depthOf(i, seen))) : 0;
      depth.set(id, d);
      return d;
    };
    nodes.forEach((n) => depthOf(n.id));
    const layers = [];
    nodes.forEach((n) => { (layers[depth.get(n.id)] ||= []).push(n); });
    const boxOf = new Map();
    const boxes = layers.map((layer) => {
      const out = [];
      const groups = new Map();
      for (const node of layer) {
        const key = `${node.op}|${[...node.inputs].sort().join(",")}`;
        if (layer.length > LAYER_MAX && groups.has(key)) { groups.get(key).members.push(node); continue; }
        const box = {key: layer.length > LAYER_MAX ? `group:${key}` : `node:${node.id}`, members: [node], op: node.op};
        if (layer.length > LAYER_MAX) groups.set(key, box);
        out.push(box);
      }
      out.forEach((box) => box.members.forEach((m) => boxOf.set(m.id, box)));
      return out;
    });
    boxes.forEach((layer, d) => {  // order each layer by where its inputs sit (fewer crossings)
      layer.forEach((box, i) => {
        const ys = box.members.flatMap((m) => m.inputs).map((i) => boxOf.get(i)).filter(Boolean).map((b) => b.slot);
        box.weight = ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : i;
        box.depth = d;
      });
      if (d > 0) layer.sort((a, b) => a.weight - b.weight);
      layer.forEach((box, i) => { box.slot = i; });
    });
    const edges = new Map();
    boxes.flat().forEach((box) => box.members.forEach((m) => m.inputs.forEach((input) => {
      const from = boxOf.get(input);
      if (from && from !== box) edges.set(`${from.key}>${box.key}`, [from, box]);
    })));
    return {boxes, edges: [...edges.values()]};
  }

  function drawDag(nodes, onPick) {
    if (!nodes.length) return h("p", {class: "muted"}, "The pipeline's nodes appear once the run has been resolved.");
    const W = 210, H = 50, GX = 54, GY = 16, PAD = 12;
    const {boxes, edges} = layout(nodes);
    const tallest = Math.max(...boxes.map((l) => l.length));
    const width = PAD * 2 + boxes.length * W + (boxes.length - 1) * GX;
    const height = PAD * 2 + tallest * H + (tallest - 1) * GY;
    boxes.forEach((layer) => {
      const offset = ((tallest - layer.length) * (H + GY)) / 2;
      layer.forEach((box) => { box.x = PAD + box.depth * (W + GX); box.y = PAD + offset + box.slot * (H + GY); });
    });
    // as wide as the panel allows, shrunk to 3/4 at most (text stays readable), scrolled beyond that
    const svg = s("svg", {id: "dag", viewBox: `0 0 ${width} ${height}`, role: "img",
                          style: `width:100%;max-width:${width}px;min-width:${Math.round(width * 0.75)}px`,
                          "aria-label": "the pipeline's nodes and their inputs"},
      s("defs", {}, s("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
                                 orient: "auto-start-reverse"}, s("path", {d: "M0,0 L10,5 L0,10 z", class: "arrowhead"}))));
    for (const [from, to] of edges) {
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x - 2, y2 = to.y + H / 2, bend = Math.max(30, (x2 - x1) / 2);
      svg.append(s("path", {class: "edge", d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
                            "marker-end": "url(#arrow)", "data-from": from.key, "data-to": to.key}));
    }
    for (const box of boxes.flat()) {
      const g = box.members.length > 1 ? groupBox(box, W, H) : nodeBox(box.members[0], W, H);
      g.setAttribute("transform", `translate(${box.x},${box.y})`);
      g.addEventListener("click", () => onPick(box.members[0].id));
      svg.append(g);
    }
    return svg;
  }

  const GLYPH = {pending: "○", running: "▶", succeeded: "✓", skipped: "↷", failed: "✗", cancelled: "■"};

  function nodeBox(node, W, H) {
    return s("g", {class: `dag-node st-${node.state}`, "data-node": node.id, "data-state": node.state, tabindex: 0},
      s("title", {}, `${node.id} (${node.op}): ${node.state}`),
      s("rect", {width: W, height: H, rx: 7}),
      s("text", {x: 10, y: 20, class: "nid"}, clip(node.id, 21)),
      s("text", {x: W - 10, y: 20, class: "glyph", "text-anchor": "end"}, GLYPH[node.state] || ""),
      s("text", {x: 10, y: 38, class: "nop"}, clip(node.op, 29)));
  }

  function groupBox(box, W, H) {
    const tally = {};
    box.members.forEach((m) => { tally[m.state] = (tally[m.state] || 0) + 1; });
    const lead = NODE_STATES.find((st) => tally[st]) || "pending";
    const states = NODE_STATES.filter((st) => tally[st]);
    const text = states.map((st) => `${tally[st]} ${st}`).join(" · ");
    const short = states.map((st) => `${GLYPH[st]} ${tally[st]}`).join("  ");
    const g = s("g", {class: `dag-node dag-group st-${lead}`, "data-group": box.op, "data-members": box.members.length,
                      "data-state": lead, tabindex: 0},
      s("title", {}, `${box.members.length} × ${box.op}: ${box.members.map((m) => m.id).join(", ")}\n${text}`),
      s("rect", {x: 4, y: -4, width: W, height: H, rx: 7, class: "stack"}),
      s("rect", {width: W, height: H, rx: 7}),
      s("text", {x: 10, y: 19, class: "nid"}, clip(`${box.members.length} × ${box.op}`, 23)),
      s("text", {x: 10, y: 36, class: "nop"}, short));
    let x = 0;
    for (const st of states) {  // a bar of the members' states along the bottom
      const w = (W * tally[st]) / box.members.length;
      g.append(s("rect", {x, y: H - 6, width: w, height: 6, class: `seg st-${st}`}));
      x += w;
    }
    return g;
  }

  // ---- per-node table --------------------------------------------------------------------------

  function nodeRow(runId, node) {
    const c = node.counts;
    const link = (query, text, attrs) => h("a", {href: rejectsHref(runId, node.id, query), ...attrs}, text);
    const dropped = c && c.dropped && Object.keys(c.dropped).length
      ? h("ul", {class: "reasons"}, Object.entries(c.dropped).map(([reason, n]) =>
        h("li", {}, link({reason}, reason, {"data-reason": reason, class: "reason"}), h("span", {class: "count"}, `: ${num(n)}`))))
      : (c ? "0" : dash());
    const counted = (n, kind) => (!c ? dash() : n ? link({kind}, num(n), {"data-kind": kind}) : "0");
    const keep = c && c.keep_fraction !== null && c.keep_fraction !== undefined ? c.keep_fraction : null;
    return h("tr", {"data-node": node.id, "data-state": node.state},
      h("td", {class: "node-cell"}, h("div", {class: "strong"}, node.id), h("div", {class: "small muted"}, node.op),
        node.warnings.length ? h("div", {class: "warn small", title: node.warnings.join("\n")},
          `⚠ ${node.warnings.length} warning${node.warnings.length > 1 ? "s" : ""}`) : null),
      h("td", {}, badge(node.state)),
      h("td", {class: "num"}, c ? num(c.rows_in) : dash()),
      h("td", {class: "num"}, c ? num(c.rows_out) : dash()),
      h("td", {}, keep === null ? dash() : h("div", {class: "keep", title: `${(keep * 100).toFixed(1)}% kept`},
        h("div", {class: "keep-bar"}, h("div", {class: "keep-fill", style: `width:${Math.min(100, keep * 100)}%`})),
        h("span", {class: "small"}, `${Math.round(keep * 100)}%`))),
      h("td", {}, dropped),
      h("td", {class: "num"}, counted(c && c.duplicates, "duplicate")),
      h("td", {class: "num"}, counted(c && c.quarantined, "error")),
      h("td", {class: "num"}, c && c.seconds !== undefined ? num(c.seconds) : dash()),
      h("td", {class: "num"}, c && c.rows_per_s ? num(c.rows_per_s) : dash()),
      h("td", {}, c && c.adds_up !== undefined ? addsUpBadge(c.adds_up, {title: "rows in = out + dropped + duplicates + quarantined"}) : dash()));
  }

  // ---- timeline ------------------------------------------------------------------------------

  function timeline(run, finished) {
    const all = run.nodes.filter((n) => n.started);
    const started = all.slice(0, TIMELINE_MAX);
    if (!started.length) return h("p", {class: "muted"}, "No node has started yet.");
    const now = Date.now() / 1000;
    const t0 = Math.min(run.started || Infinity, ...started.map((n) => n.started));
    const ends = started.map((n) => n.finished || (TERMINAL.has(run.state) ? finished || n.started : now));
    const t1 = Math.max(finished || 0, ...ends, t0 + 0.001);
    const span = t1 - t0;
    return h("div", {class: "timeline"},
      started.map((n, i) => {
        const left = ((n.started - t0) / span) * 100;
        const width = Math.max(0.5, ((ends[i] - n.started) / span) * 100);
        return h("div", {class: "tl-row", "data-node": n.id},
          h("span", {class: "tl-label", title: n.id}, n.id),
          h("div", {class: "tl-track"}, h("div", {class: `tl-bar st-${n.state}`, style: `left:${left}%;width:${Math.min(width, 100 - left)}%`,
            title: `${n.id}: ${duration(ends[i] - n.started)} (${n.state})`})),
          h("span", {class: "tl-time small muted"}, duration(ends[i] - n.started)));
      }),
      all.length > started.length ? h("p", {class: "small muted"}, `… and ${all.length - started.length} more nodes`) : null,
      h("div", {class: "tl-axis small muted"}, h("span", {}, "0 s"), h("span", {}, duration(span))));
  }

  // ---- artifacts: images inline, HTML in a sandboxed frame, the rest as downloads ----------------

  async function showArtifacts(sc, id, box) {
    let list;
    try {
      list = (await api(`/v1/runs/${encodeURIComponent(id)}/artifacts`, {signal: sc.signal})).artifacts;
    } catch (error) {
      reportError(sc, error);
      return;
    }
    if (!sc.alive) return;
    const file = (path) => api(`/v1/runs/${encodeURIComponent(id)}/artifacts/${path.split("/").map(encodeURIComponent).join("/")}`,
      {raw: true, signal: sc.signal});
    const previews = h("div", {class: "previews"});
    const rows = list.map((art) => {
      const save = h("button", {type: "button", class: "link", "data-path": art.path}, "download");
      save.addEventListener("click", async () => {
        try {
          const blob = await (await file(art.path)).blob();
          const a = h("a", {href: sc.url(blob), download: art.path.split("/").pop()});
          document.body.append(a);
          a.click();
          a.remove();
        } catch (error) { reportError(sc, error); }
      });
      return h("li", {"data-artifact": art.path}, h("span", {class: "mono"}, art.path), " ",
        h("span", {class: "muted small"}, bytes(art.bytes)), " ", save);
    });
    box.replaceChildren(list.length ? h("ul", {class: "artifacts"}, rows) : h("p", {class: "muted"}, "This run wrote no artifacts."), previews);
    let shown = 0;
    for (const art of list) {
      if (shown >= 12 || !sc.alive) break;
      const image = IMAGE.test(art.path) && art.bytes < 16 * 1024 * 1024;
      const page = HTML.test(art.path) && art.bytes < 8 * 1024 * 1024;
      if (!image && !page) continue;
      shown += 1;
      try {
        const res = await file(art.path);
        let content;
        if (image) {
          const ext = art.path.split(".").pop().toLowerCase();
          const blob = new Blob([await res.blob()], {type: MIME[ext] || "application/octet-stream"});
          content = h("img", {src: sc.url(blob), alt: art.path});
        } else {
          content = h("iframe", {sandbox: "", title: art.path, referrerpolicy: "no-referrer"});
          content.srcdoc = await res.text();
        }
        if (sc.alive) previews.append(h("figure", {"data-artifact": art.path}, content, h("figcaption", {class: "mono small"}, art.path)));
      } catch (error) { reportError(sc, error); }
    }
  }

  // ---- rejected rows -------------------------------------------------------------------------

  function statText(row) {
    const match = /^(\w+) ([<>]) (min|max)$/.exec(row.reason || "");
    let value = row.detail;
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const keys = Object.keys(value);
      if (match && match[1] in value) value = value[match[1]];
      else if (keys.length === 1) value = value[keys[0]];
    }
    const text = typeof value === "number" ? num(value) : value === null || value === undefined ? ""
      : typeof value === "object" ? JSON.stringify(value) : String(value);
    if (match && row.threshold) return `${text} ${match[2]} ${row.threshold.param} ${row.threshold.value}`;
    if (row.kind === "duplicate" && text) return `duplicate of ${text}`;
    return text;
  }

  function rejectsView(sc, id, node, params) {
    const reason = params.get("reason");
    const kind = params.get("kind");
    const cursors = [null];  // the cursor of each page seen, for "previous"
    let page = 0;
    const body = h("tbody");
    const prev = h("button", {id: "prev-page", type: "button"}, "previous page");
    const next = h("button", {id: "next-page", type: "button"}, "next page");
    const where = h("span", {id: "page-no", class: "muted small"});
    const filter = reason ? `reason “${reason}”` : kind ? `kind ${kind}` : "every reason";
    view.append(
      h("div", {class: "bar"}, h("a", {href: runHref(id), class: "back"}, "← run"),
        h("h1", {}, "Rejected rows of ", h("span", {class: "mono", id: "rejects-node"}, node))),
      h("p", {class: "sub"}, h("span", {id: "rejects-filter"}, filter), " · run ",
        h("a", {href: runHref(id), class: "mono"}, id),
        reason || kind ? [" · ", h("a", {href: rejectsHref(id, node, {})}, "all of this node's rejects")] : null),
      h("section", {class: "card"}, h("div", {class: "scroll-x"}, h("table", {id: "rejects", class: "grid"},
        h("thead", {}, h("tr", {}, ["row id", "kind", "reason", "value", "source", "row"].map((t) => h("th", {}, t)))),
        body)),
        h("p", {class: "pager"}, prev, " ", where, " ", next)));

    async function load() {
      const q = new URLSearchParams({limit: 50});
      if (reason) q.set("reason", reason);
      if (kind) q.set("kind", kind);
      if (cursors[page]) q.set("cursor", cursors[page]);
      next.disabled = prev.disabled = true;
      try {
        const data = await api(`/v1/runs/${encodeURIComponent(id)}/nodes/${encodeURIComponent(node)}/rejects?${q}`,
          {signal: sc.signal});
        if (!sc.alive) return;
        cursors[page + 1] = data.next_cursor;
        body.replaceChildren(...data.rows.map(rejectRow));
        if (!data.rows.length) body.append(h("tr", {}, h("td", {colspan: 6, class: "muted center"}, "No rejected rows here.")));
        where.textContent = `page ${page + 1} · ${data.rows.length} row${data.rows.length === 1 ? "" : "s"}`;
        next.disabled = !data.next_cursor;
        prev.disabled = page === 0;
      } catch (error) {
        reportError(sc, error);
      }
    }
    function rejectRow(row) {
      const source = row.source ? (row.source.offset === null ? row.source.file : `${row.source.file}:${row.source.offset}`) : null;
      return h("tr", {"data-row": row.id || ""},
        h("td", {class: "mono"}, row.id || "—"),
        h("td", {}, row.kind || "—"),
        h("td", {}, row.reason || "—"),
        h("td", {class: "mono stat"}, statText(row) || "—"),
        h("td", {class: "mono small"}, source || "—"),
        h("td", {}, row.row ? h("details", {}, h("summary", {}, "row"), h("pre", {}, JSON.stringify(row.row, null, 2))) : dash()));
    }
    next.addEventListener("click", () => { page += 1; load(); });
    prev.addEventListener("click", () => { page = Math.max(0, page - 1); load(); });
    load();
  }

  // ---- new run -------------------------------------------------------------------------------

  const draft = {yaml: "", filename: "pipeline.yaml", overrides: ""};

  function newRunView(sc) {
    const key = randomKey();  // one per visit of the form: a double submit makes one run
    let seq = 0;
    let problemLines = new Map();
    const yamlBox = h("textarea", {id: "yaml", spellcheck: "false", wrap: "off", "aria-label": "pipeline YAML",
                                   placeholder: "name: my-pipeline\nnodes:\n  - id: docs\n    op: read_jsonl\n    with: {paths: [docs.jsonl]}"});
    yamlBox.value = draft.yaml;
    const gutter = h("div", {id: "gutter", class: "gutter", "aria-hidden": "true"});
    const fileInput = h("input", {id: "file", type: "file", accept: ".yaml,.yml,text/yaml"});
    const nameInput = h("input", {id: "filename", type: "text", value: draft.filename, "aria-label": "file name", size: 22});
    const overrides = h("textarea", {id: "overrides", rows: 3, spellcheck: "false",
                                     placeholder: "NODE.PARAM=VALUE, one a line (as --set)"});
    overrides.value = draft.overrides;
    const validateButton = h("button", {id: "validate", type: "button"}, "Validate");
    const submitButton = h("button", {id: "submit", type: "button", class: "primary"}, "Submit");
    const analyzeBox = h("input", {id: "analyze", type: "checkbox"});
    const status = h("span", {id: "validate-status", class: "small"});
    const problems = h("ul", {id: "problems", class: "problems"});
    view.append(
      h("div", {class: "bar"}, h("h1", {}, "New run"), h("span", {class: "grow"}),
        h("label", {class: "small"}, "Load a file ", fileInput)),
      h("section", {class: "card"},
        h("div", {class: "bar"}, validateButton, submitButton,
          h("label", {class: "small", title: "every filter in stats mode (nothing dropped), then the analysis " +
                      "report: distributions, thresholds, overlaps (as raypress analyze)"}, analyzeBox, " analyze"),
          status),
        h("div", {class: "editor"}, gutter, yamlBox),
        problems,
        h("details", {class: "small"}, h("summary", {}, "file name and overrides"),
          h("p", {}, h("label", {}, "file name ", nameInput)), overrides)));

    const lines = () => yamlBox.value.split("\n").length;
    function paintGutter() {
      const count = lines();
      gutter.replaceChildren(...Array.from({length: count}, (_, i) => {
        const said = problemLines.get(i + 1);
        return h("div", {class: said ? "bad" : null, "data-line": i + 1, title: said ? said.join("\n") : null}, i + 1);
      }));
      gutter.scrollTop = yamlBox.scrollTop;
    }
    const requestBody = () => ({yaml: yamlBox.value, filename: nameInput.value.trim() || "pipeline.yaml",
      overrides: overrides.value.split("\n").map((l) => l.trim()).filter(Boolean)});
    function showProblems(list) {
      problemLines = new Map();
      const name = requestBody().filename;
      problems.replaceChildren(...list.map((p) => {
        let text = p.text || p.message;
        if (p.line && text.startsWith(`${name}:${p.line} `)) text = text.slice(`${name}:${p.line} `.length);
        if (p.line) problemLines.set(p.line, [...(problemLines.get(p.line) || []), text]);
        const item = h("li", {"data-line": p.line || null}, p.line ? h("a", {href: "", class: "line"}, `line ${p.line}`) : "", p.line ? ": " : "", text);
        item.querySelector("a")?.addEventListener("click", (event) => { event.preventDefault(); goToLine(p.line); });
        return item;
      }));
      paintGutter();
    }
    function goToLine(line) {
      const starts = yamlBox.value.split("\n").slice(0, line - 1).reduce((at, l) => at + l.length + 1, 0);
      const end = yamlBox.value.indexOf("\n", starts);
      yamlBox.focus();
      yamlBox.setSelectionRange(starts, end < 0 ? yamlBox.value.length : end);
    }
    async function validate() {
      const mine = ++seq;
      if (!yamlBox.value.trim()) { status.textContent = ""; showProblems([]); return; }
      status.textContent = "validating…";
      status.className = "small muted";
      try {
        const result = await api("/v1/validate", {method: "POST", body: requestBody(), signal: sc.signal});
        if (!sc.alive || mine !== seq) return;
        showProblems(result.problems);
        status.textContent = result.ok ? "valid" : `${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}`;
        status.className = `small ${result.ok ? "good" : "error"}`;
        status.dataset.ok = result.ok;
      } catch (error) {
        if (mine === seq) { status.textContent = ""; reportError(sc, error); }
      }
    }
    let typing = null;
    function edited() {
      draft.yaml = yamlBox.value;
      draft.filename = nameInput.value;
      draft.overrides = overrides.value;
      if (lines() !== gutter.childElementCount) paintGutter();
      clearTimeout(typing);
      typing = sc.later(600, validate);
    }
    yamlBox.addEventListener("input", edited);
    nameInput.addEventListener("input", edited);
    overrides.addEventListener("input", edited);
    yamlBox.addEventListener("scroll", () => { gutter.scrollTop = yamlBox.scrollTop; });
    yamlBox.addEventListener("keydown", (event) => {  // Tab indents instead of leaving the box
      if (event.key !== "Tab" || event.shiftKey) return;
      event.preventDefault();
      yamlBox.setRangeText("  ", yamlBox.selectionStart, yamlBox.selectionEnd, "end");
      edited();
    });
    fileInput.addEventListener("change", async () => {
      const chosen = fileInput.files[0];
      if (!chosen) return;
      yamlBox.value = await chosen.text();
      if (/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.(yaml|yml)$/.test(chosen.name)) nameInput.value = chosen.name;
      edited();
      clearTimeout(typing);
      validate();
    });
    validateButton.addEventListener("click", () => { clearTimeout(typing); validate(); });
    submitButton.addEventListener("click", async () => {
      submitButton.disabled = true;
      clearTimeout(typing);
      seq += 1;  // a validation still under way must not paint over what the submit says
      try {
        const run = await api("/v1/runs", {method: "POST", body: {...requestBody(), analyze: analyzeBox.checked},
                               headers: {"Idempotency-Key": key}});
        draft.yaml = "";
        location.hash = runHref(run.id);
      } catch (error) {
        if (error.status === 422 && error.body && error.body.problems) {
          showProblems(error.body.problems);
          status.textContent = `not submitted: ${error.body.problems.length} problem${error.body.problems.length === 1 ? "" : "s"}`;
          status.className = "small error";
        } else {
          reportError(sc, error);
        }
      } finally {
        submitButton.disabled = false;
      }
    });
    paintGutter();
    if (yamlBox.value.trim()) validate();
    yamlBox.focus();
  }

  function randomKey() {
    const bytesOut = crypto.getRandomValues(new Uint8Array(16));
    return `ui-${Array.from(bytesOut, (b) => b.toString(16).padStart(2, "0")).join("")}`;
  }

  route();
})();
