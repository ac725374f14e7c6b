"""Shared fixtures: small generated media, a temporary library, and an in-process CLI runner."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


def make_video(path: Path, *, seconds: float = 6.0, size: str = "320x240", rate: int = 24, audio: bool = True,
               colours: tuple[str, ...] = ("red", "blue", "green")) -> Path:
    """A video of hard cuts between solid colours (one per len/seconds), with a tone track."""
    part = seconds / len(colours)
    inputs: list[str] = []
    for c in colours:
        inputs += ["-f", "lavfi", "-i", f"color=c={c}:size={size}:rate={rate}:duration={part}"]
    filt = "".join(f"[{i}:v]" for i in range(len(colours))) + f"concat=n={len(colours)}:v=1:a=0[v]"
    args = [*inputs]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=300:duration={seconds}"]
    args += ["-filter_complex", filt, "-map", "[v]"]
    if audio:
        args += ["-map", f"{len(colours)}:a", "-c:a", "aac"]
    args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)]
    ffmpeg(*args)
    return path


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests read no config file of the developer's own (~/.config/moviemem/moviemem.toml)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-user-config"))
    monkeypatch.delenv("MOVIEMEM_CONFIG", raising=False)


@pytest.fixture(autouse=True)
def _forget_secrets():
    """A test's registered credentials (foundation.secrets) are not scrubbed from the next test's output."""
    from moviemem.foundation import secrets

    state = secrets.registered()
    yield
    secrets.restore(state)


@pytest.fixture
def video(tmp_path: Path) -> Path:
    return make_video(tmp_path / "clip.mp4")


@pytest.fixture
def lib_dir(tmp_path: Path) -> Path:
    return tmp_path / "lib"


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], lib_dir: Path):
    """Run `moviemem ARGS --library <tmp>` in-process and capture exit code and streams."""
    from moviemem.cli import main

    def run(*args: str, library: bool = True) -> CliResult:
        argv = [*args, "--library", str(lib_dir)] if library else list(args)
        capsys.readouterr()
        code = 0
        try:
            main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run


@dataclass
class SynthFilm:
    """A rendered synthetic film ingested once per test session (read-only for tests).

    Stages: probe, frames, shots, segments, transcript (the script's dialogue imported as
    subtitles, so no ASR time), clip (seeded random weights), ocr and captions (imported
    from the synth's captions.srt). Tests that write must copy it (`copy_to`).
    """

    lib: object  # moviemem.Library
    film: object  # moviemem.Film
    dir: Path  # film.mp4, truth.json, captions.srt, subtitles.srt, mcq.jsonl, claims.jsonl, relations.jsonl

    @property
    def truth(self) -> dict:
        return json.loads((self.dir / "truth.json").read_text())

    def copy_to(self, lib_dir: Path):
        """A writable copy of the film's memory in a new library (via an export bundle; an imported
        film has no source video, so policies that send the whole video use `film`)."""
        from moviemem import Library

        bundle = lib_dir.parent / f"{lib_dir.name}-synth.tar"
        self.lib.export(self.film.film_id, bundle)
        lib = Library(lib_dir, self.lib.settings)
        return lib, lib.import_bundle(bundle)


def truth_srt(truth: dict, path: Path) -> Path:
    import pysubs2

    subs = pysubs2.SSAFile()
    for u in truth["utterances"]:
        subs.append(pysubs2.SSAEvent(start=int(u["start"] * 1000), end=int(u["end"] * 1000), text=u["text"]))
    subs.save(str(path), format_="srt")
    return path


@pytest.fixture(scope="session")
def synth_film(tmp_path_factory: pytest.TempPathFactory) -> SynthFilm:
    from moviemem import Library
    from moviemem.foundation.config import get_settings
    from moviemem.synth import render

    root = tmp_path_factory.mktemp("synth")
    d = render(root / "film", minutes=3.0, seed=7)["film.mp4"].parent
    srt = truth_srt(json.loads((d / "truth.json").read_text()), d / "subtitles.srt")
    settings = get_settings(library=root / "lib", clip_pretrained="random")
    lib = Library(root / "lib", settings)
    film = lib.ingest(d / "film.mp4", film_id="synth", title="Synthetic", year=2026, subtitles=srt,
                      captions=d / "captions.srt")
    return SynthFilm(lib, film, d)
