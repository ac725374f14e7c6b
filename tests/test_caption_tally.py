"""The captions stage's running totals sum what the calls consumed as `Usage` sums, and keep the flat record and the
progress postfix they always wrote (issue 63 item 6: one sum of usage, not two)."""

from __future__ import annotations

from moviemem.backbones import Reply, Usage
from moviemem.ingest.captioner import Tally


def test_tally_keeps_its_record_and_postfix() -> None:
    tally = Tally()
    assert tally.record() == {"requests": 0, "cached": 0, "invalid": 0, "input_tokens": 0, "output_tokens": 0,
                              "cost_usd": 0.0, "priced": False}
    assert tally.postfix() == "0 in / 0 out tok, cost n/a"
    tally.add(Reply(usage=Usage(input_tokens=1500, output_tokens=20)))  # unpriced
    tally.add(Reply(usage=Usage(input_tokens=500, output_tokens=30, cost_usd=0.25)))
    tally.add(Reply(usage=Usage(input_tokens=9999, cost_usd=9.0), cached=True))  # a replay costs nothing
    tally.add(Reply(invalid=True))
    assert tally.record() == {"requests": 4, "cached": 1, "invalid": 1, "input_tokens": 2000, "output_tokens": 50,
                              "cost_usd": 0.25, "priced": True}
    assert tally.postfix() == "2.0k in / 50 out tok, $0.2500, 1 cached, 1 invalid"
