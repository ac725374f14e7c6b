"""The inspector's index page: accuracy by category with intervals, filters by configuration,
verdict, evidence outcome and category, sortable columns (run in headless Chromium when installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from moviemem.agents.base import Answer
from moviemem.backbones import ScriptedBackbone, user
from moviemem.eval.formats import Benchmark, validate_rows
from moviemem.eval.inspector import write_inspector
from moviemem.eval.runner import run_bench
from moviemem.retrievers.types import Evidence

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    # 6 items: categories plot (q0, q2, q4) and setting (q1, q3, q5); answer A is right on even items.
    # good always answers A and shows the gold span; weak answers B and shows nothing near it.
    rows = [(i + 1, {"id": f"q{i}", "film_id": "f", "question": f"Q{i} {HOSTILE}", "options": ["x", "y"],
                     "answer": "AB"[i % 2], "category": ["plot", "setting"][i % 2], "evidence": [[10.0, 20.0]]})
            for i in range(6)]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        at = 12.0 if policy == "good" else 500.0
        return Answer(choice="A" if policy == "good" else "B", text="", confidence=None, invalid=False, policy=policy,
                      backbone=backbone.name, usage=reply.usage,
                      evidence=[Evidence("utterance", film_id, at, at + 2, "line", id="utterance:1")])

    run = tmp_path / "run"
    run_bench(bench, ["good", "weak"], [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer)
    return run


def test_index_has_category_accuracy_with_intervals_and_outcomes(run_dir: Path) -> None:
    html = write_inspector(run_dir).read_text()
    table = html.split("<h2>Accuracy by category</h2>", 1)[1].split("</table>", 1)[0]
    assert "<td>plot</td><td>100.0 (44–100), n=3</td><td>0.0 (0–56), n=3</td>" in table
    assert "<td>all items</td><td>50.0 (19–81), n=6</td><td>50.0 (19–81), n=6</td>" in table
    assert 'data-o="found|not found"' in html and 'data-o="misread|lucky"' in html
    assert HOSTILE not in html  # item text is escaped on the index too


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_index_script_filters_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    index = write_inspector(run_dir)
    # the page's own script, with a filter preset the way a user would set it: good's "misread" items
    html = index.read_text().replace("  filter();\n})();", "  cfg.value = '0'; verdict.value = 'o:misread'; filter();\n})();")
    assert html != index.read_text()
    probe = index.parent / "probe.html"
    probe.write_text(html)
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--dump-dom", probe.resolve().as_uri()], capture_output=True, text=True, timeout=90).stdout
    assert "(3 of 6 items)" in dom  # good answers A everywhere: wrong, with the gold shown, on the setting items
    visible = [line for line in dom.split("<tr ")[1:] if "hidden" not in line.split(">", 1)[0]]
    assert len(visible) == 3 and all('data-category="setting"' in v for v in visible)
    assert "page 1 of 1" in dom


def test_index_shows_one_page_of_rows_at_first(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows past the first page are hidden in the HTML itself, so a 5,000-item table is never laid out whole."""
    from moviemem.eval import inspector

    monkeypatch.setattr(inspector, "INDEX_PAGE", 4)
    html = write_inspector(run_dir).read_text()
    heads = [line.split(">", 1)[0] for line in html.split("<tbody>", 1)[1].split("<tr")[1:]]
    assert [h.startswith(" hidden") for h in heads] == [False] * 4 + [True] * 2
    assert "var PAGE = 4," in html


def test_index_rows_show_the_question_and_mark_answers_without_support(tmp_path: Path) -> None:
    """Each row shows its question (shortened; in full on hover); a right answer shown no gold evidence
    (lucky) or no evidence at all is marked apart from a supported one, and an invalid answer gives its
    reason (issue 48: the rows showed only item ids, and a closed-book guess read as a success)."""
    question = "Which of the brothers rides the horse called Dynamite into town on the morning of the rodeo?"
    rows = [(1, {"id": "q0", "film_id": "f", "question": question, "options": ["x", "y"], "answer": "A",
                 "evidence": [[10.0, 20.0]]})]
    bench = Benchmark("mcq", validate_rows(rows, "mcq", "t.jsonl"), "t.jsonl", "jsonl")
    shown = {"found": 12.0, "lucky": 500.0, "blind": None, "broken": None}

    def answer(film_id, query, policy, backbone):
        reply = backbone.chat([user(query.question)], max_tokens=4)
        at = shown[policy]
        return Answer(choice=None if policy == "broken" else "A", text="", confidence=None, invalid=policy == "broken",
                      error="the reply names no option" if policy == "broken" else None, policy=policy,
                      backbone=backbone.name, usage=reply.usage,
                      evidence=[] if at is None else [Evidence("utterance", film_id, at, at + 2, "line", id="utterance:1")])

    run = tmp_path / "run"
    run_bench(bench, list(shown), [ScriptedBackbone(["x"], cycle=True)], run, answerer=answer)
    html = write_inspector(run).read_text()
    row = html.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert f'<td title="{question}">Which of the brothers rides the horse called Dynamite into town on…</td>' in row
    cells = re.findall(r'<td class="(\w+)"[^>]*>(.*?)</td>', row)[2:]  # after the item and film cells
    by_policy = dict(zip(sorted(shown), cells, strict=True))  # configurations are listed sorted
    assert by_policy["found"] == ("ok", '✔ <span class="muted">found</span>')
    assert by_policy["lucky"] == ("luck", '✔ <span class="luck">lucky</span>')
    assert by_policy["blind"] == ("luck", '✔ <span class="luck">lucky, no evidence</span>')
    assert by_policy["broken"][0] == "inv" and "the reply names no option" in by_policy["broken"][1]
    item = (run / "inspector" / "items" / "1.html").read_text()
    assert "right (lucky, no evidence)" in item
