"""Films of the MF² release imported into a library for a benchmark script (beside the scripts).

The chosen films are copied into a release-shaped folder of their own and imported as a collection;
copies, because an import reads no link that leads out of its release folder (issue 54)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path


def import_mf2_films(lib, mf2: Path, film_ids: Iterable[str], synopses: bool = False) -> float | None:
    """Import the films (`mf2-N`) the library lacks; the seconds it took, or None when none was missing."""
    have = {f.film_id for f in lib.films()}
    todo = [f for f in dict.fromkeys(film_ids) if f not in have]
    if not todo:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("transcripts", "synopsis"):
            (Path(tmp) / sub).mkdir()
        for fid in todo:
            n = fid.split("-", 1)[1]
            shutil.copyfile(mf2 / "transcripts" / f"{n}.srt", Path(tmp) / "transcripts" / f"{n}.srt")
            syn = mf2 / "synopsis" / f"{n}.synopsis"
            if synopses and syn.exists():
                shutil.copyfile(syn, Path(tmp) / "synopsis" / syn.name)
        started = time.perf_counter()
        lib.import_collection("mf2", tmp)
        return time.perf_counter() - started
