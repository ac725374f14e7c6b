"""URL credentials kept out of every file and output: a leaf any layer may use."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact_urls(text: str) -> str:
    """Text with the user:password part of every URL replaced by ***: a backbone spec such as
    openai-compatible:http://alice:pw@host/v1#m is written to results and reports as http://***@host,
    a Letta server's address as the same."""
    return _USERINFO.sub("***@", text)
