"""Run an ASGI app under uvicorn on a background thread: tests and benchmarks that need a real
HTTP server but no Ray (the GPU machine has none)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class ThreadedServer:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> "ThreadedServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int | None = None,
                    startup_timeout: float = 30.0) -> ThreadedServer:
    """Start ``app`` and return once it accepts connections (``.url``, ``.stop()``)."""
    import uvicorn

    port = port or free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.02)
    return ThreadedServer(f"http://{host}:{port}", server, thread)
