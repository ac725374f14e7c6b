"""`moviemem mcp`: a library's film memory as MCP tools, for any agent or MCP client.

Tools (read-only): list_films, film_overview, scenes, search, read_range, frames, graph, ask; with
`allow_ingest`, also ingest_text (the only tool that writes). Each wraps a function of
film_tools, so the answers are those of `moviemem search` and the Python API. Bad arguments
come back as MCP tool errors (`isError`), never as a crash of the server.

Transports: stdio (`moviemem mcp --library DIR`) and streamable HTTP bound to 127.0.0.1
(`--http PORT`, endpoint /mcp). Browsers can reach loopback too, so over HTTP every request
must name a loopback Host and, when it has one, a loopback Origin; anything else gets 403
before the MCP layer sees it (the gateway's rule, backbones/gateway.py).
"""

# no `from __future__ import annotations`: the SDK reads each tool's signature for its JSON
# schema, and string annotations naming this module's locals would not evaluate
import functools
import inspect
import logging
import queue
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import TextContent, ToolAnnotations
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send

from ..foundation._version import __version__
from ..foundation.errors import MovieMemError
from ..foundation.httpserver import BackgroundServer, listen, run
from ..foundation.loopback import LOOPBACK, foreign
from ..foundation.numbers import check_finite, finite_json
from ..foundation.secrets import scrub, scrub_value
from ..foundation.urls import redact_urls
from ..library import Library
from . import film_tools

log = logging.getLogger("moviemem.mcp")
T = TypeVar("T")
HOST = "127.0.0.1"
PATH = "/mcp"
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

INSTRUCTIONS = (
    "Film memory: call list_films for the film ids, film_overview for a film's length, segments and "
    "characters, scenes for its table of contents (each scene's span, characters and summary) to browse "
    "before searching, search for timestamped evidence (ids like utterance:12), read_range for everything "
    "in a time window, frames for stills at given times, graph for the event graph, and ask to have "
    "a policy answer a question. Times are seconds on the film's clock. `until` hides everything "
    "shown after that time (no spoilers)."
)


def _finite(value: Any) -> Any:
    """A reply as it is, once it is known to hold no NaN or Infinity (JSON cannot hold them); walked,
    not serialised, since the SDK serialises the reply itself."""
    check_finite(value)
    return value


def _raising(error: Callable[[str], Exception]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the function's reply scrubbed of every credential of the process (foundation.secrets:
    an answer, a trace or an error may quote an upstream's echo of a key, a backbone spec its URL's
    password), and any error it raises turned into `error(message)`, the MCP error the client sees,
    scrubbed too: a library error as its message, any other as its type and message."""

    def failed(exc: Exception) -> Exception:
        if isinstance(exc, (MovieMemError, ToolError, ResourceError)):
            return error(scrub(str(exc)))
        log.error("%s failed", getattr(error, "__name__", "tool"), exc_info=exc)  # log lines are scrubbed too
        return error(scrub(f"{type(exc).__name__}: {exc}"))

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return scrub_value(_finite(await fn(*args, **kwargs)))
                except Exception as exc:  # noqa: BLE001 - every failure reaches the client as one scrubbed line
                    raise failed(exc) from None

            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return scrub_value(_finite(fn(*args, **kwargs)))
            except Exception as exc:  # noqa: BLE001 - every failure reaches the client as one scrubbed line
                raise failed(exc) from None

        return run

    return wrap


# a tool's bad film id, window, k...: a tool error; a resource's: not found for an unknown film, else a resource error
_tool = _raising(ToolError)
_resource = _raising(lambda msg: (ResourceNotFoundError if "not in the library" in msg else ResourceError)(msg))


PROMPTS = {
    "mcq": "Answer this multiple-choice question about the film {film_id} using the moviemem tools (search, "
           "read_range, frames, graph). Cite the evidence ids you relied on, then give the letter of the answer.\n\n"
           "{question}\n{options}",
    "claim": "Decide whether this claim about the film {film_id} is TRUE or FALSE using the moviemem tools (search, "
             "read_range, frames, graph). Cite the evidence ids you relied on, then answer TRUE or FALSE.\n\n"
             "Claim: {question}",
    "open": "Answer this question about the film {film_id} in one or two sentences using the moviemem tools "
            "(search, read_range, frames, graph), citing the evidence ids you relied on.\n\n{question}",
}


PROGRESS_POLL_S = 0.25  # how soon a step the policy took is sent on
PROGRESS_EVERY_S = 5.0  # the longest silence while a policy works (one step, reading a long prompt, can take minutes)


async def _with_progress(ctx: Context, work: Callable[[], T]) -> T:
    """`work()` (an answer) in a worker thread, with MCP progress notifications: each step the policy
    takes as it takes it (searched, reading N tokens, replied), and the step under way again every
    PROGRESS_EVERY_S, so a client that restarts its time limit on progress keeps waiting (a local
    model reading a few thousand tokens outlasts a 60 s default). Nothing is sent to a client that
    asked for no progress."""
    from ..agents.base import watching

    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    done = anyio.Event()
    value: list[T] = []
    error: list[Exception] = []

    def run() -> T:
        with watching(lambda step: lines.put(step.line())):
            return work()

    async def worker() -> None:
        try:
            value.append(await anyio.to_thread.run_sync(run))
        except Exception as exc:  # noqa: BLE001 - handed to the caller below, outside the task group
            error.append(exc)
        finally:
            done.set()

    started = told = time.monotonic()
    sent, last = 0, "answering"
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        while not done.is_set():
            with anyio.move_on_after(PROGRESS_POLL_S):
                await done.wait()
            fresh = []
            while not lines.empty():
                fresh.append(lines.get())
            now = time.monotonic()
            if not fresh and now - told >= PROGRESS_EVERY_S:
                fresh = [f"{last} ({now - started:.0f} s so far)"]
            for line in fresh:
                sent += 1
                await ctx.report_progress(sent, None, line)
                last, told = line.split(" (", 1)[0] if line.endswith(" s so far)") else line, now
    if error:
        raise error[0]
    return value[0]


Seconds = Annotated[float, Field(description="Seconds on the film's clock.")]
OptSeconds = Annotated[float | None, Field(description="Seconds on the film's clock (optional).")]
FilmId = Annotated[str, Field(description="A film id from list_films.")]


def build_server(lib: Library, *, backbones: Sequence[str] = (), allow_ingest: bool = False,
                 ingest_dir: Path | None = None) -> MCPServer:
    """The MCP server over `lib`. `backbones`: the specs `ask` may use (the first is its
    default; none disables ask). `allow_ingest` adds ingest_text, reading files under `ingest_dir`."""
    mcp = MCPServer("moviemem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    offered: dict[str, str] = {}  # the name clients see and pass (no URL credentials) -> the spec
    for spec in backbones:
        offered.setdefault(redact_urls(spec), spec)
    _add_read_tools(mcp, lib)
    _add_resources_and_prompts(mcp, lib)
    if offered:
        _add_ask(mcp, lib, offered)
    if allow_ingest:
        _add_ingest_text(mcp, lib, (ingest_dir or Path.cwd()).resolve())
    return mcp


def _add_read_tools(mcp: MCPServer, lib: Library) -> None:
    """The read-only tools over the memory: list_films, film_overview, scenes, search, read_range, frames, graph."""

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def list_films() -> dict[str, Any]:
        """The films in the library: {"films": [{"film_id", "title", "duration_s"}]}."""
        return film_tools.list_films(lib)

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def film_overview(film_id: FilmId) -> dict[str, Any]:
        """A film's duration, what its memory holds (row counts, stages), its segments (scenes) and
        its characters as `moviemem characters` lists them ({"name", "names", "lines"}: lines spoken)."""
        return film_tools.film_overview(lib, film_id)

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def scenes(
        film_id: FilmId,
        start: OptSeconds = None,
        end: OptSeconds = None,
        until: Annotated[float | None, Field(description="Only scenes over by this time (no spoilers).")] = None,
    ) -> dict[str, Any]:
        """The film's scenes in screen order, a table of contents to browse before searching: each
        scene's time span, the characters in it and a short summary (`how`: "extractive", its most
        central lines; "pictures", its shots and faces where no words fall; or the id of the model that wrote it).
        Returns {"scenes": [{"scene", "start", "end", "characters", "summary", "how"}], "truncated", "total"}."""
        return film_tools.scenes(lib, film_id, start=start, end=end, until=until)

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def search(
        film_id: FilmId,
        query: Annotated[str, Field(description="What to look for, in words.")],
        k: Annotated[int, Field(description=f"How many results (1-{film_tools.MAX_K}).")] = 10,
        kinds: Annotated[list[str] | None, Field(description="Evidence kinds: " + ", ".join(film_tools.SEARCH_KINDS)
                                                  + " (default: all but passage).")] = None,
        start: OptSeconds = None,
        end: OptSeconds = None,
        until: Annotated[float | None, Field(description="Only what has been shown by this time (no spoilers).")] = None,
    ) -> dict[str, Any]:
        """Hybrid (meaning + keyword) search of the film's transcript, captions, on-screen text and
        events. Returns {"evidence": [{"id", "kind", "start", "end", "text", "score"}]}, best first."""
        return film_tools.search(lib, film_id, query, k=k, kinds=kinds, start=start, end=end, until=until)

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def read_range(
        film_id: FilmId,
        start: Seconds,
        end: Seconds,
        kinds: Annotated[list[str] | None, Field(description="utterance, caption, onscreen, event (default: the "
                                                  "first three).")] = None,
    ) -> dict[str, Any]:
        """Everything the memory holds about [start, end), in time order: transcript, captions,
        on-screen text (and events when asked)."""
        return film_tools.read_range(lib, film_id, start, end, kinds=kinds)

    @mcp.tool(annotations=READ_ONLY, structured_output=False)
    @_tool
    def frames(
        film_id: FilmId,
        times: Annotated[list[float], Field(description=f"1-{film_tools.MAX_FRAMES} times in seconds.")],
    ) -> list[Any]:
        """Stills of the film at the given times (the stored frame nearest to each), as images,
        after one text block listing each frame's own time."""
        stills = film_tools.frames(lib, film_id, times)
        listing = [{"requested": s.requested, "t": s.t, "frame_idx": s.frame_idx} for s in stills]
        return [TextContent(type="text", text=finite_json({"frames": listing})),
                *(Image(data=s.data, format=s.mime.split("/")[1]) for s in stills)]

    @mcp.tool(annotations=READ_ONLY)
    @_tool
    def graph(
        film_id: FilmId,
        op: Annotated[Literal["events", "causes", "effects", "chain", "flashbacks", "story_order", "neighborhood"],
                      Field(description="events (screen order, with relations), story_order, flashbacks, causes "
                                        "or effects of `event`, chain from `event` to `target`, neighborhood of `event`.")] = "events",
        event: Annotated[str | None, Field(description="An event id (from op 'events').")] = None,
        target: Annotated[str | None, Field(description="With op 'chain': the later event id.")] = None,
        hops: Annotated[int, Field(description="With op 'neighborhood': 1-5.")] = 1,
        until: Annotated[float | None, Field(description="Only the events shown by this time.")] = None,
    ) -> dict[str, Any]:
        """Queries on the film's narrative event graph: causes, effects, causal chains,
        flashbacks, story order."""
        return film_tools.graph(lib, film_id, op, event=event, target=target, hops=hops, until=until)


def _add_resources_and_prompts(mcp: MCPServer, lib: Library) -> None:
    """The film list and overviews as resources, and one prompt per benchmark format."""

    @mcp.resource("moviemem://films", mime_type="application/json", description="The films in the library.")
    @_resource
    def films_resource() -> str:
        return finite_json(film_tools.list_films(lib))

    @mcp.resource("moviemem://films/{film_id}", mime_type="application/json",
                  description="A film's overview: duration, counts, segments, characters.")
    @_resource
    def film_resource(film_id: str) -> str:
        return finite_json(film_tools.film_overview(lib, film_id))

    @mcp.prompt(description="A multiple-choice question about a film (the mcq benchmark format), answered with the tools.")
    def mcq(film_id: str, question: str, options: str) -> str:
        """`options`: one per line, or separated by '|'."""
        opts = [o.strip() for o in options.replace("|", "\n").splitlines() if o.strip()]
        letters = "ABCDEFGHIJ"
        return PROMPTS["mcq"].format(film_id=film_id, question=question,
                                     options="\n".join(f"{letters[i]}. {o}" for i, o in enumerate(opts[:len(letters)])))

    @mcp.prompt(description="A TRUE/FALSE claim about a film (the claims benchmark format), checked with the tools.")
    def claim(film_id: str, claim: str) -> str:
        return PROMPTS["claim"].format(film_id=film_id, question=claim)

    @mcp.prompt(description="An open question about a film, answered in a sentence or two with the tools.")
    def open_question(film_id: str, question: str) -> str:
        return PROMPTS["open"].format(film_id=film_id, question=question)


def _add_ask(mcp: MCPServer, lib: Library, offered: dict[str, str]) -> None:
    """The ask tool, answering with the `offered` backbones (name clients see -> spec)."""

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    @_tool
    async def ask(
        film_id: FilmId,
        question: Annotated[str, Field(description="The question (or the claim, with kind 'claim').")],
        options: Annotated[list[str] | None, Field(description="Answer options for a multiple-choice question.")] = None,
        kind: Annotated[Literal["mcq", "claim", "open"] | None, Field(description="Default: mcq with options, else open.")] = None,
        policy: Annotated[str, Field(description="An answering policy (moviemem policies).")] = "hybrid",
        backbone: Annotated[str | None, Field(description="One of: " + ", ".join(offered))] = None,
        until: Annotated[float | None, Field(description="Show the policy only what is on screen by then.")] = None,
        *, ctx: Context,
    ) -> dict[str, Any]:
        """Answer a question about a film with a policy and a backbone model; returns the answer,
        the evidence shown (cited items marked), tokens, latency and whether it was replayed.
        An answer takes seconds to minutes (a local model reads a few thousand tokens; an open
        question takes longest): ask with a progress token to get each step as a progress
        notification, at least every 5 s, and let the time limit restart on progress, or allow
        several minutes."""
        spec = offered.get(backbone) if backbone is not None else next(iter(offered.values()))
        if spec is None:
            raise MovieMemError(f"backbone {redact_urls(str(backbone))!r} is not offered by this server; "
                                f"use {', '.join(offered)}")

        def work() -> dict[str, Any]:
            return film_tools.ask(lib, film_id, question, backbone=spec, options=options, kind=kind, policy=policy,
                                  until=until)

        return await _with_progress(ctx, work)


def _add_ingest_text(mcp: MCPServer, lib: Library, root: Path) -> None:
    """ingest_text, the one tool that writes, reading files under `root` only."""

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    @_tool
    def ingest_text(
        path: Annotated[str, Field(description=f"A subtitle/script/description file under {root}.")],
        film_id: Annotated[str | None, Field(description="Film id (default: from the file name).")] = None,
        title: str | None = None,
        track: Annotated[Literal["utterances", "captions"],
                         Field(description="utterances (dialogue) or captions (description).")] = "utterances",
    ) -> dict[str, Any]:
        """Add a film without video to the library from a text track (SRT, WebVTT, Movie101
        narration, JSON cues). Refuses to replace a film that is already there."""
        return film_tools.ingest_text(lib, root, path, film_id=film_id, title=title, as_=track)


# ----------------------------------------------------------------------------- transports


class OriginGuard:
    """ASGI middleware: 403 unless Host (and Origin, when sent) name a loopback address."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str] = LOOPBACK):
        self.app = app
        self.allowed = set(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            if foreign(headers.get("host"), headers.get("origin"), self.allowed):
                body = b"this MCP server answers only requests to and from 127.0.0.1, localhost and ::1"
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer) -> ASGIApp:
    """The streamable-HTTP app behind the Host/Origin guard (the SDK's own DNS-rebinding check
    stays on as a second line)."""
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    return OriginGuard(server.streamable_http_app(streamable_http_path=PATH, transport_security=security, host=HOST))


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0 picks a free one)."""
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise MovieMemError(f"--http takes a port number 0-65535, not {port!r}")
    return listen(HOST, port)


class HttpServer(BackgroundServer):
    """The HTTP server in a background thread (tests, benchmarks): `url`, `stop()`."""

    def __init__(self, server: MCPServer, port: int = 0):
        super().__init__(http_app(server), bind(port), what="MCP HTTP server", lifespan="on")
        self.url = f"http://{HOST}:{self.port}{PATH}"

    def __enter__(self) -> "HttpServer":
        return self.start()


def serve(lib: Library, *, http_port: int | None = None, backbones: Sequence[str] = (), allow_ingest: bool = False,
          ingest_dir: Path | None = None, announce: Callable[[str], None] = lambda line: None) -> None:
    """Run in the foreground until interrupted: stdio when `http_port` is None, else HTTP."""
    server = build_server(lib, backbones=backbones, allow_ingest=allow_ingest, ingest_dir=ingest_dir)
    if http_port is None:
        announce(f"moviemem MCP server on stdio (library {lib.path})")
        server.run("stdio")
        return
    sock = bind(http_port)
    announce(f"moviemem MCP server on http://{HOST}:{sock.getsockname()[1]}{PATH} (library {lib.path})")
    run(http_app(server), sock, lifespan="on", grace=2)


def command(library: str | Path | None, *, http_port: int | None, backbones: Sequence[str] | None,
            no_ask: bool, allow_ingest: bool, ingest_dir: Path | None, announce: Callable[[str], None]) -> None:
    """`moviemem mcp`: refuse a library directory that does not exist (a typo would otherwise
    serve a new, empty library), then serve."""
    from ..foundation.config import get_settings

    settings = get_settings(library=library)
    path = settings.library_dir
    if "://" not in str(path) and not Path(path).is_dir():
        raise MovieMemError(f"no library at {path} (ingest a film first, or pass --library DIR)")
    if ingest_dir is not None and not allow_ingest:
        raise MovieMemError("--ingest-dir needs --allow-ingest")
    if ingest_dir is not None and not ingest_dir.is_dir():
        raise MovieMemError(f"--ingest-dir {ingest_dir} is not a directory")
    specs = [] if no_ask else list(backbones or [settings.backbone])
    serve(Library(path, settings), http_port=http_port, backbones=specs, allow_ingest=allow_ingest,
          ingest_dir=ingest_dir, announce=announce)
