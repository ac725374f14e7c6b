"""Picture and sound for the synthetic film: espeak-ng speech, PIL stills, numpy music, ffmpeg.

Memory stays flat at any length: one still per shot goes to disk and ffmpeg's concat demuxer
holds each for its duration; the sound track is mixed in ten-second chunks and piped to
ffmpeg's stdin, and speech clips are read back from disk only while they play.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps

from ..foundation.errors import MovieMemError
from .script import COATS, RATE_WPM, Script, voice_options
from .timeline import TimedShot, Timeline

W, H = 640, 360
SR = 22050  # espeak-ng's own rate: no resampling
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
MIN_CUT_SCORE = 45.0  # PySceneDetect's content detector cuts at 27 on this scale
SPEECH_PEAK = 0.7
MUSIC_LEVEL = {"solo": 0.16, "under": 0.035}  # peak; "under" sits about 25 dB below speech
ROOM_TONE = 0.001  # a faint noise floor (-60 dBFS RMS): real tracks are never digitally silent


def require_tools() -> None:
    """Fail early, with one line, when a tool the render needs is missing."""
    for tool in ("ffmpeg", "espeak-ng"):
        if shutil.which(tool) is None:
            raise MovieMemError(f"moviemem synth needs {tool} on PATH (Debian: apt-get install {tool})")
    if not (FONT_DIR / "DejaVuSans.ttf").exists():
        raise MovieMemError(f"moviemem synth needs the DejaVu fonts in {FONT_DIR} (Debian: fonts-dejavu-core)")


# --- speech --------------------------------------------------------------------------------------

class Voicer:
    """Synthesizes each (voice spec, text) once, trimmed of silence, kept on disk as float32 .npy;
    the spec's own speed overrides `rate`."""

    def __init__(self, work: Path, rate: int = RATE_WPM):
        self.work, self.rate = work, rate
        self.work.mkdir(parents=True, exist_ok=True)
        self._n: dict[tuple[str, str], int] = {}

    def path(self, voice: str, text: str) -> Path:
        digest = hashlib.sha1(f"{voice}\0{text}".encode()).hexdigest()[:16]
        return self.work / f"{digest}.npy"

    def clip(self, voice: str, text: str) -> np.ndarray:
        self.measure(voice, text)
        samples: np.ndarray = np.load(self.path(voice, text))
        return samples

    def measure(self, voice: str, text: str) -> float:
        """Seconds of speech: the layout uses what will really be played."""
        key = (voice, text)
        if key not in self._n:
            self._n[key] = self._synth(voice, text)
        return self._n[key] / SR

    def _synth(self, voice: str, text: str) -> int:
        out = self.path(voice, text)
        wav = out.with_suffix(".wav")
        args = voice_options(voice).args(self.rate)  # a bad spec fails here, before espeak-ng runs
        proc = subprocess.run(["espeak-ng", *args, "-g", "1", "-w", str(wav)], input=text.encode(), capture_output=True)
        if proc.returncode != 0 or not wav.exists():
            raise MovieMemError(f"espeak-ng failed for voice {voice}: {proc.stderr.decode(errors='replace')[:200]}")
        with wave.open(str(wav)) as w:
            if w.getframerate() != SR or w.getnchannels() != 1:
                raise MovieMemError(f"espeak-ng gave {w.getframerate()} Hz audio, expected {SR}")
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32)
        wav.unlink()
        loud = np.nonzero(np.abs(pcm) > 0.02 * max(1.0, float(np.abs(pcm).max())))[0]
        if len(loud) == 0:
            raise MovieMemError(f"espeak-ng produced silence for {text!r}")
        pad = SR // 100
        pcm = pcm[max(0, loud[0] - pad): loud[-1] + pad]
        pcm *= SPEECH_PEAK / float(np.abs(pcm).max())
        np.save(out, pcm)
        return len(pcm)


# --- pictures ------------------------------------------------------------------------------------

def _font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT_DIR / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")), size)


def _wrap(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and draw.textlength(lines[-1] + " " + word, font=font) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _fit(draw: ImageDraw.ImageDraw, lines: list[str], width: int, size: int, bold: bool) -> ImageFont.FreeTypeFont:
    """Largest font up to `size` at which every line fits `width`."""
    while size > 12:
        font = _font(size, bold)
        if all(draw.textlength(ln, font=font) <= width for ln in lines):
            return font
        size -= 2
    return _font(size, bold)


RGB = tuple[int, int, int]


def _shade(rgb: RGB, v: float) -> RGB:
    r, g, b = (max(0, min(255, int(c * v))) for c in rgb)
    return r, g, b


SKIN = ((236, 196, 160), (200, 150, 110), (150, 105, 75), (240, 210, 180), (180, 130, 95))
HAIR = ((60, 40, 25), (200, 160, 80), (30, 30, 30), (150, 80, 40), (95, 55, 30))  # grey is for the elder
BACKDROPS = ((70, 110, 160), (200, 170, 90), (90, 150, 110), (170, 90, 90), (60, 60, 80), (220, 220, 200),
             (140, 100, 160), (40, 120, 130))


def _person(d: ImageDraw.ImageDraw, x: float, base: float, s: float, coat: tuple[int, int, int],
            skin: tuple[int, int, int], hair: tuple[int, int, int], long_hair: bool) -> None:
    """A simple figure standing on `base`, head-to-foot about 200*s pixels tall."""
    head_r = 22 * s
    top = base - 200 * s
    d.rectangle([x - 18 * s, base - 70 * s, x - 4 * s, base], fill=(40, 40, 50))
    d.rectangle([x + 4 * s, base - 70 * s, x + 18 * s, base], fill=(40, 40, 50))
    d.rounded_rectangle([x - 34 * s, top + 2 * head_r, x + 34 * s, base - 60 * s], radius=14 * s, fill=coat,
                        outline=_shade(coat, 0.6), width=max(1, int(2 * s)))
    if long_hair:
        d.rounded_rectangle([x - head_r * 1.15, top - 4 * s, x + head_r * 1.15, top + 2.4 * head_r], radius=head_r,
                            fill=hair)
    d.ellipse([x - head_r, top, x + head_r, top + 2 * head_r], fill=skin)
    d.chord([x - head_r, top - 2 * s, x + head_r, top + 1.3 * head_r], 180, 360, fill=hair)
    for ex in (-0.4, 0.4):
        d.ellipse([x + ex * head_r - 2.5 * s, top + head_r - 2 * s, x + ex * head_r + 2.5 * s, top + head_r + 3 * s],
                  fill=(20, 20, 20))


def _prop(d: ImageDraw.ImageDraw, kind: str, cx: float, cy: float, s: float, facts: dict[str, str]) -> None:
    """The plot's objects, large enough to read as what the captions say they are."""
    if kind in ("box", "empty-box"):
        d.rectangle([cx - 90 * s, cy - 40 * s, cx + 90 * s, cy + 50 * s], fill=(150, 155, 160), outline=(80, 80, 85),
                    width=4)
        d.rectangle([cx - 80 * s, cy - 30 * s, cx + 80 * s, cy + 40 * s],
                    fill=(60, 60, 65) if kind == "empty-box" else (150, 155, 160))
        if kind == "box":
            d.line([cx - 90 * s, cy - 40 * s, cx + 90 * s, cy - 40 * s], fill=(80, 80, 85), width=6)
        return
    name = facts["clue"] if kind == "clue" else facts["obj"]
    color = next((rgb for c, rgb in COATS.items() if name.startswith(c)), None)
    metal = {"silver": (200, 200, 210), "gold": (230, 190, 60), "pearl": (245, 240, 230), "brass": (190, 150, 70)}
    color = color or next((rgb for m, rgb in metal.items() if name.startswith(m)), (200, 200, 200))
    if name.endswith("watch") or name.endswith("compass"):
        d.ellipse([cx - 70 * s, cy - 70 * s, cx + 70 * s, cy + 70 * s], fill=color, outline=(60, 60, 60), width=5)
        d.ellipse([cx - 55 * s, cy - 55 * s, cx + 55 * s, cy + 55 * s], fill=(250, 250, 240))
        d.line([cx, cy, cx, cy - 45 * s], fill=(200, 30, 30) if "compass" in name else (20, 20, 20), width=5)
        d.line([cx, cy, cx + 30 * s, cy + 10 * s], fill=(20, 20, 20), width=4)
    elif name.endswith("ring"):
        d.ellipse([cx - 60 * s, cy - 60 * s, cx + 60 * s, cy + 60 * s], outline=color, width=int(18 * s))
    elif name.endswith("necklace"):
        for i in range(19):
            a = math.pi * (0.1 + 0.8 * i / 18)
            px, py = cx + 90 * s * math.cos(a), cy - 40 * s + 80 * s * math.sin(a)
            d.ellipse([px - 9 * s, py - 9 * s, px + 9 * s, py + 9 * s], fill=color, outline=(150, 150, 140))
    elif name.endswith("scarf"):
        d.rounded_rectangle([cx - 120 * s, cy - 25 * s, cx + 120 * s, cy + 25 * s], radius=10, fill=color)
        d.rectangle([cx + 60 * s, cy - 25 * s, cx + 90 * s, cy + 90 * s], fill=color)
    elif name.endswith("glove"):
        d.rounded_rectangle([cx - 45 * s, cy - 10 * s, cx + 45 * s, cy + 80 * s], radius=20, fill=color)
        for i in range(4):
            fx = cx - 40 * s + i * 24 * s
            d.rounded_rectangle([fx, cy - 70 * s, fx + 18 * s, cy], radius=8, fill=color)
    else:  # hat
        d.rectangle([cx - 110 * s, cy + 20 * s, cx + 110 * s, cy + 40 * s], fill=color)
        d.rounded_rectangle([cx - 60 * s, cy - 60 * s, cx + 60 * s, cy + 30 * s], radius=20, fill=color)


PLACE_COLORS = {  # (wall or sky, ground or floor, accent)
    "home": ((232, 200, 150), (140, 95, 60), (190, 120, 80)),
    "town": ((150, 200, 240), (150, 150, 150), (200, 120, 90)),
    "inn": ((120, 40, 55), (90, 60, 35), (210, 180, 110)),
    "road": ((240, 165, 95), (70, 130, 60), (120, 120, 120)),
    "hideout": ((110, 105, 100), (70, 60, 50), (150, 140, 125)),
}
TIME_LIGHT = {"morning": 1.0, "day": 1.05, "afternoon": 0.95, "evening": 0.7, "night": 0.35}


class Painter:
    """Draws one still per shot; `variant` changes backdrops when two shots would look alike."""

    def __init__(self, script: Script):
        self.script = script
        self.looks = {role: (COATS[c.coat], SKIN[i % len(SKIN)], HAIR[(i * 2) % len(HAIR)], c.gender == "f")
                      for i, (role, c) in enumerate(script.cast.items())}
        self.looks["elder"] = self.looks["elder"][:2] + ((215, 215, 215), self.looks["elder"][3])

    def draw(self, ts: TimedShot, scene_place: str, time: str, flashback: bool, variant: int) -> Image.Image:
        shot = ts.shot
        img = Image.new("RGB", (W, H))
        d = ImageDraw.Draw(img)
        light = TIME_LIGHT.get(time, 1.0) * (1.0 if variant % 2 == 0 else 0.75)
        wall, ground, accent = (_shade(c, light) for c in PLACE_COLORS[scene_place])
        backdrop = BACKDROPS[(hash_int(shot.desc) + variant) % len(BACKDROPS)]
        if shot.kind == "card":
            d.rectangle([0, 0, W, H], fill=_shade((245, 235, 210), 1.0 - 0.08 * variant))
            d.rectangle([20, 20, W - 20, H - 20], outline=(60, 50, 40), width=4)
            self._text_block(d, list(shot.text), (60, 60, W - 60, H - 60), 52, bold=True)
        elif shot.kind in ("letter", "news"):
            table = BACKDROPS[variant % len(BACKDROPS)] if variant else (85, 55, 35)
            d.rectangle([0, 0, W, H], fill=_shade(table, 0.8))
            paper = (248, 242, 222) if shot.kind == "letter" else (240, 240, 235)
            d.rectangle([70, 12, W - 70, H - 12], fill=paper, outline=(170, 160, 140), width=2)
            if shot.kind == "letter":
                self._text_block(d, list(shot.text), (100, 30, W - 100, H - 30), 30, bold=False, align="left")
            else:
                masthead, headline = shot.text
                self._text_block(d, [masthead], (95, 22, W - 95, 70), 34, bold=True)
                d.line([95, 76, W - 95, 76], fill=(40, 40, 40), width=3)
                lines = _wrap(d, headline, _font(34, True), W - 200)
                self._text_block(d, lines, (95, 88, W - 95, 250), 34, bold=True)
                for y in range(268, H - 25, 14):  # column rules, not text: keeps OCR clean
                    d.line([100, y, W // 2 - 15, y], fill=(185, 185, 185), width=5)
                    d.line([W // 2 + 15, y, W - 100, y], fill=(185, 185, 185), width=5)
        elif shot.kind == "sign":
            self._facade(d, wall, ground, accent, scene_place, time, variant)
            board = (250, 246, 230)
            if shot.text == ("CLOSED",):
                d.rectangle([200, 0, 440, H], fill=_shade((120, 70, 40), 0.8 + 0.1 * variant))
                d.rectangle([225, 110, 415, 220], fill=board, outline=(50, 40, 30), width=4)
                self._text_block(d, list(shot.text), (235, 120, 405, 210), 44, bold=True)
            else:
                d.rectangle([60, 70, W - 60, 200], fill=board, outline=(50, 40, 30), width=6)
                self._text_block(d, list(shot.text), (80, 80, W - 80, 190), 50, bold=True)
        elif shot.kind == "object":
            d.rectangle([0, 0, W, H], fill=_shade(backdrop, 0.9))
            d.rectangle([0, H * 0.55, W, H], fill=(110, 75, 45))
            _prop(d, shot.prop, W / 2, H * 0.55, 1.3, self.script.facts)
        elif shot.kind == "wide":
            self._facade(d, wall, ground, accent, scene_place, time, variant)
            n = len(shot.chars)
            for i, role in enumerate(shot.chars):
                self._figure(d, role, W * (i + 1) / (n + 1) + 60, H - 30, 0.7)
        elif shot.kind == "two":
            d.rectangle([0, 0, W, H], fill=_shade(wall, 0.95))
            d.rectangle([0, H * 0.72, W, H], fill=ground)
            d.rectangle([40, 40, 200, 150], fill=accent)
            for i, role in enumerate(shot.chars):
                self._figure(d, role, W * (0.3 + 0.4 * i), H + 40, 1.35)
            if shot.prop:
                _prop(d, shot.prop, W / 2, H * 0.72, 0.6, self.script.facts)
        else:  # close
            d.rectangle([0, 0, W, H], fill=backdrop)
            d.ellipse([W * 0.55, -80, W * 1.1, H * 0.6], fill=_shade(backdrop, 1.25))
            if shot.chars:
                self._figure(d, shot.chars[0], W * 0.38, H + 230, 2.3)
            if shot.prop:
                _prop(d, shot.prop, W * 0.76, H * 0.62, 0.8, self.script.facts)
            elif "letter" in shot.desc or "newspaper" in shot.desc:
                d.rectangle([W * 0.62, H * 0.45, W * 0.9, H * 0.9], fill=(245, 240, 225))
        if flashback:
            img = ImageOps.colorize(ImageOps.grayscale(img), black=(45, 28, 12), white=(245, 225, 185))
        return img

    def _figure(self, d: ImageDraw.ImageDraw, role: str, x: float, base: float, s: float) -> None:
        coat, skin, hair, long_hair = self.looks[role]
        _person(d, x, base, s, coat, skin, hair, long_hair)

    def _facade(self, d: ImageDraw.ImageDraw, wall: RGB, ground: RGB, accent: RGB, place: str, time: str,
                variant: int) -> None:
        """The place seen from outside: sky, ground and a building or trees."""
        night = time in ("evening", "night")
        sky = (25, 30, 70) if time == "night" else ((240, 160, 100) if night else (150, 200, 240))
        d.rectangle([0, 0, W, H], fill=_shade(sky, 1.0 - 0.15 * variant))
        d.rectangle([0, H * 0.75, W, H], fill=ground)
        if place == "road":
            d.polygon([(W * 0.45, H * 0.75), (W * 0.55, H * 0.75), (W * 0.9, H), (W * 0.1, H)], fill=(110, 100, 90))
            for tx in (40, 130, 520, 600):
                d.polygon([(tx, H * 0.58), (tx - 40, H * 0.8), (tx + 40, H * 0.8)], fill=(30, 90, 40))  # below signs
        else:
            d.rectangle([30, 40, W - 30, H * 0.78], fill=wall, outline=_shade(wall, 0.6), width=4)
            for wx in range(70, W - 70, 130):
                d.rectangle([wx, 215, wx + 70, 255], fill=_shade(accent, 0.8))
        if time == "night":
            d.ellipse([W - 110, 20, W - 60, 70], fill=(240, 240, 210))

    def _text_block(self, d: ImageDraw.ImageDraw, lines: list[str], box: tuple[float, float, float, float],
                    size: int, bold: bool, align: str = "center") -> None:
        """Dark text on light paper, as large as the box allows: tesseract reads it from a still."""
        x0, y0, x1, y1 = box
        font = _fit(d, lines, int(x1 - x0), size, bold)
        while font.size > 14 and len(lines) * font.size * 1.3 > y1 - y0:
            font = _font(int(font.size) - 2, bold)
        step = font.size * 1.3
        y = y0 + (y1 - y0 - step * len(lines)) / 2
        for ln in lines:
            width = d.textlength(ln, font=font)
            x = x0 if align == "left" else x0 + (x1 - x0 - width) / 2
            d.text((x, y), ln, font=font, fill=(25, 20, 15))
            y += step


def hash_int(text: str) -> int:
    """A stable small integer (Python's hash() is salted per process)."""
    return int(hashlib.md5(text.encode()).hexdigest()[:8], 16)


def cut_score(a: Image.Image, b: Image.Image) -> float:
    """PySceneDetect's content score between two frames: mean |dH|+|dS|+|dV| / 3, OpenCV scales."""
    ha = np.asarray(a.resize((160, 90)).convert("HSV"), dtype=np.float32)
    hb = np.asarray(b.resize((160, 90)).convert("HSV"), dtype=np.float32)
    delta = np.abs(ha - hb).mean(axis=(0, 1))
    return float((delta[0] * 180 / 256 + delta[1] + delta[2]) / 3)


def paint_shots(tl: Timeline, out: Path, progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """One PNG per shot; each differs enough from the one before for a content detector to cut."""
    painter = Painter(tl.script)
    paths: list[Path] = []
    prev: Image.Image | None = None
    for i, ts in enumerate(tl.shots):
        scene = tl.scenes[ts.scene]
        best, best_score = None, -1.0
        for variant in range(8):
            img = painter.draw(ts, scene.place, scene.time, scene.flashback, variant)
            score = cut_score(prev, img) if prev is not None else 1e9
            if score > best_score:
                best, best_score = img, score
            if score >= MIN_CUT_SCORE:
                break
        assert best is not None
        path = out / f"shot{i:05d}.png"
        best.save(path, compress_level=1)
        paths.append(path)
        prev = best
        if progress and i % 20 == 0:
            progress(i, len(tl.shots))
    return paths


# --- sound ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sound:
    start: int  # sample
    end: int
    kind: str  # speech, solo, under, knock, steps, wind
    key: str  # speech: (voice\0text); effects: seed text


def sound_items(tl: Timeline) -> list[Sound]:
    """Everything on the sound track with its sample span, in start order."""
    items: list[Sound] = []
    ts: TimedShot | None
    for ts in tl.shots:
        for ln in ts.lines:
            s = round(ln.start * SR)
            # The end is generous: line times are rounded to 1 ms and the clip itself ends the sound.
            items.append(Sound(s, s + round((ln.end - ln.start) * SR) + SR // 10, "speech", f"{ln.voice}\0{ln.text}"))
        if ts.shot.effect:
            items.append(Sound(round(ts.start * SR), round(ts.end * SR), ts.shot.effect, f"{ts.start}"))
    # Music: merge neighbouring shots with the same setting into one passage with soft edges.
    run: list[TimedShot] = []
    for ts in [*tl.shots, None]:
        if run and (ts is None or ts.shot.music != run[-1].shot.music):
            if run[-1].shot.music:
                items.append(Sound(round(run[0].start * SR), round(run[-1].end * SR), run[-1].shot.music, ""))
            run = []
        if ts is not None:
            run.append(ts)
    return sorted(items, key=lambda it: (it.start, it.kind))


def music(start: int, n: int, seed: int) -> np.ndarray:
    """A soft pad with a plucked arpeggio, a pure function of absolute time (chunks join seamlessly)."""
    t = (start + np.arange(n)) / SR
    root = 196.0 * 2 ** ((seed % 5) / 12)
    chords = ((0, 4, 7), (9, 12, 16), (5, 9, 12), (7, 11, 14))  # I vi IV V
    seg = np.floor(t / 2.0).astype(np.int64)
    pos = t - seg * 2.0
    tones = np.array([[root * 2 ** (x / 12) for x in c] for c in chords])[seg % 4]
    env = np.minimum(1.0, np.minimum(pos, 2.0 - pos) / 0.15)
    pad = sum(np.sin(2 * np.pi * tones[:, k] * t) + 0.3 * np.sin(4 * np.pi * tones[:, k] * t) for k in range(3))
    beat = np.floor(t / 0.5).astype(np.int64)
    note = tones[np.arange(n), beat % 3] * 2
    pluck = np.sin(2 * np.pi * note * t) * np.exp(-6.0 * (t - beat * 0.5))
    return ((pad / 4.0) * env * 0.6 + 0.4 * pluck).astype(np.float32)


def effect(kind: str, n: int, key: str) -> np.ndarray:
    """Knocks, footsteps or wind: filtered noise shaped by short envelopes."""
    rng = np.random.default_rng(hash_int(kind + key))
    out = np.zeros(n, np.float32)

    def thud(at: int, length: int, amp: float) -> None:
        if at >= n:
            return
        m = min(length, n - at)
        x = np.cumsum(rng.standard_normal(m)).astype(np.float32)
        x -= np.linspace(x[0], x[-1], m, dtype=np.float32)
        x /= max(1e-6, float(np.abs(x).max()))
        out[at:at + m] += amp * x * np.exp(-np.arange(m) / (0.15 * length))

    if kind == "knock":
        for k in range(3):
            thud(int((0.4 + 0.3 * k) * SR), int(0.08 * SR), 0.45)
    elif kind == "steps":
        for k in range(int(n / (0.55 * SR))):
            thud(int(k * 0.55 * SR), int(0.06 * SR), 0.12)
    elif kind == "wind":
        x = np.convolve(rng.standard_normal(n), np.ones(200) / 200, mode="same").astype(np.float32)
        x /= max(1e-6, float(np.abs(x).max()))
        swell = 0.6 + 0.4 * np.sin(np.arange(n) / SR * 2 * np.pi * 0.3)
        out += 0.06 * x * swell
    return out


def _edges(start: int, end: int, lo: int, hi: int, fade: int) -> np.ndarray:
    s = np.arange(lo, hi)
    return np.clip(np.minimum(s - start, end - s) / fade, 0.0, 1.0).astype(np.float32)


def audio_chunks(tl: Timeline, voicer: Voicer, chunk_s: float = 10.0) -> Iterator[bytes]:
    """The mixed sound track as 16-bit mono PCM, chunk by chunk."""
    items = sound_items(tl)
    total = round(tl.duration * SR)
    step = int(chunk_s * SR)
    cache: dict[Sound, np.ndarray] = {}
    nxt = 0
    active: list[Sound] = []
    for lo in range(0, total, step):
        hi = min(total, lo + step)
        while nxt < len(items) and items[nxt].start < hi:
            active.append(items[nxt])
            nxt += 1
        noise = np.random.default_rng([tl.script.seed % 2**32, lo]).standard_normal(hi - lo)
        buf = (ROOM_TONE * np.convolve(noise, np.ones(8) / 8 ** 0.5, mode="same")).astype(np.float32)
        for it in active:
            a, b = max(lo, it.start), min(hi, it.end)
            if a >= b:
                continue
            if it.kind in MUSIC_LEVEL:
                fade = int(0.5 * SR)
                buf[a - lo:b - lo] += MUSIC_LEVEL[it.kind] * music(a, b - a, tl.script.seed) * _edges(
                    it.start, it.end, a, b, fade)
                continue
            if it not in cache:
                if it.kind == "speech":
                    voice, text = it.key.split("\0", 1)
                    cache[it] = voicer.clip(voice, text)
                else:
                    cache[it] = effect(it.kind, it.end - it.start, it.key)
            arr = cache[it]
            seg = arr[a - it.start:b - it.start]
            buf[a - lo:a - lo + len(seg)] += seg
        active = [it for it in active if it.end > hi]
        cache = {k: v for k, v in cache.items() if k in active}
        yield (np.clip(buf, -1.0, 1.0) * 32767).astype("<i2").tobytes()


# --- encoding ------------------------------------------------------------------------------------

def encode(tl: Timeline, stills: list[Path], voicer: Voicer, out: Path,
           progress: Callable[[int, int], None] | None = None) -> None:
    """H.264 + AAC in one ffmpeg run: stills through the concat demuxer, sound through stdin."""
    concat = out.with_suffix(".ffconcat")
    rows = ["ffconcat version 1.0"]
    for path, ts in zip(stills, tl.shots, strict=True):
        rows += [f"file '{path.relative_to(out.parent).as_posix()}'", f"duration {ts.end - ts.start:.6f}"]
    rows.append(rows[-2])  # the demuxer ignores the last entry's duration
    concat.write_text("\n".join(rows) + "\n")
    log = out.with_suffix(".log")
    cmd = ["ffmpeg", "-y", "-hide_banner", "-loglevel", "error",
           "-f", "concat", "-safe", "0", "-i", concat.name,
           "-f", "s16le", "-ar", str(SR), "-ac", "1", "-i", "pipe:0",
           "-map", "0:v", "-map", "1:a", "-vf", f"format=yuv420p,fps={tl.fps}",
           "-c:v", "libx264", "-preset", "veryfast", "-tune", "stillimage", "-crf", "24", "-g", str(tl.fps * 10),
           "-c:a", "aac", "-b:a", "96k", "-t", f"{tl.duration:.3f}", "-movflags", "+faststart",
           "-threads", "2", out.name]
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=out.parent, stdin=subprocess.PIPE, stderr=err)
        assert proc.stdin is not None
        total = int(tl.duration)
        done = 0.0
        try:
            for chunk in audio_chunks(tl, voicer):
                proc.stdin.write(chunk)
                done += len(chunk) / 2 / SR
                if progress:
                    progress(min(int(done), total), total)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = proc.wait()
    if rc != 0:
        msg = log.read_text(errors="replace").strip().splitlines()
        raise MovieMemError(f"ffmpeg failed to encode the synthetic film: {msg[-1] if msg else rc}")
    concat.unlink()
    log.unlink()
