"""Two configurations side by side on one HTML page (`moviemem compare A B --html OUT`, issue 57).

The figures of `compare` say how many items only one side got right; this page shows which, first: each
item where the sides disagree, then those both got wrong, then those both got right, with both sides'
evidence on one film timeline (A above, B below, the gold span behind both), their verdicts and tokens.
Rows carry their group of films and category, and two menus filter by them (a script of a few lines: the
page opens from disk, and without the script every row shows). Every text from the data is escaped by
Jinja's autoescaping: questions, subtitles and model replies are data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_path
from ..foundation.timefmt import hms
from .compare import ALL, Side, pick
from .formats import Item, item_category
from .names import display_name
from .records import AnswerRecord, Config, EvidenceRecord, ResultRecord
from .timeline import FilmFacts, film_facts, timeline
from .views import ComparisonRow, ShownEvidence, SideView, TimelineBar

TEMPLATES = Path(__file__).parent / "templates"  # shipped in the wheel beside the inspector's
TEMPLATE = "compare.html.j2"
ORDER = {"A only": 0, "B only": 1, "both wrong": 2, "both right": 3}


@dataclass(frozen=True)
class Loaded:
    """One side as the page shows it: its configuration, where each of its scored records starts in the log and
    whether it is right (by item id), and its run's library. The records themselves are read again one pair at a
    time, as the page is written (issue 62: a large run's records held in full took 1.2 GB)."""

    config: Config
    records: dict[str, tuple[int, bool]]
    library: str | None


def _load(side: Side) -> tuple[Loaded, dict[str, Item]]:
    config, _, _ = pick(side)  # the same configuration `compare` pairs, with its errors
    run = side.run
    by_id = run.item
    recs = {r.item_id: (offset, bool(r.correct)) for offset, r in run.records_at()
            if r.config == config and r.item_id in by_id and r.status in ("answered", "invalid")
            and (r.correct is not None or r.status == "invalid")}
    return Loaded(config, recs, run.header.library), by_id


def _evidence(rec: ResultRecord) -> list[EvidenceRecord]:
    return [e for a in rec.answers.values() for e in a.evidence]


def _shown(e: EvidenceRecord) -> ShownEvidence:
    def t(v: Any) -> str:
        try:
            return hms(float(v), tenths=True)
        except (TypeError, ValueError):
            return "?"

    return {"kind": e.kind or "?", "time": f"{t(e.start)}–{t(e.end)}", "text": str(e.text or ""), "cited": bool(e.cited)}


def _reply(answers: Mapping[str, AnswerRecord]) -> str:
    return " / ".join(f"{a.choice if a.choice is not None else '—'}" + (f" ({a.error})" if a.error else "")
                      for a in answers.values())


def _side_view(rec: ResultRecord, bar: TimelineBar) -> SideView:
    right = bool(rec.correct)
    return {"verdict": "right" if right else "invalid" if rec.status == "invalid" else "wrong",
            "css": "ok" if right else "bad", "choice": _reply(rec.answers),
            "tokens": rec.usage.input_tokens, "output_tokens": rec.usage.output_tokens,
            "calls": sum(a.calls for a in rec.answers.values()), "evidence": [_shown(e) for e in _evidence(rec)],
            "timeline": bar}


def _end(spans: list[EvidenceRecord], gold: list[tuple[float, float]]) -> float:
    ends = [float(e.end) for e in spans if isinstance(e.end, (int, float))] + [b for _, b in gold]
    return max(ends + [1.0])


class Rows:
    """The page's rows, each made (its two records read by their offsets) as the page is written: a large run's
    evidence texts are never held at once. Its length, truth and kinds are known before any is made."""

    def __init__(self, a: Side, b: Side, paired: list[tuple[str, str, Item]], side_a: Loaded, side_b: Loaded,
                 group_of: Mapping[str, str], facts: Mapping[str, FilmFacts]):
        self.a, self.b, self.paired = a, b, paired
        self.side_a, self.side_b, self.group_of, self.facts = side_a, side_b, group_of, facts

    def __len__(self) -> int:
        return len(self.paired)

    def __bool__(self) -> bool:
        return bool(self.paired)

    def kinds(self) -> list[str]:
        return [kind for _, kind, _ in self.paired]

    def categories(self) -> list[str]:
        return sorted({c for _, _, it in self.paired if (c := item_category(it) or "")})

    def __iter__(self) -> Iterator[ComparisonRow]:
        for iid, kind, it in self.paired:
            [ra] = self.a.run.read_at([self.side_a.records[iid][0]])
            [rb] = self.b.run.read_at([self.side_b.records[iid][0]])
            yield self._row(iid, kind, it, ra, rb)

    def _row(self, iid: str, kind: str, it: Item, ra: ResultRecord, rb: ResultRecord) -> ComparisonRow:
        gold = [(float(g[0]), float(g[1])) for g in getattr(it, "evidence", None) or []]
        film = self.facts.get(it.film_id)
        length = film.duration if film else max(_end(_evidence(ra), gold), _end(_evidence(rb), gold))
        d = it.model_dump(mode="json")
        return {"id": iid, "film": it.film_id, "group": self.group_of.get(it.film_id, ""),
                "category": item_category(it) or "", "kind": kind,
                "question": str(d.get("question") or d.get("true_claim") or d.get("event_a") or ""),
                "options": [str(o) for o in d.get("options") or []], "answer": d.get("answer"),
                "gold": [f"{hms(x, tenths=True)}–{hms(y, tenths=True)}" for x, y in gold],
                "a": _side_view(ra, timeline(length, _evidence(ra), gold)),
                "b": _side_view(rb, timeline(length, _evidence(rb), gold)),
                "length": hms(length)}


def _rows(a: Side, b: Side, groups: Mapping[str, frozenset[str]] | None) -> tuple[Rows, Config, Config]:
    """The paired items (same film, same question), the discordant ones first, their records not yet read."""
    (side_a, items_a), (side_b, items_b) = _load(a), _load(b)
    if a.run_dir.resolve() == b.run_dir.resolve() and side_a.config == side_b.config:
        raise MovieMemError("both sides are the same configuration of the same run; name two policies")
    group_of = {f: name for name, films in (groups or {}).items() for f in films}
    facts = film_facts(side_a.library, {it.film_id for it in items_a.values()})
    paired: list[tuple[str, str, Item]] = []
    for iid, (_, right_a) in side_a.records.items():
        it, other = items_a[iid], items_b.get(iid)
        if iid not in side_b.records or other is None or (it.film_id, a.run.digests[iid]) != (other.film_id, b.run.digests[iid]):
            continue
        right_b = side_b.records[iid][1]
        paired.append((iid, "both right" if right_a and right_b else "A only" if right_a else
                       "B only" if right_b else "both wrong", it))
    paired.sort(key=lambda p: ORDER[p[1]])
    return Rows(a, b, paired, side_a, side_b, group_of, facts), side_a.config, side_b.config


def comparison_rows(a: Side, b: Side, groups: Mapping[str, frozenset[str]] | None = None) -> tuple[
        list[ComparisonRow], Config, Config]:
    """The page's rows: paired items (same film, same question), the discordant ones first."""
    rows, config_a, config_b = _rows(a, b, groups)
    return list(rows), config_a, config_b


def write_compare_page(a: Side, b: Side, out: str | Path, groups: Mapping[str, frozenset[str]] | None = None) -> Path:
    """The side-by-side page, written whole or not at all."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    out = Path(out)
    if not out.parent.is_dir():
        raise MovieMemError(f"cannot write {out}: no folder {out.parent}")
    rows, config_a, config_b = _rows(a, b, groups)
    kinds = rows.kinds()
    counts = {k: kinds.count(k) for k in ORDER}
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)
    name_a, name_b = display_name(config_a[0]), display_name(config_b[0])  # the full specs are in each run.json
    chunks = env.get_template(TEMPLATE).generate(  # written as it is made: the page of a large run is never held
        title=f"moviemem: {name_a} / {config_a[1]} vs {name_b} / {config_b[1]}",
        a={"run": str(a.run_dir), "policy": name_a, "backbone": config_a[1]},
        b={"run": str(b.run_dir), "policy": name_b, "backbone": config_b[1]},
        rows=rows, counts=counts, groups=[g for g in (groups or {}) if g != ALL], categories=rows.categories())
    with atomic_path(out, suffix=out.suffix) as tmp, tmp.open("w", encoding="utf-8", newline="") as f:
        for chunk in chunks:
            f.write(chunk)
    return out
