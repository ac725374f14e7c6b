"""Answers, evidence, films and runs that show themselves in a notebook, and docs/study.ipynb run end to end (issue 57)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moviemem.agents.display import EvidenceList
from moviemem.agents.types import Answer
from moviemem.backbones.types import Usage
from moviemem.retrievers.base import Evidence

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "study.ipynb"
PAYLOAD = "<script>alert(1)</script>"


def test_an_answer_shows_its_choice_grounding_evidence_with_stills_and_usage(tmp_path: Path) -> None:
    from PIL import Image

    frame = tmp_path / "f.jpg"
    Image.new("RGB", (320, 180), (10, 200, 30)).save(frame)
    ev = [Evidence("utterance", "f", 61.5, 64.0, f"She says {PAYLOAD}", id="utterance:1", cited=True),
          Evidence("frame", "f", 62.0, 62.0, "", frame=str(frame), id="frame:3")]
    ans = Answer(choice="B", text=f"the cellar {PAYLOAD}", confidence=0.8, invalid=False, policy="hybrid",
                 backbone="local", evidence=ev, usage=Usage(input_tokens=1234, output_tokens=9, latency_s=1.5), calls=2)
    page = ans._repr_html_()
    assert "<b>B</b>" in page and "grounded" in page and "not grounded" not in page
    assert "0:01:01.5–0:01:04.0" in page and "cited" in page and "data:image/jpeg;base64," in page
    assert "2 model calls" in page and "1,234 input / 9 output tokens" in page
    assert "<script>" not in page and page.count("&lt;script&gt;") == 2  # the reply and the subtitle are data
    assert isinstance(ans.evidence, EvidenceList) and ans.evidence._repr_html_().count("<tr>") == 3
    guess = Answer(choice="A", text="x", confidence=None, invalid=False, policy="closed-book", backbone="b", grounded=False)
    assert "not grounded" in guess._repr_html_() and "No evidence from the film was shown" in guess._repr_html_()
    bad = Answer(choice=None, text="", confidence=None, invalid=True, policy="p", backbone="b", error=f"unreadable {PAYLOAD}")
    assert "invalid" in bad._repr_html_() and "<script>" not in bad._repr_html_()


def test_a_film_shows_its_overview(tmp_path: Path) -> None:
    from text_film import text_film_library

    lib = text_film_library(tmp_path, [(1.0, 3.0, "Hello there."), (5.0, 8.0, f"A line with {PAYLOAD}")], "f", f"T {PAYLOAD}")
    page = lib.film("f")._repr_html_()
    assert "T &lt;script&gt;" in page and "<script>" not in page and "<code>f</code>" in page
    assert "2 utterances" in page and "text only" in page and "transcript" in page


def _kernel() -> bool:
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_notebook_is_kept_without_outputs() -> None:
    import json

    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


@pytest.mark.skipif(not _kernel(), reason="nbclient and ipykernel are not installed (the dev extra)")
def test_the_study_notebook_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    root = str(Path(__file__).resolve().parents[2])  # the kernel imports this moviemem, as the tests do
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ.get("PYTHONPATH", ""), root]).strip(os.pathsep))
    monkeypatch.setenv("MOVIEMEM_LIBRARY", str(tmp_path / "unused"))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    html = {i: "".join(o.get("data", {}).get("text/html", "") for o in c.get("outputs", []))
            for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    film, answer, evidence, _, summary, comparison = (html[i] for i in sorted(html))
    assert "The Keys" in film and "5 utterances" in film
    assert "<b>A</b> the attic" in answer and "grounded" in answer and "Anna hid the key in the attic." in answer
    assert "Anna hid the key" in evidence
    assert "closed-book" in summary and "subtitles" in summary and "100.0 <span" in summary  # with its interval
    assert "<td>all</td><td>3</td><td>1</td><td>3</td><td>0</td><td>2</td>" in comparison  # B (subtitles) alone right on 2
