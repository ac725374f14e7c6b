"""Text embeddings for memory rows and queries, loaded once per process."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import numpy as np

from ..config import Settings, get_settings, limit_torch_threads
from .offline import model_path, resolve_name


class TextEmbedder:
    """A sentence-transformers model; vectors are L2-normalised float32 (cosine = dot)."""

    def __init__(self, name: str, path: Path | str):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()

        limit_torch_threads()
        self.name = name
        self._model = SentenceTransformer(str(path), device="cpu")
        self.dim = int(self._model.get_embedding_dimension())
        self._lock = threading.Lock()

    def embed(self, texts: list[str], batch_size: int = 128) -> np.ndarray:
        """Vectors in input order; each distinct text is encoded once (subtitles repeat a lot)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        index: dict[str, int] = {}
        rows = [index.setdefault(t, len(index)) for t in texts]
        with self._lock:  # the torch model is not safe to call from several threads at once
            vecs = self._model.encode(list(index), batch_size=batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
        return vecs.astype(np.float32)[rows]


_lock = threading.Lock()


@functools.cache
def _load(name: str, models_dir: str) -> TextEmbedder:
    settings = get_settings(models_dir=Path(models_dir))
    path: Path | str = Path(name).expanduser()
    if not Path(path).exists():
        offline = resolve_name(name)
        path = model_path(offline.name, settings) if offline else name
    return TextEmbedder(name, path)


def get_embedder(name: str | None = None, settings: Settings | None = None) -> TextEmbedder:
    """The configured embedder (`minilm` by default), or a local sentence-transformers folder."""
    settings = settings or get_settings()
    with _lock:
        return _load(name or settings.embedder, str(settings.models_path))
