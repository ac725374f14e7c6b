"""Test helper: commit the synthetic film's true events and relations as a finished `events`
stage run of a writable library copy (the same protocol an ingest stage follows)."""

from __future__ import annotations

from moviemem.memory.schema import EventRow, RelationRow, owned_tables
from moviemem.memory.store import params_hash
from moviemem.models.embedder import get_embedder


def add_truth_events(lib, film_id: str, truth: dict) -> None:
    store = lib.store
    params = {"source": "truth", "embedder": lib.settings.embedder}
    run_id = store.begin_run(film_id, "events", params, params_hash(params))
    events = truth["events"]
    vecs = get_embedder(lib.settings.embedder, lib.settings).embed([e["description"] for e in events])
    rows = [EventRow(film_id=film_id, run_id=run_id, event_id=e["id"], trigger=e["key"], description=e["description"],
                     start=e["start"], end=e["end"], story_order=e["story_order"], vector=v.tolist())
            for e, v in zip(events, vecs)]
    rels = [RelationRow(film_id=film_id, run_id=run_id, src=r["src"], dst=r["dst"], type=r["type"], confidence=0.9)
            for r in truth["relations"]]
    store.append(rows)
    store.append(rels)
    store.finish_run(film_id, "events", run_id, owned_tables("events"), rows=len(rows) + len(rels))
