"""Timed text tracks: SRT, WebVTT, Movie101 narration lines and JSON cue lists.

Parsing of SRT/VTT goes through pysubs2; this module adds what a researcher needs on top:
format checks with a clear error, line numbers for malformed cues and undecodable bytes,
`[Name]` character tags kept as metadata, and cues sorted (with a warning) when out of order.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pysubs2

from ..foundation.errors import MovieMemError
from ..foundation.limits import MAX_CUE_CHARS, MAX_CUES, MAX_TRACK_BYTES, parse_json, read_capped
from ..foundation.timefmt import check_time

FORMATS = ("srt", "vtt", "movie101", "json")
TRACK = "subtitle or text track"
_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_TAG = re.compile(r"\[([^\[\]]{1,60})\]")
_M101 = re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*\|\s*(\d+):(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*\|(.*)$")
_TIMING = re.compile(r"-->")


@dataclass
class Cue:
    start: float
    end: float
    text: str
    characters: list[str] = field(default_factory=list)
    line: int = 0


@dataclass
class TextTrack:
    path: Path
    format: str
    cues: list[Cue]
    warnings: list[str] = field(default_factory=list)

    @property
    def last_end(self) -> float:
        return max((c.end for c in self.cues), default=0.0)


def text_encoding(name: str) -> str:
    """`name` if it is a text encoding Python knows ('cp1252', 'utf-16'); rot13 or base64 are codecs
    but not text encodings, and bytes.decode would fail on them only later, as a traceback."""
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError, TypeError):
        raise MovieMemError(f"unknown text encoding {name!r} (e.g. utf-8, cp1252, latin-1, utf-16)") from None
    if not getattr(info, "_is_text_encoding", True):
        raise MovieMemError(f"{name!r} is not a text encoding (it transforms bytes or text); give the file's "
                            "character encoding, e.g. cp1252 or latin-1")
    return name


def read_text(path: Path, encoding: str | None, *, cap: int | None = None, what: str = TRACK,
              empty_ok: bool = False) -> str:
    """A text file from outside: at most `cap` bytes (MAX_TRACK_BYTES unless given; read after a stat),
    not empty (unless `empty_ok`), no binary data, decoded with `encoding` or the byte-order mark's (UTF-8 without one);
    each failure is one line."""
    if not path.is_file():
        raise MovieMemError(f"cannot read {path}: no such file")
    data = read_capped(path, MAX_TRACK_BYTES if cap is None else cap, what)
    if not data.strip():
        if empty_ok:
            return ""
        raise MovieMemError(f"cannot read {path}: the file is empty")
    enc = text_encoding(encoding) if encoding else _bom_encoding(data)
    wide = codecs.lookup(enc).name.startswith(("utf-16", "utf-32")) or data.startswith(_BOMS)
    if b"\x00" in data[:65536] and not wide:  # no text in UTF-8 or an 8-bit encoding holds a NUL byte
        hint = ("give an SRT, WebVTT, Movie101 narration or JSON cue file" if what == TRACK
                else "is this the right file?")
        raise MovieMemError(f"{path} is not a {what}: it holds binary data (a video, audio or image file?); {hint}")
    try:
        return data.decode(enc)
    except UnicodeDecodeError as exc:
        start = min(exc.start, len(data) - 1)
        line = data[:start].count(b"\n") + 1
        raise MovieMemError(
            f"{path}: line {line} is not valid {enc} (byte 0x{data[start]:02x}); pass the file's encoding, e.g. --encoding cp1252"
        ) from None
    except UnicodeError as exc:  # idna and the like refuse text by other rules than bytes
        raise MovieMemError(f"{path} is not valid {enc} ({exc}); pass the file's encoding, e.g. --encoding cp1252") from None


def _bom_encoding(data: bytes) -> str:
    """The encoding a byte-order mark announces (UTF-32 first: its LE mark begins with UTF-16's), else
    UTF-8 with or without one. A UTF-16 file from Windows must not be refused as cp1252."""
    for bom, enc in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                     (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return enc  # the codec reads the mark, drops it and keeps the byte order it names
    return "utf-8-sig"


def detect_format(path: Path, text: str) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("srt", "vtt", "json"):
        return suffix
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.startswith("WEBVTT"):
        return "vtt"
    if _M101.match(first):
        return "movie101"
    if first.lstrip().startswith("["):
        return "json"
    if any(_TIMING.search(ln) for ln in text.splitlines()[:20]):
        return "srt"
    raise MovieMemError(f"{path} is not a subtitle or narration file (SRT, WebVTT, Movie101 h:m:s|h:m:s|text or a JSON list of cues)")


def split_characters(text: str) -> tuple[str, list[str]]:
    """'[Cheng Yong] drove...' -> ('Cheng Yong drove...', ['Cheng Yong'])."""
    names = list(dict.fromkeys(m.strip() for m in _TAG.findall(text)))
    return _TAG.sub(lambda m: m.group(1), text).strip(), names


def _drop_malformed_blocks(text: str) -> tuple[str, list[int], list[int]]:
    """Remove cue blocks whose timing line does not parse (pysubs2 would glue them onto the
    previous cue); return the cleaned text, the bad blocks' line numbers and the good timing lines."""
    lines = text.splitlines()
    keep: list[str] = []
    bad: list[int] = []
    good: list[int] = []
    block: list[tuple[int, str]] = []

    def flush() -> None:
        timing = [(n, ln) for n, ln in block if "->" in ln]
        if timing and not _parses(timing[0][1]):
            bad.append(timing[0][0])
        else:
            good.extend(n for n, _ in timing[:1])
            keep.extend(ln for _, ln in block)
        keep.append("")
        block.clear()

    for n, ln in enumerate(lines, 1):
        if ln.strip():
            block.append((n, ln))
        elif block:
            flush()
    if block:
        flush()
    return "\n".join(keep), bad, good


def _subtitles(path: Path, text: str, fmt: str) -> tuple[list[Cue], list[str]]:
    warnings: list[str] = []
    cleaned, bad, good = _drop_malformed_blocks(text)
    if bad:
        warnings.append(f"{path}: skipped {len(bad)} malformed cue(s) at line(s) {', '.join(map(str, bad[:10]))}")
    try:
        subs = pysubs2.SSAFile.from_string(cleaned, format_=fmt)
    except (pysubs2.exceptions.Pysubs2Error, ValueError) as exc:
        raise MovieMemError(f"{path} is not valid {fmt.upper()}: {exc}") from None
    lines_iter = iter(good)
    cues, backwards = [], []
    for ev in subs:
        body = ev.plaintext.replace("\n", " ").strip()
        line = next(lines_iter, 0)
        if not body or ev.is_comment:
            continue
        if ev.end < ev.start:
            backwards.append(line)
            continue
        body, names = split_characters(body)
        cues.append(Cue(ev.start / 1000.0, ev.end / 1000.0, body, names, line))
    if backwards:
        warnings.append(f"{path}: skipped {len(backwards)} cue(s) that end before they start, at line(s) "
                        f"{', '.join(map(str, backwards[:10]))}")
    return cues, warnings


_TS = re.compile(r"^\s*(\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}\s*-->\s*(\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}")


def _parses(line: str) -> bool:
    return bool(_TS.match(line))


def _movie101(path: Path, text: str) -> tuple[list[Cue], list[str]]:
    cues, bad = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _M101.match(line)
        if not m:
            bad.append(n)
            continue
        h1, m1, s1, h2, m2, s2, body = m.groups()
        try:
            start = int(h1) * 3600 + int(m1) * 60 + float(s1)
            end = int(h2) * 3600 + int(m2) * 60 + float(s2)
        except (ValueError, OverflowError):  # an hour of more digits than int() reads
            bad.append(n)
            continue
        body, names = split_characters(body.strip())
        if end < start:
            bad.append(n)
            continue
        cues.append(Cue(start, end, body, names, n))
    warnings = [f"{path}: skipped {len(bad)} malformed line(s): {', '.join(map(str, bad[:10]))}"] if bad else []
    return cues, warnings


def _json_cue(item: object) -> Cue | None:
    """One item of a JSON cue list, or None when it is not a {start, end, text[, characters]} object
    whose times are numbers, end not before start, and whose characters are a list of names."""
    if not isinstance(item, dict):
        return None
    try:
        start, end, body = float(item["start"]), float(item["end"]), item["text"]
    except (KeyError, TypeError, ValueError, OverflowError):  # 10**400 does not fit a float
        return None
    named = item.get("characters", [])
    if (not isinstance(body, (str, int, float)) or end < start or not isinstance(named, list)
            or not all(isinstance(c, str) for c in named)):
        return None
    text, names = split_characters(str(body))
    return Cue(start, end, text, list(named) or names)


def _json(path: Path, text: str) -> tuple[list[Cue], list[str]]:
    data = parse_json(text, str(path))
    if not isinstance(data, list):
        raise MovieMemError(f"{path}: expected a JSON list of {{start, end, text}} objects")
    _check_cue_count(path, len(data))  # counted as parsed: a key spelled "\u0073tart" is a start too
    cues, bad = [], []
    for i, item in enumerate(data):
        cue = _json_cue(item)
        if cue is None:
            bad.append(i)
        else:
            cue.line = i
            cues.append(cue)
    warnings = [f"{path}: skipped {len(bad)} malformed item(s) at index {', '.join(map(str, bad[:10]))}"] if bad else []
    return cues, warnings


# (file, size, mtime, format, encoding) -> parsed track, while `remembered_tracks()` is active
_memo: dict[tuple[str, int, int, str | None, str | None], TextTrack] | None = None


@contextmanager
def remembered_tracks() -> Iterator[None]:
    """Inside the block each unchanged file is parsed once: a bulk import reads every track to
    embed a batch of films together, and again in each film's own ingest."""
    global _memo
    outer, _memo = _memo, {} if _memo is None else _memo
    try:
        yield
    finally:
        _memo = outer


def load_track(path: Path | str, fmt: str | None = None, encoding: str | None = None) -> TextTrack:
    """Parse a text track; refuse a file that holds no usable cue."""
    path = Path(path)
    memo = _memo
    if memo is None or not path.is_file():
        return _load_track(path, fmt, encoding)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, fmt, encoding)
    if key not in memo:
        memo[key] = _load_track(path, fmt, encoding)
    track = memo[key]
    return replace(track, path=path, cues=list(track.cues), warnings=list(track.warnings))


def _cue_count(text: str, fmt: str) -> int:
    """How many cues the text holds, at most (a cue's text may hold a marker), counted before parsing."""
    if fmt in ("srt", "vtt"):
        return text.count("-->")
    if fmt == "json":
        return text.count('"start"')
    return sum(1 for line in text.splitlines() if line.strip())


def _check_cue_count(path: Path, n: int) -> None:
    if n > MAX_CUES:
        raise MovieMemError(f"{path} holds {n:,} cues; a text track holds at most {MAX_CUES:,} (the longest films have ~2,000)")


def _load_track(path: Path, fmt: str | None, encoding: str | None) -> TextTrack:
    text = read_text(path, encoding)
    fmt = fmt or detect_format(path, text)
    if fmt not in FORMATS:
        raise MovieMemError(f"unknown text format {fmt!r}; use one of {', '.join(FORMATS)}")
    _check_cue_count(path, _cue_count(text, fmt))
    if fmt in ("srt", "vtt"):
        if fmt == "vtt" and not text.lstrip().startswith("WEBVTT"):
            raise MovieMemError(f"{path} is not WebVTT: it does not start with 'WEBVTT'")
        cues, warnings = _subtitles(path, text, fmt)
    elif fmt == "movie101":
        cues, warnings = _movie101(path, text)
    else:
        cues, warnings = _json(path, text)
    if not cues:
        raise MovieMemError(f"{path} holds no valid cue (format {fmt})")
    _check_cue_count(path, len(cues))  # the count that matters: what parsing made, however it was spelled
    where = "item" if fmt == "json" else "line"
    for c in cues:
        check_time(c.start, f"{path}: cue at {where} {c.line}: start")
        check_time(c.end, f"{path}: cue at {where} {c.line}: end")
        if len(c.text) > MAX_CUE_CHARS:
            raise MovieMemError(f"{path}: cue at {where} {c.line} holds {len(c.text):,} characters; a cue holds at most "
                                f"{MAX_CUE_CHARS:,} (is this a text track?)")
    if any(b.start < a.start for a, b in zip(cues, cues[1:])):
        warnings.append(f"{path}: cues were out of order and have been sorted by start time")
        cues.sort(key=lambda c: (c.start, c.end))
    return TextTrack(path, fmt, cues, warnings)


def clip_to(track: TextTrack, duration_s: float) -> TextTrack:
    """Clip cues that run past the film's end (warn, do not fail)."""
    kept, clipped, dropped = [], 0, 0
    for c in track.cues:
        if c.start >= duration_s:
            dropped += 1
            continue
        if c.end > duration_s:
            clipped += 1
            c = Cue(c.start, duration_s, c.text, c.characters, c.line)
        kept.append(c)
    warnings = list(track.warnings)
    if clipped or dropped:
        warnings.append(f"{track.path}: {clipped} cue(s) clipped and {dropped} dropped at the film's end ({duration_s:.1f} s)")
    if not kept:
        raise MovieMemError(f"{track.path}: every cue starts after the film's end ({duration_s:.1f} s)")
    return TextTrack(track.path, track.format, kept, warnings)
