"""Names and tables that read (issue 61 item 6): short display names for protocol configurations, tables that
fit 100 columns (or the terminal) unless --wide, claim-pair detail keys that say what they mean (old runs still
read), "started" and "finished", and "policy" (never "paradigm") in the report and CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_mf2_release import make_release

from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval import markdown as md
from moviemem.eval import mf2_scores
from moviemem.eval.compare import Side, compare
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.names import display_name, display_names
from moviemem.eval.report import write_report
from moviemem.eval.run import RunLog
from moviemem.eval.runner import run_bench

RELEASE = "/home/someone/data/releases/deep-spin-MF2-checkout-of-2025"
STATEMENT = f"mf2-release[context=statement,style=direct_free,parser=first-occurrence,release={RELEASE}]"
TRANSCRIPT = f"mf2-release[context=transcript,style=direct_free,parser=first-occurrence,release={RELEASE}]"


def test_display_names_of_protocol_configurations() -> None:
    assert display_name(STATEMENT) == "closed-book@mf2:direct_free"
    assert display_name(TRANSCRIPT) == "subtitles@mf2:direct_free"
    assert display_name(f"mf2-release[context=evidence,budget_tokens=500,style=terse,parser=last,release={RELEASE}]") == (
        "hybrid[budget_tokens=500]@mf2:terse:last")  # a parser other than the default after a second colon
    assert display_name(f"mf2-release[release={RELEASE}]") == "closed-book@mf2:direct_free"  # the policy's defaults
    assert display_name(f"mf2-release[context=synopsis,release={RELEASE}]") == "synopsis@mf2:direct_free"
    for plain in ("closed-book", "hybrid[reader=json,budget_tokens=300]", "bad[spec"):
        assert display_name(plain) == plain


def test_names_that_would_collide_keep_their_full_specs() -> None:
    other = STATEMENT.replace(RELEASE, "/elsewhere")
    names = display_names([STATEMENT, other, TRANSCRIPT, "closed-book"])
    assert names == {STATEMENT: STATEMENT, other: other, TRANSCRIPT: "subtitles@mf2:direct_free",
                     "closed-book": "closed-book"}
    # a short name that is another policy's own spec is not given to this one
    assert display_names([STATEMENT, "closed-book@mf2:direct_free"])[STATEMENT] == STATEMENT


def test_tables_fit_100_columns_or_stay_whole_when_wide() -> None:
    header = ["policy", "backbone", *(f"a long column header {i}" for i in range(8))]
    rows = [["closed-book@mf2:direct_free", "local", *(f"{i}0.0 [1.0, 2.0]" for i in range(8))]]
    cut = md.tables(header, rows)
    lines = [line for line in cut.splitlines() if line]
    assert max(map(len, lines)) <= 100 and cut.count("| policy | backbone |") > 1
    assert all(line.startswith("| closed-book@mf2:direct_free | local |") for line in lines if "local" in line)
    assert all(h in cut for h in header[2:])  # every column is in one of the tables
    whole = md.tables(header, rows, wide=True)
    assert whole.count("| policy | backbone |") == 1 and max(map(len, whole.splitlines())) > 100
    assert md.column_groups([[5, 5, 200, 5]], 2, 100) == [[0, 1, 2], [0, 1, 3]]  # too wide: alone


def _claims_run(path: Path, policies: list[str]) -> Path:
    claims = [(i + 1, {"id": f"c{i}", "film_id": f"f{i % 2}", "true_claim": f"T{i}", "false_claim": f"F{i}",
                       "granularity": "Single"}) for i in range(4)]
    bench = Benchmark("claims", validate_rows(claims, "claims", "c.jsonl"), "c.jsonl")

    def answer(film_id, query, policy, backbone):  # TRUE to everything but F0
        reply = backbone.chat([user(query.question)], max_tokens=4)
        verdict = "FALSE" if query.question == "F0" else "TRUE"
        return Answer(choice=verdict, text=verdict, confidence=None, invalid=False, policy=policy,
                      backbone=backbone.name, usage=reply.usage)

    run_bench(bench, policies, [ScriptedBackbone(["x"], cycle=True)], path, answerer=answer)
    return path


def test_claim_detail_says_what_its_booleans_mean_and_old_runs_still_read(tmp_path: Path) -> None:
    run = _claims_run(tmp_path / "run", ["p"])
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    details = {ln["item_id"]: ln["detail"] for ln in lines}
    assert details["c0"] == {"said_true_on_true_claim": True, "said_false_on_false_claim": True}
    assert details["c1"] == {"said_true_on_true_claim": True, "said_false_on_false_claim": False}
    (now,) = RunLog(run).rows
    # the same run as an older moviemem wrote it: each detail as the verdicts, `on_true` / `on_false`
    old = [{**ln, "detail": {"on_true": True, "on_false": ln["item_id"] != "c0"}} for ln in lines]
    (run / "results.jsonl").write_text("".join(json.dumps(ln) + "\n" for ln in old))
    (before,) = RunLog(run).rows
    assert before["mf2"] == now["mf2"] and now["mf2"]["pairwise"]["k"] == 1 and now["mf2"]["tnr"]["k"] == 1
    assert mf2_scores.PairDetail.model_validate({"on_true": None, "on_false": True}).verdicts == (None, True)
    assert mf2_scores.PairDetail.model_validate(mf2_scores.PairDetail.of(False, None).line()).verdicts == (False, None)


@pytest.fixture
def specs(tmp_path: Path) -> tuple[str, str]:
    """Two protocol configurations as `bench --protocol mf2:DIR:terse:first` writes them, on a release-shaped
    folder with a long path (test_mf2_release.make_release)."""
    release = make_release(tmp_path / "home" / "someone" / "data" / "releases" / "deep-spin-MF2-checkout-of-2025")
    return tuple(f"mf2-release[context={c},style=terse,parser=first,release={release}]"  # type: ignore[return-value]
                 for c in ("statement", "transcript"))


def test_the_report_shows_short_names_fits_100_columns_and_says_started_and_finished(
        tmp_path: Path, specs: tuple[str, str]) -> None:
    run = _claims_run(tmp_path / "run", list(specs))
    report = write_report(run, inspector=False)["report"].read_text()
    assert "paradigm" not in report and "| policy | backbone |" in report
    tables = [line for line in report.splitlines() if line.startswith("|")]
    assert tables and max(map(len, tables)) <= 100
    assert "| closed-book@mf2:terse:first | scripted |" in report
    assert "releases" not in "\n".join(tables)  # the long spec is in no table...
    assert f"- `closed-book@mf2:terse:first`: `{specs[0]}`" in report  # ...but listed once
    header = json.loads((run / "run.json").read_text())
    assert specs[0] in header["policies"] and specs[0] in header["protocols"]  # run.json keeps the full configuration
    intro = report.split("\n\n", 2)[1]
    assert "started " in intro and "finished 20" in intro and "last updated" not in report
    wide = write_report(run, inspector=False, wide=True)["report"].read_text()
    assert max(len(line) for line in wide.splitlines() if line.startswith("|")) > 100
    # a baseline and a compare side may be named by the short name
    assert "## Paired comparison with `closed-book@mf2:terse:first`" in write_report(
        run, baseline="closed-book@mf2:terse:first", inspector=False)["report"].read_text()
    [row] = compare(Side(run, policy="closed-book@mf2:terse:first"), Side(run, policy="subtitles@mf2:terse:first"))
    assert row.n == 4 and row.difference == 0.0


def test_compare_fits_an_80_column_terminal_and_wide_keeps_one_table(tmp_path: Path, cli, monkeypatch) -> None:
    run = _claims_run(tmp_path / "run", ["a-policy", "b-policy"])
    monkeypatch.setattr("moviemem.cli.common.out.width", 80)
    narrow = cli("compare", str(run), str(run), "--policy-a", "a-policy", "--policy-b", "b-policy", library=False)
    assert narrow.code == 0, narrow.err
    assert "…" not in narrow.out and max(map(len, narrow.out.splitlines())) <= 80
    for header in ("paired", "A - B (95% CI)", "median tokens A / B", "unpaired", "unmatched"):
        assert header in narrow.out
    assert narrow.out.count("group") == 2  # cut in two, each led by the group
    wide = cli("compare", str(run), str(run), "--policy-a", "a-policy", "--policy-b", "b-policy", "--wide",
               library=False)
    assert wide.code == 0 and wide.out.count("group") == 1 and "…" not in wide.out
    assert max(map(len, wide.out.splitlines())) > 80
    j = cli("compare", str(run), str(run), "--policy-a", "a-policy", "--policy-b", "b-policy", "--json",
            library=False).json()
    assert {"difference", "ci_low", "ci_high"} <= set(j["groups"][0])


def test_report_command_wide_option(tmp_path: Path, cli, specs: tuple[str, str]) -> None:
    run = _claims_run(tmp_path / "run", list(specs))
    r = cli("report", str(run), "--no-inspector", "--wide", "--json", library=False)
    assert r.code == 0, r.err
    text = Path(r.json()["report"]).read_text()
    assert max(len(line) for line in text.splitlines() if line.startswith("|")) > 100
    assert "paradigm" not in cli("report", "--help", library=False).out.lower()
