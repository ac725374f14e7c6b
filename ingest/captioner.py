"""Generated captions: frame captions per minute of 0.5 fps stills, clip captions per segment.

Frame captions see only pixels (at most 30 stills a request, no sound). Clip captions see a
segment's video with its sound when the backbone takes video, else its stills plus what is
said in it. Every request goes through the replay cache, which is what makes the stage
resumable: after a kill, finished windows replay from the cache at no cost and only the rest
are sent. A reply the model got wrong is recorded and counted; it never stops the stage. A
request that failed for a transient reason (network, rate limit) fails the stage once every
other window is done, so a rerun retries just those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..backbones import Backbone, Clip, Reply, Request, Usage, system, user
from ..backbones.base import send_all
from ..backbones.prompt import Prompt, names_clause
from ..foundation.errors import MovieMemError
from ..foundation.progress import Reporter
from ..foundation.timefmt import hms
from ..memory.lines import Line, known_names, spread
from .prompts import CLIP_FRAMES, CLIP_VIDEO, FRAME

FRAME_WINDOW_S = 60.0  # one frame-caption request per minute of film
MAX_IMAGES = 30  # stills per request (a minute of the 0.5 fps strip)
CAPTION_MAX_TOKENS = 400


def check_captioner(backbone: Backbone) -> None:
    """A captioner must see pixels: a text-only model would only paraphrase the dialogue and
    its 'captions' would pass for visual evidence. Refuse it, with what to do instead."""
    caps = backbone.capabilities
    if not (caps.images or caps.video):
        raise MovieMemError(
            f"captioner {backbone.name} takes neither images nor video, so it cannot caption a film; use a vision "
            "backbone (gemini:..., openai:..., openai-compatible:URL#vl-model) or import captions with --captions FILE"
        )


# ----------------------------------------------------------------------------- requests in parallel


@dataclass
class Tally:
    """Running totals shown on the progress bar and in the stage note: the requests, and what the ones
    sent (not replayed) consumed, summed as `Usage` sums (its cost None until a call is priced)."""

    requests: int = 0
    cached: int = 0
    invalid: int = 0
    usage: Usage = field(default_factory=Usage)

    def add(self, reply: Reply) -> None:
        self.requests += 1
        self.invalid += reply.invalid
        if reply.cached:  # a replay costs nothing
            self.cached += 1
            return
        self.usage += reply.usage

    def record(self) -> dict[str, object]:
        """The totals as the stage's record keeps them (the flat keys written before `usage` was one `Usage`)."""
        spent = self.usage
        return {"requests": self.requests, "cached": self.cached, "invalid": self.invalid,
                "input_tokens": spent.input_tokens, "output_tokens": spent.output_tokens,
                "cost_usd": spent.cost_usd if spent.cost_usd is not None else 0.0, "priced": spent.cost_usd is not None}

    def postfix(self) -> str:
        spent = self.usage
        cost = f"${spent.cost_usd:.4f}" if spent.cost_usd is not None else "cost n/a"
        text = f"{_k(spent.input_tokens)} in / {_k(spent.output_tokens)} out tok, {cost}"
        if self.cached:
            text += f", {self.cached} cached"
        if self.invalid:
            text += f", {self.invalid} invalid"
        return text


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


# ----------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class Still:
    t: float
    path: Path


@dataclass
class Window:
    kind: str  # frame | clip
    start: float
    end: float
    prompt: Prompt
    request: Request

    @property
    def label(self) -> str:
        return f"{self.kind} {hms(self.start, short=True)}-{hms(self.end, short=True)}"


def dialogue(lines: Iterable[Line], t0: float, t1: float) -> str:
    """What is said in [t0, t1), one timestamped line each."""
    said = [f"[{hms(ln.start, short=True)}] {ln.speaker + ': ' if ln.speaker else ''}{ln.text}"
            for ln in lines if ln.end > t0 and ln.start < t1]
    return "\n".join(said)





def _step(stills: Sequence[Still]) -> float:
    return round((stills[-1].t - stills[0].t) / (len(stills) - 1), 1) if len(stills) > 1 else 0.0


def frame_windows(stills: Sequence[Still], duration: float, names: list[str], *, window_s: float = FRAME_WINDOW_S,
                  max_images: int = MAX_IMAGES, json_reply: bool = True) -> list[Window]:
    """One request per minute of film that has stills: its stills (at most max_images), no sound."""
    out = []
    t0 = 0.0
    while t0 < duration:
        t1 = min(t0 + window_s, duration)
        shown = spread([s for s in stills if t0 <= s.t < t1], max_images)
        if shown:
            text = FRAME.render(n=len(shown), t0=hms(t0, short=True), t1=hms(t1, short=True), step=_step(shown), names=names_clause(names))
            req = Request.build([system(FRAME.system), user(text, images=[s.path for s in shown])],
                                json_schema=FRAME.schema if json_reply else None, max_tokens=CAPTION_MAX_TOKENS)
            out.append(Window("frame", t0, t1, FRAME, req))
        t0 += window_s
    return out


def clip_windows(segments: Sequence[tuple[float, float]], *, video: Path | None, stills: Sequence[Still],
                 lines: Sequence[Line], names: list[str], take_video: bool, take_audio: bool,
                 max_images: int = MAX_IMAGES, json_reply: bool = True) -> list[Window]:
    """One request per segment: the clip itself (with its sound) for a backbone that takes video,
    else its stills plus the dialogue said in it."""
    out = []
    schema = CLIP_VIDEO.schema if json_reply else None
    for t0, t1 in segments:
        if take_video and video is not None:
            said = "" if take_audio else dialogue(lines, t0, t1)
            extra = f"\nDialogue in this stretch (the sound is not attached):\n{said}\n" if said else ""
            text = CLIP_VIDEO.render(t0=hms(t0, short=True), t1=hms(t1, short=True), names=names_clause(names), dialogue=extra)
            req = Request.build([system(CLIP_VIDEO.system), user(text, video=Clip(Path(video), t0, t1))],
                                json_schema=schema, max_tokens=CAPTION_MAX_TOKENS)
            out.append(Window("clip", t0, t1, CLIP_VIDEO, req))
            continue
        shown = spread([s for s in stills if t0 <= s.t < t1], max_images)
        if not shown:
            continue
        said = dialogue(lines, t0, t1)
        extra = f"\nDialogue in this stretch:\n{said}\n" if said else " Nobody speaks in this stretch."
        text = CLIP_FRAMES.render(n=len(shown), t0=hms(t0, short=True), t1=hms(t1, short=True), step=_step(shown), dialogue=extra,
                                  names=names_clause(names))
        req = Request.build([system(CLIP_FRAMES.system), user(text, images=[s.path for s in shown])],
                            json_schema=schema, max_tokens=CAPTION_MAX_TOKENS)
        out.append(Window("clip", t0, t1, CLIP_FRAMES, req))
    return out


# ----------------------------------------------------------------------------- replies


@dataclass
class Caption:
    kind: str
    start: float
    end: float
    text: str
    characters: list[str]
    prompt_id: str


@dataclass
class CaptionRun:
    captions: list[Caption] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (window, why): the model's fault
    failed: list[tuple[str, str]] = field(default_factory=list)  # (window, why): transient, retry later
    tally: Tally = field(default_factory=Tally)
    clip_input: str = ""  # "video+audio", "video", "frames+transcript"
    model: str = ""


def read_caption(reply: Reply, json_reply: bool) -> tuple[str, list[str]] | str:
    """(caption, characters) from a reply, or why it cannot be used."""
    if reply.invalid:
        return reply.error or "invalid reply"
    if not json_reply:
        return (reply.text.strip(), []) if reply.text.strip() else "empty caption"
    data = reply.data if isinstance(reply.data, dict) else None
    if data is None:
        return "reply is not a JSON object"
    text = str(data.get("caption") or "").strip()
    if not text:
        return "empty caption"
    chars = [str(c).strip() for c in data.get("characters") or [] if str(c).strip()]
    return text, list(dict.fromkeys(chars))


def generate_captions(backbone: Backbone, *, video: Path | None, stills: Sequence[Still],
                      segments: Sequence[tuple[float, float]], lines: Sequence[Line], duration: float,
                      reporter: Reporter | None = None, max_images: int = MAX_IMAGES,
                      window_s: float = FRAME_WINDOW_S) -> CaptionRun:
    """Frame and clip captions of one film (all windows, concurrently, through `backbone`)."""
    check_captioner(backbone)
    caps = backbone.capabilities
    names = known_names(lines)
    json_reply = bool(caps.json)
    windows: list[Window] = []
    if caps.images:
        windows += frame_windows(stills, duration, names, window_s=window_s, max_images=max_images, json_reply=json_reply)
    take_video = bool(caps.video and video is not None)
    windows += clip_windows(segments, video=video, stills=stills if caps.images else [], lines=lines, names=names,
                            take_video=take_video, take_audio=bool(caps.audio), max_images=max_images,
                            json_reply=json_reply)
    run = CaptionRun(model=backbone.model_id)
    run.clip_input = ("video+audio" if caps.audio else "video+transcript") if take_video else "frames+transcript"
    if not windows:
        return run

    def progress(done: int, reply: Reply) -> None:
        run.tally.add(reply)
        if reporter is not None:
            reporter.update(done, len(windows), postfix=run.tally.postfix())

    if reporter is not None:
        reporter.update(0, len(windows), postfix=run.tally.postfix())
    replies = send_all(backbone, [w.request for w in windows], on_reply=progress)
    for w, reply in zip(windows, replies):
        got = read_caption(reply, json_reply)
        if isinstance(got, str):
            (run.failed if reply.transient else run.invalid).append((w.label, got))
            continue
        text, chars = got
        run.captions.append(Caption(w.kind, round(w.start, 3), round(w.end, 3), text, chars, w.prompt.ref))
    run.captions.sort(key=lambda c: (c.start, c.kind != "frame", c.end))
    return run
