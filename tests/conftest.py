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
