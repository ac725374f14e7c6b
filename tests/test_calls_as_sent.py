"""Every model call kept as sent (issue 61): the messages, the reply and its log-probabilities in the run folder,
each text piece once (a film's transcript once per film), `moviemem show-call`, the inspector's prompt as sent
with evidence and gold marked, secrets kept out, old runs still read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from text_film import text_film_library

from moviemem import Library
from moviemem.backbones import Reply, Request, ScriptedBackbone
from moviemem.eval.formats import load_benchmark
from moviemem.eval.log import CALL_LINES, CALL_TEXTS, CALLS, CallLog, read_log, text_pieces
from moviemem.eval.report import write_report
from moviemem.eval.runner import run_bench
from moviemem.foundation.errors import MovieMemError

CUES = [(float(8 * i), float(8 * i + 3), f"Line {i} about the harbour and the {['boat', 'key', 'map'][i % 3]}.")
        for i in range(120)]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return text_film_library(tmp_path_factory.mktemp("calls"), CUES, "harbour", "Harbour")


def _claims(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"c{i}", "film_id": "harbour", "true_claim": f"The key is in box {i}.",
                                        "false_claim": f"The key is in crate {i}.", "evidence": [[8.0, 11.0]]}) + "\n"
                            for i in range(n)))
    return path


def _verdict(req: Request) -> Reply:
    return Reply(text='{"answer": "TRUE", "confidence": 2}', logprobs=[{"TRUE": -0.1, "FALSE": -2.4}])


def test_text_pieces_share_every_piece_of_a_shared_prefix() -> None:
    transcript = "".join(f"[0:{i:02d}] Line {i} of the film, said by someone.\n" for i in range(400))
    a, b = text_pieces(transcript + "Statement: the key is in the boat."), text_pieces(transcript + "Statement: no.")
    assert "".join(a) == transcript + "Statement: the key is in the boat."  # nothing lost, nothing added
    assert a[:-1] == b[:-1] and len(a) > 3  # only the last piece (the statement and the lines before it) differs
    assert all(len(p) <= 4096 for p in text_pieces("x" * 20000))  # a run of text with no break is cut by size


def test_a_bench_keeps_every_call_as_sent_and_the_transcript_once(library: Library, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 4)), ["subtitles", "closed-book"],
              [ScriptedBackbone(_verdict, cycle=True)], run, library=library)
    recs = read_log(run)
    subs = [r for r in recs if r.policy == "subtitles"]
    assert all(len(a.call_ids) == 1 for r in recs for a in r.answers.values())
    log = CallLog(run)
    call = log.of(subs[0].answers["true"].call_ids)[0]
    user = log.text(call.messages[-1].parts[0].text)
    assert "Line 0 about the harbour" in user and "Line 119 about" in user  # the transcript, as sent
    assert user.rstrip().endswith("The key is in box 0.") or "The key is in box 0." in user  # and the statement
    assert call.reply.logprobs == [{"TRUE": -0.1, "FALSE": -2.4}] and call.prompt
    # 8 subtitles prompts (4 pairs x true/false) share one transcript: stored once, not 8 times
    texts = (run / CALLS / CALL_TEXTS).read_text()
    assert texts.count("Line 60 about the harbour") == 1
    stored = (run / CALLS / CALL_TEXTS).stat().st_size
    assert stored < 2.5 * len(user)  # one transcript, plus a piece or two per prompt

    # a rerun over the same folder (everything answered) writes no call twice
    before = (run / CALLS / CALL_LINES).read_bytes()
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 4)), ["subtitles", "closed-book"],
              [ScriptedBackbone(_verdict, cycle=True)], run, library=library)
    assert (run / CALLS / CALL_LINES).read_bytes() == before


def _cli(*args: str, library: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MOVIEMEM_LIBRARY": str(library)}
    return subprocess.run([sys.executable, "-m", "moviemem.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_show_call_prints_the_prompt_as_sent_and_the_inspector_shows_it(library: Library, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 2)), ["subtitles", "closed-book"],
              [ScriptedBackbone(_verdict, cycle=True)], run, library=library)
    shown = _cli("show-call", str(run), "c1", "--policy", "subtitles", "--query", "false", library=library.path)
    assert shown.returncode == 0, shown.stderr
    assert "--- system" in shown.stdout and "--- user" in shown.stdout and "Line 77 about the harbour" in shown.stdout
    assert "The key is in crate 1." in shown.stdout and "'TRUE' -0.100" in shown.stdout
    as_json = json.loads(_cli("show-call", str(run), "c1", "--policy", "subtitles", "--call", "1", "--json",
                              library=library.path).stdout)
    assert [c["query"] for c in as_json["calls"]] == ["true", "false"]
    several = _cli("show-call", str(run), "c1", library=library.path)
    assert several.returncode == 2 and "pick one" in several.stderr and len(several.stderr.splitlines()) == 1
    missing = _cli("show-call", str(run), "nope", library=library.path)
    assert missing.returncode == 2 and "no answer to item 'nope'" in missing.stderr

    write_report(run, baseline="closed-book")
    page = next(p for p in (run / "inspector" / "items").glob("*.html") if "c1" in p.read_text())
    html = page.read_text()
    assert "Prompt as sent" in html and "Line 77 about the harbour" in html
    assert '<mark class="gold shown">Line 1 about the harbour and the key.</mark>' in html  # 8-11 s is gold


def test_secrets_never_enter_the_call_log(library: Library, tmp_path: Path) -> None:
    secret = "sk-test-SECRETSECRET1234567890"

    class Keyed(ScriptedBackbone):
        def secrets(self) -> list[str]:
            return [secret]

    echo = Keyed(lambda req: Reply(text=f'{{"answer": "TRUE", "confidence": 2}} {secret}'), cycle=True)
    run = tmp_path / "run"
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 1)), ["closed-book"], [echo], run, library=library)
    for f in (run / CALLS).iterdir():
        assert secret not in f.read_text()


def test_an_old_run_without_calls_still_reads_and_says_why_show_call_cannot(library: Library, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 1)), ["closed-book"],
              [ScriptedBackbone(_verdict, cycle=True)], run, library=library)
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    for rec in lines:  # as a run written before calls were kept
        for a in rec["answers"].values():
            a.pop("call_ids", None)
    (run / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for f in (run / CALLS).iterdir():
        f.unlink()
    (run / CALLS).rmdir()
    assert write_report(run)["report"].exists()
    from moviemem.eval.call_view import find_calls

    with pytest.raises(MovieMemError, match="written before moviemem kept them"):
        find_calls(run, "c0")


def test_the_full_context_policies_mark_everything_before_the_question_as_shared(library: Library, tmp_path: Path) -> None:
    """The subtitles prompt's transcript is a prefix every question on the film shares: the request says where it
    ends (a local model reads it as a unit of its own) and the call as sent keeps that mark."""
    sent: list[Request] = []

    def reply(request: Request) -> Reply:
        sent.append(request)
        return _verdict(request)

    run = tmp_path / "run"
    run_bench(load_benchmark(_claims(tmp_path / "c.jsonl", 2)), ["subtitles", "closed-book"],
              [ScriptedBackbone(reply, cycle=True)], run, library=library, cache=tmp_path / "cache")
    subs = [r for r in sent if "transcript" in r.messages[-1].text]
    closed = [r for r in sent if r not in subs]
    heads = {r.messages[-1].text[: r.shared_prefix] for r in subs}
    assert len(subs) == 4 and len(heads) == 1 and all(r.shared_prefix > 0 for r in subs)
    assert all("Claim about the film: The key is in" in r.messages[-1].text[r.shared_prefix:] for r in subs)  # the statement after it
    assert closed and all(r.shared_prefix == 0 for r in closed)
    rec = [r for r in read_log(run) if r.policy == "subtitles"][0]
    call = CallLog(run).of(rec.answers["true"].call_ids)[0]
    assert call.options.shared_prefix == subs[0].shared_prefix
    with pytest.raises(MovieMemError, match="shared_prefix"):
        Request.build("short", shared_prefix=99)
