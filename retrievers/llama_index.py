"""A llama-index `BaseRetriever` over a film's memory, so moviemem evidence can feed any
llama-index query engine, chat engine or agent. Each node carries film_id, kind, start, end,
retriever and frame in its metadata, so citations keep their timestamps.

    engine = RetrieverQueryEngine.from_args(MovieMemRetriever(film), llm=...)
"""

from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..memory.view import FilmMemory
from .base import Retriever
from .text import TextRetriever
from .types import Evidence


def to_node(e: Evidence) -> NodeWithScore:
    meta: dict[str, Any] = {"film_id": e.film_id, "kind": e.kind, "start": e.start, "end": e.end,
                            "retriever": e.retriever, "evidence_id": e.id}
    if e.frame:
        meta["frame"] = e.frame
    node = TextNode(text=e.text, id_=f"{e.film_id}/{e.id or e.key}", metadata=meta,
                    excluded_llm_metadata_keys=["retriever", "evidence_id", "frame"])
    return NodeWithScore(node=node, score=e.score)


class MovieMemRetriever(BaseRetriever):
    """Wraps any moviemem Retriever (default: hybrid text search) for one film (or a window /
    until view of it)."""

    def __init__(self, film: FilmMemory, retriever: Retriever | None = None, k: int = 8, **kwargs: Any):
        super().__init__(**kwargs)
        self._film = film
        self._inner = retriever or TextRetriever("hybrid")
        self._k = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(e) for e in self._inner.retrieve(self._film, query_bundle.query_str, k=self._k)]
