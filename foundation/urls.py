"""URLs a user gives (a backbone's base URL, a Letta server's address): checked where they enter, and
their credentials kept out of every file and output. A leaf any layer may use."""

from __future__ import annotations

import re
from urllib.parse import unquote

import httpx

from .errors import MovieMemError

_USERINFO = re.compile(r"(?<=://)([^/@\s]+)@")


def redact_urls(text: str) -> str:
    """Text with the user:password part of every URL replaced by ***: a backbone spec such as
    openai-compatible:http://alice:pw@host/v1#m is written to results and reports as http://***@host,
    a Letta server's address as the same."""
    return _USERINFO.sub("***@", text)


def url_secrets(text: str) -> list[str]:
    """The credentials of every URL in `text` as a server receives them: user:password (what an HTTP
    Basic header carries, base64-encoded) and the password alone (the user, when there is none), so
    that an echo of them can be redacted (backbones.retry.redact)."""
    out = []
    for info in _USERINFO.findall(text):
        user, _, password = (unquote(part) for part in info.partition(":"))
        out += [f"{user}:{password}", password or user]
    return out


def http_url(raw: str, what: str, example: str) -> str:
    """`raw` if it is an http(s) URL with a host and a port that exists, else one line saying so. The
    value is not echoed: it may hold credentials, or be a key pasted into the wrong place."""
    try:
        u = httpx.URL(raw.strip())
        ok = u.scheme in ("http", "https") and bool(u.host) and (u.port is None or 0 < u.port < 65536)
    except (httpx.InvalidURL, TypeError):
        ok = False
    if not ok:
        raise MovieMemError(f"{what} is not an http(s) URL with a host and a port from 1 to 65535 (for example {example})")
    return raw.strip()
