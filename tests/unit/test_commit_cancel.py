"""A cancel that lands in the middle of a writer's commit waits for it: the destination then holds the
old parts or the new ones, never a mix (the pipelines service cancels runs with SIGTERM)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from raypress.dag import destination as destination_module
from raypress.dag.cancel import RunCancelled, cancel_on_signals, restore_signals
from raypress.dag.destination import Destination

OWNER = {"pipeline": "p", "node": "out", "op": "write_jsonl"}


def _commit(dest: Destination, names: list[str], text: str) -> None:
    staging = dest.reset_staging()
    for name in names:
        (staging / name).write_text(text)
    dest.commit()


@pytest.fixture
def cancellable():
    cancel_on_signals(fresh=True)
    yield
    restore_signals()


def test_sigterm_during_commit_is_raised_after_it(tmp_path: Path, cancellable, monkeypatch):
    dest = Destination(tmp_path / "out", single_file=False, owner=OWNER)
    _commit(dest, ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"], "old\n")

    real_replace = os.replace
    calls = {"n": 0}

    def replace_then_signal(src, dst):  # the signal arrives after the first new part is in place
        real_replace(src, dst)
        calls["n"] += 1
        if calls["n"] == 2:  # the 1st replace is the manifest's journal entry
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(destination_module.os, "replace", replace_then_signal)
    with pytest.raises(RunCancelled):
        _commit(dest, ["part-a.jsonl", "part-b.jsonl"], "new\n")
    monkeypatch.setattr(destination_module.os, "replace", real_replace)

    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["part-a.jsonl", "part-b.jsonl"], "the commit finished before the cancel was raised"
    assert {(tmp_path / "out" / f).read_text() for f in files} == {"new\n"}
    assert sorted(dest.manifest()["files"]) == files and dest.manifest()["pending"] == []


def test_handlers_are_the_runs_own_again_after_a_commit(tmp_path: Path, cancellable):
    before = signal.getsignal(signal.SIGTERM)
    _commit(Destination(tmp_path / "out", single_file=False, owner=OWNER), ["part-0.jsonl"], "x\n")
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(RunCancelled):
        os.kill(os.getpid(), signal.SIGTERM)
