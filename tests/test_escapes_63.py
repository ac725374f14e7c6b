"""Issue 63.6: what replaced two `type: ignore`s and one duplicated block behaves as named."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from moviemem.backbones.types import Audio
from moviemem.foundation.errors import MovieMemError
from moviemem.foundation.thumbs import jpeg_thumbnail


def test_an_audio_with_neither_bytes_nor_file_is_a_clear_error() -> None:
    with pytest.raises(MovieMemError, match="neither bytes nor a file"):
        Audio().fingerprint()
    assert Audio(path=Path("a.wav")).file() == Path("a.wav")


def test_thumbnail_is_a_jpeg_at_most_width_wide_or_none(tmp_path: Path) -> None:
    pic = tmp_path / "p.png"
    Image.new("RGB", (64, 32), "red").save(pic)
    jpeg, width = jpeg_thumbnail(pic, 16, quality=75) or (b"", 0)
    assert jpeg[:2] == b"\xff\xd8" and width == 16
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a picture")
    assert jpeg_thumbnail(bad, 16, quality=75) is None
