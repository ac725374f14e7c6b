"""The events stage: narrative events per segment and the relations between them.

Without a text backbone (the default) it builds the rule graph (graph/rule_graph.py, written by
the scenes stage's helpers): no model, about 0.001x real time. With one chosen, by default
(`events_mode="refine"`) the model checks the rule graph's candidate links (graph/refine.py). With
`events_mode="extract"` the model extracts events and relations (graph/events.py).

Bad model output is retried, then written to `invalid.jsonl` in the run's media folder and
counted in the stage note; it never fails the stage.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ...backbones.structured import Answer, ask_json
from ...foundation.errors import MovieMemError
from ...graph.events import MAX_LINES, Extracted, Line, extraction_asks, parse_events, split_by_segment
from ...graph.flashbacks import TimedEvent, story_time
from ...graph.prompts import EXTRACT, MAX_EVENTS, RELATE, extract_schema
from ...graph.relations import EventView, PairParams, candidate_pairs, classify
from ...memory.lines import Span
from ...memory.schema import EventRow, RelationRow, Row
from ..stage import Ctx, Outcome, Stage, chosen_backbone, chosen_backbone_label, load_chosen_backbone


def gather_lines(ctx: Ctx) -> list[Line]:
    lines = [Line(c.start, c.end, "caption", c.text) for c in ctx.rows("captions", vectors=False)]
    lines += [Line(u.start, u.end, "dialogue", u.text, u.speaker) for u in ctx.rows("utterances", vectors=False)]
    lines += [Line(o.start, o.end, "onscreen", o.text) for o in ctx.rows("onscreen", vectors=False)]
    return sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: (ln.start, ln.end, ln.kind))


class EventsStage(Stage):
    """Events and relations. Without a backbone (the default) the rule graph is built from the
    scenes' text (stages/scenes.py, graph/rule_graph.py: no model, seconds a film); with one chosen the
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
            from ...graph.prompts import REFINE
            from ...graph.rule_graph import RULES_VERSION
            from .scenes import SCENE_PARAMS

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
            from .event_rules import rule_graph_of, write_rule_graph

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
            from ...models.embedder import get_embedder

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
        """The rule graph, with its candidate links checked by the backbone (graph/refine.py)."""
        from ...graph.refine import refine
        from .event_rules import rule_graph_of, write_rule_graph

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
