"""Graph: answer from the narrative event graph instead of raw text.

Events are matched to the question (and to each option), the graph is followed from them along
causal, temporal and flashback edges, the causal chain between matched events is added, and the
events are shown with screen time and story order, flashbacks marked; the links and the path
are evidence. This is what "why" and "which comes first in the story" questions need and what
a flat transcript does not say.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms
from ...memory.view import FilmMemory
from ...retrievers.graph import event_evidence, film_graph, link_evidence
from ...retrievers.text import TextRetriever
from ..base import BasePolicy, Run
from ..calls import answer_once, body, stage_reason
from ..parsing import Parsed
from ..prompts import GRAPH
from ..types import Question, Step


class GraphPolicy(BasePolicy):
    """Event graph: match events to the question, follow causal / temporal / flashback paths, answer from the path."""

    @dataclass
    class Settings:
        seeds: int = 3  # events matched to the question
        per_option: int = 1  # events matched to each multiple-choice option
        hops: int = 1
        types: tuple[str, ...] = ("causal", "precondition", "before", "after", "flashback")
        max_events: int = 12
        max_links: int = 16
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        g = film_graph(film)
        if len(g) == 0:
            raise MovieMemError(f"{film.film_id!r} has no events to follow ({stage_reason(film, 'events')}); "
                                "every ingest builds them from the film's text: give it subtitles, captions or a "
                                "captioner and ingest again")
        run.note(f"graph made by {g.made_by()}: {len(g)} events, {g.nx.number_of_edges()} relations")
        match = TextRetriever("hybrid", ["event"])
        seeds: list[str] = []
        for i, query in enumerate([question.text] + [f"{question.text} {o}" for o in question.options]):
            k = s.seeds if i == 0 else s.per_option
            if k < 1:
                continue
            found = run.retrieved("event:hybrid", query, match.retrieve(film, query, k=k))
            seeds += [e.id.split(":", 1)[1] for e in found if e.id.split(":", 1)[1] not in seeds]
        seeds = [e for e in seeds if e in g]
        if not seeds:
            run.note("no event matched the question")
        sub = g.neighborhood(seeds, hops=s.hops, types=s.types) if seeds else g.neighborhood([], hops=0)
        chosen = list(dict.fromkeys(seeds + [e for e in sub.screen_order() if e not in seeds]))[: s.max_events]
        path: list[str] = []
        for a, b in combinations(seeds[: s.seeds], 2):
            for x, y in ((a, b), (b, a)):
                chain = g.chain(x, y)
                if len(chain) > 2:
                    path = chain
                    break
            if path:
                break
        if path:
            run.trace.append(Step("path", {"events": path}))
            chosen = list(dict.fromkeys(chosen + path))
        flash = set(g.flashbacks())
        events = [event_evidence(film.film_id, g, e, 1.0 if e in seeds else 0.5) for e in chosen]
        events.sort(key=lambda e: (e.start, e.end, e.id))
        links = link_evidence(film.film_id, g, chosen, s.types)
        links.sort(key=lambda r: (-r.score, r.id))
        links = links[: s.max_links]
        story = {e: i for i, e in enumerate(g.story_order(), 1)}
        lines = []
        for ev in events:
            eid = ev.id.split(":", 1)[1]
            mark = " [flashback]" if eid in flash else ""
            lines.append(f"{eid}: {hms(ev.start)}-{hms(ev.end)}, story step {story[eid]}{mark}: {ev.text}")
        run.show(events + links)
        run.note(f"{len(events)} events, {len(links)} links" + (f", causal path {' -> '.join(path)}" if path else ""))
        text = body(GRAPH, question, events="\n".join(lines) or "(none)",
                    links="\n".join(r.text for r in links) or "(none)")
        return answer_once(run, GRAPH, question, text, max_tokens=s.max_tokens, temperature=s.temperature)

