"""Speech recognition for film audio with faster-whisper.

Film sound mixes dialogue with music and effects, which breaks Whisper's defaults in two
ways: Silero VAD at 0.5 drops quiet lines spoken over a score, and Whisper invents words
("Thank you.", repeated phrases) over music. So we run the VAD with a low threshold to keep
speech over music, decode the speech it found (laid end to end), and then drop lines that
look invented, recording each drop with its reason. Even at a low threshold Silero hears
nothing in some lines said over a loud score (the Sintel trailer's "A dangerous quest for a
lone hunter": VAD probability under 0.05 throughout), so the stretches it rejected are decoded
too, and a line heard there must also pass Whisper's own confidence rule (no-speech
probability at most 0.6 and mean log-probability at least -1.0, the thresholds Whisper's
`transcribe` uses by default) on top of the filters every line passes.
The language is voted over several speech windows spread across the film, because one
window of old or noisy audio is often misjudged.
"""

from __future__ import annotations

import bisect
import functools
import re
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import pad_or_trim
from faster_whisper.transcribe import Segment, get_compression_ratio
from faster_whisper.vad import VadOptions, get_speech_timestamps

from ..foundation.config import cpu_cores
from ..foundation.errors import MovieMemError
from ..models import model_path

Progress = Callable[[int, int], None]

SAMPLE_RATE = 16000

# Silero VAD tuned for film mixes: a low threshold keeps dialogue under music (the
# 0.5 default loses whispered or scored lines); short silences split lines; padding
# keeps word onsets. Chunks never exceed one Whisper window.
VAD = VadOptions(
    threshold=0.25,
    neg_threshold=0.1,
    min_speech_duration_ms=250,
    min_silence_duration_ms=500,
    speech_pad_ms=300,
    max_speech_duration_s=30.0,
)
# Decoding: no conditioning on earlier text (the main source of runaway repeats); greedy
# at temperature 0, re-sampled warmer only when a window's text is a loop (gzip ratio
# above 2.4), never for a low log-prob (on film audio that re-decodes music windows for
# nothing); a token cap per window, so a loop stops early while a dense window that hits
# the cap resumes at its last timestamp in the next window. Whisper's no-speech skip is
# off: the same rule runs in `_why_suppressed`, so what it removes is recorded rather
# than lost. hallucination_silence_threshold is off: it acts on silences, and the
# decoded track has none longer than GAP_S.
DECODE: dict[str, Any] = dict(
    temperature=(0.0, 0.2, 0.4, 0.6),
    best_of=3,
    compression_ratio_threshold=2.4,
    log_prob_threshold=None,
    no_speech_threshold=None,
    condition_on_previous_text=False,
    word_timestamps=True,
    without_timestamps=False,
    max_new_tokens=128,
    hallucination_silence_threshold=None,
)
NO_SPEECH_PROB = 0.6  # with AVG_LOGPROB: Whisper's "this window is not speech" rule
AVG_LOGPROB = -1.0
MIN_WORD_PROB = 0.35  # mean word probability below this: the words are guesses
COPY_MAX_PROB = 0.8  # a line repeating one from its own window must be heard this clearly
MAX_WORDS_PER_S = 8.0  # fast speech is 4-6 words/s; invented lines get crammed timings
MAX_COMPRESSION = 2.4  # gzip ratio of a line above this: the line is a loop
GAP_S = 0.4  # silence laid between speech chunks in the decoded track
MIN_RETRY_S = 0.5  # speech chunks at least this long that got no word are decoded again
MAX_WORD_GAP_S = 1.5  # words further apart than this on the film timeline are separate lines
LANG_WINDOWS = 5  # speech windows (30 s each) voted on for language detection
MIN_QUIET_S = 1.0  # stretches the VAD rejected that are at least this long are decoded in the gap pass
GAP_PASS = 2  # the attempt number of lines heard where the VAD heard no speech (0: first pass, 1: retry)

# Phrases Whisper produces over music and silence because its training data (web video
# captions) ends that way. ALWAYS ones (credits and outros, matched anywhere in a line)
# never survive; STOCK ones (a whole line) survive only with confident words.
ALWAYS_HALLUCINATED = (
    "thank you for watching", "thanks for watching", "please subscribe", "like and subscribe",
    "subscribe to my channel", "don't forget to subscribe", "see you in the next video",
    "subtitles by", "captions by", "transcribed by", "transcription by", "amara org",
)
STOCK_PHRASES = (
    "thank you", "thanks", "you", "bye", "bye bye", "okay", "oh", "so", "music", "applause",
    "see you next time", "thank you for listening",
)


@dataclass
class Transcript:
    """What ASR heard: utterances on the film timeline plus what was removed and why."""

    utterances: list[dict[str, Any]]  # {start, end, text, words: [{start, end, word, probability}]}
    language: str
    language_probability: float
    duration_s: float
    speech_s: float  # audio the VAD kept and Whisper decoded
    suppressed: list[dict[str, Any]] = field(default_factory=list)  # {start, end, text, reason}
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)  # wall seconds per step


def transcribe(
    media: Path,
    *,
    model: str | Path,
    language: str | None = None,
    compute_type: str = "int8",
    threads: int = 0,
    beam_size: int = 1,
    gaps: bool = True,
    progress: Progress | None = None,
) -> Transcript:
    """Transcribe the first audio stream of `media` (any container PyAV reads).

    `model` is an offline model name ("base", "tiny.en", see `moviemem models`) or a
    local faster-whisper folder; nothing is downloaded. `language=None` detects it by
    vote; a code ("en") skips detection. `threads=0` uses every core this process may
    run on. `gaps` also decodes what the VAD rejected (lines from there pass a stricter
    rule). `progress(done_s, total_s)` counts decoded seconds of both.
    Raises MovieMemError for media without an audio stream or a model that is not there.
    """
    clock = _Clock()
    folder = resolve_model(model)
    whisper = load_model(str(folder), compute_type, threads or cpu_cores())
    clock.lap("load_model")
    audio, bad_packets = decode_audio(Path(media))
    duration_s = round(len(audio) / SAMPLE_RATE, 3)
    clock.lap("decode_audio")
    chunks = get_speech_timestamps(audio, VAD, sampling_rate=SAMPLE_RATE)
    track = SpeechTrack(audio, chunks)
    clock.lap("vad")
    settings = {"model": str(folder), "compute_type": compute_type, "beam_size": beam_size,
                "vad": dict(vars(VAD)), "decode": dict(DECODE), "gap_s": GAP_S, "gaps": gaps}
    language, language_probability, lang_note = _language(whisper, track, language)
    clock.lap("language")
    notes = [lang_note]
    if bad_packets:
        notes.append(f"skipped {bad_packets} undecodable audio packet(s)")
    quiet = quiet_stretches(chunks, audio.size) if gaps else []
    rest = SpeechTrack(audio, quiet)
    total = max(1, round((track.audio.size + rest.audio.size) / SAMPLE_RATE))
    decoded: list[tuple[tuple[int, int], Segment, list[dict[str, Any]]]] = []
    if not chunks:
        notes.append("the VAD found no speech" + ("" if gaps else ": nothing was decoded"))
    else:
        heard = _decode(whisper, track, language, beam_size, 0, decoded, progress, total)
        clock.lap("whisper")
        # Whisper sometimes ends a 30 s window early ("nothing more is said") and skips
        # the speech after it: chunks with no word at all get a second pass of their own.
        missed = [c for i, c in enumerate(chunks) if i not in heard and c["end"] - c["start"] >= MIN_RETRY_S * SAMPLE_RATE]
        if missed:
            retry = SpeechTrack(audio, missed)
            _decode(whisper, retry, language, beam_size, 1, decoded, None, total)
            notes.append(f"decoded again {len(missed)} speech chunk(s) ({retry.speech_s:.0f} s) that the first pass skipped")
            clock.lap("whisper_retry")
    if quiet:
        _decode(whisper, rest, language, beam_size, GAP_PASS, decoded, progress, total, offset=round(track.audio.size / SAMPLE_RATE))
        clock.lap("whisper_gaps")
    lines = _LineFilter()
    for window, segment, words in sorted(decoded, key=lambda item: item[2][0]["start"]):
        lines.add(window, segment, words)
    if quiet:
        notes.append(f"decoded the {rest.speech_s:.0f} s the VAD heard as no speech: kept {lines.from_gaps} line(s) "
                     "that also pass Whisper's own confidence rule")
    if lines.dropped:
        notes.append(f"suppressed {len(lines.dropped)} of {len(decoded)} decoded line(s) as likely hallucinations")
    if progress is not None:
        progress(total, total)
    return Transcript(
        lines.kept, language, language_probability, duration_s, track.speech_s, lines.dropped, notes, settings, clock.laps
    )


def quiet_stretches(chunks: list[dict[str, int]], n_samples: int) -> list[dict[str, int]]:
    """The stretches between the VAD's speech chunks (and before the first, after the last) of at
    least MIN_QUIET_S, cut into pieces of at most one Whisper window, like the speech chunks."""
    out: list[dict[str, int]] = []
    window = round(VAD.max_speech_duration_s * SAMPLE_RATE)
    last = 0
    for chunk in [*chunks, {"start": n_samples, "end": n_samples}]:
        if chunk["start"] - last >= MIN_QUIET_S * SAMPLE_RATE:
            out += [{"start": a, "end": min(a + window, chunk["start"])} for a in range(last, chunk["start"], window)]
        last = max(last, chunk["end"])
    return out


def _decode(
    whisper: WhisperModel,
    track: SpeechTrack,
    language: str,
    beam_size: int,
    attempt: int,
    out: list[tuple[tuple[int, int], Segment, list[dict[str, Any]]]],
    progress: Progress | None,
    total: int,
    offset: int = 0,
) -> set[int]:
    """Decode `track`, appending ((attempt, window), segment, line words) to `out`.

    Progress counts `offset` seconds as already done. Returns the indices of the track's
    chunks that got at least one word.
    """
    heard: set[int] = set()
    segments, _ = whisper.transcribe(track.audio, language=language, beam_size=beam_size, vad_filter=False, **DECODE)
    for segment in segments:
        for words, chunks in _lines(track, segment):
            out.append(((attempt, segment.seek), segment, words))
            heard |= chunks
        if progress is not None:
            progress(min(total, offset + int(segment.end)), total)
    return heard


class _Clock:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


class SpeechTrack:
    """The VAD's speech chunks laid end to end, GAP_S of silence apart, with the way back.

    Whisper decodes this instead of the film: music-only stretches cost nothing. The
    short silences keep a chunk's first word from being aligned into the previous chunk.
    """

    def __init__(self, audio: np.ndarray, chunks: list[dict[str, int]]):
        gap = np.zeros(round(GAP_S * SAMPLE_RATE), np.float32)
        pieces: list[np.ndarray] = []
        self.film_start: list[float] = []
        self.track_start: list[float] = []
        self.length: list[float] = []
        at = 0
        for chunk in chunks:
            if pieces:
                pieces.append(gap)
                at += gap.size
            piece = audio[chunk["start"] : chunk["end"]]
            self.film_start.append(chunk["start"] / SAMPLE_RATE)
            self.track_start.append(at / SAMPLE_RATE)
            self.length.append(piece.size / SAMPLE_RATE)
            pieces.append(piece)
            at += piece.size
        self.audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        self.speech_s = round(sum(self.length), 3)

    def chunk_of(self, start: float, end: float) -> int:
        """The chunk a word spanning [start, end] of the track overlaps most."""
        first = max(0, bisect.bisect_right(self.track_start, start) - 1)
        candidates = range(first, min(first + 2, len(self.track_start)))

        def overlap(i: int) -> float:
            return min(end, self.track_start[i] + self.length[i]) - max(start, self.track_start[i])

        return max(candidates, key=overlap)

    def to_film(self, t: float, chunk: int) -> float:
        """Track time `t` as film time, clamped into speech chunk `chunk`."""
        offset = min(max(t - self.track_start[chunk], 0.0), self.length[chunk])
        return round(float(self.film_start[chunk] + offset), 3)


def resolve_model(model: str | Path) -> Path:
    """A local faster-whisper folder: the path itself, or a prepared offline model by name."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise MovieMemError(f"{path} is not a faster-whisper model folder (no model.bin)")
        return path
    name = str(model)
    return model_path(name if name.startswith("whisper-") else f"whisper-{name}")


@functools.lru_cache(maxsize=4)
def load_model(path: str, compute_type: str, threads: int) -> WhisperModel:
    """One WhisperModel per (folder, compute type, threads) per process."""
    try:
        return WhisperModel(path, device="cpu", compute_type=compute_type, cpu_threads=threads, local_files_only=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise MovieMemError(f"cannot load whisper model {path}: {exc}") from exc


def decode_audio(media: Path) -> tuple[np.ndarray, int]:
    """(first audio stream as 16 kHz mono float32, number of undecodable packets skipped).

    ffmpeg does the downmix and resampling. A corrupt packet costs its few milliseconds,
    not the rest of the film; the caller reports how many there were.
    """
    try:
        container = av.open(str(media), metadata_errors="ignore")
    except (OSError, av.error.FFmpegError) as exc:
        raise MovieMemError(f"cannot open {media}: {exc}") from exc
    with container:
        if not container.streams.audio:
            raise MovieMemError(f"{media} has no audio stream")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        parts: list[np.ndarray] = []
        bad = 0
        for packet in container.demux(stream):
            try:
                frames = packet.decode()
            except av.error.InvalidDataError:
                bad += 1
                continue
            for frame in frames:
                frame.pts = None  # resample by sample count; gaps in pts are not ours to fill
                parts.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(frame))
        parts.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(None))
    audio = np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, np.float32)
    return audio, bad


def _language(whisper: WhisperModel, track: SpeechTrack, forced: str | None) -> tuple[str, float, str]:
    """(language, probability, note): forced, implied by an English-only model, or voted."""
    multilingual = whisper.model.is_multilingual
    if forced is not None:
        if not multilingual and forced != "en":
            raise MovieMemError(f"this whisper model is English-only; it cannot transcribe language {forced!r}")
        return forced, 1.0, f"language {forced!r} was given, not detected"
    if not multilingual:
        return "en", 1.0, "English-only model: language 'en' assumed"
    speech = track.audio
    window = whisper.feature_extractor.n_samples
    starts = list(range(0, len(speech), window))
    if len(starts) > 1 and len(speech) - starts[-1] < window // 3:
        starts.pop()  # a short tail says little
    if not starts:
        return "en", 0.0, "no speech to detect the language from: 'en' assumed"
    if len(starts) > LANG_WINDOWS:  # evenly spread, first and last included
        starts = [starts[round(i * (len(starts) - 1) / (LANG_WINDOWS - 1))] for i in range(LANG_WINDOWS)]
    totals: dict[str, float] = defaultdict(float)
    for start in starts:
        features = whisper.feature_extractor(speech[start : start + window])
        encoded = whisper.encode(pad_or_trim(features[..., : whisper.feature_extractor.nb_max_frames]))
        for token, prob in whisper.model.detect_language(encoded)[0]:
            totals[token[2:-2]] += prob / len(starts)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    language, prob = ranked[0]
    runner = f", then {ranked[1][0]} {ranked[1][1]:.2f}" if len(ranked) > 1 else ""
    note = f"language detected by vote over {len(starts)} speech window(s): {language} {prob:.2f}{runner}"
    return language, round(prob, 4), note


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w' ]+", " ", text.lower().replace("’", "'")).split())


def _repeated_ngram(words: list[str], times: int = 4) -> bool:
    """True when some 1-4 word sequence repeats back to back `times` times."""
    for n in range(1, 5):
        for i in range(0, len(words) - n * times + 1):
            gram = words[i : i + n]
            if all(words[i + k * n : i + (k + 1) * n] == gram for k in range(1, times)):
                return True
    return False


def _why_suppressed(
    segment: Segment,
    text: str,
    words: list[dict[str, Any]],
    previous: dict[str, Any] | None = None,
    earlier_in_window: Collection[str] = (),
    vad_heard: bool = True,
) -> str | None:
    """Reason to drop one line (`text`, `words`) decoded in `segment`, or None to keep it.

    `previous` is the line decoded just before; `earlier_in_window` the normalised lines
    already decoded from the same 30 s Whisper window; `vad_heard` False for a line from
    a stretch the VAD heard as no speech.
    """
    norm = _norm(text)
    n_words = len(words)
    mean_prob = sum(w["probability"] for w in words) / n_words if words else 0.0
    duration = words[-1]["end"] - words[0]["start"] if words else 0.0
    if not norm:
        return "no words"
    if segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < AVG_LOGPROB:
        return f"no speech (no_speech_prob {segment.no_speech_prob:.2f}, avg_logprob {segment.avg_logprob:.2f})"
    if not vad_heard and (segment.no_speech_prob > NO_SPEECH_PROB or segment.avg_logprob < AVG_LOGPROB):
        return (f"heard where the VAD heard no speech, below Whisper's own confidence rule "
                f"(no_speech_prob {segment.no_speech_prob:.2f}, avg_logprob {segment.avg_logprob:.2f})")
    if any(phrase in norm for phrase in ALWAYS_HALLUCINATED):
        return "known hallucination phrase"
    if norm in STOCK_PHRASES and (mean_prob < 0.7 or segment.no_speech_prob > 0.3):
        return f"weakly supported stock phrase (word probability {mean_prob:.2f})"
    if get_compression_ratio(text) > MAX_COMPRESSION or _repeated_ngram(norm.split()):
        return "repetition loop"
    if mean_prob < MIN_WORD_PROB:
        return f"low word probability {mean_prob:.2f}"
    if previous is not None and _norm(previous["text"]) == norm and words[0]["start"] - previous["end"] < 2.0:
        return "repeat of the line just before"
    if n_words >= 3 and norm in earlier_in_window and mean_prob < COPY_MAX_PROB:
        return f"copy of an earlier line in the same window (word probability {mean_prob:.2f})"
    if n_words >= 3 and n_words > MAX_WORDS_PER_S * duration:
        return f"{n_words} words in {duration:.2f} s: faster than anyone speaks"
    return None


def _lines(track: SpeechTrack, segment: Segment) -> list[tuple[list[dict[str, Any]], set[int]]]:
    """The segment's words on the film timeline, cut where they are far apart, each line
    with the speech chunks its words fall in.

    One Whisper segment can span two speech chunks a minute apart in the film; it
    becomes two lines. A word belongs to the chunk it overlaps most.
    """
    lines: list[tuple[list[dict[str, Any]], set[int]]] = []
    for w in segment.words or []:
        chunk = track.chunk_of(w.start, w.end)
        word = {
            "start": track.to_film(w.start, chunk),
            "end": track.to_film(w.end, chunk),
            "word": w.word,
            "probability": round(float(w.probability), 4),
        }
        if lines and word["start"] - lines[-1][0][-1]["end"] <= MAX_WORD_GAP_S:
            lines[-1][0].append(word)
            lines[-1][1].add(chunk)
        else:
            lines.append(([word], {chunk}))
    return lines


class _LineFilter:
    """Sorts decoded lines into kept utterances and suppressed lines (with reasons)."""

    def __init__(self) -> None:
        self.kept: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self._window_lines: dict[tuple[int, int], set[str]] = defaultdict(set)
        self.from_gaps = 0  # kept lines heard where the VAD heard no speech

    def add(self, window: tuple[int, int], segment: Segment, words: list[dict[str, Any]]) -> None:
        start, end = words[0]["start"], words[-1]["end"]
        text = "".join(w["word"] for w in words).strip()
        previous = max([*self.kept[-1:], *self.dropped[-1:]], key=lambda line: line["end"], default=None)
        earlier = self._window_lines[window]
        reason = _why_suppressed(segment, text, words, previous, earlier, vad_heard=window[0] != GAP_PASS)
        earlier.add(_norm(text))
        if reason is not None:
            self.dropped.append({"start": start, "end": end, "text": text, "reason": reason})
            return
        for w in words:
            w["word"] = w["word"].strip()
        self.kept.append({"start": start, "end": end, "text": text, "words": words})
        self.from_gaps += window[0] == GAP_PASS
