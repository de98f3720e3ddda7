"""The cluster's Jobs API as the service uses it: submit (``raypress submit``'s own path), look up
statuses, stop.

Why one cached listing: a page of runs, or fifty clients polling, would otherwise ask the
dashboard about each live run on every request; one ``list_jobs`` a second answers them all.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from raypress.serving.pipelines.run_view import JobState

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

    from raypress.dag.resolve import ResolvedPipeline

RUN_ID_METADATA = "raypress_service_run"
LIST_TTL_S = 1.0


class Jobs:
    """A Jobs API client for ``address`` (the head's dashboard URL), connected on first use."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._client: JobSubmissionClient | None = None
        self._lock = threading.Lock()
        self._listed_at = 0.0
        self._listed: dict[str, JobState] = {}
        self._by_run: dict[str, str] = {}
        self._refreshing = False

    def client(self) -> JobSubmissionClient:
        with self._lock:
            if self._client is None:
                from raypress.cluster import connect

                self._client = connect(self.address)
            return self._client

    def submit(self, resolved: ResolvedPipeline, run_id: str, env_vars: dict[str, str], check: bool,
               echo: Any = None, command: str = "run") -> str:
        from raypress.cluster import start_job

        # the job runs with this replica's Python: it is on the cluster, and it imports raypress
        job_id = start_job(self.client(), resolved, echo=echo or (lambda _line: None), check=check,
                           env_vars=env_vars, metadata={RUN_ID_METADATA: run_id}, python=sys.executable,
                           command=command)
        self.forget()
        return job_id

    def _listing(self) -> tuple[dict[str, JobState], dict[str, str]]:
        """The cached listing; one thread refreshes a stale one while the others use it as it is
        (fifty pollers made fifty ``list_jobs`` calls each time it went stale)."""
        with self._lock:
            fresh = time.monotonic() - self._listed_at < LIST_TTL_S
            if fresh or (self._listed_at and self._refreshing):
                return self._listed, self._by_run
            self._refreshing = True
        try:
            return self._refresh()
        finally:
            with self._lock:
                self._refreshing = False

    def _refresh(self) -> tuple[dict[str, JobState], dict[str, str]]:
        jobs = self.client().list_jobs()
        listed = {j.submission_id: JobState(j.status.value, j.message) for j in jobs if j.submission_id}
        by_run = {(j.metadata or {}).get(RUN_ID_METADATA): j.submission_id for j in jobs
                  if (j.metadata or {}).get(RUN_ID_METADATA) and j.submission_id}
        with self._lock:
            self._listed, self._by_run, self._listed_at = listed, by_run, time.monotonic()
        return listed, by_run

    def state(self, job_id: str | None) -> JobState:
        if job_id is None:
            return JobState(None)
        return self._listing()[0].get(job_id, JobState(None))

    def job_of_run(self, run_id: str) -> str | None:
        """The job submitted for ``run_id`` (its metadata says so): how a restarted server finds a
        job whose id its predecessor never recorded."""
        return self._listing()[1].get(run_id)

    def stop(self, job_id: str) -> bool:
        stopped = self.client().stop_job(job_id)
        self.forget()
        return bool(stopped)

    def forget(self) -> None:
        with self._lock:
            self._listed_at = 0.0
