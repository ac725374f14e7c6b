"""Archival memory (Letta-style, CHNB's agentic paradigm) without a Letta server.

The film's captions and transcript are the archival store; the backbone decides when to call
`archival_memory_search(query, top_k, start, end)` in a tool loop with a step limit, then
answers. `ArchivalSettings`, `archival_passages()` and `ArchivalSearch` are shared with the
Letta policy, which inserts the same passages into a real Letta agent and exposes the same
tool, so the two differ only in who runs the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backbones import Tool, assistant, system, tool_result, user
from ..errors import MovieMemError
from ..memory.view import FilmMemory
from ..retrievers.base import Evidence, hms
from ..retrievers.text import TextRetriever
from ..retrievers.window import rows_as_evidence
from .base import BasePolicy, Question, Run, Step, register_policy
from .calls import default_max_tokens
from .parsing import Parsed, parse_answer
from .prompts import ARCHIVAL, ARCHIVAL_FINAL, ARCHIVAL_SEARCH_TOOL, answer_schema, question_block

MAX_TOP_K = 20


@dataclass
class ArchivalSettings:
    kinds: tuple[str, ...] = ("caption", "utterance")  # what goes into the archival store
    search: str = "hybrid"  # vector | fts | hybrid
    top_k: int = 5  # default when the model gives none
    max_steps: int = 6  # model turns before it must answer
    step_max_tokens: int = 256
    max_tokens: int | None = None
    temperature: float = 0.0


def archival_passages(film: FilmMemory, kinds: tuple[str, ...] = ArchivalSettings.kinds) -> list[Evidence]:
    """What the archival store holds: one passage per caption / transcript line, in time order,
    text prefixed by its time so that a search hit carries its timestamp."""
    rows = rows_as_evidence(film, kinds)
    for e in rows:
        e.text = f"[{hms(e.start)}-{hms(e.end)}] {'said: ' if e.kind == 'utterance' else ''}{e.text}"
    return rows


class ArchivalSearch:
    """The `archival_memory_search` tool over one film (honours the film's until-cutoff)."""

    tool = Tool.from_any(ARCHIVAL_SEARCH_TOOL)

    def __init__(self, film: FilmMemory, settings: ArchivalSettings):
        self.film = film
        self.settings = settings
        self.retriever = TextRetriever(settings.search, settings.kinds)  # type: ignore[arg-type]

    def __call__(self, arguments: dict[str, Any]) -> tuple[list[Evidence], list[dict[str, Any]] | dict[str, str]]:
        query = str(arguments.get("query") or "").strip()
        if not query:
            return [], {"error": "give a non-empty query"}
        try:
            k = int(arguments.get("top_k") or self.settings.top_k)
            start = arguments.get("start")
            end = arguments.get("end")
            start = None if start in (None, "") else float(start)
            end = None if end in (None, "") else float(end)
            found = self.retriever.retrieve(self.film, query, k=max(1, min(MAX_TOP_K, k)), start=start, end=end)
        except (TypeError, ValueError, MovieMemError) as exc:
            return [], {"error": f"bad arguments: {exc}"}
        found.sort(key=lambda e: (e.start, e.id))
        return found, [{"start": round(e.start, 1), "end": round(e.end, 1), "time": f"{hms(e.start)}-{hms(e.end)}",
                        "kind": e.kind, "text": e.text} for e in found]


@register_policy("archival", needs=("captions", "transcript"))
class Archival(BasePolicy):
    """Captions and transcript in an archival store; the backbone searches it in a tool loop."""

    Settings = ArchivalSettings

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        if not run.backbone.capabilities.tools:
            raise MovieMemError(f"backbone {run.backbone.name} cannot call tools; archival needs one that can")
        if s.max_steps < 1:
            raise MovieMemError("max_steps must be at least 1")
        search = ArchivalSearch(film, s)
        text = ARCHIVAL.render(duration=hms(film.duration_s), question=question_block(question))
        messages: list[Any] = [system(ARCHIVAL.system), user(text)]
        searches = 0
        for _ in range(s.max_steps):
            reply = run.chat(ARCHIVAL, messages, tools=[search.tool], max_tokens=s.step_max_tokens,
                             temperature=s.temperature)
            if reply.invalid and reply.transient:
                return Parsed.fail(reply.error or "backbone failed")
            if not reply.tool_calls:
                parsed = parse_answer(reply, question)
                if not parsed.invalid:
                    if searches == 0:
                        run.note("the backbone answered without searching the archival memory")
                    run.trace.append(Step("parse", {"choice": parsed.choice, "invalid": False, "how": parsed.how}))
                    return parsed
                messages.append(assistant(reply.text))
                break
            messages.append(assistant(reply.text, reply.tool_calls))
            for call in reply.tool_calls:
                if call.name != search.tool.name:
                    found, result = [], {"error": f"unknown tool {call.name!r}; use {search.tool.name}"}
                else:
                    searches += 1
                    found, result = search(call.arguments)
                    run.show(found)
                run.trace.append(Step("tool", {"name": call.name, "arguments": call.arguments,
                                               "found": [e.id for e in found],
                                               "error": result.get("error") if isinstance(result, dict) else None}))
                messages.append(tool_result(call.id, result, name=call.name))
        run.note(f"asking for the final answer after {searches} search(es)")
        messages.append(user(ARCHIVAL_FINAL.render(question=question_block(question))))
        reply = run.chat(ARCHIVAL_FINAL, messages, json_schema=answer_schema(question),
                         max_tokens=s.max_tokens or default_max_tokens(question), temperature=s.temperature)
        parsed = parse_answer(reply, question)
        run.trace.append(Step("parse", {"choice": parsed.choice, "invalid": parsed.invalid, "how": parsed.how,
                                        "error": parsed.error}))
        return parsed
