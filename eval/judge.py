"""An LLM judge for the formats whose task declares a rubric: open answers (MovieCORE's five criteria), clip
narrations (Movie101v2 L1/L2) and any plug-in format's own.

Each answered record of such a run directory is scored 0-5 on every criterion of its task's rubric
(`Task.rubric`) in one structured call, against the reference the task gives (`Task.judge_reference`). Judge calls go through the replay cache (rescoring costs
nothing); a failed call (transport error, reply that is not the requested JSON) is written as
failed with its reason, never dropped. With `repeats` > 1 each item is judged again at a
non-zero temperature, and agreement between repeats is reported.

Output: judge.jsonl in the run directory, one line per (record, repeat, judge backbone);
rerunning resumes, skipping what is there.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation.errors import MovieMemError
from . import metrics
from .formats import Item
from .log import backbone_spec, judgement_writer, only_writer
from .outputs import JudgeCounts, JudgeSummaryRow
from .records import EstimateLine, JudgementLine
from .run import RunLog, open_run
from .tasks import TASKS, Rubric, task_for


def rubric_for(fmt: str) -> Rubric | None:
    """The judge's criteria for a format: its task's rubric; None when the format has none (or no task)."""
    return TASKS.get(fmt).rubric if fmt in TASKS else None


class _Rubrics(Mapping[str, Rubric]):
    """format -> rubric, for every registered task that declares one (a plug-in's included), read when asked."""

    def __getitem__(self, fmt: str) -> Rubric:
        rubric = rubric_for(fmt)
        if rubric is None:
            raise KeyError(fmt)
        return rubric

    def __iter__(self) -> Iterator[str]:
        return (n for n, task in TASKS.load_all().items() if task.rubric is not None)  # a broken plug-in is logged

    def __len__(self) -> int:
        return sum(1 for _ in self)


RUBRICS: Mapping[str, Rubric] = _Rubrics()

SYSTEM = ("You grade answers about films against a reference. Score each criterion with an integer from 0 to 5 "
          "and reply with JSON only.")


def _schema(criteria: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "required": list(criteria),
            "properties": {c: {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]} for c in criteria}}


def judge_prompt(item: Item, prediction: str, repeat: int) -> str:
    """The judge's request for one answer: the item's reference, the prediction and its format's rubric."""
    task = task_for(item.format)
    rubric = task.rubric
    if rubric is None:
        raise MovieMemError(f"format {item.format!r} declares no judge rubric (its Task.rubric)")
    head = task.judge_reference(item)
    lines = "\n".join(f"- {k}: {v}" for k, v in rubric.items())
    run = f"\n(Grading pass {repeat + 1}.)" if repeat else ""
    return (f"{head}Prediction: {prediction}\n\nCriteria:\n{lines}\n\n"
            f"Reply as JSON with the keys {', '.join(rubric)}.{run}")


def judge_run(run: RunLog | str | Path, backbone: Any, *, repeats: int = 1, cache: str | Path | None = None,
              progress: Callable[[int, int], None] | None = None) -> JudgeCounts:
    """Judge every answered open / narration record; returns counts of judged, failed and skipped.
    The judge holds the run directory as its only writer, as a bench does."""
    run = open_run(run)
    fmt = run.header.format
    if run.task.rubric is None:
        judged = list(RUBRICS)  # the formats whose task declares a rubric
        names = " and ".join(filter(None, (", ".join(judged[:-1]), judged[-1] if judged else "no format")))
        raise MovieMemError(f"{run.dir} is a {fmt} run; the judge scores {names} answers")
    if repeats < 1:
        raise MovieMemError(f"repeats must be at least 1, not {repeats}")
    with only_writer(run.dir):
        return _judge(run, backbone, repeats, cache, progress)


def _judge(run: RunLog, backbone: Any, repeats: int, cache: str | Path | None,
           progress: Callable[[int, int], None] | None) -> JudgeCounts:
    from ..backbones import ReplayCache, Request, load, system, user

    spec = backbone_spec(backbone)  # as bench names backbones: never with URL credentials
    library = run.header.library
    cache = cache or (Path(library) / "cache" if library else None)
    if isinstance(backbone, str):
        bb = load(backbone, cache=cache if cache else False)
    else:
        bb = ReplayCache(backbone, cache) if cache else backbone
    grid, by_id = run.grid(), run.item
    done = {(j["key"], j["repeat"], j["judge"]) for j in run.judgements() if "key" in j}
    criteria = list(run.task.rubric or {})
    todo = [(r, k) for recs in grid.values() for r in recs if r.status == "answered" for k in range(repeats)
            if (r.key, k, spec) not in done]
    counts: JudgeCounts = {"judged": 0, "failed": 0, "skipped_invalid": sum(r.status != "answered" for recs in grid.values()
                                                                 for r in recs)}
    writer = judgement_writer(run.dir, getattr(bb, "secrets", list)())
    try:
        for n, (rec, k) in enumerate(todo, 1):
            answer = rec.answers.get("answer")
            prediction = answer.text if answer else ""
            prompt = judge_prompt(by_id[rec.item_id], prediction, k)
            row: JudgementLine = {"key": rec.key, "policy": rec.policy, "backbone": rec.backbone,
                                  "item_id": rec.item_id, "repeat": k, "judge": spec, "failed": True}  # until scored
            try:
                reply = bb.send(Request.build([system(SYSTEM), user(prompt)], json_schema=_schema(criteria), max_tokens=200,
                                              temperature=0.0 if k == 0 else 0.7))
                if reply.invalid or not isinstance(reply.data, dict):
                    row["error"] = reply.error or "no JSON scores"
                    row["raw"] = writer.redact(reply.raw or reply.text)[:500]  # cut after: no half key
                else:
                    scores = {c: int(reply.data[c]) for c in criteria}
                    row["failed"], row["scores"] = False, scores
                row["usage"] = reply.usage.to_dict()
            except MovieMemError as exc:
                row["failed"], row["error"] = True, str(exc)
            except Exception as exc:  # noqa: BLE001 - a failed judge call is recorded, never dropped
                row["failed"], row["error"] = True, f"{type(exc).__name__}: {exc}"
            writer.write(row)
            counts["failed" if row["failed"] else "judged"] += 1
            if progress:
                progress(n, len(todo))
    finally:
        writer.close()
    return counts


def judge_summary(run: RunLog | str | Path) -> list[JudgeSummaryRow]:
    """Per (policy, backbone, judge): each criterion's mean with a 95% t interval (an item's score is
    the mean of its successful repeats), failed calls, and agreement between repeats."""
    run = open_run(run)
    if run.task.rubric is None:
        return []
    criteria = list(run.task.rubric)
    groups: dict[tuple[str, str, str], dict[str, list[JudgementLine]]] = defaultdict(lambda: defaultdict(list))
    for j in run.judgements():
        groups[(j["policy"], j["backbone"], j["judge"])][j["item_id"]].append(j)
    out: list[JudgeSummaryRow] = []
    for (policy, backbone, judge), per_item in sorted(groups.items()):
        scored = [[j["scores"] for j in v if not j["failed"]] for v in per_item.values()]  # "scores": judged calls
        criteria_ci: dict[str, EstimateLine] = {}
        for c in criteria:
            item_scores = [float(np.mean([s[c] for s in ok])) if ok else None for ok in scored]
            criteria_ci[c] = metrics.mean_ci(item_scores).to_dict()
        overall = [float(np.mean([s[c] for s in ok for c in criteria])) for ok in scored if ok]
        row: JudgeSummaryRow = {"policy": policy, "backbone": backbone, "judge": judge, "items": len(per_item),
                                "calls": sum(len(v) for v in per_item.values()),
                                "failed": sum(j["failed"] for v in per_item.values() for j in v), "criteria": criteria_ci,
                                "overall": metrics.mean_ci(overall).to_dict()}
        pairs = [(a, b) for ok in scored for a, b in itertools.combinations(ok, 2)]
        if pairs:
            diffs = [abs(a[c] - b[c]) for a, b in pairs for c in criteria]
            row["agreement"] = {"pairs": len(pairs), "exact": float(np.mean([d == 0 for d in diffs])),
                                "within_1": float(np.mean([d <= 1 for d in diffs])),
                                "mean_abs_diff": float(np.mean(diffs))}
        out.append(row)
    return out
