"""The service's record of each run it started, on disk under the runs root.

Why files and not a replica's memory: a restarted server (or a second replica) must answer for
runs started before it; the record says which run directory and which Ray jobs belong to a run
id, and the run directory and the Jobs API say the rest.  Idempotency keys are files created
with ``O_EXCL``, so two submits with one key make one run even across replicas.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SERVICE_DIR = ".service"
RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{8}$")
KEY_WAIT_S = 5.0  # how long a second submit with a key waits for the first to record its run


@dataclass
class Attempt:
    """One Ray job of a run: its first start, or a resume."""

    kind: str  # run | resume
    submitted: float
    job_id: str | None = None  # None until the Jobs API has taken it
    error: str | None = None  # why it could not be submitted


@dataclass
class RunRecord:
    id: str
    name: str
    run_dir: str
    created: float
    overrides: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    cancel_requested: float | None = None
    mode: str = "run"  # run | analyze (every filter in stats mode, then the analysis report)

    @property
    def latest(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        attempts = [Attempt(**a) for a in data.get("attempts", [])]
        return cls(id=data["id"], name=data["name"], run_dir=data["run_dir"], created=data["created"],
                   overrides=list(data.get("overrides", [])), attempts=attempts,
                   cancel_requested=data.get("cancel_requested"), mode=data.get("mode", "run"))


class IdempotencyConflict(Exception):
    """The key was used before with another request."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


def new_run_id(now: float | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<8 hex>``: unique, and sorting ids sorts runs by start."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time())) + "-" + secrets.token_hex(4)


class RunRecords:
    """Records under ``runs_root/.service``: ``runs/<id>.json`` and ``keys/<sha256 of key>.json``."""

    def __init__(self, runs_root: str | Path) -> None:
        self.root = Path(runs_root)
        self.runs = self.root / SERVICE_DIR / "runs"
        self.keys = self.root / SERVICE_DIR / "keys"
        self.runs.mkdir(parents=True, exist_ok=True)
        self.keys.mkdir(parents=True, exist_ok=True)

    def _path(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def get(self, run_id: str) -> RunRecord | None:
        if not RUN_ID.match(run_id):  # never a path: an id is only ever a file name here
            return None
        try:
            return RunRecord.from_json(json.loads(self._path(run_id).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, record: RunRecord) -> None:
        path = self._path(record.id)
        tmp = path.with_name(f".{record.id}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record.to_json(), indent=1), encoding="utf-8")
        tmp.replace(path)

    @contextlib.contextmanager
    def updating(self, run_id: str) -> Iterator[RunRecord]:
        """The record, locked against other writers while the block changes it, then saved."""
        with open(self.runs / f".{run_id}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            record = self.get(run_id)
            if record is None:
                raise KeyError(run_id)
            yield record
            self.put(record)

    def ids(self) -> list[str]:
        """Every run id, newest first."""
        return sorted((p.stem for p in self.runs.glob("*.json") if RUN_ID.match(p.stem)), reverse=True)

    # idempotency keys

    def _key_path(self, key: str) -> Path:
        return self.keys / (hashlib.sha256(key.encode()).hexdigest() + ".json")

    def claim_key(self, key: str, request_hash: str, run_id: str) -> str | None:
        """Claim ``key`` for ``run_id``; None when claimed now, else the run id that holds it.
        Raises IdempotencyConflict when it holds it for another request."""
        path = self._key_path(key)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            held = self._read_key(path)
            if held["request"] != request_hash:
                raise IdempotencyConflict(held["run_id"]) from None
            return held["run_id"]
        with os.fdopen(fd, "w") as fh:
            json.dump({"run_id": run_id, "request": request_hash}, fh)
        return None

    def release_key(self, key: str) -> None:
        """Forget a key whose run was never recorded (its request was refused)."""
        with contextlib.suppress(OSError):
            self._key_path(key).unlink()

    @staticmethod
    def _read_key(path: Path) -> dict[str, str]:
        deadline = time.monotonic() + KEY_WAIT_S  # the claimer writes it right after creating it
        while True:
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


def request_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
