"""`moviemem compare A B --html OUT`: two configurations side by side, item by item (issue 57)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from text_film import srt_text

from moviemem import Library
from moviemem.agents.types import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.compare import Side, parse_groups
from moviemem.eval.compare_page import comparison_rows, write_compare_page
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.runner import run_bench
from moviemem.retrievers.base import Evidence

PAYLOAD = "<script>document.body.setAttribute('data-pwned','1')</script>"
A_BLUE, B_ORANGE = (31, 95, 214), (224, 112, 15)
# 8 items over two films; gold evidence at 40-45 s; the right answer is A
ROWS = [{"id": f"q{i}", "film_id": f"f{i % 2}", "question": f"Where is the key {i}? {PAYLOAD if i == 0 else ''}".strip(),
         "options": ["Attic", "Cellar", "Inn", "Shop"], "answer": "A", "category": ["plot", "setting"][i % 2],
         "evidence": [[40.0, 45.0]]} for i in range(8)]
RIGHT = {"a": {0, 1, 2, 3, 6}, "b": {2, 3, 4, 5, 6}}  # A only: 0, 1; B only: 4, 5; both wrong: 7; both right: 2, 3, 6
SHOWN = {"a": (10.0, 14.0), "b": (70.0, 74.0)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sides")
    lib = Library(root / "lib")
    for fid in ("f0", "f1"):
        (root / f"{fid}.srt").write_text(srt_text([(float(s), float(s) + 4, f"Line at {s} s.") for s in range(0, 100, 10)]))
        lib.ingest_text(root / f"{fid}.srt", film_id=fid, title=fid.upper())
    bench = Benchmark("mcq", validate_rows(list(enumerate(ROWS, 1)), "mcq", "t.jsonl"), "t.jsonl", "jsonl")
    out = []
    for side in ("a", "b"):
        def answer(film_id, query, policy, backbone, side=side):
            i = int(query.question.split("?")[0].split()[-1])
            reply = backbone.chat([user(query.question)], max_tokens=4)
            start, end = SHOWN[side]
            ev = [Evidence("utterance", film_id, start, end, f"{side} saw this {PAYLOAD}", score=0.9, retriever="text",
                           id=f"utterance:{side}", cited=True)]
            letter = "A" if i in RIGHT[side] else "B"
            return Answer(choice=letter, text=letter, confidence=0.5, invalid=False, policy=policy, backbone=backbone.name,
                          evidence=ev, usage=reply.usage, trace=[], calls=1)

        run_bench(bench, [f"policy-{side}"], [ScriptedBackbone(["x"], cycle=True)], root / side, answerer=answer,
                  library=lib)
        out.append(root / side)
    return out[0], out[1]


def test_the_items_one_side_got_right_come_first_with_both_timelines(runs) -> None:
    a, b = runs
    rows, config_a, config_b = comparison_rows(Side(a), Side(b), parse_groups(["first=f0", "second=f1"]))
    assert (config_a[0], config_b[0]) == ("policy-a", "policy-b")
    assert [(r["id"], r["kind"]) for r in rows[:5]] == [("q0", "A only"), ("q1", "A only"), ("q4", "B only"),
                                                        ("q5", "B only"), ("q7", "both wrong")]
    q0 = rows[0]
    assert (q0["group"], q0["category"], q0["gold"]) == ("first", "plot", ["0:00:40.0–0:00:45.0"])
    # the film's length (94 s, its last line's end, from the library) is one bar for both sides and the gold
    [ma], [mb], [gold] = q0["a"]["timeline"]["marks"], q0["b"]["timeline"]["marks"], q0["a"]["timeline"]["gold"]
    assert (ma["x"], mb["x"], gold["x"]) == (pytest.approx(1000 * 10 / 94, abs=0.01), pytest.approx(1000 * 70 / 94, abs=0.01),
                                             pytest.approx(1000 * 40 / 94, abs=0.01))
    assert q0["a"]["tokens"] > 0 and q0["a"]["calls"] == 1


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_the_page_in_headless_chromium_draws_both_timelines_and_filters(runs, tmp_path: Path) -> None:
    from PIL import Image

    a, b = runs
    page = write_compare_page(Side(a), Side(b), tmp_path / "compare.html", parse_groups(["first=f0", "second=f1"]))
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([*args, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0] and "&lt;script&gt;" in dom  # data, not code
    assert "8 of 8 items shown" in dom
    filtered = subprocess.run([*args, "--dump-dom", page.resolve().as_uri() + "#group=second&category=setting"],
                              capture_output=True, text=True, timeout=90).stdout
    assert "4 of 8 items shown" in filtered  # f1's items are the odd ones, all of category setting
    shown = [tr for tr in filtered.split('<tr class="item')[1:] if "display: none" not in tr.split(">", 1)[0]]
    assert len(shown) == 4 and all('data-group="second"' in tr.split(">", 1)[0] for tr in shown)

    shot = Path(os.environ.get("MOVIEMEM_SHOTS", tmp_path)) / "compare.png"  # MOVIEMEM_SHOTS keeps it to look at
    subprocess.run([*args, f"--screenshot={shot}", "--window-size=1300,900", page.resolve().as_uri()],
                   capture_output=True, timeout=90)
    colours = Image.open(shot).convert("RGB").getcolors(1 << 24) or []

    def near(colour: tuple[int, int, int]) -> int:
        return sum(n for n, px in colours if all(abs(p - c) <= 12 for p, c in zip(px, colour)))

    assert near(A_BLUE) > 200 and near(B_ORANGE) > 200  # A's lane and B's lane are both drawn


def test_compare_html_command_and_its_errors(runs, cli, tmp_path: Path) -> None:
    a, b = runs
    r = cli("compare", str(a), str(b), "--html", str(tmp_path / "side.html"), "--group", "first=f0", library=False)
    assert r.code == 0, r.err
    assert "wrote" in r.err and (tmp_path / "side.html").read_text().count('<tr class="item') == 8
    bad = cli("compare", str(a), str(b), "--html", str(tmp_path / "no" / "side.html"), library=False)
    assert bad.code == 2 and "no folder" in bad.err and len(bad.err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
