"""bench/event_graph_quality.py's model_checks: the figure that says whether a backbone's refine
tells truth-linked candidate pairs from the others."""

from __future__ import annotations

from scripts_loader import load_script


def edge(src: str, dst: str, typ: str, rule: str) -> dict[str, str]:
    return {"source": src, "target": dst, "type": typ, "rule": rule}


def test_model_checks_counts_kept_rejected_and_unasked_candidates() -> None:
    truth = {"relations": [{"src": "a", "dst": "b", "type": "causal"}, {"src": "c", "dst": "d", "type": "coreference"},
                           {"src": "b", "dst": "c", "type": "before"},
                           {"src": "d", "dst": "e", "type": "precondition"}]}
    mapping = {"x1": "a", "x2": "b", "x3": "c", "x4": "d", "x5": "d"}
    candidates = [edge("x1", "x2", "causal", "shared-participants"),     # truth-linked: kept, relabelled wrongly
                  edge("x2", "x3", "causal", "shared-participants"),     # only a 'before' in truth: rejected
                  edge("x4", "x3", "coreference", "shared-arguments"),   # truth-linked (unordered): kept as it was
                  edge("x4", "x5", "causal", "result-marker")]           # not asked: still the rule's edge
    refined = [edge("x1", "x2", "precondition", "model<-shared-participants"),
               edge("x3", "x4", "coreference", "model<-shared-arguments"),
               edge("x4", "x5", "causal", "result-marker")]
    got = load_script("bench/event_graph_quality.py").model_checks(truth, candidates, refined, mapping)
    assert got == {"asked": 3, "kept_truth_linked": "2/2", "kept_not_linked": "0/1",
                   "labelled_as_truth": {"rules": 2, "model": 1, "of": 2},
                   "perfect_checker_causal_or_precondition_f1": 0.667}  # a->b reachable, d->e no candidate joins


def test_causal_or_precondition_counts_either_label() -> None:
    bench = load_script("bench/event_graph_quality.py")
    truth = [{"src": "a", "dst": "b", "type": "causal"}, {"src": "b", "dst": "c", "type": "precondition"}]
    edges = [edge("x1", "x2", "precondition", "purpose"), edge("x3", "x2", "causal", "because"),
             edge("x1", "x3", "before", "screen-order")]
    got = bench.relation_f1(bench._causes(truth), bench._causes(edges), {"x1": "a", "x2": "b", "x3": "c"})
    assert got[bench.CAUSE] == {"truth": 2, "predicted": 2, "tp": 1, "precision": 0.5, "recall": 0.5, "f1": 0.5}
