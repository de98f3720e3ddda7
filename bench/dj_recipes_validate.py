"""Validate Data-Juicer's recipe library (tests/data/dj_recipes) with raypress, unchanged.

Why: people arrive with Data-Juicer recipes; this counts how many raypress accepts as they are.
Each recipe is validated in-process (what `raypress validate FILE` does, without a process per
file) and lands in one of three outcomes:

- ``ok``: validates unchanged;
- ``unavailable``: fails, and every problem says "not available in raypress" (video and
  generation ops whose models cannot be had here; the expected outcome for a multimodal recipe)
  or is a ``needs_extra`` one;
- ``needs_extra``: fails only because an op's optional packages are not installed on this machine
  (e.g. ``perplexity_filter`` without ``raypress[perplexity]``): the recipe is right, the machine is not;
- ``other``: anything else (unknown ops or keys, rejected params, ...).

A recipe is ``text`` unless it uses an image, video or audio op or a generation op (``NON_TEXT``).
Validation does not open ``dataset_path``: the recipes' placeholder paths (``/path/to/your/dataset``)
are a run-time matter, so they cost nothing here.

    .venv/bin/python bench/dj_recipes_validate.py             # per recipe, totals, missing ops
    .venv/bin/python bench/dj_recipes_validate.py --problems  # and every problem of each failure
    .venv/bin/python bench/dj_recipes_validate.py --ops       # and every Data-Juicer op's status
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[1] / "tests" / "data" / "dj_recipes"
UNAVAILABLE = "not available in raypress"
NOT_INSTALLED = "(not installed here)"
# Ops that make a recipe multimodal or generative: media ops by prefix, generation ops by name.
NON_TEXT_PREFIXES = ("image_", "video_", "audio_", "imgdiff_")
NON_TEXT = {"sdxl_prompt2prompt_mapper", "optimize_prompt_mapper", "phrase_grounding_recall_filter"}


@dataclass
class Outcome:
    recipe: str  # path relative to RECIPES
    text_only: bool
    outcome: str  # ok | unavailable | needs_extra | other
    unknown_ops: list[str] = field(default_factory=list)  # "unknown op" problems
    unavailable_ops: list[str] = field(default_factory=list)  # "not available in raypress" problems
    problems: list[str] = field(default_factory=list)  # every problem, one line each
    notes: list[str] = field(default_factory=list)  # keys accepted with a notice of what raypress does


def recipe_files() -> list[Path]:
    return sorted(RECIPES.rglob("*.yaml"))


def is_non_text_op(op: str) -> bool:
    return op.startswith(NON_TEXT_PREFIXES) or op in NON_TEXT


def classify(path: Path) -> Outcome:
    """Validate one recipe as raypress would and sort its problems."""
    from raypress.dag.spec import read_spec
    from raypress.dag.validate import PipelineInvalid, load_pipeline

    name = str(path.relative_to(RECIPES))
    try:
        op_of = {n.id: n.op for n in read_spec(path).nodes}
    except Exception:  # unreadable: load_pipeline reports it below
        op_of = {}
    text_only = not any(is_non_text_op(op) for op in op_of.values())
    notes = io.StringIO()
    try:
        with contextlib.redirect_stderr(notes):
            load_pipeline(path)
    except PipelineInvalid as exc:
        out = Outcome(name, text_only, "other", problems=[_short(str(p)) for p in exc.problems])
        for p in exc.problems:
            op = op_of.get(p.node or "", p.node or "?")
            if UNAVAILABLE in p.message:
                out.unavailable_ops.append(op)
            elif p.key == "op" and p.message.startswith("unknown op"):
                out.unknown_ops.append(op)
        # A missing extra on this machine says nothing about the recipe, so it does not decide the outcome.
        missing_extra = [NOT_INSTALLED in p.message for p in exc.problems]
        if all(UNAVAILABLE in p.message or extra for p, extra in zip(exc.problems, missing_extra)):
            out.outcome = "needs_extra" if all(missing_extra) else "unavailable"
    except Exception as exc:  # a crash in validate is a finding, not a reason to stop counting
        out = Outcome(name, text_only, "other", problems=[f"validate raised {type(exc).__name__}: {exc}"])
    else:
        out = Outcome(name, text_only, "ok")
    out.notes = [_short(line) for line in notes.getvalue().splitlines() if line.strip()]
    return out


def _short(problem: str) -> str:
    return re.sub(r"^(note: )?\S*/dj_recipes/", r"\1", problem)


def classify_all() -> list[Outcome]:
    return [classify(p) for p in recipe_files()]


def report(outcomes: list[Outcome], show_problems: bool = False) -> str:
    lines = []
    width = max(len(o.recipe) for o in outcomes)
    lines.append(f"{'recipe':<{width}}  kind   outcome      ops not in raypress (unknown / unavailable)")
    for o in outcomes:
        ops = ", ".join(dict.fromkeys(o.unknown_ops)) or "-"
        if o.unavailable_ops:
            ops += " / " + ", ".join(dict.fromkeys(o.unavailable_ops))
        others = sum(UNAVAILABLE not in p and not p.split(": ", 1)[-1].startswith("unknown op") for p in o.problems)
        extra = f"  (+{others} other problem(s))" if others else ""
        lines.append(f"{o.recipe:<{width}}  {'text' if o.text_only else 'media':<5}  {o.outcome:<11}  {ops}{extra}")
        if show_problems:
            lines.extend(f"    {p}" for p in o.problems + o.notes)
    text = [o for o in outcomes if o.text_only]
    media = [o for o in outcomes if not o.text_only]
    n_ok = sum(o.outcome == "ok" for o in outcomes)
    lines.append("")
    lines.append(f"text-only recipes validating unchanged: {sum(o.outcome == 'ok' for o in text)}/{len(text)}"
                 f" (+{sum(o.outcome == 'needs_extra' for o in text)} once their extras are installed)")
    lines.append(f"multimodal/generation recipes validating unchanged: {sum(o.outcome == 'ok' for o in media)}"
                 f"/{len(media)}, failing only on ops not available in raypress: "
                 f"{sum(o.outcome == 'unavailable' for o in media)}/{len(media)}")
    missing = Counter(op for o in outcomes for op in set(o.unknown_ops))
    unavailable = Counter(op for o in outcomes for op in set(o.unavailable_ops))
    lines.append("unknown ops by number of recipes: "
                 + (", ".join(f"{op} {n}" for op, n in missing.most_common()) or "none"))
    lines.append("ops 'not available in raypress' by number of recipes: "
                 + (", ".join(f"{op} {n}" for op, n in unavailable.most_common()) or "none"))
    lines.append(f"validate unchanged: {n_ok}/{len(outcomes)} (before issue 19: 0/40, 0/41 with this copy)")
    return "\n".join(lines)


def op_coverage() -> dict[str, tuple[str, str]]:
    """Every op Data-Juicer registers -> (status, detail): ``raypress`` (with the raypress extra it
    needs, if any), ``unavailable`` (with what it needs that cannot be had here) or ``missing``."""
    from raypress.dag.dj_compat import UNAVAILABLE as NEEDS
    from raypress.dag.dj_op_keys import DJ_OP_NAMES
    from raypress.operators.registry import known_names, requirements

    known = known_names()
    out: dict[str, tuple[str, str]] = {}
    for op in sorted(DJ_OP_NAMES):
        if op in known:
            extras = sorted(set(requirements(op).values()))
            out[op] = ("raypress", f"raypress[{','.join(extras)}]" if extras else "core")
        elif op in NEEDS:
            out[op] = ("unavailable", NEEDS[op])
        else:
            out[op] = ("missing", "")
    return out


def coverage_report(coverage: dict[str, tuple[str, str]]) -> str:
    counts = Counter(status for status, _ in coverage.values())
    lines = [f"{op:<48} {status:<12} {detail}" for op, (status, detail) in coverage.items()]
    lines.append("")
    lines.append(f"Data-Juicer's {len(coverage)} ops: {counts['raypress']} in raypress, {counts['unavailable']} "
                 f"unavailable (each naming what it needs), {counts['missing']} missing")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--problems", action="store_true", help="print every problem of each failing recipe")
    ap.add_argument("--ops", action="store_true", help="also list every Data-Juicer op: in raypress, "
                    "unavailable (and why) or missing")
    args = ap.parse_args()
    print(report(classify_all(), show_problems=args.problems))
    if args.ops:
        print()
        print(coverage_report(op_coverage()))


if __name__ == "__main__":
    main()
