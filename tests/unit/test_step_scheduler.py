"""The runner's step scheduler (``settings.concurrent_steps``), without Ray: independent steps
overlap, a step waits for every node it reads, and a failure stops new steps but not running ones."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from raypress.dag.plan import Segment
from raypress.dag.runner import Runner, step_reads


@dataclass
class FakeNode:
    slots: dict[str, list[str]] = field(default_factory=dict)


class FakePlan:
    """Steps: a segment src -> a, a stage b reading nothing, a stage c reading a and b."""

    def __init__(self) -> None:
        self.nodes = {"src": FakeNode(), "a": FakeNode({"data": ["src"]}), "b": FakeNode(),
                      "c": FakeNode({"data": ["a"], "model": ["b"]})}
        self.steps = [Segment(["src", "a"]), "b", "c"]

    def node(self, nid: str) -> FakeNode:
        return self.nodes[nid]


class RecordingRunner(Runner):
    """Runs fake steps: ``a`` waits (up to 5 s) until ``b`` has started, so they overlap only if run at once."""

    def __init__(self, concurrent_steps: int, fail: str | None = None) -> None:  # noqa: D107 - no Ray, no pipeline
        self.settings = {"concurrent_steps": concurrent_steps}
        self.fail = fail
        self.log: list[tuple[str, str]] = []
        self.b_started = threading.Event()
        self.lock = threading.Lock()

    def _run_step(self, plan, step) -> None:
        name = step.sink if isinstance(step, Segment) else step
        with self.lock:
            self.log.append(("start", name))
        if name == "b":
            import ray.data

            self.bars_during = ray.data.DataContext.get_current().enable_progress_bars
            self.b_started.set()
        if name == "a":
            self.overlapped = self.b_started.wait(timeout=5 if self.settings["concurrent_steps"] > 1 else 0)
            time.sleep(0.05)
        if name == self.fail:
            raise RuntimeError(f"step {name} broke")
        with self.lock:
            self.log.append(("end", name))


def test_step_reads_is_every_producer_outside_the_step():
    plan = FakePlan()
    assert step_reads(plan, plan.steps[0]) == set()
    assert step_reads(plan, "c") == {"a", "b"}


def test_independent_steps_overlap_and_a_reader_waits_for_both():
    import ray.data

    context = ray.data.DataContext.get_current()
    original = context.enable_progress_bars
    before = context.enable_progress_bars = True
    try:
        runner = RecordingRunner(concurrent_steps=2)
        runner._run_steps(FakePlan())
    finally:
        after, context.enable_progress_bars = context.enable_progress_bars, original
    assert runner.overlapped  # b started while a was still running
    assert runner.bars_during is False and after is before  # off while concurrent, then back
    log = runner.log
    assert log.index(("start", "c")) > max(log.index(("end", "a")), log.index(("end", "b")))


def test_one_step_at_a_time_by_default_keeps_the_plan_order():
    runner = RecordingRunner(concurrent_steps=1)
    runner._run_steps(FakePlan())
    assert not runner.overlapped
    assert runner.log == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b"), ("start", "c"), ("end", "c")]


def test_a_failure_lets_running_steps_finish_and_starts_nothing_after_it():
    runner = RecordingRunner(concurrent_steps=2, fail="b")
    with pytest.raises(RuntimeError, match="step b broke"):
        runner._run_steps(FakePlan())
    assert ("end", "a") in runner.log  # a was running when b failed: it finished
    assert ("start", "c") not in runner.log
