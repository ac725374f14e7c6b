"""Reports of a run directory: report.md (tables like CHNB Table 1), accuracy_vs_tokens.png,
and a static HTML inspector (one page per item: question, options, every policy's answer,
evidence with timestamps and frame thumbnails, and the trace). The inspector's pages are the
Jinja2 templates in templates/ beside this file; all text in them is escaped by autoescaping,
so a subtitle that reads `<script>` shows as text.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents.registry import parse_policy_spec
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_path, atomic_write_text
from ..foundation.timefmt import hms
from . import evidence, metrics, mf2_protocol, mf2_scores, provenance
from .formats import LETTERS, Item, item_category
from .records import AnswerRecord, Config, Grid, ResultRecord
from .runner import log_grid, read_header, summarise

if TYPE_CHECKING:
    from jinja2 import Environment

    from .timeline import FilmFacts

REPORT = "report.md"
PLOT = "accuracy_vs_tokens.png"
INSPECTOR = "inspector"
TEMPLATES = Path(__file__).parent / "templates"  # shipped in the wheel (pyproject's package-data)
THUMB_WIDTH = 192
Z95 = 1.959963984540054


def _pct(e: dict[str, Any] | None) -> str:
    """'value [low, high]' in %: the estimate's own interval (Wilson for proportions)."""
    if not e or not e.get("n") or e.get("value") is None or math.isnan(e["value"]):
        return "n/a"
    if e.get("ci_low") is None or math.isnan(e["ci_low"]):
        return f"{100 * e['value']:.1f}"
    return f"{100 * e['value']:.1f} [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def _wald(e: dict[str, Any] | None) -> str:
    """'value ± z·se' in %, the Wald form CHNB tables report (labelled as such where shown)."""
    if not e or not e.get("n") or e.get("se") is None or math.isnan(e["se"]):
        return "n/a"
    return f"{100 * e['value']:.1f} ± {100 * Z95 * e['se']:.1f}"


def _money(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _secs(x: float) -> str:
    return f"{x:.1f}" if x < 600 else f"{x / 60:.1f} min"


def _text(v: Any) -> str:
    """A value from the data (a category, a reason, a model name) as Markdown text: its HTML shown
    as written, never rendered (a category `<b>cat</b>` must not turn bold, nor a `<script>` run)."""
    return html.escape(str(v), quote=False)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return _text(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _paired(items: list[Item], grid: Grid, baseline: str) -> list[list[Any]]:
    rows = []
    for (policy, backbone), recs in sorted(grid.items()):
        if policy == baseline or (baseline, backbone) not in grid:
            continue
        base = {r.item_id: r for r in grid[(baseline, backbone)]}
        shared = [r for r in recs if r.item_id in base]
        if not shared:
            continue
        p = metrics.mcnemar([r.correct for r in shared], [base[r.item_id].correct for r in shared])
        rows.append([policy, backbone, p.n, f"{100 * p.diff:+.1f} [{100 * p.ci_low:+.1f}, {100 * p.ci_high:+.1f}]",
                     f"{p.n10} / {p.n01}", f"{p.p_value:.3g}", p.test])
    return rows


def _sweeps(rows: list[dict[str, Any]]) -> str:
    """Policies run under several values of one numeric setting (e.g. `end-to-end[frames=64]`
    and `[frames=256]`): accuracy and tokens against the setting (CHNB's frame-budget sweep)."""
    groups: dict[tuple[str, str, str], list[tuple[float, dict[str, Any]]]] = defaultdict(list)
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
            table.append([name, key, f"{v:g}", backbone, _pct(r.get("accuracy")), r["median_input_tokens"],
                          _secs(r["compute_s"])])
    if not table:
        return ""
    return "\n".join(["## Setting sweeps", "", _table(["paradigm", "setting", "value", "backbone", "accuracy",
                                                         "median input tokens", "compute (s)"], table)])


def _per_film(items: list[Item], grid: Grid, baseline: str | None) -> str:
    films = sorted({it.film_id for it in items})
    if len(films) < 3:
        return ""
    acc: dict[tuple[str, str], dict[str, float]] = {}
    for key, recs in grid.items():
        per: dict[str, list[bool]] = defaultdict(list)
        for r in recs:
            per[r.film_id].append(bool(r.correct))
        acc[key] = {f: sum(v) / len(v) for f, v in per.items()}
    keys = sorted(acc)
    out = ["## Per-film accuracy", "", _table(["film", *(f"{p} / {b}" for p, b in keys)],
                                              [[f, *(f"{100 * acc[k][f]:.0f}" if f in acc[k] else "" for k in keys)]
                                               for f in films])]
    if baseline:
        rows = []
        for p, b in keys:
            if p == baseline or (baseline, b) not in acc:
                continue
            common = [f for f in films if f in acc[(p, b)] and f in acc[(baseline, b)]]
            rho, pv = metrics.spearman([acc[(p, b)][f] for f in common], [acc[(baseline, b)][f] for f in common])
            rows.append([p, b, len(common), "n/a" if math.isnan(rho) else f"{rho:.2f}", "n/a" if math.isnan(pv) else f"{pv:.3g}"])
        if rows:
            out += ["", f"Spearman correlation of per-film accuracy with `{baseline}` (same backbone):", "",
                    _table(["paradigm", "backbone", "films", "rho", "p"], rows)]
    return "\n".join(out)


def write_report(run_dir: str | Path, baseline: str | None = None, inspector: bool = True) -> dict[str, Path]:
    """Write report.md, accuracy_vs_tokens.png and (unless told not to) the inspector."""
    run_dir = Path(run_dir)
    header = read_header(run_dir)
    rows = summarise(run_dir)
    if not rows:
        raise MovieMemError(f"{run_dir} has no results yet")
    items, grid = log_grid(run_dir, slim=True)  # report.md reads no answer's evidence spans: the inspector does
    fmt = header.format
    policies = sorted({r["policy"] for r in rows})
    if baseline is not None and baseline not in policies:
        raise MovieMemError(f"baseline {baseline!r} is not in the run; policies: {', '.join(policies)}")
    baseline = baseline or next((p for p in ("closed-book", "subtitles") if p in policies), None)

    md = [f"# Benchmark report: {_text(Path(header.benchmark or run_dir).name)}", "",
          f"Format `{fmt}`, {len(items)} items, {len({it.film_id for it in items})} film(s). "
          f"Run directory `{run_dir}`, last updated {header.updated}.", "",
          "Accuracy in % with 95% Wilson intervals (the CHNB-style Wald ± is its own column); invalid answers count "
          "as wrong; an item whose prompt was longer than the backbone's context was never sent: it is counted under "
          "'not sent', not in n, accuracy, paired tests or evidence metrics; guesses are valid answers given while "
          "the model was shown no evidence from the film (closed-book's, by design); "
          "fallback-parsed is the share of valid answers read from free text rather than JSON. "
          "Compute is the summed wall time of the configuration's items; tokens are input tokens per item; "
          "cost is the priced cost of every call (cached replies included).", ""]
    md += ["## Results", "", _table(
        ["paradigm", "backbone", "n", "not sent (context)", "compute (s)", "accuracy", "accuracy ± (Wald, CHNB)",
         "clustered 95% CI", "invalid %", "guesses %", "fallback-parsed %", "median input tokens", "input tokens read",
         "output tokens", "cost ($)"],
        [[r["policy"], r["backbone"], r["n"], r.get("unfit_n", 0), _secs(r["compute_s"]), _pct(r.get("accuracy")),
          _wald(r.get("accuracy")), _ci(r.get("accuracy_clustered")), _pct(r.get("invalid")), _pct(r.get("guesses")),
          _pct(r.get("fallback_parsed")), r["median_input_tokens"], r.get("total_processed_tokens", ""),
          r["total_output_tokens"], _money(r["cost_usd"])] for r in rows])]
    incomplete = [f"{r['policy']} / {r['backbone']} ({r['n'] + r.get('unfit_n', 0)}/{len(items)})" for r in rows
                  if r["n"] + r.get("unfit_n", 0) < len(items)]
    if incomplete:
        md += ["", "Incomplete configurations (the run stopped or is still going): " + _text(", ".join(incomplete)) + "."]
    md += _format_sections(fmt, rows)
    md += _evidence_section(rows)
    md += _judge_section(run_dir, fmt)
    for key, title in (("per_granularity", "Per granularity (MF²: Single, Multi, Global)"), ("per_category", "Per category")):
        cats = sorted({c for r in rows for c in (r.get(key) or {})})
        if len(cats) > 1:
            md += ["", f"## {title}", "", _table(
                [key.split("_")[1], *(f"{r['policy']} / {r['backbone']}" for r in rows)],
                [[c, *(_pct((r.get(key) or {}).get(c)) for r in rows)] for c in cats])]
    if baseline and fmt in ("mcq", "claims", "relations", "localization"):
        prs = _paired(items, grid, baseline)
        if prs:
            md += ["", f"## Paired comparison with `{baseline}`", "",
                   "Difference in accuracy (points, 95% Wald interval for paired proportions), discordant pairs "
                   "(this right and baseline wrong / the reverse), McNemar p-value.", "",
                   _table(["paradigm", "backbone", "n", "difference", "discordant", "p", "test"], prs)]
    sweep = _sweeps(rows)
    if sweep:
        md += ["", sweep]
    film_section = _per_film(items, grid, baseline)
    if film_section:
        md += ["", film_section]
    reasons = _invalid_reasons(grid)
    if reasons:
        md += ["", "## Invalid answers", "", _table(["paradigm", "backbone", "count", "reason"], reasons)]
    md += _position_bias(items, grid)
    md += [_text(line) for line in provenance.markdown(header.provenance)]
    md += [_text(line) for line in mf2_protocol.protocol_markdown(header.protocols)]  # issue 56
    paths = {"report": run_dir / REPORT}
    plot = plot_accuracy_vs_tokens(rows, run_dir / PLOT)
    if plot is not None:
        paths["plot"] = plot
        md += ["", f"![accuracy vs tokens]({PLOT})"]
    if inspector:
        paths["inspector"] = write_inspector(run_dir)
        md += ["", f"Inspector: [{INSPECTOR}/index.html]({INSPECTOR}/index.html)"]
    atomic_write_text(run_dir / REPORT, "\n".join(md) + "\n")
    return paths


def _position_bias(items: list[Item], grid: Grid) -> list[str]:
    """For a --permute run: consistency across option rotations and the chosen-letter shares."""
    from .permute import position_bias

    rows = [r for r in position_bias(items, grid) if r["items"]]
    if not rows:
        return []
    return ["", "## Position bias (options rotated)", "",
            "Consistent: the same option text chosen under every rotation of an item's options. "
            "Letters: share of valid answers per letter (no bias: equal shares).", "",
            _table(["paradigm", "backbone", "items", "consistent %", "letters"],
                   [[r["policy"], r["backbone"], r["items"], f"{100 * r['consistency']:.1f}",
                     ", ".join(f"{k} {100 * v:.0f}%" for k, v in r["letters"].items())] for r in rows])]


def _ci(e: dict[str, Any] | None) -> str:
    if not e or e.get("ci_low") is None or (isinstance(e["ci_low"], float) and math.isnan(e["ci_low"])):
        return "n/a"
    return f"[{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"


def _format_sections(fmt: str, rows: list[dict[str, Any]]) -> list[str]:
    if fmt == "claims":
        return ["", "## MF² claim pairs", "", _table(
            ["paradigm", "backbone", "pairs", "pairwise accuracy", "TPR", "TNR", "unparseable %"],
            [[r["policy"], r["backbone"], r["mf2"]["pairs"], _pct(r["mf2"]["pairwise"]), _pct(r["mf2"]["tpr"]),
              _pct(r["mf2"]["tnr"]), _pct(r["mf2"]["unparseable"])] for r in rows])] + mf2_scores.markdown(rows)
    if fmt == "relations":
        out = ["", "## NEST relations (F1 per type)", ""]
        types = [t for t in rows[0]["nest"]["per_type"] if any(r["nest"]["per_type"][t]["support"] for r in rows)]
        out.append(_table(["paradigm", "backbone", "micro F1", "macro F1", *types, "flashback subset acc."],
                          [[r["policy"], r["backbone"], f"{r['nest']['micro']['f1']:.2f}", f"{r['nest']['macro']['f1']:.2f}",
                            *(f"{r['nest']['per_type'][t]['f1']:.2f}" for t in types),
                            _pct(r["nest"]["flashback"]["accuracy"])] for r in rows]))
        return out
    return []


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _evidence_section(rows: list[dict[str, Any]]) -> list[str]:
    """Evidence recall against the items' gold spans, found / misread / not found, and whether agentic
    answers searched at all (a policy that never searched is closed-book under another name)."""
    out: list[str] = []
    ev = [r for r in rows if r.get("evidence_n")]
    if ev:
        out += ["", "## Evidence", "",
                "Recall: share of an item's gold evidence spans that some shown evidence overlaps; coverage: share of "
                "their duration shown; cited: share of cited evidence that overlaps gold. found = right with gold "
                "shown, lucky = right without it, misread = wrong with gold shown, not found = wrong without it.", "",
                _table(["paradigm", "backbone", "items", "recall %", "coverage %", "cited %", "found", "lucky",
                        "misread", "not found"],
                       [[r["policy"], r["backbone"], r["evidence_n"], _share(r.get("evidence_recall")),
                         _share(r.get("evidence_coverage")), _share(r.get("cited_precision")),
                         *(r["outcomes"][o] for o in ("found", "lucky", "misread", "not found"))] for r in ev])]
        cats = sorted({c for r in ev for c in r.get("evidence_recall_by_category") or {}})
        if len(cats) > 1:
            out += ["", "Evidence recall % by category:", "", _table(
                ["category", *(f"{r['policy']} / {r['backbone']}" for r in ev)],
                [[c, *(_share((r.get("evidence_recall_by_category") or {}).get(c)) for r in ev)] for c in cats])]
    agentic = [r for r in rows if r.get("searched_share") is not None]
    if agentic:
        out += ["", "## Searches", "", _table(
            ["paradigm", "backbone", "answers that searched %", "mean searches", "note"],
            [[r["policy"], r["backbone"], _share(r["searched_share"]), r["mean_searches"],
              "NEVER SEARCHED: closed-book in effect" if r["searched_share"] == 0 else ""] for r in agentic])]
    return out


def _judge_section(run_dir: Path, fmt: str) -> list[str]:
    from .judge import RUBRICS, judge_summary

    if fmt not in RUBRICS:
        return []
    rows = judge_summary(run_dir)
    if not rows:
        return ["", "Open answers are scored by a judge (`moviemem judge RUN_DIR --backbone SPEC`); none has been run "
                    "on this directory, so the table shows only invalid rates, tokens and cost."]
    crit = list(RUBRICS[fmt])

    def mean(e: dict[str, Any]) -> str:
        if not e["n"]:
            return "n/a"
        return f"{e['value']:.2f}" + ("" if e["ci_low"] is None or math.isnan(e["ci_low"])
                                      else f" ± {(e['ci_high'] - e['ci_low']) / 2:.2f}")

    table = [[r["policy"], r["backbone"], r["judge"], r["items"], r["failed"], *(mean(r["criteria"][c]) for c in crit),
              mean(r["overall"]), f"{100 * r['agreement']['exact']:.0f}% exact" if r.get("agreement") else "—"]
             for r in rows]
    return ["", "## Judge scores (0-5, mean ± 95% t interval)", "",
            "Failed judge calls are counted, not dropped; agreement compares repeated judgements of the same answer.", "",
            _table(["paradigm", "backbone", "judge", "items", "failed calls", *crit, "overall", "repeat agreement"], table)]


def _invalid_reasons(grid: Grid) -> list[list[Any]]:
    rows = []
    for (p, b), recs in sorted(grid.items()):
        counts: dict[str, int] = defaultdict(int)
        for r in recs:
            if r.status == "invalid":
                counts[str(r.reason)[:160]] += 1
        rows += [[p, b, n, reason] for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5]]
    return rows


def plot_accuracy_vs_tokens(rows: list[dict[str, Any]], path: Path) -> Path | None:
    """One point per configuration: median input tokens per item (log scale) vs accuracy with its 95% CI."""
    pts = [r for r in rows if r.get("accuracy") and r["accuracy"].get("n") and r["median_input_tokens"] is not None]
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    backbones = sorted({r["backbone"] for r in pts})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, b in enumerate(backbones):
        sub = [r for r in pts if r["backbone"] == b]
        x = [max(1.0, float(r["median_input_tokens"])) for r in sub]
        y = [100 * r["accuracy"]["value"] for r in sub]
        err = [[100 * (r["accuracy"]["value"] - r["accuracy"]["ci_low"]) for r in sub],
               [100 * (r["accuracy"]["ci_high"] - r["accuracy"]["value"]) for r in sub]]
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, color=colours[i % len(colours)], label=b)
        for xi, yi, r in zip(x, y, sub):
            ax.annotate(r["policy"], (xi, yi), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("median input tokens per item")
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.legend(title="backbone", fontsize=8)
    fig.tight_layout()
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- inspector

INDEX_PAGE = 200  # index rows shown at once (filters and sorting work on all of them)


def _env() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined)
    env.globals["thumb_width"] = THUMB_WIDTH
    return env


def _hms(t: Any) -> str:
    try:
        return hms(float(t), tenths=True)
    except (TypeError, ValueError):
        return "?"


IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp"})


def _thumb(frame: str | None, library: str | None, out_dir: Path) -> str | None:
    """A small JPEG copy of an evidence frame under inspector/thumbs/; None when the file is gone,
    and for anything but an image in the media folder of a real library: results.jsonl, run.json
    and the faces table name the paths, and a run from elsewhere (run.json saying `library: "/"`)
    must not copy the user's own pictures into a page."""
    if not frame or not library:
        return None
    root = Path(library).resolve()
    if not (root / "films.lance").is_dir():  # not a moviemem library: nothing of it is served
        return None
    media = root / "media"
    path = (root / frame).resolve()  # an absolute `frame` stays itself
    if not path.is_relative_to(media) or path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
        return None
    name = hashlib.sha1(str(path).encode()).hexdigest()[:16] + ".jpg"
    dest = out_dir / name
    if not dest.exists():
        from PIL import Image

        try:
            with Image.open(path) as opened:
                im = opened.convert("RGB")
                im.thumbnail((THUMB_WIDTH, THUMB_WIDTH * 2))
                im.save(dest, "JPEG", quality=80)
        except OSError:
            return None
    return name


def _film_pages(env: Environment, library: str | None, film_ids: list[str], root: Path) -> dict[str, str]:
    """films/<id>.html for each film of the run the library holds: its memory on one timeline."""
    from .timeline import film_page

    pages = {}
    for fid in film_ids:
        data = film_page(library, fid) if library else None
        if data is None:
            continue
        for card in data["characters"]:
            card["thumb"] = _thumb(card["thumbnail"], library, root / "thumbs")
        (root / "films").mkdir(exist_ok=True)
        (root / "films" / f"{fid}.html").write_text(env.get_template("film.html.j2").render(title=f"film {fid}", f=data, hms=_hms),
                                                    encoding="utf-8")
        pages[fid] = f"films/{fid}.html"
    return pages


def _category_table(items: list[Item], configs: list[Config],
                    by_item: dict[str, dict[Config, ResultRecord]]) -> list[dict[str, Any]]:
    """Accuracy per category and configuration with its 95% Wilson interval (invalid counts as
    wrong, as in report.md), and an "all items" row."""
    from .metrics import accuracy, per_category

    cells: dict[str, list[str]] = defaultdict(lambda: [""] * len(configs))
    for j, c in enumerate(configs):
        pairs = [(by_item[it.id][c].correct, item_category(it)) for it in items
                 if c in by_item.get(it.id, {}) and by_item[it.id][c].status != "unfit"]
        if not pairs:
            continue
        for cat, est in [*per_category([p[0] for p in pairs], [p[1] for p in pairs]).items(),
                         ("all items", accuracy([p[0] for p in pairs]))]:
            cells[cat][j] = f"{100 * est.value:.1f} ({100 * est.ci_low:.0f}–{100 * est.ci_high:.0f}), n={est.n}"
    return [{"category": k, "cells": cells[k]} for k in sorted(cells, key=lambda k: (k == "all items", k))]


def _still(e: dict[str, Any], film: FilmFacts | None, library: str | None, out_dir: Path) -> dict[str, Any]:
    """The evidence's own frame, else (text evidence) the film's stored strip frame nearest to its
    middle: {"thumb": file name or None, "thumb_t": that frame's time when it is the nearest one}."""
    if e.get("frame"):
        return {"thumb": _thumb(e.get("frame"), library, out_dir), "thumb_t": None}
    try:
        mid = (float(e["start"]) + float(e["end"])) / 2
    except (KeyError, TypeError, ValueError):
        return {"thumb": None, "thumb_t": None}
    near = film.nearest_frame(mid) if film is not None else None
    if near is None:
        return {"thumb": None, "thumb_t": None}
    return {"thumb": _thumb(near[0], library, out_dir), "thumb_t": _hms(near[1])}


def _mark(rec: ResultRecord | None) -> tuple[str, str]:
    if rec is None:
        return "", "muted"
    if rec.status == "unfit":
        return "∅", "muted"
    if rec.status == "invalid":
        return "!", "inv"
    if rec.correct is None:
        return "·", "muted"
    return ("✔", "ok") if rec.correct else ("✘", "bad")


def _outcome(rec: ResultRecord | None) -> str:
    """found, lucky, misread or not found; "" without gold evidence or a verdict."""
    return (rec.evidence.outcome if rec is not None and rec.evidence is not None else None) or ""


GIST_CHARS = 70  # an index row's question, shortened
REASON_CHARS = 40  # an invalid answer's reason in its index cell (in full on hover and on the item page)


def _shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a space where one is near."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut).rstrip(" ,;:") + "…"


def _cell(rec: ResultRecord | None) -> dict[str, str]:
    """An index cell: the verdict's mark, and what qualifies it. A right answer the gold evidence was never
    shown to (lucky), or no evidence at all (closed-book, a failed search), is marked apart (css
    `luck`) so it does not read as a success of the memory; an invalid one says why."""
    mark, css = _mark(rec)
    if rec is None:
        return {"mark": mark, "css": css, "note": "", "title": ""}
    outcome = _outcome(rec)
    shown = any(a.evidence for a in rec.answers.values())
    if rec.status in ("invalid", "unfit"):
        reason = str(rec.reason or "no reason recorded")
        return {"mark": mark, "css": css, "note": _shorten(reason, REASON_CHARS), "title": reason}
    notes = [o for o in (outcome, "" if shown else "no evidence") if o]
    lucky = css == "ok" and (outcome == "lucky" or not shown)
    return {"mark": mark, "css": "luck" if lucky else css, "note": ", ".join(notes),
            "title": "right without the film's support: " + ("the gold evidence was never shown" if outcome == "lucky"
                                                              else "no evidence was shown") if lucky else ""}


def _item_fields(item: Item) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    d = item.model_dump(mode="json")
    options = []
    if "options" in d:
        options = [{"text": o, "gold": LETTERS[i] == d.get("answer")} for i, o in enumerate(d["options"])]
    labels = {"question": "Question", "true_claim": "True claim", "false_claim": "False claim", "event_a": "Event A",
              "event_b": "Event B", "label": "Relation", "event": "Event", "reference": "Reference",
              "start": "Start", "end": "End", "characters": "Characters"}
    fields = []
    for k, label in labels.items():
        if k in d and d[k] not in (None, [], ""):
            v = d[k]
            fields.append((label, _hms(v) if k in ("start", "end") else ", ".join(v) if isinstance(v, list) else str(v)))
    return fields, options


def _query(key: str, a: AnswerRecord, film: FilmFacts | None, library: str | None, thumbs: Path,
           gold: list[tuple[float, float]]) -> dict[str, Any]:
    """One answer on its item page: choice, text, evidence (with stills, gold marked), timeline, trace and usage."""
    from .timeline import timeline

    ev = [{"kind": e.get("kind"), "time": f"{_hms(e.get('start'))}–{_hms(e.get('end'))}",
           "text": e.get("text") or "", "frame": e.get("frame"), **_still(e, film, library, thumbs),
           "score": f"{e['score']:.3f}" if isinstance(e.get("score"), (int, float)) else "",
           "retriever": e.get("retriever") or "", "cited": bool(e.get("cited")),
           "gold": any(evidence.overlaps((e["start"], e["end"]), (g[0], g[1])) for g in gold)}
          for e in a.evidence]
    trace = [{"kind": s.get("kind", "?"), "body": json.dumps({k: v for k, v in s.items() if k != "kind"},
                                                             ensure_ascii=False, indent=1)}
             for s in a.trace]
    u = a.usage
    return {"timeline": timeline(film.duration if film else None, a.evidence, gold),
            "key": key, "choice": a.choice, "confidence": a.confidence, "text": a.text, "error": a.error,
            "evidence": ev, "trace": trace,
            "usage": f"{u.input_tokens} input / {u.output_tokens} output tokens, {u.images} images, "
                     f"{u.latency_s or 0:.2f} s{_replay_note(a)}, cost {_money(u.cost_usd)}"}


def write_inspector(run_dir: str | Path) -> Path:
    """inspector/index.html and inspector/items/N.html; thumbnails copied under inspector/thumbs."""
    run_dir = Path(run_dir)
    header = read_header(run_dir)
    items, grid = log_grid(run_dir, unfit=True)
    root = run_dir / INSPECTOR
    (root / "items").mkdir(parents=True, exist_ok=True)
    (root / "thumbs").mkdir(exist_ok=True)
    env = _env()
    configs = sorted(grid)
    by_item: dict[str, dict[Config, ResultRecord]] = defaultdict(dict)
    for key, key_recs in grid.items():
        for rec in key_recs:
            by_item[rec.item_id][key] = rec
    title = f"moviemem inspector: {Path(header.benchmark or run_dir).name}"
    from .timeline import film_facts

    facts = film_facts(header.library, {it.film_id for it in items})
    film_pages = _film_pages(env, header.library, sorted(facts), root)
    rows = []
    item_tpl = env.get_template("item.html.j2")
    for n, it in enumerate(items, 1):
        page = f"{n}.html"
        recs = by_item.get(it.id, {})
        fields, options = _item_fields(it)
        question = fields[0][1] if fields else ""
        rows.append({"id": it.id, "film": it.film_id, "category": item_category(it), "page": page,
                     "question": question, "gist": _shorten(question, GIST_CHARS),
                     "marks": [_mark(recs.get(c)) for c in configs], "cells": [_cell(recs.get(c)) for c in configs],
                     "outcomes": [_outcome(recs.get(c)) for c in configs]})
        gold = [(float(g[0]), float(g[1])) for g in getattr(it, "evidence", None) or []]
        if gold:
            fields.append(("Gold evidence", ", ".join(f"{_hms(a)}–{_hms(b)}" for a, b in gold)))
        answers: list[dict[str, Any]] = []
        for c in configs:
            r = recs.get(c)
            if r is None:
                continue
            cell = _cell(r)
            verdict = {"✔": "right", "✘": "wrong", "!": "invalid", "·": "not scored",
                       "∅": "not sent: the prompt was longer than the backbone's context"}.get(cell["mark"], "") + (
                f" ({cell['note']})" if cell["note"] and r.status not in ("invalid", "unfit") else "")
            queries = [_query(key, a, facts.get(it.film_id), header.library, root / "thumbs", gold)
                       for key, a in r.answers.items()]
            answers.append({"policy": c[0], "backbone": c[1], "css": cell["css"], "verdict": verdict,
                            "reason": r.reason, "queries": queries})
        lanes = [{"label": f"{a['policy']} / {a['backbone']}" + (f" ({q['key']})" if len(a["queries"]) > 1 else ""),
                  "css": a["css"], "verdict": a["verdict"], "timeline": q["timeline"], "usage": q["usage"]}
                 for a in answers for q in a["queries"]]
        (root / "items" / page).write_text(
            item_tpl.render(title=it.id, item=it, category=item_category(it), fields=fields, options=options,
                            answers=answers, lanes=lanes, hms=_hms, film_page=film_pages.get(it.film_id)),
            encoding="utf-8")
    (root / "index.html").write_text(env.get_template("index.html.j2").render(
        title=title, fmt=header.format, items=items, configs=configs, rows=rows,
        categories=_category_table(items, configs, by_item), outcomes=evidence.OUTCOMES, page_size=INDEX_PAGE),
        encoding="utf-8")
    return root / "index.html"


def _replay_note(answer: AnswerRecord) -> str:
    """Marks a latency that is not this run's: the calls were answered from the replay cache."""
    calls, replayed = answer.calls, answer.replayed_calls
    if not calls or not replayed:
        return ""
    return " (replayed from the cache: the original calls' latency)" if replayed == calls else \
        f" ({replayed} of {calls} calls replayed from the cache)"
