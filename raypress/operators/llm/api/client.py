"""An OpenAI-compatible ``/chat/completions`` client on httpx (a core dependency).

Why its own client rather than the ``openai`` package: that package is a test-only dependency of
raypress, and the ops need three things it does not hand back — how many times it retried, the
usage of every response (also the ones whose text did not parse), and one connection pool shared
by the threads of a batch.  The behaviour follows what Data-Juicer gets from ``openai.OpenAI``
(its ``model_params`` are that client's arguments): ``max_retries`` (default 2) retries of a
request answered 408, 409, 429 or 5xx, or lost to a connection error or timeout, after an
exponential backoff with jitter (0.5 s doubling up to 8 s), or after the server's ``Retry-After``
/ ``retry-after-ms`` when it gives one of at most 60 s.  Any other 4xx fails at once: asking again
cannot help.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx

DEFAULT_RESPONSE_PATH = "choices.0.message.content"
TRANSIENT_STATUS = frozenset({408, 409, 429})
COUNTERS = ("requests", "retries", "request_errors", "parse_failures", "prompt_tokens", "completion_tokens")


class ChatRequestFailed(RuntimeError):
    """The endpoint refused a request, or could not be reached, after the retries it deserved."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


@dataclass
class Reply:
    """One answer: the text at the response path (None when the body has none) and the raw body."""

    text: str | None
    body: str


class RequestCounts:
    """What a node's requests cost, summed across the threads of a batch (see ``COUNTERS``).

    ``requests`` counts every HTTP request sent, retries included: requests = answered +
    ``request_errors``; ``retries`` the requests sent again after a transient failure."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(COUNTERS, 0)

    def add(self, **values: int) -> None:
        with self._lock:
            for key, value in values.items():
                self._values[key] += int(value)

    def take(self) -> dict[str, int]:
        """The counts since the last take, then zero (what one batch reports to the ledger)."""
        with self._lock:
            out, self._values = self._values, dict.fromkeys(COUNTERS, 0)
        return out

    def peek(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def __getstate__(self) -> dict[str, int]:
        return self.peek()

    def __setstate__(self, values: dict[str, int]) -> None:
        self._lock = threading.Lock()
        self._values = {**dict.fromkeys(COUNTERS, 0), **values}


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``n`` (0-based): ``initial * 2**n`` capped at ``maximum``, less up to a
    quarter at random (jitter, so that throttled workers do not come back in step); a server's
    ``Retry-After`` of at most ``retry_after_cap`` seconds wins."""

    initial: float = 0.5
    maximum: float = 8.0
    retry_after_cap: float = 60.0

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None and 0 <= retry_after <= self.retry_after_cap:
            return retry_after
        return min(self.initial * 2 ** retry, self.maximum) * (1 - 0.25 * rng.random())


def retry_after_seconds(headers: httpx.Headers, now: float | None = None) -> float | None:
    """The server's wish, in seconds: ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):  # not a number: try Retry-After
            return float(ms) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):  # not seconds: an HTTP date, below
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def nested_access(data: Any, path: str) -> Any:
    """``data`` at a dot-separated path whose integer parts index lists ("choices.0.message.content")."""
    for part in path.split("."):
        if isinstance(data, list) and part.lstrip("-").isdigit():
            data = data[int(part)]
        elif isinstance(data, dict):
            data = data[part]
        else:
            raise KeyError(part)
    return data


@dataclass
class ChatClient:
    """POSTs chat requests to one URL for one model; thread-safe (one pool for a batch's threads).

    Not picklable state (the pool, the lock) is made on first use, in the worker."""

    url: str
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 600.0
    max_retries: int = 2
    default_headers: dict[str, str] = field(default_factory=dict)
    response_path: str = DEFAULT_RESPONSE_PATH
    models_url: str | None = None  # GET here for the first model's id when ``model`` is None
    max_connections: int = 8
    backoff: Backoff = field(default_factory=Backoff)
    counts: RequestCounts = field(default_factory=RequestCounts)
    sleep: Callable[[float], None] = time.sleep
    seed: int | None = None  # of the backoff's jitter
    transport: httpx.BaseTransport | None = field(default=None, repr=False)  # tests: httpx.MockTransport
    _http: httpx.Client | None = field(default=None, init=False, repr=False)
    _rng: random.Random | None = field(default=None, init=False, repr=False)
    _lock: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        with self._lock:  # the batch's threads start together
            if self._http is None:
                headers = {**self.default_headers, "Content-Type": "application/json"}
                if self.api_key:
                    headers["Authorization"] = f"Bearer {self.api_key}"
                limits = httpx.Limits(max_connections=self.max_connections,
                                      max_keepalive_connections=self.max_connections)
                timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
                self._http = httpx.Client(headers=headers, timeout=timeout, limits=limits, transport=self.transport)
                self._rng = random.Random(self.seed)
            return self._http

    def chat(self, messages: list[dict[str, str]], **sampling: Any) -> Reply:
        """One chat completion (retried as the module says); ChatRequestFailed when it cannot be had."""
        body = {"model": self.model_id(), "messages": messages, **sampling}
        response = self._send("POST", self.url, json=body)
        text = response.text
        try:
            data = response.json()
        except ValueError:
            return Reply(None, text)
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            self.counts.add(prompt_tokens=_int(usage.get("prompt_tokens")),
                            completion_tokens=_int(usage.get("completion_tokens")))
        try:
            content = nested_access(data, self.response_path)
        except (KeyError, IndexError, TypeError):
            return Reply(None, text)
        return Reply(content if isinstance(content, str) else None, text)

    def model_id(self) -> str:
        """``model``, or (None, as Data-Juicer allows) the first model the server lists, asked once."""
        if self.model is None:
            if self.models_url is None:
                raise ChatRequestFailed("no model named and no base URL to list the server's models")
            listed = self._send("GET", self.models_url).json().get("data") or []  # threads may ask alike
            if not listed:
                raise ChatRequestFailed(f"GET {self.models_url}: the server lists no models")
            self.model = str(listed[0]["id"])
        return self.model

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        client = self._client()
        retry = 0
        while True:
            self.counts.add(requests=1)
            wait: float | None = None
            try:
                response = client.request(method, url, **kwargs)
            except httpx.TransportError as error:  # refused, reset, timed out: the server may come back
                problem, status, transient = f"{method} {url}: {type(error).__name__}: {error}", None, True
            else:
                if response.status_code < 400:
                    return response
                status = response.status_code
                transient = status in TRANSIENT_STATUS or status >= 500
                problem = f"{method} {url}: HTTP {status}: {response.text[:500]}"
                wait = retry_after_seconds(response.headers) if transient else None
            self.counts.add(request_errors=1)
            if not transient or retry >= self.max_retries:
                tries = f" (after {retry + 1} tries)" if transient else ""
                raise ChatRequestFailed(problem + tries, status, transient)
            self.sleep(self.backoff.delay(retry, wait, self._rng or random.Random()))
            retry += 1
            self.counts.add(retries=1)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the pool and the lock (a worker makes its own)."""
        state = dict(self.__dict__)
        state.update(_http=None, _rng=None, _lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
