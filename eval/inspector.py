"""The static HTML inspector of a run directory: one page per item (question, options, every policy's
answer, evidence with timestamps and frame thumbnails, the trace), an index, and a page per film
(timeline.py). The pages are the Jinja2 templates in templates/ beside this file; all text in them is
escaped by autoescaping, so a subtitle that reads `<script>` shows as text.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..foundation.thumbs import jpeg_thumbnail
from ..foundation.timefmt import hms
from . import evidence
from .formats import Item, item_category
from .log import CallLog
from .markdown import money
from .names import display_names
from .records import AnswerRecord, Config, EvidenceRecord, ResultRecord
from .run import RunLog, open_run
from .tasks import Task
from .views import (
    AnswerLane,
    AnswerView,
    CallView,
    CategoryRow,
    EvidenceView,
    IndexCell,
    IndexRow,
    MessageView,
    OptionView,
    PromptLine,
    QueryView,
    StepView,
    Still,
)

if TYPE_CHECKING:
    from jinja2 import Environment

    from .timeline import FilmFacts

INSPECTOR = "inspector"
TEMPLATES = Path(__file__).parent / "templates"  # shipped in the wheel (pyproject's package-data)
THUMB_WIDTH = 192
INDEX_PAGE = 200  # index rows shown at once (filters and sorting work on all of them)


def _env() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)
    env.globals["thumb_width"] = THUMB_WIDTH
    return env


def _hms(t: Any) -> str:
    try:
        return hms(float(t), tenths=True)
    except (TypeError, ValueError):
        return "?"


IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp"})


def _thumb(frame: str | None, library: str | None, out_dir: Path) -> str | None:
    """A small JPEG copy of an evidence frame under inspector/thumbs/; None when the file is gone,
    and for anything but an image in the media folder of a real library: results.jsonl, run.json
    and the faces table name the paths, and a run from elsewhere (run.json saying `library: "/"`)
    must not copy the user's own pictures into a page."""
    if not frame or not library:
        return None
    root = Path(library).resolve()
    if not (root / "films.lance").is_dir():  # not a moviemem library: nothing of it is served
        return None
    media = root / "media"
    path = (root / frame).resolve()  # an absolute `frame` stays itself
    if not path.is_relative_to(media) or path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
        return None
    name = hashlib.sha1(str(path).encode()).hexdigest()[:16] + ".jpg"
    dest = out_dir / name
    if not dest.exists():
        thumb = jpeg_thumbnail(path, THUMB_WIDTH, quality=80)
        if thumb is None:
            return None
        dest.write_bytes(thumb[0])
    return name


def _film_pages(env: Environment, library: str | None, film_ids: list[str], root: Path) -> dict[str, str]:
    """films/<id>.html for each film of the run the library holds: its memory on one timeline."""
    from .timeline import film_page

    pages = {}
    for fid in film_ids:
        data = film_page(library, fid) if library else None
        if data is None:
            continue
        for card in data["characters"]:
            card["thumb"] = _thumb(card["thumbnail"], library, root / "thumbs")
        (root / "films").mkdir(exist_ok=True)
        (root / "films" / f"{fid}.html").write_text(env.get_template("film.html.j2").render(title=f"film {fid}", f=data, hms=_hms),
                                                    encoding="utf-8")
        pages[fid] = f"films/{fid}.html"
    return pages


def _category_table(items: list[Item], configs: list[Config],
                    by_item: Mapping[str, Mapping[Config, ResultRecord | Verdict]]) -> list[CategoryRow]:
    """Accuracy per category and configuration with its 95% Wilson interval (invalid counts as
    wrong, as in report.md), and an "all items" row."""
    from .metrics import accuracy, per_category

    cells: dict[str, list[str]] = defaultdict(lambda: [""] * len(configs))
    for j, c in enumerate(configs):
        pairs = [(by_item[it.id][c].correct, item_category(it)) for it in items
                 if c in by_item.get(it.id, {}) and by_item[it.id][c].status != "unfit"]
        if not pairs:
            continue
        for cat, est in [*per_category([p[0] for p in pairs], [p[1] for p in pairs]).items(),
                         ("all items", accuracy([p[0] for p in pairs]))]:
            cells[cat][j] = f"{100 * est.value:.1f} ({100 * est.ci_low:.0f}–{100 * est.ci_high:.0f}), n={est.n}"
    return [{"category": k, "cells": cells[k]} for k in sorted(cells, key=lambda k: (k == "all items", k))]


def _still(e: EvidenceRecord, film: FilmFacts | None, library: str | None, out_dir: Path) -> Still:
    """The evidence's own frame, else (text evidence) the film's stored strip frame nearest to its
    middle: {"thumb": file name or None, "thumb_t": that frame's time when it is the nearest one}."""
    if e.frame:
        return {"thumb": _thumb(e.frame, library, out_dir), "thumb_t": None}
    span = e.span
    if span is None:
        return {"thumb": None, "thumb_t": None}
    near = film.nearest_frame((span[0] + span[1]) / 2) if film is not None else None
    if near is None:
        return {"thumb": None, "thumb_t": None}
    return {"thumb": _thumb(near[0], library, out_dir), "thumb_t": _hms(near[1])}


def _mark(rec: ResultRecord | None) -> tuple[str, str]:
    if rec is None:
        return "", "muted"
    if rec.status == "unfit":
        return "∅", "muted"
    if rec.status == "invalid":
        return "!", "inv"
    if rec.correct is None:
        return "·", "muted"
    return ("✔", "ok") if rec.correct else ("✘", "bad")


def _outcome(rec: ResultRecord | None) -> str:
    """found, lucky, misread or not found; "" without gold evidence or a verdict."""
    return (rec.evidence.outcome if rec is not None and rec.evidence is not None else None) or ""


GIST_CHARS = 70  # an index row's question, shortened
REASON_CHARS = 40  # an invalid answer's reason in its index cell (in full on hover and on the item page)


def _shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a space where one is near."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut).rstrip(" ,;:") + "…"


def _cell(rec: ResultRecord | None) -> IndexCell:
    """An index cell: the verdict's mark, and what qualifies it. A right answer the gold evidence was never
    shown to (lucky), or no evidence at all (closed-book, a failed search), is marked apart (css
    `luck`) so it does not read as a success of the memory; an invalid one says why."""
    mark, css = _mark(rec)
    if rec is None:
        return {"mark": mark, "css": css, "note": "", "title": ""}
    outcome = _outcome(rec)
    shown = any(a.evidence for a in rec.answers.values())
    if rec.status in ("invalid", "unfit"):
        reason = str(rec.reason or "no reason recorded")
        return {"mark": mark, "css": css, "note": _shorten(reason, REASON_CHARS), "title": reason}
    notes = [o for o in (outcome, "" if shown else "no evidence") if o]
    lucky = css == "ok" and (outcome == "lucky" or not shown)
    return {"mark": mark, "css": "luck" if lucky else css, "note": ", ".join(notes),
            "title": "right without the film's support: " + ("the gold evidence was never shown" if outcome == "lucky"
                                                              else "no evidence was shown") if lucky else ""}


def _item_fields(task: Task, item: Item) -> tuple[list[tuple[str, str]], list[OptionView]]:
    """The fields and options of an item's page, as its format's task declares them (Task.shown, Task.options)."""
    return task.shown(item), [{"text": text, "gold": gold} for text, gold in task.options(item)]


_LINE_HEAD = re.compile(r"^(\[\d+(:\d\d){1,2}(\.\d)?\]|\[\d+\]|\d+[.)]|[-–*•])\s*")  # a time mark, a number, a dash


def _norm(line: str) -> str:
    return " ".join(line.split())


def _evidence_lines(a: AnswerRecord, gold: list[tuple[float, float]]) -> dict[str, str]:
    """Each line of the evidence an answer was shown (as the prompt repeats it), with how it is marked."""
    marks: dict[str, set[str]] = defaultdict(set)
    for e in a.evidence:
        css = {"cited" if e.cited else "shown"}
        if e.span is not None and any(evidence.overlaps(e.span, g) for g in gold):
            css.add("gold")
        for line in (e.text or "").splitlines():
            norm = _norm(_LINE_HEAD.sub("", line.strip()))
            if len(norm) >= 8:
                marks[norm] |= css
    return {k: " ".join(sorted(v - {"shown"} if "cited" in v else v)) for k, v in marks.items()}


def _calls(log: CallLog, key: str, a: AnswerRecord, gold: list[tuple[float, float]]) -> list[CallView]:
    """The answer's calls as sent, each message's lines marked where they repeat evidence (shown, cited, gold)."""
    if not a.call_ids:
        return []
    marks = _evidence_lines(a, gold)
    views: list[CallView] = []
    for k, line in enumerate(log.of(a.call_ids), 1):
        messages: list[MessageView] = []
        for m in line.messages:
            text = "".join(log.text(p.text) if p.text is not None else f"[{'image' if p.image else 'video' if p.video else 'audio'}: "
                           f"{p.image or p.video or p.audio}]\n" for p in m.parts)
            lines: list[PromptLine] = [{"text": t, "css": marks.get(_norm(_LINE_HEAD.sub("", t.strip())), "")}
                                       for t in text.splitlines()]
            lines += [{"text": f"[tool call: {c.name}({c.arguments})]", "css": ""} for c in m.tool_calls]
            messages.append({"role": m.role, "lines": lines})
        r = line.reply
        views.append({"head": f"{key}: call {k} of {len(a.call_ids)}, prompt {line.prompt} v{line.version}, "
                              f"{line.usage.input_tokens} tokens in",
                      "messages": messages,
                      "reply": r.text + "".join(f"\n[tool call: {c.name}({c.arguments})]" for c in r.tool_calls)
                               + (f"\n(invalid: {r.error})" if r.invalid else "")})
    return views


def _query(key: str, a: AnswerRecord, film: FilmFacts | None, library: str | None, thumbs: Path,
           gold: list[tuple[float, float]], calls: CallLog | None = None) -> QueryView:
    """One answer on its item page: choice, text, evidence (with stills, gold marked), timeline, trace and usage."""
    from .timeline import timeline

    ev: list[EvidenceView] = [
        {"kind": e.kind, "time": f"{_hms(e.start)}–{_hms(e.end)}", "text": e.text or "", "frame": e.frame,
         **_still(e, film, library, thumbs), "score": f"{e.score:.3f}" if e.score is not None else "",
         "retriever": e.retriever or "", "cited": bool(e.cited),
         "gold": e.span is not None and any(evidence.overlaps(e.span, (g[0], g[1])) for g in gold)}
        for e in a.evidence]
    trace: list[StepView] = [{"kind": s.kind if "kind" in s.model_fields_set else "?",
                              "body": json.dumps(s.data, ensure_ascii=False, indent=1)} for s in a.trace]
    u = a.usage
    return {"timeline": timeline(film.duration if film else None, a.evidence, gold),
            "key": key, "choice": a.choice, "confidence": a.confidence, "text": a.text, "error": a.error,
            "evidence": ev, "trace": trace, "calls": _calls(calls, key, a, gold) if calls else [],
            "usage": f"{u.input_tokens} input / {u.output_tokens} output tokens, {u.images} images, "
                     f"{u.latency_s or 0:.2f} s{_replay_note(a)}, cost {money(u.cost_usd)}"}


def _emptied(root: Path) -> None:
    """Remove what `root` holds, so the inspector is written from scratch: a run folder from elsewhere may
    carry files or links there (`inspector/root -> /`) that the server would otherwise serve. A link is
    removed, never followed."""
    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)


class Verdict(NamedTuple):
    """What the index's category table reads of a record."""

    correct: bool | None
    status: str


def _verdicts(run: RunLog) -> tuple[dict[str, dict[Config, Verdict]], dict[str, dict[Config, int]]]:
    """Each record's verdict by item and configuration, and where each record starts in the log: the records
    `log_grid(unfit=True)` holds (every configuration with a record that is not transient), none held."""
    known = run.item
    by_item: dict[str, dict[Config, Verdict]] = defaultdict(dict)
    at: dict[str, dict[Config, int]] = {}
    for offset, r in run.records_at():
        if r.status == "transient":
            continue
        at.setdefault(r.item_id, {})[r.config] = offset
        if r.item_id in known:
            by_item[r.item_id][r.config] = Verdict(r.correct, r.status)
    return by_item, at


def write_inspector(run: RunLog | str | Path) -> Path:
    """inspector/index.html and inspector/items/N.html; thumbnails copied under inspector/thumbs."""
    run = open_run(run)
    header, items, run_dir = run.header, run.items, run.dir
    # a large log is never held whole, and read once: the index keeps each record's verdict and where it starts,
    # each item's page reads its own records in full by those offsets (issue 62)
    by_item, at = _verdicts(run)
    root = run_dir / INSPECTOR
    _emptied(root)
    (root / "items").mkdir(parents=True, exist_ok=True)
    (root / "thumbs").mkdir(exist_ok=True)
    env = _env()
    configs = sorted({c for v in at.values() for c in v})
    names = display_names(p for p, _ in configs)  # the short names every table shows; run.json keeps the specs
    title = f"moviemem inspector: {Path(header.benchmark or run_dir).name}"
    from .timeline import film_facts

    facts = film_facts(header.library, {it.film_id for it in items})
    calls = run.calls
    film_pages = _film_pages(env, header.library, sorted(facts), root)
    rows: list[IndexRow] = []
    task = run.task
    item_tpl = env.get_template("item.html.j2")
    for n, it in enumerate(items, 1):
        page = f"{n}.html"
        recs = dict(zip(at[it.id], run.read_at(at[it.id].values()))) if it.id in by_item else {}
        fields, options = _item_fields(task, it)
        question = fields[0][1] if fields else ""
        rows.append({"id": it.id, "film": it.film_id, "category": item_category(it), "page": page,
                     "question": question, "gist": _shorten(question, GIST_CHARS),
                     "marks": [_mark(recs.get(c)) for c in configs], "cells": [_cell(recs.get(c)) for c in configs],
                     "outcomes": [_outcome(recs.get(c)) for c in configs]})
        gold = [(float(g[0]), float(g[1])) for g in getattr(it, "evidence", None) or []]
        if gold:
            fields.append(("Gold evidence", ", ".join(f"{_hms(a)}–{_hms(b)}" for a, b in gold)))
        answers: list[AnswerView] = []
        for c in configs:
            r = recs.get(c)
            if r is None:
                continue
            cell = _cell(r)
            verdict = {"✔": "right", "✘": "wrong", "!": "invalid", "·": "not scored",
                       "∅": "not sent: the prompt was longer than the backbone's context"}.get(cell["mark"], "") + (
                f" ({cell['note']})" if cell["note"] and r.status not in ("invalid", "unfit") else "")
            queries = [_query(key, a, facts.get(it.film_id), header.library, root / "thumbs", gold, calls)
                       for key, a in r.answers.items()]
            answers.append({"policy": names[c[0]], "backbone": c[1], "css": cell["css"], "verdict": verdict,
                            "reason": r.reason, "queries": queries})
        lanes: list[AnswerLane] = [
            {"label": f"{a['policy']} / {a['backbone']}" + (f" ({q['key']})" if len(a["queries"]) > 1 else ""),
             "css": a["css"], "verdict": a["verdict"], "timeline": q["timeline"], "usage": q["usage"]}
            for a in answers for q in a["queries"]]
        (root / "items" / page).write_text(
            item_tpl.render(title=it.id, item=it, category=item_category(it), fields=fields, options=options,
                            answers=answers, lanes=lanes, hms=_hms, film_page=film_pages.get(it.film_id)),
            encoding="utf-8")
    (root / "index.html").write_text(env.get_template("index.html.j2").render(
        title=title, fmt=header.format, items=items, configs=[(names[p], b) for p, b in configs], rows=rows,
        categories=_category_table(items, configs, by_item), outcomes=evidence.OUTCOMES, page_size=INDEX_PAGE),
        encoding="utf-8")
    return root / "index.html"


def _replay_note(answer: AnswerRecord) -> str:
    """Marks a latency that is not this run's: the calls were answered from the replay cache."""
    calls, replayed = answer.calls, answer.replayed_calls
    if not calls or not replayed:
        return ""
    return " (replayed from the cache: the original calls' latency)" if replayed == calls else \
        f" ({replayed} of {calls} calls replayed from the cache)"
