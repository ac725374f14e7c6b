"""describe and serve refuse instead of pretending (issue 18, item 14)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from moviemem import Library, register
from moviemem.backbones import ScriptedBackbone
from moviemem.backbones.gateway import start_gateway


def test_describe_with_only_invalid_replies_fails_and_writes_nothing(tmp_path: Path, cli) -> None:
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps([{"start": 0, "end": 20, "text": "A woman waits by a door."},
                                {"start": 30, "end": 50, "text": "A train leaves the station."}]))
    lib_dir = tmp_path / "lib"
    Library(lib_dir).ingest_text(caps, film_id="quiet", as_="captions", duration_s=60)
    name = f"always-bad-{uuid.uuid4().hex[:8]}"
    register("backbone", name)(lambda arg, **options: ScriptedBackbone(["not json"], cycle=True, capabilities={"images": False}))
    out = tmp_path / "ad.srt"
    r = cli("describe", "quiet", "--out", str(out), "--backbone", name, "--library", str(lib_dir), library=False)
    assert r.code == 2 and "no narration written" in r.err and "JSON" in r.err
    assert not out.exists()


def test_serve_refuses_a_model_it_does_not_serve_in_the_openai_shape() -> None:
    with start_gateway(ScriptedBackbone(["B"], cycle=True), None) as gw:
        ok = httpx.post(f"{gw.base_url}/chat/completions",
                        json={"model": "scripted", "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "B"
        bad = httpx.post(f"{gw.base_url}/chat/completions",
                         json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        assert bad.status_code == 404
        err = bad.json()["error"]
        assert err["param"] == "model" and "gpt-4o" in err["message"] and err["type"] == "invalid_request_error"


def test_narrate_asks_again_after_a_schema_miss(tmp_path: Path, cli) -> None:
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps([{"start": 0, "end": 20, "text": "A woman waits by a door."}]))
    lib_dir = tmp_path / "lib"
    Library(lib_dir).ingest_text(caps, film_id="quiet", as_="captions", duration_s=60)
    b = ScriptedBackbone(["not json", json.dumps({"narration": "She waits.", "characters": []})],
                         capabilities={"images": False})
    name = f"second-try-{uuid.uuid4().hex[:8]}"
    register("backbone", name)(lambda arg, **options: b)
    r = cli("narrate", "quiet", "--start", "0", "--end", "20", "--backbone", name, "--json",
            "--library", str(lib_dir), library=False)
    assert r.code == 0, r.err
    assert r.json()["text"] == "She waits." and len(b.calls) == 2
    assert "not JSON" in "\n".join(p.text for p in b.calls[1].messages[-1].parts)  # told why
