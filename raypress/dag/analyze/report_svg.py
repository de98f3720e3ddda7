"""Inline SVG chart primitives for the analysis report: a histogram drawn by its bucket edges (linear
or log x, with a separate zero bin on a log axis), a line chart on the same x axis, a heat-map
matrix and horizontal bars.  Plain strings, no dependencies; every text from the data is escaped;
colours come from the page's CSS classes.  Numbers are formatted for people here too."""

from __future__ import annotations

import math
from html import escape
from typing import Any, Sequence

W, H = 510, 230
LEFT, RIGHT, TOP, BOTTOM = 50, 14, 6, 34
LABEL_ROWS = 3  # rows of marker labels above the plot
PLOT_TOP = TOP + 11 * LABEL_ROWS + 2
ZERO_W = 16  # width of the zero bin on a log axis
CHAR_W = 5.8  # width of a 10px label character, roughly

# the classes the charts use, for the page's <style>
CHART_STYLE = """
svg.chart{max-width:100%;height:auto;display:block}svg text{font-family:inherit}
.tick{font-size:10px;fill:#4b5563}.axis-title{font-size:11px;fill:#374151}.axis{stroke:#6b7280;fill:none}
.grid{stroke:#eceff3}.bar{fill:#b9cdee}.kept{fill:#3f6fc0}.hbar{fill:#7aa2e3}.bar:hover,.hbar:hover{fill:#2f5fae}
.num{font-size:11px;fill:#1d2330}.rowlabel{font-size:12px;fill:#1d2330}
.hover{fill:transparent}.hover:hover{fill:rgba(0,0,0,.05)}
.mark line{stroke-width:1.5}.mark.thr line{stroke:#d62728}
.mark.sug line{stroke:#8e44ad;stroke-dasharray:4 3;stroke-width:1}
.lbl{font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}.thr .lbl{fill:#b91c1c}.sug .lbl{fill:#6c3483}
.line{fill:none;stroke-width:2}.line.alone{stroke:#1f77b4}.line.pipe{stroke:#ff7f0e}
.line.tok{stroke-dasharray:5 3;stroke-width:1.5;opacity:.85}
.cellnum{fill:#1d2330}.cellnum.dark{fill:#fff}.cell:hover{stroke:#111}
"""


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def fmt_num(x: Any, sig: int = 4) -> str:
    """1,234 for integers, 4 significant digits otherwise, '–' for nothing."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return "–" if x is None or isinstance(x, (int, float)) else esc(x)
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}" if a < 1e12 else f"{x:.{sig}g}"
    if a >= 1e-4:
        return f"{x:.{sig}g}"
    mantissa, exp = f"{x:.{sig - 1}e}".split("e")
    return f"{mantissa}e{int(exp)}"


def fmt_pct(p: Any) -> str:
    if p is None or not isinstance(p, (int, float)) or not math.isfinite(p):
        return "–"
    if p == 0 or p == 100:
        return f"{p:.0f}%"
    if 0 < p < 0.1:
        return "<0.1%"
    if 99.9 < p < 100:
        return ">99.9%"
    return f"{p:.1f}%"


def pct_of(part: Any, whole: Any) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def fmt_tick(x: float) -> str:
    a = abs(x)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= size:
            return f"{x / size:.3g}{suffix}"
    return "0" if a < 1e-12 else f"{x:.3g}"


def _nice_step(span: float, count: int = 5) -> float:
    raw = span / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def linear_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if not hi > lo:
        return [lo]
    step = _nice_step(hi - lo, count)
    first = math.ceil(lo / step - 1e-9)
    return [round(k * step, 12) for k in range(first, int(math.floor(hi / step + 1e-9)) + 1)]


class XScale:
    """Value -> pixel on [left, right]; a log axis that starts at zero keeps [0, lo) as a fixed
    ZERO_W-wide bin at the left (drawn linearly inside), the decades after it."""

    def __init__(self, edges: Sequence[float], log: bool, left: float, right: float) -> None:
        self.left, self.right = left, right
        self.zero = log and len(edges) > 2 and edges[0] <= 0 < edges[1]
        self.log = log and (self.zero or edges[0] > 0) and edges[-1] > (edges[1] if self.zero else edges[0])
        self.lo, self.hi = (edges[1] if self.zero else edges[0]), edges[-1]
        if not self.log:
            self.zero, self.lo = False, edges[0]
        if not self.hi > self.lo:
            self.hi = self.lo + (abs(self.lo) or 1)
        self.start = left + ZERO_W if self.zero else left

    def inside(self, v: float) -> bool:
        return (0 <= v if self.zero else self.lo <= v) and v <= self.hi

    def __call__(self, v: float) -> float:
        if self.zero and v < self.lo:
            return self.left + max(v, 0) / self.lo * ZERO_W
        if self.log:
            v = max(v, self.lo)
            f = (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.start + f * (self.right - self.start)

    def ticks(self) -> list[tuple[float, str, bool]]:
        """(value, label, labelled) ticks: decades labelled, 2 and 5 multiples too when few."""
        if not self.log:
            return [(t, fmt_tick(t), True) for t in linear_ticks(self.lo, self.hi)]
        out = [(0.0, "0", True)] if self.zero else []
        d0, d1 = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
        few = d1 - d0 <= 3
        for d in range(d0, d1 + 1):
            for m in (1, 2, 5):
                v = m * 10.0 ** d
                if self.lo <= v <= self.hi * (1 + 1e-9):
                    out.append((v, fmt_tick(v), m == 1 or few))
        return out


def clean_edges(edges: Sequence[Any]) -> list[float]:
    """Infinite outer edges (JSON null) replaced by one more bucket's width."""
    e = [float(x) if isinstance(x, (int, float)) else None for x in edges]
    if len(e) < 2:
        return [0.0, 1.0]
    if e[0] is None:
        e[0] = (e[1] - (e[2] - e[1])) if len(e) > 2 and e[2] is not None else (e[1] or 0) - 1
    if e[-1] is None:
        e[-1] = (e[-2] + (e[-2] - e[-3])) if len(e) > 2 else e[-2] + 1
    return e


def _svg(width: int, height: int, cls: str, body: list[str], label: str) -> str:
    return (f'<svg class="{cls}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}">'
            f'<title>{esc(label)}</title>{"".join(body)}</svg>')


def _axes(xs: XScale, y_max: float, height: int, x_title: str, y_title: str, y_fmt=fmt_tick) -> list[str]:
    base, out = height - BOTTOM, []
    for t in linear_ticks(0, y_max, 4):
        if y_fmt is fmt_tick and not float(t).is_integer():  # counts: whole ticks only
            continue
        y = base - t / y_max * (base - PLOT_TOP)
        out.append(f'<line class="grid" x1="{xs.left}" x2="{xs.right}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{xs.left - 4}" y="{y + 3:.1f}" text-anchor="end">{y_fmt(t)}</text>')
    last = -1e9
    for v, text, labelled in xs.ticks():
        x = xs.left + ZERO_W / 2 if (xs.zero and v == 0) else xs(v)
        if labelled and x - last < len(text) * CHAR_W + 6:  # too close to the previous label
            labelled = False
        last = x if labelled else last
        out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + (4 if labelled else 2)}"/>')
        if labelled:
            out.append(f'<text class="tick" x="{x:.1f}" y="{base + 14}" text-anchor="middle">{text}</text>')
    out.append(f'<line class="axis" x1="{xs.left}" x2="{xs.right}" y1="{base}" y2="{base}"/>'
               f'<line class="axis" x1="{xs.left}" x2="{xs.left}" y1="{PLOT_TOP}" y2="{base}"/>')
    if xs.zero:  # the scale changes after the zero bin
        s = xs.start
        out.append(f'<path class="axis" d="M{s - 3:.1f},{base + 3} l3,-6 M{s:.1f},{base + 3} l3,-6"/>')
    out.append(f'<text class="axis-title" x="{(xs.left + xs.right) / 2:.1f}" y="{height - 4}" '
               f'text-anchor="middle">{esc(x_title)}</text>'
               f'<text class="axis-title" transform="translate(11,{(PLOT_TOP + base) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{esc(y_title)}</text>')
    return out


def _markers(xs: XScale, markers: Sequence[dict[str, Any]], height: int) -> list[str]:
    """Vertical lines labelled in the band above the plot, thresholds first; a suggestion whose label
    would overlap another goes unlabelled (its tooltip stays); a value beyond the axis sits at its
    end with an arrow."""
    base, out = height - BOTTOM, []
    taken: list[list[tuple[float, float]]] = [[] for _ in range(LABEL_ROWS)]
    for m in sorted(markers, key=lambda m: (m["kind"] != "thr", m["value"])):
        v = m["value"]
        beyond = "" if xs.inside(v) else ("▸" if v > xs.hi else "◂")
        x = xs.right if beyond == "▸" else xs.left if beyond else xs(v)
        text = (m["label"] + " " + beyond).strip() if beyond != "◂" else beyond + " " + m["label"]
        w = len(text) * CHAR_W + 6
        anchor, a, b = ("end", x - w, x) if x + w > xs.right + RIGHT else ("start", x, x + w)

        def clash(r: int) -> float:
            return sum(max(0.0, min(b, q) - max(a, p)) for p, q in taken[r])

        row = min(range(LABEL_ROWS), key=lambda r: (clash(r) > 0, clash(r), r))
        label, top = "", PLOT_TOP
        if clash(row) == 0 or m["kind"] == "thr":
            top = TOP + 11 * row + 1
            taken[row].append((a, b))
            y = TOP + 9 + row * 11
            label = (f'<text class="lbl" x="{x + (-3 if anchor == "end" else 3):.1f}" y="{y}" '
                     f'text-anchor="{anchor}">{esc(text)}</text>')
        out.append(f'<g class="mark {m["kind"]}"><title>{esc(m.get("title") or text)}</title>'
                   f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{base}"/>{label}</g>')
    return out


def histogram(edges: Sequence[Any], counts: Sequence[int], log: bool, markers: Sequence[dict[str, Any]] = (),
              *, x_title: str = "", width: int = W, height: int = H, kept: Sequence[int] | None = None) -> str:
    """Bars drawn by their edges (widths vary), one ``rect.bar`` per count, zero counts too;
    ``kept``: the part of each bar every other filter keeps, drawn darker at its foot."""
    e = clean_edges(edges)
    xs = XScale(e, log, LEFT, width - RIGHT)
    y_max = max(linear_ticks(0, max(max(counts, default=0), 1), 4)[-1], max(counts, default=0), 1)
    base = height - BOTTOM
    body = _axes(xs, y_max, height, x_title + (" (log scale)" if xs.log else ""), "rows")
    for i, c in enumerate(counts[: len(e) - 1]):
        a, b = xs(e[i]), xs(e[i + 1])
        h = 0.0 if not c else max(c / y_max * (base - PLOT_TOP), 1.0)
        body.append(f'<rect class="bar" x="{a + 0.5:.1f}" y="{base - h:.1f}" width="{max(b - a - 1, 0.8):.1f}" '
                    f'height="{h:.1f}"><title>[{fmt_num(e[i])}, {fmt_num(e[i + 1])}): {fmt_num(c)} rows</title></rect>')
        if kept is not None and i < len(kept) and kept[i]:
            k = max(kept[i] / y_max * (base - PLOT_TOP), 1.0)
            body.append(f'<rect class="kept" x="{a + 0.5:.1f}" y="{base - k:.1f}" width="{max(b - a - 1, 0.8):.1f}" '
                        f'height="{k:.1f}"><title>[{fmt_num(e[i])}, {fmt_num(e[i + 1])}): {fmt_num(kept[i])} of '
                        f'{fmt_num(c)} rows kept by every other filter</title></rect>')
    body += _markers(xs, markers, height)
    return _svg(width, height, "chart hist", body, f"histogram of {x_title}")


def line_chart(edges: Sequence[Any], log: bool, series: Sequence[dict[str, Any]],
               markers: Sequence[dict[str, Any]] = (), hover: Sequence[tuple[float, str]] = (), *,
               x_title: str = "", y_title: str = "keep %",
               y_max: float = 100.0, width: int = W, height: int = H) -> str:
    """Lines over the histogram's x axis (points beyond it left out); ``hover``: (x, tooltip)."""
    xs = XScale(clean_edges(edges), log, LEFT, width - RIGHT)
    base = height - BOTTOM

    def y(v: float) -> float:
        return base - min(max(v, 0), y_max) / y_max * (base - PLOT_TOP)

    body = _axes(xs, y_max, height, x_title + (" (log scale)" if xs.log else ""), y_title,
                 y_fmt=lambda t: f"{t:g}%")
    inside = [xv for xv, _ in hover if xv is not None and xs.inside(xv)]
    for i, (xv, tip) in enumerate((xv, t) for xv, t in hover if xv is not None and xs.inside(xv)):
        a = (xs(inside[i - 1]) + xs(xv)) / 2 if i else xs.left
        b = (xs(xv) + xs(inside[i + 1])) / 2 if i + 1 < len(inside) else xs.right
        body.append(f'<rect class="hover" x="{a:.1f}" y="{PLOT_TOP}" width="{max(b - a, 0.5):.1f}" '
                    f'height="{base - PLOT_TOP}"><title>{esc(tip)}</title></rect>')
    for s in series:
        pts = [(xs(xv), y(yv)) for xv, yv in zip(s["xs"], s["ys"])
               if xv is not None and yv is not None and xs.inside(xv)]
        if pts:
            d = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
            body.append(f'<polyline class="line {esc(s["cls"])}" points="{d}"><title>{esc(s.get("name", ""))}'
                        f'</title></polyline>')
    body += _markers(xs, markers, height)
    return _svg(width, height, "chart line", body, y_title + " by " + x_title)


def _shade(f: float) -> str:
    lo, hi = (247, 251, 255), (8, 81, 156)
    f = min(max(f, 0.0), 1.0)
    return "#%02x%02x%02x" % tuple(round(a + (b - a) * f) for a, b in zip(lo, hi))


def heatmap(labels: Sequence[str], matrix: Sequence[Sequence[Any]], shade: Sequence[Sequence[float | None]],
            titles: Sequence[Sequence[str]], *, max_width: int = 1000) -> str:
    """An N x N matrix of ``rect.cell`` with the value in each cell; a None shade is the diagonal."""
    n = len(labels)
    short = [lb if len(lb) <= 22 else lb[:21] + "…" for lb in labels]
    lw = int(max((len(s) for s in short), default=4) * 6.4) + 10
    cell = int(min(48, max(20, (max_width - lw - 20) / max(n, 1))))
    top = int(lw * 0.72) + 8
    width, height = lw + n * cell + 20, top + n * cell + 6
    body = []
    for j, s in enumerate(short):
        x = lw + j * cell + cell / 2
        body.append(f'<text class="tick" transform="translate({x + 3:.1f},{top - 6}) rotate(-45)">'
                    f'<title>{esc(labels[j])}</title>{esc(s)}</text>')
    font = min(11, cell / 2.6)
    for i, row in enumerate(matrix):
        y = top + i * cell
        body.append(f'<text class="tick" x="{lw - 6}" y="{y + cell / 2 + 3:.1f}" text-anchor="end">'
                    f'<title>{esc(labels[i])}</title>{esc(short[i])}</text>')
        for j, v in enumerate(row):
            f = shade[i][j]
            fill = "#e4e4e4" if f is None else _shade(f)
            dark = f is not None and f > 0.55
            body.append(f'<g><title>{esc(titles[i][j])}</title><rect class="cell{" diag" if f is None else ""}" '
                        f'x="{lw + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{fill}"/>'
                        f'<text class="cellnum{" dark" if dark else ""}" x="{lw + j * cell + (cell - 1) / 2:.1f}" '
                        f'y="{y + cell / 2 + font / 3:.1f}" text-anchor="middle" font-size="{font:.1f}">'
                        f'{fmt_tick(v) if isinstance(v, (int, float)) and abs(v) >= 1e4 else fmt_num(v)}</text></g>')
    return _svg(width, height, "chart overlap", body, "overlap matrix")


def hbars(labels: Sequence[str], columns: Sequence[dict[str, Any]], *, width: int = 1060, row_h: int = 22,
          subs: Sequence[str] = ()) -> str:
    """Rows of horizontal bars, one column per measure: ``{"title", "items": [(fraction, text) | None]}``."""
    lw = min(max((len(s) for s in labels), default=4) * 6.6 + 12, 300)
    col_w = (width - lw) / max(len(columns), 1)
    text_w = 150
    height = 18 + row_h * len(labels) + 4
    body = []
    for k, col in enumerate(columns):
        x0 = lw + k * col_w
        body.append(f'<text class="axis-title" x="{x0:.1f}" y="12">{esc(col["title"])}</text>')
        for i, item in enumerate(col["items"]):
            y = 18 + i * row_h
            if item is None:
                body.append(f'<text class="tick muted" x="{x0:.1f}" y="{y + row_h / 2 + 3:.1f}">–</text>')
                continue
            frac, text = item
            bw = max(min(frac, 1.0), 0.0) * (col_w - text_w - 12)
            body.append(f'<rect class="hbar" x="{x0:.1f}" y="{y + 3}" width="{max(bw, 1 if frac else 0):.1f}" '
                        f'height="{row_h - 6}"/><text class="num" x="{x0 + bw + 5:.1f}" '
                        f'y="{y + row_h / 2 + 4:.1f}">{esc(text)}</text>')
    for i, lb in enumerate(labels):
        y = 18 + i * row_h + row_h / 2 + 4
        sub = subs[i] if i < len(subs) else ""
        body.append(f'<text class="rowlabel" x="{lw - 8:.1f}" y="{y:.1f}" text-anchor="end">'
                    f'{f"<title>{esc(sub)}</title>" if sub else ""}{esc(lb)}</text>')
    return _svg(width, height, "chart bars", body, ", ".join(c["title"] for c in columns))
