"""The memory protocol: atomic stage commits, resume, params changes, views, export/import."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from conftest import make_video

from moviemem import Library, MovieMemError
from moviemem.foundation.config import get_settings
from moviemem.ingest.stages import frames as stage_mod

SRT = "".join(
    f"{i}\n00:00:{2 * i - 2:02d},000 --> 00:00:{2 * i - 1:02d},500\nLine {i} about the lighthouse.\n\n" for i in range(1, 6)
)


@pytest.fixture
def film_files(tmp_path: Path) -> tuple[Path, Path]:
    video = make_video(tmp_path / "f.mp4", seconds=10)
    srt = tmp_path / "f.srt"
    srt.write_text(SRT)
    return video, srt


def _lib(tmp_path: Path, **settings) -> Library:
    return Library(tmp_path / "lib", get_settings(**settings))


def test_rerun_is_cached_and_changed_params_recompute(tmp_path: Path, film_files) -> None:
    video, srt = film_files
    lib = _lib(tmp_path)
    film = lib.ingest(video, film_id="f", subtitles=srt, stages=["frames", "transcript"])
    first = {s.stage: s for s in film.stages()}
    assert len(film.frames()) == 240 and len(film.utterances()) == 5
    again = lib.ingest(video, film_id="f", stages=["frames", "transcript"])
    assert {s.stage: s.run_id for s in again.stages()} == {k: v.run_id for k, v in first.items()}
    # subtitles stay the transcript source when not given again
    assert again.utterances()[0].source == "subtitles"
    # a changed frame setting recomputes frames and nothing else
    lib2 = _lib(tmp_path, strip_fps=1.0)
    third = lib2.ingest(video, film_id="f", stages=["frames", "transcript"])
    runs = {s.stage: s.run_id for s in third.stages()}
    assert runs["frames"] != first["frames"].run_id and runs["transcript"] == first["transcript"].run_id
    assert len(third.frames(strip=True)) == 10
    # superseded frames run: rows and images gone
    assert lib2.store.query("frames").num_rows == len(third.frames())
    assert len(list((tmp_path / "lib/media/f/frames").iterdir())) == 1


def test_crash_mid_stage_leaves_nothing_visible_and_rerun_matches_clean(tmp_path: Path, film_files, monkeypatch) -> None:
    video, srt = film_files
    clean = _lib(tmp_path / "clean").ingest(video, film_id="f", subtitles=srt, stages=["frames", "transcript"])

    lib = _lib(tmp_path)
    real_run = stage_mod.FramesStage.run

    def crash_after_writing(self, ctx):
        real_run(self, ctx)  # rows written under the run id ...
        raise KeyboardInterrupt("killed")  # ... but the run never commits

    monkeypatch.setattr(stage_mod.FramesStage, "run", crash_after_writing)
    with pytest.raises(KeyboardInterrupt):
        lib.ingest(video, film_id="f", subtitles=srt, stages=["frames", "transcript"])
    film = lib.film("f")
    assert film.frames() == []  # the crashed run is invisible
    assert lib.store.query("frames").num_rows == 240  # though its rows exist
    monkeypatch.setattr(stage_mod.FramesStage, "run", real_run)
    film = lib.ingest(video, film_id="f", subtitles=srt, stages=["frames", "transcript"])
    assert film.summary()["counts"] == clean.summary()["counts"]
    assert lib.store.query("frames").num_rows == 240  # the leftovers were swept
    assert [s.status for s in film.stages()] == ["done", "done", "done"]


def test_until_and_window_hide_rows(tmp_path: Path, film_files) -> None:
    video, srt = film_files
    film = _lib(tmp_path).ingest(video, film_id="f", subtitles=srt, stages=["frames", "transcript"])
    early = film.until(5.0)
    assert [u.text for u in early.utterances()] == ["Line 1 about the lighthouse.", "Line 2 about the lighthouse."]
    assert all(f.t <= 5.0 for f in early.frames())
    assert max(f.t for f in early.frames(strip=True)) == 4.0
    win = film.window(3.0, 6.0)
    assert [u.idx for u in win.utterances()] == [1, 2]  # 2-3.5 and 4-5.5 overlap [3, 6)
    assert all(3.0 <= f.t < 6.0 for f in win.frames())
    assert film.until(5.0).window(0, 100).cutoff == 5.0
    with pytest.raises(MovieMemError):
        film.window(5, 5)
    with pytest.raises(MovieMemError):
        film.frames(pool=99)


def test_export_import_roundtrip(tmp_path: Path, film_files) -> None:
    video, srt = film_files
    src = _lib(tmp_path / "a")
    film = src.ingest(video, film_id="f", title="Lighthouse", year=1950, subtitles=srt, stages=["frames", "transcript"])
    bundle = src.export("f", tmp_path / "f.tar")
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    assert "manifest.json" in names and "tables/utterances.parquet" in names
    assert not any(n.endswith((".pkl", ".pickle")) for n in names)
    dst = _lib(tmp_path / "b")
    copy = dst.import_bundle(bundle)
    assert copy.summary()["counts"] == film.summary()["counts"]
    assert (copy.info.title, copy.info.year) == ("Lighthouse", 1950)
    assert all(Path(f.image).is_file() for f in copy.frames())
    assert [u.text for u in copy.utterances()] == [u.text for u in film.utterances()]
    with pytest.raises(MovieMemError, match="already in the library"):
        dst.import_bundle(bundle)
    renamed = dst.import_bundle(bundle, film_id="g")
    assert all("/media/g/" in f.image for f in renamed.frames()) and len(renamed.frames()) == 240
    assert sorted(f.film_id for f in dst.films()) == ["f", "g"]


def test_export_import_cli(tmp_path: Path, film_files, cli, lib_dir: Path) -> None:
    video, srt = film_files
    assert cli("ingest", str(video), "--film-id", "f", "--subtitles", str(srt), "--stages", "transcript").code == 0
    assert cli("export", "f", str(tmp_path / "f.tar")).code == 0
    res = cli("import", str(tmp_path / "f.tar"), "--film-id", "copy", "--json")
    assert res.code == 0, res.err and res.json()["counts"]["utterances"] == 5
    films = cli("films", "--json").json()["films"]
    assert [f["film_id"] for f in films] == ["copy", "f"]
    junk = tmp_path / "junk.tar"
    junk.write_text("nope")
    res = cli("import", str(junk))
    assert res.code == 2 and res.err.count("\n") == 1
    assert cli("show", "nosuch").code == 2


def test_title_update_does_not_recompute(tmp_path: Path, film_files) -> None:
    video, _ = film_files
    lib = _lib(tmp_path)
    a = lib.ingest(video, film_id="f", stages=["frames"])
    b = lib.ingest(video, film_id="f", title="New Title", year=2001, stages=["frames"])
    assert (b.info.title, b.info.year) == ("New Title", 2001)
    assert [s.run_id for s in a.stages()] == [s.run_id for s in b.stages()]


def test_other_video_under_same_id_needs_replace(tmp_path: Path, film_files) -> None:
    video, _ = film_files
    other = make_video(tmp_path / "o.mp4", seconds=6, colours=("white", "black"))
    lib = _lib(tmp_path)
    lib.ingest(video, film_id="f", stages=["frames"])
    with pytest.raises(MovieMemError, match="another source"):
        lib.ingest(other, film_id="f", stages=["frames"])
    film = lib.ingest(other, film_id="f", stages=["frames"], replace=True)
    assert film.info.duration_s == pytest.approx(6.0, abs=0.1)
