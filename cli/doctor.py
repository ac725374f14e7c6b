"""`moviemem doctor`: is this machine ready, and for each thing that is not, the line that fixes it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.text import Text

from ..foundation.config import get_settings
from .common import JsonOpt, LibraryOpt, RayOpt, _print_json, app, err, out


@app.command()
def doctor(
    only: Annotated[Optional[list[str]], typer.Option("--only", help="Run only these checks (repeatable): tools, models, cpu, llama, disk, library.")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Re-hash every offline model (slower).")] = False,
    backbone: Annotated[str, typer.Option("--backbone", help="The local model the llama check loads in a child process.")] = "local-small",
    library: LibraryOpt = None,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check ffmpeg, tesseract, the offline models, the CPU's instruction sets, the llama.cpp build (one token
    in a child process), free disk and the library; exit 2 when any fails, with each failure's fix."""
    from ..doctor.checks import Check, failures, run_checks, timed
    from ..doctor.checks import as_json as checks_json

    settings = get_settings(library=library) if library else get_settings()

    def show(c: Check) -> None:
        if as_json:
            return
        mark, style = {True: ("ok  ", "green"), False: ("FAIL", "red"), None: ("skip", "yellow")}[c.ok]
        out.print(Text.assemble((mark, style), f" {c.name}: {c.detail}"), highlight=False, soft_wrap=True)
        if c.fix:
            out.print(f"     fix: {c.fix}", highlight=False, soft_wrap=True)

    if ray is not None:
        from ..scale.cluster import session
        from ..scale.ray_doctor import doctor_on_ray

        with session(ray) as cluster:
            err.print(cluster.line(), highlight=False)
            nodes = doctor_on_ray(only, settings, backbone)
        found = []
        for host, checks in nodes:
            found += [Check(f"{host}: {c.name}", c.ok, c.detail, c.fix) for c in checks]
            for c in checks:
                show(Check(f"{host}: {c.name}", c.ok, c.detail, c.fix))
        seconds = 0.0
    else:
        found, seconds = timed(lambda: run_checks(only, settings=settings, verify=verify, backbone=backbone, on_check=show))
    bad = failures(found)
    if as_json:
        _print_json(checks_json(found, seconds))
    elif bad:
        err.print(f"{len(bad)} check(s) failed: {', '.join(c.name for c in bad)}", highlight=False)
    else:
        out.print(f"all checks passed in {seconds:.1f} s", highlight=False)
    if bad:
        raise typer.Exit(2)
