"""Position bias in multiple choice: every item asked once per rotation of its options.

`rotated` turns a benchmark into one whose items are `ID@rK` (options shifted K places, the answer
letter moved with them), so the ordinary runner asks, resumes and scores them. `position_bias`
reads the records back: per configuration, the share of items answered with the same option
text under every rotation (consistency) and how often each letter was chosen."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import cast

from ..foundation.errors import MovieMemError
from .formats import LETTERS, MCQ, Benchmark, Item
from .outputs import PositionBiasRow
from .records import BenchmarkMeta, Grid

SEP = "@r"


def rotated(bench: Benchmark) -> Benchmark:
    """Each MCQ item once per rotation of its options (n options: n items)."""
    if bench.format != "mcq":
        raise MovieMemError(f"--permute applies to multiple choice (mcq) benchmarks, not {bench.format}")
    items: list[Item] = []
    for it in bench.items:
        assert isinstance(it, MCQ)
        n = len(it.options)
        right = LETTERS.index(it.answer)
        for k in range(n):
            options = it.options[k:] + it.options[:k]
            items.append(it.model_copy(update={"id": f"{it.id}{SEP}{k}", "options": options,
                                               "answer": LETTERS[(right - k) % n]}))
    meta: BenchmarkMeta = {**bench.meta, "permuted": True}
    return Benchmark(bench.format, items, bench.path, bench.source, meta)


def position_bias(items: list[Item], grid: Grid) -> list[PositionBiasRow]:
    """Per (policy, backbone): items with every rotation answered, consistency across rotations
    and the chosen-letter distribution (share of valid answers per letter)."""
    by_id = cast("dict[str, MCQ]", {it.id: it for it in items if SEP in it.id})  # rotated() makes MCQ items only
    rows: list[PositionBiasRow] = []
    for policy, backbone in sorted(grid):  # a configuration's records read when its turn comes (lean_log.py)
        chosen: dict[str, dict[str, str | None]] = defaultdict(dict)
        letters: Counter[str] = Counter()
        for r in grid[(policy, backbone)]:
            item = by_id.get(r.item_id)
            if item is None:
                continue
            answer = r.answers.get("answer")
            letter = answer.choice if answer and r.status == "answered" else None
            base = r.item_id.rsplit(SEP, 1)[0]
            if letter is not None and letter in LETTERS[: len(item.options)]:
                chosen[base][r.item_id] = item.options[LETTERS.index(letter)]
                letters[letter] += 1
            else:
                chosen[base][r.item_id] = None
        full = {b: picks for b, picks in chosen.items() if len(picks) == len(by_id[next(iter(picks))].options)}
        same = sum(1 for picks in full.values() if None not in picks.values() and len(set(picks.values())) == 1)
        total = sum(letters.values())
        rows.append({"policy": policy, "backbone": backbone, "items": len(full),
                     "consistency": same / len(full) if full else None,
                     "letters": {k: letters[k] / total for k in sorted(letters)} if total else {}})
    return rows
