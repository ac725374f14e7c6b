"""The `letta` policy: CHNB's caption-retrieval paradigm through a real Letta server.

The film's captions (and transcript lines) become passages of a Letta archive, each with its
time range in its text (`[HH:MM:SS-HH:MM:SS]`), its row id in its tags and its film time as
its timestamp (1970-01-01T00:00:00 is the film's start), so that Letta's own
`archival_memory_search` can filter by film time and every hit maps back to a memory row.
One archive per film and passage configuration, one agent per archive and backbone
configuration, both reused across questions and runs; each question runs in its own Letta
conversation so questions never see each other.

The agent's model is the backbone given to `answer()`, served to Letta by an in-process
`moviemem serve` gateway on loopback (the same model object the other policies call, with
its replay cache), which also embeds passages and queries with the configured embedder.
Settings and prompts are the `archival` policy's (agents/prompts.py: LETTA_SYSTEM is
ARCHIVAL_SYSTEM with the sentence on the tool's arguments changed); the system prompt goes
with every request so that the prompt prefix (system prompt and tool schemas) stays the same
across questions and steps and a local model reuses its KV cache. The differences that remain
are listed in `DIFFERENCES`.
"""

from __future__ import annotations

import ast
import atexit
import datetime as dt
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...backbones import Backbone, Usage
from ...backbones.prompt import Prompt
from ...backbones.retry import describe
from ...foundation.errors import MovieMemError, UnreachableError
from ...foundation.timefmt import hms
from ...foundation.urls import redact_urls
from ...memory.view import FilmMemory
from ...retrievers.types import Evidence
from ..base import BasePolicy, Run
from ..browse import overview_block
from ..parsing import Parsed, parse_answer
from ..prompts import LETTA, LETTA_FINAL, question_block
from ..types import Question, Step
from .archival import ArchivalSettings, archival_passages

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TAG = "moviemem"
BATCH = 128  # passages per insert request

DIFFERENCES = (
    "prompts: the same system prompt, user turns and answer formats (agents/prompts.py), except the sentence on "
    "the search tool's arguments (LETTA_TOOL_SENTENCE: Letta filters by timestamps, film time on 1970-01-01, and "
    "takes tags); the system prompt is sent with every request (override_system) in place of the one Letta "
    "compiles, which would add memory metadata that changes per conversation",
    "search: Letta ranks archival passages by embedding similarity only (PostgreSQL/pgvector); archival "
    "defaults to hybrid (vector + full text), so compare with archival search='vector'; both default to top_k 5",
    "tool schemas: Letta's own archival_memory_search (about 450 tokens of description and arguments: tags, "
    "tag_match_mode, top_k, start_datetime, end_datetime) against archival's (about 150 tokens: query, top_k, "
    "start, end); with insert_tool the agent also has archival_memory_insert (about 300 tokens; its inserts are "
    "removed after each question), archival has no insert tool",
    "search_first: letta forces the first step of every request to be a search with a Letta tool rule (no tag "
    "filter, top_k from the settings); archival forces its first model turn to be a search call (tool_choice "
    "required, or a SEARCH line for backbones without tool calling)",
    "steps: max_steps bounds Letta's agent steps per request; archival's bounds its model turns",
    "final answer: archival asks a last, schema-constrained turn when the loop ends without an answer; letta "
    "sends the same final prompt as a plain message (Letta does not pass a per-question JSON schema)",
    "tool results: Letta returns passages with ids, tags and timestamps as JSON text inside its own "
    "{status, message, time} wrapper; archival returns start/end seconds, time and text",
)


@dataclass
class LettaSettings(ArchivalSettings):
    search: str = "vector"  # Letta's archival search on PostgreSQL: embeddings only
    insert_tool: bool = True  # the agent also gets archival_memory_insert
    url: str | None = None  # Letta server; default $MOVIEMEM_LETTA_URL, else the running sidecar
    context_window: int = 8192
    timeout_s: float = 900.0


def passage_tags(e: Evidence) -> list[str]:
    return [TAG, e.kind, e.id]


def passage_time(e: Evidence) -> str:
    """A passage's film time as the timestamp Letta stores and filters on."""
    return (EPOCH + dt.timedelta(seconds=max(0.0, e.start))).isoformat()


def parse_search_return(text: str) -> list[dict[str, Any]]:
    """The passages in an archival_memory_search tool return (Letta wraps the tool's list as
    JSON {"status", "message", "time"}; the message may itself be JSON or a Python repr)."""
    value: Any = text
    for _ in range(3):
        if isinstance(value, list):
            return [v for v in value if isinstance(v, dict)]
        if isinstance(value, dict):
            value = value.get("message", value.get("results"))
            continue
        if not isinstance(value, str) or not value.strip():
            return []
        try:
            value = json.loads(value)
        except ValueError:
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def message_text(m: dict[str, Any]) -> str:
    content = m.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


class _Session:
    """A letta-client and the gateway that serves one backbone to the Letta server."""

    def __init__(self, url: str, backbone: Backbone, timeout: float):
        from letta_client import Letta

        from ...backbones import start_gateway
        from ...foundation.config import get_settings

        self.url = url
        self.client = Letta(base_url=url, timeout=timeout, max_retries=0)
        self.embedder_name = get_settings().embedder
        from ...models.embedder import get_embedder

        self.embedder = get_embedder(self.embedder_name)
        self.gateway = start_gateway(backbone, self.embedder)
        self.lock = threading.Lock()
        self.agents: dict[str, Any] = {}

    def close(self) -> None:
        self.gateway.stop()

    def llm_config(self, backbone: Backbone, s: LettaSettings) -> dict[str, Any]:
        return {"model": backbone.name, "model_endpoint_type": "openai", "model_endpoint": self.gateway.base_url,
                "context_window": s.context_window, "temperature": s.temperature, "max_tokens": s.step_max_tokens,
                "put_inner_thoughts_in_kwargs": False, "enable_reasoner": False}

    def embedding_config(self) -> dict[str, Any]:
        return {"embedding_endpoint_type": "openai", "embedding_endpoint": self.gateway.base_url,
                "embedding_model": self.embedder.name, "embedding_dim": int(self.embedder.dim),
                "embedding_chunk_size": 100000, "batch_size": 64}


class LettaPolicy(BasePolicy):
    """The archival paradigm run by a real Letta agent (letta-client) over the same passages."""

    Settings = LettaSettings

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        if self.settings.search != "vector":
            raise MovieMemError("letta searches archival memory by embeddings only: use search='vector'")
        if self.settings.browse:
            raise MovieMemError("letta cannot offer browse_scenes (Letta runs its agents' tools in its own server, "
                                "which cannot read the library): use overview_tokens to put the scene list in the prompt")
        self._sessions: dict[int, _Session] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the gateways this policy started."""
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()

    def _session(self, backbone: Backbone) -> _Session:
        with self._lock:
            if id(backbone) not in self._sessions:
                from ...letta import checked_url, server_url

                url = checked_url(self.settings.url, "letta's url setting") if self.settings.url else server_url()
                self._sessions[id(backbone)] = _Session(url, backbone, self.settings.timeout_s)
            return self._sessions[id(backbone)]

    # ------------------------------------------------------------------ archive and agent

    def _archive(self, session: _Session, film: FilmMemory, passages: list[Evidence], run: Run) -> str:
        c = session.client
        name = f"moviemem-{film.film_id}-" + _digest(film.film_id, film.cutoff, self.settings.kinds, session.embedder_name,
                                                     [(e.id, e.start, e.end, e.text) for e in passages])
        complete = f"moviemem complete: {len(passages)} passages"
        for archive in c.archives.list(name=name):
            if archive.description == complete:
                return archive.id
            c.archives.delete(archive.id)  # an earlier build stopped half-way
        started = time.perf_counter()
        archive = c.archives.create(name=name, embedding_config=session.embedding_config(),  # type: ignore[arg-type]  # a plain dict in the config's wire shape
                                    description="moviemem building")
        for i in range(0, len(passages), BATCH):
            c.archives.passages.create_many(archive.id, passages=[
                {"text": e.text, "tags": passage_tags(e), "created_at": passage_time(e),
                 "metadata": {"row": e.id, "start": e.start, "end": e.end, "film_id": e.film_id}}
                for e in passages[i:i + BATCH]])
        c.archives.update(archive.id, description=complete)
        run.note(f"inserted {len(passages)} passages into Letta archive {name} in {time.perf_counter() - started:.1f} s",
                 archive=archive.id, passages=len(passages))
        return archive.id

    def _agent(self, session: _Session, film: FilmMemory, backbone: Backbone, run: Run) -> tuple[str, list[Evidence]]:
        s = self.settings
        passages = archival_passages(film, s.kinds)
        if not passages:
            raise MovieMemError(f"film {film.film_id!r} has no {' or '.join(s.kinds)} rows to put into Letta's archive")
        with session.lock:
            archive_id = self._archive(session, film, passages, run)
            tools = ["archival_memory_search"] + (["archival_memory_insert"] if s.insert_tool else [])
            # the forced first search runs without a tag filter (passages carry no topic tags, and
            # small models fill in a topic tag that then matches nothing) and with the top_k setting
            first = {"type": "run_first", "tool_name": "archival_memory_search", "args": {"tags": [], "top_k": s.top_k}}
            rules = [first] if s.search_first else []
            name = f"moviemem-{film.film_id}-" + _digest(archive_id, backbone.name, LETTA.system, tools,
                                                         s.context_window, s.step_max_tokens, s.temperature, rules)
            llm, emb = session.llm_config(backbone, s), session.embedding_config()
            if name in session.agents:
                return session.agents[name], passages
            c = session.client
            found = list(c.agents.list(name=name))
            if found:
                agent = found[0]
                if agent.llm_config.model_endpoint != llm["model_endpoint"]:  # type: ignore[attr-defined]  # replies are built with construct(), which keeps the wire name; a new gateway for this process
                    c.agents.update(agent.id, llm_config=llm, embedding_config=emb)  # type: ignore[arg-type]  # plain dicts in the configs' wire shape
                run.note(f"reusing Letta agent {name}", agent=agent.id)
            else:
                agent = c.agents.create(name=name, agent_type="letta_v1_agent", system=LETTA.system,
                                        llm_config=llm, embedding_config=emb,  # type: ignore[arg-type]  # plain dicts in the configs' wire shape
                                        include_base_tools=False, tools=tools,
                                        memory_blocks=[], timezone="UTC", tags=[TAG, f"film:{film.film_id}"],
                                        metadata={"film_id": film.film_id, "backbone": backbone.name},
                                        tool_rules=rules)  # type: ignore[arg-type]  # plain dicts in the rules' wire shape
                c.agents.archives.attach(archive_id, agent_id=agent.id)
                run.note(f"created Letta agent {name}", agent=agent.id, archive=archive_id)
            session.agents[name] = agent.id
            return agent.id, passages

    # ------------------------------------------------------------------ answering

    def _send(self, session: _Session, conversation: str, prompt: Prompt, text: str,
              max_steps: int) -> tuple[dict[str, Any], float]:
        """One request to the conversation. The system prompt goes with it (override_system):
        Letta's compiled one adds ids, a timestamp and archive tags that differ per conversation,
        which would make a local model re-read the system prompt and tool schemas every time."""
        started = time.perf_counter()
        raw = session.client.conversations.messages.with_raw_response.create(
            conversation, messages=[{"role": "user", "content": text}], max_steps=max_steps, streaming=False,
            override_system=prompt.system)
        body = json.loads(raw.http_response.read())
        return body, time.perf_counter() - started

    def _record(self, body: dict[str, Any], latency: float, run: Run, by_id: dict[str, Evidence],
                prompt: Prompt) -> tuple[str, int, int]:
        """Trace every message, collect evidence; returns (final text, searches, inserts)."""
        usage = body.get("usage") or {}
        u = Usage(input_tokens=int(usage.get("prompt_tokens") or 0), output_tokens=int(usage.get("completion_tokens") or 0),
                  cached_input_tokens=int(usage.get("cached_input_tokens") or 0), latency_s=latency)
        run.usage = run.usage + u
        run.trace.append(Step("prompt", {"prompt": prompt.id, "version": prompt.version, "server": "letta",
                                         "steps": usage.get("step_count"), "input_tokens": u.input_tokens,
                                         "output_tokens": u.output_tokens, "latency_s": round(latency, 3)}))
        calls: dict[str, Step] = {}
        final, searches, inserts = "", 0, 0
        for m in body.get("messages") or []:
            kind = m.get("message_type")
            if kind == "reasoning_message":
                run.trace.append(Step("reply", {"reasoning": str(m.get("reasoning") or "")[:2000]}))
            elif kind == "assistant_message":
                final = message_text(m)
                run.trace.append(Step("reply", {"text": final[:2000]}))
            elif kind == "tool_call_message":
                for call in m.get("tool_calls") or [m.get("tool_call")]:
                    if not call:
                        continue
                    try:
                        args = json.loads(call.get("arguments") or "{}")
                    except ValueError:
                        args = {"raw": call.get("arguments")}
                    step: Step | None
                    step = Step("tool", {"name": call.get("name"), "arguments": args, "found": [], "error": None})
                    calls[call.get("tool_call_id") or str(len(calls))] = step
                    run.trace.append(step)
                    searches += call.get("name") == "archival_memory_search"
                    inserts += call.get("name") == "archival_memory_insert"
            elif kind == "tool_return_message":
                step = calls.get(m.get("tool_call_id") or "")
                if step is None:
                    continue
                ret = str(m.get("tool_return") or "")
                if m.get("status") == "error":
                    step.data["error"] = ret[:500]
                if step.data["name"] == "archival_memory_search":
                    found: list[Evidence] = []
                    passages = []
                    for rank, hit in enumerate(parse_search_return(ret)):
                        row = next((t for t in hit.get("tags") or [] if t in by_id), None)
                        passages.append({"id": hit.get("id"), "row": row, "timestamp": hit.get("timestamp"),
                                         "text": str(hit.get("content") or "")[:300]})
                        if row is not None:
                            e = by_id[row]
                            found.append(Evidence(e.kind, e.film_id, e.start, e.end, e.text, score=1.0 / (rank + 1),
                                                  retriever="letta", id=e.id))
                    run.show(found)
                    step.data.update(found=[e.id for e in found], passages=passages)
                else:
                    step.data["result"] = ret[:500]
        return final, searches, inserts

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        from letta_client import APIConnectionError, APIError, APITimeoutError

        if self.settings.max_steps < 1:
            raise MovieMemError("max_steps must be at least 1")
        if not run.backbone.capabilities.tools:
            raise MovieMemError(f"backbone {run.backbone.name} cannot call tools; letta needs one that can")
        session = self._session(run.backbone)
        try:
            return self._converse(session, film, question, run)
        except (APIConnectionError, APITimeoutError) as exc:
            raise UnreachableError(f"the Letta server at {redact_urls(session.url)} did not answer ({describe(exc)}); "
                                   "is it running? (`moviemem letta status`)") from None
        except APIError as exc:
            raise MovieMemError(f"the Letta server at {redact_urls(session.url)} refused: {describe(exc)}") from None

    def _converse(self, session: _Session, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        backbone = run.backbone
        agent_id, passages = self._agent(session, film, backbone, run)
        by_id = {e.id: e for e in passages}
        conversation = session.client.conversations.create(agent_id=agent_id).id
        run.note("letta conversation", agent=agent_id, conversation=conversation, server=redact_urls(session.url))
        text = overview_block(film, s.overview_tokens, run) + LETTA.render(duration=hms(film.duration_s),
                                                                           question=question_block(question))
        body, latency = self._send(session, conversation, LETTA, text, s.max_steps)
        final, searches, inserts = self._record(body, latency, run, by_id, LETTA)
        parsed = parse_answer(final, question)
        if parsed.invalid:
            run.note(f"asking for the final answer after {searches} search(es)")
            # a run_first rule forces a search at the start of every request: leave room for the answer
            body, latency = self._send(session, conversation, LETTA_FINAL,
                                       LETTA_FINAL.render(question=question_block(question)),
                                       2 if s.search_first else 1)
            final, more, ins = self._record(body, latency, run, by_id, LETTA_FINAL)
            searches, inserts = searches + more, inserts + ins
            parsed = parse_answer(final, question)
        elif searches == 0:
            run.note("the backbone answered without searching the archival memory")
        run.trace.append(Step("searches", {"n": searches, "protocol": "letta tools",
                                           "search_first": s.search_first}))
        if inserts:
            self._drop_inserts(session, agent_id, run)
        run.trace.append(Step("parse", {"choice": parsed.choice, "invalid": parsed.invalid, "how": parsed.how,
                                        "error": parsed.error}))
        return parsed

    def _drop_inserts(self, session: _Session, agent_id: str, run: Run) -> None:
        """Remove what the agent wrote into the shared archive, so questions stay independent."""
        c = session.client
        dropped = 0
        for p in c.agents.passages.list(agent_id, ascending=False, limit=50):
            if TAG not in (p.tags or []) and p.id is not None:
                c.agents.passages.delete(p.id, agent_id=agent_id)
                dropped += 1
        run.note(f"removed {dropped} passage(s) the agent inserted")
