"""Characters: speaker turns from subtitle conventions, names from the film's own text, voice
and face clustering, the registry in the film view and the CLI, and speakers in evidence."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from moviemem.characters.faces import FaceParams, cluster_faces, dlib_missing, representative, unseen_shots
from moviemem.characters.names import Line, build_registry, name_lexicon, votes
from moviemem.characters.voices import SpeakerParams, cluster_voices, resemblyzer_missing
from moviemem.ingest.turns import split_dialogue, split_prefix, split_turns
from moviemem.memory.lines import Span

MEDIA = Path(__file__).resolve().parents[2] / "shared" / "media"

SRT = """1
00:00:01,000 --> 00:00:04,000
- Who are you?
- I'm Sara.

2
00:00:05,000 --> 00:00:07,000
CEDRIC: I call Mother 'Dearest' because Father did.

3
00:00:08,000 --> 00:00:10,000
Thank you, Cedric.

4
00:00:11,000 --> 00:00:13,000
CEDRIC: You're welcome, Sara.
"""


def test_dialogue_dashes_split_a_cue_into_turns() -> None:
    assert split_dialogue("- Who are you? - I'm Sara.") == ["Who are you?", "I'm Sara."]
    assert split_dialogue("-Who? -Me.") == ["Who?", "Me."]
    assert split_dialogue("Hello. - Hi there.") == ["Hello.", "Hi there."]
    assert split_dialogue("well - maybe not") == ["well - maybe not"]  # a hyphen inside a sentence
    assert split_dialogue("- Go on, then") == ["Go on, then"]


def test_speaker_prefixes_become_tags_not_text() -> None:
    assert split_prefix("CLAUDE: But no, no") == ("Claude", "But no, no")
    assert split_prefix("Mr. Smith: Hello") == ("Mr. Smith", "Hello")
    assert split_prefix("At 10:30 we go") == ("", "At 10:30 we go")
    assert split_prefix("Note: this is odd") == ("", "Note: this is odd")


def test_split_turns_shares_the_cue_time_by_text_length() -> None:
    items = split_turns([{"start": 10.0, "end": 14.0, "text": "- Hi. - CEDRIC: Hello there.", "speaker": "", "words": []}])
    assert [i["text"] for i in items] == ["Hi.", "Hello there."]
    assert [i["speaker"] for i in items] == ["", "Cedric"]
    assert items[0]["start"] == 10.0 and items[-1]["end"] == 14.0
    assert items[0]["end"] == items[1]["start"] and 10.5 < items[0]["end"] < 12.0  # "Hi." is the shorter turn


def test_names_come_only_from_words_the_film_uses_as_names() -> None:
    texts = ["Look, I told you.", "Thank you, Sara.", "You look tired.", "Well, Sara is late.", "Well, well."]
    lex = name_lexicon(texts)
    assert "Sara" in lex
    assert "Look" not in lex and "Well" not in lex  # also written in lower case, or a common word


def _dialogue() -> list[Line]:
    # voices: 0 = Sara, 1 = Cedric, 2 = never named
    script = [(0, "Good morning, Cedric."), (1, "Morning. Is the shop open?"), (0, "Not yet."),
              (1, "Thank you, Sara."), (0, "You are welcome."), (2, "Excuse me, is this the station?"),
              (1, "Yes, it is."), (0, "My name is Sara, by the way."), (2, "Nice to meet you."),
              (0, "Cedric, can you help?"), (1, "Of course.")]
    return [Line(i, 2.0 * i, 2.0 * i + 1.5, text, voice=v) for i, (v, text) in enumerate(script)]


def test_address_terms_and_introductions_name_voice_clusters() -> None:
    lines = _dialogue()
    vs = votes(lines, name_lexicon([ln.text for ln in lines]))
    assert any(v.kind == "address-next" and v.line == 1 and v.name == "Cedric" for v in vs)
    assert any(v.kind == "address-self" and v.line == 0 and v.name == "Cedric" and v.weight < 0 for v in vs)
    assert any(v.kind == "self" and v.line == 7 and v.name == "Sara" for v in vs)
    chars, line_char = build_registry(lines)
    by_voice = {c.voice: c for c in chars if c.voice >= 0}
    assert by_voice[0].name == "Sara" and by_voice[1].name == "Cedric"
    assert by_voice[2].name == "speaker 3" and by_voice[2].names == []  # never a guessed name
    link = next(lk for lk in by_voice[1].links if lk["kind"] == "name")
    assert 0 < link["confidence"] <= 1 and any("Good morning, Cedric." in e for e in link["evidence"])
    assert line_char[5][0] == by_voice[2].char_id and sorted(by_voice[0].lines) == [0, 2, 4, 7, 9]


def test_an_introduction_without_its_comma_still_names_the_speaker() -> None:
    # ASR drops commas: "I am Sarah from the front desk." is still an introduction; "I'm Sarah's" is not
    texts = ["Good morning. I am Sarah from the front desk.", "Thank you, Sarah.", "I'm Tom's brother, Sarah."]
    lines = [Line(i, 2.0 * i, 2.0 * i + 1.5, t, voice=v) for i, (t, v) in enumerate(zip(texts, (0, 1, 1)))]
    selfs = [v for v in votes(lines, name_lexicon(texts)) if v.kind == "self"]
    assert [(v.line, v.name) for v in selfs] == [(0, "Sarah")]


def test_a_name_goes_to_one_cluster_only() -> None:
    lines = [Line(0, 0, 1, "Hello, Sara.", voice=0), Line(1, 1.2, 2, "Hi.", voice=1),
             Line(2, 10, 11, "Hello, Sara.", voice=0), Line(3, 11.2, 12, "Hi.", voice=2),
             Line(4, 20, 21, "Bye, Sara.", voice=0), Line(5, 21.2, 22, "Bye.", voice=1)]
    chars, _ = build_registry(lines)
    named = [c for c in chars if c.names == ["Sara"]]
    assert len(named) == 1 and named[0].voice == 1  # two votes beat one


def test_a_titled_address_names_a_character_and_the_title_tells_two_apart() -> None:
    # no voices (a text-only film): names addressed twice are registered, each with its title
    texts = ["Good evening, Mr Hollis.", "Thank you, Mr. Hollis!", "Sit down, Mrs. Hollis.", "Hello, Mrs Hollis.",
             "Greta, look at this.", "Wait, Greta.", "Come in, Miss Greta.", "Goodbye, Miss Greta.",
             "Hollis sells tickets and Greta keeps the books."]
    lines = [Line(i, 3.0 * i, 3.0 * i + 2, t) for i, t in enumerate(texts)]
    chars, _ = build_registry(lines)
    assert sorted(c.names for c in chars) == [["Greta", "Miss Greta"], ["Mr. Hollis"], ["Mrs. Hollis"]]
    # a title on a word the film never uses as a name is not an address ("Mr. Nobody" twice)
    lines = [Line(i, 3.0 * i, 3.0 * i + 2, t) for i, t in enumerate(["Hello, Mr Nobody.", "Bye, Mr Nobody.",
                                                                     "Nobody came."])]
    assert build_registry(lines)[0] == []


def test_a_text_film_s_characters_are_the_people_its_dialogue_names_again_and_again() -> None:
    # no voices: who is addressed, introduced or titled, and said across the film; not places
    # ("from Utah", even when a line calls him "Utah"), forms of address ("Sire"), a language
    # ("in Spanish") nor a name said in one scene only (Wilson)
    texts = ["Kent, take the boys up to the cabin.", "No Sire, I rode in from Utah.", "Meet my partner, Weston.",
             "Oh Utah! You again.", "Wilson, get the horses.", "Thank you, Wilson.", "He speaks in Spanish.",
             "The man from Utah rode well.", "I saw Weston at the bank.", "Kent was there too.",
             "This is my brother, Cheyenne Kent.", "How do you do, Mr. Weston?", "Come back from Utah, Weston.",
             "Weston rides at noon.", "Sire, the stage leaves.", "Kent wins again."]
    starts = [40.0 * i if i != 5 else 164.0 for i in range(len(texts))]  # "Thank you, Wilson." right after "Wilson, ..."
    lines = [Line(i, a, a + 3, t) for i, (a, t) in enumerate(zip(starts, texts))]
    chars, _ = build_registry(lines)
    assert sorted(c.names for c in chars) == [["Kent"], ["Weston", "Mr. Weston"]]
    kent = next(c for c in chars if c.name == "Kent")
    assert kent.lines == [] and kent.named_in == [0, 9, 10, 15]  # never heard speaking; named in four lines
    assert any("This is my brother, Cheyenne Kent." in e for lk in kent.links for e in lk["evidence"])


def test_a_voice_no_line_names_takes_the_one_person_captions_show_while_it_speaks() -> None:
    # voice 0 is never called by name; voice 1 is Peter. Captions name Anna and Peter on screen with voice 0.
    lines = [Line(0, 1, 3, "A letter came for you today.", voice=0), Line(1, 4, 6, "Who is it from?", voice=1),
             Line(2, 7, 9, "Open it and see.", voice=0), Line(3, 10, 12, "Thank you, Peter.", voice=0),
             Line(4, 12.5, 14, "It is from my grandmother.", voice=1), Line(5, 30, 32, "Look at the river.", voice=0)]
    shown = [Span(0, 10, "Anna holds out an envelope to Peter in the bakery.", "caption"),
             Span(29, 33, "Peter and Anna walk along the river.", "caption")]
    chars, _ = build_registry(lines, shown=shown)
    by_voice = {c.voice: c for c in chars}
    assert by_voice[1].name == "Peter" and by_voice[0].name == "Anna"
    link = next(lk for lk in by_voice[0].links if lk["kind"] == "name")
    assert link["confidence"] <= 0.5 and any("on screen" in e and "Anna holds out" in e for e in link["evidence"])
    # two people shown as often: no one stands out, the voice stays unnamed
    tied = [Span(0, 10, "Anna and Lucy sit in the bakery.", "caption"), Span(29, 33, "Lucy and Anna walk along the river.", "caption")]
    chars, _ = build_registry(lines, shown=tied)
    assert {c.voice: c.name for c in chars}[0] == "speaker 1"
    # a voice that calls someone Anna is not Anna
    calls = [*lines[:5], Line(5, 30, 32, "Look at the river, Anna.", voice=0)]
    chars, _ = build_registry(calls, shown=shown)
    assert {c.voice: c.name for c in chars}[0] == "speaker 1"


def _blobs(centres: list[np.ndarray], per: int, noise: float, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    x, truth = [], []
    for k, c in enumerate(centres):
        for _ in range(per):
            v = c + noise * rng.standard_normal(len(c))
            x.append(v / np.linalg.norm(v))
            truth.append(k)
    order = rng.permutation(len(x))
    return np.array(x, dtype=np.float32)[order], [truth[i] for i in order]


def test_voice_clustering_estimates_the_number_of_speakers() -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal(256)
    centres = [base + 0.8 * rng.standard_normal(256) for _ in range(4)]  # shared "recording" plus a voice
    emb, truth = _blobs(centres, 12, 0.25)
    labels, conf, sil = cluster_voices(emb, SpeakerParams())
    assert labels.max() + 1 == 4 and sil > 0.1
    pairs = {(t, lab) for t, lab in zip(truth, labels.tolist())}
    assert len(pairs) == 4  # each speaker is exactly one cluster
    assert labels[0] == 0 and np.all(conf > 0.5)
    one, _, sil1 = cluster_voices(_blobs([centres[0]], 10, 0.05)[0], SpeakerParams())
    assert set(one.tolist()) == {0} and sil1 == 0.0  # one voice stays one speaker


def test_face_clustering_uses_dlibs_same_person_distance() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(128), rng.standard_normal(128)
    a, b = 0.5 * a / np.linalg.norm(a), 0.5 * b / np.linalg.norm(b)
    faces = [a + 0.02 * rng.standard_normal(128) for _ in range(5)] + [b + 0.02 * rng.standard_normal(128) for _ in range(3)]
    stray = rng.standard_normal(128)
    enc = np.array(faces + [stray], dtype=np.float32)
    labels = cluster_faces(enc, FaceParams())
    assert labels[:5].tolist() == [0] * 5 and labels[5:8].tolist() == [1] * 3
    assert labels[8] == -1  # a face seen once is no identity
    assert labels[representative(enc, labels, 1)] == 1


def test_text_film_registry_view_and_cli(tmp_path: Path, cli, lib_dir: Path) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    res = cli("ingest", "--text", str(srt), "--film-id", "t1")
    assert res.code == 0, res.err
    from moviemem import Library

    film = Library(lib_dir).film("t1")
    utts = film.utterances()
    assert [u.text for u in utts][:2] == ["Who are you?", "I'm Sara."]  # the dash cue is two turns
    named = {u.text: u.speaker_name for u in utts}
    assert named["I'm Sara."] == "Sara" and named["I call Mother 'Dearest' because Father did."] == "Cedric"
    # only Sara and Cedric talk here: who asks her name is the other one (turn alternation, a weak rule), and
    # who thanks Cedric by name is not Cedric (the caller in a two-person exchange)
    assert named["Who are you?"] == "Cedric" and named["Thank you, Cedric."] == "Sara"
    stages = {s.stage: s for s in film.stages()}
    assert stages["speakers"].status == "skipped" and stages["speakers"].reason == "no audio track"
    assert stages["faces"].status == "skipped" and stages["faces"].reason == "no video"
    data = cli("characters", "t1", "--json").json()["characters"]
    assert [c["name"] for c in data] == ["Cedric", "Sara"]  # by first appearance: Cedric asks first
    cedric = data[0]
    assert set(cedric) >= {"id", "name", "names", "lines", "screen_time_s", "first_s", "last_s", "voice", "face"}
    assert cedric["lines"] == 3 and cedric["first_s"] == 1.0 and cedric["last_s"] == 13.0 and cedric["voice"] is None
    speech = next(lk for lk in cedric["links"] if lk["kind"] == "speech")
    assert speech["reasons"] == {"tag": 2, "alternation": 1} and [0, "alternation", 0.45] in speech["lines"]
    # until(t) hides what has not been said yet: Cedric's name and tagged lines come after 4.5 s
    early = film.until(0.5)
    assert [c.name for c in early.characters()] == []
    assert "Cedric" in cli("characters", "t1").out
    # the MCP overview lists the same characters as the CLI
    from moviemem.serve.film_tools import film_overview

    overview = film_overview(Library(lib_dir), "t1")["characters"]
    assert [(c["name"], c["lines"]) for c in overview] == [(c["name"], c["lines"]) for c in data]


def test_evidence_lines_show_the_speakers_name(tmp_path: Path, cli, lib_dir: Path) -> None:
    from moviemem import Library
    from moviemem.memory.schema import UtteranceRow
    from moviemem.retrievers.packing import Lines, speaker_label

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    lines = Lines(Library(lib_dir).film("t1")).of("utterance")
    assert "Cedric: I call Mother 'Dearest' because Father did." in [t for _, _, t in lines.values()]
    assert "Cedric: Who are you?" in [t for _, _, t in lines.values()]
    assert speaker_label(UtteranceRow(film_id="x", idx=0, start=0, end=1, text="hi", speaker="v2")) == ""


def test_old_tables_get_new_columns(tmp_path: Path) -> None:
    import pyarrow as pa

    from moviemem.memory.schema import UtteranceRow, arrow_schema
    from moviemem.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "lib")
    old = arrow_schema(UtteranceRow, 4)
    old = pa.schema([f for f in old if f.name != "speaker_name"])
    store.db.create_table("utterances", schema=old)
    store.append([UtteranceRow(film_id="f", idx=0, start=0, end=1, text="hi", speaker_name="Sara", vector=[0.0] * 4)])
    assert store.rows("utterances")[0].speaker_name == "Sara"


def _espeak(voice: str, text: str, path: Path) -> None:
    subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", str(path), text], check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("ffmpeg") is None, reason="needs espeak-ng and ffmpeg")
@pytest.mark.skipif(resemblyzer_missing() is not None, reason=str(resemblyzer_missing()))
def test_two_espeak_voices_are_two_speakers(tmp_path: Path) -> None:
    from moviemem.characters.voices import diarize, load_audio

    script = [("en-us", "I think we should go to the station before it gets dark tonight."),
              ("en-us+f2", "The train does not leave until nine, so we have plenty of time."),
              ("en-us", "Then let us have dinner first at the little place by the river."),
              ("en-us+f2", "That sounds lovely, but I have to call my sister on the way there."),
              ("en-us", "Tell her we will visit her on Sunday afternoon if the weather is good."),
              ("en-us+f2", "She will be very happy to hear that, she misses you a lot.")]
    parts = []
    for i, (voice, text) in enumerate(script):
        _espeak(voice, text, tmp_path / f"{i}.wav")
        parts.append(tmp_path / f"{i}.wav")
    lst = tmp_path / "list.txt"
    lst.write_text("".join(f"file '{p}'\n" for p in parts))
    wav_all = tmp_path / "all.wav"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "concat", "-safe", "0", "-i", str(lst), "-ar", "16000", "-ac", "1",
                    str(wav_all)], check=True)
    wav = load_audio(wav_all)
    spans, t = [], 0.0
    for p in parts:
        d = float(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(p)],
                                 capture_output=True, text=True, check=True).stdout)
        spans.append((t, t + d))
        t += d
    cluster, conf, info = diarize(wav, spans)
    assert info["speakers"] == 2
    assert cluster == [0, 1, 0, 1, 0, 1]


def test_dlib_finds_a_face_on_a_real_frame(tmp_path: Path) -> None:
    if dlib_missing():
        pytest.skip(str(dlib_missing()))
    clip = MEDIA / "his_girl_friday_clip.mp4"
    if not clip.exists():
        pytest.skip(f"{clip} is absent (real footage lives in ../shared/media)")
    from PIL import Image

    from moviemem.characters.faces import FaceEncoder

    enc, found = FaceEncoder(), []
    for t in (1.0, 3.0, 5.0):
        frame = tmp_path / f"{t}.png"
        subprocess.run(["ffmpeg", "-v", "error", "-ss", str(t), "-i", str(clip), "-frames:v", "1", str(frame)], check=True)
        found += enc.faces(np.asarray(Image.open(frame).convert("RGB")), 1)
    if not found:
        pytest.skip("no frontal face on the sampled frames of the His Girl Friday clip")
    box, vec = found[0]
    assert vec.shape == (128,) and 0.2 < float(np.linalg.norm(vec)) < 2.0
    top, right, bottom, left = box
    assert bottom > top and right > left



def test_shots_the_strip_misses_get_a_key_frame_of_their_own() -> None:
    strip = [0.0, 2.0, 4.0, 6.0, 8.0]  # 0.5 fps
    shots = [(0.0, 1.5), (1.5, 5.0), (5.0, 5.8), (5.8, 9.0), (9.0, 9.0)]
    assert unseen_shots(shots, strip) == [5.4]  # the 0.8 s shot between two strip frames; an empty shot has none
    assert unseen_shots([(0.5, 1.9)], strip) == [1.2] and unseen_shots([(1.0, 2.0)], strip) == [1.5]  # ends are open


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
def test_frames_at_decodes_the_first_frame_at_each_time(tmp_path: Path) -> None:
    from PIL import Image

    from moviemem.ingest.frames import frames_at

    video = tmp_path / "v.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=10:duration=3",
                    "-pix_fmt", "yuv420p", str(video)], check=True)
    got = frames_at(video, [2.5, 0.05, 1.23], tmp_path / "keys", max_side=64)
    assert [round(t, 1) for t, _ in got] == [0.1, 1.3, 2.5]  # in time order, each the first frame at or after
    assert all(max(Image.open(p).size) == 64 for _, p in got) and len({p for _, p in got}) == 3


def test_only_strip_faces_count_screen_time() -> None:
    from moviemem.characters.stage_inputs import face_appearances
    from moviemem.memory.schema import FaceRow

    rows = [FaceRow(film_id="f", frame_idx=1, t=2.0, cluster=0, thumbnail="a.jpg"),
            FaceRow(film_id="f", frame_idx=-1, t=3.4, cluster=0, strip=False),  # a key frame
            FaceRow(film_id="f", frame_idx=2, t=4.0, cluster=0),
            FaceRow(film_id="f", frame_idx=-1, t=5.1, cluster=1, strip=False),
            FaceRow(film_id="f", frame_idx=3, t=6.0, cluster=-1)]
    times, screen, thumbs = face_appearances(rows)
    assert times == {0: [2.0, 3.4, 4.0], 1: [5.1]}  # key frames are appearances ...
    assert screen == {0: 4.0} and thumbs == {0: "a.jpg"}  # ... but two strip frames are 4 s on screen

def test_voices_link_to_the_face_on_screen_while_they_speak() -> None:
    from moviemem.characters.names import Character, link_faces

    sara, cedric = Character("v0", "Sara", ["Sara"], voice=0), Character("v1", "speaker 2", voice=1)
    speaking = {"v0": [(0.0, 10.0)], "v1": [(20.0, 30.0)]}
    # face 0 is on screen while Sara speaks, face 1 while speaker 2 does; face 2 appears in both
    faces = {0: [2.0, 4.0, 6.0, 8.0], 1: [22.0, 24.0, 26.0], 2: [4.0, 24.0]}
    link_faces([sara, cedric], speaking, faces)
    assert sara.face == 0 and cedric.face == 1
    link = next(lk for lk in sara.links if lk["kind"] == "face")
    assert link["confidence"] == 1.0 and link["evidence"]
    lonely = Character("v2", "speaker 3", voice=2)
    link_faces([lonely], {"v2": [(40.0, 50.0)]}, faces)
    assert lonely.face == -1  # no face on screen while it speaks: no link
