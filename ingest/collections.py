"""Importers for text-only research collections (every film becomes a film without video).

- MF² (`transcripts/N.srt`, `synopsis/N.synopsis`, optional `metadata.csv` with id,title,year):
  transcripts become utterances; synopses are kept in film metadata, never shown to a policy
  unless the user asks for a synopsis context. With `release`, a copy of the MF² release
  (deep-spin/MF2), each film takes its title and year from the release's `MOVIES_DICT`
  (templates/prompt_utils.py, read as data as the release's protocol reads it), so a prompt that
  names the film names it as the release does.
- Movie101v2 (`narration/ID.txt` in h:m:s|h:m:s|text form, `meta/ID.json`): narrations become
  the caption track with `[Name]` tags as characters; title, year and cast go to film metadata.

Every file is read under its cap (foundation/limits.py) and in the release's encoding; what is
malformed is a one-line error naming the file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.limits import (
    MAX_CSV_FIELD_CHARS,
    MAX_META_JSON_BYTES,
    MAX_METADATA_BYTES,
    MAX_SYNOPSIS_BYTES,
    MAX_TITLE_CHARS,
    MAX_TRACK_BYTES,
    check_size,
    parse_json,
)
from ..foundation.pysource import PROMPT_UTILS, movies_dict
from ..memory.schema import check_film_id
from .texttracks import TRACK, read_text, text_encoding


@dataclass
class CollectionItem:
    film_id: str
    path: Path
    as_: str
    title: str
    year: int | None
    meta: dict[str, Any] = field(default_factory=dict)


def _inside(root: Path, path: Path) -> Path | None:
    """`path` if it is a file that resolves inside the release folder `root`, None when there is no such
    file; an error when a link leads out of the folder: a synopsis linked to a private file would end
    up in the film's metadata and in every bundle exported from it."""
    if not path.exists():
        return None
    if not path.resolve().is_relative_to(root.resolve()):
        raise MovieMemError(f"{path} leads outside {root} (a link out of the release folder); it is not read")
    return path if path.is_file() else None


def _year(value: Any) -> int | None:
    try:
        y = int(str(value)[:4])
    except (TypeError, ValueError):
        return None
    return y if 1850 <= y <= 2100 else None


def _title(value: Any, where: str) -> str:
    """A film's title from a release's file: a string of at most MAX_TITLE_CHARS characters."""
    if not isinstance(value, str):
        raise MovieMemError(f"{where}: the title is not text ({type(value).__name__})")
    title = " ".join(value.split())
    if len(title) > MAX_TITLE_CHARS:
        raise MovieMemError(f"{where}: a title of {len(title):,} characters; a title holds at most {MAX_TITLE_CHARS}")
    return title


def _mf2_metadata(root: Path, encoding: str | None) -> dict[str, dict[str, str]]:
    meta_csv = _inside(root, root / "metadata.csv")
    if meta_csv is None:
        return {}
    text = read_text(meta_csv, encoding, cap=MAX_METADATA_BYTES, what="metadata.csv", empty_ok=True)
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:  # a field over csv.field_size_limit() (MAX_CSV_FIELD_CHARS), a NUL
        raise MovieMemError(f"{meta_csv} is not a readable CSV: {exc}") from None
    key = next((k for k in ("id", "film_id", "movie_id") if rows and k in rows[0]), None)
    out: dict[str, dict[str, str]] = {}
    for n, row in enumerate(rows if key else [], 2):
        long = next((v for v in row.values() if isinstance(v, str) and len(v) > MAX_CSV_FIELD_CHARS), None)
        if long is not None:  # the limit is the csv module's and global: another caller may have raised it
            raise MovieMemError(f"{meta_csv}: line {n} holds a field of {len(long):,} characters "
                                f"(at most {MAX_CSV_FIELD_CHARS:,})")
        if row.get("title"):
            row["title"] = _title(row["title"], f"{meta_csv}: line {n}")
        out[str(row[key])] = row
    return out


def _release_films(release: Path) -> dict[str, tuple[str, int | None]]:
    """Film number (as the transcripts name it) -> (title, year), from the release's MOVIES_DICT."""
    if not release.is_dir():
        raise MovieMemError(f"--release {release} is not a folder (a copy of the MF² release, with {PROMPT_UTILS})")
    where = str(release / PROMPT_UTILS)
    return {str(n): (_title(film["title"], f"{where}: {n}"), _year(film["year"]))
            for n, film in movies_dict(release.resolve()).items()}


def mf2(root: Path, encoding: str | None = None, release: Path | None = None,
        films: Sequence[str] | None = None) -> Iterator[CollectionItem]:
    transcripts = root / "transcripts"
    if not transcripts.is_dir():
        raise MovieMemError(f"{root} is not an MF² release: no transcripts/ folder")
    meta = _mf2_metadata(root, encoding)
    named = _release_films(release) if release is not None else {}
    files = sorted((p for p in transcripts.glob("*.srt") if _inside(root, p)), key=lambda p: (len(p.stem), p.stem))
    if not files:
        raise MovieMemError(f"{transcripts} holds no .srt transcript")
    picked = _picked(files, films, "mf2", root)
    for srt in picked:  # every transcript's size before any film is imported
        check_size(srt, MAX_TRACK_BYTES, TRACK)
    for srt in picked:
        n = srt.stem
        row = meta.get(n, {})
        if release is not None and n not in named:
            raise MovieMemError(f"film {n} of {root} is not in the MOVIES_DICT of {release / PROMPT_UTILS}; leave it "
                                "out with --films, or import without --release")
        title, year = named.get(n) or (row.get("title") or f"MF² film {n}", _year(row.get("year")))
        extra: dict[str, Any] = {"collection": "mf2", "collection_id": n}
        synopsis_file = _inside(root, root / "synopsis" / f"{n}.synopsis")
        if synopsis_file is not None:
            extra["synopsis"] = read_text(synopsis_file, encoding, cap=MAX_SYNOPSIS_BYTES, what="synopsis",
                                           empty_ok=True).strip()
        yield CollectionItem(check_film_id(f"mf2-{n.lower()}"), srt, "utterances", title, year, extra)


def _movie101_meta(meta_file: Path, encoding: str | None) -> dict[str, Any]:
    info = parse_json(read_text(meta_file, encoding, cap=MAX_META_JSON_BYTES, what="Movie101 meta file"), str(meta_file))
    if not isinstance(info, dict):
        raise MovieMemError(f"{meta_file}: expected a JSON object of the film's title, year and cast, "
                            f"not a {type(info).__name__}")
    if info.get("title") is not None:
        info["title"] = _title(info["title"], str(meta_file))
    return info


def movie101(root: Path, encoding: str | None = None, release: Path | None = None,
             films: Sequence[str] | None = None) -> Iterator[CollectionItem]:
    if release is not None:
        raise MovieMemError("--release names the MF² release a film list is read from; a Movie101v2 release's "
                            "titles are in its meta/ files")
    narration = root / "narration"
    if not narration.is_dir():
        raise MovieMemError(f"{root} is not a Movie101v2 release: no narration/ folder")
    files = sorted(p for p in narration.glob("*.txt") if _inside(root, p))
    if not files:
        raise MovieMemError(f"{narration} holds no narration .txt file")
    picked = _picked(files, films, "movie101", root)
    for txt in picked:
        check_size(txt, MAX_TRACK_BYTES, TRACK)
    for txt in picked:
        ident = txt.stem
        meta_file = _inside(root, root / "meta" / f"{ident}.json")
        info = _movie101_meta(meta_file, encoding) if meta_file is not None else {}
        extra = {"collection": "movie101", "collection_id": ident,
                 **{k: info[k] for k in ("genre", "area", "director", "role", "intro", "subtitle") if k in info}}
        yield CollectionItem(check_film_id(f"movie101-{ident.lower()}"), txt, "captions",
                             info.get("title") or f"Movie101 {ident}", _year(info.get("year")), extra)


COLLECTIONS = {"mf2": mf2, "movie101": movie101}


def parse_films(spec: str) -> list[str]:
    """`--films 6,51` -> ['6', '51']: the release's own film numbers (or ids such as mf2-6), comma-separated."""
    wanted = [part.strip() for part in spec.split(",")]
    if not spec.strip() or any(not w for w in wanted):
        raise MovieMemError(f"--films takes the release's film numbers separated by commas (e.g. 6,51), not {spec!r}")
    return list(dict.fromkeys(wanted))


def _picked(files: list[Path], wanted: Sequence[str] | None, kind: str, root: Path) -> list[Path]:
    """The films' files `wanted` names by the release's number (a file's stem) or film id
    (`mf2-6`), in the release's order; all of them when `wanted` is None."""
    if wanted is None:
        return files
    names = {name: p for p in files for name in (p.stem, f"{kind}-{p.stem.lower()}")}
    unknown = [w for w in wanted if w not in names]
    if unknown:
        shown = ", ".join(p.stem for p in files[:12]) + (", ..." if len(files) > 12 else "")
        raise MovieMemError(f"--films: {', '.join(unknown[:5])} {'is' if len(unknown) == 1 else 'are'} not a film of "
                            f"{root} (its films: {shown})")
    chosen = {names[w] for w in wanted}
    return [p for p in files if p in chosen]


def items(kind: str, root: Path, *, release: Path | None = None, films: Sequence[str] | None = None,
          encoding: str | None = None) -> list[CollectionItem]:
    """The films of a release folder, all of them or those `films` names; each film's text is read later."""
    if kind not in COLLECTIONS:
        raise MovieMemError(f"unknown collection {kind!r}; known: {', '.join(COLLECTIONS)}")
    if encoding is not None:
        text_encoding(encoding)
    if not Path(root).is_dir():
        raise MovieMemError(f"{root} is not a directory")
    return list(COLLECTIONS[kind](Path(root), encoding, Path(release) if release is not None else None, films))
