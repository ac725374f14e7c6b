"""bench/event_graph_quality.py's model_checks: the figure that says whether a backbone's refine
tells truth-linked candidate pairs from the others."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "event_graph_quality.py"


def _bench():
    spec = importlib.util.spec_from_file_location("event_graph_quality", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def edge(src: str, dst: str, typ: str, rule: str) -> dict[str, str]:
    return {"source": src, "target": dst, "type": typ, "rule": rule}


def test_model_checks_counts_kept_rejected_and_unasked_candidates() -> None:
    truth = {"relations": [{"src": "a", "dst": "b", "type": "causal"}, {"src": "c", "dst": "d", "type": "coreference"},
                           {"src": "b", "dst": "c", "type": "before"}]}
    mapping = {"x1": "a", "x2": "b", "x3": "c", "x4": "d", "x5": "d"}
    candidates = [edge("x1", "x2", "causal", "shared-participants"),     # truth-linked: kept, relabelled wrongly
                  edge("x2", "x3", "causal", "shared-participants"),     # only a 'before' in truth: rejected
                  edge("x4", "x3", "coreference", "shared-arguments"),   # truth-linked (unordered): kept as it was
                  edge("x4", "x5", "causal", "result-marker")]           # not asked: still the rule's edge
    refined = [edge("x1", "x2", "precondition", "model<-shared-participants"),
               edge("x3", "x4", "coreference", "model<-shared-arguments"),
               edge("x4", "x5", "causal", "result-marker")]
    got = _bench().model_checks(truth, candidates, refined, mapping)
    assert got == {"asked": 3, "kept_truth_linked": "2/2", "kept_not_linked": "0/1",
                   "labelled_as_truth": {"rules": 2, "model": 1, "of": 2}}
