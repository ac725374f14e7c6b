"""Refinement of the rule graph with a text backbone: the model checks the links rules proposed.

The rule graph (rule_graph.py) is cheap and built on every film, but its causal, precondition and
coreference links are candidates read from discourse markers and shared words. Here a backbone
reads each candidate pair with the lines both events come from and confirms the link, relabels it
(any of the relation types, "after" turned round into "before"), or rejects it ("none"). Events and
the screen-order, time-word and flashback-cue links stay as the rules made them. The highest-
confidence candidates are asked first, up to `max_pairs`; the rest stay rule links, said in the
note. One request per pair under a JSON schema, with the instructions first so that a local model
reuses them as a cached prefix; replies go through the replay cache, so a stopped run asks again
only what it had not finished. A reply still unusable after the retries leaves the rule link as it
was and is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..backbones import Backbone, system, user
from ..backbones.structured import Answer, Ask, ask_json
from ..foundation.timefmt import hms
from .prompts import REFINE, RELATION_SCHEMA
from .relations import check_score
from .rule_graph import RuleEvent, RuleGraph, RuleRelation, dedupe
from .scenes import prompt_line

ASKED = ("causal", "precondition", "coreference")  # candidate links a model checks; the others are read off the film
MAX_LINES = 6  # lines of each event shown (an event rarely needs more to be understood)


@dataclass
class Tally:
    asked: int = 0
    not_asked: int = 0  # candidates beyond max_pairs, kept as rule links
    confirmed: int = 0
    relabelled: int = 0
    rejected: int = 0
    failed: list[Answer] = field(default_factory=list)

    def note(self, model: str, max_pairs: int) -> str:
        text = (f"model {model} checked {self.asked} candidate link(s): {self.confirmed} confirmed, "
                f"{self.relabelled} relabelled, {self.rejected} rejected")
        if self.failed:
            text += f", {len(self.failed)} unusable (kept as rule links)"
        if self.not_asked:
            text += f"; {self.not_asked} lower-confidence candidate(s) not asked (max_pairs {max_pairs}), kept as rule links"
        return text


def _lines(e: RuleEvent) -> str:
    shown = [prompt_line(ln) for ln in e.lines[:MAX_LINES]]
    return "\n".join(shown) + (f"\n(+{len(e.lines) - MAX_LINES} more lines)" if len(e.lines) > MAX_LINES else "")


def refine_asks(graph: RuleGraph, pairs: list[RuleRelation], title: str) -> list[Ask]:
    events = {e.event_id: e for e in graph.events}
    asks = []
    for r in pairs:
        a, b = events[r.src], events[r.dst]
        text = REFINE.render(title=title, a_time=hms(a.start), a_desc=a.description, a_lines=_lines(a),
                             b_time=hms(b.start), b_desc=b.description, b_lines=_lines(b),
                             proposed=r.type, why=r.rationale)
        asks.append(Ask(f"refine {r.src}->{r.dst} {r.type}", [system(REFINE.system), user(text)]))
    return asks


def refine(backbone: Backbone, graph: RuleGraph, *, title: str, max_pairs: int, attempts: int,
           timeout: float | None = None, progress: Callable[[int, int], None] | None = None) -> tuple[RuleGraph, Tally]:
    """The graph with its candidate links checked by the backbone, and what happened to them."""
    candidates = [r for r in graph.relations if r.type in ASKED]
    ranked = sorted(candidates, key=lambda r: (-r.confidence, r.src, r.dst))
    pairs = ranked[:max_pairs]
    tally = Tally(asked=len(pairs), not_asked=len(ranked) - len(pairs))
    answers = ask_json(backbone, refine_asks(graph, pairs, title), RELATION_SCHEMA, max_tokens=96, attempts=attempts,
                       check=check_score, timeout=timeout,
                       progress=(lambda n: progress(n, len(pairs))) if progress else None)
    checked: dict[int, RuleRelation | None] = {}
    for r, ans in zip(pairs, answers, strict=True):
        if not ans.ok:
            tally.failed.append(ans)
            continue
        label = str(ans.data["relation"])
        if label == "none":
            tally.rejected += 1
            checked[id(r)] = None
            continue
        src, dst = (r.dst, r.src) if label == "after" else (r.src, r.dst)
        typ = "before" if label == "after" else label
        tally.confirmed += typ == r.type and src == r.src
        tally.relabelled += not (typ == r.type and src == r.src)
        checked[id(r)] = replace(r, src=src, dst=dst, type=typ, confidence=round(float(ans.data["score"]), 3),
                                 rule=f"model<-{r.rule}", source="model",
                                 rationale=" ".join(str(ans.data["rationale"]).split())[:200])
    relations: list[RuleRelation] = []
    for r in graph.relations:
        if id(r) not in checked:
            relations.append(r)
        elif (done := checked[id(r)]) is not None:
            relations.append(done)
    return replace(graph, relations=dedupe(relations)), tally
