"""`moviemem show-call`: a model call of a run as the model read it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import JsonOpt, _print_json, app


@app.command("show-call")
def show_call(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `moviemem bench`.")],
    item: Annotated[str, typer.Argument(help="The item's id.")],
    policy: Annotated[Optional[str], typer.Option(help="The policy, where several answered the item.")] = None,
    backbone: Annotated[Optional[str], typer.Option(help="The backbone, where several answered the item.")] = None,
    query: Annotated[Optional[str], typer.Option(help="One answer of the item: a claim pair's `true` or `false`.")] = None,
    call: Annotated[Optional[int], typer.Option(help="Only the Nth call of each answer (1-based).", min=1)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print an item's model calls as sent: every message's text (the whole transcript a subtitles prompt
    carried, the question), the schema or tools offered, the reply and its log-probabilities."""
    from ..eval.call_view import call_text, find_calls

    calls = find_calls(run_dir, item, policy, backbone, query, call)
    if as_json:
        _print_json({"calls": [{"policy": c.policy, "backbone": c.backbone, "item_id": c.item_id, "query": c.query,
                                "call": c.n, "prompt": c.line.prompt, "version": c.line.version,
                                "messages": [{"role": m.role, "text": m.text, "tool_calls": m.tool_calls}
                                             for m in c.messages],
                                "json_schema": c.schema, "tools": c.tools,
                                "options": c.line.options.model_dump(mode="json", exclude={"json_schema", "tools"}),
                                "reply": c.line.reply.model_dump(mode="json"),
                                "usage": c.line.usage.model_dump(mode="json")} for c in calls]})
        return
    for c in calls:
        sys.stdout.write(call_text(c))
