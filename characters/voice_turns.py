"""Voice parts: transcript lines fitted to the speech and split into speaker turns (voices.py clusters
the lines; speakers.py is the stage).

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .voices import SHORT_CONFIDENCE, SR, Partials, SpeakerParams, VoiceEmbedder, VoiceSpace, cluster_spans


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
    space, cluster, conf, info = cluster_spans(wav, spans, params, embedder, progress, windows,
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
