"""Reports of a run directory: report.md (tables like CHNB Table 1) and accuracy_vs_tokens.png, with
the HTML inspector (inspector.py) beside them. A format's own tables (MF² pairs, NEST relations) come
from its task (`Task.report_section`), so a new format gets its report without an edit here.

Every table names a policy by its display name (names.py: `closed-book@mf2:direct_free`, not the spec of
120 characters; the report lists which stands for which) and fits 100 columns of text: a wider one is cut
by columns into several, each led by the policy and backbone (`wide=True`, `report --wide`, keeps each whole).
"""

from __future__ import annotations

import inspect as pyinspect
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ..agents.registry import parse_policy_spec
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_path, atomic_write_text
from . import evidence, metrics, mf2_protocol, provenance
from . import markdown as md
from .formats import Item
from .inspector import INSPECTOR, write_inspector
from .names import display_names, legend
from .records import EstimateLine, Grid, ResultRecord, RunHeader, SummaryRow
from .run import RunLog, open_run
from .tasks import Task

REPORT = "report.md"
PLOT = "accuracy_vs_tokens.png"
Names = Mapping[str, str]  # policy spec -> the name a table shows (names.display_names)


def _paired(grid: Grid, baseline: str, names: Names) -> list[list[Any]]:
    """Each configuration against the baseline's on the same backbone: the difference with Newcombe's
    interval (within ±100), the discordant pairs and McNemar's p."""
    rows = []
    bases: dict[str, dict[str, bool | None]] = {}  # backbone -> the baseline's verdicts, each read once
    for policy, backbone in sorted(grid):
        if policy == baseline or (baseline, backbone) not in grid:
            continue
        # verdicts only: a configuration's records are objects while they are read, one at a time (lean_log.py)
        if backbone not in bases:
            bases[backbone] = {r.item_id: r.correct for r in grid[(baseline, backbone)]}
        base = bases[backbone]
        shared = [(r.correct, base[r.item_id]) for r in grid[(policy, backbone)] if r.item_id in base]
        if not shared:
            continue
        p = metrics.mcnemar([c for c, _ in shared], [b for _, b in shared])
        rows.append([names[policy], backbone, p.n, md.diff(p.diff, p.ci_low, p.ci_high), f"{p.n10} / {p.n01}",
                     f"{p.p_value:.3g}", p.test])
    return rows


def _sweeps(rows: Sequence[SummaryRow], wide: bool) -> str:
    """Policies run under several values of one numeric setting (e.g. `end-to-end[frames=64]`
    and `[frames=256]`): accuracy and tokens against the setting (CHNB's frame-budget sweep)."""
    groups: dict[tuple[str, str, str], list[tuple[float, SummaryRow]]] = defaultdict(list)
    for r in rows:
        name, settings = parse_policy_spec(r["policy"])
        for key, value in settings.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                groups[(name, key, r["backbone"])].append((float(value), r))
    table = []
    for (name, key, backbone), pts in sorted(groups.items()):
        if len({v for v, _ in pts}) < 2:
            continue
        for v, r in sorted(pts, key=lambda p: p[0]):
            table.append([name, key, f"{v:g}", backbone, md.pct(r.get("accuracy")), md.count(r["median_input_tokens"]),
                          md.secs(r["compute_s"])])
    if not table:
        return ""
    return "\n".join(["## Setting sweeps", "", md.tables(["policy", "setting", "value", "backbone", "accuracy",
                                                          "median input tokens", "compute (s)"], table, keys=4, wide=wide)])


def _calls_per_answer(recs: Sequence[ResultRecord]) -> str:
    """Model calls per answer (a claim pair's record holds two), replayed ones included: what a rerun
    without the cache would make."""
    answers = [a for r in recs for a in r.answers.values()]
    return f"{sum(a.calls for a in answers) / len(answers):.1f}" if answers else "n/a"


def _results(rows: Sequence[SummaryRow], grid: Grid, names: Names, wide: bool) -> list[str]:
    """Accuracy and cost as two tables, each cut to fit a terminal or a pull request unless `wide`."""
    return ["## Results", "", md.tables(
        ["policy", "backbone", "n", "not sent (context)", "accuracy", "accuracy ± (Wald, CHNB)", "clustered 95% CI",
         "invalid %", "guesses %", "fallback-parsed %"],
        [[names[r["policy"]], r["backbone"], r["n"], r.get("unfit_n", 0), md.pct(r.get("accuracy")),
          md.wald(r.get("accuracy")), md.ci(r.get("accuracy_clustered")), md.pct(r.get("invalid")),
          md.pct(r.get("guesses")), md.pct(r.get("fallback_parsed"))] for r in rows], wide=wide),
        "", "## Cost", "", md.tables(
        ["policy", "backbone", "calls / answer", "median input tokens", "input tokens billed", "read", "restored",
         "output tokens", "compute (s)", "cost ($)"],
        [[names[r["policy"]], r["backbone"], _calls_per_answer(grid.get((r["policy"], r["backbone"]), [])),
          md.count(r["median_input_tokens"]), md.count(r.get("total_input_tokens")), md.count(r.get("total_processed_tokens")),
          md.count(r.get("total_restored_tokens", 0)), md.count(r["total_output_tokens"]),
          md.secs(r["compute_s"]), md.money(r["cost_usd"])] for r in rows], wide=wide)]


def _per_film(items: list[Item], grid: Grid, baseline: str | None, names: Names, wide: bool) -> str:
    films = sorted({it.film_id for it in items})
    if len(films) < 3:
        return ""
    acc: dict[tuple[str, str], dict[str, float]] = {}
    for key in grid:  # one configuration's records at a time (lean_log.py)
        per: dict[str, list[bool]] = defaultdict(list)
        for r in grid[key]:
            per[r.film_id].append(bool(r.correct))
        acc[key] = {f: sum(v) / len(v) for f, v in per.items()}
    keys = sorted(acc)
    out = ["## Per-film accuracy", "", md.tables(["film", *(f"{names[p]} / {b}" for p, b in keys)],
                                               [[f, *(f"{100 * acc[k][f]:.0f}" if f in acc[k] else "" for k in keys)]
                                                for f in films], keys=1, wide=wide)]
    if baseline:
        rows = []
        for p, b in keys:
            if p == baseline or (baseline, b) not in acc:
                continue
            common = [f for f in films if f in acc[(p, b)] and f in acc[(baseline, b)]]
            rho, pv = metrics.spearman([acc[(p, b)][f] for f in common], [acc[(baseline, b)][f] for f in common])
            rows.append([names[p], b, len(common), "n/a" if math.isnan(rho) else f"{rho:.2f}",
                         "n/a" if math.isnan(pv) else f"{pv:.3g}"])
        if rows:
            out += ["", f"Spearman correlation of per-film accuracy with `{names[baseline]}` (same backbone):", "",
                    md.tables(["policy", "backbone", "films", "rho", "p"], rows, wide=wide)]
    return "\n".join(out)


def _when(header: RunHeader, grid: Grid) -> str:
    """When the run started (its first bench), was last resumed, and finished (its last answer's time)."""
    ends = [t for key in grid for r in grid[key] if (t := r.finished_at)]  # one configuration's records at a time
    started = header.created or header.updated or "not recorded"
    resumed = f", last resumed {header.updated}" if header.updated and header.updated != started else ""
    return f"started {started}{resumed}, finished {max(ends) if ends else 'not recorded'}"


def _intro(header: RunHeader, run_dir: Path, items: list[Item], grid: Grid) -> list[str]:
    return [f"# Benchmark report: {md.text(Path(header.benchmark or run_dir).name)}", "",
            f"Format `{header.format}`, {len(items)} items, {len({it.film_id for it in items})} film(s). "
            f"Run directory `{run_dir}`: {_when(header, grid)}.", "",
            "Accuracy in % with 95% Wilson intervals; the CHNB-style Wald ± is its own column, giving the Wilson "
            "interval instead (marked so) where Wald degenerates (zero width at none or all right, or reaching past "
            "0 or 100 on few items). The film-clustered interval needs at least "
            f"{metrics.MIN_FILMS} films: below that the cell says \"too few films (N)\". Invalid answers count "
            "as wrong; an item whose prompt was longer than the backbone's context was never sent: it is counted under "
            "'not sent', not in n, accuracy, paired tests or evidence metrics; guesses are valid answers given while "
            "the model was shown no evidence from the film (closed-book's, by design); "
            "fallback-parsed is the share of valid answers read from free text rather than JSON. "
            "Compute is the summed wall time of the configuration's items; tokens are input tokens per item; "
            "calls / answer counts the model calls each answer took (replayed from the cache or not); "
            "cost is the priced cost of every call (cached replies included).", ""]


def _task_section(task: Task, rows: Sequence[SummaryRow], wide: bool) -> list[str]:
    """The task's own tables; `wide` passed to a task whose report_section takes it (a plug-in's may not)."""
    if "wide" in pyinspect.signature(task.report_section).parameters:
        return task.report_section(rows, wide=wide)
    return task.report_section(rows)


def write_report(run: RunLog | str | Path, baseline: str | None = None, inspector: bool = True,
                 wide: bool = False) -> dict[str, Path]:
    """Write report.md, accuracy_vs_tokens.png and (unless told not to) the inspector. `baseline` is a
    policy spec or its display name; `wide` keeps every table whole rather than cut to 100 columns."""
    run = open_run(run)
    run_dir = run.dir
    # the log is read once, a line at a time, each record lean and packed (lean_log.py): report.md reads no answer's
    # evidence spans (the inspector does, an item's records at a time), and the packed records are let go before it
    doc, shown = _document(run, baseline, wide)
    run.let_go_of_records()
    paths = {"report": run_dir / REPORT}
    plot = plot_accuracy_vs_tokens(shown, run_dir / PLOT)
    if plot is not None:
        paths["plot"] = plot
        doc += ["", f"![accuracy vs tokens]({PLOT})"]
    if inspector:
        paths["inspector"] = write_inspector(run)
        doc += ["", f"Inspector: [{INSPECTOR}/index.html]({INSPECTOR}/index.html)"]
    atomic_write_text(run_dir / REPORT, "\n".join(doc) + "\n")
    return paths


def _document(run: RunLog, baseline: str | None, wide: bool) -> tuple[list[str], list[SummaryRow]]:
    """report.md's lines up to its plot, and the summary rows as its tables name the policies."""
    rows, header, run_dir = run.rows, run.header, run.dir
    if not rows:
        raise MovieMemError(f"{run_dir} has no results yet")
    items, grid = run.items, run.lean.fitted
    task = run.task
    names = display_names(sorted({r["policy"] for r in rows} | {p for p, _ in grid}))
    policies = sorted({r["policy"] for r in rows})
    if baseline is not None:
        asked = baseline
        baseline = next((p for p in policies if asked in (p, names[p])), None)
        if baseline is None:
            raise MovieMemError(f"baseline {asked!r} is not in the run; policies: "
                                f"{', '.join(names[p] for p in policies)}")
    baseline = baseline or next((p for p in ("closed-book", "subtitles") if p in policies), None)
    shown = [cast(SummaryRow, {**r, "policy": names[r["policy"]]}) for r in rows]  # rows as the tables name them

    doc = _intro(header, run_dir, items, grid)
    doc += _results(rows, grid, names, wide)
    incomplete = [f"{names[r['policy']]} / {r['backbone']} ({r['n'] + r.get('unfit_n', 0)}/{len(items)})" for r in rows
                  if r["n"] + r.get("unfit_n", 0) < len(items)]
    if incomplete:
        doc += ["", "Incomplete configurations (the run stopped or is still going): " + md.text(", ".join(incomplete)) + "."]
    doc += _task_section(task, shown, wide)
    doc += _evidence_section(shown, wide)
    doc += evidence.json_fallbacks(grid, names)
    doc += _judge_section(run, names, wide)
    doc += _breakdowns(task.breakdowns, shown, wide)
    if baseline and task.scored:
        prs = _paired(grid, baseline, names)
        if prs:
            doc += ["", f"## Paired comparison with `{md.text(names[baseline])}`", "",
                    "Difference in accuracy (points, with Newcombe's 95% score interval for paired proportions, "
                    "which stays within ±100), discordant pairs (this right and baseline wrong / the reverse), "
                    "McNemar p-value.", "",
                    md.tables(["policy", "backbone", "n", "difference", "discordant", "p", "test"], prs, wide=wide)]
    sweep = _sweeps(rows, wide)
    if sweep:
        doc += ["", sweep]
    film_section = _per_film(items, grid, baseline, names, wide)
    if film_section:
        doc += ["", film_section]
    reasons = _invalid_reasons(grid, names)
    if reasons:
        doc += ["", "## Invalid answers", "", md.tables(["policy", "backbone", "count", "reason"], reasons, wide=wide)]
    doc += _position_bias(items, grid, names, wide)
    doc += [md.text(line) for line in legend(names)]
    doc += [md.text(line) for line in provenance.markdown(header.provenance)]
    doc += [md.text(line) for line in mf2_protocol.protocol_markdown(header.protocols, names)]  # issue 56
    return doc, shown


def _position_bias(items: list[Item], grid: Grid, names: Names, wide: bool) -> list[str]:
    """For a --permute run: consistency across option rotations and the chosen-letter shares."""
    from .permute import position_bias

    rows = [r for r in position_bias(items, grid) if r["items"]]
    if not rows:
        return []
    return ["", "## Position bias (options rotated)", "",
            "Consistent: the same option text chosen under every rotation of an item's options. "
            "Letters: share of valid answers per letter (no bias: equal shares).", "",
            md.tables(["policy", "backbone", "items", "consistent %", "letters"],
                      [[names.get(r["policy"], r["policy"]), r["backbone"], r["items"], md.share(r["consistency"]),
                        ", ".join(f"{k} {100 * v:.0f}%" for k, v in r["letters"].items())] for r in rows], wide=wide)]


def _breakdowns(keys: Sequence[tuple[str, str]], rows: Sequence[SummaryRow], wide: bool) -> list[str]:
    """Accuracy per group (category, MF²'s granularity): a table per summary key the task names, where it has groups."""
    out: list[str] = []
    for key, title in keys:
        per = [cast("Mapping[str, EstimateLine]", cast("Mapping[str, object]", r).get(key) or {}) for r in rows]
        cats = sorted({c for p in per for c in p})
        if len(cats) > 1:
            out += ["", f"## {title}", "", md.tables(
                [key.split("_")[1], *(f"{r['policy']} / {r['backbone']}" for r in rows)],
                [[c, *(md.pct(p.get(c)) for p in per)] for c in cats], keys=1, wide=wide)]
    return out


def _evidence_section(rows: Sequence[SummaryRow], wide: bool) -> list[str]:
    """Evidence recall against the items' gold spans, found / misread / not found, and whether agentic
    answers searched at all (a policy that never searched is closed-book under another name)."""
    out: list[str] = []
    ev = [r for r in rows if r.get("evidence_n")]
    if ev:
        out += ["", "## Evidence", "",
                "Recall: share of an item's gold evidence spans that some shown evidence overlaps; coverage: share of "
                "their duration shown; cited: share of cited evidence that overlaps gold. found = right with gold "
                "shown, lucky = right without it, misread = wrong with gold shown, not found = wrong without it.", "",
                md.tables(["policy", "backbone", "items", "recall %", "coverage %", "cited %", "found", "lucky",
                           "misread", "not found"],
                          [[r["policy"], r["backbone"], r["evidence_n"], md.share(r.get("evidence_recall")),
                            md.share(r.get("evidence_coverage")), md.share(r.get("cited_precision")),
                            *(r["outcomes"][o] for o in ("found", "lucky", "misread", "not found"))] for r in ev],
                          wide=wide)]
        cats = sorted({c for r in ev for c in r.get("evidence_recall_by_category") or {}})
        if len(cats) > 1:
            out += ["", "Evidence recall % by category:", "", md.tables(
                ["category", *(f"{r['policy']} / {r['backbone']}" for r in ev)],
                [[c, *(md.share((r.get("evidence_recall_by_category") or {}).get(c)) for r in ev)] for c in cats],
                keys=1, wide=wide)]
    agentic = [r for r in rows if r.get("searched_share") is not None]
    if agentic:
        out += ["", "## Searches", "", md.tables(
            ["policy", "backbone", "answers that searched %", "mean searches", "note"],
            [[r["policy"], r["backbone"], md.share(r["searched_share"]), r["mean_searches"],
              "NEVER SEARCHED: closed-book in effect" if r["searched_share"] == 0 else ""] for r in agentic], wide=wide)]
    return out


def _judge_section(run: RunLog, names: Names, wide: bool) -> list[str]:
    from .judge import judge_summary

    if run.task.rubric is None:
        return []
    rows = judge_summary(run)
    if not rows:
        return ["", "Open answers are scored by a judge (`moviemem judge RUN_DIR --backbone SPEC`); none has been run "
                    "on this directory, so the table shows only invalid rates, tokens and cost."]
    crit = list(run.task.rubric)

    def mean(e: EstimateLine) -> str:
        if not e["n"]:
            return "n/a"
        return f"{e['value']:.2f}" + ("" if e["ci_low"] is None or math.isnan(e["ci_low"])
                                      else f" ± {(e['ci_high'] - e['ci_low']) / 2:.2f}")

    table = [[names.get(r["policy"], r["policy"]), r["backbone"], r["judge"], r["items"], r["failed"],
              *(mean(r["criteria"][c]) for c in crit), mean(r["overall"]),
              f"{100 * r['agreement']['exact']:.0f}% exact" if r.get("agreement") else "—"]
             for r in rows]
    return ["", "## Judge scores (0-5, mean ± 95% t interval)", "",
            "Failed judge calls are counted, not dropped; agreement compares repeated judgements of the same answer.", "",
            md.tables(["policy", "backbone", "judge", "items", "failed calls", *crit, "overall", "repeat agreement"],
                      table, wide=wide)]


def _invalid_reasons(grid: Grid, names: Names) -> list[list[Any]]:
    rows = []
    for p, b in sorted(grid):  # a configuration's records read when its turn comes (lean_log.py)
        counts: dict[str, int] = defaultdict(int)
        for r in grid[(p, b)]:
            if r.status == "invalid":
                counts[str(r.reason)[:160]] += 1
        rows += [[names.get(p, p), b, n, reason] for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5]]
    return rows


def plot_accuracy_vs_tokens(rows: Sequence[SummaryRow], path: Path) -> Path | None:
    """One point per configuration: median input tokens per item (log scale) vs accuracy with its 95% CI."""
    pts = [(r, acc, tokens) for r in rows
           if (acc := r.get("accuracy")) and acc.get("n") and (tokens := r.get("median_input_tokens")) is not None]
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    backbones = sorted({r["backbone"] for r, _, _ in pts})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels: list[Any] = []
    for i, b in enumerate(backbones):
        sub = [p for p in pts if p[0]["backbone"] == b]
        x = [max(1.0, float(tokens)) for _, _, tokens in sub]
        y = [100 * acc["value"] for _, acc, _ in sub]
        err = [[100 * (acc["value"] - acc["ci_low"]) for _, acc, _ in sub],
               [100 * (acc["ci_high"] - acc["value"]) for _, acc, _ in sub]]
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, color=colours[i % len(colours)], label=b)
        for xi, yi, (r, _, _) in zip(x, y, sub):
            # a long policy name must not squeeze the axes: labels stay out of the layout and the saved
            # image grows to hold them (tight_layout gave up, with a warning, on a long one)
            label = ax.annotate(r["policy"], (xi, yi), textcoords="offset points", xytext=(5, 4), fontsize=8,
                                annotation_clip=False)
            label.set_in_layout(False)
            labels.append(label)
    ax.set_xscale("log")
    ax.set_xlabel("median input tokens per item")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.legend(title="backbone", fontsize=8)
    fig.tight_layout()
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, bbox_inches="tight", bbox_extra_artists=[*labels, ax.get_legend()])
    plt.close(fig)
    return path
