"""The size of every file moviemem reads from outside, stated once, and the readers that hold to it.

An import reads files someone else made: a release folder, a caption file, a bundle. Each is
capped here, checked before it is read (its size from `stat`, then a read of at most the cap, so a
file that grows in between is refused too), and turned into a one-line error when it is over. Each
cap is far above anything real (the largest real file of its kind is named beside it) and far
below what would take a machine's memory: a 300 MB synopsis once took 8.3 GB.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from .errors import MovieMemError

MiB = 2**20

# text tracks (SRT, WebVTT, Movie101 narration, JSON cues): a feature film's subtitles are ~100 KB
# (the largest MF² transcript 151 KB, the largest Movie101 narration 100 KB)
MAX_TRACK_BYTES = 32 * MiB
MAX_CUE_CHARS = 10_000  # an audio-description paragraph runs to a few hundred words
# ten times the most cues of any MF² film's subtitles (2,026), counted before parsing (~1 KB a cue): an
# ingest of 20,000 cues peaked at 1.2 GB, about 16 KB a cue over what a film of 2,000 takes (0.9 GB)
MAX_CUES = 20_000

# a collection release's other files
MAX_SYNOPSIS_BYTES = 1 * MiB  # MF² synopsis/N.synopsis: the largest is 6.4 KB
MAX_METADATA_BYTES = 4 * MiB  # an MF² metadata.csv (id,title,year): a line a film
MAX_CSV_FIELD_CHARS = 131_072  # one field of a metadata.csv (the csv module's own default limit)
MAX_TITLE_CHARS = 500  # a film's title, shown in prompts and tables
MAX_META_JSON_BYTES = 1 * MiB  # Movie101v2 meta/ID.json: the largest is 4.5 KB
MAX_SOURCE_BYTES = 1 * MiB  # a release's Python file read as data (MF² templates/prompt_utils.py: 13 KB)

# a benchmark file (JSONL, MF² claim pairs CSV, MovieCORE JSON, each Movie101 narration file): the
# largest public releases are a few MB
MAX_BENCHMARK_BYTES = 256 * MiB

# a film bundle (moviemem export): its manifest, one table, one still, all of it unpacked
MAX_MANIFEST_BYTES = 32 * MiB  # table descriptions and the media list (200,000 stills' names: ~12 MB)
MAX_MEMBER_BYTES = 512 * MiB  # one table
MAX_STILL_BYTES = 16 * MiB  # one still: a 512-pixel JPEG is tens of KB
MAX_BUNDLE_BYTES = 4 * 2**30  # everything a bundle unpacks to
MAX_MEMBERS = 200_000  # a 48 h film's stills at the default strip rate, twice over


def _size(n: int) -> str:
    return f"{n / MiB:,.0f} MiB" if n >= MiB else f"{n / 1024:,.0f} KiB" if n >= 1024 else f"{n:,} bytes"


def check_size(path: Path, cap: int, what: str) -> int:
    """The size of the regular file `path`, refused in one line when over `cap` (`what` names the
    kind of file in the message: 'synopsis', 'metadata.csv')."""
    try:
        st = path.stat()
    except OSError as exc:
        raise MovieMemError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read, a device never end
        raise MovieMemError(f"cannot read {path}: not a regular file")
    if st.st_size > cap:
        size, most = _size(st.st_size), _size(cap)
        if size == most:  # rounded alike: say the bytes
            size, most = f"{st.st_size:,} bytes", f"{cap:,} bytes"
        raise MovieMemError(f"cannot read {path}: {size} is more than any {what} holds (at most {most})")
    return st.st_size


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The bytes of the regular file `path` after `check_size`, read up to the cap: a file that grew
    after the stat is refused too."""
    check_size(path, cap, what)
    try:
        with path.open("rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise MovieMemError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise MovieMemError(f"cannot read {path}: it grew past {_size(cap)} while read (at most that for a {what})")
    return data


def parse_json(text: str | bytes, where: str) -> Any:
    """JSON from outside, or a one-line error naming `where`: invalid text, a number too long to
    read, or nesting too deep for the parser (a RecursionError) all fail alike."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MovieMemError(f"{where}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # an integer of more digits than int() reads, undecodable bytes
        raise MovieMemError(f"{where}: invalid JSON ({exc})") from None
    except RecursionError:
        raise MovieMemError(f"{where}: invalid JSON (nested too deep to read)") from None
