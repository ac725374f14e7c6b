"""Search channels: the kinds of memory the routed retriever searches, one registered retriever each.

A channel is registered in `routing.CHANNEL_RETRIEVERS` (kind `channel`, entry points `moviemem.channels`)
under the evidence kind it finds, with the table it reads (an empty table falls back to the transcript)
and, for a plug-in, its routes (question type -> hits per query, appended to `routing.CHANNELS`). The
factory takes the gathering's settings and the name it is registered under, so one class serves several
tables: the text channels (utterance, caption, onscreen, passage) are one `TextChannel`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..memory.view import FilmMemory
from .characters import CharacterRetriever
from .settings import GatherSettings
from .text import TextRetriever
from .types import Evidence, Trace

LINE_KINDS = ("utterance", "caption")  # single lines: an option's own best lines lead from these (option_lines)


@runtime_checkable
class Channel(Protocol):
    """One kind of memory searched with one query at a time. `label` names its searches in the trace;
    `lines`: its hits are single transcript or caption lines; `ready` says (in the trace) whether this
    film is searched at all."""

    label: str
    lines: bool

    def ready(self, film: FilmMemory, trace: Trace | None) -> bool: ...

    def search(self, film: FilmMemory, query: str, k: int, trace: Trace | None) -> list[Evidence]: ...


class TextChannel:
    """Rows of one text table, by vector, BM25 or both (the gathering's `search`)."""

    def __init__(self, gather: GatherSettings, kind: str):
        self.kind, self.mode = kind, gather.search
        self.label = f"{kind}:{gather.search}"
        self.lines = kind in LINE_KINDS

    def ready(self, film: FilmMemory, trace: Trace | None) -> bool:
        return True

    def search(self, film: FilmMemory, query: str, k: int, trace: Trace | None) -> list[Evidence]:
        return TextRetriever(self.mode, [self.kind]).retrieve(film, query, k=k)


class CharactersChannel:
    """The character registry's entries and the named characters' lines (retrievers/characters.py)."""

    label = "characters"
    lines = False

    def __init__(self, gather: GatherSettings, kind: str = "characters"):
        self.on = gather.characters
        self.retriever = CharacterRetriever()

    def ready(self, film: FilmMemory, trace: Trace | None) -> bool:
        skip = "it is turned off (characters=false)" if not self.on else CharacterRetriever.missing(film)
        if skip and trace is not None:
            trace.note(f"the characters channel is skipped: {skip}")
        return not skip

    def search(self, film: FilmMemory, query: str, k: int, trace: Trace | None) -> list[Evidence]:
        return self.retriever.retrieve(film, query, k=k)


class EventChannel:
    """Matched events and their graph neighbours (`graph_hops`); a graph made by rules alone only with
    rule_events, since its events repeat dialogue the text channels already search."""

    lines = False

    def __init__(self, gather: GatherSettings, kind: str = "event"):
        self.label = f"event:{gather.search}"
        self.hops, self.rule_events = gather.graph_hops, gather.rule_events

    def ready(self, film: FilmMemory, trace: Trace | None) -> bool:
        """Whether the event channel is read on this film (said in the trace either way)."""
        made_by = sorted({e.source or "unknown" for e in film.events()})
        if not made_by:
            if trace is not None:
                trace.note("no events in this film's memory: the event channel is skipped")
            return False
        links = sorted({r.source or "unknown" for r in film.relations()} - set(made_by))
        graph = "+".join(made_by) + (f" (links also by {'+'.join(links)})" if links else "")
        if made_by == ["rules"] and not self.rule_events:
            if trace is not None:
                trace.note(f"the film's events were made by rules{'' if links else ' alone'}, graph {graph}: "
                           "the event channel is skipped (rule_events=false)")
            return False
        if trace is not None:
            trace.note(f"event channel reads the graph made by {graph}")
        return True

    def search(self, film: FilmMemory, query: str, k: int, trace: Trace | None) -> list[Evidence]:
        return graph_hits(film, trace, query, k, self.hops)


def graph_hits(film: FilmMemory, trace: Trace | None, query: str, k: int, hops: int) -> list[Evidence]:
    """Matched events plus their graph neighbours; matched events alone (said in the trace)
    where the graph layer is not installed."""
    try:
        from .graph import GraphRetriever

        return GraphRetriever(hops=hops).retrieve(film, query, k=k)
    except ImportError as exc:
        if trace is not None:
            trace.note(f"graph layer unavailable ({exc}); events matched by text only")
        return TextRetriever("hybrid", ["event"]).retrieve(film, query, k=k)
