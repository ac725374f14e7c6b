"""The researcher's command line: fast start (no heavy import before a command needs it),
--version, `moviemem search`, policy defaults in the table, replayed answers flagged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRT = ("1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n\n2\n00:01:10,000 --> 00:01:12,500\n"
       "He is hiding in the roll-top desk.\n\n3\n00:02:30,000 --> 00:02:31,000\nQuiet!\n")


@pytest.fixture
def front(cli, tmp_path: Path):
    srt = tmp_path / "front.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "front").code == 0
    return cli


def test_help_and_version_import_no_heavy_library() -> None:
    """`--help` and `--version` must not pay for LanceDB, pyarrow, pandas or torch (seconds of imports)."""
    code = ("import sys; from moviemem.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('lancedb', 'pyarrow', 'pandas', 'torch', 'numpy', 'mcp') if m in sys.modules)\n"
            "print(heavy)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = run.stdout.strip().splitlines()
    assert lines[0].startswith("moviemem ") and lines[-1] == "[]", run.stdout


def test_search_command_is_the_mcp_search(front) -> None:
    res = front("search", "front", "Where is Williams hiding?", "--k", "2", "--kinds", "utterance", "--json")
    assert res.code == 0, res.err
    ev = res.json()["evidence"]
    assert {e["id"] for e in ev} == {"utterance:0", "utterance:1"}
    assert set(ev[0]) == {"id", "kind", "start", "end", "text", "score", "words", "similarity"}
    assert ev[0]["score"] >= ev[1]["score"]
    early = front("search", "front", "Williams desk", "--until", "1:00", "--kinds", "utterance", "--json").json()
    assert [e["id"] for e in early["evidence"]] == ["utterance:0"]  # the desk line is not shown by 1:00
    table = front("search", "front", "desk", "--kinds", "utterance")
    assert table.code == 0 and "utterance:1" in table.out and "0:01:10.0-0:01:12.5" in table.out
    bad = front("search", "front", "desk", "--kinds", "frame")
    assert bad.code == 2 and "unknown kind 'frame'" in bad.err
    assert front("search", "front", "desk", "--k", "0").code == 2
    assert "outside the film" in front("search", "front", "desk", "--until", "9:00").err


def test_help_lists_commands_as_a_user_works(cli) -> None:
    """Build the memory, look at it, ask and search, then measure (issue 48: `ingest` was 14th)."""
    commands = cli("--help", library=False).out.split("Commands:")[1]
    listed = [line.split()[0] for line in commands.splitlines() if line.startswith("  ")]
    order = [listed.index(c) for c in ("ingest", "films", "show", "ask", "search", "bench", "report", "inspect")]
    assert order == sorted(order) and listed[0] == "ingest", listed


def test_film_id_typo_names_the_command_and_the_nearest_id_at_once(front, lib_dir: Path) -> None:
    """A film id the library lacks: the CLI's own listing command and the nearest ids, told from the
    saved film list before LanceDB or torch is imported."""
    res = front("search", "fornt", "desk")
    assert res.code == 2 and "film 'fornt' is not in the library (did you mean front? `moviemem films` lists the films)" in res.err
    assert "list_films" not in res.err
    for cmd in (("show", "frnt"), ("ask", "frnt", "Where?"), ("scenes", "frnt"), ("characters", "frnt"), ("graph", "frnt")):
        assert "did you mean front?" in front(*cmd).err
    _quick_read(lib_dir, "films")  # the film list saved while the library is unchanged
    code = ("import sys; from moviemem.cli import main\n"
            f"try:\n    main(['search', 'fornt', 'desk', '--library', {str(lib_dir)!r}])\n"
            "except SystemExit as exc:\n    assert exc.code == 2\n"
            "print(sorted(m for m in ('lancedb', 'torch', 'pyarrow') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]" and "did you mean front?" in run.stderr


def test_search_reads_well(front) -> None:
    """A line found as itself and as the event quoting it comes back once; each hit says how it
    matches (the query's words it holds, its similarity in meaning); a hit with neither is left out;
    the kinds the film has no rows of are named with why (issue 48)."""
    found = front("search", "front", "Where is Williams hiding?", "--json").json()
    hits = found["evidence"]
    # the rule graph's event quotes "Where is Williams?" at the same time: one of the two, the line itself
    assert [e["id"] for e in hits if e["start"] == 5.0] == ["utterance:0"]
    assert hits[0]["words"] == [1, 2] and 0 < hits[0]["similarity"] <= 1  # "Williams" of "Williams", "hiding"
    assert "utterance:2" not in {e["id"] for e in hits} and found["dropped"] >= 1  # "Quiet!" matches nothing
    assert {e["kind"]: e["why"] for e in found["empty_kinds"]} == {
        "caption": "the captions stage was skipped: no captioner configured and no captions imported "
                   "(pass --captioner SPEC or --captions FILE)",
        "onscreen": "the ocr stage was skipped: no video"}
    none = front("search", "front", "snake")
    assert none.code == 0 and none.out == "" and "no match for 'snake' in front" in none.err
    # what a text film lacks is said once, by `show`, not on every search (issue 64)
    assert "no caption rows" not in none.err and "left out" in none.err
    assert "similar" in front("search", "--help", library=False).out  # the help says what the figures are


def test_policies_table_shows_default_settings(cli) -> None:
    res = cli("policies", library=False)
    assert res.code == 0 and "default settings" in res.out
    assert "with_title=false" in res.out.replace("\n", " ")  # closed-book's setting, as --set takes it
    # at 80 columns (the captured console's width) no setting's name is split across lines
    lines = res.out.splitlines()
    for p in cli("policies", "--json", library=False).json()["policies"]:
        for key in p["defaults"]:
            assert any(f"{key}=" in line for line in lines), (p["name"], key)


def test_ask_shows_the_policy_steps_on_a_terminal(front, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal, `ask` tells what the policy is doing as it does it (issue 48: a minute of nothing)."""
    import io

    from rich.console import Console

    from moviemem.cli import answers

    args = ("ask", "front", "Where is Williams?", "--policy", "subtitles", "--backbone", "scripted:Williams is in the desk.")
    piped = front(*args).err  # a pipe or a log: plain lines a log can follow (issue 61), none with --quiet
    assert "[ask]" in piped and "reading prompt subtitles" in piped and "\x1b[" not in piped
    assert "[ask]" not in front(*args, "--quiet").err
    screen = io.StringIO()
    monkeypatch.setattr(answers, "err", Console(file=screen, force_terminal=True, width=100, markup=False, emoji=False))
    assert front(*args).code == 0
    shown = screen.getvalue()
    assert "whole transcript: 3 lines" in shown and re.search(r"reading prompt subtitles \(about \d+ tokens\)", shown), shown
    assert "answer read (" in shown


def test_replayed_answer_is_flagged(front) -> None:
    args = ("ask", "front", "Where is Williams?", "--policy", "subtitles", "--backbone", "scripted:Williams is in the desk.")
    first, again = front(*args), front(*args)
    assert first.code == again.code == 0
    assert "replayed" not in first.err and "replayed from the cache" in again.err
    d = front(*args, "--json").json()
    assert d["replayed"] is True and d["usage"]["calls"] == d["usage"]["replayed_calls"] == 1


def _quick_read(lib: Path, *args: str) -> tuple[str, list[str]]:
    """Run `moviemem ARGS --json` in a fresh interpreter: its stdout and the heavy modules it imported."""
    code = ("import json, sys; from moviemem.cli import main\n"
            f"try:\n    main({[*args, '--json', '--library', str(lib)]!r})\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(json.dumps(sorted(m for m in ('lancedb', 'torch') if m in sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    *body, heavy = run.stdout.strip().splitlines()
    return "\n".join(body), json.loads(heavy)


def test_films_and_show_answer_without_lancedb_until_the_library_changes(front, lib_dir: Path) -> None:
    """`films` and `show` save their answers with the library's fingerprint: unchanged, a second
    call answers without importing LanceDB; any write (another ingest) makes the next call read again."""
    first, heavy = _quick_read(lib_dir, "films")
    assert "lancedb" in heavy and json.loads(first)["films"][0]["film_id"] == "front"
    again, heavy = _quick_read(lib_dir, "films")
    assert again == first and heavy == []
    show, _ = _quick_read(lib_dir, "show", "front")
    show_again, heavy = _quick_read(lib_dir, "show", "front")
    assert show_again == show and heavy == [] and json.loads(show)["counts"]["utterances"] == 3

    srt = lib_dir.parent / "second.srt"
    srt.write_text(SRT)
    assert front("ingest", "--text", str(srt), "--film-id", "second").code == 0
    after, heavy = _quick_read(lib_dir, "films")
    assert "lancedb" in heavy and {f["film_id"] for f in json.loads(after)["films"]} == {"front", "second"}
    assert front("delete", "second").code == 0
    assert {f["film_id"] for f in json.loads(_quick_read(lib_dir, "films")[0])["films"]} == {"front"}
    # a missing film is an error every time, never a saved answer
    assert front("show", "nope").code == 2 and front("show", "nope").code == 2


def test_search_answers_from_packs_without_lancedb(front, lib_dir: Path) -> None:
    """`search` ranks a film's rows in process from its search packs; with the film's runs saved
    while the library is unchanged, a second call never imports LanceDB and answers the same."""
    args = ("search", "front", "Where is Williams hiding?", "--k", "3", "--kinds", "utterance,event")
    first, heavy = _quick_read(lib_dir, *args)
    again, heavy_again = _quick_read(lib_dir, *args)
    assert again == first and heavy_again == [] and "lancedb" in heavy
    assert {e["id"] for e in json.loads(first)["evidence"]} >= {"utterance:0", "utterance:1"}
    srt = lib_dir.parent / "other.srt"
    srt.write_text(SRT.replace("Williams", "Hildy"))
    assert front("ingest", "--text", str(srt), "--film-id", "other").code == 0  # another film: this one ranks the same
    after, heavy = _quick_read(lib_dir, *args)
    assert after == first and "lancedb" in heavy
    assert front("search", "nope", "desk").code == 2 and front("search", "nope", "desk").code == 2


def test_stage_notes_count_one_in_the_singular(cli, tmp_path: Path) -> None:
    """"1 segment", not "1 segments" (issue 48)."""
    srt = tmp_path / "short.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:03,000\nHello.\n")
    assert cli("ingest", "--text", str(srt), "--film-id", "short").code == 0
    reasons = {s["stage"]: s["reason"] for s in cli("show", "short", "--json").json()["stages"]}
    assert reasons["segments"] == "1 segment (fixed windows)"


def test_voice_encoder_imports_without_the_pkg_resources_warning() -> None:
    """webrtcvad (under resemblyzer) imports the deprecated pkg_resources: every video ingest printed its
    UserWarning (issue 48)."""
    pytest.importorskip("resemblyzer", reason="the voice encoder is not installed")
    code = "from moviemem.characters.voices import resemblyzer_missing; print(resemblyzer_missing())"
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "None" and "pkg_resources" not in run.stderr, run.stderr
