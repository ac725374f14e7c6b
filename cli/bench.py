"""Commands that measure: bench, report, compare, inspect, judge, retrieval-eval, filter."""

from __future__ import annotations

import contextlib
import functools
import http.server
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from ..foundation.errors import MovieMemError
from ..foundation.loopback import foreign
from . import follow
from .common import (
    JsonOpt,
    LibraryOpt,
    RayOpt,
    _csv,
    _library,
    _open_backbone,
    _print_json,
    _print_paths,
    _styled,
    app,
    err,
    out,
)


@app.command()
def bench(
    file: Annotated[Path, typer.Argument(help="Benchmark: JSONL (mcq, claims, relations, localization, open, narration), MF² metadata.csv, MovieCORE json or Movie101 narration files.")],
    format_: Annotated[Optional[str], typer.Option("--format", help="Format or adapter (default: from the file).")] = None,
    policies_: Annotated[str, typer.Option("--policies", help="Comma-separated policies; settings as name[key=value].")] = "subtitles",
    backbones_: Annotated[str, typer.Option("--backbones", help="Comma-separated backbone specs.")] = "local",
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default runs/<file name>); a rerun resumes it.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N items.")] = None,
    sample: Annotated[Optional[int], typer.Option("--sample", help="A seeded random sample of N items (instead of the first N).")] = None,
    stratify: Annotated[Optional[str], typer.Option("--stratify", help="With --sample: keep each category's (or film's) share: category or film.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="With --sample: the sample's seed (the same seed picks the same items; default 0).")] = None,
    concurrency: Annotated[int, typer.Option(help="Items answered at once.")] = 1,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", help="Stop before spending more than this many USD on model calls (cache hits are free).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Token cap: no call starts unless the tokens spent, those calls in flight may still produce and its own max_tokens fit under it (a call's prompt tokens are counted when it returns).")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="Replay cache directory (default <library>/cache).")] = None,
    retry_invalid: Annotated[bool, typer.Option("--retry-invalid", help="Answer again the items recorded invalid.")] = False,
    reask_changed: Annotated[bool, typer.Option("--reask-changed", help="Ask again the items whose content changed under an id this --out already answered (their old answers are superseded).")] = False,
    permute: Annotated[bool, typer.Option("--permute", help="MCQ position bias: ask each item once per rotation of its options (ids ID@rK); the report adds consistency and the letter distribution.")] = False,
    ray: RayOpt = None,
    ray_workers: Annotated[Optional[int], typer.Option("--ray-workers", help="With --ray: answering workers (default one per CPU); --concurrency is then per worker.")] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Call no model: print what the bench would take (calls, tokens, cost, wall time, cache hits) and stop.")] = False,
    protocol: Annotated[Optional[str], typer.Option("--protocol", help="mf2:DIR[:STYLE[:PARSER]]: ask claims with the MF² release's own templates and parser, read from your copy of the release in DIR (default direct_free, first-occurrence); closed-book asks the statement alone, subtitles the transcript, hybrid its evidence in the transcript's place.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress on stderr (a terminal shows bars, a log plain lines with a heartbeat every progress_interval_s).")] = False,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run policies x backbones over a benchmark; resumable, with caps on cost and tokens."""
    from ..eval.formats import load_benchmark
    from ..eval.runner import bench_json, run_bench

    if ray_workers is not None and ray is None:
        raise MovieMemError("--ray-workers needs --ray ADDRESS")
    if ray is not None:
        from ..scale.cluster import parse_address

        parse_address(ray)  # bad input fails before anything is read
    if sample is not None and limit is not None:
        raise MovieMemError("--sample and --limit both choose items; give one")
    if (stratify is not None or seed is not None) and sample is None:
        raise MovieMemError("--stratify and --seed need --sample N")
    lib = _library(library)
    b = load_benchmark(file, format_, library=lib)
    if sample is not None:
        from ..eval.sample import sample as sample_items

        b = sample_items(b, sample, stratify=stratify, seed=seed or 0)
    if permute:
        from ..eval.permute import rotated

        b = rotated(b)
    pols, bbs = _csv(policies_), _csv(backbones_)
    if protocol is not None:  # issue 56: each policy becomes mf2-release in its modality, checked before any write
        from ..eval.mf2_protocol import protocol_policies

        if b.format != "claims":
            raise MovieMemError(f"--protocol mf2 asks claim pairs; {file} holds {b.format} items")
        pols = protocol_policies(protocol, pols)
    run_dir = out_dir or Path("runs") / file.stem
    if plan:  # issue 57: the spend, before it is spent
        from ..eval.plan import plan_bench
        from .plan import print_plan

        print_plan(plan_bench(b, pols, bbs, lib, run_dir=run_dir, cache=cache, limit=limit), as_json)
        return
    run: Any = functools.partial(run_bench, library=lib)
    with contextlib.ExitStack() as stack:
        if ray is not None:
            from ..scale.cluster import session
            from ..scale.ray_bench import bench_on_ray

            err.print(stack.enter_context(session(ray)).line(), highlight=False)
            run = functools.partial(bench_on_ray, library=lib.path, settings=lib.settings, workers=ray_workers)
        shown = stack.enter_context(follow.bench_progress(quiet, f"bench {b.format}"))  # issue 61: bars, log lines or none
        res = run(b, pols, bbs, run_dir, concurrency=concurrency, max_cost_usd=max_cost, max_tokens=max_tokens,
                  cache=cache, limit=limit, retry_invalid=retry_invalid, reask_changed=reask_changed, progress=shown)
    for w in res.warnings:
        _styled(err, "yellow", "warning:", f" {w}")
    if res.stopped:
        _styled(err, "yellow", "stopped:", f" {res.stopped}")
    summary = bench_json(res)
    if as_json:
        _print_json(summary)
        return
    from ..eval.names import display_names

    names = display_names(r["policy"] for r in summary["results"])  # run.json keeps the full specs
    t = Table("policy", "backbone", "n", "accuracy", "95% CI", "median input tokens", box=None)
    for r in summary["results"]:
        acc = "n/a" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}"
        ci = "" if r["ci_low"] is None or r["ci_high"] is None else f"{100 * r['ci_low']:.1f}-{100 * r['ci_high']:.1f}"
        t.add_row(names[r["policy"]], r["backbone"], str(r["n"]), acc, ci, str(r["median_input_tokens"]))
    out.print(t)
    err.print(f"{res.answered} answered, {res.invalid} invalid" + (f", {res.unfit} not sent (longer than the context)" if res.unfit else "")
              + f" of {res.total}; {res.spend.calls} model calls, "
              f"{res.spend.cache_hits} cache hits, ${res.spend.cost_usd:.4f}; results in {res.run_dir}", highlight=False)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `moviemem bench`.")],
    baseline: Annotated[Optional[str], typer.Option(help="Policy to compare the others with (default closed-book or subtitles when present).")] = None,
    inspector: Annotated[bool, typer.Option("--inspector/--no-inspector", help="Also write the HTML inspector.")] = True,
    wide: Annotated[bool, typer.Option("--wide", help="Keep every table of report.md whole (by default one wider than 100 columns is cut into several, each led by the policy and backbone).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write report.md, accuracy_vs_tokens.png and the HTML inspector of a run."""
    from ..eval.report import write_report

    paths = write_report(run_dir, baseline=baseline, inspector=inspector, wide=wide)
    _print_paths(paths, as_json)


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="The first run directory (before a change, say).")],
    run_b: Annotated[Path, typer.Argument(help="The second run directory (the same one to compare two of its policies).")],
    policy_a: Annotated[Optional[str], typer.Option(help="The first run's policy, where it holds several.")] = None,
    policy_b: Annotated[Optional[str], typer.Option(help="The second run's policy, where it holds several.")] = None,
    backbone_a: Annotated[Optional[str], typer.Option(help="The first run's backbone, where it holds several.")] = None,
    backbone_b: Annotated[Optional[str], typer.Option(help="The second run's backbone, where it holds several.")] = None,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="NAME=FILM,FILM: also compare on these films' items (repeatable; e.g. the dev set's halves).")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write the two side by side to this HTML page: the items only one got right first, both sides' evidence on one timeline.")] = None,
    wide: Annotated[bool, typer.Option("--wide", help="One table with every column, however wide (by default the columns are cut into tables that fit the terminal).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Two configurations paired item by item, overall and per group of films: right answers, the items
    only one got right, McNemar's test and median input tokens."""
    from ..eval.compare import Side, parse_groups
    from ..eval.compare import compare as compare_sides

    sides, groups = (Side(run_a, policy_a, backbone_a), Side(run_b, policy_b, backbone_b)), parse_groups(group or [])
    rows = compare_sides(*sides, groups)
    if html is not None:  # issue 57: the items behind the figures
        from ..eval.compare_page import write_compare_page

        err.print(f"wrote {write_compare_page(*sides, html, groups)}", highlight=False)
    if rows[0].unmatched:
        _styled(err, "yellow", "warning:", f" {rows[0].unmatched} item id(s) name another film or question in each run: "
                                           "counted apart as unmatched, not paired")
    if as_json:
        _print_json({"a": str(run_a), "b": str(run_b), "groups": [r.to_dict() for r in rows]})
        return
    from ..eval.markdown import diff

    body = [[r.group, str(r.n), str(r.a_correct), str(r.b_correct), str(r.a_only), str(r.b_only),
             diff(r.difference, r.ci_low, r.ci_high), "n/a" if r.n == 0 else f"{r.p_value:.3g}",
             " / ".join("n/a" if x is None else f"{x:,.0f}" for x in (r.a_median_input_tokens, r.b_median_input_tokens)),
             str(r.unpaired), str(r.unmatched)] for r in rows]
    _fitted(["group", "paired", "A right", "B right", "A only", "B only", "A - B (95% CI)", "p", "median tokens A / B",
             "unpaired", "unmatched"], body, wide)


def _fitted(header: list[str], rows: list[list[str]], wide: bool, keys: int = 1) -> None:
    """A table on stdout that fits the terminal: its columns cut into several tables, each led by the `keys`
    columns, rather than squeezed until headers read `unpair…`; `wide` prints it whole, however wide."""
    from rich.console import Console

    from ..eval.markdown import column_groups

    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    groups = [list(range(len(header)))] if wide else column_groups([widths], keys, out.width, gap=2)
    # --wide: a console as wide as the table, whatever the terminal's width (the terminal may then wrap lines)
    console = Console(file=out.file, width=sum(w + 2 for w in widths), markup=False, emoji=False) if wide else out
    for n, cols in enumerate(groups):
        t = Table(*(header[i] for i in cols), box=None)
        for r in rows:
            t.add_row(*(r[i] for i in cols))
        if n:
            console.print()
        console.print(t)


class InspectorFiles(http.server.SimpleHTTPRequestHandler):
    """The inspector's files, to loopback requests only (foundation/loopback.py says why). A client that
    stalls mid-request is dropped after `timeout` seconds instead of holding its thread. Only regular
    files that resolve inside the folder are served, and no folder is listed: a run folder from someone
    else may hold links (`inspector/root -> /`)."""

    timeout = 10

    def send_head(self) -> Any:
        if foreign(self.headers.get("host"), self.headers.get("origin")):
            self.send_error(403, "this inspector answers only requests to and from 127.0.0.1, localhost and ::1")
            return None
        path = self.translate_path(self.path)
        if "\0" in path:  # /%00: open() would raise ValueError, not OSError
            self.send_error(400, "a path with a NUL byte names no file")
            return None
        if not (self._inside(Path(path)) or self._inside(Path(path), folder=True) and self._inside(Path(path) / "index.html")):
            self.send_error(404, "File not found")
            return None
        return super().send_head()  # a folder is answered by its index.html (checked above) or a redirect to it

    def _inside(self, path: Path, folder: bool = False) -> bool:
        """Whether `path` resolves inside the served folder to a regular file (with `folder`: to a folder)."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):  # missing, a loop of links
            return False
        return real.is_relative_to(Path(self.directory).resolve()) and (real.is_dir() if folder else real.is_file())

    def list_directory(self, path: Any) -> None:
        self.send_error(404, "File not found")  # never a listing, whatever reached here
        return None


@app.command()
def inspect(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `moviemem bench`.")],
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free one).", min=0, max=65535)] = 8765,
    serve_: Annotated[bool, typer.Option("--serve/--no-serve", help="Serve the inspector over HTTP (until Ctrl-C).")] = True,
    open_: Annotated[bool, typer.Option("--open", help="Open it in a web browser.")] = False,
) -> None:
    """Build the static HTML inspector of a run and serve (or open) it."""
    import webbrowser

    from ..eval.inspector import write_inspector

    index = write_inspector(run_dir)
    if not serve_:
        out.print(str(index))
        if open_:
            webbrowser.open(index.resolve().as_uri())
        return
    handler = functools.partial(InspectorFiles, directory=str(index.parent))
    try:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise MovieMemError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; try --port") from None
    url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"  # the port the system gave, with --port 0
    err.print(f"serving {index.parent} at {url} (Ctrl-C stops)")
    if open_:
        webbrowser.open(url)
    with httpd:
        httpd.serve_forever()


@app.command()
def judge(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of open or narration answers.")],
    backbone: Annotated[str, typer.Option(help="Judge backbone spec.")] = "local",
    repeats: Annotated[int, typer.Option(help="Judge each answer this many times and report agreement.")] = 1,
    cache: Annotated[Optional[Path], typer.Option(help="Replay cache directory (default <library>/cache).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score open answers (MovieCORE criteria) or narrations (Movie101v2 L1/L2) with an LLM judge."""
    from ..eval.judge import judge_run, judge_summary
    from ..eval.log import jsonable

    counts = judge_run(run_dir, backbone, repeats=repeats, cache=cache)
    rows = judge_summary(run_dir)
    if as_json:
        _print_json(jsonable({"run_dir": str(run_dir), **counts, "results": rows}))
        return
    err.print(f"{counts['judged']} judged, {counts['failed']} failed judge calls, "
              f"{counts['skipped_invalid']} invalid answers not judged; `moviemem report {run_dir}` shows the scores")


@app.command("retrieval-eval")
def retrieval_eval_cmd(
    file: Annotated[Path, typer.Argument(help="Benchmark JSONL whose items carry gold `evidence` spans (mcq or claims).")],
    retrievers: Annotated[str, typer.Option("--retrievers", help="Comma-separated registered retrievers (see --list; plug-ins through the entry-point group moviemem.retrievers); `hybrid` is the hybrid policy's default.")] = "hybrid",
    budgets: Annotated[str, typer.Option("--budgets", help="Comma-separated evidence token budgets.")] = "250,500,1000,2000,4000",
    plot_path: Annotated[Optional[Path], typer.Option("--plot", help="Write recall and coverage against budget as a PNG.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the retrievers and exit.")] = False,
    backbone: Annotated[Optional[str], typer.Option("--backbone", help="Backbone that judges candidates, for retrievers that rerank (hybrid-rerank).")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Retrieval alone, no backbone (but for reranking): evidence recall and coverage at token budgets, recall@k, MRR."""
    from rich.table import Table

    from ..eval.formats import load_benchmark
    from ..eval.retrieval_eval import plot, retrieval_eval
    from ..retrievers.registry import RETRIEVERS, describe

    if list_:
        for name in RETRIEVERS.names():
            source = RETRIEVERS.entry(name).source
            out.print(f"{name:20s} {describe(name)}" + ("" if source == "moviemem" else f" [{source}]"), highlight=False)
        return
    try:
        sizes = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise MovieMemError(f"--budgets takes comma-separated integers, not {budgets!r}") from None
    if plot_path is not None and not plot_path.parent.is_dir():  # before the evaluation, not after it
        raise MovieMemError(f"cannot write {plot_path}: no folder {plot_path.parent}")
    lib = _library(library)
    result = retrieval_eval(lib, load_benchmark(file, library=lib), [r.strip() for r in retrievers.split(",") if r.strip()],
                            sizes, backbone=_open_backbone(lib, backbone) if backbone else None)
    if plot_path is not None:
        plot(result, str(plot_path))
    if as_json:
        _print_json(result)
        return
    table = Table(title=f"{result['items']} queries with gold evidence")
    for col in ["retriever", *(f"R@{b}" for b in sizes), *(f"C@{b}" for b in sizes), "MRR"]:
        table.add_column(col)
    for r in result["retrievers"]:
        table.add_row(r["name"] + (" (default)" if r["default"] else ""),
                      *(f"{r['recall_at_budget'][str(b)]:.2f}" for b in sizes),
                      *(f"{r['coverage_at_budget'][str(b)]:.2f}" for b in sizes), f"{r['mrr']:.2f}")
        for key, label in (("one", "gold in one span"), ("several", "gold in 2+ spans")):
            part = r["by_spans"].get(key)
            if part and len(r["by_spans"]) > 1:
                table.add_row(f"  {label} (n={part['n']})", *(f"{part['recall_at_budget'][str(b)]:.2f}" for b in sizes),
                              *(f"{part['coverage_at_budget'][str(b)]:.2f}" for b in sizes), f"{part['mrr']:.2f}")
    out.print(table)


@app.command("filter")
def filter_cmd(
    file: Annotated[Path, typer.Argument(help="An mcq benchmark.")],
    closed_book_backbones: Annotated[str, typer.Option("--closed-book-backbones", help="Comma-separated backbones asked with title and year only.")],
    out_path: Annotated[Path, typer.Option("--out", help="The filtered JSONL.")],
    format_: Annotated[Optional[str], typer.Option("--format", help="Format (default: from the file).")] = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Where the closed-book run goes (default next to --out).")] = None,
    concurrency: Annotated[int, typer.Option(help="Items answered at once.")] = 1,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", help="Stop before spending more than this many USD.")] = None,
    library: LibraryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Memorization filter (CHNB appendix D): keep questions closed-book models cannot answer."""
    from ..eval.filter import filter_benchmark

    result, path, report_path = filter_benchmark(file, _csv(closed_book_backbones), out_path, library=_library(library),
                                                 run_dir=run_dir, concurrency=concurrency, max_cost_usd=max_cost, fmt=format_)
    summary = {"out": str(path), "report": str(report_path), "kept": len(result.kept), "excluded": len(result.excluded),
               "accuracy_before": result.accuracy_before, "accuracy_after": result.accuracy_after,
               "chance": result.chance, "per_category": result.per_category}
    if as_json:
        _print_json(summary)
        return

    def pct(x: float | None) -> str:  # None: nothing kept
        return "n/a" if x is None else f"{100 * x:.1f}%"

    out.print(f"kept {len(result.kept)} of {len(result.kept) + len(result.excluded)} questions; closed-book accuracy "
              f"{pct(result.accuracy_before)} -> {pct(result.accuracy_after)} (chance {pct(result.chance)})")
    t = Table("category", "questions", "excluded", "rate", box=None)
    for c, v in result.per_category.items():
        t.add_row(c, str(v["n"]), str(v["excluded"]), f"{100 * v['exclusion_rate']:.0f}%")
    out.print(t)
    err.print(f"wrote {path} and {report_path}")


