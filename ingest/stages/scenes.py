"""The scenes stage: scenes from shot-grouped segments on a film with video, and from pauses in the
dialogue on a text-only film (graph/scenes.py), each with a summary and its characters. The events
stage's rules mode (event_rules.py) reads the same lines (`memory_lines`) into the stored scenes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...characters.names import bare
from ...graph.scene_summaries import SUMMARY, cost_note, write_summaries
from ...graph.scenes import RegistryCast, Scene, TextLine, build_scenes
from ...memory.schema import SceneRow, SegmentRow
from ..stage import Ctx, Outcome, Stage, chosen_backbone, chosen_backbone_label, load_chosen_backbone

SCENE_PARAMS = {"min_s": 45.0, "max_s": 240.0, "pause_s": 12.0, "central_k": 3,
                "cuts": "pauses; shorter ones where the people named change or a place is named; scenes tiled",
                "summary": "names, places, things, telling lines",
                "characters": "registry in dialogue; in descriptions names never written in lower case, "
                              "unquoted, not roles, not places"}


def memory_lines(ctx: Ctx) -> list[TextLine]:
    """Captions, dialogue and on-screen text of the upstream runs, each with its row reference."""
    lines = [TextLine(c.start, c.end, "caption", c.text, f"captions:{c.idx}", "", tuple(c.characters))
             for c in ctx.rows("captions", vectors=False)]
    lines += [TextLine(u.start, u.end, "dialogue", u.text, f"utterances:{u.idx}", u.speaker)
              for u in ctx.rows("utterances", vectors=False)]
    lines += [TextLine(o.start, o.end, "onscreen", o.text, f"onscreen:{o.idx}") for o in ctx.rows("onscreen", vectors=False)]
    return sorted((ln for ln in lines if ln.text.strip()), key=lambda ln: (ln.start, ln.end, ln.kind, ln.ref))


def registry_cast(ctx: Ctx) -> RegistryCast | None:
    """The characters stage's named characters and who speaks each line; None without a registry."""
    named = {c.names[0]: tuple(c.names) for c in ctx.rows("characters") if c.names}
    if not named:
        return None
    # a line may say "Hollis" for "Mr. Hollis": the bare name is his too, unless two characters share it
    bare_of = Counter(b for names in named.values() for b in {bare(n) for n in names})
    named = {c: tuple(dict.fromkeys([*names, *(bare(n) for n in names if bare_of[bare(n)] == 1)]))
             for c, names in named.items()}
    speakers: dict[str, list[str]] = {}
    for s in ctx.rows("speaker_lines"):
        if s.speaker_name in named:
            speakers.setdefault(f"utterances:{s.utt_idx}", []).append(s.speaker_name)
    return RegistryCast(named, {ref: tuple(dict.fromkeys(names)) for ref, names in speakers.items()})


def picture_scenes(ctx: Ctx, scenes: list[Scene], segments: list[SegmentRow]) -> list[Scene]:
    """Scenes of the shot groups no text falls in (a film without dialogue, or a silent stretch):
    what the pictures give, the shots and who is on screen (face identities, by their registry name)."""
    told = {(round(sc.start, 3), round(sc.end, 3)) for sc in scenes}
    faces = ctx.rows("faces", vectors=False)
    who = {c.face: c.name for c in ctx.rows("characters", vectors=False) if c.face >= 0}
    out = list(scenes)
    for seg in segments:
        if (round(seg.start, 3), round(seg.end, 3)) in told:
            continue
        here = [f for f in faces if seg.start <= f.t < seg.end]
        seen = Counter(who.get(f.cluster, f"face {f.cluster + 1}") for f in here if f.cluster >= 0)
        names = [n for n, _ in seen.most_common()]
        unknown = sum(f.cluster < 0 for f in here)  # seen once or too unlike the others to be an identity
        parts = ([f"on screen: {', '.join(names[:6])}"] if names else []) + (
            [f"{unknown} face{'s' if unknown != 1 else ''} of no identity"] if unknown else [])
        shots = seg.last_shot - seg.first_shot + 1
        out.append(Scene(-1, seg.start, seg.end, [], names, summary=f"{shots} shot{'s' if shots != 1 else ''}, "
                         f"no words; {'; '.join(parts) or 'no face seen'}."))
    out.sort(key=lambda sc: (sc.start, sc.end))
    for i, sc in enumerate(out):
        sc.idx = i
    return out


class ScenesStage(Stage):
    """Scenes with an extractive summary, or one a model writes when a text backbone is chosen (kept by
    a later plain ingest, as a model's event graph is). A film with shots has a scene for every shot
    group: one no text falls in is told by its pictures (picture_scenes); a film with neither text
    nor shots has none."""

    name = "scenes"
    needs = ("probe", "segments", "transcript", "ocr", "captions", "faces", "characters")
    version = 5  # 5: scenes tiled, cut where the people named change or a place is named; summaries say places and things
    attempts = 3

    def _shot_groups(self, ctx: Ctx) -> list[SegmentRow]:
        segs = sorted(ctx.rows("segments"), key=lambda s: s.seg_idx)
        return segs if any(s.first_shot >= 0 for s in segs) else []

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = {"from": "segments" if ctx.inputs.film.has_video else "pauses", **SCENE_PARAMS}
        spec = chosen_backbone_label(ctx)
        if spec is None:
            return {**p, "summaries": "extractive"}
        return {**p, "summaries": "model", "backbone": spec, "prompts": [SUMMARY.ref], "attempts": self.attempts}

    def skip_reason(self, ctx: Ctx) -> str | None:
        """A plain ingest keeps summaries a model wrote (as the events stage keeps a model's graph),
        unless `--stages scenes --replace` asks for extractive ones again."""
        if not any(ctx.has_rows(t) for t in ("captions", "utterances", "onscreen")) and not self._shot_groups(ctx):
            return "no captions, utterances or on-screen text to read scenes from, and no shots"
        made = self.finished_params(ctx, with_rows=True) or {}
        if chosen_backbone(ctx) is None and not ctx.replace and made.get("summaries") == "model":
            return ("no text backbone chosen, and the film's scene summaries were written by a model: pass "
                    "--backbone SPEC to write them again, or --stages scenes --replace for extractive ones")
        return None

    def run(self, ctx: Ctx) -> Outcome:
        p = self.params(ctx)
        segments = None
        if p["from"] == "segments":
            segments = [(s.start, s.end) for s in sorted(ctx.rows("segments"), key=lambda s: s.seg_idx)]
        cast = registry_cast(ctx)
        scenes = build_scenes(memory_lines(ctx), segments, central_k=p["central_k"], min_s=p["min_s"],
                              max_s=p["max_s"], pause_s=p["pause_s"], cast=cast)
        shot_groups = self._shot_groups(ctx)
        told = len(scenes)
        scenes = picture_scenes(ctx, scenes, shot_groups) if shot_groups else scenes
        hows, model, by_model = ["extractive" if sc.lines else "pictures" for sc in scenes], "", ""
        textual = [i for i, sc in enumerate(scenes) if sc.lines]  # a model reads words; pictures stay as told
        if p["summaries"] == "model" and textual:
            backbone = load_chosen_backbone(ctx)
            written, used = write_summaries(backbone, [scenes[i] for i in textual], title=ctx.inputs.film.title,
                                      attempts=self.attempts, progress=ctx.progress)
            for i, text in zip(textual, written):
                if text is not None:
                    scenes[i].summary, hows[i] = text, backbone.model_id
            model, failed = backbone.model_id, written.count(None)
            by_model = f"; summaries by model {model} ({cost_note(used, len(textual))})" + (
                f", {failed} kept extractive (no usable reply in {self.attempts} attempts)" if failed else "")
        ctx.write([SceneRow(film_id=ctx.film_id, scene_idx=s.idx, start=round(s.start, 3), end=round(s.end, 3),
                            summary=s.summary, characters=s.names[:12], lines=[ln.ref for ln in s.central],
                            n_lines=len(s.lines), how=how) for s, how in zip(scenes, hows)])
        cut = "shot-grouped segments" if segments is not None else "pauses in the dialogue"
        who = f"characters from the registry ({len(cast.names)} named)" if cast else "no character registry: names from the lines"
        pictures = f" ({len(scenes) - told} with no words, told by their shots and faces)" if len(scenes) > told else ""
        return Outcome(model=model, note=f"{len(scenes)} scenes from {cut}{pictures}; {who}{by_model}")
