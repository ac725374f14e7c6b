"""Hostile and careless input (issue 18, items 1-7): every case fails fast with one line, or is
shown as written; nothing is half-written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from moviemem import Library, MovieMemError

SRT = "1\n00:00:05,000 --> 00:00:07,000\nWhere is Williams?\n"


# --- item 4: times are checked once, where tracks and durations enter ---------------------------

@pytest.mark.parametrize("start, end", [(float("nan"), 2.0), (0.0, float("inf")), (-3.0, -1.0), (0.0, 1e9)])
def test_cue_times_must_be_finite_non_negative_and_bounded(tmp_path: Path, start: float, end: float) -> None:
    track = tmp_path / "cues.json"
    track.write_text(json.dumps([{"start": 0, "end": 1, "text": "fine"}, {"start": start, "end": end, "text": "bad"}]))
    with pytest.raises(MovieMemError, match=r"cue at item 1: (start|end)") as exc:
        Library(tmp_path / "lib").ingest_text(track, as_="captions")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "lib" / "films").exists() or not any((tmp_path / "lib" / "films").iterdir())


def test_movie101_cue_far_past_any_film_names_its_line(tmp_path: Path) -> None:
    narr = tmp_path / "n.txt"
    narr.write_text("0:0:10|0:0:20|fine\n999999:0:0|999999:0:5|too late\n")
    with pytest.raises(MovieMemError, match="cue at line 2: start"):
        Library(tmp_path / "lib").ingest_text(narr, as_="captions")



def test_text_tracks_are_bounded_in_size(tmp_path: Path, monkeypatch) -> None:
    import moviemem.ingest.texttracks as tt

    long = tmp_path / "long.srt"
    long.write_text(SRT + "\n2\n00:00:08,000 --> 00:00:09,000\n" + "word " * 2_500 + "\n")
    with pytest.raises(MovieMemError, match=r"long.srt: cue at line 6 holds 12,499 characters; a cue holds at most 10,000"):
        Library(tmp_path / "lib").ingest_text(long)
    monkeypatch.setattr(tt, "MAX_TRACK_BYTES", 100)  # a 32 MiB file here would only slow the suite
    with pytest.raises(MovieMemError, match=r"cannot read .*long.srt: \d+ KiB is more than any subtitle or text track holds \(at most 100 bytes\)"):
        tt.load_track(long)
    assert not (tmp_path / "lib" / "films").exists() or not any((tmp_path / "lib" / "films").iterdir())

@pytest.mark.parametrize("duration", ["nan", "inf", "1e9", "-1", "0"])
def test_duration_option_is_refused_in_one_line(tmp_path: Path, cli, duration: str) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    res = cli("ingest", "--text", str(srt), "--duration", duration)
    assert res.code == 2 and "--duration" in res.err and len(res.err.strip().splitlines()) == 1
    films = cli("films", "--json")
    assert films.code == 0 and "NaN" not in films.out and json.loads(films.out) == {"films": []}



@pytest.mark.parametrize("variable, value, why", [
    ("MOVIEMEM_VECTOR_CACHE_MB", "nan", r"setting vector_cache_mb \(MOVIEMEM_VECTOR_CACHE_MB or moviemem.toml\): Input should be a valid integer"),
    ("MOVIEMEM_VECTOR_CACHE_MB", "-5", "vector_cache_mb .*greater than or equal to 0"),
    ("MOVIEMEM_STRIP_FPS", "inf", "strip_fps .*finite number"),
    ("MOVIEMEM_FRAME_POOLS", "[0]", "frame_pools .*greater than or equal to 1"),
    ("MOVIEMEM_FRAME_POOLS", "abc", "frame_pools.*a list is written as JSON"),
    ("MOVIEMEM_CACHE_MODE", "sk-secret-mode", "cache_mode .*'readwrite' or 'replay-only'"),
    ("MOVIEMEM_BACKBONE_TIMEOUT_S", "nan", "backbone_timeout_s .*finite number"),
])
def test_settings_from_the_environment_are_checked_in_one_line(cli, lib_dir: Path, monkeypatch, variable: str, value: str,
                                                                 why: str) -> None:
    from moviemem.backbones.settings import get_backbone_settings

    lib_dir.mkdir()  # an empty library: `films` reads it

    monkeypatch.setenv(variable, value)
    with pytest.raises(MovieMemError, match=why) as err:
        get_backbone_settings()
    assert value not in str(err.value) or value == "[0]"  # a variable may hold a secret: its value is never echoed
    res = cli("films")
    assert res.code == (0 if "BACKBONE" in variable else 2) and "Traceback" not in res.err
    assert res.code == 0 or (len(res.err.strip().splitlines()) == 1 and re.search(why, res.err))


def test_a_moviemem_toml_that_does_not_parse_is_named(tmp_path: Path, cli, monkeypatch) -> None:
    bad = tmp_path / "conf.toml"
    bad.write_text("strip_fps = [\n")
    monkeypatch.setenv("MOVIEMEM_CONFIG", str(bad))
    res = cli("films")
    assert res.code == 2 and res.err.startswith(f"error: {bad} is not valid TOML") and len(res.err.strip().splitlines()) == 1


@pytest.mark.parametrize("setting, why", [
    ("budget_tokens=-5", "budget_tokens=-5: -5 is not a finite number >= 0"),
    ("core_share=nan", "core_share=nan: nan is not a finite number >= 0"),
    ("budget_share=1e999", "budget_share=inf: inf is not a finite number >= 0"),  # JSON 1e999 reads as inf
    ("budget_tokens=12.5", "budget_tokens=12.5: input should be a valid integer"),
    ("reader=7", "reader=7: input should be a valid string"),
    ("channels={\"other\": [[\"utterance\", -3]]}", "channels={'other': (('utterance', -3),)}: -3 is not a finite"),
])
def test_policy_settings_are_checked_against_their_types(tmp_path: Path, cli, setting: str, why: str) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    res = cli("ask", "t1", "Who is asked about?", "--backbone", "scripted:A", "--set", setting)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1
    assert f"error: policy hybrid setting {why}" in res.err, res.err
    if "," not in setting:  # written into the policy, as `bench --policies` takes it
        res = cli("ask", "t1", "Who is asked about?", "--backbone", "scripted:A", "--policy", f"hybrid[{setting}]")
        assert res.code == 2 and f"error: policy hybrid setting {why}" in res.err, res.err
    ok = cli("ask", "t1", "Who is asked about?", "--option", "Williams", "--option", "Nobody", "--backbone", "scripted:A",
             "--set", "budget_tokens=\"300\"", "--json")  # lax: the text of a number is the number
    assert ok.code == 0, ok.err
    ok = cli("ask", "t1", "Who is asked about?", "--option", "Williams", "--option", "Nobody", "--backbone", "scripted:A",
             "--policy", "hybrid[budget_tokens=300]", "--json")
    assert ok.code == 0 and ok.json()["policy"] == "hybrid", ok.err


def test_a_python_caller_may_still_pass_objects_a_setting_declares() -> None:
    from moviemem.agents import get_policy
    from moviemem.backbones import ScriptedBackbone

    ace = get_policy("ace", selector=ScriptedBackbone(["x"]), base_settings={"budget_tokens": 400})
    assert isinstance(ace.settings.selector, ScriptedBackbone)  # type: ignore[attr-defined]
    with pytest.raises(MovieMemError, match="candidates=-1"):
        get_policy("ace", candidates=-1)


@pytest.mark.parametrize("until, why", [("99:99:99", "must be seconds or h:mm:ss"), ("0:75", "must be seconds or h:mm:ss"),
                                        ("1e12", "is not a time in seconds"), ("inf", "is not a time in seconds")])
def test_until_is_a_bounded_film_time(tmp_path: Path, cli, until: str, why: str) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    res = cli("ask", "t1", "Who?", "--backbone", "scripted:A", "--until", until)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1 and why in res.err

# --- item 5: user- and model-written text is never read as Rich markup ----------------------------

def test_titles_with_square_brackets_print_as_written(tmp_path: Path, cli) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--title", "[bold]x[/] and [red]", "--json").code == 0
    res = cli("films")
    assert res.code == 0, res.err
    assert "[bold]x[/] and [red]" in res.out
    shown = cli("show", "a")
    assert shown.code == 0 and "[bold]x[/] and [red]" in shown.out


def test_help_keeps_square_brackets_and_colons(cli) -> None:
    bench = cli("bench", "--help", library=False)
    assert "name[key=value]" in " ".join(bench.out.split())
    ingest = cli("ingest", "--help", library=False)
    assert "h:m:s|h:m:s|text" in ingest.out and "\u24c2" not in ingest.out


# --- item 6: JSONL is split on "\n" only; non-objects, unknown files and too many options refused ----

def _item(**over: object) -> dict:
    return {"id": "q1", "film_id": "a", "question": "Who\u2028speaks first?", "options": ["Hildy", "Walter"],
            "answer": "A", **over}


def test_line_separator_inside_an_item_benches_and_reports(tmp_path: Path, cli) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--json").code == 0
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item(), ensure_ascii=False) + "\r\n", encoding="utf-8")
    assert "\u2028" in bench.read_text(encoding="utf-8")
    run = tmp_path / "run"
    r = cli("bench", str(bench), "--policies", "closed-book", "--backbones", "scripted:A", "--out", str(run), "--json")
    assert r.code == 0, r.err
    assert r.json()["items"] == 1
    rep = cli("report", str(run), "--json", library=False)
    assert rep.code == 0, rep.err


def test_a_line_that_is_not_an_object_is_one_error(tmp_path: Path) -> None:
    from moviemem.eval.formats import load_benchmark

    bench = tmp_path / "b.jsonl"
    bench.write_text("[1, 2, 3]\n")
    with pytest.raises(MovieMemError, match="no line is a JSON object"):
        load_benchmark(bench)
    bench.write_text("[1, 2, 3]\n" + json.dumps(_item()) + "\n")
    with pytest.raises(MovieMemError, match=r"b.jsonl:1: expected a JSON object, got list"):
        load_benchmark(bench)


def test_a_json_file_that_is_no_benchmark_is_one_line(tmp_path: Path, cli, lib_dir: Path) -> None:
    lib_dir.mkdir()  # an empty library: bench reads it
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps({"film_id": "synth", "events": [{"start": 1, "end": 2}], "characters": ["A", "B"]}))
    r = cli("bench", str(truth), "--backbones", "scripted:A", "--out", str(tmp_path / "run"))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "is not a MovieCORE annotation file" in r.err and "missing field" not in r.err


def test_more_options_than_policies_take_are_refused_at_load(tmp_path: Path) -> None:
    from moviemem.eval.formats import load_benchmark

    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item(options=[f"opt {i}" for i in range(12)])) + "\n")
    with pytest.raises(MovieMemError, match="has 12 options; policies take at most 10"):
        load_benchmark(bench)
    bench.write_text(json.dumps(_item(options=[f"opt {i}" for i in range(10)], answer="J")) + "\n")
    assert load_benchmark(bench).items[0].answer == "J"



@pytest.mark.parametrize("evidence, why", [
    ([[1e309, 5]], r"evidence.0.0: value inf is not a time"),  # 1e309 reads as inf
    ([[0, 1e9]], r"evidence.0.1: value 1000000000.0 is not a time"),
    ([[-2, 1]], r"evidence.0.0: value -2.0 is not a time"),
    ([[9, 3]], r"evidence.0: span end 3.0 is before its start 9.0"),
])
def test_gold_evidence_spans_are_checked_like_every_other_time(tmp_path: Path, cli, lib_dir: Path, evidence, why: str) -> None:
    lib_dir.mkdir()  # an empty library: bench reads it
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item(evidence=evidence)) + "\n")
    r = cli("bench", str(bench), "--backbones", "scripted:A", "--out", str(tmp_path / "run"))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert re.search(r"b.jsonl:1: " + why, r.err) and not (tmp_path / "run").exists()
    bench.write_text(json.dumps(_item(evidence=[[1, 2], [3, 3]])) + "\n")  # a zero-length gold span is a moment
    from moviemem.eval.formats import load_benchmark

    assert load_benchmark(bench).items[0].evidence == [(1.0, 2.0), (3.0, 3.0)]


def test_benchmark_texts_and_files_are_bounded(tmp_path: Path, monkeypatch) -> None:
    import moviemem.eval.formats as fm

    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item(question="Why? " * 2_001)) + "\n")
    with pytest.raises(MovieMemError, match=r"b.jsonl:1: question: String should have at most 10000 characters"):
        fm.load_benchmark(bench)
    bench.write_text(json.dumps(_item(options=["Hildy", "W" * 10_001])) + "\n")
    with pytest.raises(MovieMemError, match=r"b.jsonl:1: options.1: String should have at most 10000 characters"):
        fm.load_benchmark(bench)
    from moviemem.agents.types import Question

    with pytest.raises(MovieMemError, match="a question or option of 10,001 characters; at most 10,000"):
        Question.make("Who?", ["Hildy", "W" * 10_001])  # the Python API and the CLI's ask meet the same bound
    bench.write_text(json.dumps(_item()) + "\n")
    monkeypatch.setattr(fm, "MAX_BENCHMARK_BYTES", 10)
    with pytest.raises(MovieMemError, match=r"b.jsonl: \d+ bytes is more than any benchmark file holds \(at most 10 bytes\)"):
        fm.load_benchmark(bench)

# --- item 7: synth says its minimum and leaves nothing behind when refused ------------------------

def test_synth_help_states_the_range_and_a_refusal_leaves_no_folder(tmp_path: Path, cli) -> None:
    from moviemem.synth import MAX_MINUTES, MIN_MINUTES, plan

    for command in ("synth", "demo"):
        shown = " ".join(cli(command, "--help", library=False).out.split())
        assert f"in minutes ({MIN_MINUTES:g} to {MAX_MINUTES:g})" in shown
    assert all(plan(MIN_MINUTES, seed).duration > 0 for seed in range(20))  # the stated minimum works
    out = tmp_path / "short"
    r = cli("synth", str(out), "--minutes", "2", library=False)
    assert r.code == 2 and f"at least {MIN_MINUTES:g} minutes" in r.err
    assert not out.exists()


# --- item 3: credentials are redacted wherever they are written or printed ------------------------

def test_url_credentials_and_echoed_keys_never_reach_disk_or_output(tmp_path: Path, cli, monkeypatch) -> None:
    from fake_servers import FakeOpenAI

    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", key)
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--json").code == 0
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item(question="Who speaks first?")) + "\n")
    run = tmp_path / "run"
    with FakeOpenAI() as srv:
        srv.push(FakeOpenAI.completion(f'{{"answer": "A"}} (your key is {key})'))
        spec = "openai-compatible:" + srv.base_url.replace("http://", "http://alice:hunter2pass@") + "#m"
        r = cli("bench", str(bench), "--policies", "closed-book", "--backbones", spec, "--out", str(run),
                "--cache", str(tmp_path / "cache"), "--json")
        assert r.code == 0, r.err
        rep = cli("report", str(run), "--json", library=False)
        assert rep.code == 0, rep.err
    written = [p for p in [*run.rglob("*"), *(tmp_path / "cache").rglob("*")] if p.is_file()]
    assert any(p.name == "results.jsonl" for p in written) and any(p.suffix == ".sqlite" for p in written)
    for text in [r.out, r.err, rep.out, *(p.read_bytes().decode("utf-8", "replace") for p in written)]:
        assert "hunter2pass" not in text and key not in text
    assert "http://***@127.0.0.1" in (run / "results.jsonl").read_text()


@pytest.mark.parametrize("url", ["ftp://bob:hunter2pass@127.0.0.1/v1", "http://127.0.0.1:99999/v1", "notaurl", "http://"])
def test_a_backbone_base_url_is_checked_and_never_echoed(tmp_path: Path, cli, url: str) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    r = cli("ask", "t1", "Who?", "--backbone", f"openai-compatible:{url}#m")
    assert r.code == 2 and r.err.startswith("error: openai-compatible's base URL is not an http(s) URL with a host")
    assert len(r.err.strip().splitlines()) == 1 and "hunter2pass" not in r.err


@pytest.mark.parametrize("args", [("serve", "--backbone", "scripted:A", "--port", "99999"), ("mcp", "--http", "70000"),
                                  ("inspect", "run", "--port", "-1")])
def test_ports_out_of_range_are_one_line_before_anything_binds(tmp_path: Path, cli, args: tuple[str, ...]) -> None:
    r = cli(*args, library=False)
    assert r.code == 2 and "Invalid value for '--" in r.err and len(r.err.strip().splitlines()) == 1


# --- item 2: the gateway reads no local file, answers only loopback JSON, takes a token -------------

def test_gateway_refuses_paths_foreign_hosts_origins_plain_text_and_missing_tokens(tmp_path: Path) -> None:
    import httpx

    from moviemem.backbones import ScriptedBackbone
    from moviemem.backbones.gateway import start_gateway

    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG not really")
    hi = {"role": "user", "content": "hi"}
    backbone = ScriptedBackbone(["B"], cycle=True)
    with start_gateway(backbone, None) as gw:
        url = f"{gw.base_url}/chat/completions"
        assert httpx.post(url, json={"messages": [hi]}).status_code == 200
        for part in ({"type": "image_url", "image_url": {"url": str(secret)}}, {"type": "image_url", "image_url": "/etc/passwd"},
                     {"type": "image", "path": str(secret)}, {"type": "image_url", "image_url": {"url": "file:///etc/hostname"}}):
            r = httpx.post(url, json={"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, part]}]})
            assert r.status_code == 400 and ("reads no local files" in r.text or "not accepted" in r.text), r.text
        assert str(secret) not in str([m for c in backbone.calls for m in c.messages])
        assert len(backbone.calls) == 1  # nothing refused reached the backbone
        plain = httpx.post(url, content=json.dumps({"messages": [hi]}), headers={"content-type": "text/plain"})
        assert plain.status_code == 415
        assert httpx.post(url, json={"messages": [hi]}, headers={"host": "evil.example"}).status_code == 403
        assert httpx.post(url, json={"messages": [hi]}, headers={"origin": "https://evil.example"}).status_code == 403
        big = httpx.post(url, content=b'{"messages": "' + b"x" * (33 * 2**20) + b'"}',
                         headers={"content-type": "application/json"})
        assert big.status_code == 400 and "over 32 MB" in big.text
    with start_gateway(ScriptedBackbone(["B"], cycle=True), None, token="s3cret-token") as gw:
        url = f"{gw.base_url}/chat/completions"
        assert httpx.post(url, json={"messages": [hi]}).status_code == 401
        ok = httpx.post(url, json={"messages": [hi]}, headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200


# --- item 1: bundles are data checked before anything is written -----------------------------------

def _rebundle(src: Path, dst: Path, *, manifest_edit=None, add: dict | None = None, link: str | None = None) -> Path:
    """A copy of bundle `src` with the manifest edited and members added (bytes) or linked."""
    import io
    import tarfile

    with tarfile.open(src) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isreg()}
    manifest = json.loads(members.pop("manifest.json"))
    if manifest_edit:
        manifest_edit(manifest)
    members.update(add or {})
    with tarfile.open(dst, "w") as tar:
        for name, data in [*members.items(), ("manifest.json", json.dumps(manifest).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/hostname"
            tar.addfile(info)
    return dst


def _exported(tmp_path: Path) -> Path:
    """The bundle of a one-cue text film 'a'."""
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    src = Library(tmp_path / "src")
    src.ingest_text(srt, film_id="a")
    return src.export("a", tmp_path / "a.tar")


def test_hostile_bundles_fail_in_one_line_and_leave_nothing(tmp_path: Path, cli) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    good = _exported(tmp_path)
    buf = io.BytesIO()
    pq.write_table(pa.table({"image": ["/etc/passwd"]}), buf)

    def frames(m):
        m["tables"]["frames"] = {"file": "tables/frames.parquet", "rows": 1, "vector_dim": None}

    faces_buf = io.BytesIO()  # a face identity whose crop is a file outside the library
    pq.write_table(pa.table({"frame_idx": [1], "t": [1.0], "cluster": [0], "thumbnail": ["../../home/u/me.jpg"]}), faces_buf)

    def faces(m):
        m["tables"]["faces"] = {"file": "tables/faces.parquet", "rows": 1, "vector_dim": None}

    def escape(m):
        m["media"] = ["media/a/../../../etc/hostname"]

    cases = {
        "frame path outside the film's media": (_rebundle(good, tmp_path / "1.tar", manifest_edit=frames,
                                                          add={"tables/frames.parquet": buf.getvalue()}),
                                                "is not a still of film"),
        "face crop outside the film's media": (_rebundle(good, tmp_path / "8.tar", manifest_edit=faces,
                                                         add={"tables/faces.parquet": faces_buf.getvalue()}),
                                               "faces image '../../home/u/me.jpg' is not a still of film"),
        "no stages table": (_rebundle(good, tmp_path / "2.tar", manifest_edit=lambda m: m["tables"].pop("stages")),
                            "stages table"),
        "no tables key": (_rebundle(good, tmp_path / "3.tar", manifest_edit=lambda m: m.pop("tables")), "'tables'"),
        "corrupt parquet": (_rebundle(good, tmp_path / "4.tar", add={"tables/utterances.parquet": b"PAR1 junk"}),
                            "not valid Parquet"),
        "missing member": (_rebundle(good, tmp_path / "5.tar", manifest_edit=frames), "is missing"),
        "link member": (_rebundle(good, tmp_path / "6.tar", manifest_edit=lambda m: m.update(media=["media/a/x.jpg"]),
                                  link="media/media/a/x.jpg"), "not a regular file"),
        "media path escape": (_rebundle(good, tmp_path / "7.tar", manifest_edit=escape), "unexpected media path"),
    }
    lib_dir = tmp_path / "lib"
    for what, (bundle, message) in cases.items():
        r = cli("import", str(bundle), "--library", str(lib_dir), library=False)
        assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, (what, r.err)
        assert cli("films", "--json", "--library", str(lib_dir), library=False).json() == {"films": []}, what
        assert not (lib_dir / "media" / "a").exists() or not any((lib_dir / "media" / "a").rglob("*")), what
    ok = cli("import", str(good), "--library", str(lib_dir), "--json", library=False)
    assert ok.code == 0 and ok.json()["counts"]["utterances"] == 1


def test_a_member_over_the_size_bound_is_refused_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    from moviemem.memory import bundle as bundle_mod

    good = _exported(tmp_path)
    monkeypatch.setattr(bundle_mod, "MAX_MEMBER_BYTES", 1000)
    with pytest.raises(MovieMemError, match="is too large"):
        Library(tmp_path / "lib").import_bundle(good)


def test_an_edited_results_line_fails_in_one_line(tmp_path: Path, cli) -> None:
    from moviemem.eval.log import RESULTS, read_log

    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "a").code == 0
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps(_item()) + "\n" + json.dumps(_item(id="q2")) + "\n")
    run = tmp_path / "run"
    assert cli("bench", str(bench), "--policies", "closed-book", "--backbones", "scripted:A", "--out", str(run)).code == 0
    good = (run / RESULTS).read_text().splitlines()
    assert len(read_log(run)) == 2
    for field, value, why in [("correct", "yes", "line 2: correct: input should be a valid boolean"),
                              ("wall_s", float("nan"), "line 2: wall_s: input should be a finite number"),
                              ("status", "done", "line 2: status: input should be 'answered', 'invalid', 'unfit' or 'transient'")]:
        rec = json.loads(good[1])
        rec[field] = value
        (run / RESULTS).write_text(good[0] + "\n" + json.dumps(rec) + "\n")
        res = cli("report", str(run), library=False)
        assert res.code == 2 and len(res.err.strip().splitlines()) == 1, res.err
        assert why in res.err and "the file was edited or is damaged" in res.err
    rec = json.loads(good[1])
    rec["usage"]["input_tokens"] = -5
    (run / RESULTS).write_text(good[0] + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(MovieMemError, match="line 2: usage.input_tokens: input should be greater than or equal to 0"):
        read_log(run)


def test_python_callers_get_clear_errors_for_mistaken_arguments(tmp_path: Path) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    film = Library(tmp_path / "lib").ingest_text(srt, film_id="t1")
    with pytest.raises(MovieMemError, match="options are a list of strings, not one string"):
        film.ask("Who is asked about?", options="AB", backbone="scripted:A", policy="subtitles")  # type: ignore[arg-type]
    with pytest.raises(MovieMemError, match="budget_tokens is a whole number of tokens >= 0, not -5"):
        film.overview(-5)
    assert film.overview(0) == "" and film.overview(1500).startswith("scene 1 [")
    # times: NaN, negative, past 48 h, a string or a bool are refused where they enter the view
    for call, why in [(lambda: film.until(float("nan")), "until nan is not a time"),
                      (lambda: film.until(-1), "until -1.0 is not a time"),
                      (lambda: film.until(True), "until must be a number of seconds, not bool"),
                      (lambda: film.window(float("nan"), 5), "window start nan is not a time"),
                      (lambda: film.window("0", "5"), "window start must be a number of seconds, not str"),  # type: ignore[arg-type]
                      (lambda: film.window(0, float("nan")), "window end nan is not a time"),
                      (lambda: film.passages("x' OR 1=1"), "unknown passage source"),
                      (lambda: film.arrow("films; drop"), "unknown table")]:
        with pytest.raises(MovieMemError, match=re.escape(why)):
            call()
    assert film.window(0, float("inf")).utterances() == film.utterances()  # an open end: to the end of the film


@pytest.mark.parametrize("n", ["0", "-1"])
def test_a_limit_below_one_is_refused_before_anything_is_written(tmp_path: Path, cli, n: str) -> None:
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    items = tmp_path / "q.jsonl"
    items.write_text(json.dumps({"id": "1", "film_id": "t1", "question": "Who?", "options": ["a", "b"], "answer": "A"}) + "\n")
    res = cli("bench", str(items), "--backbones", "scripted:A", "--out", str(tmp_path / "run"), "--limit", n)
    assert res.code == 2 and f"limit must be at least 1, not {n}" in res.err and not (tmp_path / "run").exists()
    (tmp_path / "mf2" / "transcripts").mkdir(parents=True)
    (tmp_path / "mf2" / "transcripts" / "1.srt").write_text(SRT)
    res = cli("import-collection", "mf2", str(tmp_path / "mf2"), "--limit", n)
    assert res.code == 2 and f"limit must be at least 1, not {n}" in res.err


@pytest.mark.parametrize("option,value,why", [("--max-cost", "nan", "max cost must be a finite number >= 0, not nan"),
                                              ("--max-cost", "inf", "max cost must be a finite number >= 0, not inf"),
                                              ("--max-tokens", "-5", "max tokens must be a finite number >= 0, not -5"),
                                              ("--concurrency", "100000", "concurrency must be between 1 and 1024")])
def test_bench_caps_and_concurrency_out_of_range_are_refused(tmp_path: Path, cli, option: str, value: str, why: str) -> None:
    """A NaN cost cap compared false with every spend, so it never stopped anything."""
    srt = tmp_path / "a.srt"
    srt.write_text(SRT)
    assert cli("ingest", "--text", str(srt), "--film-id", "t1").code == 0
    items = tmp_path / "q.jsonl"
    items.write_text(json.dumps({"id": "1", "film_id": "t1", "question": "Who?", "options": ["a", "b"], "answer": "A"}) + "\n")
    res = cli("bench", str(items), "--backbones", "scripted:A", "--out", str(tmp_path / "run"), option, value)
    assert res.code == 2 and why in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert not (tmp_path / "run").exists()
