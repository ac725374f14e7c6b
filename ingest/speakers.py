"""The speakers stage: who speaks each transcript line, as voice clusters over the whole film.

Each line (ASR segment or subtitle cue) long enough to carry a voice is embedded with
Resemblyzer's GE2E voice encoder (its weights ship in the wheel, so this runs offline). The
embeddings are centred on the film's mean voice (what every line shares: the recording, the
room, the codec) and clustered by average-linkage agglomerative clustering on cosine distance;
the number of speakers is estimated, not given: merging stops at a cosine distance of `threshold`
(0.8, chosen on the synthetic film, seed 7, with its truth lines; a silhouette-chosen k split it
only by sex). When that cut does not separate the voices (silhouette below `min_silhouette`, as
for a single voice whose centred embeddings are noise) the film has one speaker. A line's
confidence is its cosine similarity to its cluster's centroid.

Spans: ASR line times are loose (on the synthetic film a line often starts in the pause or the
tail of the line before and ends before its last syllable: 9-11% missed speech and 6-7% false
alarm). ASR lines are first moved onto the speech Silero VAD hears (`fit_to_speech`), which halves
the diarization error on seeds 7, 11, 12, 13. Lines too short to cluster take their nearest
voice with half the confidence (`short_nearest`: less missed speech on every seed).

Turns: a line long enough to hold two voices (two parts of `part_s`, two words) is cut at the
VAD's pauses inside it, else at its widest word gaps (at most `max_cuts`); each part's voice is
the mean of the line's own encoder windows (1.6 s) lying mostly inside it, kept from clustering,
so no part is encoded again; it takes its nearest centroid, and the line is split where
neighbouring parts go to different voices by at least `margin` (0.2: at 0.1 weak disagreements
split lines that are one voice and naming fell on seed 12). Each voice part is one VoiceRow with
its own span and words. Encoding each part anew cost about 7 s more per 10-minute film (16-17 s
for the stage instead of 9.4-9.8 s) for the same splits, and on seed 12 two wrong ones (DER 10.6%
instead of 10.0%).

Subtitle cues have no word times, and real files often put two speakers in one cue with no dash.
A cue long enough for two voices is cut at the VAD's pauses inside it (the VAD listens only inside
such cues when the film has no ASR lines), else evenly; when its pieces lie farther apart than
clusters merge it is clustered by its pieces (its whole embedding is a mix of two voices), and it
is split like an ASR line where its pieces' voices change. Its text is cut at the sentence boundary
(else comma) nearest the change by word times estimated from its characters; a change with no
boundary within 1 s leaves the cue whole. Cue times are kept. On the synthetic film with adjacent
cues by different speakers merged (bench/characters.py --merge-cues, seed 7) DER fell from 57.4%
to 15.5%; with the truth cues it stays at 0.0%.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MovieMemError
from ..memory.schema import VoiceRow
from .stage import Ctx, Outcome, Stage

SR = 16000
MODEL = "resemblyzer-0.1.4"
SHORT_CONFIDENCE = 0.5  # a line too short to cluster gets its nearest voice, trusted half as much


@dataclass(frozen=True)
class SpeakerParams:
    min_s: float = 0.8  # shorter lines carry too little voice to embed
    threshold: float = 0.8  # cosine distance between centred voices at which clusters stop merging
    max_speakers: int = 20
    min_silhouette: float = 0.1
    short_nearest: bool = True  # lines shorter than min_s take their nearest voice (low confidence)
    short_s: float = 0.3  # ... when at least this long
    part_s: float = 1.0  # the shortest stretch of a line examined for a voice of its own
    max_cuts: int = 2  # candidate turn boundaries per line
    fit_speech: bool = True  # line spans moved onto the VAD's speech (see fit_to_speech)
    margin: float = 0.2  # how much nearer its own voice than its neighbour's a part must be to start a turn
    mixed_cues: bool = True  # a cue whose pieces sound like two voices is clustered by its pieces (mixed_pieces)


def resemblyzer_missing() -> str | None:
    """Why the voice encoder cannot run here, or None."""
    try:
        import resemblyzer  # noqa: F401
    except ImportError as exc:
        return f"resemblyzer is not installed ({exc}); pip install resemblyzer==0.1.4"
    return None


def load_audio(path: Path, sr: int = SR) -> np.ndarray:
    """The film's audio as mono float32 at `sr` Hz."""
    proc = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", str(path), "-vn", "-ac", "1", "-ar", str(sr),
                           "-f", "f32le", "-"], capture_output=True)
    if proc.returncode != 0:
        raise MovieMemError(f"ffmpeg could not read the audio of {path}: {proc.stderr.decode(errors='replace')[:200]}")
    return np.frombuffer(proc.stdout, dtype=np.float32)


@dataclass(frozen=True)
class Partials:
    """A span's voice embeddings per encoder window (Resemblyzer: 1.6 s windows every 0.77 s) and
    each window's times (clipped to the span: the last window is zero-padded)."""

    emb: np.ndarray  # (n, dim), unit rows
    start: np.ndarray  # (n,) seconds
    end: np.ndarray

    def within(self, a: float, b: float, share: float = 0.5) -> np.ndarray | None:
        """The voice of [a, b] from the windows lying mostly inside it (at least `share` of each),
        weighted by how much of them lies inside; None when no window does."""
        inside = np.clip(np.minimum(self.end, b) - np.maximum(self.start, a), 0.0, None)
        frac = inside / np.maximum(self.end - self.start, 1e-9)
        w = np.where(frac >= share, frac, 0.0)
        if not w.any():
            return None
        v = (w[:, None] * self.emb).sum(axis=0)
        return np.asarray(v / max(float(np.linalg.norm(v)), 1e-9), dtype=np.float32)


class VoiceEmbedder:
    """Resemblyzer's voice encoder on the CPU (one thread: it is small, and ingest runs beside other work)."""

    def __init__(self) -> None:
        import torch
        from resemblyzer import VoiceEncoder

        torch.set_num_threads(1)
        self.encoder = VoiceEncoder("cpu", verbose=False)

    def embed(self, wav: np.ndarray, spans: list[tuple[float, float]],
              progress: Callable[[int, int | None], None] | None = None, min_samples: int = SR // 2,
              partials: list[Partials | None] | None = None) -> np.ndarray:
        """One embedding per span; zeros for spans shorter than `min_samples`. With `partials`, each
        span's window embeddings are appended to it as well (None for a span not embedded): the
        encoder computes them anyway, the span's embedding is their mean."""
        out = np.zeros((len(spans), 256), dtype=np.float32)
        for i, (a, b) in enumerate(spans):
            seg = wav[int(a * SR): int(b * SR)]
            got: Partials | None = None
            if len(seg) >= max(min_samples, 1):
                out[i], each, slices = self.encoder.embed_utterance(seg, return_partials=True)
                got = Partials(np.asarray(each, dtype=np.float32), np.array([a + s.start / SR for s in slices]),
                               np.array([min(a + s.stop / SR, b) for s in slices]))
            if partials is not None:
                partials.append(got)
            if progress and i % 20 == 0:
                progress(i, len(spans))
        return out


def centred(emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The film's mean voice (what every line shares: the recording, the room, the codec; zeros for
    two rows or fewer, whose mean is mostly the voices themselves) and the rows less it, as unit rows."""
    mean = emb.mean(axis=0) if len(emb) > 2 else np.zeros(emb.shape[1], dtype=emb.dtype)
    x = emb - mean
    return mean, x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)


@dataclass(frozen=True)
class VoiceSpace:
    """The clustered voices: the film's mean voice (subtracted before comparing) and each
    cluster's unit centroid, so a new stretch of speech can be given its nearest voice."""

    mean: np.ndarray
    centroids: np.ndarray  # (k, dim), unit rows

    def similarity(self, emb: np.ndarray) -> np.ndarray:
        """(n, k) cosine similarity of each embedding, centred, to each centroid."""
        x = emb - self.mean
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
        return np.asarray(x @ self.centroids.T)

    @classmethod
    def fit(cls, emb: np.ndarray, labels: np.ndarray) -> VoiceSpace:
        """The space of clustered embeddings (`centred`) with each cluster's unit centroid."""
        mean, x = centred(emb)
        cents = np.stack([x[labels == c].mean(axis=0) for c in range(int(labels.max()) + 1)])
        return cls(mean, cents / np.maximum(np.linalg.norm(cents, axis=1, keepdims=True), 1e-9))


def cluster_voices(emb: np.ndarray, params: SpeakerParams = SpeakerParams()) -> tuple[np.ndarray, np.ndarray, float]:
    """Cluster labels (0..k-1, numbered by first appearance), each row's similarity to its
    centroid, and the chosen cut's silhouette (0.0 for a single speaker)."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import silhouette_score

    n = len(emb)
    if n < 2:
        return np.zeros(n, dtype=int), np.ones(n), 0.0
    _, x = centred(emb)
    best = AgglomerativeClustering(n_clusters=None, distance_threshold=params.threshold, metric="cosine",
                                   linkage="average").fit_predict(x)
    k = int(best.max()) + 1
    best_s = float(silhouette_score(x, best, metric="cosine")) if 1 < k < n else 0.0
    if k > params.max_speakers or best_s < params.min_silhouette:
        best, best_s = np.zeros(n, dtype=int), 0.0
    order = {c: i for i, c in enumerate(dict.fromkeys(best.tolist()))}
    labels = np.array([order[c] for c in best], dtype=int)
    conf = VoiceSpace.fit(emb, labels).similarity(emb)[np.arange(n), labels]
    return labels, conf, best_s


def diarize(wav: np.ndarray, spans: list[tuple[float, float]], params: SpeakerParams = SpeakerParams(),
            embedder: VoiceEmbedder | None = None,
            progress: Callable[[int, int | None], None] | None = None) -> tuple[list[int], list[float], dict[str, Any]]:
    """A voice cluster per span (-1 when shorter than params.min_s) and a summary."""
    space, cluster, confidence, info = _cluster_spans(wav, spans, params, embedder or VoiceEmbedder(), progress)
    return cluster, confidence, info


def mixed_pieces(own: Partials | None, pieces: Sequence[tuple[float, float]], mean: np.ndarray,
                 threshold: float) -> np.ndarray | None:
    """The voices of a line's pieces when two of them lie farther apart (cosine distance, centred on
    the film's mean voice) than clusters are merged: the line holds two voices, and its whole
    embedding, their mix, is neither's. None otherwise (one voice, or fewer than two pieces heard)."""
    got = [g for g in ([own.within(p, q) for p, q in pieces] if own is not None else []) if g is not None]
    if len(got) < 2:
        return None
    x = np.stack(got) - mean
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    return np.stack(got) if float((1.0 - x @ x.T).max()) > threshold else None


def _cluster_spans(wav: np.ndarray, spans: list[tuple[float, float]], params: SpeakerParams, embedder: VoiceEmbedder,
                   progress: Callable[[int, int | None], None] | None = None,
                   windows: list[Partials | None] | None = None,
                   pieces: dict[int, list[tuple[float, float]]] | None = None
                   ) -> tuple[VoiceSpace | None, list[int], list[float], dict[str, Any]]:
    """Clusters as in `diarize`; with `windows` (a list), it is filled with each span's window
    embeddings. With `pieces` (span index -> its pieces), a span whose pieces sound like two voices
    (`mixed_pieces`) is clustered by its pieces, not whole, and takes the voice nearest its whole
    embedding."""
    keep = [i for i, (a, b) in enumerate(spans) if b - a >= params.min_s]
    got: list[Partials | None] = []
    emb = embedder.embed(wav, [spans[i] for i in keep], progress, partials=got)
    if windows is not None:
        windows[:] = [None] * len(spans)
        for i, w in zip(keep, got):
            windows[i] = w
    ok = [j for j in range(len(keep)) if np.any(emb[j])]
    mean = centred(emb[ok])[0] if ok else np.zeros(emb.shape[1], dtype=emb.dtype)
    mixed = {j: m for j in ok if pieces and keep[j] in pieces
             and (m := mixed_pieces(got[j], pieces[keep[j]], mean, params.threshold)) is not None}
    whole = [j for j in ok if j not in mixed]
    units = np.concatenate([emb[whole]] + list(mixed.values())) if ok else emb[ok]
    labels, conf, sil = cluster_voices(units, params)
    cluster, confidence = [-1] * len(spans), [0.0] * len(spans)
    for j, lab, c in zip(whole, labels, conf):
        cluster[keep[j]], confidence[keep[j]] = int(lab), round(float(c), 3)
    k = int(labels.max()) + 1 if len(labels) else 0
    space = VoiceSpace.fit(units, labels) if k else None
    if space is not None and mixed:
        sim = space.similarity(emb[list(mixed)])
        for j, s in zip(mixed, sim):
            cluster[keep[j]], confidence[keep[j]] = int(s.argmax()), round(float(s.max()), 3)
    info = {"speakers": k, "silhouette": round(sil, 3), "embedded": len(ok), "lines": len(spans), "mixed": len(mixed)}
    return space, cluster, confidence, info


@dataclass(frozen=True)
class Word:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Span:
    """A transcript line as the speakers stage sees it: its times and, for ASR lines, its words;
    for a subtitle cue that may be split by voice, its text (its words get estimated times)."""

    idx: int
    start: float
    end: float
    words: tuple[Word, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class Part:
    """One voice inside a transcript line: the whole line, or one of its speaker turns.
    `first_word`..`last_word` index the line's words (-1 when the line has none)."""

    utt_idx: int
    part: int
    start: float
    end: float
    cluster: int
    confidence: float
    first_word: int = -1
    last_word: int = -1


def speech_regions(wav: np.ndarray) -> list[tuple[float, float]] | None:
    """Where the film's audio holds speech, by Silero VAD with short pauses kept as pauses (a
    turn change in dialogue is a pause of a few hundred ms); None without faster-whisper. One pass
    over the film (1.2-1.5 s for 10 minutes; listening only around the ASR lines saved 0.5 s but
    moved the clustering: seed 11's confusion rose from 0.8% to 3.7%)."""
    try:
        from faster_whisper.vad import VadOptions, get_speech_timestamps
    except ImportError:
        return None
    opts = VadOptions(threshold=0.5, min_speech_duration_ms=150, min_silence_duration_ms=200, speech_pad_ms=30)
    return [(c["start"] / SR, c["end"] / SR) for c in get_speech_timestamps(wav, opts, sampling_rate=SR)]


def fit_to_speech(spans: list[tuple[float, float]], regions: list[tuple[float, float]], sliver_s: float = 0.5,
                  reach_s: float = 0.5) -> list[tuple[float, float]]:
    """Line spans moved onto the speech the VAD heard. ASR times are loose (a line often starts in
    the silence or the tail of the line before, and ends before its last syllable); the VAD's are
    tight. Each speech region goes to the lines overlapping it, except a line that only grazes it
    (less than `sliver_s`, when the line has more elsewhere), and is shared at the midpoint between
    their times; a line's span becomes the hull of its pieces, reaching at most `reach_s` beyond
    its own times. A line the VAD missed keeps its times."""
    pieces: list[list[tuple[float, float]]] = [[] for _ in spans]
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    j0 = 0
    for ra, rb in regions:
        while j0 < len(order) and spans[order[j0]][1] <= ra:
            j0 += 1
        over = []
        for i in order[j0:]:
            a, b = spans[i]
            if a >= rb:
                break
            ov = min(b, rb) - max(a, ra)
            if ov > 0:
                over.append((i, ov))
        keep = [i for i, ov in over if ov >= min(sliver_s, b_a(spans[i]) - 1e-9) or ov >= 0.5 * b_a(spans[i])]
        if not keep and over:
            keep = [max(over, key=lambda x: x[1])[0]]
        cut = ra
        for k, i in enumerate(keep):
            nxt = (spans[i][1] + spans[keep[k + 1]][0]) / 2 if k + 1 < len(keep) else rb
            nxt = min(max(nxt, cut), rb)
            if nxt > cut:
                pieces[i].append((cut, nxt))
            cut = nxt
    out = []
    for (a, b), mine in zip(spans, pieces):
        if not mine:
            out.append((a, b))
            continue
        na, nb = max(min(p for p, _ in mine), a - reach_s), min(max(q for _, q in mine), b + reach_s)
        out.append((na, nb) if nb > na else (a, b))
    return out


def b_a(span: tuple[float, float]) -> float:
    return span[1] - span[0]


def cut_candidates(words: tuple[Word, ...], a: float, b: float, part_s: float, max_cuts: int,
                   pauses: Sequence[tuple[float, float]] = ()) -> list[tuple[float, int]]:
    """Where a line may change voice, as (time, index of the last word before it): first the
    pauses the VAD heard inside the line (a turn change is a pause; ASR punctuation and word
    times often put the boundary a word off), then the widest word gaps (a sentence end counts as
    a wider gap); at most `max_cuts`, every part at least `part_s` long and holding a word.
    Sorted by time."""
    mids = [(w.start + w.end) / 2 for w in words]

    def last_before(t: float) -> int:
        return sum(1 for m in mids if m < t) - 1

    scored = [(1.0 + (q - p), (p + q) / 2) for p, q in pauses if a < p and q < b]
    for i in range(len(words) - 1):
        gap = max(words[i + 1].start - words[i].end, 0.0)
        bonus = 0.25 if words[i].text.rstrip()[-1:] in ".?!" else 0.0
        scored.append((gap + bonus, (words[i].end + words[i + 1].start) / 2))
    chosen: list[tuple[float, int]] = []
    for _score, t in sorted(scored, key=lambda s: (-s[0], s[1])):
        if len(chosen) >= max_cuts:
            break
        i = last_before(t)
        if not 0 <= i < len(words) - 1 or any(i == j for _, j in chosen):
            continue
        edges = sorted([a, b] + [c for c, _ in chosen] + [t])
        if min(y - x for x, y in zip(edges, edges[1:])) >= part_s:
            chosen.append((t, i))
    return sorted(chosen)


def pauses_in(regions: Sequence[tuple[float, float]], a: float, b: float) -> list[tuple[float, float]]:
    """The silences between speech regions that lie inside [a, b]."""
    return [(p, q) for (_, p), (q, _) in zip(regions, regions[1:]) if a < p and q < b]


def turns_of(sim: np.ndarray, weight: np.ndarray, margin: float) -> list[tuple[int, int, int]]:
    """Speaker turns from the parts of one line: (first part, last part, cluster) per turn.

    Each part goes to its nearest centroid; a cut between adjacent parts is kept only where they
    go to different clusters and each part is nearer its own than the other's by `margin` (short
    parts are noisy: a weak disagreement is no turn). A turn's cluster is the nearest to its parts'
    length-weighted mean similarity."""
    lab = sim.argmax(axis=1)
    cuts = [j for j in range(len(lab) - 1)
            if lab[j] != lab[j + 1] and sim[j, lab[j]] - sim[j, lab[j + 1]] >= margin
            and sim[j + 1, lab[j + 1]] - sim[j + 1, lab[j]] >= margin]
    bounds = [0] + [j + 1 for j in cuts] + [len(lab)]
    turns: list[tuple[int, int, int]] = []
    for p, q in zip(bounds, bounds[1:]):
        c = int((weight[p:q, None] * sim[p:q]).sum(axis=0).argmax())
        if turns and turns[-1][2] == c:
            turns[-1] = (turns[-1][0], q - 1, c)
        else:
            turns.append((p, q - 1, c))
    return turns


def speech_in(wav: np.ndarray, a: float, b: float) -> list[tuple[float, float]] | None:
    """Speech regions inside [a, b], the VAD run on that stretch alone (a cue-only film needs no
    pass over the whole film: cue times are kept, only long cues are listened to)."""
    got = speech_regions(wav[int(a * SR): int(b * SR)])
    return None if got is None else [(a + p, a + q) for p, q in got]


def even_cuts(a: float, b: float, part_s: float, max_cuts: int) -> list[float]:
    """Evenly spaced cut points for a line with no pause to cut at: as many parts as fit, at least
    `part_s` long each, at most `max_cuts` + 1."""
    n = min(max_cuts + 1, int((b - a) / part_s + 1e-9))
    return [a + (b - a) * k / n for k in range(1, n)] if n >= 2 else []


def pause_cuts(a: float, b: float, pauses: Sequence[tuple[float, float]], part_s: float, max_cuts: int) -> list[float]:
    """The middles of the widest pauses inside [a, b] (at most `max_cuts`), every part at least
    `part_s` long. Sorted by time."""
    chosen: list[float] = []
    for p, q in sorted(pauses, key=lambda x: (x[0] - x[1], x[0])):
        t = (p + q) / 2
        edges = sorted([a, b, t] + chosen)
        if len(chosen) < max_cuts and min(y - x for x, y in zip(edges, edges[1:])) >= part_s:
            chosen.append(t)
    return sorted(chosen)


def cue_cuts(a: float, b: float, speech: Sequence[tuple[float, float]] | None, params: SpeakerParams) -> list[float]:
    """Where a cue (no word times) may change voice: the VAD's pauses inside it, else even cuts."""
    return (pause_cuts(a, b, pauses_in(speech or [], a, b), params.part_s, params.max_cuts)
            or even_cuts(a, b, params.part_s, params.max_cuts))


def spread_words(text: str, a: float, b: float, speech: Sequence[tuple[float, float]] = ()) -> tuple[Word, ...]:
    """A cue's words with estimated times: its characters spread evenly over the cue's speech (the
    VAD's regions inside [a, b]; the whole cue when it heard none), a word taking its length plus
    one (the space) in characters."""
    tokens = text.split()
    inside = [(max(p, a), min(q, b)) for p, q in speech if min(q, b) > max(p, a)] or [(a, b)]
    total = sum(q - p for p, q in inside)
    weights = np.array([len(t) + 1 for t in tokens], dtype=float)
    bounds = np.concatenate([[0.0], np.cumsum(weights) / max(weights.sum(), 1.0) * total])

    def at(x: float, after: bool) -> float:  # the time `x` seconds into the cue's speech
        for p, q in inside:
            if x < q - p or (not after and x <= q - p):
                return p + x
            x -= q - p
        return inside[-1][1]

    return tuple(Word(at(float(bounds[i]), True), at(float(bounds[i + 1]), False), t) for i, t in enumerate(tokens))


SENTENCE_END = ".?!\u2026"
CLOSERS = "\"')]\u201d\u2019"


def text_cut(words: Sequence[Word], t: float, reach_s: float = 1.0) -> int | None:
    """Where to cut a cue's text for a change of voice at `t`: the index of the last word before
    the sentence boundary ('.', '?', '!' then a space) nearest `t` by the words' (estimated)
    times, else before the nearest comma; None when neither lies within `reach_s`."""
    for marks in (SENTENCE_END, ","):
        near = [(abs((words[i].end + words[i + 1].start) / 2 - t), i) for i in range(len(words) - 1)
                if words[i].text.rstrip(CLOSERS)[-1:] in marks]
        near = [x for x in near if x[0] <= reach_s]
        if near:
            return min(near)[1]
    return None


def voice_turns(own: Partials | None, space: VoiceSpace, edges: Sequence[float],
                margin: float) -> tuple[list[tuple[int, int, int]], np.ndarray, np.ndarray] | None:
    """The turns (`turns_of`) of a line cut into pieces at `edges` (its start, its cuts, its end),
    with each piece's similarity to each voice and its length; a piece's voice is the line's own
    encoder windows lying mostly inside it (no new encoding). None when a piece has no window."""
    got = [own.within(p, q) for p, q in zip(edges, edges[1:])] if own is not None else []
    if len(got) != len(edges) - 1 or any(g is None for g in got):
        return None  # a piece no window covers: no turn can be told
    sim, width = space.similarity(np.stack([g for g in got if g is not None])), np.diff(np.asarray(edges))
    return turns_of(sim, width, margin), sim, width


def _turn_confidence(sim: np.ndarray, width: np.ndarray, p: int, q: int, cl: int) -> float:
    w = width[p:q + 1]
    return round(float((w * sim[p:q + 1, cl]).sum() / w.sum()), 3)


def split_worded(ln: Span, a: float, b: float, own: Partials | None, space: VoiceSpace, params: SpeakerParams,
                 pauses: Sequence[tuple[float, float]]) -> list[Part] | None:
    """An ASR line's speaker turns, cut at its VAD pauses or widest word gaps (`cut_candidates`);
    None when it has no cut or one voice."""
    cuts = cut_candidates(ln.words, a, b, params.part_s, params.max_cuts, pauses)
    if not cuts:
        return None
    edges = [a] + [t for t, _ in cuts] + [b]
    first = [0] + [i + 1 for _, i in cuts]
    last = [i for _, i in cuts] + [len(ln.words) - 1]
    got = voice_turns(own, space, edges, params.margin)
    if got is None or len(got[0]) < 2:
        return []
    turns, sim, width = got
    return [Part(ln.idx, k, edges[p], edges[q + 1], cl, _turn_confidence(sim, width, p, q, cl), first[p], last[q])
            for k, (p, q, cl) in enumerate(turns)]


def split_cue(ln: Span, a: float, b: float, own: Partials | None, space: VoiceSpace, params: SpeakerParams,
              speech: Sequence[tuple[float, float]] | None) -> tuple[list[Part] | None, bool]:
    """A subtitle cue's speaker turns and whether a change of voice found no text boundary.

    No word times: the cue is cut at the VAD's pauses inside it, else at evenly spaced points;
    its pieces take voices as an ASR line's do (`voice_turns`). Its words get times by being
    spread over its speech (`spread_words`), and its text is cut at the sentence boundary (else
    comma) nearest each change of voice (`text_cut`); with none within 1 s the cue stays whole.
    Where the cut was a pause, one turn ends where it starts and the next begins where it ends,
    else both at the text boundary's estimated time; the cue's own start and end are kept (people
    timed them). Parts index the cue's
    whitespace-separated words (`first_word`, `last_word`). None: not examined (no cut)."""
    pauses = pauses_in(speech or [], a, b)
    cuts = cue_cuts(a, b, speech, params)
    if not cuts:
        return None, False
    edges = [a] + cuts + [b]
    got = voice_turns(own, space, edges, params.margin)
    if got is None or len(got[0]) < 2:
        return [], False
    turns, sim, width = got
    words = spread_words(ln.text, a, b, speech or [])
    ends: list[int] = []
    gaps: list[tuple[float, float]] = []  # where one turn ends and the next begins
    for (_, q, _), _nxt in zip(turns, turns[1:]):
        t = edges[q + 1]
        i = text_cut(words, t)
        if i is None or (ends and i <= ends[-1]):
            return [], True
        ends.append(i)
        pause = next(((p, r) for p, r in pauses if p < t < r), None)  # the silence between the turns is neither's
        mid = (words[i].end + words[i + 1].start) / 2
        gaps.append(pause or (mid, mid))
    first, last = [0] + [i + 1 for i in ends], ends + [len(words) - 1]
    starts, stops = [a] + [r for _, r in gaps], [p for p, _ in gaps] + [b]
    if any(y <= x for x, y in zip(starts, stops)) or any(y < x for x, y in zip(stops, starts[1:])):
        return [], True
    return [Part(ln.idx, k, starts[k], stops[k], cl, _turn_confidence(sim, width, p, q, cl), first[k], last[k])
            for k, (p, q, cl) in enumerate(turns)], False


def voice_parts(wav: np.ndarray, lines: list[Span], params: SpeakerParams = SpeakerParams(),
                embedder: VoiceEmbedder | None = None,
                progress: Callable[[int, int | None], None] | None = None) -> tuple[list[Part], dict[str, Any]]:
    """Voice parts of every line: lines are clustered whole, then each line long enough to hold two
    voices (two parts of `part_s`, two words) is cut into pieces, each piece given the voice of the
    line's encoder windows inside it and its nearest centroid, and the line split into turns where
    the voice changes (`voice_turns`): an ASR line at its VAD pauses or widest word gaps
    (`split_worded`), a subtitle cue at its VAD pauses or evenly, its text at the sentence boundary
    nearest the change (`split_cue`)."""
    embedder = embedder or VoiceEmbedder()
    spans = [(ln.start, ln.end) for ln in lines]
    worded = any(ln.words for ln in lines)  # subtitle cues alone: the VAD listens only inside long cues
    regions = speech_regions(wav) if params.fit_speech and worded else None
    if regions is not None:  # ASR lines only: subtitle cues are timed by people, and tightly
        spans = [f if ln.words else s for ln, s, f in zip(lines, spans, fit_to_speech(spans, regions))]
    speech: dict[int, list[tuple[float, float]] | None] = {}  # cues long enough for two voices: their speech
    pieces: dict[int, list[tuple[float, float]]] = {}  # ... and the pieces they are cut into
    for j, (ln, (a, b)) in enumerate(zip(lines, spans)):
        if not ln.words and len(ln.text.split()) >= 2 and b - a >= 2 * params.part_s:
            speech[j] = regions if regions is not None else speech_in(wav, a, b) if params.fit_speech else None
            edges = [a] + cue_cuts(a, b, speech[j], params) + [b]
            pieces[j] = list(zip(edges, edges[1:]))
    windows: list[Partials | None] = []
    space, cluster, conf, info = _cluster_spans(wav, spans, params, embedder, progress, windows,
                                                pieces if params.mixed_cues else None)
    short = [i for i, (a, b) in enumerate(spans) if cluster[i] < 0 and b - a >= params.short_s]
    if space is not None and params.short_nearest and short:
        emb = embedder.embed(wav, [spans[i] for i in short], min_samples=1)
        sim = space.similarity(emb)
        for i, e, s in zip(short, emb, sim):
            if np.any(e):
                cluster[i], conf[i] = int(s.argmax()), round(float(s.max()) * SHORT_CONFIDENCE, 3)
        info["short"] = sum(cluster[i] >= 0 for i in short)
    parts: list[Part] = []
    count = {"examined": 0, "split": 0, "cues_examined": 0, "cues_split": 0, "cues_no_boundary": 0}
    for j, (ln, (a, b), c, f) in enumerate(zip(lines, spans, cluster, conf)):
        whole = Part(ln.idx, 0, a, b, c, f, 0 if ln.words else -1, len(ln.words) - 1 if ln.words else -1)
        turns: list[Part] | None = None
        if space is not None and len(space.centroids) > 1 and c >= 0:
            if len(ln.words) >= 2:
                turns = split_worded(ln, a, b, windows[j], space, params, pauses_in(regions or [], a, b))
                key = ""
            elif j in pieces:
                turns, unbounded = split_cue(ln, a, b, windows[j], space, params, speech[j])
                count["cues_no_boundary"] += unbounded
                key = "cues_"
        if turns is None:
            parts.append(whole)
            continue
        count[key + "examined"] += 1
        if len(turns) < 2:
            parts.append(whole)
            continue
        count[key + "split"] += 1
        parts.extend(turns)
    info.update(count)
    return parts, info


class SpeakersStage(Stage):
    name = "speakers"
    needs = ("probe", "transcript")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = SpeakerParams()
        return {"model": MODEL, **asdict(p), "short_confidence": SHORT_CONFIDENCE,
                "clustering": "agglomerative-average-cosine, centred",
                "turns": "VAD pauses, then widest word gaps; nearest centroid of the line's encoder windows in each piece",
                "cue_turns": "VAD pauses inside the cue, else even cuts; text cut at the sentence boundary (else comma) "
                             "within 1 s of the change, words spread over the cue's speech by characters; "
                             "a pause between turns is neither's",
                "spans": "ASR lines fitted to Silero VAD speech (threshold 0.5, 200 ms pauses); cues keep their times"}

    def skip_reason(self, ctx: Ctx) -> str | None:
        if not ctx.inputs.film.has_audio or ctx.inputs.video is None:
            return "no audio track"
        return resemblyzer_missing()

    def run(self, ctx: Ctx) -> Outcome:
        lines = sorted(ctx.rows("utterances"), key=lambda u: u.idx)
        if not lines:
            return Outcome(model=MODEL, note="no transcript lines to attribute")
        assert ctx.inputs.video is not None  # skip_reason() ran first: no video or audio, no speakers stage
        wav = load_audio(ctx.inputs.video)
        spans = [Span(u.idx, u.start, u.end, tuple(Word(float(w["start"]), float(w["end"]), str(w.get("word", "")))
                                                    for w in json.loads(u.words or "[]")),
                      "" if u.speaker else u.text)  # a cue tagged with its speaker is one turn: not split by voice
                 for u in lines]
        parts, info = voice_parts(wav, spans, progress=ctx.progress)
        ctx.write([VoiceRow(film_id=ctx.film_id, utt_idx=p.utt_idx, part=p.part, start=p.start, end=p.end,
                            cluster=p.cluster, confidence=p.confidence, first_word=p.first_word, last_word=p.last_word)
                   for p in parts])
        worded = sum(1 for s in spans if s.words)
        turns = (f"; {info['examined']} of {worded} lines with word times examined for a change of voice, "
                 f"{info['split']} split into turns" if worded else "")
        if len(spans) > worded:
            turns += (f"; {info['cues_examined']} of {len(spans) - worded} subtitle cues examined for a change of voice, "
                      f"{info['cues_split']} split into turns, {info['cues_no_boundary']} left whole for want of a "
                      f"sentence boundary near the change; {info['mixed']} clustered by their pieces (two voices)")
        short = f", {info['short']} short lines given their nearest voice" if info.get("short") else ""
        return Outcome(model=MODEL, note=f"{info['speakers']} voices over {info['embedded']} of {info['lines']} lines "
                                         f"(silhouette {info['silhouette']}){short}{turns}")
