"""The synthetic film and the demo: synth, demo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .bench import bench, report
from .common import (
    JsonOpt,
    LibraryOpt,
    _library,
    _print_paths,
    _reporter,
    _show_human,
    _span,
    _styled,
    app,
    err,
    out,
)


@app.command()
def synth(
    out_dir: Path,
    minutes: Annotated[float, typer.Option(help="Length of the film in minutes (2.5 to 600).")] = 3.0,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same film).")] = 7,
    film_id: Annotated[str, typer.Option("--film-id", help="Film id written into the benchmark files.")] = "synth",
    as_json: JsonOpt = False,
) -> None:
    """Render a synthetic film with known ground truth and benchmark files."""
    from ..synth import render

    paths = render(out_dir, minutes=minutes, seed=seed, film_id=film_id)
    _print_paths(paths, as_json)


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the synthetic film and the run are written.")] = Path("out/demo"),
    minutes: Annotated[float, typer.Option(help="Length of the synthetic film in minutes (2.5 to 600).")] = 3.0,
    backbone: Annotated[str, typer.Option(help="Backbone for the questions and the bench.")] = "local",
    questions: Annotated[int, typer.Option(help="Questions asked with the hybrid policy.")] = 2,
    bench_items: Annotated[int, typer.Option("--bench-items", help="Items of the small bench (0 skips it).")] = 4,
    library: LibraryOpt = None,
) -> None:
    """Render the synthetic film, ingest it, ask a few questions, run a small bench and write its report."""
    from ..eval.formats import text_lines
    from ..synth import render

    lib = _library(library, create=True)
    _styled(err, "bold", "1/4", f" rendering a {minutes:g}-minute synthetic film into {out_dir}")
    paths = render(out_dir, minutes=minutes, seed=7, film_id="synth")
    _styled(err, "bold", "2/4", f" ingesting it into {lib.path} (captions imported from captions.srt: no captioner runs here)")
    film = lib.ingest(paths["film.mp4"], film_id="synth", title="Synthetic", year=2026, captions=paths["captions.srt"],
                      reporter=_reporter(False))
    _show_human(film.summary())
    items = [json.loads(line) for _, line in text_lines(paths["mcq.jsonl"].read_text())][:questions]
    _styled(err, "bold", "3/4", f" asking {len(items)} question(s) with the hybrid policy and the {backbone} backbone")
    for item in items:
        ans = film.ask(item["question"], options=item["options"], policy="hybrid", backbone=backbone)
        got = "invalid" if ans.invalid else ans.choice
        _styled(out, "bold", "Q", f" {item['question']}\n  answer {got} (truth {item['answer']}), "
                f"{len(ans.evidence)} evidence, {ans.usage.input_tokens} input tokens")
        for ev in ans.evidence[:3]:
            out.print(f"    {ev.kind:<10} {_span(ev.start, ev.end):<19}  {(ev.text or '')[:70]}", highlight=False)
    if bench_items > 0:
        run_dir = out_dir / "run"
        _styled(err, "bold", "4/4", f" a small bench: closed-book, subtitles and hybrid x {backbone} on {bench_items} items")
        bench(paths["mcq.jsonl"], format_=None, policies_="closed-book,subtitles,hybrid", backbones_=backbone,
              out_dir=run_dir, limit=bench_items, concurrency=1, max_cost=None, max_tokens=None, cache=None,
              retry_invalid=False, library=library, as_json=False)
        report(run_dir, baseline=None, inspector=True, as_json=False)


