"""One watcher per run for all of its event streams (``GET /v1/runs/{id}/events``).

Why: each stream used to look at the run's ``events.jsonl`` four times a second and at its state
once a second; fifty clients watching one run made fifty such loops on the replica, a CPU the run
itself was short of (``bench/pipelines_api.py``).  Now one task per watched run reads what the
file gained and the run's state, keeps the run's events (a run has tens to thousands, kilobytes),
and wakes every stream of that run; it ends when the last stream goes.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool

from raypress.serving.pipelines.run_files import EVENTS_FILE, events_since
from raypress.serving.pipelines.run_view import TERMINAL

POLL_S = 0.25  # how often the file is looked at
STATE_S = 1.0  # how often the run's state is
HEARTBEAT_S = 15.0  # a comment line on a quiet stream, so proxies keep it open


class RunFeed:
    """The events and state of one run, as one watcher reads them."""

    def __init__(self, run_dir: Path, state_of: Callable[[], tuple[str, str | None]]) -> None:
        self.run_dir = run_dir
        self.state_of = state_of
        self.ends: list[int] = []  # each event's end offset (its SSE id), ascending
        self.events: list[dict[str, Any]] = []
        self.offset = 0
        self.state: tuple[str, str | None] | None = None
        self.ended = False
        self.subscribers = 0
        self.task: asyncio.Task | None = None
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _read(self) -> None:
        records, self.offset = await run_in_threadpool(events_since, self.run_dir, self.offset)
        if records:
            for end, event in records:
                self.ends.append(end)
                self.events.append(event)
            self._notify()

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        next_state = 0.0
        try:
            while self.subscribers > 0:
                try:
                    grown = os.stat(self.run_dir / EVENTS_FILE).st_size > self.offset
                except OSError:
                    grown = False
                if grown:
                    await self._read()
                if loop.time() >= next_state:
                    state = await run_in_threadpool(self.state_of)
                    if state != self.state:
                        if state[0] in TERMINAL:
                            await self._read()  # what the run wrote before it ended, first
                        self.state = state
                        self.ended = state[0] in TERMINAL
                        self._notify()
                    if self.ended:
                        return
                    next_state = loop.time() + STATE_S
                await asyncio.sleep(POLL_S)
        except Exception as exc:  # noqa: BLE001 - the run went (deleted): its streams end, they do not hang
            self.state, self.ended = ("failed", f"the run can no longer be read: {exc}"), True
            self._notify()

    async def follow(self, start: int, disconnected: Callable[[], Any]) -> AsyncIterator[tuple[str | None, Any, int | None]]:
        """(SSE event name, data, id) after byte offset ``start``, then ``state`` changes, then ``end``;
        ``(None, None, None)`` for a heartbeat."""
        index = bisect.bisect_right(self.ends, start)  # what the feed has read already, skipped at once
        shown = None
        while True:
            changed = self._changed
            while index < len(self.events):  # a fresh feed may read the file after the stream began
                if self.ends[index] > start:
                    yield None, self.events[index], self.ends[index]
                index += 1
            if self.state is not None and self.state != shown:
                shown = self.state
                yield "state", {"state": shown[0], "reason": shown[1]}, None
            if self.ended:
                yield "end", {"state": shown[0], "reason": shown[1]}, None
                return
            try:
                await asyncio.wait_for(changed.wait(), HEARTBEAT_S)
            except asyncio.TimeoutError:
                yield None, None, None
            if await disconnected():
                return


class RunFeeds:
    """The live feeds of one replica, by run id: made by the first stream, gone with the last."""

    def __init__(self) -> None:
        self.feeds: dict[str, RunFeed] = {}

    async def stream(self, run_id: str, run_dir: Path, state_of: Callable[[], tuple[str, str | None]],
                     start: int, disconnected: Callable[[], Any]) -> AsyncIterator[tuple[str | None, Any, int | None]]:
        feed = self.feeds.get(run_id)
        if feed is None or feed.run_dir != run_dir or (feed.task is not None and feed.task.done() and not feed.ended):
            feed = self.feeds[run_id] = RunFeed(run_dir, state_of)
        feed.subscribers += 1
        if feed.task is None or (feed.task.done() and not feed.ended):
            feed.task = asyncio.create_task(feed.watch())
        try:
            async for item in feed.follow(start, disconnected):
                yield item
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0 and self.feeds.get(run_id) is feed:
                del self.feeds[run_id]
