"""`moviemem backbones` and `moviemem serve` from the command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest


def test_backbones_json_lists_builtins_with_capabilities(cli) -> None:
    res = cli("backbones", "--json", library=False)
    assert res.code == 0, res.err
    items = {b["name"]: b for b in res.json()["backbones"]}
    assert {"openai", "openai-compatible", "gemini", "llamacpp", "local", "local-small"} <= set(items)
    assert items["gemini"]["capabilities"]["video"] is True
    assert items["local"]["capabilities"]["images"] is False
    assert items["local-small"]["ready"] is True  # prepared by `moviemem models prepare`
    human = cli("backbones", library=False)
    assert human.code == 0 and "local-small" in human.out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (("synth", "--out", "x"), "error: No such option: --out (see `moviemem synth --help`)"),
    (("no-such-command",), "error: No such command 'no-such-command'."),
    (("ask",), "error: Missing argument 'film'."),
    (("bench", "x.jsonl", "--concurrency", "many"), "error: Invalid value for '--concurrency'"),
    (("serve", "--host", "0.0.0.0", "--port", "0"), "error: --host 0.0.0.0 listens beyond this machine; give a token"),
    (("retrieval-eval", "x.jsonl", "--plot", "no-such-folder/r.png"), "error: cannot write no-such-folder/r.png: no folder"),
])
def test_usage_errors_are_one_line_with_exit_code_2(cli, args, message) -> None:
    """typer vendors click, so its usage errors are not the `click` package's: each must still be one
    line on stderr with exit code 2, never a traceback."""
    res = cli(*args, library=False)
    assert res.code == 2 and res.out == ""
    assert res.err.startswith(message) and len(res.err.strip().splitlines()) == 1, res.err


def test_serve_answers_openai_requests_on_loopback(tmp_path) -> None:
    port = _free_port()
    cmd = [sys.executable, "-c", "from moviemem.cli import main; main()", "serve", "--backbone", "local-small",
           "--port", str(port), "--cache", str(tmp_path / "cache")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + 120
        while True:
            try:
                models = httpx.get(f"{base}/models", timeout=2).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.time() < deadline, "gateway did not start"
                time.sleep(0.5)
        assert models["data"][0]["id"]
        chat = httpx.post(f"{base}/chat/completions", timeout=120, json={
            "model": models["data"][0]["id"], "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "Say hello."}]}).json()
        assert chat["choices"][0]["message"]["content"].strip()
        assert chat["usage"]["completion_tokens"] >= 1
        emb = httpx.post(f"{base}/embeddings", timeout=60, json={"model": "minilm", "input": ["a lighthouse"]}).json()
        assert len(emb["data"][0]["embedding"]) == 384
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert list((tmp_path / "cache").iterdir())  # requests went through the replay cache


def test_serve_stops_on_sigterm_while_a_client_stalls_mid_request() -> None:
    """A client that sends headers and half a body, then waits, held the gateway up forever after
    SIGTERM (uvicorn waits for open requests); now it gets a bounded grace period."""
    import signal

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from moviemem.cli import main; main()", "serve", "--backbone",
                             "local-small", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.time() < deadline, "gateway did not start"
                time.sleep(0.5)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{\"messages\": ")
        time.sleep(1)
        started = time.time()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert time.time() - started < 15
        sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
