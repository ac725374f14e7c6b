"""Voices: who speaks each transcript line, as voice clusters over the whole film.

Each line (ASR segment or subtitle cue) long enough to carry a voice is embedded with
Resemblyzer's GE2E voice encoder (its weights ship in the wheel, so this runs offline). The
embeddings are centred on the film's mean voice (what every line shares: the recording, the
room, the codec) and clustered by average-linkage agglomerative clustering on cosine distance;
the number of speakers is estimated, not given: merging stops at a cosine distance of `threshold`
(0.8, chosen on the synthetic film, seed 7, with its truth lines; a silhouette-chosen k split it
only by sex). When that cut does not separate the voices (silhouette below `min_silhouette`, as
for a single voice whose centred embeddings are noise) the film has one speaker. A line's
confidence is its cosine similarity to its cluster's centroid. A subtitle cue whose pieces lie
farther apart than clusters merge is clustered by its pieces (its whole embedding is a mix of two
voices). Turns inside lines are found in voice_turns.py; the stage is speakers.py.
"""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation.errors import MovieMemError

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


def _resemblyzer() -> Any:
    """The resemblyzer module, imported without the UserWarning its webrtcvad prints on every video
    ingest (webrtcvad imports the deprecated pkg_resources; nothing to act on here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pkg_resources", category=UserWarning)
        import resemblyzer

    return resemblyzer


def resemblyzer_missing() -> str | None:
    """Why the voice encoder cannot run here, or None."""
    try:
        _resemblyzer()
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

        torch.set_num_threads(1)
        self.encoder = _resemblyzer().VoiceEncoder("cpu", verbose=False)

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
    space, cluster, confidence, info = cluster_spans(wav, spans, params, embedder or VoiceEmbedder(), progress)
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


def cluster_spans(wav: np.ndarray, spans: list[tuple[float, float]], params: SpeakerParams, embedder: VoiceEmbedder,
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
