"""The events stage: narrative events per segment and the relations between them.

Without a text backbone (the default) it builds the rule graph (scene_stage.py, rule_graph.py):
no model, about 0.001x real time. With one chosen, by default (`events_mode="refine"`) the model
checks the rule graph's candidate links (refine.py). With `events_mode="extract"` the model path
below runs instead:

1. Extraction: each segment's captions, utterances and on-screen text become numbered lines;
   the text backbone (settings.backbone) lists events with a PropBank trigger and arguments, a
   one-line description and the lines that show it, under a JSON schema. An event's time is
   the span of its lines, so times come from the memory, not from the model's arithmetic.
2. Story time: flashbacks are found from cues (flashbacks.py) and `story_order` is filled.
3. Relations: candidate pairs from time and embeddings, classified by the backbone (relations.py),
   plus the flashback edges.

Bad model output is retried, then written to `invalid.jsonl` in the run's media folder and
counted in the stage note; it never fails the stage.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backbones import system, user
from ..backbones.structured import Answer, Ask, ask_json
from ..errors import MovieMemError
from ..memory.schema import EventRow, RelationRow, Row, SegmentRow
from .flashbacks import Span, TimedEvent, story_time
from .prompts_events import EXTRACT, MAX_EVENTS, RELATE, ROLES, extract_schema
from .relations import EventView, PairParams, candidate_pairs, classify
from .stage import Ctx, Outcome, Stage, chosen_backbone, chosen_backbone_label, load_chosen_backbone

MAX_LINES = 40  # lines per extraction request; longer segments are split into parts


@dataclass(frozen=True)
class Line:
    start: float
    end: float
    kind: str  # caption | dialogue | onscreen
    text: str
    speaker: str = ""

    def render(self) -> str:
        when = f"[{self.start:.1f}-{self.end:.1f}]"
        if self.kind == "dialogue":
            who = self.speaker or "someone"
            return f"{when} {who} says: \"{self.text}\""
        label = "on-screen text" if self.kind == "onscreen" else "we see"
        return f"{when} {label}: {self.text}"


@dataclass
class Extracted:
    trigger: str
    args: dict[str, str]
    description: str
    start: float
    end: float
    seg_idx: int


def _one_line(text: Any, limit: int) -> str:
    return " ".join(str(text).split())[:limit]


def gather_lines(ctx: Ctx) -> list[Line]:
    lines = [Line(c.start, c.end, "caption", c.text) for c in ctx.rows("captions", vectors=False)]
    lines += [Line(u.start, u.end, "dialogue", u.text, u.speaker) for u in ctx.rows("utterances", vectors=False)]
    lines += [Line(o.start, o.end, "onscreen", o.text) for o in ctx.rows("onscreen", vectors=False)]
    return sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: (ln.start, ln.end, ln.kind))


def split_by_segment(lines: list[Line], segments: list[SegmentRow]) -> list[tuple[SegmentRow, list[Line]]]:
    """Each line goes to the segment holding its midpoint; long segments become several parts."""
    starts = [seg.start for seg in segments[1:]]
    own: list[list[Line]] = [[] for _ in segments]
    for ln in lines:
        own[bisect_right(starts, (ln.start + ln.end) / 2)].append(ln)
    return [(seg, mine[i: i + MAX_LINES]) for seg, mine in zip(segments, own) for i in range(0, len(mine), MAX_LINES)]


def extraction_asks(parts: list[tuple[SegmentRow, list[Line]]], title: str, max_events: int = MAX_EVENTS) -> list[Ask]:
    asks = []
    for seg, lines in parts:
        text = EXTRACT.render(title=title or "(untitled)", seg=seg.seg_idx + 1, start=seg.start, end=seg.end,
                              lines="\n".join(ln.render() for ln in lines), max_events=max_events)
        asks.append(Ask(f"segment {seg.seg_idx} ({seg.start:.0f}-{seg.end:.0f} s)", [system(EXTRACT.system), user(text)]))
    return asks


def parse_events(data: dict[str, Any], seg: SegmentRow, lines: list[Line]) -> tuple[list[Extracted], list[dict[str, Any]]]:
    """Events grounded in the lines their seconds cover (times snap to those lines); events whose
    seconds cover no line of this part are returned as rejects."""
    out, rejects, seen = [], [], set()
    for item in data.get("events", []):
        secs = [float(x) for x in item.get("seconds", []) if isinstance(x, (int, float))]
        cited: list[Line] = []
        if len(secs) == 2:
            a, b = min(secs), max(secs)
            cited = [ln for ln in lines if min(ln.end, b) - max(ln.start, a) > 0]  # overlapping the span
            cited = cited or [ln for ln in lines if ln.start <= a <= ln.end]  # a point in time
        desc = _one_line(item.get("description", ""), 200)
        trigger = _one_line(item.get("predicate", ""), 30).lower()
        if not cited or not desc or not trigger:
            rejects.append({"why": "its seconds cover no line of this segment" if not cited
                            else "empty predicate or description", "event": item})
            continue
        key = desc.lower()
        if key in seen:
            continue
        seen.add(key)
        args = {r: _one_line(v, 80) for r, v in (item.get("roles") or {}).items() if r in ROLES and str(v).strip()}
        out.append(Extracted(trigger, args, desc, min(c.start for c in cited), max(c.end for c in cited), seg.seg_idx))
    return out, rejects


class EventsStage(Stage):
    """Events and relations. Without a backbone (the default) the rule graph is built from the
    scenes' text (scene_stage.py, rule_graph.py: no model, seconds a film); with one chosen the
    model extracts them (a local LLM takes minutes per film, so it is never run unasked). A
    graph a model built is kept by a later plain ingest rather than replaced by rules."""

    name = "events"
    needs = ("probe", "segments", "transcript", "ocr", "captions", "scenes")
    version = 1
    attempts = 3
    max_events = MAX_EVENTS  # per segment part
    extract_tokens = 1200  # reply budget of one extraction request
    # a local model on a CPU takes minutes for one extraction; the backbone default (120 s) is for APIs
    request_timeout_s = 900.0
    pairs = PairParams()

    def mode(self, ctx: Ctx) -> str:
        """rules (no backbone chosen), refine (a backbone checks the rule graph's links) or extract."""
        return "rules" if chosen_backbone(ctx) is None else ctx.settings.events_mode

    def params(self, ctx: Ctx) -> dict[str, Any]:
        mode = self.mode(ctx)
        if mode in ("rules", "refine"):
            from .prompts_events import REFINE
            from .rule_graph import RULES_VERSION
            from .scene_stage import SCENE_PARAMS

            rules = {"mode": mode, "rules": RULES_VERSION, "scenes": SCENE_PARAMS, "embedder": ctx.settings.embedder}
            if mode == "rules":
                return rules
            return {**rules, "backbone": chosen_backbone_label(ctx), "prompts": [REFINE.ref], "attempts": self.attempts,
                    "max_pairs": ctx.settings.refine_max_pairs}
        return {"mode": "model", "backbone": chosen_backbone_label(ctx), "prompts": [EXTRACT.ref, RELATE.ref],
                "embedder": ctx.settings.embedder, "attempts": self.attempts, "max_events": self.max_events,
                "extract_tokens": self.extract_tokens,
                "max_lines": MAX_LINES, "pairs": asdict(self.pairs)}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not any(ctx.has_rows(t) for t in ("captions", "utterances", "onscreen")):
            return "no captions, utterances or on-screen text to extract events from"
        if chosen_backbone(ctx) is None and self.model_graph_kept(ctx):
            return ("no text backbone chosen, and the film's graph was built by a model: pass --backbone SPEC to "
                    "rebuild it with a model, or --replace to drop it (the next ingest then builds the rule graph)")
        return None

    def model_graph_kept(self, ctx: Ctx) -> bool:
        """Whether the film's finished graph came from anything but the rules (a model, imported truth)."""
        made = self.finished_params(ctx, with_rows=True)
        return made is not None and made.get("mode") != "rules"

    def run(self, ctx: Ctx) -> Outcome:
        mode = self.mode(ctx)
        if mode == "rules":
            from .scene_stage import rule_graph_of, write_rule_graph

            return Outcome(model="rules", note=write_rule_graph(ctx, rule_graph_of(ctx)) + "; no model")
        if mode == "refine":
            return self._refine(ctx)
        backbone = load_chosen_backbone(ctx)
        title = ctx.inputs.film.title
        failures: list[dict[str, Any]] = []
        segments = sorted(ctx.rows("segments"), key=lambda s: s.seg_idx)
        if not segments:
            raise MovieMemError(f"film {ctx.film_id!r} has no segments to extract events from")
        parts = split_by_segment(gather_lines(ctx), segments)
        parts = [(seg, lines) for seg, lines in parts if lines]

        # 1. extraction
        answers = ask_json(backbone, extraction_asks(parts, title, self.max_events), extract_schema(self.max_events),
                           max_tokens=self.extract_tokens, attempts=self.attempts, timeout=self.request_timeout_s,
                           progress=lambda n: ctx.progress(n, len(parts)))
        found: list[Extracted] = []
        for (seg, lines), ans in zip(parts, answers):
            if not ans.ok:
                failures.append(_failure("extract", ans))
                continue
            events, rejects = parse_events(ans.data, seg, lines)
            found += events
            failures += [{"step": "extract", "key": ans.key, **r} for r in rejects]
        found.sort(key=lambda e: (e.start, e.end, e.seg_idx))
        ids = [f"e{i + 1:03d}" for i in range(len(found))]

        # 2. story time
        spans = [Span(ln.start, ln.end, ln.text, ln.kind) for _, lines in parts for ln in lines]
        st = story_time([TimedEvent(i, e.start, e.end, e.description) for i, e in zip(ids, found)], spans)
        flashback_ids = {e for b in st.blocks for e in b.events}

        # 3. relations
        vecs = np.zeros((0, 0), dtype=np.float32)
        dim = None
        if found:
            from ..models.embedder import get_embedder

            emb = get_embedder(ctx.settings.embedder, ctx.settings)
            vecs, dim = emb.embed([e.description for e in found]), emb.dim
        views = [EventView(i, e.start, e.end, e.description, st.story_order[i], i in flashback_ids)
                 for i, e in zip(ids, found)]
        pairs, cut = candidate_pairs(views, vecs, self.pairs)
        ctx.progress(0, len(pairs))
        classified, bad = classify(backbone, views, pairs, title=title, attempts=self.attempts,
                                   timeout=self.request_timeout_s, progress=lambda n: ctx.progress(n, len(pairs)))
        failures += [_failure("relate", a) for a in bad]

        ctx.write([EventRow(film_id=ctx.film_id, event_id=i, trigger=e.trigger, args=json.dumps(e.args, sort_keys=True),
                            description=e.description, start=round(e.start, 3), end=round(e.end, 3), seg_idx=e.seg_idx,
                            story_order=st.story_order[i], source="model", lines=[], vector=v.tolist())
                   for i, e, v in zip(ids, found, vecs)], dim)
        rels: list[Row] = [RelationRow(film_id=ctx.film_id, src=c.src, dst=c.dst, type=c.type, confidence=c.confidence,
                            rationale=c.rationale, source="model") for c in classified]
        rels += [RelationRow(film_id=ctx.film_id, src=f.src, dst=f.dst, type="flashback", confidence=f.confidence,
                             rationale=f.rationale, source="rules", rule="flashback-cue") for f in st.edges]
        ctx.write(rels)

        note = (f"model: {len(found)} events from {len(parts)} segment parts, {len(classified)} relations from "
                f"{len(pairs)} candidate pairs; rules: {len(st.edges)} flashback edge(s) from cues, "
                f"{len(st.blocks)} flashback(s)")
        if cut:
            note += f"; {cut} lower-scoring pairs not classified (max_pairs {self.pairs.max_pairs})"
        if failures:
            where = _record(ctx, failures)
            note += f"; {len(failures)} unusable model outputs recorded" + (f" in {where}" if where else "")
            ctx.reporter.warn(f"events of {ctx.film_id!r}: {len(failures)} model outputs were unusable after "
                              f"{self.attempts} attempts" + (f"; see {where}" if where else ""))
        return Outcome(model=backbone.model_id, note=note)


    def _refine(self, ctx: Ctx) -> Outcome:
        """The rule graph, with its candidate links checked by the backbone (refine.py)."""
        from .refine import refine
        from .scene_stage import rule_graph_of, write_rule_graph

        backbone = load_chosen_backbone(ctx)
        max_pairs = ctx.settings.refine_max_pairs
        graph, tally = refine(backbone, rule_graph_of(ctx), title=ctx.inputs.film.title, max_pairs=max_pairs,
                              attempts=self.attempts, timeout=self.request_timeout_s, progress=ctx.progress)
        note = write_rule_graph(ctx, graph) + "; " + tally.note(backbone.model_id, max_pairs)
        if tally.failed:
            where = _record(ctx, [_failure("refine", a) for a in tally.failed])
            note += f"; {len(tally.failed)} unusable model outputs recorded" + (f" in {where}" if where else "")
            ctx.reporter.warn(f"events of {ctx.film_id!r}: {len(tally.failed)} model outputs were unusable after "
                              f"{self.attempts} attempts; their rule links are kept" + (f"; see {where}" if where else ""))
        return Outcome(model=backbone.model_id, note=note)


def _failure(step: str, ans: Answer) -> dict[str, Any]:
    return {"step": step, "key": ans.key, "attempts": ans.attempts, "errors": ans.errors, "raw": ans.raw[:4000]}


def _record(ctx: Ctx, failures: list[dict[str, Any]]) -> Path | None:
    """Unusable outputs, one JSON object a line, next to the run (kept with it, swept with it)."""
    if not ctx.store.is_local:
        return None
    path = ctx.run_dir("events") / "invalid.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(f, ensure_ascii=False, default=str) + "\n" for f in failures), encoding="utf-8")
    return path

