"""ReplayCache: modes, keys, what is (not) stored, and sharing one database between processes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from fake_servers import FakeOpenAI

from moviemem.backbones import ReplayCache, ReplayMiss, Request, ScriptedBackbone, load, user
from moviemem.backbones.cache import request_key
from moviemem.foundation.errors import MovieMemError

PNG_A = bytes.fromhex("89504e470d0a1a0a0000000d494844520000000100000001080600000000")
PNG_B = bytes.fromhex("89504e470d0a1a0a0000000d494844520000000200000001080600000000")


def counting_backbone():
    return ScriptedBackbone(lambda r: {"text": f"answer {len(echo.calls)}",
                                       "tool_calls": [{"id": "c9", "name": "look", "arguments": {"t": 41.5}}]})


echo = None


@pytest.fixture()
def backbone():
    global echo
    echo = counting_backbone()
    return echo


def test_readwrite_serves_repeats_from_the_cache(tmp_path, backbone):
    cache = ReplayCache(backbone, tmp_path / "c", "readwrite")
    first = cache.chat([user("Why did she leave?")], max_tokens=32)
    again = cache.chat([{"role": "user", "content": "Why did she leave?"}], max_tokens=32)
    assert len(backbone.calls) == 1 and not first.cached and again.cached
    assert (again.text, again.tool_calls, again.usage) == (first.text, first.tool_calls, first.usage)
    assert cache.chat([user("Why did she leave?")], max_tokens=33).text == "answer 2"  # other settings, other key
    report = cache.report()
    assert (report["hits"], report["misses"], report["writes"], report["entries"]) == (1, 2, 2, 2)
    assert report["hit_rate"] == pytest.approx(1 / 3, abs=1e-4)


def test_modes(tmp_path, backbone):
    path = tmp_path / "c"
    ReplayCache(backbone, path, "write").chat("q1")
    ReplayCache(backbone, path, "write").chat("q1")  # write mode always calls and overwrites
    assert len(backbone.calls) == 2
    read = ReplayCache(backbone, path, "read")
    assert read.chat("q1").cached and not read.chat("q2").cached
    assert read.entries() == 1 and len(backbone.calls) == 3  # read mode stores nothing
    replay = ReplayCache(backbone, path, "replay-only")
    assert replay.chat("q1").text == "answer 2"
    with pytest.raises(ReplayMiss, match="no reply for this request"):
        replay.chat("q2")
    off = ReplayCache(backbone, tmp_path / "never", "off")
    off.chat("q1")
    assert not (tmp_path / "never").exists() and len(backbone.calls) == 4
    with pytest.raises(MovieMemError, match="unknown cache mode"):
        ReplayCache(backbone, path, "sometimes")


def test_load_wraps_in_cache_and_mode_comes_from_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("MOVIEMEM_CACHE_MODE", "replay-only")
    b = load("scripted", cache=tmp_path / "runs" / "cache")
    assert isinstance(b, ReplayCache) and b.mode == "replay-only" and b.path.name == "replies.sqlite"
    with pytest.raises(ReplayMiss):
        b.chat("nothing cached yet")


def test_keys_cover_content_and_model_but_not_credentials(tmp_path, monkeypatch):
    base = Request.build([user("which frame?", images=[PNG_A])])
    assert request_key("m", base) == request_key("m", Request.build([user("which frame?", images=[PNG_A])], timeout=5))
    assert request_key("m", base) != request_key("m", Request.build([user("which frame?", images=[PNG_B])]))
    assert request_key("m", base) != request_key("other-model", base)
    img = tmp_path / "f.png"
    img.write_bytes(PNG_A)
    assert request_key("m", base) == request_key("m", Request.build([user("which frame?", images=[img])]))

    with FakeOpenAI() as srv:
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-first-key-000000")
        b = load(f"openai-compatible:{srv.base_url}#m", cache=tmp_path / "c")
        assert not b.chat("hello").cached
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-second-key-111111")
        assert load(f"openai-compatible:{srv.base_url}#m", cache=tmp_path / "c").chat("hello").cached
        assert len(srv.calls("/chat/completions")) == 1


def test_failures_worth_retrying_are_not_stored_but_invalid_answers_are(tmp_path):
    class Down(Exception):
        status_code = 503

    b = ScriptedBackbone([Down("down"), "The answer is B", "unused"], max_attempts=1)
    cache = ReplayCache(b, tmp_path / "c")
    schema = {"type": "object", "required": ["choice"]}
    assert cache.chat("q", json_schema=schema).transient
    invalid = cache.chat("q", json_schema=schema)
    assert invalid.invalid and not invalid.transient and cache.entries() == 1
    replayed = cache.chat("q", json_schema=schema)  # a rerun reproduces the model's bad answer, for free
    assert replayed.cached and replayed.invalid and replayed.raw == "The answer is B"


def test_chat_many_through_the_cache(tmp_path, backbone):
    cache = ReplayCache(backbone, tmp_path / "c")
    cache.chat("q2")
    replies = cache.chat_many([{"messages": "q1"}, {"messages": "q2"}, {"messages": "q3"}])
    assert [r.cached for r in replies] == [False, True, False] and cache.entries() == 3


WORKER = textwrap.dedent("""
    import json, sys
    from moviemem.backbones import ReplayCache, ScriptedBackbone
    path, mode, start, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    cache = ReplayCache(ScriptedBackbone(lambda r: "reply to " + r.messages[-1].text), path, mode)
    texts = [cache.chat(f"question {i}").text for i in range(start, stop)]
    print(json.dumps({"stats": cache.report(), "texts": texts}))
""")


def test_two_processes_share_one_cache(tmp_path):
    path = str(tmp_path / "shared" / "replies.sqlite")

    def spawn(mode: str, start: int, stop: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", WORKER, path, mode, str(start), str(stop)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    writers = [spawn("readwrite", 0, 60), spawn("readwrite", 30, 90)]  # overlapping, at the same time
    results = []
    for p in writers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert sum(r["stats"]["writes"] for r in results) + sum(r["stats"]["hits"] for r in results) == 120
    reader = spawn("replay-only", 0, 90)
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    replay = json.loads(out)
    assert replay["stats"]["hits"] == 90 and replay["texts"][89] == "reply to question 89"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 90


def test_a_cache_opened_while_another_process_locks_the_new_file_waits(tmp_path):
    """A new cache file locked by another process: setting up the connection waits for the lock
    (the busy timeout, and a retry of the set-up for the WAL switch that SQLite sometimes refuses
    at once, as one CI run showed when two processes created one cache together)."""
    import threading

    from moviemem.backbones.cache import _set_up

    path = tmp_path / "replies.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    threading.Timer(0.5, lambda: holder.execute("COMMIT")).start()
    other = sqlite3.connect(path, timeout=0.05, isolation_level=None, check_same_thread=False)
    _set_up(other)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 0


def test_a_cache_path_under_a_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(MovieMemError, match=f"cannot keep a replay cache at {blocker}"):
        ReplayCache(ScriptedBackbone(["x"]), blocker, "readwrite")


def test_one_model_id_answering_for_two_specs_warns(tmp_path, caplog) -> None:
    """A plug-in whose model changed but whose model_id did not would be served the old model's replies: warned."""
    first = ReplayCache(ScriptedBackbone(["A"], name="myplugin:model-a", model_id="myplugin"), tmp_path / "c", "readwrite")
    assert first.chat([user("Which?")], max_tokens=4).text == "A" and first.warning is None
    again = ReplayCache(ScriptedBackbone(["A"], name="myplugin:model-a", model_id="myplugin"), tmp_path / "c", "readwrite")
    assert again.warning is None  # the same spec again: nothing to say
    with caplog.at_level("WARNING"):
        second = ReplayCache(ScriptedBackbone(["B"], name="myplugin:model-b", model_id="myplugin"), tmp_path / "c",
                             "readwrite")
    assert second.chat([user("Which?")], max_tokens=4).text == "A"  # still served the stored reply, as keyed
    assert second.warning and "'myplugin:model-a'" in second.warning and "'myplugin:model-b'" in second.warning
    assert "own model_id" in caplog.text
