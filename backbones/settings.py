"""Backbone settings: the package settings plus the knobs only backbones read.

Subclassing `Settings` keeps one precedence order (arguments > MOVIEMEM_* environment >
the config file > defaults) without touching foundation/config.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ..foundation.config import Seconds, Settings


class BackboneSettings(Settings):
    # price table overriding backbones/prices.toml (MOVIEMEM_PRICES)
    prices: Path | None = None
    # per-request timeout and bounded retries (429, 5xx, timeouts, resets)
    backbone_timeout_s: float = Field(default=120.0, ge=1, le=24 * 3600)
    backbone_max_attempts: int = Field(default=5, ge=1, le=100)
    backbone_retry_initial_s: Seconds = 1.0
    backbone_retry_max_s: Seconds = 60.0
    # requests in flight at once per backbone
    backbone_concurrency: int = Field(default=4, ge=1, le=1024)
    # replay cache: directory (None = <library>/cache when cache=True); its mode is the package's cache_mode
    cache_dir: Path | None = None
    # llama.cpp: RAM prompt-cache capacity (saved KV states for reuse across contexts)
    llm_cache_bytes: int = Field(default=1 << 30, ge=0, le=1 << 40)
    # llama.cpp: the KV cache's number type. f16 is exact; q8_0 halves it (Qwen2.5-1.5B: 28 KiB a token in f16,
    # 0.92 GiB at 32,768 tokens) and needs flash attention. Measured in bench/full_context.py
    llm_kv_type: Literal["f16", "q8_0"] = "f16"
    # llama.cpp: flash attention (always on with a q8_0 KV cache). Here it read 4,000 tokens of a film's
    # transcript 1.2-1.3x faster in alternating runs (bench/full_context.py --kernels 4000: 47 -> 59 and
    # 45 -> 55 tokens/s); reading the transcript is most of a full-context question's wait. Its sums differ in the last bits, so the
    # model id says it (":fa") and a replay cache never answers one with the other's reply
    llm_flash_attn: bool = True
    # llama.cpp: run the model in a child process (llamacpp_worker.py), so that a native crash (an instruction
    # the CPU cannot run, a memory fault) is one error naming `moviemem doctor`, not the death of a bench,
    # an MCP server or a notebook. bench/worker_overhead.py measures what it costs per answer
    llm_isolate: bool = True
    # llama.cpp: prompt states saved on disk (backbones/prefix_states.py), so a film's transcript or caption history
    # is read once per machine. The folder (None: <library>/cache/prefix-states), its cap (least recently used go
    # first; 0 turns saving and restoring off), and the fewest new prompt tokens a call must read to save its state
    # (and a saved state must spare to be restored): below ~4,000 tokens a prompt is a retrieval's, not a film's
    llm_state_dir: Path | None = None
    llm_state_max_bytes: int = Field(default=20 << 30, ge=0, le=1 << 50)
    llm_state_min_tokens: int = Field(default=4096, ge=256, le=1 << 24)
    # Gemini video: send inline below these sizes, otherwise upload with the Files API
    gemini_inline_max_bytes: int = Field(default=15_000_000, ge=0, le=20_000_000)
    gemini_inline_clip_max_s: Seconds = 120.0

    @property
    def cache_path(self) -> Path:
        return (self.cache_dir or self.library_dir / "cache").expanduser()

    @property
    def scratch_dir(self) -> Path:
        """Cut clips and upload records: safe to delete at any time."""
        return self.home.expanduser() / "cache" / "backbones"


def get_backbone_settings(**overrides: Any) -> BackboneSettings:
    return BackboneSettings(**{k: v for k, v in overrides.items() if v is not None})
