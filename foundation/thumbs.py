"""A small JPEG of a picture on disk, for pages that show stills (the notebook view, the HTML inspector)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path


def jpeg_thumbnail(path: str | Path, width: int, quality: int) -> tuple[bytes, int] | None:
    """The picture at `path` as an RGB JPEG at most `width` wide (and twice that high), with its width in
    pixels; None when it cannot be read or its header claims a picture so large that decoding it is a
    bomb (refused, not decoded)."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as opened:
                im = opened.convert("RGB")
                im.thumbnail((width, width * 2))
                buf = io.BytesIO()
                im.save(buf, "JPEG", quality=quality)
    except (OSError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        return None
    return buf.getvalue(), im.width
