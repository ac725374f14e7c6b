"""How fast this machine's local models read a prompt and write a reply, measured by `moviemem doctor` and kept
where every later call's own measurements go (backbones/pace.py: per model, context and threads), so that
`bench --plan` gives a local configuration a wall time before its first call (issue 61).

The measurement is one short call, about 250 tokens read and 16 written greedily, made only while a speed is
missing: once both are recorded (by this check or by real calls, whose running speeds follow long prompts
better than a short probe) the check reports them without loading the model, so `doctor` stays quick.
A film's transcript (thousands of tokens) reads somewhat slower than this short prompt.
"""

from __future__ import annotations

import time

from ..foundation.errors import MovieMemError

Finding = tuple[bool | None, str, str]  # a doctor Check's ok, detail and fix
WRITE = 16  # tokens written: above pace.MIN_WRITTEN, so the writing speed is recorded
# about 250 tokens of plain prose that any model reads alike; counting keeps a greedy reply going past WRITE tokens
_LINES = [f"Line {i}: the harbour clock struck {i % 12 + 1}, and the ferry from the island came in on time."
          for i in range(1, 13)]
PROMPT = "\n".join(_LINES) + "\n\nNow count from 1 to 100, the numbers separated by commas, and nothing else."


def measure_speed(spec: str) -> Finding:
    """Time a ~250-token prompt and a 16-token reply on local model `spec` unless both its speeds are recorded;
    the model's process records them (PaceBook) and this check reads them back. A model that is not prepared
    is skipped, said why."""
    from ..backbones import load
    from ..backbones.llamacpp_backend import LlamaCppBackbone
    from ..backbones.pace import PaceBook
    from ..backbones.types import Request, user

    try:
        backbone = load(spec)  # no replay cache: a cached reply would time nothing
    except MovieMemError as exc:
        return (None, f"not measured: {exc}", "moviemem models prepare")
    if not isinstance(backbone, LlamaCppBackbone):
        return (None, f"{spec} is not a llama.cpp model", "")
    known = PaceBook(backbone.paces.path).get(backbone.pace_key)
    if known.read_tok_s and known.write_tok_s:
        return (True, f"reads {known.read_tok_s:,.0f} tokens/s, writes {known.write_tok_s:,.1f} tokens/s, as recorded "
                      f"by earlier calls in {backbone.paces.path} (delete it to measure again)", "")
    started = time.perf_counter()
    try:
        reply = backbone.send(Request.build([user(PROMPT)], max_tokens=WRITE, temperature=0.0))
    except MovieMemError as exc:
        return (False, str(exc), "moviemem doctor --only llama")
    took = time.perf_counter() - started
    if reply.invalid and reply.finish_reason != "length":
        return (False, f"the model did not answer: {reply.error}", "moviemem doctor --only llama")
    perf = backbone.last_perf
    pace = PaceBook(backbone.paces.path).get(backbone.pace_key)  # read afresh: the model's process wrote it
    read = f"read {perf.get('prompt_eval_tokens', 0):,.0f} tokens at {pace.read_tok_s:,.0f}/s" if pace.read_tok_s else ""
    wrote = f"wrote {perf.get('gen_tokens', 0):,.0f} at {pace.write_tok_s:,.1f}/s" if pace.write_tok_s else ""
    if not read or not wrote:
        return (None, f"a call of {took:.1f} s measured too few tokens to record a speed "
                      f"({perf.get('prompt_eval_tokens', 0):,.0f} read, {perf.get('gen_tokens', 0):,.0f} written)", "")
    return (True, f"{read}, {wrote} (running speeds kept for `bench --plan` in {backbone.paces.path})", "")
