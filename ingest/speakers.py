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
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MovieMemError
from ..memory.schema import VoiceRow
from .stage import Ctx, Outcome, Stage

SR = 16000
MODEL = "resemblyzer-0.1.4"


@dataclass(frozen=True)
class SpeakerParams:
    min_s: float = 0.8  # shorter lines carry too little voice to embed
    threshold: float = 0.8  # cosine distance between centred voices at which clusters stop merging
    max_speakers: int = 20
    min_silhouette: float = 0.1


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


class VoiceEmbedder:
    """Resemblyzer's voice encoder on the CPU (one thread: it is small, and ingest runs beside other work)."""

    def __init__(self) -> None:
        import torch
        from resemblyzer import VoiceEncoder

        torch.set_num_threads(1)
        self.encoder = VoiceEncoder("cpu", verbose=False)

    def embed(self, wav: np.ndarray, spans: list[tuple[float, float]],
              progress: Callable[[int, int | None], None] | None = None) -> np.ndarray:
        out = np.zeros((len(spans), 256), dtype=np.float32)
        for i, (a, b) in enumerate(spans):
            seg = wav[int(a * SR): int(b * SR)]
            if len(seg) >= SR // 2:
                out[i] = self.encoder.embed_utterance(seg)
            if progress and i % 20 == 0:
                progress(i, len(spans))
        return out


def cluster_voices(emb: np.ndarray, params: SpeakerParams = SpeakerParams()) -> tuple[np.ndarray, np.ndarray, float]:
    """Cluster labels (0..k-1, numbered by first appearance), each row's similarity to its
    centroid, and the chosen cut's silhouette (0.0 for a single speaker)."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import silhouette_score

    n = len(emb)
    if n < 2:
        return np.zeros(n, dtype=int), np.ones(n), 0.0
    x = emb - emb.mean(axis=0) if n > 2 else emb.copy()
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    best = AgglomerativeClustering(n_clusters=None, distance_threshold=params.threshold, metric="cosine",
                                   linkage="average").fit_predict(x)
    k = int(best.max()) + 1
    best_s = float(silhouette_score(x, best, metric="cosine")) if 1 < k < n else 0.0
    if k > params.max_speakers or best_s < params.min_silhouette:
        best, best_s = np.zeros(n, dtype=int), 0.0
    order = {c: i for i, c in enumerate(dict.fromkeys(best.tolist()))}
    labels = np.array([order[c] for c in best], dtype=int)
    conf = np.zeros(n)
    for c in range(labels.max() + 1):
        members = labels == c
        centroid = x[members].mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
        conf[members] = x[members] @ centroid
    return labels, conf, best_s


def diarize(wav: np.ndarray, spans: list[tuple[float, float]], params: SpeakerParams = SpeakerParams(),
            embedder: VoiceEmbedder | None = None,
            progress: Callable[[int, int | None], None] | None = None) -> tuple[list[int], list[float], dict[str, Any]]:
    """A voice cluster per span (-1 when shorter than params.min_s) and a summary."""
    keep = [i for i, (a, b) in enumerate(spans) if b - a >= params.min_s]
    embedder = embedder or VoiceEmbedder()
    emb = embedder.embed(wav, [spans[i] for i in keep], progress)
    ok = [j for j in range(len(keep)) if np.any(emb[j])]
    labels, conf, sil = cluster_voices(emb[ok], params)
    cluster, confidence = [-1] * len(spans), [0.0] * len(spans)
    for j, lab, c in zip(ok, labels, conf):
        cluster[keep[j]], confidence[keep[j]] = int(lab), round(float(c), 3)
    k = int(labels.max()) + 1 if len(labels) else 0
    return cluster, confidence, {"speakers": k, "silhouette": round(sil, 3), "embedded": len(ok), "lines": len(spans)}


class SpeakersStage(Stage):
    name = "speakers"
    needs = ("probe", "transcript")

    def params(self, ctx: Ctx) -> dict[str, Any]:
        p = SpeakerParams()
        return {"model": MODEL, "min_s": p.min_s, "threshold": p.threshold, "max_speakers": p.max_speakers,
                "min_silhouette": p.min_silhouette, "clustering": "agglomerative-average-cosine, centred"}

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
        cluster, conf, info = diarize(wav, [(u.start, u.end) for u in lines], progress=ctx.progress)
        ctx.write([VoiceRow(film_id=ctx.film_id, utt_idx=u.idx, start=u.start, end=u.end, cluster=c, confidence=f)
                   for u, c, f in zip(lines, cluster, conf)])
        return Outcome(model=MODEL, note=f"{info['speakers']} voices over {info['embedded']} of {info['lines']} lines "
                                         f"(silhouette {info['silhouette']})")

