"""How each benchmark format is asked and scored.

A task turns an item into the questions a policy answers (`queries`), scores the answers of
one item (`score`: AnswerRecords in, a Score out), aggregates the scored records of one policy x
backbone (`summarise`: Metrics), and writes its own section of report.md (`report_section`: MF²'s
claim pairs, NEST's relations). The runner, the summary and the report know nothing about formats
beyond this module; `TASKS.register(format, task)` (or `moviemem.register("task", ...)`) adds one,
report section and all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from ..foundation.timefmt import hms
from . import markdown as md
from . import metrics, mf2_scores
from .formats import LETTERS, MCQ, RELATION_TYPES, ClaimPair, Item, Localization, Narration, OpenQuestion, Relation, item_category
from .records import AnswerRecord, ClaimScoresLine, EstimateLine, Metrics, RelationScores, ResultRecord, Score, SummaryRow


@dataclass(frozen=True)
class Query:
    """One question put to a policy: `key` names it within the item (e.g. 'true', 'false')."""

    key: str
    question: str
    kind: str  # mcq | claim | open
    options: tuple[str, ...] = ()
    until: float | None = None


# ----------------------------------------------------------------------------- helpers


_HMS = re.compile(r"\b(?:(\d{1,2}):)?(\d{1,2}):(\d{2}(?:\.\d+)?)\b")
_SECONDS = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:s\b|sec\b|secs\b|seconds?\b)", re.I)


def parse_time(text: str) -> float | None:
    """The first time in a reply: h:mm:ss, mm:ss or 'N seconds'; None when there is none."""
    if not text:
        return None
    m = _HMS.search(text)
    if m:
        h = int(m[1]) if m[1] else 0
        return h * 3600 + int(m[2]) * 60 + float(m[3])
    m = _SECONDS.search(text)
    return float(m[1]) if m else None


def _verdict(answer: AnswerRecord | None) -> bool | None:
    if not answer or answer.invalid:
        return None
    choice = str(answer.choice or "").strip().upper()
    return {"TRUE": True, "FALSE": False}.get(choice)


def _reason(answer: AnswerRecord | None, default: str) -> str:
    if not answer:
        return "no answer"
    return str(answer.error or default)


RELATION_OPTIONS = {
    "before": "A happens before B",
    "after": "A happens after B",
    "overlap": "A and B happen at the same time",
    "causal": "A causes B",
    "precondition": "A makes B possible",
    "hierarchical": "one event is part of the other",
    "coreference": "A and B are the same event",
    "flashback": "A happens earlier in the story than B but is shown after it (a flashback)",
}


# ----------------------------------------------------------------------------- tasks


class ClaimRow(SummaryRow, total=False):
    """A claims run's summary row: MF²'s scores, and its per-granularity breakdown."""

    mf2: ClaimScoresLine
    per_granularity: dict[str, EstimateLine]
    mf2_groups: dict[str, dict[str, ClaimScoresLine]]  # MF²'s scores per granularity and per category (mf2_scores)


class RelationRow(SummaryRow, total=False):
    nest: RelationScores  # metrics.relation_scores


class Task:
    format: str = ""
    scored: bool = True  # False: answers wait for a judge

    def queries(self, item: Any) -> list[Query]:
        raise NotImplementedError

    def score(self, item: Any, answers: dict[str, AnswerRecord]) -> Score:
        raise NotImplementedError

    def summarise(self, items: Sequence[Any], records: Sequence[ResultRecord]) -> Metrics:
        """Scores of one policy x backbone: records[i] belongs to items[i]."""
        correct = [r.correct for r in records]
        return {"n": len(records), "accuracy": metrics.accuracy(correct).to_dict(),
                "accuracy_clustered": metrics.clustered_accuracy(correct, [it.film_id for it in items]).to_dict(),
                "invalid": metrics.invalid_rate([r.status == "invalid" for r in records]).to_dict(),
                "per_category": {k: v.to_dict() for k, v in
                                 metrics.per_category(correct, [item_category(it) for it in items]).items()}}

    breakdowns: tuple[tuple[str, str], ...] = (("per_category", "Per category"),)  # summary keys: report.md's per-group tables

    def report_section(self, rows: Sequence[SummaryRow], wide: bool = False) -> list[str]:
        """The format's own tables in report.md (after the results table); none by default. Rows name their
        policy as the tables show it; `wide`: keep each table whole (else cut to 100 columns, md.tables)."""
        return []


class MCQTask(Task):
    format = "mcq"

    def queries(self, item: MCQ) -> list[Query]:
        return [Query("answer", item.question, "mcq", tuple(item.options))]

    def score(self, item: MCQ, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        if not a or a.invalid:
            return Score(None, {"pred": None, "gold": item.answer}, _reason(a, "unparseable reply"))
        pred = a.choice
        if pred is None or pred not in LETTERS[: len(item.options)]:
            return Score(None, {"pred": pred, "gold": item.answer}, f"choice {pred!r} is not an option letter")
        return Score(pred == item.answer, {"pred": pred, "gold": item.answer})


class ClaimsTask(Task):
    format = "claims"

    def queries(self, item: ClaimPair) -> list[Query]:
        return [Query("true", item.true_claim, "claim"), Query("false", item.false_claim, "claim")]

    def score(self, item: ClaimPair, answers: dict[str, AnswerRecord]) -> Score:
        """Right when TRUE was said of the true claim and FALSE of the false one; the detail says each in words
        (mf2_scores.pair_detail), None where that claim's reply had no verdict."""
        on_true, on_false = _verdict(answers.get("true")), _verdict(answers.get("false"))
        detail = mf2_scores.pair_detail(on_true, on_false)
        bad = [k for k, v in (("true", on_true), ("false", on_false)) if v is None]
        if bad:
            return Score(None, detail, "; ".join(f"{k} claim: {_reason(answers.get(k), 'no TRUE/FALSE verdict')}"
                                                  for k in bad))
        return Score(on_true is True and on_false is False, detail)

    breakdowns = (("per_granularity", "Per granularity (MF²: Single, Multi, Global)"), *Task.breakdowns)

    def summarise(self, items: Sequence[ClaimPair], records: Sequence[ResultRecord]) -> Metrics:
        out = cast(ClaimRow, super().summarise(items, records))
        verdicts = [mf2_scores.claim_verdicts(r.detail) for r in records]  # old runs' on_true / on_false read too
        cs = metrics.claim_pairs([t for t, _ in verdicts], [f for _, f in verdicts])
        out["mf2"] = cs.to_dict()
        out["mf2_groups"] = mf2_scores.breakdown(items, records)  # issue 56: TPR, TNR, unparseable per group
        if any(it.granularity for it in items):  # MF²'s own breakdown: a pair right when both claims are
            out["per_granularity"] = {k: v.to_dict() for k, v in metrics.per_category(
                [r.correct for r in records], [it.granularity for it in items]).items()}
        return out

    def report_section(self, rows: Sequence[SummaryRow], wide: bool = False) -> list[str]:
        mf2 = [cast(ClaimRow, r)["mf2"] for r in rows]
        return ["", "## MF² claim pairs", "", md.tables(
            ["policy", "backbone", "pairs", "pairwise accuracy", "TPR", "TNR", "unparseable %"],
            [[r["policy"], r["backbone"], m["pairs"], md.pct(m["pairwise"]), md.pct(m["tpr"]), md.pct(m["tnr"]),
              md.pct(m["unparseable"])] for r, m in zip(rows, mf2)], wide=wide)] + mf2_scores.markdown(rows, wide)


class RelationsTask(Task):
    format = "relations"

    def queries(self, item: Relation) -> list[Query]:
        q = (f"How is event A related to event B in the film?\nEvent A: {item.event_a}\nEvent B: {item.event_b}")
        return [Query("answer", q, "mcq", tuple(f"{t}: {RELATION_OPTIONS[t]}" for t in RELATION_TYPES))]

    def score(self, item: Relation, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        if not a or a.invalid:
            return Score(None, {"pred": None, "gold": item.label}, _reason(a, "unparseable reply"))
        letter = a.choice
        if letter is None or letter not in LETTERS[: len(RELATION_TYPES)]:
            return Score(None, {"pred": None, "gold": item.label}, f"choice {letter!r} is not an option letter")
        pred = RELATION_TYPES[LETTERS.index(letter)]
        return Score(pred == item.label, {"pred": pred, "gold": item.label, "flashback": item.in_flashback_subset})

    def summarise(self, items: Sequence[Relation], records: Sequence[ResultRecord]) -> Metrics:
        out = cast(RelationRow, super().summarise(items, records))
        out["nest"] = metrics.relation_scores([it.label for it in items], [r.detail.get("pred") for r in records],
                                              labels=RELATION_TYPES, flashback=[it.in_flashback_subset for it in items])
        return out

    def report_section(self, rows: Sequence[SummaryRow], wide: bool = False) -> list[str]:
        nest = [cast(RelationRow, r)["nest"] for r in rows]
        types = [t for t in nest[0]["per_type"] if any(n["per_type"][t]["support"] for n in nest)]
        return ["", "## NEST relations (F1 per type)", "", md.tables(
            ["policy", "backbone", "micro F1", "macro F1", *types, "flashback subset acc."],
            [[r["policy"], r["backbone"], f"{n['micro']['f1']:.2f}", f"{n['macro']['f1']:.2f}",
              *(f"{n['per_type'][t]['f1']:.2f}" for t in types), md.pct(n["flashback"]["accuracy"])]
             for r, n in zip(rows, nest)], wide=wide)]


class LocalizationTask(Task):
    format = "localization"

    def queries(self, item: Localization) -> list[Query]:
        q = (f"At what time in the film does this happen: {item.event}\n"
             "Answer with the time as h:mm:ss.")
        return [Query("answer", q, "open")]

    def score(self, item: Localization, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        gold = [item.start, item.end]
        if not a or a.invalid:
            return Score(None, {"pred_t": None, "gold": gold}, _reason(a, "unparseable reply"))
        t = parse_time(a.text or "")
        if t is None:
            return Score(None, {"pred_t": None, "gold": gold}, "no time (h:mm:ss) in the answer")
        return Score(item.start <= t <= item.end, {"pred_t": t, "gold": gold})


class OpenTask(Task):
    format = "open"
    scored = False

    def queries(self, item: OpenQuestion) -> list[Query]:
        return [Query("answer", item.question, "open")]

    def score(self, item: OpenQuestion, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        if not a or a.invalid:
            return Score(None, {}, _reason(a, "unparseable reply"))
        return Score(None, {"judged": False})

    def summarise(self, items: Sequence[Any], records: Sequence[ResultRecord]) -> Metrics:
        return {"n": len(records), "accuracy": None,
                "invalid": metrics.invalid_rate([r.status == "invalid" for r in records]).to_dict(),
                "note": "open answers are scored by a judge; none has been run"}


class NarrationTask(OpenTask):
    format = "narration"

    def queries(self, item: Narration) -> list[Query]:  # type: ignore[override]  # a task is only handed items of its own format
        q = (f"Narrate what happens on screen between {hms(item.start)} and {hms(item.end)}: "
             "the setting, the characters and the plot, in a few sentences.")
        return [Query("answer", q, "open", until=item.end)]


def _check(name: str, task: Task, meta: dict[str, Any]) -> tuple[Task, dict[str, Any]]:
    """A task is keyed by the format it scores, so the two names must agree."""
    if not isinstance(task, Task) or task.format != name or meta:
        raise MovieMemError(f"task {name!r}: register a Task instance under its own format name, with no options")
    return task, {}


TASKS: Registry[Task] = Registry("task", "moviemem.tasks", check=_check)  # keyed by format; entry points name a Task


def task_for(fmt: str) -> Task:
    if fmt not in TASKS:
        raise MovieMemError(f"no task for format {fmt!r}; tasks: {', '.join(TASKS)}")
    return TASKS.get(fmt)


for _t in (MCQTask(), ClaimsTask(), RelationsTask(), LocalizationTask(), OpenTask(), NarrationTask()):
    TASKS.register(_t.format, _t)

TaskFactory = Callable[[], Task]
__all__ = ["Query", "Score", "Task", "parse_time", "TASKS", "task_for", "Item"]
