"""Peak memory and wall time of `moviemem report` (report.md, the plot and the inspector) and of `moviemem compare
--html` on a large run (issue 62: 1.0 GB and 1.2 GB on a 200 MB results.jsonl).

Writes a synthetic MCQ run folder through the project's own types and writers (RunHeader, the items as the runner
writes them, ResultRecord lines, calls/ through CallWriter): several policies and backbones, many items over 20
films, each answer with evidence spans drawn from its film's subtitle lines, a trace, a reply, usage and its call as
sent. Then runs each command in a child process and prints its peak RSS (the child's own, from wait4) and wall time.
No model and no library are needed.

    python bench/report_memory.py                       # a 200 MB results.jsonl in a temporary folder
    python bench/report_memory.py --mb 20 --keep /tmp/r  # a smaller one, kept for a look
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICIES = ("subtitles", "hybrid", "agentic[steps=4]")
BACKBONES = ("local", "api:gpt-4o-mini")
FILMS = 20
WORDS = ("the", "key", "attic", "Anna", "door", "night", "rain", "said", "never", "train", "letter", "her", "father",
         "station", "why", "did", "you", "come", "back", "I", "know", "what", "happened", "that", "winter")


def _line(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize() + "."


def _subtitles(film: int) -> list[tuple[float, float, str]]:
    """A film's subtitle lines: (start, end, text), the same on every call."""
    rng = random.Random(film)
    return [(4.0 * i, 4.0 * i + 3.5, _line(rng)) for i in range(400)]


def _item(i: int) -> dict[str, object]:
    film = i % FILMS
    rng = random.Random(10_000 + i)
    start = 4.0 * rng.randrange(390)
    return {"id": f"q{i}", "film_id": f"film{film:02d}", "question": f"Why does Anna go back to the station ({i})?",
            "options": [_line(rng) for _ in range(4)], "answer": "ABCD"[i % 4],
            "category": ("plot", "character", "temporal", "visual")[i % 4], "evidence": [[start, start + 8.0]]}


def _answer(item: dict[str, object], policy: str, backbone: str, subs: list[tuple[float, float, str]]) -> tuple[
        dict[str, object], str, bool]:
    """An answer as a policy writes it, the prompt it sent and whether it was right."""
    seed = f"{item['id']}|{policy}"  # the same evidence on every backbone: the call log shares its text pieces
    rng = random.Random(seed)
    shown = sorted(rng.sample(range(len(subs)), 10))
    right = random.Random(seed + backbone).random() < 0.6
    choice = str(item["answer"]) if right else "ABCD"[("ABCD".index(str(item["answer"])) + 1) % 4]
    evidence = [{"kind": "utterance", "film_id": item["film_id"], "start": subs[k][0], "end": subs[k][1],
                 "text": f"[{int(subs[k][0]) // 60}:{int(subs[k][0]) % 60:02d}] {subs[k][2]}", "score": round(rng.random(), 4),
                 "retriever": "bm25", "id": f"u{k}", "rows": [["utterances", k, k]], "cited": n < 2}
                for n, k in enumerate(shown)]
    prompt = ("Subtitles of the film:\n" + "\n".join(str(e["text"]) for e in evidence) + f"\n\nQuestion: {item['question']}\n"
              + "\n".join(f"{'ABCD'[n]}. {o}" for n, o in enumerate(item["options"])))  # type: ignore[arg-type]
    reply = json.dumps({"answer": choice, "why": " ".join(_line(rng) for _ in range(4)), "evidence": [1, 2]})
    usage = {"input_tokens": 1800 + len(prompt) // 4, "output_tokens": 60, "cached_input_tokens": 400,
             "latency_s": round(0.5 + rng.random(), 3), "cost_usd": 0.0003 if backbone.startswith("api") else None}
    trace = [{"kind": "retrieve", "query": str(item["question"]), "n": len(evidence), "ms": 12.5},
             {"kind": "prompt", "ref": "mcq@v3", "chars": len(prompt)},
             {"kind": "parse", "how": "json" if rng.random() < 0.9 else "fallback", "invalid": False}]
    answer = {"choice": choice, "text": reply, "confidence": round(rng.random(), 3), "policy": policy,
              "backbone": backbone, "evidence": evidence, "trace": trace, "usage": usage, "calls": 1}
    return answer, prompt, right


def _status(n: int, right: bool) -> tuple[str, str | None, bool | None]:
    """Most records answered; a few invalid (with a reason) and a few whose prompt did not fit, as in a real run."""
    if n % 17 == 5:
        return "invalid", "choice 'E' is not an option letter", None
    if n % 23 == 7:
        return "unfit", "context", None
    return "answered", None, right


def write_run(run: Path, megabytes: float) -> int:
    """A run folder of about `megabytes` of results.jsonl (and its calls/); returns its record count."""
    from moviemem.agents.types import SentCall
    from moviemem.backbones.types import Message, Reply, Request, Text, Usage
    from moviemem.eval import log as runlog
    from moviemem.eval.formats import MCQ
    from moviemem.eval.log import ITEMS, MANIFEST, RESULTS, CallWriter, item_digest, record_key, write_json
    from moviemem.eval.records import LOG_VERSION, ResultRecord, RunHeader

    run.mkdir(parents=True)
    subs = {f: _subtitles(f) for f in range(FILMS)}
    sample, _, _ = _answer(_item(0), POLICIES[0], BACKBONES[0], subs[0])
    per_record = len(json.dumps({"answers": {"answer": sample}}, ensure_ascii=False)) + 900  # the record's own keys
    n_items = max(2, int(megabytes * 1e6 / per_record / (len(POLICIES) * len(BACKBONES))))
    items = [MCQ.model_validate(_item(i)) for i in range(n_items)]
    (run / ITEMS).write_text("".join(json.dumps(it.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n"
                                     for it in items), encoding="utf-8")
    write_json(run / MANIFEST, RunHeader(log_version=LOG_VERSION, benchmark="synthetic-mcq.jsonl", format="mcq",
                                         policies=list(POLICIES), backbones=list(BACKBONES),
                                         created="2026-11-28T20:00:00Z").line())
    real_fsync, runlog.os.fsync = runlog.os.fsync, lambda fd: None  # type: ignore[assignment]  # synthetic data: no sync per line
    calls = CallWriter(run)
    count = 0
    try:
        with (run / RESULTS).open("w", encoding="utf-8") as out:
            for policy in POLICIES:
                for backbone in BACKBONES:
                    for it in items:
                        d = it.model_dump(mode="json", exclude_none=True)
                        answer, prompt, right = _answer(d, policy, backbone, subs[int(it.film_id[4:])])
                        key = record_key(policy, backbone, it.id)
                        sent = SentCall("mcq", "3", Request(messages=(Message("system", (Text("Answer from the film."),)),
                                                                      Message("user", (Text(prompt),)))),
                                        Reply(text=str(answer["text"]), usage=Usage(input_tokens=1800), model=backbone))
                        answer["call_ids"] = calls.write(key, "answer", [sent])
                        status, reason, correct = _status(count, right)
                        if status != "answered":
                            answer.update(invalid=True, error=reason)
                        rec = ResultRecord.model_validate({
                            "log_version": LOG_VERSION, "key": key, "policy": policy, "backbone": backbone,
                            "item_id": it.id, "item_digest": item_digest(it), "film_id": it.film_id, "format": "mcq",
                            "category": it.category, "status": status, "reason": reason, "correct": correct,
                            "detail": {"pred": answer["choice"], "gold": it.answer}, "answers": {"answer": answer},
                            "usage": answer["usage"], "grounded": True,
                            "spend": {"calls": 1, "tokens": 1860, "cost_usd": 0.0003 if backbone.startswith("api") else 0.0},
                            "wall_s": 1.25, "finished_at": f"2026-11-28T21:{count // 6000 % 60:02d}:00Z",
                            "evidence": None if status == "unfit" else {
                                "recall": 1.0 if right else 0.0, "coverage": 0.5, "cited_precision": 0.5,
                                "outcome": "found" if right else "misread"}})
                        out.write(json.dumps(rec.line(), ensure_ascii=False) + "\n")
                        count += 1
    finally:
        calls.close()
        runlog.os.fsync = real_fsync  # type: ignore[assignment]
    return count


def measure(argv: list[str]) -> tuple[float, float]:
    """A command's peak RSS (MB, its own process tree's largest) and wall time (s), run in a child process."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return usage.ru_maxrss / 1024, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200, help="size of results.jsonl in MB (default 200)")
    ap.add_argument("--keep", type=Path, help="write the run here (a new folder) and keep it")
    ap.add_argument("--only", choices=("report", "compare"), help="measure one command only")
    args = ap.parse_args()
    if not args.mb > 0:
        raise SystemExit("--mb must be positive")
    if args.keep is not None and args.keep.exists():
        raise SystemExit(f"{args.keep} exists; name a new folder")
    tmp = Path(tempfile.mkdtemp(prefix="report-memory-"))
    run = args.keep or tmp / "run"
    try:
        t0 = time.monotonic()
        n = write_run(run, args.mb)
        size = (run / "results.jsonl").stat().st_size / 1e6
        calls = sum(f.stat().st_size for f in (run / "calls").iterdir()) / 1e6
        print(f"{n} records, results.jsonl {size:.0f} MB, calls/ {calls:.0f} MB (written in {time.monotonic() - t0:.0f} s)")
        cli = [sys.executable, "-m", "moviemem.cli"]
        if args.only in (None, "report"):
            rss, wall = measure([*cli, "report", str(run)])
            print(f"moviemem report RUN: peak RSS {rss:.0f} MB, {wall:.0f} s")
        if args.only in (None, "compare"):
            rss, wall = measure([*cli, "compare", str(run), str(run), "--policy-a", POLICIES[0], "--policy-b", POLICIES[1],
                                 "--backbone-a", BACKBONES[0], "--backbone-b", BACKBONES[0], "--html", str(tmp / "compare.html")])
            print(f"moviemem compare RUN RUN --html: peak RSS {rss:.0f} MB, {wall:.0f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
