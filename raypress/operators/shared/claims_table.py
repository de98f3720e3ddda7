"""The Markdown table of claims with machine verdicts (paired bootstrap intervals of a difference).

Why shared: the reasoning report computes the verdicts and the loop report quotes them; both print
them alike, so a reader sees the same table in either place.
"""

from __future__ import annotations

from typing import Any


def claims_table(claims: list[dict[str, Any]]) -> str:
    head = "| claim | better | other | n | better | other | difference (95% CI) | verdict |\n|---|---|---|---|---|---|---|---|\n"
    body = ""
    for c in claims:
        rates = [("–" if x is None else f"{100 * x:.1f}%") for x in (c["better_rate"], c["other_rate"])]
        body += (f"| {c['claim']} | {c['better']} | {c['other']} | {c['paired']} | {rates[0]} | {rates[1]} | "
                 f"{100 * c['difference']:+.1f} ({100 * c['ci95'][0]:+.1f} – {100 * c['ci95'][1]:+.1f}) | "
                 f"**{c['verdict']}** |\n")
    return head + body
