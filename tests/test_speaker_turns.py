"""Speaker turns inside a transcript line: where the voice changes, a line becomes several voice
parts (speakers stage), each attributed (characters stage) and shown in evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from test_characters import SRT  # the same four cues: dashes, NAME: tags, an address term

from moviemem.characters.stage_inputs import registry_lines
from moviemem.characters.voice_turns import (
    Span,
    Word,
    cut_candidates,
    even_cuts,
    fit_to_speech,
    pause_cuts,
    split_cue,
    spread_words,
    text_cut,
    turns_of,
    voice_parts,
)
from moviemem.characters.voices import Partials, SpeakerParams, VoiceSpace, mixed_pieces
from moviemem.memory.schema import SpeakerRow, UtteranceRow, VoiceRow

DIM = 256


def _voice(k: int) -> np.ndarray:
    rng = np.random.default_rng(100 + k)
    return rng.standard_normal(DIM).astype(np.float32)


class ScriptedEmbedder:
    """A voice encoder that knows who speaks when: a span's embedding is the mix of the voices
    heard in it, weighted by time, plus a little noise."""

    def __init__(self, script: list[tuple[float, float, int]]):
        self.script = script
        self.rng = np.random.default_rng(0)
        self.calls: list[tuple[float, float]] = []

    def _mix(self, a: float, b: float) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for s, e, k in self.script:
            v += max(0.0, min(b, e) - max(a, s)) * _voice(k)
        return v / np.linalg.norm(v) + 0.01 * self.rng.standard_normal(DIM) if np.any(v) else v

    def embed(self, wav, spans, progress=None, min_samples: int = 8000, partials=None) -> np.ndarray:
        """Like Resemblyzer: 1.6 s windows every 0.77 s (at least one), the span's voice their mean."""
        out = np.zeros((len(spans), DIM), dtype=np.float32)
        for i, (a, b) in enumerate(spans):
            self.calls.append((a, b))
            starts = list(np.arange(a, max(b - 0.83, a + 1e-6), 0.77))
            if len(starts) > 1 and b - starts[-1] < 0.75 * 1.6:
                starts.pop()  # the last window, too little of it inside the span
            wins = [(float(s), min(float(s) + 1.6, b)) for s in starts]
            each = np.stack([self._mix(s, e) for s, e in wins]).astype(np.float32)
            if np.any(each):
                out[i] = each.mean(axis=0) / np.linalg.norm(each.mean(axis=0))
            if partials is not None:
                partials.append(Partials(each, np.array([s for s, _ in wins]), np.array([e for _, e in wins]))
                                if np.any(each) else None)
        return out


def _words(a: float, texts: list[str], step: float = 0.5, gap: float = 0.05) -> tuple[Word, ...]:
    return tuple(Word(a + i * step, a + (i + 1) * step - gap, w) for i, w in enumerate(texts))


def test_cut_candidates_prefer_pauses_and_keep_parts_long_enough() -> None:
    words = _words(0.0, ["Where", "were", "you?", "Out.", "Why?", "Just"])  # 0-3 s
    # the widest word gap would be after "you?" (sentence end); the VAD's pause says after "Out."
    cuts = cut_candidates(words, 0.0, 3.0, part_s=1.0, max_cuts=2, pauses=[(1.9, 2.1)])
    assert cuts[0][1] == 3 or cuts[-1][1] == 3  # a cut right after word 3 ("Out."), from the pause
    assert all(0 <= i < len(words) - 1 for _, i in cuts)
    edges = [0.0] + [t for t, _ in cuts] + [3.0]
    assert min(b - a for a, b in zip(edges, edges[1:])) >= 1.0
    assert cut_candidates(words[:2], 0.0, 1.0, part_s=1.0, max_cuts=2) == []  # too short for two voices


def test_turns_need_a_clear_margin() -> None:
    weight = np.ones(3)
    clear = np.array([[0.8, 0.1], [0.7, 0.2], [0.1, 0.9]])
    assert turns_of(clear, weight, margin=0.2) == [(0, 1, 0), (2, 2, 1)]
    weak = np.array([[0.5, 0.4], [0.5, 0.4], [0.45, 0.5]])
    assert turns_of(weak, weight, margin=0.2) == [(0, 2, 0)]  # one voice: no turn


def test_fit_to_speech_trims_loose_asr_times() -> None:
    regions = [(0.0, 2.0), (2.4, 5.0)]  # two lines of speech, a pause between
    spans = [(0.2, 1.8), (1.7, 4.6)]  # ASR: the second starts in the first's tail, ends early
    fitted = fit_to_speech(spans, regions)
    assert fitted[0] == (0.0, 2.0)
    assert fitted[1] == (2.4, 5.0)
    assert fit_to_speech([(10.0, 11.0)], regions) == [(10.0, 11.0)]  # the VAD missed it: kept


def test_a_line_spoken_by_two_voices_becomes_two_parts() -> None:
    # voices 0 and 1 alternate whole lines; line 4 holds voice 0 then voice 1
    script = [(3.5 * i, 3.5 * i + 3, i % 2) for i in range(10) if i != 4] + [(14, 16, 0), (16, 17, 1)]
    lines = [Span(i, 3.5 * i, 3.5 * i + 3) for i in range(10)]
    said = [(14.0, 14.45, "Where"), (14.5, 14.95, "were"), (15.0, 15.45, "you?"), (15.5, 15.85, "Out."),
            (16.15, 16.55, "Late"), (16.6, 17.0, "again.")]  # the pause after "Out." is the turn change
    lines[4] = Span(4, 14, 17, tuple(Word(a, b, w) for a, b, w in said))
    emb = ScriptedEmbedder(script)
    params = SpeakerParams(fit_speech=False)
    parts, info = voice_parts(np.zeros(36 * 16000, dtype=np.float32), lines, params, emb)  # type: ignore[arg-type]
    assert info["speakers"] == 2 and info["examined"] == 1 and info["split"] == 1
    four = [p for p in parts if p.utt_idx == 4]
    assert [(p.part, p.cluster) for p in four] == [(0, 0), (1, 1)]
    assert four[0].first_word == 0 and four[0].last_word == 3 and four[1].first_word == 4 and four[1].last_word == 5
    assert abs(four[0].end - 16.0) < 0.1 and four[1].start == four[0].end
    assert all(p.part == 0 for p in parts if p.utt_idx != 4)
    # the characters stage reads one registry line per part, with the part's words
    words = [{"start": w.start, "end": w.end, "word": " " + w.text} for w in lines[4].words]
    utts = [UtteranceRow(film_id="f", idx=s.idx, start=s.start, end=s.end, text=f"line {s.idx}",
                         words=json.dumps(words) if s.idx == 4 else "[]") for s in lines]
    rows = [VoiceRow(film_id="f", utt_idx=p.utt_idx, part=p.part, start=p.start, end=p.end, cluster=p.cluster,
                     first_word=p.first_word, last_word=p.last_word) for p in parts]
    turns = registry_lines(utts, rows)
    split = [t for t in turns if t.split]
    assert [t.line.text for t in split] == ["Where were you? Out.", "Late again."]
    assert [t.line.utt for t in split] == [4, 4] and [t.line.voice for t in split] == [0, 1]


def test_voice_and_speaker_rows_round_trip_their_parts(tmp_path: Path) -> None:
    from moviemem.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "lib")
    store.append([VoiceRow(film_id="f", utt_idx=3, part=1, start=1.0, end=2.0, cluster=2, confidence=0.4,
                           first_word=3, last_word=5)])
    store.append([SpeakerRow(film_id="f", utt_idx=3, part=1, speaker="v2", speaker_name="Tom", start=1.0, end=2.0,
                             text="Out.")])
    v = store.rows("voices")[0]
    assert (v.part, v.first_word, v.last_word, v.cluster) == (1, 3, 5, 2)
    s = store.rows("speaker_lines")[0]
    assert (s.part, s.start, s.end, s.text, s.speaker_name) == (1, 1.0, 2.0, "Out.", "Tom")


def test_evidence_shows_each_turns_speaker(tmp_path: Path, cli, lib_dir: Path) -> None:
    from moviemem import Library
    from moviemem.retrievers.packing import Lines, spoken

    row = UtteranceRow(film_id="x", idx=0, start=0, end=2, text="Where were you? Out.", speaker="v0",
                       turns=json.dumps([{"start": 0, "end": 1, "speaker": "v0", "speaker_name": "Sara",
                                          "text": "Where were you?"},
                                         {"start": 1, "end": 2, "speaker": "v1", "speaker_name": "Tom", "text": "Out."}]))
    assert spoken(row) == "Sara: Where were you? Tom: Out."

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    film = Library(lib_dir).film("t1")
    store, run = film.store, film.stages()
    run_id = next(s.run_id for s in run if s.stage == "characters")
    ids = {c.name: c.char_id for c in film.characters()}
    store.delete("speaker_lines", "utt_idx = 2")
    store.append([SpeakerRow(film_id="t1", run_id=run_id, utt_idx=2, part=0, speaker=ids["Cedric"], speaker_name="Cedric",
                             start=5.0, end=6.5, text="I call Mother 'Dearest'"),
                  SpeakerRow(film_id="t1", run_id=run_id, utt_idx=2, part=1, speaker=ids["Sara"], speaker_name="Sara",
                             start=6.5, end=7.0, text="because Father did.")])
    film = Library(lib_dir).film("t1")
    utts = film.utterances()
    assert len(utts) == 5 and [u.idx for u in utts] == [0, 1, 2, 3, 4]  # still one row per transcript line
    line = utts[2]
    assert line.speaker_name == "Cedric" and len(json.loads(line.turns)) == 2  # the longest turn's speaker
    shown = [t for _, _, t in Lines(film).of("utterance").values()]
    assert "Cedric: I call Mother 'Dearest' Sara: because Father did." in shown
    early = film.until(7.5).utterances()
    assert [json.loads(u.turns)[1]["speaker_name"] for u in early if u.turns] == ["Sara"]  # named by line 1


def test_a_piece_takes_the_windows_mostly_inside_it() -> None:
    e = np.eye(3, dtype=np.float32)
    w = Partials(e, np.array([0.0, 0.77, 1.54]), np.array([1.6, 2.37, 3.0]))
    got = w.within(0.0, 2.0)  # window 0 wholly, window 1 (1.23 of 1.6 s) mostly; window 2 barely
    assert got is not None and got[2] == 0.0 and got[0] > got[1] > 0.0
    right = w.within(2.0, 3.0)  # only the last (clipped) window lies mostly inside
    assert right is not None and np.allclose(right, e[2])
    assert w.within(1.2, 1.5) is None  # no window lies mostly inside 0.3 s: no voice for it


def _cue_film(cue: Span, script_cue: list[tuple[float, float, int]]) -> tuple[list, dict]:
    """Ten 3 s cues alternating voices 0 and 1, cue 4 replaced by `cue`, spoken as `script_cue` says."""
    script = [(3.5 * i, 3.5 * i + 3, i % 2) for i in range(10) if i != 4] + script_cue
    lines = [Span(i, 3.5 * i, 3.5 * i + 3, text=f"Line {i}.") for i in range(10)]
    lines[4] = cue
    return voice_parts(np.zeros(36 * 16000, dtype=np.float32), lines, SpeakerParams(fit_speech=False),
                       ScriptedEmbedder(script))  # type: ignore[arg-type]


def test_a_cue_spoken_by_two_voices_is_split_at_its_sentence_boundary() -> None:
    text = "Where were you today? I was out late."
    parts, info = _cue_film(Span(4, 14, 18, text=text), [(14, 16, 0), (16, 18, 1)])
    assert info["cues_examined"] >= 1 and info["cues_split"] == 1 and info["cues_no_boundary"] == 0
    four = [p for p in parts if p.utt_idx == 4]
    assert [(p.part, p.cluster) for p in four] == [(0, 0), (1, 1)]
    assert (four[0].first_word, four[0].last_word, four[1].first_word, four[1].last_word) == (0, 3, 4, 7)
    assert four[0].start == 14 and four[1].end == 18  # the cue's own times are kept
    assert four[0].end == four[1].start and abs(four[0].end - 16.0) < 0.5
    assert all(p.part == 0 for p in parts if p.utt_idx != 4)
    # the characters stage gives each part its own text from the cue's words
    utts = [UtteranceRow(film_id="f", idx=i, start=3.5 * i, end=3.5 * i + 3, text=text if i == 4 else f"Line {i}.")
            for i in range(10)]
    rows = [VoiceRow(film_id="f", utt_idx=p.utt_idx, part=p.part, start=p.start, end=p.end, cluster=p.cluster,
                     first_word=p.first_word, last_word=p.last_word) for p in parts]
    split = [t for t in registry_lines(utts, rows) if t.split]
    assert [t.line.text for t in split] == ["Where were you today?", "I was out late."]
    assert [t.line.voice for t in split] == [0, 1]


def test_a_two_voice_cue_without_a_boundary_stays_whole_and_is_counted() -> None:
    parts, info = _cue_film(Span(4, 14, 18, text="where were you today I was out late"), [(14, 16, 0), (16, 18, 1)])
    assert info["cues_split"] == 0 and info["cues_no_boundary"] == 1
    assert [p.part for p in parts if p.utt_idx == 4] == [0]


def test_a_one_voice_cue_is_not_split() -> None:
    parts, info = _cue_film(Span(4, 14, 18, text="Where were you today? I was out late."), [(14, 18, 0)])
    assert info["cues_split"] == 0 and info["cues_no_boundary"] == 0
    assert [p.part for p in parts if p.utt_idx == 4] == [0]


def test_a_cue_is_cut_at_the_pause_the_vad_heard() -> None:
    script = [(14, 15.9, 0), (16.1, 18, 1)]
    emb = ScriptedEmbedder(script)
    got: list = []
    emb.embed(None, [(14.0, 18.0)], partials=got)
    space = VoiceSpace(np.zeros(DIM, dtype=np.float32), np.stack([_voice(k) / np.linalg.norm(_voice(k)) for k in (0, 1)]))
    cue = Span(4, 14, 18, text="Where were you? Out, late again.")
    parts, unbounded = split_cue(cue, 14, 18, got[0], space, SpeakerParams(), [(14.0, 15.9), (16.1, 18.0)])
    assert parts is not None and not unbounded
    assert [(p.cluster, p.start, p.end, p.first_word, p.last_word) for p in parts] == [(0, 14, 15.9, 0, 2), (1, 16.1, 18, 3, 5)]


def test_cue_cuts_pauses_first_else_even() -> None:
    assert pause_cuts(0, 4, [(1.9, 2.1), (0.2, 0.6), (2.8, 2.9)], part_s=1.0, max_cuts=2) == [2.0]  # 0.4 s from the start: too near
    assert even_cuts(0, 4, 1.0, 2) == [4 / 3, 8 / 3] and even_cuts(0, 2.5, 1.0, 2) == [1.25] and even_cuts(0, 1.5, 1.0, 2) == []


def test_text_cut_takes_the_nearest_sentence_boundary_else_a_comma() -> None:
    words = spread_words("Yes. Where were you, then? I was out late.", 0.0, 6.0, [(0.0, 3.3), (4.1, 6.0)])
    assert all(not 3.3 < w.start < 4.1 for w in words)  # no word starts in the pause
    assert words[0].start == 0.0 and words[-1].end == 6.0
    assert text_cut(words, 3.7) == 4  # "then?" ends the sentence before the pause
    assert text_cut(words, 0.6) == 0  # "Yes." is nearer than "then?"
    assert text_cut(words, 2.3) == 4  # a sentence end within 1 s wins over the nearer comma ("you,")
    comma = spread_words("I went there, and then I came back home", 0.0, 4.0)
    assert text_cut(comma, 1.6) == 2  # no sentence end: the comma, as a last resort
    assert text_cut(comma, 3.8) is None  # the comma is more than 1 s away


def test_a_cue_whose_pieces_sound_like_two_voices_is_clustered_by_its_pieces() -> None:
    two: list = []
    one: list = []
    ScriptedEmbedder([(0, 3, 0), (3, 6, 1)]).embed(None, [(0.0, 6.0)], partials=two)
    ScriptedEmbedder([(0, 6, 0)]).embed(None, [(0.0, 6.0)], partials=one)
    mean = np.zeros(DIM, dtype=np.float32)
    got = mixed_pieces(two[0], [(0.0, 3.0), (3.0, 6.0)], mean, threshold=0.8)
    assert got is not None and got.shape == (2, DIM)
    assert mixed_pieces(one[0], [(0.0, 3.0), (3.0, 6.0)], mean, threshold=0.8) is None
    assert mixed_pieces(two[0], [(0.0, 6.0)], mean, threshold=0.8) is None  # one piece: nothing to compare
