"""The film overview: every scene's summary within a token budget, for policies to read before
they search (a table of contents, the way an agent browses a film globally first)."""

from __future__ import annotations

from .schema import EventRow, SceneRow

CHARS_PER_TOKEN = 4  # the same rough rate as words.estimate_tokens


def _hms(t: float) -> str:
    t = int(t)
    return f"{t // 3600}:{t % 3600 // 60:02d}:{t % 60:02d}"


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: max(1, n - 1)].rstrip() + "…"


def overlapping(scenes: list[SceneRow], start: float | None, end: float | None) -> list[SceneRow]:
    """The scenes that overlap [start, end); either bound may be None (the film's beginning or end)."""
    return [s for s in scenes if (start is None or s.end > start) and (end is None or s.start < end)]


def story_places(scenes: list[SceneRow], events: list[EventRow]) -> dict[int, int]:
    """Each scene's place in the story (1 = first), from the event graph's story order: a scene goes
    where its earliest event in story time goes, so a flashback's scene comes before the scenes it
    interrupts. An event belongs to the scene holding its midpoint; a scene with no ordered event
    keeps the place after the scene before it. Without story order every scene keeps its screen place."""
    scenes = sorted(scenes, key=lambda s: s.scene_idx)
    earliest: dict[int, float] = {}
    for e in events:
        if e.story_order < 0:
            continue
        mid = (e.start + e.end) / 2
        holder = next((s.scene_idx for s in scenes if s.start <= mid < s.end), None)
        if holder is not None:
            earliest[holder] = min(earliest.get(holder, float("inf")), e.story_order)
    key, last = {}, -1.0
    for s in scenes:
        last = earliest.get(s.scene_idx, last)
        key[s.scene_idx] = last
    ranked = sorted(scenes, key=lambda s: (key[s.scene_idx], s.scene_idx))
    return {s.scene_idx: i + 1 for i, s in enumerate(ranked)}


def overview(scenes: list[SceneRow], budget_tokens: int = 1500) -> str:
    """One line a scene. When the summaries do not fit, each is shortened by the same amount so
    the whole film stays covered rather than only its beginning."""
    scenes = sorted(scenes, key=lambda s: s.scene_idx)
    budget = budget_tokens * CHARS_PER_TOKEN

    def render(limit: int) -> str:
        return "\n".join(f"scene {s.scene_idx + 1} [{_hms(s.start)}-{_hms(s.end)}] {_short(s.summary, limit)}"
                         for s in scenes)

    text = render(100_000)
    if len(text) <= budget or not scenes:
        return text
    limit = max(8, (budget - len(render(0))) // len(scenes))
    text = render(limit)
    while len(text) > budget and limit > 8:
        limit -= 4
        text = render(limit)
    return text if len(text) <= budget else text[:budget].rsplit("\n", 1)[0]
