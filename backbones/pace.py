"""How fast a local backbone reads a prompt and writes a reply on this machine, so that a call's time
limit follows its work: a 5,000-token prompt on a busy 2-core machine takes minutes where a 200-token
one takes seconds, and one fixed limit either cuts the long one off on every try or waits minutes on
a short one that is stuck.

Speeds are measured on every call (llama.cpp's own counters) and kept per model and thread count in
a small JSON file in the backbones' scratch folder (safe to delete: the next calls measure again), so
a new process knows them before its first call.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ..foundation.files import atomic_write_text

SLACK = 2.0  # the limit allows twice the measured time: the machine may be busier than when it was measured
MIN_TOKENS = 32  # fewer tokens read measure a call's overhead, not a speed
# a reply is written a token a step, so a short one still times the steps: a JSON answer of ~14 tokens (the
# full-context policies' reply) gives the writing speed `bench --plan` needs (issue 61)
MIN_WRITTEN = 8
KEEP = 0.5  # weight of the past in the running speed: the latest call counts as much as all before it
SETTING = "backbone_timeout_s ($MOVIEMEM_BACKBONE_TIMEOUT_S)"


@dataclass
class Pace:
    """Tokens a second reading the prompt and writing the reply; None until measured."""

    read_tok_s: float | None = None
    write_tok_s: float | None = None

    def limit(self, floor: float, read: int, write: int) -> tuple[float, str]:
        """The time limit for reading `read` prompt tokens and writing up to `write`, and how it was
        reached: SLACK times the expected time at the measured speeds, never under `floor`; a part
        whose speed is not measured yet is given `floor` seconds of its own."""
        parts, how = 0.0, []
        for n, speed, what in ((read, self.read_tok_s, "prompt tokens read"), (write, self.write_tok_s, "reply tokens written")):
            if not n:
                continue
            if speed:
                parts += SLACK * n / speed
                how.append(f"{n:,} {what} at {speed:,.0f} tokens/s measured, x{SLACK:g}")
            else:
                parts += floor
                how.append(f"{n:,} {what} at a speed not measured yet: {floor:.0f} s")
        limit = max(floor, parts)
        return limit, "; ".join(how) + f"; at least {SETTING} = {floor:.0f} s"


class PaceBook:
    """Measured paces by key (model and threads), read from and written to one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            self._paces = {k: Pace(**v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        except (OSError, ValueError, TypeError):
            self._paces = {}  # none saved yet, or unreadable: measured again

    def get(self, key: str) -> Pace:
        with self._lock:
            return Pace(**asdict(self._paces.get(key, Pace())))

    def record(self, key: str, *, read: int, read_s: float, written: int, write_s: float) -> None:
        """Fold one call's counts into the running speeds (fewer than MIN_TOKENS read or MIN_WRITTEN written
        are left out) and save."""
        with self._lock:
            pace = self._paces.setdefault(key, Pace())
            changed = False
            counts = ((read, MIN_TOKENS, read_s, "read_tok_s"), (written, MIN_WRITTEN, write_s, "write_tok_s"))
            for n, least, s, name in counts:
                if n >= least and s > 0:
                    old = getattr(pace, name)
                    setattr(pace, name, n / s if old is None else KEEP * old + (1 - KEEP) * n / s)
                    changed = True
            if not changed:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(self.path, json.dumps({k: asdict(v) for k, v in self._paces.items()}, indent=1))
            except OSError:
                pass  # a read-only home: the speeds still serve this process
