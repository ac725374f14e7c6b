"""A stage not asked to run keeps its finished result (issue 18, item 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moviemem import Library, MovieMemError


def test_plain_reingest_keeps_events_and_dropping_them_needs_replace(tmp_path: Path) -> None:
    from conftest import truth_srt
    from events_rows import add_truth_events

    from moviemem.synth import documents, plan

    docs = documents(plan(3.0, 7), "synth")
    truth = json.loads(docs["truth.json"])
    srt = truth_srt(truth, tmp_path / "subtitles.srt")
    lib = Library(tmp_path / "lib")
    lib.ingest_text(srt, film_id="synth")
    add_truth_events(lib, "synth", truth)  # as `--backbone local` would have built them
    n = len(lib.film("synth").events())
    assert n > 0

    film = lib.ingest_text(srt, film_id="synth")  # a plain rerun: no backbone, events not asked for
    assert len(film.events()) == n
    assert {s.stage: s.status for s in film.stages()}["events"] == "done"
    with pytest.raises(MovieMemError, match=r"would be skipped .* drop its \d+ finished row\(s\).*--replace"):
        lib.ingest_text(srt, film_id="synth", stages=["events"])
    assert len(lib.film("synth").events()) == n
    assert lib.ingest_text(srt, film_id="synth", stages=["events"], replace=True).events() == []
