"""Narration from a film's memory: an audio-description track and Movie101v2 clip narration.

`describe` speaks only where the dialogue leaves room: it finds the gaps between utterances
that are at least `min_gap_s` long, asks the backbone for one line per gap (a long gap is cut
into pieces of at most `max_cue_s`), and holds each line to the words that fit the gap at
`words_per_s`. It narrates only what the memory shows for that stretch (captions, on-screen
text, stills when the backbone takes images): a gap the memory knows nothing about is left
silent and reported, never filled with a guess. `narrate` tells one time range as a
paragraph, the form Movie101v2 scores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pysubs2

from ..backbones import Backbone, Reply, Request, Usage, system, user
from ..backbones.base import send_all
from ..backbones.prompt import names_clause
from ..backbones.structured import Ask, ask_json
from ..foundation.errors import MovieMemError
from ..foundation.files import atomic_write_text
from ..foundation.progress import Reporter
from ..foundation.timefmt import hms
from ..memory.lines import Line, known_names, spread
from ..memory.view import FilmMemory
from .prompts import DESCRIBE_GAP, NARRATE_CLIP, SHORTEN

MIN_WORDS = 3  # a gap with room for fewer words is too short to describe anything


# ----------------------------------------------------------------------------- gaps


def dialogue_gaps(spans: Sequence[tuple[float, float]], duration: float, min_gap_s: float,
                  start: float = 0.0) -> list[tuple[float, float]]:
    """Stretches of [start, duration] with no dialogue that last at least min_gap_s (overlapping
    utterances are merged first)."""
    if min_gap_s <= 0:
        raise MovieMemError(f"the minimum gap must be positive, not {min_gap_s}")
    busy: list[list[float]] = []
    for a, b in sorted((max(start, a), min(duration, b)) for a, b in spans):
        if b <= a:
            continue
        if busy and a <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], b)
        else:
            busy.append([a, b])
    gaps, t = [], start
    for a, b in busy:
        if a - t >= min_gap_s:
            gaps.append((t, a))
        t = max(t, b)
    if duration - t >= min_gap_s:
        gaps.append((t, duration))
    return gaps


def slots(gaps: Sequence[tuple[float, float]], *, pad_s: float, max_cue_s: float) -> list[tuple[float, float]]:
    """Where cues may go: each gap less `pad_s` at both ends, long gaps cut into equal pieces
    of at most max_cue_s."""
    out = []
    for a, b in gaps:
        a, b = a + pad_s, b - pad_s
        if b <= a:
            continue
        n = max(1, math.ceil((b - a) / max_cue_s))
        step = (b - a) / n
        out += [(a + i * step, a + (i + 1) * step) for i in range(n)]
    return out


def word_budget(start: float, end: float, words_per_s: float) -> int:
    return int((end - start) * words_per_s + 1e-9)


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_DANGLING = {"a", "an", "the", "and", "or", "but", "with", "to", "of", "in", "on", "at", "for", "from", "as", "by",
             "his", "her", "their", "its", "while", "who", "that", "which"}


def fit_words(text: str, budget: int) -> tuple[str, bool]:
    """The text cut to at most `budget` words, at a sentence end when one fits; (text, trimmed)."""
    words = text.split()
    if len(words) <= budget:
        return " ".join(words), False
    head = " ".join(words[:budget])
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and len(head[: ends[-1]].split()) >= max(MIN_WORDS, budget // 2):
        return head[: ends[-1]], True
    kept = words[:budget]
    while len(kept) > 1 and kept[-1].lower().strip(",;:-") in _DANGLING:  # no line ends on "the"
        kept.pop()
    return " ".join(kept).rstrip(",;:-") + ".", True


# ----------------------------------------------------------------------------- what the memory holds


@dataclass
class _Memory:
    """The parts of a film's memory narration reads, with image paths."""

    duration: float
    lines: list[Line]
    captions: list[tuple[float, float, str]]
    onscreen: list[tuple[float, float, str]]
    stills: list[tuple[float, str]]
    names: list[str]

    @classmethod
    def of(cls, film: FilmMemory, caption_kinds: Sequence[str] | None = None) -> _Memory:
        utts = film.utterances()
        caps = [c for c in film.captions() if caption_kinds is None or c.kind in caption_kinds]
        lines = [Line(u.start, u.end, u.text, u.speaker) for u in utts]
        names = known_names(lines, [n for c in caps for n in c.characters])
        try:
            stills = [(f.t, f.image) for f in film.frames(strip=True)]
        except MovieMemError:
            stills = []
        return cls(film.duration_s, lines, [(c.start, c.end, c.text) for c in caps],
                   [(o.start, o.end, o.text) for o in film.onscreen()], stills, names)

    def shown(self, t0: float, t1: float) -> list[tuple[float, str]]:
        """Captions and on-screen text overlapping [t0, t1), in time order."""
        items = [(a, f"[{hms(a, short=True)}-{hms(b, short=True)}] {text}") for a, b, text in self.captions if b > t0 and a < t1]
        items += [(a, f"[{hms(a, short=True)}] on screen: \"{text}\"") for a, b, text in self.onscreen if b > t0 and a < t1]
        return sorted(items, key=lambda x: x[0])

    def said(self, t0: float, t1: float) -> list[tuple[float, str]]:
        return [(ln.start, f"[{hms(ln.start, short=True)}] {ln.speaker + ' says' if ln.speaker else 'someone says'}: {ln.text}")
                for ln in self.lines if ln.end > t0 and ln.start < t1]

    def stills_in(self, t0: float, t1: float, k: int) -> list[str]:
        return spread([p for t, p in self.stills if t0 <= t < t1], k)


def _reply_text(reply: Reply, json_reply: bool) -> str | None:
    if reply.invalid:
        return None
    if json_reply:
        data = reply.data if isinstance(reply.data, dict) else {}
        text = str(data.get("narration") or "")
    else:
        text = reply.text
    text = " ".join(text.replace('"', " ").split()).strip().lstrip(".…-– ").strip()
    return text if re.search(r"[^\W\d_]", text) else None  # at least one letter: "..." says nothing


def _backbone_label(backbone: Backbone) -> str:
    return getattr(backbone, "model_id", "") or getattr(backbone, "name", "")


# ----------------------------------------------------------------------------- describe


@dataclass
class Cue:
    start: float
    end: float
    text: str
    budget: int  # words that fit the cue at the speaking rate
    shortened: bool = False  # the first reply was too long and the backbone rewrote it shorter
    trimmed: bool = False  # still too long after that, so it was cut

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class Description:
    """An audio-description track and how it was made."""

    cues: list[Cue]
    gaps: int  # dialogue gaps of at least min_gap_s
    skipped: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, why) slots left silent
    invalid: list[tuple[float, float, str]] = field(default_factory=list)  # slots whose reply was unusable
    usage: Usage = field(default_factory=Usage)
    prompt_id: str = DESCRIBE_GAP.ref
    model: str = ""
    names: list[str] = field(default_factory=list)
    out: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out) if self.out else None, "prompt_id": self.prompt_id, "model": self.model,
                "names": self.names, "gaps": self.gaps,
                "cues": [dict(asdict(c), words=c.words) for c in self.cues],
                "skipped": [{"start": a, "end": b, "why": w} for a, b, w in self.skipped],
                "invalid": [{"start": a, "end": b, "why": w} for a, b, w in self.invalid],
                "usage": self.usage.to_dict()}


def describe(film: FilmMemory, backbone: Backbone, *, min_gap_s: float = 2.0, words_per_s: float = 2.5,
             pad_s: float = 0.25, max_cue_s: float = 10.0, max_images: int = 4, out: Path | str | None = None,
             reporter: Reporter | None = None) -> Description:
    """Audio description of `film` placed in its dialogue gaps; written as SRT (or WebVTT for a
    .vtt name) to `out` when given."""
    if words_per_s <= 0:
        raise MovieMemError(f"the speaking rate must be positive, not {words_per_s} words per second")
    if max_cue_s <= 0:
        raise MovieMemError(f"the longest cue must be positive, not {max_cue_s} s")
    mem = _Memory.of(film)
    gaps = dialogue_gaps([(ln.start, ln.end) for ln in mem.lines], mem.duration, min_gap_s, start=film.t0)
    caps = backbone.capabilities
    json_reply = bool(caps.json)
    result = Description([], len(gaps), model=_backbone_label(backbone), names=mem.names)
    todo: list[tuple[float, float, int]] = []
    requests: list[Request] = []
    for a, b in slots(gaps, pad_s=pad_s, max_cue_s=max_cue_s):
        budget = word_budget(a, b, words_per_s)
        if budget < MIN_WORDS:
            result.skipped.append((round(a, 3), round(b, 3), f"room for {budget} word(s) only"))
            continue
        shown = [text for _, text in mem.shown(a, b)]
        stills = mem.stills_in(a, b, max_images) if caps.images else []
        if not shown and not stills:
            result.skipped.append((round(a, 3), round(b, 3), "the memory holds nothing that shows this stretch"))
            continue
        before = [s for t, s in mem.said(0.0, a)][-1:]
        text: str | None
        text = DESCRIBE_GAP.render(
            t0=hms(a, short=True), t1=hms(b, short=True), words=budget, names=names_clause(mem.names),
            frames=f" The {len(stills)} attached stills are from this stretch." if stills else "",
            context="\n".join(shown) if shown else "(only the stills)",
            before=f"\nLast line spoken before it: {before[0]}" if before else "")
        requests.append(Request.build([system(DESCRIBE_GAP.system), user(text, images=stills)],
                                      json_schema=DESCRIBE_GAP.schema if json_reply else None,
                                      max_tokens=min(512, 48 + 4 * budget)))
        todo.append((a, b, budget))
    if reporter is not None:
        reporter.start("describe", len(requests))
    usage: list[Usage] = []

    def progress(done: int, reply: Reply) -> None:
        usage.append(reply.usage if not reply.cached else Usage())
        if reporter is not None:
            total = sum(usage, Usage())
            cost = f"${total.cost_usd:.4f}" if total.cost_usd is not None else "cost n/a"
            reporter.update(done, len(requests), postfix=f"{total.input_tokens} in / {total.output_tokens} out tok, {cost}")

    replies = send_all(backbone, requests, on_reply=progress) if requests else []
    lines: list[tuple[float, float, int, str]] = []
    for (a, b, budget), reply in zip(todo, replies):
        text = _reply_text(reply, json_reply)
        if text is None:
            result.invalid.append((round(a, 3), round(b, 3), reply.error or "no words in the narration"))
        else:
            lines.append((a, b, budget, text))
    # a line longer than its gap is sent back once to be rewritten shorter; only what still
    # does not fit is cut, so most lines end as whole sentences
    long = [i for i, (_, _, budget, text) in enumerate(lines) if len(text.split()) > budget]
    shorter = send_all(backbone, [Request.build(
        [system(SHORTEN.system), user(SHORTEN.render(have=len(lines[i][3].split()), words=lines[i][2], line=lines[i][3]))],
        json_schema=SHORTEN.schema if json_reply else None, max_tokens=min(512, 48 + 4 * lines[i][2]))
        for i in long]) if long else []
    rewritten = {}
    for i, reply in zip(long, shorter):
        usage.append(reply.usage if not reply.cached else Usage())
        text = _reply_text(reply, json_reply)
        if text is not None:
            rewritten[i] = text
    result.usage = sum(usage, Usage())
    for i, (a, b, budget, text) in enumerate(lines):
        fitted, trimmed = fit_words(rewritten.get(i, text), budget)
        result.cues.append(Cue(round(a, 3), round(b, 3), fitted, budget, i in rewritten, trimmed))
    if not result.cues and result.invalid:  # an empty track is no result: say why instead of writing it
        a, b, why = result.invalid[0]
        raise MovieMemError(f"no narration written: all {len(result.invalid)} replies were unusable "
                            f"(first, {a:.1f}-{b:.1f} s: {why})")
    if out is not None:
        result.out = write_track(result.cues, Path(out))
    if reporter is not None:
        reporter.finish("describe", "done", f"{len(result.cues)} cues in {result.gaps} dialogue gaps"
                        + (f", {len(result.invalid)} invalid replies" if result.invalid else "")
                        + (f", {len(result.skipped)} stretches left silent" if result.skipped else ""))
    return result


def write_track(cues: Sequence[Cue], out: Path) -> Path:
    """SRT (or WebVTT for .vtt) through pysubs2, written to a temporary file and renamed, so a
    crash never leaves half a track under the final name."""
    fmt = "vtt" if out.suffix.lower() == ".vtt" else "srt"
    subs = pysubs2.SSAFile()
    for c in cues:
        subs.append(pysubs2.SSAEvent(start=round(c.start * 1000), end=round(c.end * 1000), text=c.text))
    out = out.expanduser()
    if not out.parent.is_dir():
        raise MovieMemError(f"cannot write {out}: no folder {out.parent}")
    return atomic_write_text(out, subs.to_string(fmt))  # a track the user asked for: readable like any file they write


# ----------------------------------------------------------------------------- narrate


@dataclass
class Narration:
    """A Movie101v2-style narration of [start, end)."""

    start: float
    end: float
    text: str
    characters: list[str]
    prompt_id: str
    model: str
    usage: Usage
    invalid: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = self.usage.to_dict()
        return d


def narrate(film: FilmMemory, backbone: Backbone, start: float, end: float, *, max_images: int = 8,
            caption_kinds: Sequence[str] | None = None) -> Narration:
    """One paragraph narrating [start, end) from the memory: captions, on-screen text and what is
    said, plus stills when the backbone takes images. `caption_kinds` restricts the captions used
    (e.g. ("frame", "clip") to keep a reference narration imported as captions out of the context)."""
    duration = film.duration_s
    if not (0 <= start < end):
        raise MovieMemError(f"a narration needs 0 <= start < end, not {start:g}-{end:g}")
    if start >= duration:
        raise MovieMemError(f"start {start:g} s is past the end of the film ({duration:g} s)")
    end = min(end, duration)
    mem = _Memory.of(film, caption_kinds)
    context = [text for _, text in sorted(mem.shown(start, end) + mem.said(start, end), key=lambda x: x[0])]
    caps = backbone.capabilities
    stills = mem.stills_in(start, end, max_images) if caps.images else []
    if not context and not stills:
        raise MovieMemError(f"the memory holds nothing between {hms(start, short=True)} and {hms(end, short=True)} to narrate from")
    json_reply = bool(caps.json)
    text = NARRATE_CLIP.render(t0=hms(start, short=True), t1=hms(end, short=True), names=names_clause(mem.names),
                               frames=f" The {len(stills)} attached stills are from this stretch, in order." if stills else "",
                               context="\n".join(context) if context else "(only the stills)")
    messages = [system(NARRATE_CLIP.system), user(text, images=stills)]
    error: str | None
    if json_reply:  # a schema miss is asked again with its reason, as every structured call is
        ans = ask_json(backbone, [Ask("narration", messages)], NARRATE_CLIP.schema,  # type: ignore[arg-type]  # NARRATE_CLIP declares a schema
                       max_tokens=400,
                       check=lambda data: None if _reply_text(Reply(data=data), True) else "no words in the narration")[0]
        body, usage, error = (_reply_text(Reply(data=ans.data), True) if ans.ok else None), ans.usage, "; ".join(ans.errors)
        data = ans.data if isinstance(ans.data, dict) else {}
    else:
        reply = send_all(backbone, [Request.build(messages, max_tokens=400)])[0]
        body, usage, error, data = _reply_text(reply, False), reply.usage, reply.error, {}
    chars = list(dict.fromkeys(str(c).strip() for c in data.get("characters") or [] if str(c).strip()))
    return Narration(round(start, 3), round(end, 3), body or "", chars, NARRATE_CLIP.ref, _backbone_label(backbone),
                     usage, invalid=body is None,
                     error=None if body is not None else (error or "no words in the narration"))
