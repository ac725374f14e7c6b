"""Backbone settings: the package settings plus the knobs only backbones read.

Subclassing `Settings` keeps one precedence order (arguments > MOVIEMEM_* environment >
moviemem.toml > defaults) without touching config.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ..config import Settings

CacheMode = Literal["off", "read", "write", "readwrite", "replay-only"]


class BackboneSettings(Settings):
    # price table overriding backbones/prices.toml (MOVIEMEM_PRICES)
    prices: Path | None = None
    # per-request timeout and bounded retries (429, 5xx, timeouts, resets)
    backbone_timeout_s: float = 120.0
    backbone_max_attempts: int = 5
    backbone_retry_initial_s: float = 1.0
    backbone_retry_max_s: float = 60.0
    # requests in flight at once per backbone
    backbone_concurrency: int = 4
    # replay cache: directory (None = <library>/cache when cache=True) and mode
    cache_dir: Path | None = None
    cache_mode: CacheMode = "readwrite"
    # llama.cpp: RAM prompt-cache capacity (saved KV states for reuse across contexts)
    llm_cache_bytes: int = 1 << 30
    # Gemini video: send inline below these sizes, otherwise upload with the Files API
    gemini_inline_max_bytes: int = 15_000_000
    gemini_inline_clip_max_s: float = 120.0

    @property
    def cache_path(self) -> Path:
        return (self.cache_dir or self.library_dir / "cache").expanduser()

    @property
    def scratch_dir(self) -> Path:
        """Cut clips and upload records: safe to delete at any time."""
        return self.home.expanduser() / "cache" / "backbones"


def get_backbone_settings(**overrides: Any) -> BackboneSettings:
    return BackboneSettings(**{k: v for k, v in overrides.items() if v is not None})
