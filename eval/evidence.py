"""Evidence metrics: how much of an item's gold evidence the model was shown, and what it cited.

Gold evidence is a list of [start_s, end_s] spans (MF²-dev, NEST localization). An answer's
shown evidence is a list of spans too; a gold span counts as found when some shown span
overlaps it. These are retrieval measures, separate from whether the answer was right: an
answer can be wrong with its evidence in front of the model ("misread") or wrong because the
evidence was never found ("not found"), and the two call for different fixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import get_args

from . import markdown as md
from .records import AnswerRecord, EvidenceScores, EvidenceSummary, Grid, Outcome, ResultRecord

Span = tuple[float, float]


def _spans(spans: Iterable[Sequence[float]]) -> list[Span]:
    return [(float(a), float(b)) for a, b in spans]


def overlaps(a: Span, b: Span) -> bool:
    """Half-open overlap; a zero-length span overlaps what contains it."""
    return a[0] <= b[1] and b[0] <= a[1] if a[0] == a[1] or b[0] == b[1] else a[0] < b[1] and b[0] < a[1]


def first_hit(ranked: Iterable[Span], gold: Iterable[Span]) -> int | None:
    """1-based rank of the first ranked span that overlaps any gold span (None: none does)."""
    g = list(gold)
    return next((n for n, s in enumerate(ranked, 1) if any(overlaps(s, x) for x in g)), None)


def recall(gold: Iterable[Sequence[float]], shown: Iterable[Sequence[float]]) -> float | None:
    """Share of gold spans that some shown span overlaps (None without gold)."""
    g, s = _spans(gold), _spans(shown)
    if not g:
        return None
    return sum(any(overlaps(x, y) for y in s) for x in g) / len(g)


def _union(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def coverage(gold: Iterable[Sequence[float]], shown: Iterable[Sequence[float]]) -> float | None:
    """Share of the gold spans' total duration that the union of shown spans covers."""
    g, s = _union(_spans(gold)), _union(_spans(shown))
    total = sum(b - a for a, b in g)
    if not g or total <= 0:
        return recall(g, s)
    covered = sum(max(0.0, min(b, d) - max(a, c)) for a, b in g for c, d in s)
    return covered / total


def precision(gold: Iterable[Sequence[float]], cited: Iterable[Sequence[float]]) -> float | None:
    """Share of cited spans that overlap some gold span (None when nothing was cited)."""
    g, c = _spans(gold), _spans(cited)
    if not c or not g:
        return None
    return sum(any(overlaps(x, y) for y in g) for x in c) / len(c)


def outcome(evidence_recall: float | None, correct: bool | None) -> Outcome | None:
    """found (right, gold shown) | lucky (right, gold never shown) | misread (wrong, gold shown) |
    not found (wrong, gold never shown); None without gold or without a verdict."""
    if evidence_recall is None or correct is None:
        return None
    seen = evidence_recall > 0
    if correct:
        return "found" if seen else "lucky"
    return "misread" if seen else "not found"


def answer_evidence(gold: Sequence[Sequence[float]], answer: AnswerRecord) -> EvidenceScores:
    """The evidence measures of one answer: recall, coverage and cited precision (`outcome` left unset)."""
    shown = [e.span for e in answer.evidence if e.span is not None]
    cited = [e.span for e in answer.evidence if e.span is not None and e.cited]
    return EvidenceScores(recall=recall(gold, shown), coverage=coverage(gold, shown),
                          cited_precision=precision(gold, cited))


def mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return round(sum(xs) / len(xs), 4) if xs else None


def record_evidence(gold: Sequence[Sequence[float]], answers: dict[str, AnswerRecord],
                    correct: bool | None) -> EvidenceScores | None:
    """An item's evidence measures over its answers (a claim pair has two), or None without gold."""
    if not gold:
        return None
    per = [answer_evidence(gold, a) for a in answers.values()]
    rec = mean([p.recall for p in per])
    return EvidenceScores(recall=rec, coverage=mean([p.coverage for p in per]),
                          cited_precision=mean([p.cited_precision for p in per]), outcome=outcome(rec, correct))


def searches(answers: dict[str, AnswerRecord]) -> int | None:
    """Searches the item's answers made (agentic policies record them in the trace), or None."""
    counts = [s.data.get("n", 0) for a in answers.values() for s in a.trace if s.kind == "searches"]
    return sum(counts) if counts else None


OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


def summary(records: Sequence[ResultRecord]) -> EvidenceSummary:
    """Per configuration: mean evidence recall and coverage, outcome counts, and how often agentic
    answers searched (None where records carry no such field)."""
    measured = [(r.category or "all", r.evidence) for r in records if r.evidence is not None]
    out: EvidenceSummary = {"evidence_n": len(measured)}
    if measured:
        ev = [e for _, e in measured]
        out["evidence_recall"] = mean([e.recall for e in ev])
        out["evidence_coverage"] = mean([e.coverage for e in ev])
        out["cited_precision"] = mean([e.cited_precision for e in ev])
        out["outcomes"] = {o: sum(e.outcome == o for e in ev) for o in OUTCOMES}
        out["evidence_recall_by_category"] = {c: mean([e.recall for cat, e in measured if cat == c])
                                              for c in sorted({cat for cat, _ in measured})}
    n = [r.searches for r in records if r.searches is not None]
    if n:
        out["searched_share"] = round(sum(x > 0 for x in n) / len(n), 4)
        out["mean_searches"] = round(sum(n) / len(n), 3)
    return out


def json_fallbacks(grid: Grid, names: Mapping[str, str] | None = None) -> list[str]:
    """The report's count of answers read by the JSON fallback: a reader of log-probabilities asked for (hybrid's
    `reader=auto` on a multiple-choice question or a claim) through a backbone that gives none, so the model wrote
    JSON instead (the answer's last parse step says `reader_fallback`, which a `lean` record keeps). Empty where
    no answer was."""
    rows = []
    for policy, backbone in sorted(grid):  # a configuration's records read when its turn comes (lean_log.py)
        parses = [steps[-1] for r in grid[(policy, backbone)] for a in r.answers.values()
                  if (steps := [s for s in a.trace if s.kind == "parse"])]
        fallback = sum(bool(p.data.get("reader_fallback")) for p in parses)
        if fallback:
            rows.append([(names or {}).get(policy, policy), backbone, len(parses), fallback])
    if not rows:
        return []
    return ["", "## Answers read by the JSON fallback", "",
            "A reader of log-probabilities was asked for, but the backbone gives none: the model wrote its answer "
            "as JSON instead (each such answer says so in its trace).", "",
            md.table(["policy", "backbone", "answers", "read by the JSON fallback"], rows)]
