"""dedup_token_report: how many tokens exact and near dedup removed, per group (BeanCounter's Table 1b).

Why: BeanCounter reports its duplicate-token rates by form type (10-K 8.77%, 10-Q 8.79%, 8-K
23.33%...): duplicates are counted in tokens, not documents, because long boilerplate exhibits
repeat more than short notices.  The stage takes the same rows at three points of the DAG (before
exact dedup, after it, after near dedup) and compares their token sums per group, so its numbers
are exactly what the dedup nodes removed, each kind separately:
exact share = (before - after_exact) / before, near share = (after_exact - after_near) / before.
Rows need the token count column (``token_count_mapper`` before the dedup nodes) and the group
column (``form_type``; a null group is reported as "(none)").  Writes report.json and table.md.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from raypress.artifacts import ArtifactType, DatasetArtifact, ReportArtifact
from raypress.operators.base import Params, RunContext, Stage
from raypress.operators.registry import register

NONE_GROUP = "(none)"


class DedupTokenReportParams(Params):
    group_key: str = Field("form_type", description="column the table is grouped by")
    token_key: str = Field("n_token", description="column holding each row's token count")
    top: int = Field(20, ge=1, description="groups listed in table.md, by tokens before dedup (all are in the JSON)")


def token_sums(data: DatasetArtifact, group_key: str, token_key: str) -> dict[str, tuple[int, int]]:
    """group -> (documents, tokens): each block sums its own groups in a Ray task, the driver adds
    up the few rows per block.  Not Ray Data's ``groupby``: its hash shuffle starts 200 partitions
    and their actors for any input (a worker aborted with "Mutex corrupt" in one over 11 rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def block_sums(table: pa.Table) -> pa.Table:
        keys = pc.cast(table[group_key], pa.string())
        tokens = pc.fill_null(pc.cast(table[token_key], pa.int64()), 0)
        sums = pa.table({"g": keys, "t": tokens}).group_by("g", use_threads=False).aggregate(
            [([], "count_all"), ("t", "sum")])
        return pa.table({"group": sums["g"], "documents": sums["count_all"], "tokens": sums["t_sum"]})

    ds = data.ds.select_columns([group_key, token_key])
    out: dict[str, tuple[int, int]] = {}
    for row in ds.map_batches(block_sums, batch_format="pyarrow", batch_size=None, zero_copy_batch=True).take_all():
        group = NONE_GROUP if row["group"] is None else row["group"]
        docs, tokens = out.get(group, (0, 0))
        out[group] = (docs + int(row["documents"]), tokens + int(row["tokens"] or 0))
    return out


def dedup_table(before: dict[str, tuple[int, int]], exact: dict[str, tuple[int, int]],
                near: dict[str, tuple[int, int]] | None) -> list[dict[str, Any]]:
    """One row per group (and "all"), sorted by tokens before dedup."""
    def row(group: str, b: tuple[int, int], e: tuple[int, int], n: tuple[int, int] | None) -> dict[str, Any]:
        tokens = b[1]
        exact_dup = tokens - e[1]
        near_dup = e[1] - n[1] if n is not None else None
        out = {"group": group, "documents": b[0], "tokens": tokens, "exact_dup_documents": b[0] - e[0],
               "exact_dup_tokens": exact_dup, "exact_dup_share": exact_dup / tokens if tokens else 0.0}
        if n is not None:
            out |= {"near_dup_documents": e[0] - n[0], "near_dup_tokens": near_dup,
                    "near_dup_share": near_dup / tokens if tokens else 0.0,
                    "dup_share": (exact_dup + near_dup) / tokens if tokens else 0.0,
                    "tokens_after": n[1]}
        return out

    zero = (0, 0)
    rows = [row(g, before[g], exact.get(g, zero), None if near is None else near.get(g, zero))
            for g in before]
    rows.sort(key=lambda r: (-r["tokens"], r["group"]))
    rows.append(row("all", _total(before), _total(exact), None if near is None else _total(near)))
    return rows


def _total(sums: dict[str, tuple[int, int]]) -> tuple[int, int]:
    return sum(v[0] for v in sums.values()), sum(v[1] for v in sums.values())


def markdown(rows: list[dict[str, Any]], top: int, group_key: str) -> str:
    near = "near_dup_tokens" in rows[0]
    head = f"| {group_key} | documents | tokens | exact dup tokens | exact % |"
    head += " near dup tokens | near % | all dup % |" if near else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    shown = rows[:-1][:top] + rows[-1:]
    for r in shown:
        line = (f"| {r['group']} | {r['documents']:,} | {r['tokens']:,} | {r['exact_dup_tokens']:,} | "
                f"{100 * r['exact_dup_share']:.2f} |")
        if near:
            line += f" {r['near_dup_tokens']:,} | {100 * r['near_dup_share']:.2f} | {100 * r['dup_share']:.2f} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


@register("dedup_token_report")
class DedupTokenReport(Stage[DedupTokenReportParams]):
    """Tokens removed by exact and by near dedup, per group (e.g. form type): BeanCounter's Table 1b."""

    inputs: ClassVar[dict[str, ArtifactType]] = {"before": ArtifactType.DATASET, "exact": ArtifactType.DATASET,
                                                 "near": ArtifactType.DATASET}
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"near"})
    output: ClassVar[ArtifactType] = ArtifactType.REPORT

    def run(self, inputs: dict[str, Any], ctx: RunContext) -> ReportArtifact:
        p = self.params
        sums = {slot: token_sums(inputs[slot], p.group_key, p.token_key) for slot in ("before", "exact", "near")
                if slot in inputs}
        for slot, found in sums.items():
            extra = set(found) - set(sums["before"])
            if extra:
                raise ValueError(f"node {ctx.node_id!r}: `{slot}` has {p.group_key} values not in `before` "
                                 f"({sorted(extra)[:3]}): wire `before` above the dedup nodes")
        rows = dedup_table(sums["before"], sums["exact"], sums.get("near"))
        out_dir = ctx.path("reports", ctx.node_id, "report.json").parent
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "table.md").write_text(markdown(rows, p.top, p.group_key))
        report = ReportArtifact(str(out_dir / "report.json"), {"group_key": p.group_key, "token_key": p.token_key,
                                                                "rows": rows})
        report.save()
        total = rows[-1]
        ctx.event("dedup_tokens", tokens=total["tokens"], exact_dup_tokens=total["exact_dup_tokens"],
                  near_dup_tokens=total.get("near_dup_tokens"))
        return report
