"""NarrativeGraph: a film's events and their relations as a networkx MultiDiGraph.

Nodes are event ids with the EventRow fields as attributes (trigger, args, description, start,
end, seg_idx, story_order). Edges are keyed by relation type and carry confidence and rationale;
an edge reads "src TYPE dst": src before/after/overlap dst, src causes dst, src is a
precondition of dst, src contains dst (hierarchical), src and dst are the same event
(coreference), src is a flashback to an earlier time than dst, which was shown before it.

Consistency: the temporal edges (before, after, flashback) and the causal edges (causal,
precondition) must each be acyclic. A cycle is a contradiction from the model, so it is not
kept silently: it is reported in `problems` (and as a warning) and, by default, broken by
dropping its least confident edge.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import networkx as nx

from ..foundation.errors import MovieMemError

if TYPE_CHECKING:
    from ..memory.schema import EventRow, RelationRow
    from ..memory.view import FilmMemory

CAUSAL = frozenset({"causal", "precondition"})
TEMPORAL = frozenset({"before", "after", "flashback"})
RELATION_TYPES = frozenset({"before", "after", "overlap", "causal", "precondition", "hierarchical", "coreference",
                            "flashback"})
NODE_FIELDS = ("trigger", "args", "description", "start", "end", "seg_idx", "story_order")


class NarrativeGraphWarning(UserWarning):
    """The event graph had contradictions (cycles) that were reported and broken."""


class NarrativeGraph:
    """Queries over a film's event graph. Iterating yields event ids in screen order."""

    def __init__(self, graph: nx.MultiDiGraph, problems: list[str] | None = None, film_id: str = ""):
        self.nx = graph
        self.problems: list[str] = list(problems or [])
        self.film_id = film_id

    # -- building ------------------------------------------------------------
    @classmethod
    def from_memory(cls, film: FilmMemory, *, break_cycles: bool = True) -> NarrativeGraph:
        """The graph of what `film` shows (a `window()` or `until()` view gives the graph of that part)."""
        return cls.from_rows(film.events(), film.relations(), break_cycles=break_cycles, film_id=film.film_id)

    @classmethod
    def from_rows(cls, events: Iterable[EventRow], relations: Iterable[RelationRow], *, break_cycles: bool = True,
                  film_id: str = "") -> NarrativeGraph:
        g = nx.MultiDiGraph(film_id=film_id)
        for e in events:
            try:
                args = json.loads(e.args or "{}")
            except ValueError:
                args = {}
            g.add_node(e.event_id, trigger=e.trigger, args=args, description=e.description, start=float(e.start),
                       end=float(e.end), seg_idx=int(e.seg_idx), story_order=int(e.story_order),
                       source=getattr(e, "source", "") or "", lines=list(getattr(e, "lines", None) or []))
        problems: list[str] = []
        for r in relations:
            if r.src not in g or r.dst not in g:
                problems.append(f"relation {r.src} {r.type} {r.dst} names an unknown event; dropped")
                continue
            if r.type not in RELATION_TYPES:
                problems.append(f"relation {r.src} {r.type} {r.dst} has an unknown type; dropped")
                continue
            if r.src == r.dst:
                problems.append(f"relation {r.src} {r.type} {r.dst} links an event to itself; dropped")
                continue
            g.add_edge(r.src, r.dst, key=r.type, type=r.type, confidence=float(r.confidence), rationale=r.rationale,
                       source=getattr(r, "source", "") or "", rule=getattr(r, "rule", "") or "",
                       lines=list(getattr(r, "lines", None) or []))
        graph = cls(g, problems, film_id)
        graph._check_cycles(break_cycles)
        if graph.problems:
            warnings.warn(f"event graph of {film_id or 'film'}: " + "; ".join(graph.problems), NarrativeGraphWarning,
                          stacklevel=3)
        return graph

    def _check_cycles(self, break_cycles: bool) -> None:
        for label, types, orient in (("temporal", TEMPORAL, _temporal), ("causal", CAUSAL, _forward)):
            while True:
                view = nx.DiGraph()
                for u, v, k, d in self.nx.edges(keys=True, data=True):
                    if k in types:
                        a, b = orient(u, v, k)
                        if not view.has_edge(a, b) or view[a][b]["confidence"] > d["confidence"]:
                            view.add_edge(a, b, edge=(u, v, k), confidence=d["confidence"])
                try:
                    cycle = nx.find_cycle(view)
                except nx.NetworkXNoCycle:
                    break
                names = " -> ".join([str(a) for a, _ in cycle] + [str(cycle[0][0])])
                weakest = min(cycle, key=lambda ab: (view[ab[0]][ab[1]]["confidence"], str(ab)))
                u, v, k = view[weakest[0]][weakest[1]]["edge"]
                conf = self.nx.edges[u, v, k]["confidence"]
                if not break_cycles:
                    self.problems.append(f"{label} cycle {names}")
                    break
                self.problems.append(f"{label} cycle {names}: dropped {u} {k} {v} (confidence {conf:g})")
                self.nx.remove_edge(u, v, key=k)

    # -- events --------------------------------------------------------------
    def __iter__(self) -> Iterator[str]:
        return iter(self.screen_order())

    def __len__(self) -> int:
        return int(self.nx.number_of_nodes())

    def __contains__(self, event_id: object) -> bool:
        return event_id in self.nx

    def __repr__(self) -> str:
        return f"NarrativeGraph({self.film_id!r}, {len(self)} events, {self.nx.number_of_edges()} relations)"

    def event(self, event_id: str) -> dict[str, Any]:
        """The attributes of one event (plus its id)."""
        self._known(event_id)
        return {"id": event_id, **self.nx.nodes[event_id]}

    def events(self) -> list[dict[str, Any]]:
        return [self.event(e) for e in self.screen_order()]

    def edges(self, types: Iterable[str] | None = None) -> list[dict[str, Any]]:
        want = _types(types)
        return [{"source": u, "target": v, "type": k, "confidence": d["confidence"], "rationale": d["rationale"],
                 "made_by": d.get("source", ""), "rule": d.get("rule", ""), "lines": d.get("lines", [])}
                for u, v, k, d in sorted(self.nx.edges(keys=True, data=True), key=lambda x: (x[0], x[1], x[2]))
                if want is None or k in want]

    def _known(self, *event_ids: str) -> None:
        for e in event_ids:
            if e not in self.nx:
                raise MovieMemError(f"no event {e!r} in the graph of {self.film_id or 'this film'}")

    # -- orders --------------------------------------------------------------
    def screen_order(self) -> list[str]:
        """Event ids in the order they are shown."""
        n = self.nx.nodes
        return sorted(n, key=lambda e: (n[e]["start"], n[e]["end"], e))

    def story_order(self) -> list[str]:
        """Event ids in story (chronological) order; events without a story rank follow in screen order."""
        n = self.nx.nodes
        screen = {e: i for i, e in enumerate(self.screen_order())}
        return sorted(n, key=lambda e: (n[e]["story_order"] < 0, n[e]["story_order"], screen[e]))

    def flashbacks(self) -> list[str]:
        """Events whose story time precedes an event shown earlier on screen: sources of flashback
        edges and events that story_order puts before something already shown. Screen order."""
        out = {u for u, _, k in self.nx.edges(keys=True) if k == "flashback"}
        n = self.nx.nodes
        seen_rank = None
        for e in self.screen_order():
            rank = n[e]["story_order"]
            if rank < 0:
                continue
            if seen_rank is not None and rank < seen_rank:
                out.add(e)
            seen_rank = rank if seen_rank is None else max(seen_rank, rank)
        return [e for e in self.screen_order() if e in out]

    # -- causes and effects --------------------------------------------------
    def causes_of(self, event_id: str, types: Iterable[str] = CAUSAL) -> list[str]:
        """Direct causes (and preconditions) of an event, most confident first."""
        return self._linked(event_id, types, incoming=True)

    def effects_of(self, event_id: str, types: Iterable[str] = CAUSAL) -> list[str]:
        """Direct effects of an event (events it causes or enables), most confident first."""
        return self._linked(event_id, types, incoming=False)

    def _linked(self, event_id: str, types: Iterable[str], incoming: bool) -> list[str]:
        self._known(event_id)
        want = _types(types)
        edges = self.nx.in_edges(event_id, keys=True, data=True) if incoming else \
            self.nx.out_edges(event_id, keys=True, data=True)
        best: dict[str, float] = {}
        for u, v, k, d in edges:
            other = u if incoming else v
            if want is None or k in want:
                best[other] = max(best.get(other, 0.0), d["confidence"])
        return sorted(best, key=lambda e: (-best[e], e))

    def chain(self, a: str, b: str, types: Iterable[str] = CAUSAL) -> list[str]:
        """The causal chain from a to b: the path along cause -> effect edges whose confidences sum
        highest, so a chain of confident steps beats a single shortcut edge. [] when b does not
        follow from a. Causal cycles were broken at build time, so the path is found on a DAG."""
        self._known(a, b)
        want = _types(types)
        dag = nx.DiGraph()
        dag.add_nodes_from(self.nx.nodes)
        for u, v, k, d in self.nx.edges(keys=True, data=True):
            if (want is None or k in want) and (not dag.has_edge(u, v) or dag[u][v]["w"] < d["confidence"]):
                dag.add_edge(u, v, w=d["confidence"])
        if a == b:
            return [a]
        if not nx.has_path(dag, a, b):
            return []
        keep = (nx.descendants(dag, a) | {a}) & (nx.ancestors(dag, b) | {b})
        sub = dag.subgraph(keep)
        if not nx.is_directed_acyclic_graph(sub):  # only with break_cycles=False or custom types
            return cast("list[str]", nx.shortest_path(sub, a, b))
        best: dict[str, tuple[float, list[str]]] = {a: (0.0, [a])}
        for node in nx.topological_sort(sub):
            if node not in best:
                continue
            score, path = best[node]
            for nxt in sub.successors(node):
                cand = (score + sub[node][nxt]["w"], path + [nxt])
                if nxt not in best or cand[0] > best[nxt][0] + 1e-12:
                    best[nxt] = cand
        return best[b][1]

    def neighborhood(self, events: str | Iterable[str], hops: int = 2, types: Iterable[str] | None = None) -> NarrativeGraph:
        """The events within `hops` edges of `events` (edges of `types` only, either direction),
        as a graph with those events and the edges among them of those types."""
        seeds = [events] if isinstance(events, str) else list(events)
        self._known(*seeds)
        if hops < 0:
            raise MovieMemError(f"hops must be 0 or more, not {hops}")
        want = _types(types)
        sub = nx.Graph()
        sub.add_nodes_from(self.nx.nodes)
        sub.add_edges_from((u, v) for u, v, k in self.nx.edges(keys=True) if want is None or k in want)
        reached = set(seeds)
        frontier = set(seeds)
        for _ in range(hops):
            frontier = {n for f in frontier for n in sub.neighbors(f)} - reached
            reached |= frontier
        g = nx.MultiDiGraph(**self.nx.graph)
        g.add_nodes_from((e, self.nx.nodes[e]) for e in reached)
        g.add_edges_from((u, v, k, d) for u, v, k, d in self.nx.edges(keys=True, data=True)
                         if u in reached and v in reached and (want is None or k in want))
        return NarrativeGraph(g, [], self.film_id)

    def made_by(self) -> str:
        """Which graph this is: "rules", "model", "model+rules" (a model's graph with rule-made
        edges, e.g. flashbacks from cues), "unknown" (rows that do not say) or "empty"."""
        kinds = {d.get("source") or "unknown" for _, d in self.nx.nodes(data=True)}
        kinds |= {d.get("source") or "unknown" for *_, d in self.nx.edges(data=True)}
        if not kinds:
            return "empty"
        known = sorted(k for k in kinds if k != "unknown")
        return "+".join(sorted(known, key=lambda k: k != "model")) if known else "unknown"

    # -- export --------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """networkx node-link data: {"nodes": [{"id", "trigger", ...}], "edges": [{"source", "target",
        "type", "confidence", "rationale", "key"}], ...} plus the problems found."""
        data: dict[str, Any] = nx.node_link_data(self.nx, edges="edges")
        data["nodes"] = sorted(data["nodes"], key=lambda n: (n["start"], n["end"], n["id"]))
        data["edges"] = sorted(data["edges"], key=lambda e: (e["source"], e["target"], e["type"]))
        data["problems"] = list(self.problems)
        data["made_by"] = self.made_by()
        return data

    def to_graphml(self, path: str | Path) -> Path:
        """GraphML for Gephi, yEd or Cytoscape (args as a JSON string: GraphML holds scalars only)."""
        path = Path(path)
        g = nx.MultiDiGraph()
        g.graph.update({k: v for k, v in self.nx.graph.items() if isinstance(v, (str, int, float, bool))})
        for e, d in self.nx.nodes(data=True):
            g.add_node(e, **{k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for k, v in d.items()})
        g.add_edges_from((u, v, k, {a: json.dumps(x) if isinstance(x, list) else x for a, x in d.items()})
                         for u, v, k, d in self.nx.edges(keys=True, data=True))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            nx.write_graphml(g, str(path))
        except OSError as exc:
            raise MovieMemError(f"cannot write {path}: {exc.strerror or exc}") from None
        return path


def _types(types: Iterable[str] | None) -> frozenset[str] | None:
    if types is None:
        return None
    want = frozenset([types] if isinstance(types, str) else types)
    unknown = want - RELATION_TYPES
    if unknown:
        raise MovieMemError(f"unknown relation type(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(RELATION_TYPES))}")
    return want


def _temporal(u: str, v: str, kind: str) -> tuple[str, str]:
    """Earlier -> later in story time: 'u after v' reads 'v before u'."""
    return (v, u) if kind == "after" else (u, v)


def _forward(u: str, v: str, kind: str) -> tuple[str, str]:
    return u, v
