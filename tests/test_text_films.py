"""Films without video: memory from subtitles, narration or JSON cues; collection importers."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from moviemem import Library, MovieMemError

SRT = "1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n\n2\n00:01:10,000 --> 00:01:12,500\nHe is in the desk.\n\n" \
      "3\n00:02:30,000 --> 00:02:31,000\nQuiet!\n"


def test_srt_as_a_film_without_video(tmp_path: Path, cli) -> None:
    srt = tmp_path / "front.srt"
    srt.write_text(SRT)
    res = cli("ingest", "--text", str(srt), "--film-id", "front-page", "--title", "The Front Page", "--year", "1931", "--json")
    assert res.code == 0, res.err
    s = res.json()
    assert s["has_video"] is False and s["duration_s"] == 151.0 and s["title"] == "The Front Page"
    assert s["counts"]["utterances"] == 3 and s["counts"]["segments"] == 3  # fixed 60 s windows: 0-60, 60-120, 120-151
    stages = {x["stage"]: x for x in s["stages"]}
    for name in ("frames", "shots", "clip", "ocr"):
        assert (stages[name]["status"], stages[name]["reason"]) == ("skipped", "no video")
    assert stages["transcript"]["status"] == "done"
    # where the time goes: each stage's time in the ingest's lines and in `show`
    assert re.search(r"front-page: transcript done .* in \d+(\.\d)?s", res.err)
    assert all(x["seconds"] >= 0 for x in s["stages"]) and stages["transcript"]["seconds"] < 60
    shown = cli("show", "front-page").out
    assert "took" in shown and re.search(r"transcript\s+done\s+\d+\.\d s", shown)


def test_narration_as_captions_with_duration(tmp_path: Path) -> None:
    narr = tmp_path / "n.txt"
    narr.write_text("0:0:10|0:0:20|[Cheng Yong] drives a van.\n0:1:0|0:1:30|[Cheng Yong] feeds [Father].\n")
    lib = Library(tmp_path / "lib")
    film = lib.ingest_text(narr, film_id="dying", as_="captions", duration_s=300)
    caps = film.captions()
    assert [c.characters for c in caps] == [["Cheng Yong"], ["Cheng Yong", "Father"]]
    assert caps[0].kind == "imported" and len(caps[0].vector) == 384
    assert film.info.duration_s == 300 and film.utterances() == []
    assert {s.stage: s.reason for s in film.stages()}["transcript"].startswith("no dialogue track")
    assert len(film.segments()) == 5


def test_dialogue_with_a_description_track_beside_it(tmp_path: Path, cli) -> None:
    srt, narr = tmp_path / "front.srt", tmp_path / "ad.txt"
    srt.write_text(SRT)
    narr.write_text("0:0:1|0:0:4|[Hildy] walks into the press room.\n0:2:40|0:2:50|Credits roll.\n")
    res = cli("ingest", "--text", str(srt), "--captions", str(narr), "--film-id", "front", "--json")
    assert res.code == 0, res.err
    s = res.json()
    assert (s["counts"]["utterances"], s["counts"]["captions"], s["duration_s"]) == (3, 1, 151.0)
    assert "0 cue(s) clipped and 1 dropped at the film's end (151.0 s)" in " ".join(res.err.split())  # dialogue sets it
    longer = ("ingest", "--text", str(srt), "--captions", str(narr), "--film-id", "front", "--duration", "200", "--json")
    refused = cli(*longer)
    assert refused.code == 2 and "is 151 s long, not 200 s; pass --replace" in " ".join(refused.err.split())
    assert cli("ingest", "--text", str(srt), "--film-id", "front", "--json").json()["duration_s"] == 151.0
    rebuilt = cli(*longer, "--replace").json()
    assert (rebuilt["duration_s"], rebuilt["counts"]["captions"]) == (200.0, 2)
    assert cli("ingest", "--text", str(srt), "--film-id", "front", "--json").json()["duration_s"] == 200.0  # kept
    for args, says in ((("--subtitles", str(srt)), "--subtitles replaces"), (("--as", "captions"), "already read as captions"),
                       (("--events-mode", "extract"), "give --backbone")):  # no model to extract with
        bad = cli("ingest", "--text", str(narr), "--captions", str(narr), "--film-id", "x", *args)
        assert bad.code == 2 and says in bad.err and bad.err.count("\n") == 1
    assert cli("ingest", "--text", str(srt), "--captions", str(tmp_path / "none.srt"), "--film-id", "y").code == 2
    for args in (("--duration", "60"), ("--as", "captions")):  # they would be ignored on a video
        bad = cli("ingest", str(tmp_path / "film.mp4"), *args)
        assert bad.code == 2 and "apply to --text films" in bad.err
    assert [f.film_id for f in Library(tmp_path / "lib").films()] == ["front"]


def test_vtt_and_json_text_films_and_bad_ones(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    vtt = tmp_path / "a.vtt"
    vtt.write_text("WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nHello.\n")
    assert len(lib.ingest_text(vtt).utterances()) == 1
    js = tmp_path / "b.json"
    js.write_text(json.dumps([{"start": 0, "end": 2, "text": "One."}, {"start": 2, "end": 4, "text": "Two."}]))
    assert [u.text for u in lib.ingest_text(js, as_="captions").captions()] == ["One.", "Two."]
    bad = tmp_path / "c.srt"
    bad.write_text("no cues here\n")
    with pytest.raises(MovieMemError):
        lib.ingest_text(bad)
    with pytest.raises(MovieMemError):
        lib.ingest_text(vtt, film_id="x", duration_s=-1)
    assert sorted(f.film_id for f in lib.films()) == ["a", "b"]


def _write_mf2(root: Path) -> None:
    (root / "transcripts").mkdir(parents=True)
    (root / "synopsis").mkdir()
    for n in (1, 2, 10):
        (root / "transcripts" / f"{n}.srt").write_text(SRT)
        (root / "synopsis" / f"{n}.synopsis").write_text(f"Synopsis of film {n}: the reporters hide Williams.")
    (root / "metadata.csv").write_text("id,title,year\n1,The Front Page,1931\n2,His Girl Friday,1940\n")


def _write_movie101(root: Path) -> None:
    (root / "narration").mkdir(parents=True)
    (root / "meta").mkdir()
    (root / "narration" / "123.txt").write_text("0:0:1|0:0:5|[Anna] opens the door.\n")
    (root / "meta" / "123.json").write_text(json.dumps({"id": "123", "title": "我不是药神", "year": "2018", "intro": "..."}))


def test_import_collections(tmp_path: Path, cli) -> None:
    _write_mf2(tmp_path / "mf2")
    _write_movie101(tmp_path / "m101")
    res = cli("import-collection", "mf2", str(tmp_path / "mf2"), "--json")
    assert res.code == 0, res.err
    films = res.json()["films"]
    assert [f["film_id"] for f in films] == ["mf2-1", "mf2-2", "mf2-10"]
    assert (films[0]["title"], films[0]["year"]) == ("The Front Page", 1931) and films[2]["year"] is None
    lib = Library(tmp_path / "lib")
    meta = lib.film("mf2-1").meta()
    assert meta["synopsis"].startswith("Synopsis of film 1") and meta["collection"] == "mf2"
    # the synopsis is metadata only: no table row carries it
    assert all("Synopsis" not in u.text for u in lib.film("mf2-1").utterances())
    res = cli("import-collection", "movie101", str(tmp_path / "m101"), "--json")
    f = res.json()["films"][0]
    assert (f["film_id"], f["title"], f["year"], f["captions"]) == ("movie101-123", "我不是药神", 2018, 1)
    again = cli("import-collection", "mf2", str(tmp_path / "mf2"), "--json")  # resumable: cached
    assert again.code == 0 and len(again.json()["films"]) == 3
    assert cli("import-collection", "mf2", str(tmp_path / "m101")).code == 2
    assert cli("import-collection", "nope", str(tmp_path)).code == 2


# -- bulk import speed path: ONNX Runtime embedder, chunked preloading, crash safety -------------

def _write_films(root: Path, n: int, cues: int = 3) -> dict[str, list[str]]:
    """An MF²-like release whose every line is distinct, so vectors cannot be mixed up unseen."""
    (root / "transcripts").mkdir(parents=True)
    texts = {}
    for f in range(1, n + 1):
        lines = [f"Film {f} says line {i}: the reporters hide Williams." for i in range(1, cues + 1)]
        (root / "transcripts" / f"{f}.srt").write_text("".join(
            f"{i}\n00:00:{2 * i:02d},000 --> 00:00:{2 * i + 1:02d},500\n{t}\n\n" for i, t in enumerate(lines, 1)))
        texts[f"mf2-{f}"] = lines
    return texts


def test_onnx_embedder_gives_the_torch_vectors() -> None:
    from sentence_transformers import SentenceTransformer

    from moviemem.models.embedder import get_embedder

    emb = get_embedder("minilm")
    assert emb.backend == "onnxruntime" and emb.dim == 384
    texts = ["Where is Williams?", "", "  padded  ", "ÉCOLE Straße 東京 😀", "a\nb\tc", "word " * 400,
             *[f"Line {i} of a film, " * (i % 7 + 1) for i in range(40)], "Where is Williams?"]
    torch_vecs = SentenceTransformer(str(emb.path), device="cpu").encode(texts, normalize_embeddings=True)
    got = emb.embed(texts)
    assert got.shape == (len(texts), 384) and got.dtype == np.float32
    assert np.abs(got - torch_vecs).max() < 1e-5  # same model: a long text is cut at 256 tokens as torch cuts it
    assert np.array_equal(got[0], got[-1])


def test_preloaded_texts_are_served_without_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from moviemem.models.embedder import get_embedder

    emb = get_embedder("minilm")
    a, b = ["Preload one.", "Shared line."], ["Shared line.", "Preload two."]
    want = emb.embed(a + b)
    assert emb.preload(a) == 2 and emb.preload(b) == 1  # the shared line is encoded once
    monkeypatch.setattr(emb, "_encode", lambda *_: pytest.fail("a preloaded text was encoded again"))
    assert np.allclose(emb.embed(a + b), want, atol=1e-6)
    emb.release(a)
    assert np.allclose(emb.embed(b), want[2:], atol=1e-6)  # b still holds the shared line
    emb.release(b)
    monkeypatch.undo()
    assert not emb._cache and not emb._refs
    with emb.preloaded(a + a) as n:
        assert n == 2 and set(emb._cache) == set(a)
    assert not emb._cache


def test_onnx_export_is_checked_and_redone_when_stale(tmp_path: Path) -> None:
    from moviemem.foundation.config import get_settings
    from moviemem.models import offline

    settings = get_settings()
    src = offline.model_path("minilm", settings)
    models = tmp_path / "models"
    (models / "minilm").mkdir(parents=True)
    for f in src.rglob("*"):  # the prepared weights, linked rather than copied
        dest = models / "minilm" / f.relative_to(src)
        if f.is_dir() or offline.ONNX_DIR in f.relative_to(src).parts:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(f)
    mine = get_settings(models_dir=models)
    assert offline.onnx_file("minilm", mine) is None and offline.onnx_file("whisper-base", mine) is None
    path = offline.export_onnx("minilm", mine)
    assert path == offline.onnx_file("minilm", mine)
    marker = json.loads((path.parent / offline.ONNX_MARKER).read_text())
    assert marker["recipe"] == offline.ONNX_RECIPE and marker["max_abs_diff"] < 1e-4
    (path.parent / offline.ONNX_MARKER).write_text(json.dumps({**marker, "recipe": -1}))
    assert offline.onnx_file("minilm", mine) is None  # stale: the next export redoes it
    assert offline.export_onnx("minilm", mine) == path and offline.onnx_file("minilm", mine) == path
    with pytest.raises(MovieMemError, match="no ONNX export"):
        offline.export_onnx("whisper-base", mine)


def test_remembered_tracks_parse_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from moviemem.ingest import texttracks

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    calls = []
    real = texttracks._load_track
    monkeypatch.setattr(texttracks, "_load_track", lambda *a: calls.append(a) or real(*a))
    with texttracks.remembered_tracks():
        first = texttracks.load_track(srt)
        first.cues.clear()  # a caller's changes do not reach the next caller
        again = texttracks.load_track(srt)
        assert len(calls) == 1 and len(again.cues) == 3
        srt.write_text(SRT.replace("Quiet!", "Quiet, please!"))  # a changed file is read again
        assert texttracks.load_track(srt).cues[-1].text == "Quiet, please!" and len(calls) == 2
    texttracks.load_track(srt)
    assert len(calls) == 3 and texttracks._memo is None


def test_sweep_commits_no_version_when_nothing_matches(tmp_path: Path) -> None:
    from moviemem.memory.schema import UtteranceRow
    from moviemem.memory.store import MemoryStore

    store = MemoryStore(tmp_path / "lib")
    store.append([UtteranceRow(film_id="f", run_id="old", idx=0, start=0, end=1, text="x", vector=[0.0] * 4)])
    tbl = store.table("utterances")
    before = tbl.version
    store.sweep("f", "transcript", ["utterances"], keep="old")
    assert tbl.version == before
    store.sweep("f", "transcript", ["utterances"], keep="new")
    assert tbl.version > before and store.query("utterances").num_rows == 0


def test_chunked_import_equals_film_by_film_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import moviemem.library as library

    texts = _write_films(tmp_path / "mf2", 4)
    monkeypatch.setattr(library, "IMPORT_CHUNK_CUES", 5)  # two films a chunk: the helper thread runs ahead
    bulk = Library(tmp_path / "bulk")
    timings: dict[str, float] = {}
    films = bulk.import_collection("mf2", tmp_path / "mf2", timings=timings)
    assert [f.film_id for f in films] == list(texts)
    assert timings["cues"] == 12 and timings["embedded"] == 12 and timings["embed_s"] > 0
    one = Library(tmp_path / "one")
    for fid in texts:
        n = fid.split("-")[1]
        one.ingest_text(tmp_path / "mf2" / "transcripts" / f"{n}.srt", film_id=fid, title=f"MF² film {n}",
                        meta={"collection": "mf2", "collection_id": n})
    for fid, lines in texts.items():
        a, b = bulk.film(fid).utterances(), one.film(fid).utterances()
        assert [u.text for u in a] == [u.text for u in b] == lines
        fields = [[(u.idx, u.start, u.end, u.source, u.speaker) for u in rows] for rows in (a, b)]
        assert fields[0] == fields[1]
        assert np.allclose([u.vector for u in a], [u.vector for u in b], atol=1e-6)
        assert bulk.film(fid).summary()["counts"] == one.film(fid).summary()["counts"]
    again: dict[str, float] = {}
    bulk.import_collection("mf2", tmp_path / "mf2", timings=again)  # rerun: all cached, nothing embedded
    assert again["embedded"] == 0 and again["cues"] == 12


KILLER = """
import os, signal, sys
import moviemem.library as library
from moviemem.memory.schema import UtteranceRow
from moviemem.memory.store import MemoryStore

mode, root, lib = sys.argv[1:4]
library.IMPORT_CHUNK_CUES = 2  # one film a chunk
append = MemoryStore.append

def killing_append(self, rows, dim=None, vectors=None):
    n = append(self, rows, dim, vectors)
    if mode == "mid-film" and rows and isinstance(rows[0], UtteranceRow) and rows[0].film_id == "mf2-3":
        os.kill(os.getpid(), signal.SIGKILL)  # its rows are written, its run is not marked done
    return n

def on_film(i, n, film_id):
    if mode == "after-first" and i == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # the next film is being embedded meanwhile

MemoryStore.append = killing_append
library.Library(lib).import_collection("mf2", root, on_film=on_film)
"""


def test_killed_import_loses_no_finished_film_and_duplicates_nothing(tmp_path: Path) -> None:
    from moviemem.memory.store import MemoryStore

    texts = _write_films(tmp_path / "mf2", 4)
    lib = tmp_path / "lib"
    for mode, committed in (("after-first", ["mf2-1"]), ("mid-film", ["mf2-1", "mf2-2"])):
        proc = subprocess.run([sys.executable, "-c", KILLER, mode, str(tmp_path / "mf2"), str(lib)],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        store = MemoryStore(lib)
        done = [fid for fid in texts if "transcript" in store.finished_runs(fid)]
        assert done == committed
        for fid in committed:
            assert [u.text for u in Library(lib).film(fid).utterances()] == texts[fid]
    assert MemoryStore(lib).query("utterances").num_rows == 9  # film 3's rows are written but not committed
    assert Library(lib).film("mf2-3").utterances() == []  # so no reader sees them
    films = Library(lib).import_collection("mf2", tmp_path / "mf2")
    assert [f.film_id for f in films] == list(texts)
    for f in films:
        assert [u.text for u in f.utterances()] == texts[f.film_id]
    store = MemoryStore(lib)
    assert store.query("utterances").num_rows == 12  # no duplicate, no leftover
    stages = store.query("stages", columns=["film_id", "stage"]).to_pylist()
    assert len(stages) == len({(r["film_id"], r["stage"]) for r in stages})  # one run per film and stage


def test_an_ingest_reads_nothing_a_run_did_not_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from moviemem.memory.store import MemoryStore

    asked: list[str] = []
    query = MemoryStore.query

    def spy(self: MemoryStore, name: str, where: str | None = None, columns: list[str] | None = None):  # type: ignore[no-untyped-def]
        asked.append(name)
        return query(self, name, where, columns)

    monkeypatch.setattr(MemoryStore, "query", spy)
    srt = tmp_path / "front.srt"
    srt.write_text(SRT)
    film = Library(tmp_path / "lib").ingest_text(srt, film_id="front")
    # no captions, on-screen text, voices or faces: the stages after them never query those tables;
    # the film's runs are read before and for its stages, then by the views of its packs and of the
    # film returned, never again after each of its 14 stages
    assert not {"captions", "onscreen", "voices", "faces", "frames", "shots"} & set(asked)
    assert asked.count("stages") == 4
    runs = {s.stage: s for s in film.stages()}
    assert (runs["frames"].status, runs["frames"].started_at) == ("skipped", runs["frames"].finished_at)  # one row
    assert film.scenes() and film.events()


# --- issue 64: who is who, every minute in a scene, what a text film lacks said once ---------------------

SABOTAGE_SYNOPSIS = ("A cinema is owned by Karl Verloc (Oskar Homolka). Verloc comes home, and his wife (Sylvia Sidney) "
                     "comes for him. Detective Sergeant Ted Spencer (John Loder) works next door. Spencer likes "
                     "Mrs. Verloc and her brother, Stevie (Desmond Tester).")


def _sabotage_cues() -> list[tuple[float, float, str]]:
    cues = [(10.0, 12.0, "I'm so sorry I'm late, Mrs Verloc."), (13.0, 15.0, "I do wish Mr Verloc would come."),
            (40.0, 42.0, "Carl! When did you get home?"), (42.5, 44.0, "I haven't been out.")]
    t = 60.0
    for k in range(12):  # the names again and again, over the film: a feature film's cast
        cues += [(t, t + 2, "Hello, Ted. Where are you going?"), (t + 3, t + 5, "Now, listen, Spencer."),
                 (t + 6, t + 8, f"Is Mr Verloc in? Stevie says {k}."), (t + 9, t + 11, "Stevie, come here."),
                 (t + 12, t + 14, "Thank you, Mrs Verloc."), (t + 15, t + 17, "Mrs Verloc, there's nothing to fear.")]
        t += 25 + (200 if k == 5 else 0)  # a long pause after the sixth exchange
    return cues


def test_a_text_film_with_its_synopsis_knows_who_is_who(tmp_path: Path, cli, lib_dir: Path) -> None:
    from tests.text_film import srt_text

    (tmp_path / "6.srt").write_text(srt_text(_sabotage_cues()))
    Library(lib_dir).ingest_text(tmp_path / "6.srt", film_id="sabotage", meta={"synopsis": SABOTAGE_SYNOPSIS})
    chars = {c["name"]: c for c in cli("characters", "sabotage", "--json").json()["characters"]}
    ted, verloc = chars["Ted Spencer"], chars["Karl Verloc"]
    assert {"Ted", "Spencer"} <= set(ted["names"]) and {"Mr. Verloc", "Carl"} <= set(verloc["names"])
    alias = next(lk for lk in ted["links"] if lk["kind"] == "alias")
    assert alias["rule"] == "synopsis" and "Detective Sergeant Ted Spencer" in alias["evidence"][0]
    # "Mr Verloc" (no period) is his: his times come from the film's own lines; hers from the first "Mrs Verloc"
    assert verloc["first_s"] == 13.0 and chars["Mrs. Verloc"]["first_s"] == 10.0
    # the reply to "Carl!" is his, with its reason and confidence
    speech = next(lk for lk in verloc["links"] if lk["kind"] == "speech")
    assert speech["lines"][0][1:] == ["question-reply", 0.7]
    shown = cli("characters", "sabotage").out
    assert "also" in shown and "(by synopsis)" in shown and "question-reply" in shown

    # the user undoes a merge, and makes one; both stored in the library and kept by the next rebuild
    res = cli("characters", "sabotage", "--split", "Spencer")
    assert res.code == 0, res.err
    assert json.loads((lib_dir / "overrides" / "sabotage.characters.json").read_text())["split"] == ["Spencer"]
    after = {c["name"]: c["names"] for c in cli("characters", "sabotage", "--json").json()["characters"]}
    assert after["Spencer"] == ["Spencer"] and "Spencer" not in after["Ted Spencer"]
    assert cli("characters", "sabotage", "--merge", "Stevie,Spencer").code == 0
    merged = [c["names"] for c in cli("characters", "sabotage", "--json").json()["characters"]]
    assert any({"Stevie", "Spencer"} <= set(n) for n in merged)
    bad = cli("characters", "sabotage", "--merge", "Stevie")
    assert bad.code == 2 and "two names or more" in bad.err and bad.err.count("\n") == 1


def test_a_text_film_s_scenes_leave_no_minute_out(tmp_path: Path, cli, lib_dir: Path) -> None:
    from tests.text_film import srt_text

    cues = _sabotage_cues()
    (tmp_path / "6.srt").write_text(srt_text(cues))
    Library(lib_dir).ingest_text(tmp_path / "6.srt", film_id="sabotage", meta={"synopsis": SABOTAGE_SYNOPSIS})
    scenes = cli("scenes", "sabotage", "--json").json()["scenes"]
    assert len(scenes) >= 2 and scenes[0]["start"] == cues[0][0] and scenes[-1]["end"] == cues[-1][1]
    assert all(a["end"] == b["start"] for a, b in zip(scenes, scenes[1:]))  # the 200 s pause is in a scene
    summary = scenes[-1]["summary"]
    assert summary.startswith("With ") and summary.count('"Mrs Verloc, there\'s nothing to fear."') <= 1


def test_search_leaves_what_a_text_film_lacks_to_show(tmp_path: Path, cli, lib_dir: Path) -> None:
    from tests.text_film import srt_text

    (tmp_path / "6.srt").write_text(srt_text(_sabotage_cues()))
    assert cli("ingest", "--text", str(tmp_path / "6.srt"), "--film-id", "sabotage").code == 0
    found = cli("search", "sabotage", "Verloc")
    assert found.code == 0 and "Verloc" in found.out and "no caption rows" not in found.err and found.err == ""
    asked = cli("search", "sabotage", "Verloc", "--kinds", "caption")  # asked for by name: then it is said
    assert "no caption rows" in asked.err
    shown = cli("show", "sabotage").out
    assert shown.count("a text film: no captions or onscreen rows") == 1
