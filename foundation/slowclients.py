"""Local HTTP servers (`moviemem serve`, `moviemem mcp --http`) drop a client that does not finish
sending its request in time. uvicorn's only timer (`timeout_keep_alive`) starts after a response, so a
client that connects and sends half a request, or nothing, would otherwise hold its connection for as
long as it likes; ten of them kept these servers busy for minutes."""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_S = 10.0  # a client has this long to send a request's headers and body (from connecting, or its last answer)


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on receiving each request: when it passes and the request
    is still incomplete, the connection is closed. A request received in full is never cut, however long
    the answer takes (a model's reply)."""

    request_s = REQUEST_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn overrides asyncio.Protocol with this narrower type too (its own ignore)
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._start_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._start_deadline()  # the next request on this connection gets its own time

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _start_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.request_s, self._expire)

    def _expire(self) -> None:
        if not self.transport.is_closing() and self.conn.their_state not in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED):
            self.transport.close()  # headers (IDLE) or body (SEND_BODY) still incomplete
