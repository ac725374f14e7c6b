"""Settings from MOVIEMEM_* environment variables and an optional moviemem.toml.

Precedence: explicit arguments > environment > the config file > defaults. The config file is the one
the user names ($MOVIEMEM_CONFIG, `moviemem --config`) or the user's own
($XDG_CONFIG_HOME/moviemem/moviemem.toml, else ~/.config/moviemem/moviemem.toml), never one found in the
folder a command runs in: such a file could name a backbone URL and so send the film's text and the
environment's API keys to a host the user never chose.
"""

from __future__ import annotations

import os
import sys
import threading
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from .errors import SettingsInvalidError

CacheMode = Literal["off", "read", "write", "readwrite", "replay-only"]
Threads = Annotated[int, Field(ge=0, le=1024)]  # 0: one per core
Seconds = Annotated[float, Field(ge=0, le=24 * 3600)]


def _home() -> Path:
    return Path(os.environ.get("MOVIEMEM_HOME", Path.home() / ".moviemem")).expanduser()


class Settings(BaseSettings):
    """Every number is bounded and finite where it enters (NaN and infinity are refused), so a typo in
    the environment fails here, on one line naming the variable, not deep inside an ingest. A bound is
    what keeps the work finite too: no lower bound of "more than 0" where a tiny value means a vast count."""

    model_config = SettingsConfigDict(env_prefix="MOVIEMEM_", extra="ignore", allow_inf_nan=False)

    home: Path = Field(default_factory=_home)
    library: Path | None = None
    models_dir: Path | None = None

    # text embeddings (utterances, captions, on-screen text, events)
    embedder: str = "minilm"
    vector_cache_mb: int = Field(default=512, ge=0, le=1 << 20)  # films' text vectors held in memory for retrieval (about 3 MB per feature film)
    # a log (stderr not a terminal) gets a progress line at least this often while bench, ask, ingest or import-collection waits
    progress_interval_s: float = Field(default=30.0, ge=0.05, le=3600)
    # ASR
    asr_model: str = "base"
    asr_language: str | None = None
    asr_compute_type: str = "int8"
    asr_threads: Threads = 0
    asr_beam_size: int = Field(default=1, ge=1, le=64)
    # also decode what the VAD heard as no speech (lines said over a loud score); such lines must pass Whisper's own
    # confidence rule. Costs about 0.04x real time on a film with no dialogue at all
    asr_gaps: bool = True
    # frames and shots
    frame_pools: tuple[Annotated[int, Field(ge=1, le=100_000)], ...] = Field(default=(64, 128, 256), min_length=1)
    strip_fps: float = Field(default=0.5, ge=0.001, le=60)
    jpeg_quality: int = Field(default=85, ge=1, le=100)
    frame_max_side: int = Field(default=512, ge=16, le=4096)
    shot_detector: str = "content"
    shot_threshold: float | None = Field(default=None, ge=0, le=1000)  # None: the detector's default (content 27, adaptive 3)
    shot_min_len_s: Seconds = 0.5
    # segments
    segment_target_s: float = Field(default=60.0, ge=1, le=24 * 3600)  # 1e-300 would make ~1e300 segments
    segment_min_s: Seconds = 10.0
    # CLIP: no weights ship offline; a local checkpoint path (or a tag where a network allows)
    clip_model: str = "ViT-B-32"
    clip_pretrained: str | None = None
    # OCR
    ocr_lang: str = "eng"
    ocr_min_confidence: float = Field(default=60.0, ge=0, le=100)
    # model backbones used by ingest (captions, events, relations, narration); specs as in backbones.load
    captioner: str | None = None  # None: the captioner stage is skipped (or captions are imported)
    backbone: str = "local"  # text backbone for events, relations and narration
    # with a text backbone chosen, the events stage checks the rule graph's candidate links (refine, minutes a
    # film with a local model) or extracts events and links anew (extract, about an hour a feature film)
    events_mode: Literal["refine", "extract"] = "refine"
    refine_max_pairs: int = Field(default=200, ge=0, le=10_000)  # candidate links a model checks, most confident first
    cache_mode: CacheMode = "readwrite"  # replay cache of model requests (ingest: under <library>/cache)
    # local LLMs
    # tokens of context; 0: as long as the model was trained for (Qwen2.5 32,768, SmolLM2 8,192), so a feature
    # film's whole transcript fits the full-context baselines
    llm_context: int = Field(default=0, ge=0, le=1 << 20)
    llm_threads: Threads = 0

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise SettingsInvalidError(_explain(e)) from None
        except SettingsError as e:  # a list or tuple setting whose JSON does not parse
            raise SettingsInvalidError(f"invalid moviemem setting: {e} (a list is written as JSON: [64, 128])") from None
        except tomllib.TOMLDecodeError as e:
            raise SettingsInvalidError(f"{_toml_path()} is not valid TOML: {e}") from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _toml_path()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
            _announce(toml)
        return tuple(sources)

    @property
    def library_dir(self) -> Path:
        return (self.library or self.home / "library").expanduser()

    @property
    def models_path(self) -> Path:
        return (self.models_dir or self.home / "models").expanduser()


def user_config_path() -> Path:
    """The user's own config file (it may not exist): $XDG_CONFIG_HOME/moviemem/moviemem.toml, else
    ~/.config/moviemem/moviemem.toml."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "moviemem" / "moviemem.toml"


def _toml_path() -> Path | None:
    """The config file to read: the one named by $MOVIEMEM_CONFIG (which must exist), else the user's own
    when it exists, else none."""
    named = os.environ.get("MOVIEMEM_CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise SettingsInvalidError(f"the config file {path} (MOVIEMEM_CONFIG or --config) is not a file")
        return path
    own = user_config_path()
    return own if own.is_file() else None


_announced: set[Path] = set()
_announce_lock = threading.Lock()


def _announce(path: Path) -> None:
    """Say on stderr, once a process, which config file was read: settings that change where data goes
    must never apply unseen."""
    with _announce_lock:
        if path in _announced:
            return
        _announced.add(path)
    print(f"moviemem: settings from {path}", file=sys.stderr)


def _explain(e: ValidationError) -> str:
    """One line: which setting, where it is set, what is wrong. The value itself is not echoed (a
    variable may hold a secret), only its type."""
    err = e.errors()[0]
    name = str(err["loc"][0]) if err["loc"] else "?"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return (f"setting {name} (MOVIEMEM_{name.upper()} or moviemem.toml): {err['msg']}{more}")


def cpu_cores() -> int:
    """Physical cores this process may run on (affinity, SMT siblings counted once, cgroup quota):
    the thread count of one compute-bound engine (whisper, ONNX Runtime, torch, OCR) running alone."""
    from .hardware import default_threads

    return default_threads()


def threads_report(settings: Settings | None = None) -> dict[str, int]:
    """The threads each engine will start with these settings (shown by `moviemem models list`)."""
    s = settings or Settings()
    cores = cpu_cores()
    return {"cores": cores, "llm": s.llm_threads or cores, "asr": s.asr_threads or cores, "embedder": cores,
            "torch": cores, "ocr": cores}


def limit_torch_threads() -> None:
    """Keep torch from starting more threads than there are cores: oversubscription halves CPU speed."""
    import torch

    if torch.get_num_threads() > cpu_cores():
        torch.set_num_threads(cpu_cores())


def get_settings(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
