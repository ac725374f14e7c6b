"""How well ingest recovered what the synthetic film's truth.json says: shot boundaries and words."""

from __future__ import annotations

import re
from collections.abc import Sequence

Span = Sequence[float]


def boundaries(shots: Sequence[Span]) -> list[float]:
    """Cut times: every shot start except the film's first."""
    return sorted(float(s[0]) for s in shots)[1:]


def boundary_f1(predicted: Sequence[Span], truth: Sequence[Span], tolerance_s: float = 0.5) -> dict[str, float]:
    """Precision, recall and F1 of cuts, each truth cut matched at most once within the tolerance."""
    pred, want = boundaries(predicted), boundaries(truth)
    used: set[int] = set()
    hits = 0
    for p in pred:
        best = min((abs(p - w), i) for i, w in enumerate(want) if i not in used) if len(used) < len(want) else None
        if best is not None and best[0] <= tolerance_s:
            used.add(best[1])
            hits += 1
    precision = hits / len(pred) if pred else float(not want)
    recall = hits / len(want) if want else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "predicted": len(pred), "truth": len(want)}


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower().replace("-", " ")))


def word_error_rate(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """WER of the whole transcript (lower-cased, punctuation removed), by jiwer."""
    import jiwer

    return float(jiwer.wer(_words(" ".join(reference)), _words(" ".join(hypothesis))))
