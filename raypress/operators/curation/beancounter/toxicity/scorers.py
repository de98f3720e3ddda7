"""Toxicity scorers for the BeanCounter analysis: one offline default, one Perspective API client.

A scorer maps texts to scores in [0, 1], or None for a text it did not score (and says why in
``skipped``).

- ``profanity_check``: alt-profanity-check's ``predict_prob``, a linear SVM over word n-grams
  trained on offensive-language data, whose model ships in the wheel.  It is a *profanity*
  classifier standing in for a toxicity model: it needs no key and no network, but its scores
  are not Perspective's, so absolute levels do not compare with the paper's, only the filings
  vs reference contrast measured with the same scorer.
- ``perspective``: Google's Perspective API (``TOXICITY`` summary score), what the paper used,
  for users with a key.  Texts over 20 kB (20,480 bytes, the API's limit) are skipped;
  requests go out in chunks of ``chunk_size`` texts, ``concurrency`` at a time, never faster
  than ``requests_per_second`` (the API's quota is per second, 1 by default); 429 and 5xx
  answers and dropped connections are retried with exponential backoff (a ``Retry-After``
  header wins when longer); any other error, or a text still failing after ``max_retries``,
  stops the scoring with a ``PerspectiveError`` that says which text and what the API said.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Protocol

import httpx

PERSPECTIVE_ENDPOINT = "https://commentanalyzer.googleapis.com/v1alpha1/comments:analyze"
PERSPECTIVE_MAX_BYTES = 20_480


class ToxicityScorer(Protocol):
    name: str
    description: str
    skipped: dict[str, int]

    def score(self, texts: Sequence[str]) -> list[float | None]: ...


class ProfanityCheckScorer:
    """alt-profanity-check ``predict_prob`` in batches (offline; a profanity classifier)."""

    name = "profanity_check"
    description = ("alt-profanity-check predict_prob: a linear-SVM profanity classifier shipped in its wheel, "
                   "standing in for a toxicity model (not Perspective; compare corpora, not absolute levels)")

    def __init__(self, batch_size: int = 4096):
        self.batch_size = batch_size
        self.skipped: dict[str, int] = {}

    def score(self, texts: Sequence[str]) -> list[float | None]:
        from profanity_check import predict_prob

        out: list[float | None] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(float(x) for x in predict_prob(list(texts[i:i + self.batch_size])))
        return out


class PerspectiveError(RuntimeError):
    """The Perspective API refused a text for good (or kept failing); nothing more is sent."""


class _Cancelled(Exception):
    """A request not sent because another text already failed for good."""


class RateLimiter:
    """At most ``rate`` starts per second across threads: each caller waits for its own slot."""

    def __init__(self, rate: float):
        if rate <= 0:
            raise ValueError(f"requests per second must be > 0, not {rate}")
        self.interval = 1.0 / rate
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _api_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        if message:
            return str(message)
    except ValueError:
        pass
    return response.text[:300]


class PerspectiveScorer:
    """Perspective API ``comments:analyze`` TOXICITY scores with rate limit, chunks and retries."""

    name = "perspective"
    description = "Perspective API TOXICITY summary score (the paper's scorer)"

    def __init__(self, api_key: str, endpoint: str = PERSPECTIVE_ENDPOINT, requests_per_second: float = 1.0,
                 chunk_size: int = 100, concurrency: int = 4, max_retries: int = 6, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, timeout_s: float = 30.0, languages: Sequence[str] = ("en",),
                 max_bytes: int = PERSPECTIVE_MAX_BYTES):
        if not api_key:
            raise ValueError("the Perspective scorer needs an API key")
        self.api_key, self.endpoint = api_key, endpoint
        self.limiter = RateLimiter(requests_per_second)
        self.chunk_size, self.concurrency = max(1, chunk_size), max(1, concurrency)
        self.max_retries, self.backoff_s, self.max_backoff_s = max_retries, backoff_s, max_backoff_s
        self.timeout_s, self.languages, self.max_bytes = timeout_s, list(languages), max_bytes
        self.skipped: dict[str, int] = {}
        self.requests = 0
        self.retries = 0
        self._count_lock = threading.Lock()

    @classmethod
    def from_env(cls, api_key_env: str, **kwargs: Any) -> "PerspectiveScorer":
        key = os.environ.get(api_key_env, "")
        if not key:
            raise ValueError(f"scorer 'perspective' reads its API key from the environment variable "
                             f"{api_key_env!r}, which is not set (or empty)")
        return cls(key, **kwargs)

    def _count(self, attr: str) -> None:
        with self._count_lock:
            setattr(self, attr, getattr(self, attr) + 1)

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        after = _retry_after(response) if response is not None else None
        return max(delay, min(after, self.max_backoff_s)) if after is not None else delay

    def _score_one(self, client: httpx.Client, index: int, text: str, stop: threading.Event) -> float:
        body = {"comment": {"text": text}, "languages": self.languages,
                "requestedAttributes": {"TOXICITY": {}}, "doNotStore": True}
        what = f"text {index} ({text[:60]!r}{'...' if len(text) > 60 else ''})"
        last = ""
        for attempt in range(self.max_retries + 1):
            if stop.is_set():
                raise _Cancelled
            self.limiter.wait()
            self._count("requests")
            response = None
            try:
                response = client.post(self.endpoint, params={"key": self.api_key}, json=body)
            except httpx.TransportError as exc:  # the URL carries the key: name the error type only
                last = f"{type(exc).__name__} talking to {self.endpoint}"
            else:
                if response.status_code == 200:
                    try:
                        return float(response.json()["attributeScores"]["TOXICITY"]["summaryScore"]["value"])
                    except (ValueError, KeyError, TypeError) as exc:
                        raise PerspectiveError(f"Perspective API: {what}: unexpected answer "
                                               f"{response.text[:200]!r} ({type(exc).__name__}: {exc})") from None
                last = f"HTTP {response.status_code}: {_api_message(response)}"
                if response.status_code != 429 and response.status_code < 500:
                    raise PerspectiveError(f"Perspective API refused {what}: {last} (not retried)")
            if attempt < self.max_retries:
                self._count("retries")
                stop.wait(self._delay(attempt, response))
        raise PerspectiveError(f"Perspective API: {what} still failing after {self.max_retries} retries: {last}")

    def score(self, texts: Sequence[str]) -> list[float | None]:
        out: list[float | None] = [None] * len(texts)
        todo = []
        for i, text in enumerate(texts):
            if len(text.encode("utf-8")) > self.max_bytes:
                self.skipped["over_20kB"] = self.skipped.get("over_20kB", 0) + 1
            elif not text.strip():
                self.skipped["empty"] = self.skipped.get("empty", 0) + 1
            else:
                todo.append(i)
        stop = threading.Event()  # set by the first permanent failure: the other threads send nothing more

        def one(j: int) -> float:
            if stop.is_set():
                raise _Cancelled
            try:
                return self._score_one(client, j, texts[j], stop)
            except PerspectiveError:
                stop.set()
                raise

        with httpx.Client(timeout=self.timeout_s) as client, ThreadPoolExecutor(self.concurrency) as pool:
            for start in range(0, len(todo), self.chunk_size):
                chunk = todo[start:start + self.chunk_size]
                futures = [pool.submit(one, j) for j in chunk]
                wait(futures)
                errors = [f.exception() for f in futures if f.exception() is not None]
                real = [e for e in errors if not isinstance(e, _Cancelled)]
                if real:
                    raise real[0]
                for i, future in zip(chunk, futures):
                    out[i] = future.result()
        return out


def make_scorer(kind: str, api_key_env: str = "PERSPECTIVE_API_KEY", endpoint: str = PERSPECTIVE_ENDPOINT,
                **perspective: Any) -> ToxicityScorer:
    """The scorer named ``kind`` (``profanity_check`` or ``perspective``)."""
    if kind == "profanity_check":
        return ProfanityCheckScorer()
    if kind == "perspective":
        return PerspectiveScorer.from_env(api_key_env, endpoint=endpoint, **perspective)
    raise ValueError(f"unknown scorer {kind!r}: expected 'profanity_check' or 'perspective'")
