"""How moviemem's local HTTP servers (the gateway, the MCP server) listen and run: one socket helper and
one uvicorn runner, in the foreground (the commands) or in a background thread (tests, benchmarks, the
Letta sidecar's gateway), always with the slow-client deadline."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Literal, Self

from .errors import MovieMemError
from .slowclients import DeadlineProtocol

Lifespan = Literal["auto", "on", "off"]


def listen(host: str, port: int) -> socket.socket:
    """A listening socket: no Nagle delay, a clear error when the port is taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted sockets inherit this: without it, headers and body leave in two segments and
    # the client's delayed ACK adds ~40 ms to every request
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise MovieMemError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _server(app: Any, *, lifespan: Lifespan, grace: int, log_level: str = "warning", access_log: bool = False) -> Any:
    import uvicorn

    # a client that stalls mid-request must not keep a stop or SIGTERM from ending the server
    return uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan=lifespan, access_log=access_log,
                                         timeout_graceful_shutdown=grace, http=DeadlineProtocol))


def run(app: Any, sock: socket.socket, *, lifespan: Lifespan, grace: int, log_level: str = "warning") -> None:
    """Serve `app` on `sock` in the foreground until interrupted."""
    _server(app, lifespan=lifespan, grace=grace, log_level=log_level, access_log=True).run(sockets=[sock])


class BackgroundServer:
    """`app` served on `sock` from a daemon thread: `start()` returns once it answers, `stop()` ends it and
    closes the socket; also a context manager."""

    def __init__(self, app: Any, sock: socket.socket, *, what: str, lifespan: Lifespan = "off", grace: int = 2):
        self.what = what
        self._sock = sock
        host, self.port = sock.getsockname()[:2]
        self.host = str(host)
        self._server = _server(app, lifespan=lifespan, grace=grace)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True,
                                        name=f"moviemem-{what.replace(' ', '-')}")

    def start(self, timeout: float = 30.0) -> Self:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise MovieMemError(f"the {self.what} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __exit__(self, *exc: object) -> None:
        self.stop()
