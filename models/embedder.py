"""Text embeddings for memory rows and queries, loaded once per process.

Two engines compute the same vectors: ONNX Runtime over the encoder's ONNX export (made once by
`moviemem models prepare`, checked against torch), spread over the cores in parallel batches of
similar length; or sentence-transformers on torch where no export exists. Bulk imports call
`preload()` (and `release()` once committed) so that a whole collection is embedded in a few large
sorted passes.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation.config import Settings, cpu_cores, get_settings, limit_torch_threads
from ..foundation.errors import MovieMemError
from .offline import export_onnx, model_path, onnx_file, resolve_name

log = logging.getLogger(__name__)

# rows per ONNX Runtime call: small batches of equal-length texts keep activations in cache
ORT_BATCH = 64


def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def mean_pooled(path: Path) -> tuple[int, int] | None:
    """(dim, max_seq_length) when the folder is a plain transformer + mean pooling + normalise
    sentence-transformers model (what the ONNX engine reproduces), else None."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        bert = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    plain = modules == ["Transformer", "Pooling", "Normalize"] and modes == {"pooling_mode_mean_tokens"}
    if not plain or bert.get("do_lower_case"):
        return None
    return int(pooling["word_embedding_dimension"]), int(bert["max_seq_length"])


class _OrtEncoder:
    """The exported encoder on ONNX Runtime: one thread per call, calls spread over the cores."""

    def __init__(self, onnx_path: Path, model_dir: Path, dim: int, max_seq_length: int, workers: int):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # parallel calls scale better than threads inside one small call
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_seq_length)  # as sentence-transformers truncates
        self.dim = dim
        self.workers = max(1, workers)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        width = max(len(x) for x in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, x in enumerate(ids):
            input_ids[row, : len(x)] = x
            mask[row, : len(x)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled: np.ndarray = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        unit: np.ndarray = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return unit

    def encode(self, texts: list[str]) -> np.ndarray:
        ids = [e.ids for e in self._tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # equal lengths: no padding work
        chunks = [order[i: i + ORT_BATCH] for i in range(0, len(order), ORT_BATCH)]
        out = np.empty((len(texts), self.dim), dtype=np.float32)

        def one(chunk: list[int]) -> None:
            out[chunk] = self._run([ids[i] for i in chunk])

        if self.workers == 1 or len(chunks) == 1:
            for chunk in chunks:
                one(chunk)
        else:
            list(self._threads().map(one, chunks))
        return out

    def _threads(self) -> ThreadPoolExecutor:
        """The worker threads of this process (a forked child has none of its parent's)."""
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed")
                self._pool_pid = os.getpid()
            return self._pool


class TextEmbedder:
    """A sentence-transformers model; vectors are L2-normalised float32 (cosine = dot)."""

    def __init__(self, name: str, path: Path | str, onnx_path: Path | None = None, workers: int | None = None):
        _offline_env()
        self.name = name
        self.path = Path(path)
        self._torch: Any = None
        self._lock = threading.Lock()
        self._cache: dict[str, np.ndarray] = {}  # preloaded vectors, see preload()
        self._refs: Counter[str] = Counter()
        self._cache_lock = threading.Lock()
        shape = mean_pooled(self.path) if onnx_path is not None else None
        if onnx_path is not None and shape is None:
            log.warning("%s: not a mean-pooled sentence-transformers model; embedding with torch", name)
        self._ort = _OrtEncoder(onnx_path, self.path, *shape, workers or cpu_cores()) if shape and onnx_path else None
        self.backend = "onnxruntime" if self._ort is not None else "torch"
        self.dim = self._ort.dim if self._ort is not None else int(self._model.get_embedding_dimension())

    @property
    def _model(self) -> Any:
        """The sentence-transformers model (loaded on first use; its tokenizer also counts tokens)."""
        with self._lock:
            if self._torch is None:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
                limit_torch_threads()
                self._torch = SentenceTransformer(str(self.path), device="cpu")
            return self._torch

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        if self._ort is not None:
            return self._ort.encode(texts)
        model = self._model
        with self._lock:  # the torch model is not safe to call from several threads at once
            vecs: np.ndarray = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False)
        return vecs.astype(np.float32)

    def embed(self, texts: list[str], batch_size: int = 128) -> np.ndarray:
        """Vectors in input order; each distinct text is encoded once (subtitles repeat a lot),
        and preloaded texts (see `preload`) are not encoded again."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        index: dict[str, int] = {}
        rows = [index.setdefault(t, len(index)) for t in texts]
        distinct = list(index)
        vecs = np.empty((len(distinct), self.dim), dtype=np.float32)
        todo = []
        for i, t in enumerate(distinct):
            hit = self._cache.get(t)
            if hit is None:
                todo.append(i)
            else:
                vecs[i] = hit
        if todo:
            vecs[todo] = self._encode([distinct[i] for i in todo], batch_size)
        return vecs[rows]

    def preload(self, texts: Iterable[str]) -> int:
        """Encode `texts` in one sorted parallel pass and keep their vectors in memory until the
        same texts are passed to `release` (counted: overlapping preloads keep shared texts), so
        later `embed` calls for them cost nothing. A bulk import embeds many films in one pass
        instead of one small pass per film. Returns how many texts it encoded."""
        distinct = list(dict.fromkeys(texts))
        with self._cache_lock:
            self._refs.update(distinct)  # pins the cached ones against a concurrent release
            new = [t for t in distinct if t not in self._cache]
        if new:
            vecs = self._encode(new, 128)
            with self._cache_lock:
                self._cache.update(zip(new, vecs))
        return len(new)

    def release(self, texts: Iterable[str]) -> None:
        with self._cache_lock:
            for t in dict.fromkeys(texts):
                self._refs[t] -= 1
                if self._refs[t] <= 0:
                    del self._refs[t]
                    self._cache.pop(t, None)

    @contextmanager
    def preloaded(self, texts: Iterable[str]) -> Iterator[int]:
        """`preload` for the duration of the block; yields how many texts were encoded."""
        texts = list(texts)
        n = self.preload(texts)
        try:
            yield n
        finally:
            self.release(texts)


_lock = threading.Lock()


@functools.cache
def _load(name: str, models_dir: str) -> TextEmbedder:
    settings = get_settings(models_dir=Path(models_dir))
    path: Path | str = Path(name).expanduser()
    onnx_path = None
    if not Path(path).exists():
        offline = resolve_name(name)
        path = model_path(offline.name, settings) if offline else name
        if offline is not None and offline.onnx:
            onnx_path = onnx_file(offline.name, settings)
            if onnx_path is None:
                log.warning("%s: no ONNX export yet; exporting it once (about 10 s)", offline.name)
                try:
                    onnx_path = export_onnx(offline.name, settings)
                except MovieMemError as exc:
                    log.warning("%s: embedding with torch (3-4x slower than ONNX Runtime): %s", offline.name, exc)
    return TextEmbedder(name, path, onnx_path)


def get_embedder(name: str | None = None, settings: Settings | None = None) -> TextEmbedder:
    """The configured embedder (`minilm` by default), or a local sentence-transformers folder."""
    settings = settings or get_settings()
    with _lock:
        return _load(name or settings.embedder, str(settings.models_path))
