"""bench/mf2_films.py: the benchmark scripts' import of chosen MF² films. It must copy, since an import
refuses links out of its release folder (issue 54), and import only what the library lacks."""

from __future__ import annotations

from pathlib import Path

from scripts_loader import load_script
from text_film import srt_text

from moviemem import Library


def test_chosen_films_are_imported_once_from_copies(tmp_path: Path) -> None:
    mf2 = tmp_path / "mf2"
    (mf2 / "transcripts").mkdir(parents=True)
    (mf2 / "synopsis").mkdir()
    for n in (3, 7):
        (mf2 / "transcripts" / f"{n}.srt").write_text(srt_text([(1.0, 2.5, f"Film {n} begins."), (4.0, 6.0, "Go on.")]))
    (mf2 / "synopsis" / "3.synopsis").write_text("Someone begins a film.")
    lib = Library(tmp_path / "lib")
    films = load_script("bench/mf2_films.py").import_mf2_films
    assert films(lib, mf2, ["mf2-3"], synopses=True) is not None
    assert [f.film_id for f in lib.films()] == ["mf2-3"]
    assert films(lib, mf2, ["mf2-3", "mf2-7"]) is not None
    assert sorted(f.film_id for f in lib.films()) == ["mf2-3", "mf2-7"]
    assert films(lib, mf2, ["mf2-7", "mf2-3"]) is None  # nothing missing: nothing imported
