"""What a resume of a run directory would do, step by step, without running anything.

Why: before starting a long run again (a changed input file, a killed training), a user wants to
know which steps will be skipped and which run again, and why — the same decisions the runner
makes (``Runner.stale_reason``), taken here on the saved states alone.  A step that runs again
changes its output, so every step reading it runs again too, unless it is a live endpoint that is
only started again (its dependents compare its configuration and inputs, not its files).
"""

from __future__ import annotations

from typing import Any

from raypress.dag.plan import make_plan
from raypress.dag.runner import Runner
from raypress.dag.schedule import step_nodes

CHANGES = "(runs again)"  # the output digest of a step that will run: never equal to a saved one


def resume_plan(runner: Runner) -> dict[str, dict[str, Any]]:
    """Node -> {"action": "skip" | "run", "reason": why} for every node of ``runner``'s pipeline."""
    fates: dict[str, dict[str, Any]] = {}
    for step in make_plan(runner.vp).steps:
        chain = step_nodes(step)
        sink = chain[-1]
        consumed = runner._consumed(chain)
        state = runner.store.load_state(sink)
        reason = "it never finished" if state is None else runner.stale_reason(sink, state, consumed)
        if reason is None:
            runner.output_digests[sink] = runner._output_digest(sink, state["consumed"], state["produced"])
        elif runner.vp.nodes[sink].op_cls.resumable:
            runner.output_digests[sink] = CHANGES
        else:
            runner.output_digests[sink] = runner._output_digest(sink, consumed, {})
        for nid in chain:
            fates[nid] = {"action": "skip" if reason is None else "run",
                          "reason": reason or "output on disk, inputs and config unchanged"}
    return fates
