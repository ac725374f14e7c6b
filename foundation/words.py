"""English stop words, read once, and the rough token count: the retrievers (who-questions, packing), the
agents (claims) and the backbones (a count for servers that report none) share them."""

from __future__ import annotations

import math
from functools import lru_cache

# spoken-dialogue words with no content of their own, beyond the written-English list
INTERJECTIONS = frozenset({"oh", "yeah", "yes", "ok", "okay", "hey", "huh", "uh", "um", "mr", "mrs", "miss", "sir",
                           "well", "just", "got", "ll", "don't", "it's", "i'm"})


@lru_cache(maxsize=1)
def english_stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@lru_cache(maxsize=1)
def dialogue_stop_words() -> frozenset[str]:
    """Stop words and interjections: what a subtitle line can hold without saying anything."""
    return english_stop_words() | INTERJECTIONS


def estimate_tokens(text: str) -> int:
    """Rough token count (4 characters a token) for backends that report none and for evidence budgets."""
    return math.ceil(len(text) / 4) if text else 0


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for one ("1 voice", "2 voices", "0 on-screen texts")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
