"""Reports: report.md tables, the accuracy-vs-tokens plot, the escaped HTML inspector (checked in
headless Chromium when it is installed), and the bench / report / inspect / filter commands."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from moviemem.agents.types import Answer, Step
from moviemem.backbones import user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.inspector import write_inspector
from moviemem.eval.report import write_report
from moviemem.eval.runner import run_bench
from moviemem.retrievers.types import Evidence

PAYLOAD = "<script>document.body.setAttribute('data-pwned','1')</script>"


def _bench(n: int = 8) -> Benchmark:
    rows = [(i + 1, {"id": f"q{i}", "film_id": f"f{i % 4}", "question": f"Where is the key {i}?",
                     "options": ["Attic", "Cellar", "Inn", "Shop"], "answer": "AB"[i % 2],
                     "category": ["plot", "setting"][i % 2]}) for i in range(n)]
    return Benchmark("mcq", validate_rows(rows, "mcq", "synthetic.jsonl"), "synthetic.jsonl", "jsonl")


@pytest.fixture
def frame(tmp_path: Path) -> Path:
    from PIL import Image

    p = tmp_path / "lib" / "media" / "f0" / "frame.jpg"  # inside the run's library: only such frames are shown
    p.parent.mkdir(parents=True)
    Image.new("RGB", (640, 360), (200, 30, 30)).save(p)
    return p


def _answerer(frame: Path):
    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        letter = "A" if policy == "good" else ("B" if "1" in query.question else "C")
        ev = [Evidence("utterance", film_id, 61.5, 64.0, f"Subtitle says {PAYLOAD}", score=0.9, retriever="text",
                       id="utterance:3"),
              Evidence("frame", film_id, 62.0, 62.0, "", frame=str(frame), score=0.5, retriever="frames", id="frame:9")]
        return Answer(choice=letter, text=f"It is {letter}", confidence=0.8, invalid=False, policy=policy,
                      backbone=backbone.name, evidence=ev, usage=reply.usage, calls=1,
                      trace=[Step("retrieve", {"retriever": "text", "query": query.question}),
                             Step("reply", {"text": f"{letter} {PAYLOAD}"})])
    return answer


@pytest.fixture
def run_dir(tmp_path: Path, frame: Path) -> Path:
    from moviemem.backbones import ScriptedBackbone
    from moviemem.library import Library

    run = tmp_path / "run"
    lib = Library(tmp_path / "lib")
    srt = tmp_path / "f0.srt"  # a real library (films.lance): the inspector shows only its media's pictures
    srt.write_text("1\n00:01:01,500 --> 00:01:04,000\nThe key is in the attic.\n")
    lib.ingest_text(srt, film_id="f0")
    run_bench(_bench(), ["good", "weak"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=_answerer(frame),
              library=lib)
    return run


def test_inspector_copies_no_picture_from_outside_the_library(tmp_path: Path) -> None:
    """results.jsonl names the frames it shows; a run from elsewhere naming the user's own pictures gets none."""
    from PIL import Image

    from moviemem.backbones import ScriptedBackbone
    from moviemem.library import Library

    outside = tmp_path / "home" / "holiday.jpg"
    outside.parent.mkdir()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(outside)
    for name, lib in (("with-library", Library(tmp_path / "lib")), ("no-library", None)):
        run = tmp_path / name
        run_bench(_bench(2), ["good"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=_answerer(outside), library=lib)
        index = write_inspector(run)
        assert not list((index.parent / "thumbs").glob("*")), name
        assert "<img" not in (index.parent / "items" / "1.html").read_text(), name


def test_a_run_naming_the_root_as_its_library_gets_no_picture(tmp_path: Path) -> None:
    """run.json with `library: "/"` makes every file "inside the library": only a real library's media count."""
    import json

    from PIL import Image

    from moviemem.backbones import ScriptedBackbone

    outside = tmp_path / "media" / "holiday.jpg"  # under a folder named media, as /media is
    outside.parent.mkdir()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(outside)
    run = tmp_path / "run"
    run_bench(_bench(2), ["good"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=_answerer(outside))
    header = json.loads((run / "run.json").read_text())
    header["library"] = "/"
    (run / "run.json").write_text(json.dumps(header))
    index = write_inspector(run)
    assert not list((index.parent / "thumbs").glob("*"))
    assert "<img" not in (index.parent / "items" / "1.html").read_text()


def test_report_tables_and_plot(run_dir: Path):
    paths = write_report(run_dir, baseline="weak")
    md = paths["report"].read_text()
    assert "| policy | backbone | n | not sent (context) | accuracy |" in md and "paradigm" not in md
    # accuracy and cost in tables of at most ten columns, each line within 100 characters (issue 61: cut by
    # columns, each part led by policy and backbone); counts as whole numbers (issue 57)
    tables = [line for line in md.splitlines() if line.startswith("| policy | backbone |")]
    assert max(line.count(" | ") + 1 for line in tables[:2]) <= 10
    assert max(len(line) for line in md.splitlines() if line.startswith("|")) <= 100
    assert "## Cost" in md and ("| policy | backbone | calls / answer | median input tokens | input tokens billed | read | "
                                "restored |") in md and "| policy | backbone | output tokens | compute (s) | cost ($) |" in md
    cost = md.split("## Cost", 1)[1].split("\n## ", 1)[0]
    # the median of eight 5-token prompts is 5.0 in the summary: written 5
    assert "| good | scripted | 1.0 | 5 | 40 | 40 | 0 |" in cost and "| good | scripted | 8 |" in cost and "| 5.0 |" not in cost
    # good answers A (right on even items), weak answers B on q1 only (right) and C elsewhere; weak's Wald
    # 12.5 ± 22.9 reaches below 0: the Wald column gives Wilson's interval there (issue 61)
    assert "| good | scripted | 8 | 0 |" in md and "50.0 ± 34.6" in md
    assert "| weak | scripted | 8 | 0 |" in md and "12.5 [2.2, 47.1] (Wilson)" in md and "12.5 ± 22.9" not in md
    assert "## Per category" in md and "| plot |" in md
    assert "## Paired comparison with `weak`" in md
    assert "## Per-film accuracy" in md and "Spearman" in md
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_inspector_escapes_text_and_shows_evidence(run_dir: Path):
    index = write_inspector(run_dir)
    html = index.read_text()
    assert "q0" in html and 'href="items/1.html"' in html
    page = (index.parent / "items" / "1.html").read_text()
    assert "Where is the key 0?" in page and "Attic" in page and "(right answer)" in page
    assert "&lt;script&gt;document.body.setAttribute" in page
    assert "<script>" not in page  # the subtitle and the trace are text, never markup
    assert "0:01:01.5–0:01:04.0" in page  # evidence with timestamps
    thumbs = list((index.parent / "thumbs").glob("*.jpg"))
    assert len(thumbs) == 1 and f'src="../thumbs/{thumbs[0].name}"' in page
    from PIL import Image

    with Image.open(thumbs[0]) as im:
        assert im.width == 192


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_inspector_in_headless_chromium(run_dir: Path, tmp_path: Path):
    index = write_inspector(run_dir)
    page = (index.parent / "items" / "1.html").resolve()
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--allow-file-access-from-files"]
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert "Where is the key 0?" in dom and "utterance" in dom and "0:01:01.5–0:01:04.0" in dom
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]  # the script never ran
    assert "&lt;script&gt;" in dom
    shot = tmp_path / "inspector.png"
    subprocess.run([*args, f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri()], capture_output=True,
                   timeout=90)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10000


@pytest.fixture(scope="module")
def text_film(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The synthetic film's script and benchmark files, ingested as a film without video (its
    dialogue as subtitles): real policies can answer its questions without rendering the film."""
    from conftest import truth_srt

    from moviemem import Library
    from moviemem.foundation.config import get_settings
    from moviemem.synth import documents, plan

    root = tmp_path_factory.mktemp("textfilm")
    for name, text in documents(plan(3.0, 7), "synth").items():
        (root / name).write_text(text, encoding="utf-8")
    srt = truth_srt(json.loads((root / "truth.json").read_text()), root / "subtitles.srt")
    lib = Library(root / "lib", get_settings(library=root / "lib"))
    lib.ingest_text(srt, film_id="synth", title="Synthetic", year=2026)
    return root / "lib", root


def test_library_answerer_through_film_ask(text_film: tuple[Path, Path], tmp_path: Path):
    """The runner's default answerer: Film.ask with real policies; unknown policies refused up front."""
    from moviemem import Library
    from moviemem.eval.formats import load_benchmark
    from moviemem.eval.log import read_log
    from moviemem.foundation.errors import MovieMemError

    lib_path, root = text_film
    lib = Library(lib_path)
    bench = load_benchmark(root / "mcq.jsonl", library=lib)
    with pytest.raises(MovieMemError, match="unknown policy 'nope'"):
        run_bench(bench, ["nope"], ["scripted:A"], tmp_path / "run", library=lib)
    res = run_bench(bench, ["subtitles", "closed-book[with_title=true]"], ["scripted:A"], tmp_path / "run",
                    library=lib, limit=4)
    assert res.complete and res.answered == 8
    recs = read_log(tmp_path / "run")
    sub = next(r for r in recs if r.policy == "subtitles")
    assert sub.answers["answer"].choice == "A" and sub.answers["answer"].trace
    assert sub.usage.input_tokens > 100  # the transcript was in the prompt


def test_bench_report_inspect_filter_commands(text_film: tuple[Path, Path], cli, tmp_path: Path):
    """The commands end to end on the synthetic film's questions with a scripted backbone."""
    lib_path, root = text_film
    mcq = root / "mcq.jsonl"
    run = tmp_path / "runs" / "synth"
    lib_args = ("--library", str(lib_path))
    r = cli("bench", str(mcq), "--policies", "closed-book,subtitles", "--backbones", "scripted:A", "--out", str(run),
            "--limit", "6", "--json", *lib_args, library=False)
    assert r.code == 0, r.err
    j = r.json()
    assert j["run_dir"] == str(run) and j["items"] == 6 and j["answered"] + j["invalid"] == 12
    assert {x["policy"] for x in j["results"]} == {"closed-book", "subtitles"}
    assert all(set(x) == {"policy", "backbone", "n", "accuracy", "ci_low", "ci_high", "median_input_tokens"}
               for x in j["results"])
    again = cli("bench", str(mcq), "--policies", "closed-book,subtitles", "--backbones", "scripted:A", "--out",
                str(run), "--limit", "6", "--json", *lib_args, library=False).json()
    assert again["backbone_calls"] == 0 and again["answered"] == j["answered"]  # resumed: nothing left to ask
    # a policy with several settings: its commas are its own, not the list's
    r = cli("bench", str(mcq), "--policies", "hybrid[reader=json,budget_tokens=300],closed-book", "--backbones",
            "scripted:A", "--out", str(tmp_path / "runs" / "specs"), "--limit", "2", "--json", *lib_args, library=False)
    assert r.code == 0, r.err
    assert {x["policy"] for x in r.json()["results"]} == {"hybrid[reader=json,budget_tokens=300]", "closed-book"}
    r = cli("report", str(run), "--json", library=False)
    assert r.code == 0, r.err
    paths = r.json()
    assert Path(paths["report"]).read_text().count("| scripted:A |") >= 2
    r = cli("inspect", str(run), "--no-serve", library=False)
    assert r.code == 0 and r.out.strip().endswith("index.html")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "film_id": "nope", "question": "Q?", "options": ["a", "b"], "answer": "A"}) + "\n")
    r = cli("bench", str(bad), "--backbones", "scripted:A", "--out", str(tmp_path / "r2"), *lib_args, library=False)
    assert r.code == 2 and f"{bad}:1: film 'nope' is not in the library" in r.err
    out = tmp_path / "filtered.jsonl"
    r = cli("filter", str(mcq), "--closed-book-backbones", "scripted:A,scripted:B", "--out", str(out), "--json",
            *lib_args, library=False)
    assert r.code == 0, r.err
    f = r.json()
    assert f["kept"] + f["excluded"] == sum(1 for _ in mcq.open()) and f["kept"] > 0
    assert f["accuracy_after"] <= f["chance"] + 1e-9
    assert len(out.read_text().splitlines()) == f["kept"]
    before = mcq.read_text()
    r = cli("filter", str(mcq), "--closed-book-backbones", "scripted:A", "--out", str(mcq), *lib_args, library=False)
    assert r.code == 2 and "would overwrite the benchmark" in r.err and mcq.read_text() == before


def test_memorization_filter_that_keeps_nothing_writes_null_not_nan() -> None:
    from moviemem.eval.filter import memorization_filter
    from moviemem.eval.formats import MCQ

    items = [MCQ(id="q1", film_id="f", question="Q?", options=["a", "b"], answer="A")]
    res = memorization_filter(items, {"m": {"q1": True}})  # answered from memory: excluded
    assert (res.kept, res.chance, res.accuracy_after, res.accuracy_before) == ([], None, None, 1.0)
    assert json.loads(json.dumps(res.to_dict(), allow_nan=False))["chance"] is None


def _fixed(choice_of):
    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        c = choice_of(query, policy)
        return Answer(choice=c, text=str(c), confidence=None, invalid=c is None, policy=policy, backbone=backbone.name,
                      usage=reply.usage, error=None if c else "no verdict")
    return answer


def test_claims_relations_and_setting_sweep_reports(tmp_path: Path):
    from moviemem.backbones import ScriptedBackbone
    from moviemem.eval.formats import RELATION_TYPES

    claims = [(i + 1, {"id": f"c{i}", "film_id": "f", "true_claim": f"T{i}", "false_claim": f"F{i}"}) for i in range(4)]
    bench = Benchmark("claims", validate_rows(claims, "claims", "c.jsonl"), "c.jsonl")
    # says TRUE to everything except F0 and T3 (unparseable)
    verdict = lambda q, p: None if q.question == "T3" else ("FALSE" if q.question == "F0" else "TRUE")  # noqa: E731
    run_bench(bench, ["p[k=1]", "p[k=2]"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "claims", answerer=_fixed(verdict))
    md = write_report(tmp_path / "claims", inspector=False)["report"].read_text()
    assert "## MF² claim pairs" in md
    assert "| p[k=1] | scripted | 4 | 25.0 [4.6, 69.9] | 75.0 [30.1, 95.4] | 25.0 [4.6, 69.9] |" in md
    assert "| p[k=1] | scripted | 12.5 [2.2, 47.1] |" in md  # unparseable %, in the table's second part
    assert "## Setting sweeps" in md and "| p | k | 1 | scripted |" in md and "| p | k | 2 | scripted |" in md

    rels = [(i + 1, {"id": f"r{i}", "film_id": "f", "event_a": "a", "event_b": "b", "label": lab})
            for i, lab in enumerate(["before", "causal", "flashback", "flashback"])]
    bench = Benchmark("relations", validate_rows(rels, "relations", "r.jsonl"), "r.jsonl")
    letter = "ABCDEFGH"[RELATION_TYPES.index("flashback")]
    run_bench(bench, ["p"], [ScriptedBackbone(["x"], cycle=True)], tmp_path / "rel", answerer=_fixed(lambda q, p: letter))
    md = write_report(tmp_path / "rel", inspector=False)["report"].read_text()
    assert "## NEST relations (F1 per type)" in md
    assert "| p | scripted | 0.50 | 0.22 | 0.00 | 0.00 | 0.67 | 100.0 [34.2, 100.0] |" in md


def test_inspector_server_answers_loopback_requests_only(tmp_path: Path) -> None:
    import functools
    import http.client
    import http.server
    import threading

    from moviemem.cli.bench import InspectorFiles

    (tmp_path / "index.html").write_text("<p>run</p>")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(InspectorFiles, directory=str(tmp_path)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]

    def status(**headers: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/index.html", headers=headers)
        code = conn.getresponse().status
        conn.close()
        return code

    try:
        assert status() == 200 and status(Host=f"localhost:{port}", Origin=f"http://127.0.0.1:{port}") == 200
        assert status(Host=f"rebound.example:{port}") == 403  # DNS rebinding
        assert status(Origin="https://elsewhere.example") == 403  # a page in the user's browser
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_accuracy_plot_holds_a_long_policy_name_without_a_layout_warning(tmp_path: Path):
    """A configured policy's name can be long; tight_layout gave up on one with a warning and the label was cut."""
    import warnings

    from PIL import Image

    from moviemem.eval.report import plot_accuracy_vs_tokens

    acc = {"n": 10, "value": 0.5, "ci_low": 0.2, "ci_high": 0.8}
    short = [{"policy": "closed-book", "backbone": "local", "accuracy": acc, "median_input_tokens": 200}]
    long = [*short, {"policy": "mf2-release[context=evidence,p_true=true,template=transcripts_only]",
                     "backbone": "local", "accuracy": acc, "median_input_tokens": 80_000}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        narrow = plot_accuracy_vs_tokens(short, tmp_path / "short.png")  # type: ignore[arg-type]
        wide = plot_accuracy_vs_tokens(long, tmp_path / "long.png")  # type: ignore[arg-type]
    assert narrow is not None and wide is not None
    assert Image.open(wide).width > Image.open(narrow).width  # the image grew to hold the label
