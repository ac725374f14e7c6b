"""A run's records for its report, read once and held packed (issue 62: `report` took 1.0 GB on a 200 MB log).

A `lean` record (log.lean: no evidence spans, only parse steps of the trace) is still about 10 kB as Python objects,
so holding every record of a large log, as the report and its summary did, took several times the log's size. Here
each record is read a line at a time, made lean and kept as its JSON bytes (about a kilobyte); a configuration's
records become objects again only while a table is made of them (`PackedGrid`), so at most one or two
configurations' records are objects at once. The values are those `log_grid(slim=True)` and `scored_log(slim=True)`
give, so the report's tables are the same to the byte.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .formats import Item
from .log import iter_log, lean, run_items
from .records import Config, Grid, ResultRecord


class PackedGrid(Mapping[Config, list[ResultRecord]]):
    """Each configuration's records (in item order) kept as JSON bytes and parsed again on each access: a `Grid` to
    its readers, holding a kilobyte or so a record rather than ten."""

    def __init__(self, lines: Mapping[Config, list[bytes]], keys: frozenset[Config]):
        self._lines = lines
        self._keys = sorted(keys)

    def __getitem__(self, key: Config) -> list[ResultRecord]:
        if key not in self._keys:
            raise KeyError(key)
        return [ResultRecord.model_validate_json(b) for b in self._lines.get(key, [])]

    def __iter__(self) -> Iterator[Config]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys


@dataclass(frozen=True)
class LeanLog:
    """A run's items and its records read once: `fitted` as `log_grid(slim=True)` gives them (the prompts too long
    for the context left out), `scored` and `unfit` as `scored_log(slim=True)` does (every configuration a key,
    even one whose every prompt was too long; the count of those prompts per configuration)."""

    items: list[Item]
    fitted: Grid
    scored: Grid
    unfit: dict[Config, int]


def read_lean(run_dir: str | Path, items: list[Item] | None = None) -> LeanLog:
    """The log read a line at a time, each record kept lean and packed (`PackedGrid`); `items`: the run's, when
    the caller has read them (run.RunLog)."""
    items = run_items(run_dir) if items is None else items
    order = {it.id: i for i, it in enumerate(items)}
    kept: dict[Config, dict[str, tuple[int, bytes]]] = {}
    any_record: set[Config] = set()  # scored_log's keys: a configuration with any record that is not transient
    any_fit: set[Config] = set()  # log_grid's keys: one with a record whose prompt fitted
    unfit: dict[Config, int] = {}
    for r in iter_log(run_dir):
        if r.status == "transient":
            continue  # no answer to score: the configuration shows as incomplete until a rerun asks again
        any_record.add(r.config)
        if r.status != "unfit":
            any_fit.add(r.config)
        if r.item_id not in order:
            continue
        if r.status == "unfit":
            unfit[r.config] = unfit.get(r.config, 0) + 1
            continue
        kept.setdefault(r.config, {})[r.item_id] = (order[r.item_id], lean(r).model_dump_json(exclude_unset=True).encode())
    lines = {k: [b for _, b in sorted(v.values())] for k, v in kept.items()}
    del kept
    return LeanLog(items, PackedGrid(lines, frozenset(any_fit)), PackedGrid(lines, frozenset(any_record)),
                   {k: unfit.get(k, 0) for k in any_record})
