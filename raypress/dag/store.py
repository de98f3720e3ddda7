"""The run directory: resolved pipeline, events log, per-node state for resume.

Layout: `pipeline.yaml`, `ledger.json`, `events.jsonl`, `nodes/<id>/` (materialized outputs),
`rejects/<id>/` and `quarantine/<id>/` (the rows node <id> dropped or failed on, whichever segment
sink wrote them), `models/<id>/`, `reports/<id>.json`, `state/<id>.json` (what the step consumed
and produced, see ``fingerprint``), `.lock` (see ``run_lock``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from raypress.dag.sink import node_folder
from raypress.dag.validate import ValidatedPipeline


def default_run_dir(name: str) -> str:
    """``runs/<name>/<YYYYmmdd-HHMMSS>-<4 hex>``: the suffix keeps runs started in one second apart (a
    ``--set`` sweep from a script); the timestamp first, so the folders still sort by start."""
    return str(Path("runs") / name / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}")


def config_hashes(vp: ValidatedPipeline) -> dict[str, str]:
    """Hash of (op, params, inputs' hashes) per node: unchanged hash + existing output = skip."""
    hashes: dict[str, str] = {}
    for nid in vp.order:
        node = vp.nodes[nid]
        payload = {
            "op": node.op_cls.name,
            "params": node.params.model_dump(mode="json"),
            "stats_only": node.stats_only,
            "inputs": {slot: [hashes[p] for p in ps] for slot, ps in sorted(node.slots.items())},
        }
        hashes[nid] = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return hashes


class RunStore:
    """Owns the files of one run directory."""

    def __init__(self, run_dir: str | Path):
        self.root = Path(run_dir).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    # paths -----------------------------------------------------------------
    def node_dir(self, nid: str) -> Path:
        return self.root / "nodes" / nid

    @property
    def rejects_root(self) -> Path:
        return self.root / "rejects"

    @property
    def quarantine_root(self) -> Path:
        return self.root / "quarantine"

    def rejects_dir(self, nid: str) -> Path:
        """The rows node ``nid`` removed (filtered, duplicates), whichever sink wrote them."""
        return node_folder(self.rejects_root, nid)

    def quarantine_dir(self, nid: str) -> Path:
        """The rows node ``nid`` failed on."""
        return node_folder(self.quarantine_root, nid)

    def dropped_dirs(self, nids: Iterable[str]) -> list[Path]:
        """The rejects and quarantine folders of ``nids``: what a segment of them writes and owns."""
        return [d for nid in nids for d in (self.rejects_dir(nid), self.quarantine_dir(nid))]

    def model_dir(self, nid: str) -> Path:
        return self.root / "models" / nid

    def report_path(self, nid: str) -> Path:
        return self.root / "reports" / f"{nid}.json"

    def state_path(self, nid: str) -> Path:
        return self.root / "state" / f"{nid}.json"

    # files -----------------------------------------------------------------
    def write_pipeline(self, text: str) -> None:
        (self.root / "pipeline.yaml").write_text(text)

    def event(self, event: dict[str, Any]) -> None:
        record = {"ts": round(time.time(), 3), **event}
        with self._lock, open(self.root / "events.jsonl", "a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")

    def events(self) -> list[dict]:
        path = self.root / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def write_ledger(self, ledger: dict) -> None:
        tmp = self.root / "ledger.json.tmp"
        tmp.write_text(json.dumps(ledger, indent=2, default=str))
        tmp.replace(self.root / "ledger.json")

    def clear_outputs(self, sink: str, *dirs: Path, nodes: Iterable[str] = ()) -> None:
        """Before (re)running a step: drop partial files a crashed attempt may have left, and the
        rejects/quarantine of every node of the step (``nodes``, default the sink alone), and only
        those: another step's folders are the evidence its own resume checks."""
        for d in (*self.dropped_dirs(list(nodes) or [sink]), *dirs):
            if d.exists():
                shutil.rmtree(d)
        self.state_path(sink).unlink(missing_ok=True)

    # resume ----------------------------------------------------------------
    def save_state(self, nid: str, state: dict) -> None:
        path = self.state_path(nid)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, default=str))
        tmp.replace(path)

    def load_state(self, nid: str) -> dict | None:
        """The saved state of a finished step (None when there is none or it is unreadable); the
        runner decides from it whether the step's data still holds (see ``fingerprint``)."""
        path = self.state_path(nid)
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None
