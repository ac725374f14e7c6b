"""The process's credentials, kept out of everything it writes.

One register holds every credential value this process may send (the backbones register their API
keys, URL user:password and gateway tokens as they are built; the key variables of the environment
are read at each scrub, since a backend reads its key at call time), and `scrub(text)` is the one
redaction of every way out: the console, JSON/JSONL/HTML/markdown files, HTTP and MCP replies,
exception messages and log lines all pass through it.

A secret is removed in each form it travels in (as written, base64 as an HTTP Basic header carries
user:password, URL-safe base64, percent-encoded, JSON-escaped), and so is every run of at least
FRAGMENT characters copied from one: a cut made before the scrub (an error body cut to 300
characters, a wrapped table cell) can leave a prefix, a suffix or a middle piece of a key, never
just the whole key. FRAGMENT = 6: a run of six characters of a random key practically never occurs
in other text (62**6 is about 5.7e10) and six is the shortest value the register takes, so ordinary
words are erased only when a password is made of them; a piece of five characters or fewer of a key
of 20 or more leaves over 90 bits unknown, too little to identify or guess the key from.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from .urls import redact_urls, url_secrets

FRAGMENT = 6  # the shortest run copied from a secret that is removed; also the shortest secret registered
MASK = "***"
ENV_VARS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_COMPATIBLE_API_KEY",
            "MOVIEMEM_GATEWAY_TOKEN")

# reentrant: a finaliser run by the garbage collector inside a locked section (an HTTP client closing, as in
# google-genai's Client.__del__) logs, and logging scrubs: with a plain lock that thread waited on itself forever
_lock = threading.RLock()
_values: set[str] = set()  # forms removed with every fragment of FRAGMENT characters or more
_whole: set[str] = set()  # forms removed only whole: "user:password" (its start, the user, is no secret)
_env: set[str] = set(ENV_VARS)
_cache: dict[tuple[frozenset[str], frozenset[str], frozenset[str]], _Matcher] = {}


def register(*values: str | None) -> None:
    """Scrub these credential values (and every fragment of them) from all output from now on.
    Values shorter than FRAGMENT are not taken: removing them would erase ordinary text."""
    _add(_values, {f for v in values if v and len(v) >= FRAGMENT for f in encoded_forms(v)})


def _add(into: set[str], forms: set[str]) -> None:
    fresh = {f for f in forms if len(f) >= FRAGMENT}
    if not fresh <= into:
        with _lock:
            into.update(fresh)


def register_url(url: str | None) -> None:
    """Scrub the credentials of a URL (user:password@host): the password with its fragments, and
    user:password whole and as the Basic header's base64 (with its fragments)."""
    creds = url_secrets(url or "")
    register(*creds[1::2])
    pairs = set(creds[0::2])
    _add(_values, {f for p in pairs for f in _base64(p)})
    _add(_whole, {f for p in pairs for f in encoded_forms(p)} - {f for p in pairs for f in _base64(p)})


def watch_env(*names: str) -> None:
    """Also scrub the values of these environment variables, read at each scrub."""
    if not set(names) <= _env:
        with _lock:
            _env.update(names)


def registered() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The register's state (values, whole-only values, watched variables): tests restore it."""
    with _lock:
        return frozenset(_values), frozenset(_whole), frozenset(_env)


def restore(state: tuple[frozenset[str], frozenset[str], frozenset[str]]) -> None:
    """Put back a state `registered()` returned (tests, so one test's keys do not scrub another's text)."""
    values, whole, env = state
    with _lock:
        _values.clear()
        _values.update(values)
        _whole.clear()
        _whole.update(whole)
        _env.clear()
        _env.update(env)


def encoded_forms(secret: str) -> set[str]:
    """A secret as written and as it travels: base64 (an HTTP Basic header carries user:password so),
    URL-safe base64, percent-encoded and JSON-escaped. Base64 without its padding, so that the
    secret is found however the echo ends."""
    return {secret, *_base64(secret), quote(secret, safe=""), json.dumps(secret, ensure_ascii=False)[1:-1]}


def _base64(secret: str) -> set[str]:
    raw = secret.encode()
    return {base64.b64encode(raw).decode().rstrip("="), base64.urlsafe_b64encode(raw).decode().rstrip("=")}


class _Matcher:
    """Finds every run of FRAGMENT or more characters of the fragment forms, and the whole forms."""

    def __init__(self, forms: frozenset[str], whole: frozenset[str]) -> None:
        self.whole = sorted(whole - forms, key=len, reverse=True)
        self.grams: dict[str, list[tuple[str, int]]] = {}
        for form in forms:
            for i in range(len(form) - FRAGMENT + 1):
                self.grams.setdefault(form[i:i + FRAGMENT], []).append((form, i))

    def spans(self, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        for form in self.whole:
            at = text.find(form)
            while at >= 0:
                found.append((at, at + len(form)))
                at = text.find(form, at + 1)
        for gram, places in self.grams.items():
            at = text.find(gram)
            while at >= 0:
                for form, i in places:  # grow the match both ways as far as the text follows the form
                    a, b, fa, fb = at, at + FRAGMENT, i, i + FRAGMENT
                    while fa > 0 and a > 0 and text[a - 1] == form[fa - 1]:
                        a, fa = a - 1, fa - 1
                    while fb < len(form) and b < len(text) and text[b] == form[fb]:
                        b, fb = b + 1, fb + 1
                    found.append((a, b))
                at = text.find(gram, at + 1)
        return found


def _matcher(extra: Iterable[str]) -> _Matcher:
    with _lock:
        more = frozenset(v for v in (*(os.environ.get(name) for name in _env), *extra) if v and len(v) >= FRAGMENT)
        key = (frozenset(_values), frozenset(_whole), more)
        matcher = _cache.get(key)
        if matcher is None:
            if len(_cache) > 64:  # keys come and go in tests; a process holds a handful
                _cache.clear()
            forms = key[0] | {f for v in more for f in encoded_forms(v) if len(f) >= FRAGMENT}
            matcher = _cache[key] = _Matcher(forms, key[1])
        return matcher


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every registered secret (and `extra` ones), each encoded form of it, every run
    of FRAGMENT or more characters of one, and the user:password of every URL replaced by ***."""
    spans = sorted(_matcher(extra).spans(text))
    if spans:
        parts, last = [], 0
        start, end = spans[0]
        for a, b in spans[1:] + [(len(text) + 1, len(text) + 1)]:
            if a <= end:
                end = max(end, b)
                continue
            parts += [text[last:start], MASK]
            last, (start, end) = end, (a, b)
        text = "".join(parts) + text[last:]
    return redact_urls(text)


def scrub_value(value: Any, extra: Iterable[str] = ()) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings; keys too) with every string scrubbed; other
    values are returned as they are."""
    known = tuple(extra)
    if isinstance(value, str):
        return scrub(value, known)
    if isinstance(value, dict):
        return {scrub_value(k, known): scrub_value(v, known) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_value(v, known) for v in value)
    return value


def install_log_scrubbing() -> None:
    """Scrub every log record of the process (message, arguments and traceback) as it is made, for
    every logger and handler, the libraries' included. Idempotent."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "scrubs", False):
        return
    logging.setLogRecordFactory(_ScrubbingFactory(factory))


class _ScrubbingFactory:
    """A log record factory that scrubs what the one before it made; `scrubs` marks it so it is installed once."""

    scrubs = True

    def __init__(self, inner: Callable[..., logging.LogRecord]) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        try:
            record.msg, record.args = scrub(record.getMessage()), None
            if record.exc_info and not record.exc_text:
                record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is left to its handler to report
            pass
        return record


class ScrubbedStream:
    """A text stream (stdout, stderr) that scrubs each write before passing it on: every line a command
    prints, through a console, print() or sys.stdout.write, leaves the process scrubbed."""

    scrubs = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(scrub(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer...: the stream's own
        return getattr(self.inner, name)


def scrub_std_streams() -> None:
    """Put sys.stdout and sys.stderr behind ScrubbedStream (once: a stream already behind one is left)."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not getattr(stream, "scrubs", False):
            setattr(sys, name, ScrubbedStream(stream))
