"""Media stages on generated media: shots, ASR, OCR and CLIP, with the real libraries and models.

Every input is made here at run time (ffmpeg lavfi sources, PIL frames, espeak-ng speech,
synthesised music), so the expected cuts, words and on-screen texts are known exactly.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from faster_whisper.transcribe import Segment
from PIL import Image, ImageDraw, ImageFont

from moviemem.foundation.errors import MovieMemError
from moviemem.ingest import asr as asr_mod
from moviemem.ingest import ocr as ocr_mod
from moviemem.ingest.asr import transcribe
from moviemem.ingest.ocr import read_onscreen
from moviemem.ingest.shots import detect_shots
from moviemem.models.clip import ClipEncoder, clip_weights_available

SR = 16000
SENTENCES = [
    "The harbour master counted the boats twice before he locked the gate.",
    "Nobody in this town remembers who built the lighthouse.",
    "Please wait here while I find the captain.",
]


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def whisper(name: str) -> str:
    from moviemem.models import model_path

    try:
        return str(model_path(name))
    except MovieMemError as exc:
        pytest.skip(str(exc))


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level edit distance over the reference length."""

    def words(text: str) -> list[str]:
        return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("’", "'")).split()

    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(ref))


# ---------------------------------------------------------------- shots


def test_shots_cfr_hard_cuts(tmp_path: Path) -> None:
    need("ffmpeg")
    video = tmp_path / "cuts.mp4"
    graph = (
        "testsrc2=s=320x180:r=24:d=2[a];smptebars=s=320x180:r=24:d=1.5[b];"
        "mandelbrot=s=320x180:r=24,trim=duration=2[c];color=c=0x203060:s=320x180:r=24:d=1[d];"
        "testsrc=s=320x180:r=24:d=2.5[e];[a][b][c][d][e]concat=n=5:v=1:a=0,format=yuv420p[out]"
    )
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-filter_complex", graph, "-map", "[out]",
                    "-c:v", "libx264", "-preset", "ultrafast", str(video)], check=True)
    calls: list[tuple[int, int]] = []
    shots = detect_shots(video, progress=lambda done, total: calls.append((done, total)))
    assert len(shots) == 5
    for (start, _), expected in zip(shots, [0.0, 2.0, 3.5, 5.5, 6.5]):
        assert start == pytest.approx(expected, abs=0.5)
    assert shots[-1][1] == pytest.approx(9.0, abs=0.1)
    assert all(a[1] == b[0] for a, b in zip(shots, shots[1:]))  # contiguous
    assert calls and calls[-1][0] == calls[-1][1]
    adaptive = detect_shots(video, detector="adaptive")
    assert [s for s, _ in adaptive] == pytest.approx([0.0, 2.0, 3.5, 5.5, 6.5], abs=0.5)


def _vfr_video(path: Path, shots: list[tuple[tuple[int, int, int], float, float]]) -> None:
    """H.264 with per-frame pts in ms: each shot has its own frame rate."""
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 192, 108, "yuv420p"
        stream.codec_context.time_base = stream.time_base = Fraction(1, 1000)
        t = 0.0
        for colour, duration, fps in shots:
            texture = rng.integers(-40, 40, (108, 192, 1))
            n = round(duration * fps)
            for i in range(n):
                base = np.clip(np.array(colour)[None, None, :] + texture, 0, 255).astype(np.uint8)
                x = int(20 + 120 * i / n)
                base[40:70, x : x + 30] = 255 - base[40:70, x : x + 30]
                frame = av.VideoFrame.from_ndarray(base, format="rgb24")
                frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
                container.mux(stream.encode(frame))
                t += 1.0 / fps
        container.mux(stream.encode(None))


def test_shots_variable_frame_rate_uses_pts(tmp_path: Path) -> None:
    video = tmp_path / "vfr.mp4"
    # 10 fps, then 30 fps, then 5 fps: frame counting at the nominal 30 fps would put the
    # first cut at 0.83 s instead of 2.5 s.
    _vfr_video(video, [((240, 220, 40), 2.5, 10), ((20, 30, 140), 1.5, 30), ((128, 128, 128), 2.0, 5)])
    shots = detect_shots(video)
    assert [s for s, _ in shots] == pytest.approx([0.0, 2.5, 4.0], abs=0.5)
    assert shots[-1][1] == pytest.approx(6.0, abs=0.3)


def test_shots_refuses_bad_input(tmp_path: Path) -> None:
    bogus = tmp_path / "not_a_video.mp4"
    bogus.write_bytes(b"nothing to see")
    with pytest.raises(MovieMemError):
        detect_shots(bogus)
    with pytest.raises(MovieMemError, match="ratio"):
        detect_shots(bogus, detector="adaptive", threshold=27.0)
    with pytest.raises(MovieMemError, match="unknown shot detector"):
        detect_shots(bogus, detector="transnet")


# ---------------------------------------------------------------- ASR


def _speech(text: str, voice: str = "en-us") -> np.ndarray:
    out = subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "--stdout", text], check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(out)) as w:
        rate, pcm = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), np.int16)
    samples = pcm.astype(np.float32) / 32768
    resampled = np.interp(np.arange(0, len(samples) * SR / rate) * rate / SR, np.arange(len(samples)), samples)
    return (resampled / np.abs(resampled).max() * 0.5).astype(np.float32)


def _music(seconds: float, seed: int = 0) -> np.ndarray:
    """A tonal bed that moves like music: chords changing every 2 s, tremolo, a beat."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    bed = np.zeros_like(t)
    for k, start in enumerate(np.arange(0, seconds, 2.0)):
        root = [110, 147, 131, 165][k % 4]
        part = (t >= start) & (t < start + 2.0)
        for ratio, amp in [(1, 0.5), (1.25, 0.3), (1.5, 0.3), (2, 0.2), (3, 0.1)]:
            bed[part] += amp * np.sin(2 * np.pi * root * ratio * t[part])
    bed *= 0.7 + 0.3 * np.sin(2 * np.pi * 3 * t)
    beat = np.exp(-((t % 0.5) * 30)) * rng.normal(0, 1, t.size)  # a noisy hit every half second
    mix = bed / np.abs(bed).max() * 0.25 + beat * 0.08
    return mix.astype(np.float32)


def _lines(pad_s: float = 1.5, gap_s: float = 1.0) -> tuple[np.ndarray, list[float]]:
    parts, starts, at = [np.zeros(int(pad_s * SR), np.float32)], [], pad_s
    for sentence in SENTENCES:
        clip = _speech(sentence)
        starts.append(at)
        parts += [clip, np.zeros(int(gap_s * SR), np.float32)]
        at += len(clip) / SR + gap_s
    parts.append(np.zeros(int(pad_s * SR), np.float32))
    return np.concatenate(parts), starts


def _write_wav(path: Path, samples: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())
    return path


def _film(path: Path, wav: Path) -> Path:
    """An MP4 with a video stream and the audio as 44.1 kHz stereo AAC, like a film file."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=black:s=160x90:r=10", "-i", str(wav),
                    "-shortest", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-ar", "44100", "-ac", "2",
                    str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def clean_speech(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    need("espeak-ng")
    samples, starts = _lines()
    return _write_wav(tmp_path_factory.mktemp("asr") / "clean.wav", samples), starts


@pytest.mark.slow
def test_asr_clean_speech_words_and_times(clean_speech: tuple[Path, list[float]]) -> None:
    wav, starts = clean_speech
    calls: list[tuple[int, int]] = []
    tr = transcribe(wav, model=whisper("whisper-tiny.en"), progress=lambda d, t: calls.append((d, t)))
    text = " ".join(u["text"] for u in tr.utterances)
    assert wer(" ".join(SENTENCES), text) <= 0.2, text
    assert tr.language == "en" and "English-only" in tr.notes[0]
    assert tr.duration_s == pytest.approx(starts[-1] + 6, abs=3)
    assert 0 < tr.speech_s < tr.duration_s
    assert abs(tr.utterances[0]["start"] - starts[0]) < 0.7
    for u in tr.utterances:
        assert u["words"] and u["start"] <= u["words"][0]["start"] and u["words"][-1]["end"] <= u["end"]
        assert all(0 <= w["probability"] <= 1 and w["start"] <= w["end"] for w in u["words"])
    assert calls and calls[-1][0] == calls[-1][1]


@pytest.mark.slow
def test_asr_keeps_speech_over_music_in_a_film_container(tmp_path: Path) -> None:
    need("espeak-ng")
    need("ffmpeg")
    speech, _ = _lines()
    mixed = speech + _music(len(speech) / SR)
    film = _film(tmp_path / "scored.mp4", _write_wav(tmp_path / "scored.wav", mixed))
    tr = transcribe(film, model=whisper("whisper-tiny.en"))
    text = " ".join(u["text"] for u in tr.utterances)
    assert wer(" ".join(SENTENCES), text) <= 0.35, text


MEDIA = Path(__file__).resolve().parents[2] / "shared" / "media"


@pytest.mark.slow
def test_asr_keeps_a_real_line_said_over_a_loud_score_and_invents_none_over_battle_noise() -> None:
    """Real footage: the Sintel trailer's "A dangerous quest for a lone hunter" gets no VAD speech
    probability above 0.05, so only the gap pass hears it; the Tears of Steel battle clip has shouts
    and explosions, and Whisper's guesses there ("I'm going to kill you!") must not become lines."""
    sintel, battle = MEDIA / "sintel_trailer.mp4", MEDIA / "tears_of_steel_battle_clip.webm"
    if not (sintel.exists() and battle.exists()):
        pytest.skip(f"real clips are absent from {MEDIA} (real footage lives in ../shared/media)")
    base = whisper("whisper-base")
    heard = " ".join(u["text"] for u in transcribe(sintel, model=base, language="en").utterances).lower()
    missed = " ".join(u["text"] for u in transcribe(sintel, model=base, language="en", gaps=False).utterances).lower()
    assert "quest" in heard and "hunter" in heard and "alone" in heard and "gatekeepers" in heard, heard
    assert "quest" not in missed  # the VAD alone loses it
    noise = transcribe(battle, model=base, language="en")
    assert noise.utterances == [], noise.utterances
    assert any("VAD heard no speech" in d["reason"] for d in noise.suppressed)


def _vocalise(seconds: float, seed: int) -> np.ndarray:
    """Sung "ah" notes with vibrato over the tonal bed: voice-like enough to pass the VAD."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    notes = rng.choice([196, 220, 247, 262, 294, 330], size=int(seconds / 0.8) + 1)
    f0 = notes[(t / 0.8).astype(int)] * (1 + 0.02 * np.sin(2 * np.pi * 5.5 * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    voice = np.zeros_like(t)
    for h in range(1, 20):  # harmonics shaped by the formants of "ah"
        amp = np.exp(-(((f0 * h) - 700) / 300) ** 2) + 0.6 * np.exp(-(((f0 * h) - 1200) / 400) ** 2) + 0.3 / h
        voice += amp * np.sin(h * phase)
    voice *= np.minimum(1, (t % 0.8) / 0.05) * np.minimum(1, (0.8 - t % 0.8) / 0.1)
    return (voice / np.abs(voice).max() * 0.3 + _music(seconds, seed) * 0.5).astype(np.float32)


@pytest.mark.slow
def test_asr_music_only_yields_nothing(tmp_path: Path) -> None:
    base = whisper("whisper-base")
    for name, audio in [("tones", _music(20.0, seed=1)), ("sung", _vocalise(20.0, seed=2))]:
        tr = transcribe(_write_wav(tmp_path / f"{name}.wav", audio), model=base, language="en")
        assert tr.utterances == [], (name, tr.utterances)
        assert tr.notes[-1].startswith(("the VAD found no speech", "suppressed", "decoded the")), (name, tr.notes)
        assert any(n.startswith("decoded the") and "kept 0 line(s)" in n for n in tr.notes), tr.notes  # the gap pass ran
        assert all(line["reason"] for line in tr.suppressed)


GERMAN = [
    "Der Zug in die Hauptstadt wurde heute Morgen wieder abgesagt.",
    "Mein Bruder hat den Bauernhof verkauft und ist in die Stadt gezogen.",
]


@pytest.mark.slow
def test_asr_language_detected_or_forced(clean_speech: tuple[Path, list[float]], tmp_path: Path) -> None:
    wav, _ = clean_speech
    base = whisper("whisper-base")
    detected = transcribe(wav, model=base)
    assert detected.language == "en" and detected.language_probability > 0.5
    assert "detected by vote" in detected.notes[0]
    german = np.concatenate([_speech(GERMAN[0], "de"), np.zeros(SR // 2, np.float32), _speech(GERMAN[1], "de")])
    heard = transcribe(_write_wav(tmp_path / "de.wav", german), model=base)
    assert heard.language == "de" and "Hauptstadt" in heard.utterances[0]["text"]
    forced = transcribe(wav, model=base, language="en")
    assert forced.language == "en" and forced.language_probability == 1.0 and "given" in forced.notes[0]
    assert wer(" ".join(SENTENCES), " ".join(u["text"] for u in forced.utterances)) <= 0.2


@pytest.mark.slow
def test_asr_language_vote_spans_the_film() -> None:
    """One German window among English ones does not decide the film's language."""
    need("espeak-ng")

    def window(text: str, voice: str) -> np.ndarray:
        clip = np.concatenate([_speech(text, voice), np.zeros(SR // 4, np.float32)])
        return np.tile(clip, int(np.ceil(30 * SR / clip.size)))[: 30 * SR]

    audio = np.concatenate([window(GERMAN[0], "de"), window(SENTENCES[0], "en-us"), window(SENTENCES[1], "en-gb")])
    track = asr_mod.SpeechTrack(audio, [{"start": 0, "end": audio.size}])
    language, probability, note = asr_mod._language(asr_mod.load_model(whisper("whisper-base"), "int8", 2), track, None)
    assert language == "en" and 0.4 < probability < 0.95
    assert "3 speech window(s)" in note and "then de" in note


def _segment(text: str, probs: list[float], no_speech: float = 0.1, logprob: float = -0.3) -> tuple:
    words = [{"start": i * 0.3, "end": i * 0.3 + 0.25, "word": " " + w, "probability": p}
             for i, (w, p) in enumerate(zip(text.split(), probs))]
    segment = Segment(id=1, seek=0, start=0.0, end=3.0, text=" " + text, tokens=[], avg_logprob=logprob,
                      compression_ratio=1.2, no_speech_prob=no_speech, words=None, temperature=0.0)
    return segment, text, words


def test_asr_hallucination_filter() -> None:
    """The post-filter's rules, each on the kind of line Whisper invents over music."""
    why = asr_mod._why_suppressed
    line = "I have never seen a wolf this close to the village."
    assert why(*_segment(line, [0.9] * 11)) is None
    assert "known hallucination" in why(*_segment("Thank you for watching!", [0.95] * 4))
    assert "stock phrase" in why(*_segment("Thank you.", [0.4, 0.5]))
    assert why(*_segment("Thank you.", [0.95, 0.97])) is None  # said clearly: dialogue
    assert "repetition" in why(*_segment("no no no no no no no", [0.9] * 7))
    assert "no speech" in why(*_segment("We go.", [0.6, 0.6], no_speech=0.8, logprob=-1.4))
    assert "low word probability" in why(*_segment("Lie wih pei vat", [0.2, 0.1, 0.3, 0.2]))
    just_before = {"start": -2.5, "end": -0.5, "text": "Come here."}
    assert "repeat" in why(*_segment("Come here.", [0.9, 0.9]), just_before)
    assert why(*_segment("Come here.", [0.9, 0.9]), {**just_before, "end": -30.0}) is None
    earlier = {asr_mod._norm(line)}
    assert "copy of an earlier line" in why(*_segment(line, [0.55] * 11), None, earlier)
    assert why(*_segment(line, [0.95] * 11), None, earlier) is None
    crammed = _segment(line, [0.9] * 11)
    for w in crammed[2]:
        w["start"] = w["end"] = 1.0
    assert "faster than anyone speaks" in why(*crammed)
    # a line from a stretch the VAD heard as no speech must pass Whisper's own rule as well
    shouted = _segment(line, [0.9] * 11, no_speech=0.5, logprob=-1.4)
    assert why(*shouted) is None and "VAD heard no speech" in why(*shouted, vad_heard=False)
    assert why(*_segment(line, [0.9] * 11, no_speech=0.15, logprob=-0.9), vad_heard=False) is None


def test_asr_gap_pass_covers_what_the_vad_rejected_in_window_sized_pieces() -> None:
    second = SR
    chunks = [{"start": 2 * second, "end": 4 * second}, {"start": 4 * second + SR // 2, "end": 6 * second}]
    quiet = asr_mod.quiet_stretches(chunks, 80 * second)
    assert quiet[0] == {"start": 0, "end": 2 * second}  # half a second between the chunks is too short to decode
    assert all(q["end"] - q["start"] <= 30 * second for q in quiet)
    assert quiet[1]["start"] == 6 * second and quiet[-1]["end"] == 80 * second
    assert sum(q["end"] - q["start"] for q in quiet[1:]) == 74 * second
    assert asr_mod.quiet_stretches([], 80 * second)[0] == {"start": 0, "end": 30 * second}
    assert asr_mod.quiet_stretches([{"start": 0, "end": 80 * second}], 80 * second) == []


def test_asr_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    need("ffmpeg")
    silent_video = tmp_path / "no_audio.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=64x64:r=5:d=1",
                    "-c:v", "libx264", str(silent_video)], check=True)
    tiny = whisper("whisper-tiny.en")
    with pytest.raises(MovieMemError, match="no audio stream"):
        transcribe(silent_video, model=tiny)
    with pytest.raises(MovieMemError, match="English-only"):
        transcribe(_write_wav(tmp_path / "quiet.wav", np.zeros(SR, np.float32)), model=tiny, language="de")
    with pytest.raises(MovieMemError, match="moviemem models prepare|unknown offline model"):
        transcribe(silent_video, model="large-v9")


# ---------------------------------------------------------------- OCR


def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _background(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    sky = np.linspace(60, 140, 288)[:, None, None] * np.array([0.6, 0.8, 1.0])[None, None, :]
    pixels = np.broadcast_to(sky, (288, 512, 3)) + rng.normal(0, 6, (288, 512, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _headline(seed: int, shift: int) -> Image.Image:
    """A newspaper filling most of the frame, held while the camera drifts a little."""
    im = _background(seed)
    draw = ImageDraw.Draw(im)
    draw.rectangle([30 + shift, 30, 480 + shift, 260], fill=(235, 230, 215))
    draw.text((60 + shift, 50), "CITY BANK ROBBED", font=_font(44), fill=(15, 15, 15))
    draw.text((60 + shift, 120), "Police search the harbour", font=_font(26), fill=(40, 40, 40))
    return im


def _sign(seed: int) -> Image.Image:
    """A painted shop sign: dark red letters on a cream board over the sky."""
    im = _background(seed)
    draw = ImageDraw.Draw(im)
    left, top, right, bottom = draw.textbbox((150, 108), "HOTEL ROYAL", font=_font(38))
    draw.rectangle([left - 24, top - 20, right + 24, bottom + 20], fill=(225, 215, 180), outline=(90, 60, 30), width=4)
    draw.text((150, 108), "HOTEL ROYAL", font=_font(38), fill=(120, 20, 20))
    return im


def test_ocr_reads_merges_and_times_onscreen_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("tesseract")
    pictures = [
        _background(1), _background(1),  # 0, 2 s: no text
        _headline(2, 0), _headline(2, 0), _headline(2, 6),  # 4-8 s: same page (last one drifted)
        _sign(3), _sign(3),  # 10-12 s
        _background(4),  # 14 s
    ]
    frames = []
    for i, picture in enumerate(pictures):
        path = tmp_path / f"strip_{i:03d}.jpg"
        picture.save(path, quality=85)
        frames.append((2.0 * i, path))
    read = []
    real_read = ocr_mod._read_frame
    monkeypatch.setattr(ocr_mod, "_read_frame", lambda *a: read.append(a[1]) or real_read(*a))
    calls: list[tuple[int, int]] = []
    rows = read_onscreen(frames[::-1], progress=lambda d, t: calls.append((d, t)))  # any order in

    assert [r["text"].split("\n")[0] for r in rows] == ["CITY BANK ROBBED", "HOTEL ROYAL"], rows
    headline, sign = rows
    assert (headline["start"], headline["end"]) == (4.0, 10.0)
    assert "harbour" in headline["text"]
    assert (sign["start"], sign["end"]) == (10.0, 14.0)
    assert all(r["confidence"] >= 60 for r in rows)
    # the repeated pictures were carried forward, not read again
    assert frames[3][1] not in read and frames[6][1] not in read and frames[4][1] in read
    assert calls[-1] == (len(read), len(read))


def test_ocr_drops_texture_noise_and_unknown_language(tmp_path: Path) -> None:
    need("tesseract")
    rng = np.random.default_rng(7)
    leaves = Image.fromarray(rng.integers(0, 255, (288, 512, 3), dtype=np.uint8)).resize((512, 288), Image.NEAREST)
    path = tmp_path / "leaves.jpg"
    leaves.save(path)
    assert read_onscreen([(0.0, path)]) == []
    assert read_onscreen([]) == []
    with pytest.raises(MovieMemError, match="no language data"):
        read_onscreen([(0.0, path)], lang="klingon")


# ---------------------------------------------------------------- CLIP


def test_clip_random_weights_shapes_norms_determinism(tmp_path: Path) -> None:
    paths = []
    for i, colour in enumerate([(200, 30, 30), (30, 200, 30), (30, 30, 200)]):
        path = tmp_path / f"f{i}.jpg"
        Image.new("RGB", (320, 180), colour).save(path)
        paths.append(path)
    encoder = ClipEncoder("ViT-B-32", None)
    assert encoder.dim == 512 and encoder.random_weights
    calls: list[tuple[int, int]] = []
    images = encoder.encode_images(paths, batch_size=2, progress=lambda d, t: calls.append((d, t)))
    assert images.shape == (3, 512) and images.dtype == np.float32
    assert np.allclose(np.linalg.norm(images, axis=1), 1.0, atol=1e-5)
    assert calls == [(2, 3), (3, 3)]
    again = ClipEncoder("ViT-B-32", None)
    assert again.model is encoder.model  # loaded once per process
    assert np.allclose(again.encode_images(paths), images, atol=1e-6)
    assert not np.allclose(images[0], images[1])
    texts = encoder.encode_texts(["a red door", "a green field"])
    assert texts.shape == (2, 512) and np.allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-5)
    assert encoder.encode_texts([]).shape == (0, 512)


def test_clip_weights_available_never_downloads(tmp_path: Path) -> None:
    ok, reason = clip_weights_available(None)
    assert not ok and "MOVIEMEM_CLIP_PRETRAINED" in reason
    ok, reason = clip_weights_available(str(tmp_path / "missing.pt"))
    assert not ok and "does not exist" in reason
    ok, reason = clip_weights_available("no-such-tag")
    assert not ok and "neither" in reason
    ok, reason = clip_weights_available("laion2b_s34b_b79k")
    assert ok or "not in the local cache" in reason
    checkpoint = tmp_path / "clip.pt"
    checkpoint.write_bytes(b"\0")
    assert clip_weights_available(str(checkpoint)) == (True, f"local checkpoint {checkpoint}")


def test_clip_local_checkpoint_is_loaded(tmp_path: Path) -> None:
    """A checkpoint file is the configured-weights path: save seeded weights, load them back."""
    import torch

    frame = tmp_path / "frame.jpg"
    Image.new("RGB", (320, 180), (200, 120, 30)).save(frame)
    seeded = ClipEncoder("ViT-S-32", None)
    checkpoint = tmp_path / "vit-s-32.pt"
    torch.save({k: v.half() for k, v in seeded.model.state_dict().items()}, checkpoint)
    assert clip_weights_available(str(checkpoint), "ViT-S-32")[0]
    loaded = ClipEncoder("ViT-S-32", str(checkpoint))
    assert not loaded.random_weights and loaded.weights == f"local checkpoint {checkpoint}"
    assert loaded.model is not seeded.model and loaded.dim == seeded.dim == 384
    cosine = float((seeded.encode_images([frame]) @ loaded.encode_images([frame]).T)[0, 0])
    assert cosine > 0.999  # the same weights, stored in half precision
