"""Cost of a call from a price table (backbones/prices.toml, overridable with $MOVIEMEM_PRICES).

Prices live in a data file, not code, because they change more often than releases do.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..foundation.errors import MovieMemError
from .types import Usage

DEFAULT_PRICES = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    per_image: float = 0.0
    per_video_s: float = 0.0
    per_audio_s: float = 0.0

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        return ((usage.input_tokens - cached) * self.input_per_mtok + cached * cached_rate
                + usage.output_tokens * self.output_per_mtok) / 1e6 \
            + usage.images * self.per_image + usage.video_s * self.per_video_s + usage.audio_s * self.per_audio_s


def _read(path: Path) -> dict[str, Price]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise MovieMemError(f"cannot read price table {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise MovieMemError(f"price table {path} is not valid TOML: {exc}") from None
    out = {}
    for model, entry in (data.get("models") or {}).items():
        try:
            out[model] = Price(**entry)
        except TypeError as exc:
            raise MovieMemError(f"price table {path}: entry {model!r}: {exc}") from None
    return out


@functools.cache
def _table(override: str | None) -> dict[str, Price]:
    table = _read(DEFAULT_PRICES)
    if override:
        table.update(_read(Path(override).expanduser()))
    return table


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """The default table updated with `path` (or $MOVIEMEM_PRICES / the `prices` setting)."""
    if path is None:
        from .settings import get_backbone_settings

        path = get_backbone_settings().prices
    if path and not Path(path).expanduser().is_file():
        raise MovieMemError(f"price table {path} does not exist")
    return _table(str(path) if path else None)


def price_for(model: str | None, prices: dict[str, Price] | None = None) -> Price | None:
    """Exact entry, else the longest listed prefix ending at a '-' boundary; None if unknown."""
    if not model:
        return None
    table = prices if prices is not None else load_prices()
    if model in table:
        return table[model]
    best = max((k for k in table if model.startswith(k + "-")), key=len, default=None)
    return table[best] if best else None


def cost(model: str | None, usage: Usage, prices: dict[str, Price] | None = None) -> float | None:
    price = price_for(model, prices)
    return None if price is None else round(price.cost(usage), 10)
