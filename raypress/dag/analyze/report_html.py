"""``report.html``: analysis.json drawn as one self-contained page for choosing filter thresholds.

No network (inline CSS, inline SVG from ``report_svg``, a small optional script); it reads the same
with scripts off (the run page shows it in a sandboxed frame).  Every text from the data is escaped:
snippets are untrusted web and document text."""

from __future__ import annotations

from typing import Any

from raypress.dag.analyze.report_svg import (CHART_STYLE, esc, fmt_num, fmt_pct, hbars, heatmap, histogram,
                                              line_chart, pct_of)

_STYLE = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1d2330;
 background:#f6f7f9;margin:0}
main{max-width:1100px;margin:0 auto;padding:14px 12px 40px}
h1{font-size:22px;margin:4px 0 6px}
h2{font-size:18px;margin:28px 0 2px;border-bottom:2px solid #d9dee7;padding-bottom:3px}
h3{font-size:15px;margin:0 0 6px}h4{font-size:13px;margin:10px 0 4px}
.how{color:#5a6272;font-size:13px;margin:2px 0 10px}.muted{color:#6b7280}.small{font-size:12px}
.card{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:10px 12px;margin:10px 0}
table{border-collapse:collapse;font-size:13px;margin:4px 0}th,td{padding:3px 8px;border-bottom:1px solid #e6e9ef;
 text-align:left;vertical-align:top}th{background:#f1f3f7;font-weight:600}td.n,th.n{text-align:right;
 font-variant-numeric:tabular-nums}td.n{white-space:nowrap}
code,.mono,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#e6e9ef;margin-right:6px}
.ok{background:#dcf3e3;color:#14532d}.bad{background:#fde2e1;color:#7f1d1d}.warn{background:#fff3cd;color:#6b4e00}
.callout{border-left:4px solid #e0a800;background:#fff8e1;padding:6px 10px;margin:6px 0;font-size:13px}
nav a{margin-right:12px;font-size:13px}a{color:#1f5fbf}
.charts{display:flex;flex-wrap:wrap;gap:12px}figure,.fig{margin:0;flex:0 1 510px}
figcaption{font-size:12px;color:#5a6272}
.sw{display:inline-block;width:22px;height:0;border-top:2px solid;vertical-align:middle;margin:0 4px 0 10px}
.sw.alone{border-color:#1f77b4}.sw.pipe{border-color:#ff7f0e}.sw.tok{border-top-style:dashed}
.fig-hide-tok .line.tok{display:none}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:12px}
pre.snip{white-space:pre-wrap;word-break:break-word;background:#f7f8fa;border:1px solid #e6e9ef;border-radius:4px;
 padding:4px 6px;margin:2px 0 8px;max-height:12em;overflow:auto}
details>summary{cursor:pointer;font-size:13px;color:#1f5fbf}details{margin:6px 0}
.bar-cell{background:linear-gradient(90deg,#fbd5d5 var(--p),transparent var(--p))}
.js-only{display:none}.js .js-only{display:inline-block}
button{font:inherit;font-size:12px;padding:2px 8px;border:1px solid #c9d0db;background:#fff;border-radius:4px;
 cursor:pointer}
@media print{body{background:#fff}.card{break-inside:avoid}.js-only{display:none!important}}
""" + CHART_STYLE
_SCRIPT = """
document.documentElement.classList.add('js');
document.addEventListener('click',function(e){var b=e.target.closest('[data-act]');if(!b)return;
var a=b.getAttribute('data-act');
if(a==='open'||a==='close'){document.querySelectorAll('details').forEach(function(d){d.open=(a==='open');});}
if(a==='tok'){document.body.classList.toggle('fig-hide-tok');}});
"""


def _count(n: Any, word: str) -> str:
    return f"{fmt_num(n)} {word}{'' if n == 1 else 's'}"


def _tr(cells: list[str], head: bool = False) -> str:
    tag = "th" if head else "td"
    return "<tr>" + "".join(c if c.startswith("<t") else f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"


def _n(x: Any) -> str:
    return f'<td class="n">{fmt_num(x)}</td>'


def _p(x: Any) -> str:
    return f'<td class="n">{fmt_pct(x)}</td>'


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    hs = "".join(f'<th class="n">{h[1:]}</th>' if h.startswith("#") else f"<th>{h}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{hs}</tr></thead><tbody>{"".join(_tr(r) for r in rows)}</tbody></table>'


def _section(sid: str, title: str, how: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2><p class="how">{how}</p>{body}</section>'


def _header(a: dict[str, Any], outputs: list[dict[str, Any]]) -> str:
    ledger = a.get("ledger") or {}
    status, adds = ledger.get("status"), ledger.get("adds_up")
    badges = (f'<span class="badge {"ok" if status == "succeeded" else "bad" if status else ""}">run: '
              f'{esc(status or "status unknown")}</span>'
              f'<span class="badge {"ok" if adds else "bad" if adds is False else ""}">ledger '
              f'{"adds up" if adds else "does not add up" if adds is False else "adds up: unknown"}</span>')
    rows = []
    for o in outputs:
        rows_n, dropped = o.get("rows") or 0, o.get("dropped_any")
        tokens, dtok = o.get("tokens"), o.get("dropped_any_tokens")
        rows.append([f"<code>{esc(o.get('writer'))}</code>", _n(rows_n), _n(tokens), _n(dropped),
                     _p(pct_of(dropped, rows_n)), _n(dtok), _p(pct_of(dtok, tokens)),
                     _n(None if dropped is None else rows_n - dropped)])
    table = (_table(["output", "#rows analyzed", "#tokens", "#dropped by any filter", "#drop %", "#tokens dropped",
                     "#tokens %", "#kept by all filters"], rows) if rows
             else '<p class="callout">No output was analyzed (see the notes).</p>')
    sk = a.get("sketch") or {}
    err = sk.get("rank_error")
    sketch = (f'<p class="small muted">Quantiles: {esc(sk.get("quantiles", "–"))}, k = {fmt_num(sk.get("k"))}, '
              f'rank error ±{fmt_pct(err * 100) if isinstance(err, (int, float)) else "–"} · '
              f'Histograms: {esc(sk.get("histogram", "–"))}.</p>') if sk else ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in a.get("notes") or [])
    nodes = ledger.get("nodes") or {}
    lrows = [[f"<code>{esc(nid)}</code>", esc(e.get("op")), _n(e.get("rows_in")), _n(e.get("rows_out")),
              _n(e.get("duplicates")), _n(e.get("quarantined")), _n(e.get("seconds"))] for nid, e in nodes.items()]
    ledger_t = (f"<details><summary>Ledger: rows in and out of each node ({len(lrows)})</summary>"
                + _table(["node", "op", "#rows in", "#rows out", "#duplicates", "#quarantined", "#seconds"], lrows)
                + "</details>") if lrows else ""
    meta = " · ".join(x for x in (f"created {esc(a.get('created'))}" if a.get("created") else "",
                                  f"analysis took {fmt_num(a.get('seconds'))} s"
                                  if a.get("seconds") is not None else "",
                                  f"run <code>{esc(a.get('run_dir'))}</code>" if a.get("run_dir") else "") if x)
    return (f'<header class="card"><h1>Filter analysis · {esc(a.get("pipeline") or "pipeline")}</h1>'
            f'<p class="small muted">{meta}</p><p>{badges}</p>'
            f'<p class="how">Every filter ran in stats mode: nothing was dropped, each row carries every filter\'s '
            f'stat, so each threshold below can be judged on all the rows.</p>{table}{sketch}'
            f'{f"<ul class=small>{notes}</ul>" if notes else ""}{ledger_t}</header>')


def _funnel(o: dict[str, Any]) -> str:
    steps = o.get("funnel") or []
    if not steps:
        return '<p class="muted">No steps recorded.</p>'
    first_rows = next((s["rows"] for s in steps if s.get("rows")), None)
    first_tok = next((s["tokens"] for s in steps if s.get("tokens")), None)
    rows, toks, prev = [], [], None
    for s in steps:
        r, t = s.get("rows"), s.get("tokens")
        delta = f"  −{fmt_num(prev - r)}" if prev is not None and r is not None and r < prev else ""
        rows.append(None if r is None else ((r / first_rows) if first_rows else 0,
                                            f"{fmt_num(r)} · {fmt_pct(pct_of(r, first_rows))}{delta}"))
        toks.append(None if t is None else ((t / first_tok) if first_tok else 0,
                                            f"{fmt_num(t)} · {fmt_pct(pct_of(t, first_tok))}"))
        prev = r if r is not None else prev
    return hbars([s.get("node") or "" for s in steps], [{"title": "rows left", "items": rows},
                                                        {"title": "tokens left", "items": toks}],
                 subs=[s.get("op") or "" for s in steps])


def _filters(o: dict[str, Any]) -> str:
    fs = o.get("filters") or []
    if not fs:
        return '<p class="muted">No filter is upstream of this output.</p>'
    tokens, rows, warn = o.get("tokens"), [], []
    for f in fs:
        miss = f.get("stats_missing") or []
        if miss:
            warn.append(f"<code>{esc(f.get('node'))}</code> ({', '.join(esc(m) for m in miss)})")
        dp = f.get("drop_pct") or 0
        rows.append([f"<code>{esc(f.get('node'))}</code>", esc(f.get("op")), _n(f.get("drops")),
                     f'<td class="n bar-cell" style="--p:{min(max(dp, 0), 100):.1f}%">{fmt_pct(dp)}</td>',
                     _n(f.get("tokens_dropped")), _p(pct_of(f.get("tokens_dropped"), tokens)),
                     _n(f.get("unique_drops")), _n(f.get("unique_tokens")),
                     ", ".join(esc(s) for s in f.get("stats") or []) or '<span class="muted">–</span>',
                     (f'<span class="badge warn">⚠ {", ".join(esc(m) for m in miss)}</span>' if miss else "")])
    note = (f'<p class="callout">⚠ No row carried the stat of {"; ".join(warn)}: these filters cannot be judged '
            f'here (did the stat get computed under another name?).</p>') if warn else ""
    return note + _table(["filter", "op", "#drops", "#drop %", "#tokens dropped", "#tokens %", "#unique drops",
                          "#unique tokens", "stats", "stats missing"], rows)


def _overlap(o: dict[str, Any]) -> str:
    ov = o.get("overlap") or {}
    nodes, m, tok = ov.get("nodes") or [], ov.get("rows") or [], ov.get("tokens") or []
    if not nodes or len(m) != len(nodes):
        return '<p class="muted">No filters, no overlap.</p>'
    diag = [m[i][i] for i in range(len(nodes))]
    shade = [[None if i == j else (m[i][j] / diag[i] if diag[i] else 0.0) for j in range(len(nodes))]
             for i in range(len(nodes))]
    titles = [[(f"{nodes[i]} drops {fmt_num(m[i][i])} rows ({fmt_num(tok[i][i] if tok else None)} tokens)" if i == j
                else f"{fmt_num(m[i][j])} rows dropped by both {nodes[i]} and {nodes[j]}: "
                     f"{fmt_pct(pct_of(m[i][j], diag[i]))} of {nodes[i]}'s drops, "
                     f"{fmt_pct(pct_of(m[i][j], diag[j]))} of {nodes[j]}'s"
                     + (f"; {fmt_num(tok[i][j])} tokens" if tok else ""))
               for j in range(len(nodes))] for i in range(len(nodes))]
    pairs = []
    for i, node in enumerate(nodes):
        both = max((m[i][j] for j in range(len(nodes)) if j != i), default=0)
        if diag[i] and both:
            by = [nodes[j] for j in range(len(nodes)) if j != i and m[i][j] == both]
            pairs.append((both / diag[i], node, by, both, diag[i]))
    items = "".join(f"<li><code>{esc(n)}</code>: {fmt_num(b)} of its {fmt_num(d)} drops "
                    f"({fmt_pct(100 * f)}) also dropped by {' and '.join(f'<code>{esc(o)}</code>' for o in by)}</li>"
                    for f, n, by, b, d in sorted(pairs, key=lambda p: (-p[0], p[1]))[:10])
    side = (f'<div class="fig"><h4>Most covered filters</h4><p class="small muted">each filter\'s drops that one '
            f'other filter also drops; near 100% means the rule is mostly redundant</p><ul class="small">{items}'
            f'</ul></div>') if items else ""
    return f'<div class="charts"><div>{heatmap(nodes, m, shade, titles)}</div>{side}</div>'


def _markers(stat: dict[str, Any], param: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in stat.get("thresholds") or []:
        if t.get("value") is not None and (param is None or t.get("param") == param):
            out.append({"value": t["value"], "kind": "thr",
                        "label": f"{t.get('param')}={fmt_num(t['value'])}" + (
                            f" keeps {fmt_pct(t.get('keep_pct'))}" if param is None else ""),
                        "title": f"current {t.get('param')} ({t.get('side')}) = {fmt_num(t['value'])}: keeps "
                                 f"{fmt_num(t.get('kept'))} rows, {fmt_pct(t.get('keep_pct'))}"})
    merged: dict[float, dict[str, Any]] = {}
    for s in stat.get("suggestions") or []:
        if s.get("value") is None or (param is not None and s.get("param") != param):
            continue
        m = merged.setdefault(s["value"], {"value": s["value"], "kind": "sug", "label": "", "title": ""})
        m["label"] = (m["label"] + ", " if m["label"] else "") + str(s.get("method"))
        m["title"] += (f"{s.get('method')}: {s.get('param')} = {fmt_num(s['value'])}, keeps ≈"
                       f"{fmt_pct(s.get('keep_pct_est'))}. ")
    return out + list(merged.values())


def _sensitivity(stat: dict[str, Any], sens: dict[str, Any], log: bool) -> str:
    xs, total = sens.get("threshold") or [], sens.get("tokens_total") or 0
    pa, pp = sens.get("keep_pct_alone") or [], sens.get("keep_pct_pipeline") or []
    ta = [pct_of(v, total) for v in sens.get("kept_tokens_alone") or []]
    tp = [pct_of(v, total) for v in sens.get("kept_tokens_pipeline") or []]
    series = [{"xs": xs, "ys": tp, "cls": "pipe tok", "name": "tokens kept, whole pipeline"},
              {"xs": xs, "ys": ta, "cls": "alone tok", "name": "tokens kept, this filter alone"},
              {"xs": xs, "ys": pp, "cls": "pipe", "name": "rows kept, whole pipeline"},
              {"xs": xs, "ys": pa, "cls": "alone", "name": "rows kept, this filter alone"}]

    def at(values: list[Any], i: int) -> Any:
        return values[i] if i < len(values) else None

    param, cur = sens.get("param"), sens.get("current")
    hover = [(x, f"{param} = {fmt_num(x)}: rows kept {fmt_pct(at(pa, i))} alone, {fmt_pct(at(pp, i))} with the "
                 f"other filters; tokens {fmt_pct(at(ta, i))} / {fmt_pct(at(tp, i))}") for i, x in enumerate(xs)]
    markers = _markers(stat, param)
    if cur is not None and xs:
        i = min(range(len(xs)), key=lambda k: abs(xs[k] - cur) if xs[k] is not None else float("inf"))
        for m in markers:
            if m["kind"] == "thr":
                m["label"] = f"{param}={fmt_num(cur)}: {fmt_pct(at(pa, i))} / {fmt_pct(at(pp, i))}"
    hist = stat.get("histogram") or {}
    known = [x for x in xs if x is not None]
    chart = line_chart(hist.get("edges") or [min(known, default=0), max(known, default=1)], log, series, markers, hover,
                       x_title=f"{param} ({'keep ≥' if sens.get('side') == 'min' else 'keep ≤'} threshold)")
    return (f'<figure>{chart}<figcaption>What <code>{esc(param)}</code> would keep, by threshold: rows '
            f'<span class="sw alone"></span>this filter alone <span class="sw pipe"></span>with every other filter '
            f'at its threshold; tokens <span class="sw alone tok"></span><span class="sw pipe tok"></span>'
            f'(% of {fmt_num(total)}).</figcaption></figure>')


def _row_card(r: dict[str, Any]) -> str:
    src = r.get("source") or {}
    where = " · ".join(f"{esc(k)}: {esc(v)}" for k, v in src.items()
                       if v is not None and not (k == "file" and v == r.get("id")))
    return (f'<div><b>{fmt_num(r.get("value"))}</b> <span class="muted small">(Δ {fmt_num(r.get("distance"))})'
            f'</span> <code class="small">{esc(r.get("id"))}</code>'
            f'{f" <span class=small>{where}</span>" if where else ""}'
            f'<pre class="snip">{esc(r.get("text")) or "<span class=muted>(no text)</span>"}</pre></div>')


def _nearest(stat: dict[str, Any]) -> str:
    out = []
    for n in stat.get("nearest") or []:
        kept, dropped = n.get("kept") or [], n.get("dropped") or []
        cols = "".join(f'<div><h4>{title} ({len(rows)})</h4>{"".join(_row_card(r) for r in rows) or empty}</div>'
                       for title, rows, empty in (
                           ("just kept", kept, '<p class="muted small">none</p>'),
                           ("just dropped", dropped, '<p class="muted small">none: the threshold drops no row</p>')))
        out.append(f'<details><summary>Rows nearest <code>{esc(n.get("param"))}</code> = '
                   f'{fmt_num(n.get("threshold"))}: {len(kept)} just kept, {len(dropped)} just dropped</summary>'
                   f'<div class="cols">{cols}</div></details>')
    return "".join(out)


def _stat(k: str, stat: dict[str, Any]) -> str:
    hist = stat.get("histogram") or {}
    log = hist.get("scale") == "log"
    q = stat.get("quantiles") or {}
    qs = list(q)
    summary = _table(["#count", "#nulls", "#mean", "#std", "#min", "#max"] + [f"#{x}" for x in qs],
                     [[_n(stat.get(x)) for x in ("count", "nulls", "mean", "std", "min", "max")]
                      + [_n(q[x]) for x in qs]])
    edges, counts = hist.get("edges") or [], hist.get("counts") or []
    figs = []
    if counts and len(edges) == len(counts) + 1:
        scale = ("" if not log else " (log x axis; the first bar is the zero bin)" if (edges[0] or 0) <= 0
                 else " (log x axis)")
        kept = hist.get("counts_others_keep")
        kept = kept if isinstance(kept, list) and len(kept) == len(counts) else None
        figs.append(f'<figure>{histogram(edges, counts, log, _markers(stat), x_title=str(stat.get("stat")), kept=kept)}'
                    f'<figcaption>Rows per bucket{scale}'
                    + ('; dark: rows every other filter keeps (light: dropped by another filter anyway)' if kept else '') +
                    '. <span style="color:#d62728">Solid</span>: current thresholds; '
                    '<span style="color:#8e44ad">dashed</span>: suggestions.</figcaption></figure>')
    else:
        figs.append('<p class="muted">No values to draw.</p>')
    figs += [_sensitivity(stat, s, log) for s in stat.get("sensitivity") or []]
    trs = [[f"<b>{esc(t.get('param'))}</b>", esc(t.get("side")), "current", _n(t.get("value")), _n(t.get("kept")),
            _p(t.get("keep_pct"))] for t in stat.get("thresholds") or []]
    trs += [[esc(s.get("param")), esc(s.get("side")), esc(s.get("method")), _n(s.get("value")),
             '<td class="n muted">est.</td>', _p(s.get("keep_pct_est"))] for s in stat.get("suggestions") or []]
    thr = (_table(["param", "side", "current / method", "#value", "#rows kept", "#keep %"], trs) if trs else
           '<p class="muted small">No threshold of any filter bounds this stat.</p>')
    owner = (f'<span class="muted"> · <code>{esc(stat.get("node"))}</code> ({esc(stat.get("op"))})</span>'
             if stat.get("node") else '<span class="muted"> · no filter</span>')
    return (f'<div class="card stat" id="{k}"><h3>{esc(stat.get("stat"))}{owner}</h3>{summary}'
            f'<div class="charts">{"".join(figs)}<div class="fig"><h4>Thresholds and suggestions</h4>{thr}</div>'
            f'</div>{_nearest(stat)}</div>')


def _slices(o: dict[str, Any]) -> str:
    out = []
    rows_total = o.get("rows") or 0
    for s in o.get("slices") or []:
        vals = s.get("values") or []
        trs = [[f'<code>{esc(v.get("value"))}</code>', _n(v.get("rows")), _n(v.get("tokens")), _n(v.get("dropped")),
                _p(v.get("drop_pct")),
                ", ".join(f"{esc(n)} {fmt_num(c)}" for n, c in sorted((v.get("by_filter") or {}).items(),
                                                                       key=lambda kv: -kv[1])[:3])]
               for v in vals]
        table = _table(["value", "#rows", "#tokens", "#dropped", "#drop %", "top filters"], trs)
        more = (f'<p class="small muted">the {len(vals)} largest of {fmt_num(s.get("distinct"))} values</p>'
                if s.get("distinct") and s["distinct"] > len(vals) else "")
        head = f'<code>{esc(s.get("key"))}</code>: {fmt_num(s.get("distinct"))} distinct values'
        if s.get("informative") is False:
            why = esc(s.get("reason")) if s.get("reason") else (
                "every row has the same value" if (s.get("distinct") or 0) <= 1 else
                f"about one value per row ({fmt_num(s.get('distinct'))} values for {fmt_num(rows_total)} rows)")
            out.append(f'<details><summary>{head} — not informative: {why}, so it splits nothing</summary>'
                       f'{table}{more}</details>')
        else:
            out.append(f'<div class="card"><h3>{head}</h3>{table}{more}</div>')
    return "".join(out) or '<p class="muted">No slice key (file, host, form type) was in this output.</p>'


def _dedup(items: list[dict[str, Any]]) -> str:
    if not items:
        return '<p class="muted">No deduplicator in this pipeline.</p>'
    out = []
    for d in items:
        sizes = d.get("cluster_sizes") or []
        top = max((c.get("clusters") or 0 for c in sizes), default=0)
        bars = hbars([f"size {c.get('size')}" for c in sizes],
                     [{"title": "clusters", "items": [((c.get("clusters") or 0) / top if top else 0,
                                                       fmt_num(c.get("clusters"))) for c in sizes]}],
                     width=520) if sizes else '<p class="muted small">No duplicates found.</p>'
        pairs = "".join(
            f'<h4>cluster of {fmt_num(p.get("cluster_size"))}</h4><div class="cols">'
            f'<div><b>kept</b> <code class="small">{esc(p.get("kept_id"))}</code><pre class="snip">'
            f'{esc(p.get("kept_text") or "(text not kept)")}</pre></div>'
            f'<div><b>duplicate</b> <code class="small">{esc(p.get("duplicate_id"))}</code><pre class="snip">'
            f'{esc(p.get("duplicate_text") or "(text not kept)")}</pre></div></div>' for p in d.get("samples") or [])
        out.append(f'<div class="card"><h3><code>{esc(d.get("node"))}</code> <span class="muted">'
                   f'({esc(d.get("op"))})</span></h3><p>{_count(d.get("duplicates"), "duplicate")} removed in '
                   f'{_count(d.get("clusters"), "cluster")} (a cluster: one kept row and its duplicates).</p>'
                   f'{bars}{pairs}</div>')
    return "".join(out)


def _output(i: int, o: dict[str, Any], many: bool) -> tuple[str, list[tuple[str, str]]]:
    name = esc(o.get("writer"))
    suffix = f" — {name}" if many else ""
    sid = f"o{i}"
    stats = o.get("stats") or []
    cards = "".join(_stat(f"{sid}-stat{k}", s) for k, s in enumerate(stats)) or \
        '<p class="muted">No stat was recorded for this output.</p>'
    body = "".join((
        _section(f"{sid}-funnel", f"Funnel{suffix}", "Rows and tokens left after each step, in pipeline order: the "
                 "ledger's counts up to the writer, then the filters applied one after another to the rows that "
                 "reached it. Percentages are of the first step; hover a label for its op.", _funnel(o)),
        _section(f"{sid}-filters", f"Filters{suffix}", "What each filter drops on its own at its current thresholds "
                 "(all of them saw every row). Unique drops: rows only this filter drops — a filter with few unique "
                 "drops adds little to the others.", _filters(o)),
        _section(f"{sid}-overlap", f"Overlap{suffix}", "Cell = rows both filters drop; the diagonal is each filter's "
                 "own drops. Shade = share of the row filter's drops that the column filter also drops: a large "
                 "off-diagonal cell means redundant rules. Hover a cell for percentages.", _overlap(o)),
        _section(f"{sid}-stats", f"Stats{suffix}", "One card per stat: the distribution with the current thresholds "
                 "(solid) and suggested ones (dashed), then what each threshold would keep as it moves. Hover the "
                 "charts for numbers.", cards),
        _section(f"{sid}-slices", f"Slices{suffix}", "Rows and drops per source file, host or form type: a slice "
                 "dropped far more than the rest points at a bad source, or a rule unfit for it.", _slices(o)),
    ))
    toc = [(f"{sid}-{p}", f"{p}{suffix}") for p in ("funnel", "filters", "overlap", "stats", "slices")]
    return body, toc


def render(analysis: dict[str, Any]) -> str:
    """The whole page, as one string."""
    a = analysis or {}
    outputs = [o for o in a.get("outputs") or [] if isinstance(o, dict)]
    parts, toc = [], []
    for i, o in enumerate(outputs):
        body, links = _output(i, o, len(outputs) > 1)
        parts.append(body)
        toc += links
    parts.append(_section("dedup", "Dedup", "Rows each deduplicator removed as near-copies of a kept row, by cluster "
                          "size, and a few pairs from the largest clusters: check that the duplicates really are.",
                          _dedup(a.get("dedup") or [])))
    toc.append(("dedup", "dedup"))
    nav = ("<nav>" + "".join(f'<a href="#{sid}">{text}</a>' for sid, text in toc)
           + '<button class="js-only" data-act="open">expand all</button> '
           '<button class="js-only" data-act="close">collapse all</button> '
           '<button class="js-only" data-act="tok">token lines on/off</button></nav>')
    title = f"Filter analysis · {esc(a.get('pipeline') or 'pipeline')}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
            f'<style>{_STYLE}</style></head><body><main>{_header(a, outputs)}{nav}{"".join(parts)}'
            f'<p class="small muted">schema {esc(a.get("schema") or "–")}</p></main>'
            f'<script>{_SCRIPT}</script></body></html>\n')
