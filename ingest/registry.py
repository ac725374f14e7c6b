"""Ingest stages by name: the built-ins as dotted paths, plug-ins from the entry-point group
`moviemem.stages` (a Stage subclass, or a factory returning a Stage).

The run order is not kept by hand: stages run in the order of their `needs` (a stage after
every stage it reads), ties broken by the order of registration, so a plug-in stage lands
after what it reads without naming a neighbour."""

from __future__ import annotations

from ..foundation.errors import MovieMemError
from ..foundation.plugins import Registry
from .stage import Stage

STAGES: Registry[type[Stage]] = Registry("stage", "moviemem.stages")

for _name, _target in [
    ("probe", "moviemem.ingest.stages.probe:ProbeStage"),
    ("frames", "moviemem.ingest.stages.frames:FramesStage"),
    ("shots", "moviemem.ingest.stages.shots:ShotsStage"),
    ("segments", "moviemem.ingest.stages.segments:SegmentsStage"),
    ("transcript", "moviemem.ingest.stages.transcript:TranscriptStage"),
    ("speakers", "moviemem.ingest.stages.speakers:SpeakersStage"),
    ("clip", "moviemem.ingest.stages.clip:ClipStage"),
    ("ocr", "moviemem.ingest.stages.ocr:OcrStage"),
    ("faces", "moviemem.ingest.stages.faces:FacesStage"),
    ("captions", "moviemem.ingest.stages.captions:CaptionsStage"),
    ("characters", "moviemem.ingest.stages.characters:CharactersStage"),
    ("passages", "moviemem.ingest.stages.passages:PassagesStage"),
    ("scenes", "moviemem.ingest.stages.scenes:ScenesStage"),
    ("events", "moviemem.ingest.stages.events:EventsStage"),
]:
    STAGES.add(_name, _target)

_instances: dict[str, Stage] = {}


def stage(name: str) -> Stage:
    """The stage registered as `name` (one instance per process)."""
    if name not in _instances or type(_instances[name]) is not STAGES.get(name):
        made = STAGES.get(name)()
        if not isinstance(made, Stage) or made.name != name:
            raise MovieMemError(f"stage plug-in {name!r} made {made!r}, not a Stage named {name!r}")
        _instances[name] = made
    return _instances[name]


def ordered_stages() -> list[Stage]:
    """Every registered stage that loads, each after the stages it needs."""
    names = [n for n in STAGES.names() if n not in STAGES.failures]
    loaded: dict[str, Stage] = {}
    for n in names:
        try:
            loaded[n] = stage(n)
        except MovieMemError:
            continue  # recorded in STAGES.failures; `moviemem stages` shows it
    out: list[Stage] = []
    placed: set[str] = set()
    while len(out) < len(loaded):
        ready = [s for n, s in loaded.items() if n not in placed and all(d in placed or d not in loaded for d in s.needs)]
        if not ready:
            stuck = sorted(set(loaded) - placed)
            raise MovieMemError(f"stages {', '.join(stuck)} need each other; no order runs them")
        out.append(ready[0])
        placed.add(ready[0].name)
    return out
