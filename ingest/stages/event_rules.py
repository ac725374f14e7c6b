"""The events stage's rules mode: the rule graph built on every ingest, with no model.

It reads the lines the scenes stage read (`scenes.memory_lines`), puts them back into the stored
scenes and builds the rule graph (graph/rule_graph.py), seconds a film; with a backbone chosen, the
events stage refines that graph (graph/refine.py) before it is written here.
"""

from __future__ import annotations

import json

from ...graph.rule_graph import SCENE_RULE, RuleGraph, build_graph
from ...graph.scenes import Scene, TextLine, assign_to_spans
from ...memory.schema import EventRow, RelationRow
from ..stage import Ctx, pooled_or_embedded
from .scenes import memory_lines


def stored_scenes(ctx: Ctx, lines: list[TextLine]) -> list[Scene]:
    """The scenes stage's scenes with their lines put back in them."""
    rows = sorted(ctx.rows("scenes"), key=lambda s: s.scene_idx)
    owned = assign_to_spans(lines, [(r.start, r.end) for r in rows])
    by_ref = {ln.ref: ln for ln in lines}
    return [Scene(r.scene_idx, r.start, r.end, own, list(r.characters), [by_ref[x] for x in r.lines if x in by_ref],
                  r.summary) for r, own in zip(rows, owned)]


def rule_graph_of(ctx: Ctx) -> RuleGraph:
    """The rule graph of the stored scenes; a film without video has a scene of dialogue as one event."""
    lines = memory_lines(ctx)
    return build_graph(stored_scenes(ctx, lines), lines, scene_units=not ctx.inputs.film.has_video)


def write_rule_graph(ctx: Ctx, graph: RuleGraph) -> str:
    """Events (with vectors, for matching questions to them) and relations (each says whether rules
    or a model made it: graph/refine.py checks rule edges with a backbone); returns the note."""
    evs = graph.events
    stored = {t: ctx.vectors(t) for t in ("utterances", "captions", "onscreen")} if any(
        e.rule == SCENE_RULE for e in evs) else {}
    lines = [[(stored[ln.ref.partition(":")[0]].get(int(ln.ref.partition(":")[2])), ln.text) for ln in e.lines]
             if e.rule == SCENE_RULE else None for e in evs]  # a scene's vector pools its lines'
    vecs, dim = pooled_or_embedded(ctx, [e.description for e in evs], lines) if evs else ([], None)
    ctx.write([EventRow(film_id=ctx.film_id, event_id=e.event_id, trigger=e.trigger,
                        args=json.dumps(e.args, sort_keys=True), description=e.description, start=round(e.start, 3),
                        end=round(e.end, 3), seg_idx=e.scene_idx, story_order=e.story_order, source="rules",
                        lines=e.refs, vector=v) for e, v in zip(evs, vecs)], dim)
    ctx.write([RelationRow(film_id=ctx.film_id, src=r.src, dst=r.dst, type=r.type, confidence=r.confidence,
                           rationale=r.rationale, source=r.source, rule=r.rule, lines=r.lines)
               for r in graph.relations])
    kinds = ", ".join(f"{n} {t}" for t, n in graph.by_type().items()) or "none"
    return f"rules: {len(evs)} events, {len(graph.relations)} relations ({kinds}), {graph.flashbacks} flashback(s)"
