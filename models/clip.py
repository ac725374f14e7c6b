"""CLIP embeddings of frames and texts with open_clip, strictly offline.

No CLIP weights ship with moviemem and nothing here downloads: weights are a local
checkpoint file, or an open_clip pretrained tag whose file is already in the local cache
(Hugging Face hub cache or ~/.cache/clip). `clip_weights_available` tells the pipeline
whether to run the stage or record it as skipped. `pretrained="random"` (an explicit
opt-in) builds the model with seeded random weights: the real code path for tests and
speed benchmarks, with no semantic meaning.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import torch
from PIL import Image

from ..foundation.config import limit_torch_threads
from ..foundation.errors import MovieMemError

Progress = Callable[[int, int], None]

NO_WEIGHTS = "no CLIP weights configured (set MOVIEMEM_CLIP_PRETRAINED to a local checkpoint)"
RANDOM = "random"  # opt-in tag for seeded random weights
RANDOM_SEED = 0  # random weights are the same in every process, so test runs compare


@dataclass(frozen=True)
class _Weights:
    checkpoint: str | None  # file to load; None = random weights
    tag_cfg: dict[str, Any]  # open_clip's settings for a pretrained tag (preprocessing, QuickGELU)
    description: str


def clip_weights_available(pretrained: str | None, model_name: str = "ViT-B-32") -> tuple[bool, str]:
    """(True, where the weights are) or (False, why not) for `pretrained`, without downloading."""
    try:
        weights = _resolve(model_name, pretrained)
    except MovieMemError as exc:
        return False, str(exc)
    if weights.checkpoint is None and pretrained != RANDOM:
        return False, NO_WEIGHTS
    return True, weights.description


def _resolve(model_name: str, pretrained: str | None) -> _Weights:
    if not pretrained or pretrained == RANDOM:
        return _Weights(None, {}, "random weights (seeded; no semantic meaning)")
    path = Path(pretrained).expanduser()
    if path.is_file():
        return _Weights(str(path), {}, f"local checkpoint {path}")
    cfg = open_clip.get_pretrained_cfg(model_name, pretrained)
    if not cfg:
        if os.sep in pretrained or path.suffix:
            raise MovieMemError(f"CLIP checkpoint {path} does not exist")
        tags = open_clip.list_pretrained_tags_by_model(model_name)
        known = ", ".join(tags[:4]) + (", ..." if len(tags) > 4 else "") if tags else "none"
        raise MovieMemError(f"{pretrained!r} is neither a CLIP checkpoint file nor an open_clip tag of {model_name} ({known})")
    cached = _cached_file(cfg)
    if cached is None:
        raise MovieMemError(
            f"open_clip weights {model_name}/{pretrained} are not in the local cache and moviemem never downloads; "
            "set MOVIEMEM_CLIP_PRETRAINED to a local checkpoint"
        )
    return _Weights(cached, cfg, f"open_clip {model_name}/{pretrained} from the local cache ({cached})")


def _cached_file(cfg: dict[str, Any]) -> str | None:
    """The already-downloaded file of an open_clip pretrained config, if any."""
    if cfg.get("file") and Path(cfg["file"]).is_file():
        return str(cfg["file"])
    if cfg.get("hf_hub"):
        from huggingface_hub import try_to_load_from_cache

        repo, filename = os.path.split(cfg["hf_hub"])
        names = [filename] if filename else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
        names = [n[:-4] + ".safetensors" for n in names if n.endswith((".bin", ".pth"))] + names
        for name in names:
            found = try_to_load_from_cache(repo_id=repo, filename=name)
            if isinstance(found, str):
                return found
    if cfg.get("url"):
        target = Path("~/.cache/clip").expanduser() / os.path.basename(cfg["url"])
        if target.is_file():
            return str(target)
    return None


@functools.lru_cache(maxsize=2)
def _load(model_name: str, pretrained: str | None) -> tuple[Any, Callable[..., Any], Callable[..., Any], str]:
    """(model, image preprocess, tokenizer, description), once per (model, weights) per process."""
    weights = _resolve(model_name, pretrained)
    limit_torch_threads()
    tag = weights.tag_cfg
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_SEED)
            model, _, preprocess = open_clip.create_model_and_transforms(
                model_name,
                pretrained=weights.checkpoint,
                force_quick_gelu=bool(tag.get("quick_gelu", False)),
                image_mean=tag.get("mean"),
                image_std=tag.get("std"),
                image_interpolation=tag.get("interpolation"),
                image_resize_mode=tag.get("resize_mode"),
                pretrained_image=False,
                pretrained_text=False,
            )
    except (RuntimeError, OSError, ValueError, KeyError) as exc:
        raise MovieMemError(f"cannot load CLIP {model_name} ({weights.description}): {exc}") from exc
    model.eval()
    return model, preprocess, open_clip.get_tokenizer(model_name), weights.description


class ClipEncoder:
    """Encodes frames and texts into one L2-normalised space (float32, shape [n, dim])."""

    def __init__(self, model_name: str = "ViT-B-32", pretrained: str | None = None):
        """Load (once per process) `model_name` with `pretrained`: a checkpoint file, a
        cached open_clip tag, or None for seeded random weights. Never downloads."""
        self.model_name = model_name
        self.pretrained = pretrained
        self.model, self.preprocess, self.tokenizer, self.weights = _load(model_name, pretrained)
        self.random_weights = not pretrained
        self.dim = int(open_clip.get_model_config(model_name)["embed_dim"])

    @torch.inference_mode()
    def encode_images(self, paths: Sequence[Path], batch_size: int = 32, progress: Progress | None = None) -> np.ndarray:
        """[len(paths), dim] float32, one L2-normalised row per image; progress(done, total)."""
        out = np.zeros((len(paths), self.dim), np.float32)
        for start in range(0, len(paths), batch_size):
            batch = [self._pixels(p) for p in paths[start : start + batch_size]]
            out[start : start + len(batch)] = _normalise(self.model.encode_image(torch.stack(batch)))
            if progress is not None:
                progress(start + len(batch), len(paths))
        return out

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] float32, L2-normalised, in the same space as the images."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return _normalise(self.model.encode_text(self.tokenizer(list(texts))))

    def _pixels(self, path: Path) -> torch.Tensor:
        try:
            with Image.open(path) as im:
                pixels: torch.Tensor = self.preprocess(im.convert("RGB"))
                return pixels
        except OSError as exc:
            raise MovieMemError(f"cannot read frame image {path}: {exc}") from exc


def _normalise(features: torch.Tensor) -> np.ndarray:
    array: np.ndarray = features.float().numpy()
    unit: np.ndarray = (array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    return unit
