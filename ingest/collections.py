"""Importers for text-only research collections (every film becomes a film without video).

- MF² (`transcripts/N.srt`, `synopsis/N.synopsis`, optional `metadata.csv` with id,title,year):
  transcripts become utterances; synopses are kept in film metadata, never shown to a policy
  unless the user asks for a synopsis context.
- Movie101v2 (`narration/ID.txt` in h:m:s|h:m:s|text form, `meta/ID.json`): narrations become
  the caption track with `[Name]` tags as characters; title, year and cast go to film metadata.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..memory.schema import check_film_id


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


def _mf2_metadata(root: Path) -> dict[str, dict[str, str]]:
    meta_csv = _inside(root, root / "metadata.csv")
    if meta_csv is None:
        return {}
    with meta_csv.open(newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    key = next((k for k in ("id", "film_id", "movie_id") if rows and k in rows[0]), None)
    return {str(r[key]): r for r in rows} if key else {}


def mf2(root: Path) -> Iterator[CollectionItem]:
    transcripts = root / "transcripts"
    if not transcripts.is_dir():
        raise MovieMemError(f"{root} is not an MF² release: no transcripts/ folder")
    meta = _mf2_metadata(root)
    files = sorted((p for p in transcripts.glob("*.srt") if _inside(root, p)), key=lambda p: (len(p.stem), p.stem))
    if not files:
        raise MovieMemError(f"{transcripts} holds no .srt transcript")
    for srt in files:
        n = srt.stem
        row = meta.get(n, {})
        synopsis_file = _inside(root, root / "synopsis" / f"{n}.synopsis")
        extra: dict[str, Any] = {"collection": "mf2", "collection_id": n}
        if synopsis_file is not None:
            extra["synopsis"] = synopsis_file.read_text(encoding="utf-8", errors="replace").strip()
        yield CollectionItem(check_film_id(f"mf2-{n.lower()}"), srt, "utterances",
                             row.get("title") or f"MF² film {n}", _year(row.get("year")), extra)


def movie101(root: Path) -> Iterator[CollectionItem]:
    narration = root / "narration"
    if not narration.is_dir():
        raise MovieMemError(f"{root} is not a Movie101v2 release: no narration/ folder")
    files = sorted(p for p in narration.glob("*.txt") if _inside(root, p))
    if not files:
        raise MovieMemError(f"{narration} holds no narration .txt file")
    for txt in files:
        ident = txt.stem
        meta_file = _inside(root, root / "meta" / f"{ident}.json")
        info: dict[str, Any] = {}
        if meta_file is not None:
            try:
                info = json.loads(meta_file.read_text(encoding="utf-8"))
            except ValueError:
                raise MovieMemError(f"{meta_file}: invalid JSON") from None
        extra = {"collection": "movie101", "collection_id": ident,
                 **{k: info[k] for k in ("genre", "area", "director", "role", "intro", "subtitle") if k in info}}
        yield CollectionItem(check_film_id(f"movie101-{ident.lower()}"), txt, "captions",
                             str(info.get("title") or f"Movie101 {ident}"), _year(info.get("year")), extra)


COLLECTIONS = {"mf2": mf2, "movie101": movie101}


def items(kind: str, root: Path) -> list[CollectionItem]:
    if kind not in COLLECTIONS:
        raise MovieMemError(f"unknown collection {kind!r}; known: {', '.join(COLLECTIONS)}")
    if not Path(root).is_dir():
        raise MovieMemError(f"{root} is not a directory")
    return list(COLLECTIONS[kind](Path(root)))
