"""Prompt states saved on disk (issue 65): a film's prefix read once per machine, verified, capped, atomic."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from moviemem.backbones import prefix_states as ps
from moviemem.backbones.prefix_states import PrefixStates
from moviemem.backbones.types import Usage

KEY = {"model_sha256": "m" * 64, "build": "test", "n_ctx": 2048, "n_batch": 512, "n_ubatch": 512, "kv_type": "f16",
       "flash": True}


def tokens(film: int, n: int = 600, tail: int = 0) -> np.ndarray:
    """A prompt's token ids: a film's shared part (n tokens), then a question's own tail."""
    rng = np.random.default_rng(film)
    return np.concatenate([rng.integers(0, 30000, n), 40000 + np.arange(tail)]).astype(np.intc)


def store(folder: Path, cap: int = 1 << 30) -> PrefixStates:
    return PrefixStates(folder, cap, 256)


def test_saved_state_is_found_by_shared_prefix_and_read_back(tmp_path: Path) -> None:
    s = store(tmp_path)
    payload = os.urandom(100_000)
    s.save(KEY, tokens(1, tail=7), payload, film="casablanca", backbone="local-small")
    found = s.find(KEY, tokens(1, tail=0).tolist() + [9, 9, 9], at_least=300)
    assert found is not None and found[1] == 600  # the film's part is shared, the old question's tail is not
    assert bytes(s.payload(found[0]) or b"") == payload
    assert s.find(KEY, tokens(2).tolist(), at_least=300) is None  # another film
    assert s.find({**KEY, "n_ctx": 4096}, tokens(1).tolist(), at_least=300) is None  # another context: another key
    [row] = ps.listing(s)
    assert (row["film"], row["backbone"], row["tokens"]) == ("casablanca", "local-small", 607)
    assert ps.saved_prefixes(tmp_path.parent, "local-small") == set()  # another folder holds nothing
    assert not list(tmp_path.glob(".tmp-*"))


def test_flipped_byte_is_ignored_with_one_warning_and_the_file_removed(tmp_path: Path, caplog) -> None:
    s = store(tmp_path)
    path = s.save(KEY, tokens(1), os.urandom(50_000), film="f", backbone="b")
    assert path is not None
    data = bytearray(path.read_bytes())
    data[-1000] ^= 0x01
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, "moviemem.backbones")
    found = s.find(KEY, tokens(1).tolist(), at_least=300)
    assert found is not None  # the header and token ids are sound: only the payload tells
    assert s.payload(found[0]) is None and s.payload(found[0]) is None
    assert not path.exists()
    warned = [r for r in caplog.records if "ignored" in r.getMessage()]
    assert len(warned) == 1 and path.name in warned[0].getMessage()
    # the next save writes it again, whole
    assert s.save(KEY, tokens(1), os.urandom(50_000), film="f", backbone="b") == path
    assert s.find(KEY, tokens(1).tolist(), at_least=300) is not None


@pytest.mark.parametrize("where", ["magic", "header", "tokens", "truncated", "foreign"])
def test_damaged_or_foreign_headers_are_never_trusted(tmp_path: Path, caplog, where: str) -> None:
    s = store(tmp_path)
    path = s.save(KEY, tokens(1), os.urandom(20_000), film="f", backbone="b")
    assert path is not None
    data = bytearray(path.read_bytes())
    if where == "magic":
        data[0] ^= 0xFF
    elif where == "header":
        data[ps._FIXED.size + 5] ^= 0x01
    elif where == "tokens":
        data[len(data) - 20_000 - 8] ^= 0x01
    elif where == "truncated":
        data = data[:-10]
    else:  # a file of the right name saved under another key (a copied folder, a renamed file)
        other = store(tmp_path / "other").save({**KEY, "build": "other"}, tokens(1), os.urandom(20_000), film="f", backbone="b")
        assert other is not None
        data = bytearray(other.read_bytes())
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, "moviemem.backbones")
    assert s.find(KEY, tokens(1).tolist(), at_least=300) is None
    assert s.find(KEY, tokens(1).tolist(), at_least=300) is None
    assert not path.exists() and len([r for r in caplog.records if "ignored" in r.getMessage()]) == 1


def test_the_cap_holds_by_evicting_the_least_recently_used(tmp_path: Path) -> None:
    s = store(tmp_path, cap=350_000)
    paths = []
    for film in range(3):
        paths.append(s.save(KEY, tokens(film), os.urandom(100_000), film=f"f{film}", backbone="b"))
        os.utime(paths[-1], (1000 + film, 1000 + film))  # saved in this order
    found = s.find(KEY, tokens(0).tolist(), at_least=300)
    assert found is not None and s.payload(found[0]) is not None  # film 0 used again: now the most recent
    s.save(KEY, tokens(3), os.urandom(100_000), film="f3", backbone="b")
    assert paths[0].exists() and not paths[1].exists() and paths[2].exists()
    assert sum(p.stat().st_size for p in tmp_path.glob("*.state")) <= 350_000
    assert s.save(KEY, tokens(4), os.urandom(400_000), film="f4", backbone="b") is None  # larger than the cap alone


def test_a_writer_killed_mid_write_leaves_nothing_that_is_read(tmp_path: Path) -> None:
    """kill -9 while a state is written: no state appears, nothing half written is read, the next writer
    removes the abandoned temporary file (and not one that a live writer holds)."""
    child = textwrap.dedent(f"""
        import os, sys, time
        import numpy as np
        from moviemem.backbones import prefix_states as ps
        def hang(fd):
            print("writing", flush=True)
            time.sleep(600)
        ps.os.fsync = hang
        s = ps.PrefixStates({str(tmp_path)!r}, 1 << 30, 256)
        rng = np.random.default_rng(1)
        s.save({KEY!r}, rng.integers(0, 30000, 600).astype(np.intc), os.urandom(5_000_000), film="f", backbone="b")
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        s = store(tmp_path)
        assert s.find(KEY, tokens(1).tolist(), at_least=300) is None and ps.listing(s) == []
        s.save(KEY, tokens(2), os.urandom(1000), film="g", backbone="b")
        assert len(list(tmp_path.glob(".tmp-*"))) == 1  # its writer is alive: left alone
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    s = store(tmp_path)
    assert s.find(KEY, tokens(1).tolist(), at_least=300) is None
    assert s.save(KEY, tokens(1), os.urandom(1000), film="f", backbone="b") is not None
    assert not list(tmp_path.glob(".tmp-*"))  # the dead writer's file is gone
    assert {r["film"] for r in ps.listing(s)} == {"f", "g"}


def test_usage_counts_read_restored_and_billed() -> None:
    u = Usage(input_tokens=1000, output_tokens=10, cached_input_tokens=900, restored_input_tokens=800)
    total = u + Usage(input_tokens=500, output_tokens=5, cached_input_tokens=0)
    assert (total.read_input_tokens, total.restored_input_tokens, total.billed_tokens) == (600, 800, 1515)
    assert Usage.from_dict(total.to_dict()) == total


def test_cache_command_lists_and_clears(cli, lib_dir: Path) -> None:
    s = store(lib_dir / "cache" / ps.FOLDER)
    s.save(KEY, tokens(1), os.urandom(10_000), film="casablanca", backbone="local")
    s.save(KEY, tokens(2), os.urandom(10_000), film="vertigo", backbone="local")
    res = cli("cache", "--json")
    assert res.code == 0, res.err
    listed = res.json()
    assert sorted(r["film"] for r in listed["states"]) == ["casablanca", "vertigo"]
    assert all(r["tokens"] == 600 and r["bytes"] > 10_000 for r in listed["states"])
    human = cli("cache")
    assert "casablanca" in human.out and "2 state(s)" in human.err
    assert cli("cache", "clear", "--film", "vertigo", "--json").json()["removed"] == 1
    assert [r["film"] for r in cli("cache", "--json").json()["states"]] == ["casablanca"]
    assert cli("cache", "clear").code == 0
    assert cli("cache", "--json").json()["states"] == []


# ----------------------------------------------------------------------------- with the real small model


CONTEXT = "Here is the film's full transcript.\n" + "\n".join(
    f"[0:{m:02d}:00] Rick tells Ilsa that the letter {m} arrived at the cafe before the plane to Lisbon left." for m in range(16))


@pytest.fixture
def small_states(tmp_path: Path):
    pytest.importorskip("llama_cpp")
    from moviemem.backbones import load
    from moviemem.foundation.errors import MovieMemError

    def make(**options):
        try:
            return load("local-small", **{"n_ctx": 2048, "isolate": False, "cache_bytes": 0, "state_dir": tmp_path / "states",
                                          "state_min_tokens": 256, **options})
        except MovieMemError as exc:
            pytest.skip(str(exc))

    return make


def _fresh(backbone) -> None:
    """What a new process holds: nothing read yet."""
    backbone.model().llm.reset()


def _ask(backbone, question: str, **kw):
    from moviemem.backbones import system, user

    return backbone.chat([system("Answer from the transcript."), user(f"{CONTEXT}\n\n{question}")], **kw)


def _ask_shared(backbone, question: str, **kw):
    """The transcript marked as the prefix every question on the film shares (as the full-context policies send it)."""
    from moviemem.backbones import system, user

    return backbone.chat([system("Answer from the transcript."), user(f"{CONTEXT}\n\n{question}")],
                         shared_prefix=len(CONTEXT) + 2, **kw)


def test_restored_state_answers_exactly_as_a_fresh_read(small_states, tmp_path: Path) -> None:
    b = small_states()
    off = small_states(state_max_bytes=0)
    _fresh(b)
    first = _ask(b, "What arrived at the cafe?", max_tokens=16)
    assert first.usage.restored_input_tokens == 0 and first.usage.read_input_tokens > 300
    assert b.last_perf["save_s"] > 0 and len(list((tmp_path / "states").glob("*.state"))) == 1
    for question, kw in (("Where did the plane go?", {"max_tokens": 16}), ("Is the letter late? Answer yes or no:", {"max_tokens": 1, "logprobs": 5})):
        _fresh(off)
        plain = _ask(off, question, **kw)
        assert plain.usage.restored_input_tokens == 0
        _fresh(b)
        restored = _ask(b, question, **kw)
        assert restored.usage.restored_input_tokens > 300 and restored.usage.read_input_tokens < 40
        assert restored.text == plain.text
        if kw.get("logprobs"):
            assert restored.logprobs == plain.logprobs  # the same floats, not only the same tokens
    assert len(list((tmp_path / "states").glob("*.state"))) == 1  # a short read saves nothing new


def test_the_worker_files_states_under_the_asking_film_and_library(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from moviemem.backbones import llamacpp_worker, load
    from moviemem.foundation.errors import MovieMemError

    try:
        b = load("local-small", n_ctx=2048, isolate=True, cache_bytes=0, state_min_tokens=256,
                 state_max_bytes=(1 << 30) + 7)  # a worker of its own
    except MovieMemError as exc:
        pytest.skip(str(exc))
    cache = tmp_path / "lib" / "cache"
    try:
        with ps.asking("casablanca", cache):
            first = _ask_shared(b, "What arrived at the cafe?", max_tokens=8)
        llamacpp_worker.close_all()  # a new process
        with ps.asking("casablanca", cache):
            again = _ask_shared(b, "Where did the plane go?", max_tokens=8)
    finally:
        llamacpp_worker.close_all()
    assert first.usage.restored_input_tokens == 0 and again.usage.restored_input_tokens > 300
    assert ps.saved_prefixes(cache, "local-small") == {"casablanca"}
    assert [r["film"] for r in ps.listing(ps.open_states(cache))] == ["casablanca"]


def test_the_state_folder_follows_the_setting_then_the_library(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MOVIEMEM_LLM_STATE_DIR", raising=False)
    assert ps.folder_for(tmp_path / "cache") == tmp_path / "cache" / ps.FOLDER
    monkeypatch.setenv("MOVIEMEM_LLM_STATE_DIR", str(tmp_path / "shared"))
    assert ps.folder_for(tmp_path / "cache") == tmp_path / "shared"


def test_a_shared_prefix_is_read_alone_so_every_path_gives_the_same_numbers(small_states, tmp_path: Path) -> None:
    """Fresh, held after another question, restored from disk, and from the RAM cache when saving is off: the same
    text and the same log-probabilities, because the prefix is always read as a unit of its own (llama.cpp's sums
    depend on where a prompt is cut into batches)."""
    probe = {"max_tokens": 1, "logprobs": 5}
    asked = "Is the letter late? Answer yes or no:"
    fresh = small_states(state_max_bytes=0)
    _fresh(fresh)
    want, want_text = _ask_shared(fresh, asked, **probe), _ask_shared(fresh, "Where did the plane go?", max_tokens=12)
    assert want.usage.read_input_tokens > 300 and want_text.usage.read_input_tokens < 40  # the second read its tail only

    b = small_states()
    _fresh(b)
    first = _ask_shared(b, "What arrived at the cafe?", max_tokens=8)
    saved = store(tmp_path / "states").entries()
    assert len(saved) == 1 and first.usage.read_input_tokens > saved[0].n_tokens > 300  # the prefix alone is saved
    held = _ask_shared(b, asked, **probe)  # the prefix held in memory, another question's tail dropped
    assert held.usage.read_input_tokens < 40 and held.logprobs == want.logprobs
    _fresh(b)
    restored = _ask_shared(b, asked, **probe)
    assert restored.usage.restored_input_tokens == saved[0].n_tokens and restored.logprobs == want.logprobs
    _fresh(b)
    assert _ask_shared(b, "Where did the plane go?", max_tokens=12).text == want_text.text

    ram = small_states(state_max_bytes=0, cache_bytes=1 << 30)
    _fresh(ram)
    _ask_shared(ram, "What arrived at the cafe?", max_tokens=8)
    _fresh(ram)  # the context is emptied; the RAM cache keeps the prefix's state
    again = _ask_shared(ram, asked, **probe)
    assert again.usage.read_input_tokens < 40 and again.logprobs == want.logprobs

