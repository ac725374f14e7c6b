"""The check every local server makes before it answers (the gateway, the MCP server, the run
inspector): the Host header names an allowed address, so a web page cannot reach the server
through DNS rebinding, and so does the Origin, when a browser sends one, so a page the user has
open elsewhere cannot drive it."""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def foreign(host: str | None, origin: str | None, allowed: Collection[str] = LOOPBACK) -> bool:
    """True when the request must be refused: its Host, or its Origin when it has one, is not allowed."""
    name = urlsplit(f"//{host or ''}").hostname
    return name not in allowed or (origin is not None and urlsplit(origin).hostname not in allowed)
