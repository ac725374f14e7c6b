"""Bounded retries for provider calls (tenacity): which failures are worth another try,
how long to wait (Retry-After when the server says, exponential backoff with jitter
otherwise), and what a run sees when the attempts run out: an invalid Reply, not a crash.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Iterable

import httpx
import tenacity

from ..foundation.errors import MovieMemError
from ..foundation.secrets import scrub
from .types import Reply

log = logging.getLogger("moviemem.backbones")

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
FATAL_STATUS = frozenset({401, 403, 404})  # fixing them takes the user, not another try


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a provider error (openai, google-genai, httpx), if any."""
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def retry_after_s(exc: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, Retry-After seconds or HTTP date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, float(when.timestamp() - time.time()))
    except (TypeError, ValueError):
        return None


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _transport_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [httpx.TransportError, ConnectionError, TimeoutError]
    try:
        import httpx2  # google-genai may use this fork of httpx

        types.append(httpx2.TransportError)
    except ImportError:
        pass
    return tuple(types)


_TRANSPORT = _transport_types()


def is_transient(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections: failures another attempt can fix."""
    if isinstance(exc, MovieMemError):
        return False
    status = status_of(exc)
    if status is not None:
        return status in TRANSIENT_STATUS
    if type(exc).__name__ in ("APIConnectionError", "APITimeoutError"):  # openai wraps httpx errors
        return True
    return any(isinstance(e, _TRANSPORT) for e in _chain(exc))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` scrubbed of every credential this process knows and of `secrets` (foundation.secrets.scrub,
    the one redaction of every file and line moviemem writes; kept under this name for its callers)."""
    return scrub(text, secrets)


def describe(exc: BaseException, secrets: Iterable[str] = (), limit: int = 300) -> str:
    """One line naming a provider error: the status and the first line of its message, scrubbed
    first and cut to `limit` characters after, so that the cut cannot leave part of a key."""
    status = status_of(exc)
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    head = f"HTTP {status}" if status else type(exc).__name__
    return f"{head}: {scrub(msg, secrets)[:limit]}"


class wait_retry_after(tenacity.wait.wait_base):  # noqa: N801 - named like tenacity's own wait_* strategies
    """Wait what Retry-After says (capped), else exponential backoff with full jitter."""

    def __init__(self, initial: float, max_wait: float) -> None:
        self.max_wait = max_wait
        self.backoff = tenacity.wait_exponential_jitter(initial=initial, max=max_wait, jitter=initial)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hinted = retry_after_s(exc)
        if hinted is not None:
            return min(hinted, self.max_wait)
        return self.backoff(retry_state)


def is_timeout(exc: BaseException) -> bool:
    """The provider did not answer within the call's time limit (httpx's, the SDKs' or the socket's)."""
    return any(isinstance(e, (httpx.TimeoutException, TimeoutError)) or "Timeout" in type(e).__name__ for e in _chain(exc))


def call_with_retries(fn: Callable[[], Reply], *, label: str, attempts: int, initial: float, max_wait: float,
                      secrets: Iterable[str] = (), waited: str = "") -> Reply:
    """Run `fn` with bounded retries on transient errors.

    Returns fn's Reply, or an invalid, transient Reply when the attempts run out or the
    provider rejects the request (400, 413, 422: the item is bad, not the run). Raises
    MovieMemError for what only the user can fix: missing or wrong credentials, unknown model.
    `waited` says what a timed-out attempt waited for and which setting sets that limit.
    """
    secrets = list(secrets)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: %s; retry %d/%d in %.1fs", label, describe(exc, secrets) if exc else "?",
                    state.attempt_number, attempts - 1, wait)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=wait_retry_after(initial, max_wait),
        retry=tenacity.retry_if_exception(is_transient),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return retrying(fn)
    except MovieMemError:
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure becomes a reported, invalid reply
        status = status_of(exc)
        if status in FATAL_STATUS:
            raise MovieMemError(f"{label}: {describe(exc, secrets)}") from None
        transient = is_transient(exc)
        what = f"failed after {attempts} attempt(s)" if transient else "request rejected"
        log.error("%s: %s: %s", label, what, describe(exc, secrets))
        limit = f"; {waited}" if waited and is_timeout(exc) else ""
        return Reply.failed(f"{what}: {describe(exc, secrets)}{limit}", transient=True)
