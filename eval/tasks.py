"""How each benchmark format is asked, scored, judged, probed and shown: one Task per benchmark.

A task names its item model (`model`), turns an item into the questions a policy answers (`queries`),
scores the answers of one item (`score`: AnswerRecords in, a Score out), aggregates the scored records of
one policy x backbone (`summarise`: Metrics), and writes its own section of report.md (`report_section`:
MF²'s claim pairs, NEST's relations). It also declares what the rest of eval/ asks of a format: the
judge's rubric and the reference it grades against (`rubric`, `judge_reference`), the retrieval probes of
an item (`probes`, for retrieval-eval) and the fields the inspector's item page shows (`fields`,
`options`). The runner, the summary, the report, the judge, retrieval-eval and the inspector know nothing
about formats beyond this module; `TASKS.register(format, task)` (or `moviemem.register("task", ...)`) adds
one, and a task that names its `model` and `keys` registers its format with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import StrictBool, ValidationError

from ..agents.types import Question
from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry, first_doc_line
from ..foundation.timefmt import hms
from . import markdown as md
from . import metrics, mf2_scores
from .formats import (
    FORMATS,
    LETTERS,
    MCQ,
    RELATION_TYPES,
    ClaimPair,
    Item,
    Localization,
    Narration,
    OpenQuestion,
    Relation,
    item_category,
)
from .metrics import ClaimScoresLine, RelationScores
from .mf2_scores import PairDetail
from .records import AnswerRecord, Detail, EstimateLine, Metrics, ResultRecord, Score, SummaryRow


@dataclass(frozen=True)
class Query:
    """One question put to a policy: `key` names it within the item (e.g. 'true', 'false')."""

    key: str
    question: str
    kind: str  # mcq | claim | open
    options: tuple[str, ...] = ()
    until: float | None = None


@dataclass(frozen=True)
class Probe:
    """One retrieval query of an item (Task.probes): retrieval-eval ranks evidence for `question` and measures
    it against the item's gold spans; `key` tells apart an item's probes (None: the item's only one)."""

    question: Question
    key: str | None = None


@dataclass(frozen=True)
class Shown:
    """One field of an item as the inspector's item page shows it: the item's `key` under `label`
    (`time`: seconds shown as h:mm:ss.t)."""

    key: str
    label: str
    time: bool = False


Rubric = Mapping[str, str]  # criterion -> what it grades, with what 5 and 0 mean; the judge scores each 0-5


class ChoiceDetail(Detail):
    """A chosen option's detail: what was chosen (None: nothing usable) and what is right."""

    pred: str | None = None
    gold: str | None = None


class RelationDetail(ChoiceDetail):
    """A NEST relation's detail: the relation type chosen and the gold one, and whether the pair is of the
    flashback subset."""

    flashback: StrictBool | None = None


class TimeDetail(Detail):
    """A localisation's detail: the time read from the answer (None: none) and the gold span."""

    pred_t: float | None = None
    gold: list[float] = []


class JudgedDetail(Detail):
    """An open answer's detail: whether a judge has scored it (its scores are in judge.jsonl)."""

    judged: StrictBool | None = None


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


def _letter(answer: AnswerRecord | None, n_options: int) -> tuple[str | None, str | None]:
    """The option letter an answer chose, and why it cannot be scored (None: it can): no usable reply, or a
    choice that is not one of the first `n_options` letters (the letter kept, for the detail)."""
    if not answer or answer.invalid:
        return None, _reason(answer, "unparseable reply")
    if answer.choice is None or answer.choice not in LETTERS[:n_options]:
        return answer.choice, f"choice {answer.choice!r} is not an option letter"
    return answer.choice, None


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


def _time(t: Any) -> str:
    try:
        return hms(float(t), tenths=True)
    except (TypeError, ValueError):
        return "?"


UNSHOWN = frozenset({"id", "film_id", "category", "evidence", "options", "answer"})  # shown apart, or not at all


class Task:
    format: str = ""
    scored: bool = True  # False: answers wait for a judge
    model: type[Item] | None = None  # the item class; with `keys`, registering the task registers the format too
    keys: tuple[str, ...] = ()  # the keys that identify the format's lines (formats.FORMATS)
    rubric: Rubric | None = None  # the judge's criteria (judge.py); None: the judge does not score this format
    fields: tuple[Shown, ...] | None = None  # the inspector's item fields; None: every field of the item model
    detail: type[Detail] = Detail  # the type of Score.detail: how `score` explains itself, read back by `detail_of`

    def detail_of(self, record: ResultRecord) -> Detail:
        """A record's scoring detail as this task's type (an old run's keys read where the type knows them); a
        detail that is not one is refused in one line naming the record."""
        try:
            return self.detail.model_validate(record.detail)
        except ValidationError as exc:
            raise MovieMemError(f"record {record.key!r}: its detail is not a {self.detail.__name__} "
                                f"({exc.errors()[0]['msg']}); the log was edited or is damaged") from None

    def judge_reference(self, item: Any) -> str:
        """What the judge grades a prediction against (the head of its prompt, each line ending in a newline)."""
        raise MovieMemError(f"format {self.format!r} declares no judge rubric (its Task.rubric)")

    def probes(self, item: Any) -> list[Probe] | None:
        """The queries retrieval-eval measures an item's gold evidence with; None: the format declares none
        (retrieval-eval then says so, rather than skipping its items)."""
        return None

    def shown(self, item: Any) -> list[tuple[str, str]]:
        """(label, value) of each field the inspector's item page shows, in order; the first leads the index row.
        Empty values are left out; a list is joined with commas."""
        declared = self.fields if self.fields is not None else tuple(
            Shown(k, k.replace("_", " ").capitalize()) for k in type(item).model_fields if k not in UNSHOWN)
        d = item.model_dump(mode="json")
        return [(f.label, _time(v) if f.time else ", ".join(v) if isinstance(v, list) else str(v))
                for f in declared if (v := d.get(f.key)) not in (None, [], "")]

    def options(self, item: Any) -> list[tuple[str, bool]]:
        """(text, is it the right one) of each option the item page lists; none by default."""
        return []

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
    model = MCQ
    fields = (Shown("question", "Question"),)

    def probes(self, item: MCQ) -> list[Probe]:
        return [Probe(Question.make(item.question, item.options))]

    def options(self, item: MCQ) -> list[tuple[str, bool]]:
        return [(o, LETTERS[i] == item.answer) for i, o in enumerate(item.options)]

    def queries(self, item: MCQ) -> list[Query]:
        return [Query("answer", item.question, "mcq", tuple(item.options))]

    detail = ChoiceDetail

    def score(self, item: MCQ, answers: dict[str, AnswerRecord]) -> Score:
        letter, why = _letter(answers.get("answer"), len(item.options))
        if why:
            return Score(None, ChoiceDetail(pred=letter, gold=item.answer), why)
        return Score(letter == item.answer, ChoiceDetail(pred=letter, gold=item.answer))


class ClaimsTask(Task):
    format = "claims"
    model = ClaimPair
    fields = (Shown("true_claim", "True claim"), Shown("false_claim", "False claim"))

    def probes(self, item: ClaimPair) -> list[Probe]:
        """Each claim on its own, as both are asked."""
        return [Probe(Question(text, kind="claim"), tag) for tag, text in (("true", item.true_claim),
                                                                           ("false", item.false_claim))]

    def queries(self, item: ClaimPair) -> list[Query]:
        return [Query("true", item.true_claim, "claim"), Query("false", item.false_claim, "claim")]

    detail = PairDetail

    def score(self, item: ClaimPair, answers: dict[str, AnswerRecord]) -> Score:
        """Right when TRUE was said of the true claim and FALSE of the false one; the detail says each in words
        (PairDetail), None where that claim's reply had no verdict."""
        on_true, on_false = _verdict(answers.get("true")), _verdict(answers.get("false"))
        detail = PairDetail.of(on_true, on_false)
        bad = [k for k, v in (("true", on_true), ("false", on_false)) if v is None]
        if bad:
            return Score(None, detail, "; ".join(f"{k} claim: {_reason(answers.get(k), 'no TRUE/FALSE verdict')}"
                                                  for k in bad))
        return Score(on_true is True and on_false is False, detail)

    breakdowns = (("per_granularity", "Per granularity (MF²: Single, Multi, Global)"), *Task.breakdowns)

    def summarise(self, items: Sequence[ClaimPair], records: Sequence[ResultRecord]) -> Metrics:
        out = cast(ClaimRow, super().summarise(items, records))
        verdicts = [cast(PairDetail, self.detail_of(r)).verdicts for r in records]  # old runs' on_true / on_false read too
        cs = metrics.claim_pairs([t for t, _ in verdicts], [f for _, f in verdicts])
        out["mf2"] = cs.to_dict()
        out["mf2_groups"] = mf2_scores.breakdown(items, verdicts)  # issue 56: TPR, TNR, unparseable per group
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
    model = Relation
    fields = (Shown("event_a", "Event A"), Shown("event_b", "Event B"), Shown("label", "Relation"))

    def queries(self, item: Relation) -> list[Query]:
        q = (f"How is event A related to event B in the film?\nEvent A: {item.event_a}\nEvent B: {item.event_b}")
        return [Query("answer", q, "mcq", tuple(f"{t}: {RELATION_OPTIONS[t]}" for t in RELATION_TYPES))]

    detail = RelationDetail

    def score(self, item: Relation, answers: dict[str, AnswerRecord]) -> Score:
        letter, why = _letter(answers.get("answer"), len(RELATION_TYPES))
        if why or letter is None:
            return Score(None, ChoiceDetail(pred=None, gold=item.label), why)
        pred = RELATION_TYPES[LETTERS.index(letter)]
        return Score(pred == item.label, RelationDetail(pred=pred, gold=item.label, flashback=item.in_flashback_subset))

    def summarise(self, items: Sequence[Relation], records: Sequence[ResultRecord]) -> Metrics:
        out = cast(RelationRow, super().summarise(items, records))
        out["nest"] = metrics.relation_scores([it.label for it in items], [cast(ChoiceDetail, self.detail_of(r)).pred for r in records],
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
    model = Localization
    fields = (Shown("event", "Event"), Shown("start", "Start", time=True), Shown("end", "End", time=True))

    def queries(self, item: Localization) -> list[Query]:
        q = (f"At what time in the film does this happen: {item.event}\n"
             "Answer with the time as h:mm:ss.")
        return [Query("answer", q, "open")]

    detail = TimeDetail

    def score(self, item: Localization, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        gold = [item.start, item.end]
        if not a or a.invalid:
            return Score(None, TimeDetail(pred_t=None, gold=gold), _reason(a, "unparseable reply"))
        t = parse_time(a.text or "")
        if t is None:
            return Score(None, TimeDetail(pred_t=None, gold=gold), "no time (h:mm:ss) in the answer")
        return Score(item.start <= t <= item.end, TimeDetail(pred_t=t, gold=gold))


class JudgedTask(Task):
    """A format whose answers a judge scores (its `rubric`): none is right or wrong until then."""

    scored = False
    detail = JudgedDetail

    def score(self, item: Any, answers: dict[str, AnswerRecord]) -> Score:
        a = answers.get("answer")
        if not a or a.invalid:
            return Score(None, JudgedDetail(), _reason(a, "unparseable reply"))
        return Score(None, JudgedDetail(judged=False))

    def summarise(self, items: Sequence[Any], records: Sequence[ResultRecord]) -> Metrics:
        return {"n": len(records), "accuracy": None,
                "invalid": metrics.invalid_rate([r.status == "invalid" for r in records]).to_dict(),
                "note": "open answers are scored by a judge; none has been run"}


class OpenTask(JudgedTask):
    format = "open"
    model = OpenQuestion
    fields = (Shown("question", "Question"), Shown("reference", "Reference"))
    rubric = {  # MovieCORE's five criteria
        "accuracy": "the prediction means the same as the reference answer (5: same meaning, 0: no answer or unrelated)",
        "comprehensiveness": "it covers every key point of the reference (5: all, 0: none)",
        "depth": "it explains causes, motives or consequences beyond surface description (5: insightful, 0: none)",
        "evidence": "it supports its claims with specific moments of the film (5: strong, relevant evidence, 0: none)",
        "coherence": "it is clear, organised and free of contradictions (5: very clear, 0: incoherent)",
    }

    def queries(self, item: OpenQuestion) -> list[Query]:
        return [Query("answer", item.question, "open")]

    def judge_reference(self, item: OpenQuestion) -> str:
        return f"Question: {item.question}\nReference answer: {item.reference}\n"


class NarrationTask(JudgedTask):
    format = "narration"
    model = Narration
    fields = (Shown("reference", "Reference"), Shown("start", "Start", time=True), Shown("end", "End", time=True),
              Shown("characters", "Characters"))
    rubric = {  # Movie101v2's L1 (environment, characters) and L2 (plot)
        "l1_environment": "it describes the setting (place, time, scene) as the reference does (5: fully, 0: not at all)",
        "l1_characters": "it names the right characters and what they do (5: all right, 0: wrong or missing)",
        "l2_plot": "it conveys the plot development of the clip as the reference does (5: fully, 0: not at all)",
    }

    def queries(self, item: Narration) -> list[Query]:
        q = (f"Narrate what happens on screen between {hms(item.start)} and {hms(item.end)}: "
             "the setting, the characters and the plot, in a few sentences.")
        return [Query("answer", q, "open", until=item.end)]

    def judge_reference(self, item: Narration) -> str:
        chars = ", ".join(item.characters) or "(not listed)"
        return f"Reference narration: {item.reference}\nCharacters in the clip: {chars}\n"


def _check(name: str, task: Task, meta: dict[str, Any]) -> tuple[Task, dict[str, Any]]:
    """A task is keyed by the format it scores, so the two names must agree. A task that names its item
    `model` registers the format too (one registration for a benchmark), unless that format is already there."""
    if not isinstance(task, Task) or task.format != name or meta:
        raise MovieMemError(f"task {name!r}: register a Task instance under its own format name, with no options")
    if task.model is not None:
        if name not in FORMATS:
            if not task.keys:
                raise MovieMemError(f"task {name!r} names its item model: give the keys that identify its lines too (keys=...)")
            FORMATS.register(name, task.model, keys=list(task.keys), description=first_doc_line(task.model))
        elif FORMATS.get(name).model is not task.model:
            raise MovieMemError(f"task {name!r} names item model {task.model.__name__}, but format {name!r} is "
                                f"registered with {FORMATS.get(name).model.__name__}")
    return task, {}


TASKS: Registry[Task] = Registry("task", "moviemem.tasks", check=_check)  # keyed by format; entry points name a Task


def task_for(fmt: str) -> Task:
    if fmt not in TASKS:
        raise MovieMemError(f"no task for format {fmt!r}; tasks: {', '.join(TASKS)}")
    return TASKS.get(fmt)


for _t in (MCQTask(), ClaimsTask(), RelationsTask(), LocalizationTask(), OpenTask(), NarrationTask()):
    TASKS.register(_t.format, _t)

TaskFactory = Callable[[], Task]
__all__ = ["Query", "Probe", "Rubric", "Score", "Detail", "ChoiceDetail", "RelationDetail", "TimeDetail", "JudgedDetail",
           "PairDetail", "Shown", "Task", "parse_time", "TASKS", "task_for", "Item"]
