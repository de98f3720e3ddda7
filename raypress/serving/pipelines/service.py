"""The pipelines service's operations, HTTP-free: validate, submit, list, look, cancel, resume.

Why the same code as the command line: a pipeline posted here is read, validated and resolved by
``dag.validate`` / ``dag.resolve`` (the same checks, the same texts as ``raypress validate``) and
submitted by ``cluster.start_job`` (``raypress submit``'s own path), so a file behaves the same
from a terminal and from the API.  What differs is what a service must refuse: files from the
API are data, so ``settings.allow_code`` is a problem here, and writers may only write under the
runs root.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raypress.serving.http_guards import APIError
from raypress.serving.pipelines.jobs import Jobs
from raypress.serving.pipelines.records import (
    Attempt,
    IdempotencyConflict,
    RunRecord,
    RunRecords,
    new_run_id,
    request_hash,
)
from raypress.serving.pipelines.run_view import TERMINAL, JobState, full_view, quick_state, summary

log = logging.getLogger(__name__)
SOURCES_DIR = "sources"
RESUMABLE = ("failed", "cancelled", "crashed")


@dataclass(frozen=True)
class ServiceSettings:
    runs_root: Path
    base_dir: Path  # what relative paths in a posted pipeline mean
    max_active_runs: int = 16  # queued + running; more answer 503
    cancel_grace_s: int = 30  # a cancelled run's time to write its ledger before it is killed
    check_cluster: bool = False  # run `submit`'s probe job before each run


def _problem_json(problem: Any, filename: str, lines: list[str]) -> dict[str, Any]:
    column = None
    if problem.line and 0 < problem.line <= len(lines):
        text = lines[problem.line - 1]
        key = (problem.key or "").split(".")[-1].split("[")[0]
        at = text.find(key) if key else -1
        column = (at if at >= 0 else len(text) - len(text.lstrip())) + 1
    shown = type(problem)(filename if problem.file.endswith(filename) else problem.file, problem.line,
                          problem.message, problem.node, problem.key)
    return {"line": problem.line, "column": column, "node": problem.node, "key": problem.key,
            "message": problem.message, "text": str(shown)}


class PipelinesService:
    def __init__(self, settings: ServiceSettings, jobs: Jobs) -> None:
        self.settings = settings
        self.jobs = jobs
        self.records = RunRecords(settings.runs_root)
        self.sources = settings.runs_root / ".service" / SOURCES_DIR
        self.sources.mkdir(parents=True, exist_ok=True)
        self._submit_lock = threading.Lock()
        self._ended: dict[tuple[str, int], tuple[str, str | None, dict | None]] = {}

    # validation

    def _write_source(self, folder: Path, yaml_text: str, filename: str) -> Path:
        path = folder / filename
        path.write_text(yaml_text, encoding="utf-8")
        return path

    def check(self, yaml_text: str, overrides: list[str], filename: str) -> list[dict[str, Any]]:
        """Every problem of the posted pipeline, as ``raypress validate`` finds them, plus what the
        service refuses (``settings.allow_code``, writers outside the runs root)."""
        from raypress.dag.validate import PipelineInvalid, load_pipeline

        lines = yaml_text.splitlines()
        with tempfile.TemporaryDirectory(prefix="raypress-validate-") as folder:
            path = self._write_source(Path(folder), yaml_text, filename)
            try:
                with contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115 - notes go to the answer
                    vp = load_pipeline(path, overrides)
            except PipelineInvalid as exc:
                return [_problem_json(p, filename, lines) for p in exc.problems]
            return [_problem_json(p, filename, lines) for p in self._refusals(vp.spec, path)]

    def _refusals(self, spec: Any, path: Path) -> list[Any]:
        from raypress.dag.spec import Problem

        problems = []
        if spec.settings.get("allow_code"):
            problems.append(Problem(str(path), spec.line(("settings", "allow_code")),
                                    "pipeline files sent to the service are data: ops that run code are "
                                    "refused here (run it with `raypress run` on your own machine)",
                                    key="settings.allow_code"))
        return problems

    # submission

    def submit(self, yaml_text: str, overrides: list[str], filename: str,
               idempotency_key: str | None, analyze: bool = False) -> tuple[RunRecord, bool]:
        """(the run, whether it is new): a key already used for the same request answers its run.
        ``analyze``: every filter in stats mode, then `raypress analyze`'s report in the run."""
        run_id = new_run_id()
        request = {"yaml": yaml_text, "overrides": overrides, "filename": filename}
        key_hash = request_hash({**request, "analyze": True} if analyze else request)
        if idempotency_key:
            try:
                held = self.records.claim_key(idempotency_key, key_hash, run_id)
            except IdempotencyConflict as exc:
                raise APIError(409, f"Idempotency-Key was used for another request (run {exc.run_id})",
                               param="Idempotency-Key", code="idempotency_conflict") from None
            if held is not None:
                record = self._wait_for_record(held)
                if record is not None:
                    return record, False
        try:
            record, resolved = self._create(run_id, yaml_text, overrides, filename, analyze)
        except BaseException:
            if idempotency_key:
                self.records.release_key(idempotency_key)
            raise
        threading.Thread(target=self._start, args=(record.id, resolved), daemon=True,
                         name=f"submit-{record.id}").start()
        return record, True

    def _wait_for_record(self, run_id: str, wait_s: float = 30.0) -> RunRecord | None:
        deadline = time.monotonic() + wait_s  # the first submit with the key is still resolving
        while (record := self.records.get(run_id)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return record

    def _create(self, run_id: str, yaml_text: str, overrides: list[str], filename: str,
                analyze: bool = False) -> tuple[RunRecord, Any]:
        from raypress.dag.resolve import resolve_pipeline
        from raypress.dag.validate import PipelineInvalid

        folder = self.sources / run_id
        folder.mkdir(parents=True, exist_ok=True)
        path = self._write_source(folder, yaml_text, filename)
        lines = yaml_text.splitlines()
        with self._submit_lock:  # counting active runs and recording one more, as one step
            if self.active_runs() >= self.settings.max_active_runs:
                raise APIError(503, f"{self.settings.max_active_runs} runs are queued or running, this "
                               "server's limit; try again when one ends", type_="server_overloaded",
                               code="queue_full")
            try:
                with contextlib.redirect_stderr(open(os.devnull, "w")):  # noqa: SIM115
                    from raypress.dag.validate import read_pipeline_spec

                    spec = read_pipeline_spec(path, overrides)
                    refusals = self._refusals(spec, path)
                    if refusals:
                        raise PipelineInvalid(refusals)
                    run_dir = self.settings.runs_root / spec.name / run_id
                    resolved = resolve_pipeline(path, overrides, str(run_dir), base_dir=str(self.settings.base_dir),
                                                cluster_address="auto", stats_mode=analyze)
                    refusals = self._writes_outside(resolved, path)
                    if refusals:
                        raise PipelineInvalid(refusals)
            except PipelineInvalid as exc:
                problems = [_problem_json(p, filename, lines) for p in exc.problems]
                raise InvalidPipeline(problems) from None
            resolved.write()
            record = RunRecord(id=run_id, name=spec.name, run_dir=str(resolved.run_dir), created=time.time(),
                               overrides=list(overrides), attempts=[Attempt("run", time.time())],
                               mode="analyze" if analyze else "run")
            self.records.put(record)
        return record, resolved

    def _writes_outside(self, resolved: Any, path: Path) -> list[Any]:
        """Writers whose destination is outside the runs root: a service writes where it was told to
        keep runs, never over a path of the server's user (its home, its code)."""
        from raypress.cluster import io_paths
        from raypress.dag.spec import Problem

        root = self.settings.runs_root.resolve()
        spec = resolved.vp.spec
        _, outputs = io_paths(spec, str(resolved.run_dir))
        problems = []
        for label, target in outputs[1:]:  # the first is the run directory itself
            real = Path(os.path.realpath(target))
            if real != root and root not in real.parents:
                node = label.split(".", 1)[0]
                by_id = {n.id: n for n in spec.nodes}
                line = spec.line(by_id[node].path) if node in by_id else None
                problems.append(Problem(str(path), line, f"writes to {target}, outside this server's runs "
                                        f"root {root}: write under {{run_dir}}", node=node,
                                        key=label.split(":", 1)[0].split(".", 1)[-1]))
        return problems

    def _start(self, run_id: str, resolved: Any) -> None:
        """Submit the run's job (in a thread: the runtime env's upload and an optional probe take
        seconds); record its id, or why it could not start."""
        env = {"RAY_JOB_STOP_WAIT_TIME_S": str(self.settings.cancel_grace_s), "RAYPRESS_PROGRESS": "0"}
        try:
            mode = self.records.get(run_id).mode  # type: ignore[union-attr]
            job_id = self.jobs.submit(resolved, run_id, env, check=self.settings.check_cluster, command=mode)
            error = None
        except Exception as exc:  # noqa: BLE001 - recorded: the run's state says why it failed
            job_id, error = None, " ".join(str(exc).split()) or type(exc).__name__
            log.warning("run %s could not be submitted: %s", run_id, error)
        with self.records.updating(run_id) as record:
            record.latest.job_id, record.latest.error = job_id, error
            cancel = record.cancel_requested is not None
        if cancel and job_id:
            with contextlib.suppress(Exception):
                self.jobs.stop(job_id)

    # reading

    def record(self, run_id: str) -> RunRecord:
        record = self.records.get(run_id)
        if record is None:
            raise APIError(404, f"no run {run_id!r}", param="run_id", code="run_not_found")
        latest = record.latest
        if latest is not None and latest.job_id is None and latest.error is None:
            job = self.jobs.job_of_run(run_id) if self._jobs_reachable() else None
            if job is not None:  # a restarted server: the job went, its id was never written
                with self.records.updating(run_id) as fresh:
                    if fresh.latest.job_id is None:
                        fresh.latest.job_id = job
                record = fresh
        return record

    def _jobs_reachable(self) -> bool:
        try:
            self.jobs.client()
            return True
        except Exception:  # noqa: BLE001 - the cluster is away: states come from run directories
            return False

    def job_state(self, record: RunRecord) -> JobState:
        latest = record.latest
        if latest is None or latest.job_id is None:
            return JobState(None)
        try:
            return self.jobs.state(latest.job_id)
        except Exception:  # noqa: BLE001 - the Jobs API is away: a live run reads as still running
            return JobState("RUNNING")

    def state(self, record: RunRecord) -> tuple[str, str | None, dict | None]:
        """The run's state; an ended one from memory (it changes only when a resume adds an attempt)."""
        key = (record.id, len(record.attempts))
        known = self._ended.get(key)
        if known is not None:
            return known
        found = quick_state(record, self.job_state(record))
        if found[0] in TERMINAL:
            self._ended[key] = found
        return found

    def current_state(self, run_id: str) -> tuple[str, str | None]:
        state, why, _ = self.state(self.record(run_id))
        return state, why

    def view(self, run_id: str) -> dict[str, Any]:
        record = self.record(run_id)
        return full_view(record, self.job_state(record))

    def active_runs(self) -> int:
        count = 0
        for run_id in self.records.ids():
            record = self.records.get(run_id)
            if record is not None and self.state(record)[0] not in TERMINAL:
                count += 1
        return count

    def list(self, state: str | None, name: str | None, cursor: str | None, limit: int) -> dict[str, Any]:
        ids = self.records.ids()
        if cursor:
            ids = [i for i in ids if i < cursor]
        runs: list[dict[str, Any]] = []
        next_cursor = None
        for run_id in ids:
            record = self.records.get(run_id)
            if record is None or (name and name.lower() not in record.name.lower()):
                continue
            run_state, why, ledger = self.state(record)
            if state and run_state != state:
                continue
            if len(runs) == limit:
                next_cursor = runs[-1]["id"]
                break
            runs.append(summary(record, run_state, why, ledger))
        return {"runs": runs, "next_cursor": next_cursor}

    # control

    def cancel(self, run_id: str) -> dict[str, Any]:
        record = self.record(run_id)
        run_state, _, _ = self.state(record)
        if run_state in TERMINAL:
            raise APIError(409, f"run {run_id} has already ended ({run_state})", param="run_id",
                           code="run_finished")
        with self.records.updating(run_id) as fresh:
            fresh.cancel_requested = fresh.cancel_requested or time.time()
            job_id = fresh.latest.job_id if fresh.latest else None
        if job_id is not None:  # else the submitting thread stops it as soon as it has an id
            try:
                self.jobs.stop(job_id)
            except Exception as exc:  # noqa: BLE001
                raise APIError(502, f"the cluster did not take the stop: {exc}", type_="server_error") from exc
        return {"id": run_id, "cancel_requested": True,
                "grace_s": self.settings.cancel_grace_s}

    def resume(self, run_id: str) -> RunRecord:
        from raypress.dag.resolve import resolve_pipeline
        from raypress.dag.validate import PipelineInvalid

        record = self.record(run_id)
        run_state, _, _ = self.state(record)
        if run_state not in RESUMABLE:
            raise APIError(409, f"run {run_id} is {run_state}: only a failed, cancelled or crashed run resumes",
                           param="run_id", code="run_not_resumable")
        try:
            resolved = resolve_pipeline(Path(record.run_dir) / "pipeline.yaml")
        except PipelineInvalid as exc:
            raise APIError(409, f"run {run_id} cannot resume: {exc.problems[0]}", param="run_id") from None
        with self.records.updating(run_id) as fresh:
            fresh.attempts.append(Attempt("resume", time.time()))
            fresh.cancel_requested = None
        threading.Thread(target=self._start, args=(run_id, resolved), daemon=True,
                         name=f"resume-{run_id}").start()
        return self.records.get(run_id)  # type: ignore[return-value]


class InvalidPipeline(Exception):
    """The posted pipeline has problems: each with its line, column, node and key."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        super().__init__(problems[0]["text"] if problems else "invalid pipeline")
        self.problems = problems
