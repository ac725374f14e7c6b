"""Archival memory (Letta-style, CHNB's agentic paradigm) without a Letta server.

The film's captions and transcript are the archival store; the backbone decides when to call
`archival_memory_search(query, top_k, start, end)` in a tool loop with a step limit, then
answers. `ArchivalSettings`, `archival_passages()` and `ArchivalSearch` are shared with the
Letta policy, which inserts the same passages into a real Letta agent and exposes the same
tool, so the two differ only in who runs the loop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...backbones import Tool, ToolCall, assistant, system, tool_result, user
from ...foundation.errors import MovieMemError
from ...foundation.timefmt import hms, optional_seconds
from ...memory.view import FilmMemory
from ...retrievers.packing import passage_sources
from ...retrievers.text import TextRetriever
from ...retrievers.types import Evidence
from ...retrievers.window import rows_as_evidence
from ..base import BasePolicy, Run
from ..browse import SceneBrowse, overview_block
from ..calls import default_max_tokens
from ..parsing import Parsed, parse_answer
from ..prompts import (
    ARCHIVAL,
    ARCHIVAL_FINAL,
    ARCHIVAL_SEARCH_TOOL,
    ARCHIVAL_TEXT,
    ARCHIVAL_TEXT_FINAL,
    answer_schema,
    question_block,
)
from ..types import Question, Step

MAX_TOP_K = 20


@dataclass
class ArchivalSettings:
    kinds: tuple[str, ...] = ("caption", "passage")  # the archival store: captions and transcript passages
    search: str = "hybrid"  # vector | fts | hybrid
    top_k: int = 5  # default when the model gives none
    max_steps: int = 6  # model turns before it must answer
    search_first: bool = True  # the first model turn must be a search (weak models otherwise never search)
    overview_tokens: int = 0  # the film's scene list (its table of contents) put before the question (0: none)
    browse: bool = False  # offer the browse_scenes tool beside the search (backbones that call tools)
    step_max_tokens: int = 256
    max_tokens: int | None = None
    temperature: float = 0.0


def store_kinds(film: FilmMemory, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds the store holds for this film: transcript passages read as single lines where the
    film has none (its passages stage has not run)."""
    if "passage" in kinds and not passage_sources(film):
        return tuple(dict.fromkeys("utterance" if k == "passage" else k for k in kinds))
    return kinds


def archival_passages(film: FilmMemory, kinds: tuple[str, ...] = ArchivalSettings.kinds) -> list[Evidence]:
    """What the archival store holds: captions and transcript passages (a single line says too little
    to be found or understood alone), in time order, text prefixed by its time so that a search hit
    carries its timestamp."""
    rows = rows_as_evidence(film, store_kinds(film, kinds))
    for e in rows:
        said = e.kind == "utterance" or (e.rows is not None and e.rows[0] == "utterance")
        e.text = f"[{hms(e.start)}-{hms(e.end)}] {'said: ' if said else ''}{e.text}"
    return rows


class ArchivalSearch:
    """The `archival_memory_search` tool over one film (honours the film's until-cutoff)."""

    tool = Tool.from_any(ARCHIVAL_SEARCH_TOOL)

    def __init__(self, film: FilmMemory, settings: ArchivalSettings):
        self.film = film
        self.settings = settings
        self.retriever = TextRetriever(settings.search, store_kinds(film, settings.kinds))

    def __call__(self, arguments: dict[str, Any]) -> tuple[list[Evidence], list[dict[str, Any]] | dict[str, str]]:
        query = str(arguments.get("query") or "").strip()
        if not query:
            return [], {"error": "give a non-empty query"}
        try:
            k = int(arguments.get("top_k") or self.settings.top_k)
            start, end = optional_seconds(arguments.get("start")), optional_seconds(arguments.get("end"))
            found = self.retriever.retrieve(self.film, query, k=max(1, min(MAX_TOP_K, k)), start=start, end=end)
        except (TypeError, ValueError, MovieMemError) as exc:
            return [], {"error": f"bad arguments: {exc}"}
        found.sort(key=lambda e: (e.start, e.id))
        return found, [{"start": round(e.start, 1), "end": round(e.end, 1), "time": f"{hms(e.start)}-{hms(e.end)}",
                        "kind": e.kind, "text": e.text} for e in found]


SEARCH_LINE = re.compile(r"^\s*`?SEARCH:\s*(.+?)`?\s*$", re.I | re.M)


def protocol_for(backbone: Any) -> str:
    """tools (the backbone calls tools) or text (it writes `SEARCH: query` lines)."""
    return "tools" if backbone.capabilities.tools else "text"


class Archival(BasePolicy):
    """Captions and transcript in an archival store; the backbone searches it in a tool loop.

    Small and open models often answer at once without searching (Letta #743), which makes the
    policy closed-book under another name. With `search_first` (the default) the first model turn
    must be a search: a required tool call, or for a backbone without tool calling, a `SEARCH:`
    line (the question itself is searched when the model writes none). The trace records the
    protocol and every search; the answer records how many searches it made. The film's scene
    list can be read first (`overview_tokens`) or browsed by time (`browse`, agents/browse.py);
    a turn that only browses does not count as the forced search."""

    Settings = ArchivalSettings

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        if s.max_steps < 1:
            raise MovieMemError("max_steps must be at least 1")
        protocol = protocol_for(run.backbone)
        search = ArchivalSearch(film, s)
        browse = SceneBrowse(film) if s.browse and protocol == "tools" else None
        if s.browse and browse is None:
            run.note("browse_scenes needs a backbone that calls tools: not offered (overview_tokens puts the scene "
                     "list in the prompt instead)")
        tools = [search.tool] + ([browse.tool] if browse else [])
        prompt = ARCHIVAL if protocol == "tools" else ARCHIVAL_TEXT
        text = overview_block(film, s.overview_tokens, run) + prompt.render(duration=hms(film.duration_s),
                                                                            question=question_block(question))
        messages: list[Any] = [system(prompt.system), user(text)]
        searches = browsing = 0  # browsing: turns that only browsed, before the first search
        parsed: Parsed | None = None
        for step in range(s.max_steps):
            force = s.search_first and searches == 0 and step == browsing
            calls: list[tuple[str, dict[str, Any], ToolCall | None]]
            if protocol == "tools":
                offered = [search.tool] if force and browsing else tools  # one browsing turn, then the forced search
                reply = run.chat(prompt, messages, tools=offered, tool_choice="required" if force else None,
                                 max_tokens=s.step_max_tokens, temperature=s.temperature)
                calls = [(c.name, c.arguments, c) for c in reply.tool_calls]
            else:
                reply = run.chat(prompt, messages, max_tokens=s.step_max_tokens, temperature=s.temperature)
                m = SEARCH_LINE.search(reply.text or "")
                query = m.group(1).strip() if m else (question.text if force and not reply.invalid else "")
                if force and not m and query:
                    run.note("no SEARCH line in the first turn: the question itself is searched")
                calls = [(search.tool.name, {"query": query}, None)] if query else []
            if reply.invalid and reply.transient:
                return Parsed.fail(reply.error or "backbone failed")
            if not calls:
                parsed = parse_answer(reply, question)
                if not parsed.invalid:
                    break
                messages.append(assistant(reply.text))
                parsed = None
                break
            messages.append(assistant(reply.text, [c for _, _, c in calls if c is not None]))
            found: list[Evidence]
            browsing += searches == 0 and all(browse is not None and name == browse.tool.name for name, _, _ in calls)
            for name, arguments, call in calls:
                listed = None
                result: list[dict[str, Any]] | dict[str, str] | str
                if browse is not None and name == browse.tool.name:
                    found = []
                    listed, result = browse(arguments)
                elif name != search.tool.name:
                    found, result = [], {"error": f"unknown tool {name!r}; use {' or '.join(t.name for t in tools)}"}
                else:
                    searches += 1
                    found, result = search(arguments)
                    run.show(found)
                run.trace.append(Step("tool", {"name": name, "arguments": arguments, "found": [e.id for e in found],
                                               "forced": force, "protocol": protocol,
                                               **({"scenes": listed} if listed is not None else {}),
                                               "error": result.get("error") if isinstance(result, dict) else None}))
                if call is not None:
                    messages.append(tool_result(call.id, result, name=name))
                else:
                    messages.append(user(f"Search results for {arguments.get('query')!r}:\n{json.dumps(result, ensure_ascii=False)}"))
        run.trace.append(Step("searches", {"n": searches, "protocol": protocol, "search_first": s.search_first}))
        if parsed is not None:
            if searches == 0:
                run.note("the backbone answered without searching the archival memory")
            run.trace.append(Step("parse", {"choice": parsed.choice, "invalid": False, "how": parsed.how}))
            return parsed
        run.note(f"asking for the final answer after {searches} search(es)")
        final = ARCHIVAL_FINAL if protocol == "tools" else ARCHIVAL_TEXT_FINAL
        messages.append(user(final.render(question=question_block(question))))
        reply = run.chat(final, messages, json_schema=answer_schema(question),
                         max_tokens=s.max_tokens or default_max_tokens(question), temperature=s.temperature)
        parsed = parse_answer(reply, question)
        run.trace.append(Step("parse", {"choice": parsed.choice, "invalid": parsed.invalid, "how": parsed.how,
                                        "error": parsed.error}))
        return parsed
