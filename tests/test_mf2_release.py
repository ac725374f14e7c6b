"""Issue 56, part 1: MF²'s own protocol read from a copy of the release, on a small release-shaped folder
these tests write themselves (their own invented template text, never the release's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts_loader import load_script

from moviemem.agents.mf2_release import load_release, read_verdict, srt_text
from moviemem.foundation.errors import MovieMemError

SYSTEM = "Judge statements about films. (invented)"
STATEMENT_TEMPLATE = "Film: {movie_title}\nClaim under test: {claim}\nSay TRUE or FALSE."
TRANSCRIPT_TEMPLATE = "Dialogue: {transcripts}\nClaim under test: {claim}\nSay TRUE or FALSE."
SYNOPSIS_TEMPLATE = "Plot: {synopsis}\nClaim under test: {claim}\nVerdict?"

SRT = ("1\n00:00:01,000 --> 00:00:03,000\n  The keeper waits.  \nFor the boat.\n\n"
       "2\n00:00:04,000 --> 00:00:06,000\n7\nAnna rows out at dawn.\n")
SYNOPSIS = "A keeper waits for a boat; Anna rows out.\n"


def _template_module(prefix: str, text: str, extra: str = "") -> str:
    """A template module shaped like the release's: strings bound to names, then the two dictionaries."""
    return (f'default_system_prompt = """{SYSTEM}"""\nother_system = "unused"\n'
            f'{prefix}_terse = """{text}"""\n{prefix}_chatty = """{text}\nExplain first."""\n{extra}'
            f'USER_PROMPTS_TEMPLATE_DICT = {{"terse": {prefix}_terse, "chatty": {prefix}_chatty}}\n'
            f'SYSTEM_PROMPTS_TEMPLATE_DICT = {{"default": default_system_prompt, "{prefix}": other_system}}\n')


PARSER = '''import re

def parse_model_output(output, strategy="strict"):
    if not output:
        return None
    if strategy == "tags":
        pattern = r'<v>(.*?)</v>'
        match = re.search(pattern, output, re.IGNORECASE)
        if match:
            answer = match.group(1).strip().upper()
            return answer if answer in ["TRUE", "FALSE"] else None
    elif strategy == "first":
        match = re.search(r'\\b(true|false)\\b', output.lower())
        if match:
            return match.group(1).upper()
    elif strategy == "last":
        matches = list(re.finditer(r'\\b(true|false)\\b', output.lower()))
        if matches:
            return matches[-1].group(1).upper()
    elif strategy == "tags-then-first":
        match = re.search(r'<v>(.*?)</v>', output, flags=re.IGNORECASE)
        if match and match.group(1).strip().upper() in ["TRUE", "FALSE"]:
            return match.group(1).strip().upper()
        match = re.search(r'\\b(true|false)\\b', output.lower())
        if match:
            return match.group(1).upper()
    return None
'''


def make_release(root: Path, *, synopsis: bool = True) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "statement_only.py").write_text(_template_module("stmt", STATEMENT_TEMPLATE))
    (root / "templates" / "transcripts_only.py").write_text(_template_module("trans", TRANSCRIPT_TEMPLATE))
    if synopsis:
        (root / "templates" / "synopsis_only.py").write_text(_template_module("syn", SYNOPSIS_TEMPLATE))
    (root / "templates" / "prompt_utils.py").write_text(
        'import random\nMOVIES_DICT = {\n    1: {"title": "The Keeper", "year": 1950},\n'
        '    2: {"title": "Other", "year": 1951},\n}\n\ndef build_prompts():\n    pass\n')
    (root / "parse_model_outputs.py").write_text(PARSER)
    (root / "utils.py").write_text("def extract_srt_text(path):\n    return ''\n")
    return root


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return make_release(tmp_path / "release")


def make_data(root: Path) -> Path:
    """The release's data folder as `import-collection mf2` reads it."""
    (root / "transcripts").mkdir(parents=True)
    (root / "synopsis").mkdir()
    (root / "transcripts" / "1.srt").write_text(SRT, encoding="utf-8")
    (root / "synopsis" / "1.synopsis").write_text(SYNOPSIS, encoding="utf-8")
    return root


# ----------------------------------------------------------------------------- reading the release as data


def test_templates_titles_and_parsers_are_read_as_data(release: Path) -> None:
    r = load_release(release)
    assert sorted(r.templates) == ["statement_only", "synopsis_only", "transcripts_only"]
    t = r.template("statement_only", "terse")
    assert (t.name, t.system) == ("stmt_terse", SYSTEM)  # the system prompt the release's open-model script names
    assert t.fill(claim="A boat comes.", movie_title=r.titles[1]) == STATEMENT_TEMPLATE.format(
        movie_title="The Keeper (1950)", claim="A boat comes.")
    assert list(r.parsers) == ["tags", "first", "last", "tags-then-first"]
    assert set(r.digests) == {"parse_model_outputs.py", "utils.py", "templates/prompt_utils.py",
                              "templates/statement_only.py", "templates/transcripts_only.py", "templates/synopsis_only.py"}
    assert r.commit is None
    d = r.describe("transcripts_only", "chatty", "last")
    assert d["template"] == "templates/transcripts_only.py:trans_chatty" and d["files"] == dict(r.digests)


@pytest.mark.parametrize("reply, expected", [
    ("TRUE", {"tags": None, "first": "TRUE", "last": "TRUE", "tags-then-first": "TRUE"}),
    ("<V> false </V> but true", {"tags": "FALSE", "first": "FALSE", "last": "TRUE", "tags-then-first": "FALSE"}),
    ("<v>maybe</v> True, then False.", {"tags": None, "first": "TRUE", "last": "FALSE", "tags-then-first": "TRUE"}),
    ("untrue, falsehood", {"tags": None, "first": None, "last": None, "tags-then-first": None}),
    ("", {"tags": None, "first": None, "last": None, "tags-then-first": None}),
])
def test_each_parsing_strategy_reads_as_its_branch_says(release: Path, reply: str, expected: dict) -> None:
    r = load_release(release)
    assert {name: read_verdict(r.parser(name), reply) for name in r.parsers} == expected


def test_transcript_text_is_the_srt_lines_without_numbers_or_times(tmp_path: Path) -> None:
    path = make_data(tmp_path / "data") / "transcripts" / "1.srt"
    assert srt_text(path) == "The keeper waits. For the boat. Anna rows out at dawn."  # '7' is a lone number line


def test_the_release_is_never_executed(tmp_path: Path) -> None:
    root = make_release(tmp_path / "release")
    marker = tmp_path / "ran"
    side_effect = f"open({str(marker)!r}, 'w').write('x')\n"
    for name in ("templates/statement_only.py", "templates/prompt_utils.py", "parse_model_outputs.py", "utils.py"):
        path = root / name
        path.write_text(side_effect + path.read_text())
    r = load_release(root)
    assert r.template("statement_only", "terse").text == STATEMENT_TEMPLATE and not marker.exists()


@pytest.mark.parametrize("damage, says", [
    (lambda root: (root / "templates" / "statement_only.py").unlink() or
     [p.unlink() for p in (root / "templates").glob("*_only.py")], "is not the MF² release: no templates/statement_only.py"),
    (lambda root: (root / "parse_model_outputs.py").unlink(), "is not the MF² release: no parse_model_outputs.py"),
    (lambda root: (root / "templates" / "transcripts_only.py").write_text(
        _template_module("trans", "Dialogue: {transcript}\nClaim: {claim}")),
     "template trans_terse has the fields {claim, transcript}, not the {claim, transcripts}"),
    (lambda root: (root / "templates" / "statement_only.py").write_text(
        _template_module("stmt", STATEMENT_TEMPLATE).replace('"""Film:', 'f"""Film:')),
     "USER_PROMPTS_TEMPLATE_DICT\\['terse'\\] is not a string constant"),
    (lambda root: (root / "templates" / "prompt_utils.py").write_text("MOVIES_DICT = load()\n"),
     "has no MOVIES_DICT of literal film titles"),
])
def test_a_damaged_release_is_one_clear_error(release: Path, damage, says: str) -> None:
    damage(release)
    with pytest.raises(MovieMemError, match=says):
        load_release(release)


def test_a_missing_style_or_parser_names_what_there_is(release: Path) -> None:
    r = load_release(release)
    with pytest.raises(MovieMemError, match=r"has no style 'direct_free' .* \(styles: terse, chatty\)"):
        r.template("statement_only", "direct_free")
    with pytest.raises(MovieMemError, match=r"no parsing strategy 'strict' \(strategies: tags, first, last, tags-then-first\)"):
        r.parser("strict")
    (release / "templates" / "synopsis_only.py").unlink()
    with pytest.raises(MovieMemError, match="has no templates/synopsis_only.py"):
        load_release(release).template("synopsis_only", "terse")


# ----------------------------------------------------------------------------- the policy and the bench


CSV = ("movie_id,video,claim_id,true_claim,false_claim,granularity,category\n"
       '1,1.mp4,0,Anna rows out at dawn.,Anna rows out at dusk.,Single,Event/Entity\n'
       '1,1.mp4,1,The keeper waits for a boat.,The keeper waits for a train.,Multi,Character\n')


@pytest.fixture
def imported(tmp_path: Path, cli) -> Path:
    data = make_data(tmp_path / "data")
    assert cli("import-collection", "mf2", str(data)).code == 0
    (tmp_path / "pairs.csv").write_text(CSV, encoding="utf-8")
    return tmp_path


def _sent(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_bench_protocol_fills_the_release_template_and_records_it(imported: Path, release: Path, cli, lib_dir: Path) -> None:
    from moviemem import Library
    from moviemem.agents import ask
    from moviemem.backbones import ScriptedBackbone

    film = Library(lib_dir).film("mf2-1")
    sent = {}
    for context in ("statement", "transcript", "synopsis"):
        b = ScriptedBackbone(["Verdict: true."])
        ans = ask(film, "Anna rows out at dawn.", kind="claim", backbone=b,
                  policy=f"mf2-release[release={release},context={context},style=terse,parser=first]")
        assert (ans.choice, ans.invalid) == ("TRUE", False)
        (req,) = b.calls
        assert [m.text for m in req.messages][0] == SYSTEM
        sent[context] = req.messages[1].text
        assert ans.grounded is (context == "transcript")
    assert sent["statement"] == STATEMENT_TEMPLATE.format(movie_title="The Keeper (1950)", claim="Anna rows out at dawn.")
    assert sent["transcript"] == TRANSCRIPT_TEMPLATE.format(
        transcripts="The keeper waits. For the boat. Anna rows out at dawn.", claim="Anna rows out at dawn.")
    assert sent["synopsis"] == SYNOPSIS_TEMPLATE.format(synopsis=SYNOPSIS, claim="Anna rows out at dawn.")

    out = imported / "run"
    r = cli("bench", str(imported / "pairs.csv"), "--protocol", f"mf2:{release}:terse:last",
            "--policies", "closed-book,subtitles", "--backbones", "scripted:I say TRUE... no. FALSE", "--out", str(out))
    assert r.code == 0, r.err
    header = json.loads((out / "run.json").read_text())
    specs = sorted(header["protocols"])
    assert specs == [f"mf2-release[context=statement,style=terse,parser=last,release={release}]",
                     f"mf2-release[context=transcript,style=terse,parser=last,release={release}]"]
    p = header["protocols"][specs[1]]
    assert (p["modality"], p["style"], p["parser"], p["template"]) == (
        "transcripts_only", "terse", "last", "templates/transcripts_only.py:trans_terse")
    assert p["files"] == dict(load_release(release).digests)
    # FALSE said to both claims: wrong on the true one, right on the false one (issue 61: keys that say so)
    assert {(rec["detail"]["said_true_on_true_claim"], rec["detail"]["said_false_on_false_claim"])
            for rec in _sent(out)} == {(False, True)}
    assert cli("report", str(out), "--no-inspector", library=False).code == 0
    report = (out / "report.md").read_text()
    assert "## Released protocols" in report and "templates/statement_only.py:stmt_terse" in report
    assert "## MF² claim pairs per granularity" in report and "| Single | 1 | 0.0 | 0.0 | 100.0 |" in report
    # issue 61: tables name the configuration short, and the report says which full spec each name stands for
    assert "| closed-book@mf2:terse:last / scripted:I say TRUE... no. FALSE | Single | 0.0 |" in report
    assert f"- `closed-book@mf2:terse:last`: `{specs[0]}`" in report
    official = load_script("bench/mf2_official.py")  # it reads the same run, per half and per group
    rows = official.report(out)
    assert rows and all(row["pairs"] >= 1 and row["granularity"] and row["category"] for row in rows.values())


def test_an_unparseable_reply_is_counted_as_the_release_counts_it(imported: Path, release: Path, cli) -> None:
    out = imported / "run"
    r = cli("bench", str(imported / "pairs.csv"), "--protocol", f"mf2:{release}:terse:tags",
            "--policies", "closed-book", "--backbones", "scripted:TRUE", "--out", str(out), "--json")
    assert r.code == 0, r.err
    (rec, _) = _sent(out)
    assert rec["status"] == "invalid" and "unparseable" in rec["reason"]
    from moviemem.eval.run import RunLog

    (row,) = RunLog(out).rows
    assert row["mf2"]["unparseable"]["value"] == 1.0 and row["mf2"]["pairwise"]["value"] == 0.0
    assert row["mf2_groups"]["category"]["Character"]["pairs"] == 1


@pytest.mark.parametrize("args, says", [
    (["--protocol", "mf2:{release}/nowhere"], "nowhere is not a folder"),
    (["--protocol", "mf2:{tmp}"], "is not the MF² release: no templates/ folder"),
    (["--protocol", "mf2:{release}:direct_free"], "has no style 'direct_free'"),
    (["--protocol", "mf2:{release}:terse:strict"], "has no parsing strategy 'strict'"),
    (["--protocol", "nest:{release}"], "--protocol takes mf2:DIR"),
    (["--protocol", "mf2:{release}", "--policies", "graph"], "not 'graph'"),
    (["--protocol", "mf2:{release}", "--policies", "hybrid[rotations=one]"], "setting 'rotations' has no meaning"),
])
def test_bad_protocol_input_is_one_line_exit_2_and_nothing_written(imported: Path, release: Path, cli, args: list, says: str) -> None:
    out = imported / "run"
    args = [a.format(release=release, tmp=imported) for a in args]
    r = cli("bench", str(imported / "pairs.csv"), *args, "--backbones", "scripted:TRUE", "--out", str(out))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and says in r.err, r.err
    assert not out.exists()


def test_a_rerun_with_other_release_files_is_refused(imported: Path, release: Path, cli) -> None:
    out = imported / "run"
    args = ("bench", str(imported / "pairs.csv"), "--protocol", f"mf2:{release}:terse:first", "--policies", "closed-book",
            "--backbones", "scripted:TRUE", "--out", str(out))
    assert cli(*args).code == 0
    parser = release / "parse_model_outputs.py"
    parser.write_text(parser.read_text() + "\n# edited\n")
    r = cli(*args)
    assert r.code == 2 and "ran here with other release files (files differ)" in r.err


# ----------------------------------------------------------------------------- part 2: P(TRUE) and calibrated verdicts


def test_p_true_reads_the_first_tokens_that_open_a_verdict() -> None:
    import math

    from moviemem.agents.mf2_release import p_true

    assert p_true({"TRUE": math.log(0.6), " true": math.log(0.2), "FALSE": math.log(0.2)}) == pytest.approx(0.8)
    assert p_true({"F": math.log(0.3), "T": math.log(0.1), "The": math.log(0.5)}) == pytest.approx(0.25)
    assert p_true({"<": 0.0, "Yes": -1.0}) is None


def _logprob_backbone(prior: float, with_evidence: dict[str, float], content_free: float):
    """Replies TRUE to every statement; as log-probabilities, P(TRUE) = `prior` with no transcript in the
    prompt, else per statement (`with_evidence`) or `content_free` for the content-free one."""
    import math

    from moviemem.backbones import Reply, ScriptedBackbone

    def reply(request) -> Reply:
        text = request.messages[-1].text
        if not request.logprobs:
            return Reply(text="TRUE")
        p = (prior if "Dialogue:" not in text else content_free if "Claim under test: N/A" in text else
             next(v for k, v in with_evidence.items() if f"Claim under test: {k}" in text))
        return Reply(text="TRUE", logprobs=[{"TRUE": math.log(p), "FALSE": math.log(1 - p)}])

    return ScriptedBackbone(reply, capabilities={"logprobs": True})


def test_calibrated_verdicts_are_recomputed_from_two_runs(imported: Path, release: Path, lib_dir: Path) -> None:
    from moviemem import Library
    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.mf2_protocol import protocol_policies
    from moviemem.eval.runner import run_bench

    lib = Library(lib_dir)
    bench = load_benchmark(imported / "pairs.csv", library=lib)
    evidence = {"Anna rows out at dawn": 0.8, "Anna rows out at dusk": 0.6, "The keeper waits for a boat": 0.8,
                "The keeper waits for a train": 0.69}
    runs = {}
    for name in ("closed-book", "subtitles"):
        (policy,) = protocol_policies(f"mf2:{release}:terse:first", [f"{name}[p_true=true]"])
        assert ",p_true=true," in policy  # a spec that reads back as it was written
        runs[name] = imported / name
        run_bench(bench, [policy], [_logprob_backbone(0.9, evidence, 0.7)], runs[name], library=lib)
    rec = json.loads((runs["subtitles"] / "results.jsonl").read_text().splitlines()[0])
    (step,) = [s for s in rec["answers"]["false"]["trace"] if s["kind"] == "scores"]
    assert (step["p_true"], step["p_true_content_free"]) == (0.6, 0.7)

    module = load_script("bench/mf2_calibration.py")
    out = module.compare(runs["closed-book"], runs["subtitles"])["all"]
    # the parser says TRUE to all four statements: no pair right, TPR 1, TNR 0
    assert (out["parser (as run)"]["right"], out["parser (as run)"]["tpr"], out["parser (as run)"]["tnr"]) == (0, 1.0, 0.0)
    # calibrated (content-free 0.7): TRUE where P(TRUE) >= 0.7, so 0.8 and 0.8 TRUE, 0.6 and 0.69 FALSE: both pairs right
    cal = out["contextual calibration"]
    assert (cal["right"], cal["tpr"], cal["tnr"], cal["gained"], cal["lost"]) == (2, 1.0, 1.0, 2, 0)
    # contrasted with the closed-book 0.9 (alpha 0.5): TRUE where 1.5 log(p / (1 - p)) >= 0.5 log 9, p >= 0.675, so
    # the false 0.69 stays TRUE: one pair right
    cad = out["context-aware decoding (alpha 0.5)"]
    assert (cad["right"], cad["tpr"], cad["tnr"], cad["gained"], cad["lost"]) == (1, 1.0, 0.5, 1, 0)
    assert module.main([str(runs["closed-book"]), str(imported)]) == 2  # not a run directory: one line, exit 2


def test_the_claim_reader_contrasts_with_the_statement_read_with_no_evidence(imported: Path, lib_dir: Path) -> None:
    import math

    from moviemem import Library
    from moviemem.agents import ask
    from moviemem.backbones import Reply, ScriptedBackbone

    def yes(p: float) -> Reply:
        return Reply(text="yes", logprobs=[{"yes": math.log(p), "no": math.log(1 - p)}])

    film = Library(lib_dir).film("mf2-1")
    # p(yes | evidence) 0.7 reads TRUE; with no evidence the model already says yes at 0.95: contrasted
    # (1.5 log 0.7 - 0.5 log 0.95 < 1.5 log 0.3 - 0.5 log 0.05) it is FALSE
    b = ScriptedBackbone([yes(0.7), yes(0.95)], capabilities={"logprobs": True})
    ans = ask(film, "Anna rows out at dusk.", policy="hybrid", backbone=b, kind="claim", claims="calibrated",
              claim_calibration="contrast", cite="none")  # the calls the verdict takes, without the citation's
    assert ans.choice == "FALSE" and len(b.calls) == 2
    assert "(no evidence)" in b.calls[1].messages[-1].text and "Anna rows out at dusk." in b.calls[1].messages[-1].text
    assert "(no evidence)" not in b.calls[0].messages[-1].text
    b = ScriptedBackbone([yes(0.7)], capabilities={"logprobs": True})
    ans = ask(film, "Anna rows out at dusk.", policy="hybrid", backbone=b, kind="claim", claims="calibrated",
              claim_calibration="none", cite="none")
    assert ans.choice == "TRUE" and len(b.calls) == 1
    with pytest.raises(MovieMemError, match="unknown claim calibration 'prior'"):
        ask(film, "Anna rows out at dusk.", policy="hybrid", backbone=b, kind="claim", claim_calibration="prior")


def test_evidence_takes_the_transcripts_place_and_the_header_says_so(imported: Path, release: Path, lib_dir: Path) -> None:
    from moviemem import Library
    from moviemem.agents import ask, get_policy
    from moviemem.backbones import ScriptedBackbone

    film = Library(lib_dir).film("mf2-1")
    spec = f"mf2-release[release={release},context=evidence,style=terse,parser=first,budget_tokens=200]"
    b = ScriptedBackbone(["FALSE"])
    ans = ask(film, "Anna rows out at dusk.", kind="claim", backbone=b, policy=spec)
    (req,) = b.calls
    shown = req.messages[1].text.split("Dialogue: ")[1].split("\nClaim under test:")[0]
    assert ans.choice == "FALSE" and ans.grounded and ans.evidence
    said = {w for u in film.utterances() for w in u.text.split()}  # the library's lines (a lone '7' kept, unlike the release's)
    assert shown and set(shown.split()) <= said and "Anna rows out at dawn." in shown
    assert any(s.kind == "note" and "in place of the whole transcript" in s.data["text"] for s in ans.trace)
    assert "in place of the whole transcript" in get_policy(spec).protocol()["evidence"]
