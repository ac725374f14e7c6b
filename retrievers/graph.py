"""Graph retrieval: events matched to the query, plus their neighbours in the narrative graph.

Matching is hybrid text search over event descriptions; the neighbourhood follows the chosen
relation types (causal, temporal, flashback, ...) for a few hops, so a "why" question reaches
the causes of the matched event even when the cause's wording shares nothing with the question.
Links between the returned events come back as `relation` evidence, so the path is evidence too.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Iterable, Sequence

from ..graph.narrative import NarrativeGraph, NarrativeGraphWarning
from ..memory.view import FilmMemory
from .base import Retriever
from .text import TextRetriever
from .types import Evidence

DECAY = 0.5  # a neighbour scores DECAY**hops times the best seed it was reached from

# how an edge "src TYPE dst" reads in a prompt
READS = {"causal": "causes", "precondition": "enables", "before": "happens before", "after": "happens after",
         "overlap": "happens at the same time as", "hierarchical": "includes", "coreference": "is the same event as",
         "flashback": "is a flashback to before"}


def film_graph(film: FilmMemory) -> NarrativeGraph:
    """The event graph of what the view shows; contradictions were reported at ingest, not again per query."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrativeGraphWarning)
        return NarrativeGraph.from_memory(film)


def event_evidence(film_id: str, g: NarrativeGraph, event_id: str, score: float = 0.0, retriever: str = "graph") -> Evidence:
    d = g.nx.nodes[event_id]
    return Evidence("event", film_id, float(d["start"]), float(d["end"]), str(d["description"]), score=score,
                    retriever=retriever, id=f"event:{event_id}")


def link_evidence(film_id: str, g: NarrativeGraph, ids: Iterable[str], types: Iterable[str] | None = None) -> list[Evidence]:
    """The edges among `ids` as `relation` evidence ("A causes B"), spanning both events' times."""
    keep = set(ids)
    want = None if types is None else set(types)
    out = []
    for e in g.edges(want):
        u, v = e["source"], e["target"]
        if u in keep and v in keep:
            a, b = g.nx.nodes[u], g.nx.nodes[v]
            text = f"{u} {READS.get(e['type'], e['type'])} {v}"
            out.append(Evidence("relation", film_id, min(a["start"], b["start"]), max(a["end"], b["end"]), text,
                                score=float(e["confidence"]), retriever="graph", id=f"relation:{u}:{e['type']}:{v}"))
    return out


def hop_distances(g: NarrativeGraph, seeds: Sequence[str]) -> dict[str, int]:
    """Undirected hop count from the nearest seed."""
    und = g.nx.to_undirected(as_view=True)
    dist = {s: 0 for s in seeds}
    todo = deque(seeds)
    while todo:
        n = todo.popleft()
        for m in und.neighbors(n):
            if m not in dist:
                dist[m] = dist[n] + 1
                todo.append(m)
    return dist


class GraphRetriever(Retriever):
    """Matched events (hybrid search) and their graph neighbours within `hops` along `types`,
    then the links among them. seeds: how many events to match."""

    name = "graph"

    def __init__(self, hops: int = 1, types: Iterable[str] | None = None, seeds: int = 3, links: bool = True):
        self.hops = hops
        self.types = None if types is None else tuple(types)
        self.seeds = seeds
        self.links = links

    def _retrieve(self, film: FilmMemory, query: str, k: int) -> list[Evidence]:
        matched = TextRetriever("hybrid", ["event"]).retrieve(film, query, k=max(1, min(self.seeds, k)))
        if not matched:
            return []
        g = film_graph(film)
        seeds = [m.id.split(":", 1)[1] for m in matched if m.id.split(":", 1)[1] in g]
        best = {m.id.split(":", 1)[1]: m.score for m in matched}
        sub = g.neighborhood(seeds, hops=self.hops, types=self.types)
        dist = hop_distances(sub, seeds)
        top = max(best.values())
        out = [event_evidence(film.film_id, g, e, best.get(e, top * DECAY ** dist.get(e, self.hops + 1)))
               for e in sub.nx.nodes]
        out.sort(key=lambda e: (-e.score, e.start, e.id))  # ties in a fixed order: node sets iterate by hash
        out = out[: max(1, k - k // 3)] if self.links else out[:k]  # leave room for the links
        if self.links:
            low = min(e.score for e in out) * DECAY
            links = link_evidence(film.film_id, g, [e.id.split(":", 1)[1] for e in out], self.types)
            for r in sorted(links, key=lambda r: (-r.score, r.id))[: k - len(out)]:
                r.score = low * r.score  # below every event: links explain, they do not outrank
                out.append(r)
        return out
