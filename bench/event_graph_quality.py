"""How well the events stage recovers the synthetic film's narrative graph.

Usage: python bench/event_graph_quality.py [--backbone local|rules] [--mode refine|extract] [--minutes 3] [--work DIR]
       [--threshold 0.5] [--max-pairs N]

`--backbone rules` measures the graph every ingest builds without a model (ingest/stages/scenes.py,
graph/rule_graph.py), and its cost: the scenes and events stages' seconds as a fraction of the
film's duration (target <= 0.02x real time).

The film's dialogue (from truth.json) is imported as subtitles and its per-shot captions
(captions.srt, written from the same script) as captions, so the figures measure event and
relation extraction, not ASR or captioning. Figures:
- event recall: a truth event is found when an extracted event overlaps it in time and their
  descriptions' embeddings have cosine >= threshold; precision the other way round;
- relation precision/recall/F1 per truth type, over extracted edges mapped to truth events
  ("a after b" compared as "b before a"; overlap and coreference unordered);
- whether the flashback is found (its event in graph.flashbacks(), tied to the event recalling it,
  first in story order), and the story-order agreement (Kendall tau) over matched events;
- whether graph.chain(letter, home) recovers the truth causal chain, and what share of it;
- model_checks (refine): of the rule candidates the model was asked about, how many truth-linked and
  how many other pairs it kept, and how many it labelled as the truth does (against the rules' label),
  and the causal/precondition F1 a perfect checker of these candidates would reach (what the rules'
  candidates allow); relations.causal_or_precondition counts either label as right;
- oracle_events: flashback detection and story order run on the truth events with the film's own
  text (the cue logic alone, no extraction errors).
Reruns replay model replies from WORK/lib/cache: a stopped run resumes where it was.

`--text FILM.srt` reports instead on a real film imported from its subtitles: scenes, events,
relations by type and by rule, flashbacks, cost, and a sample of scene summaries and edges to read.
Prints one JSON object and writes it to WORK/report.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from moviemem import Library
from moviemem.foundation.config import get_settings
from moviemem.graph import NarrativeGraph, NarrativeGraphWarning
from moviemem.graph.refine import ASKED
from moviemem.ingest.stages.events import EventsStage
from moviemem.models.embedder import get_embedder
from moviemem.synth import render

SYMMETRIC = {"overlap", "coreference"}


def match_events(truth: list[dict[str, Any]], got: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Similarity of every (truth, extracted) pair that overlaps in time; best truth event per extracted one."""
    emb = get_embedder()
    tv = emb.embed([t["description"] for t in truth])
    gv = emb.embed([g["description"] for g in got]) if got else np.zeros((0, tv.shape[1]), dtype=np.float32)
    sims = gv @ tv.T if len(got) else np.zeros((0, len(truth)))
    overlap = np.array([[min(g["end"], t["end"]) - max(g["start"], t["start"]) > 0 for t in truth] for g in got],
                       dtype=bool).reshape(len(got), len(truth))
    ok = overlap & (sims >= threshold)
    best = {}  # extracted id -> truth id
    for i, g in enumerate(got):
        if ok[i].any():
            j = int(np.argmax(np.where(ok[i], sims[i], -1)))
            best[g["id"]] = truth[j]["id"]
    found = [t["id"] for j, t in enumerate(truth) if ok[:, j].any()]
    return {"recall": round(len(found) / len(truth), 3), "precision": round(len(best) / len(got), 3) if got else 0.0,
            "found": found, "missed": [t["key"] for t in truth if t["id"] not in found], "map": best,
            "best_for_truth": {t["id"]: (got[int(np.argmax(np.where(ok[:, j], sims[:, j], -1)))]["id"] if ok[:, j].any() else None)
                               for j, t in enumerate(truth)}}


def _norm(src: str, dst: str, typ: str) -> tuple[str, str, str]:
    if typ == "after":
        return dst, src, "before"
    if typ in SYMMETRIC:
        a, b = sorted((src, dst))
        return a, b, typ
    return src, dst, typ


CAUSE = "causal_or_precondition"
CAUSES = ("causal", "precondition")


def _causes(rels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "type": CAUSE} for r in rels if r["type"] in CAUSES]


def relation_f1(truth_rels: list[dict[str, Any]], edges: list[dict[str, Any]], mapping: dict[str, str]) -> dict[str, Any]:
    truth = {_norm(r["src"], r["dst"], r["type"]) for r in truth_rels}
    pred = set()
    unmapped = 0
    for e in edges:
        a, b = mapping.get(e["source"]), mapping.get(e["target"])
        if a is None or b is None or a == b:
            unmapped += 1
            pred.add(("?" + e["source"], "?" + e["target"], _norm("", "", e["type"])[2]))  # a false positive
            continue
        pred.add(_norm(a, b, e["type"]))
    out = {}
    for typ in sorted({t for *_, t in truth} | {t for *_, t in pred}):
        t = {x for x in truth if x[2] == typ}
        p = {x for x in pred if x[2] == typ}
        tp = len(t & p)
        prec = tp / len(p) if p else 0.0
        rec = tp / len(t) if t else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        out[typ] = {"truth": len(t), "predicted": len(p), "tp": tp, "precision": round(prec, 3),
                    "recall": round(rec, 3), "f1": round(f1, 3)}
    tp = len(truth & pred)
    prec, rec = (tp / len(pred) if pred else 0.0), tp / len(truth)
    out["all"] = {"truth": len(truth), "predicted": len(pred), "tp": tp, "precision": round(prec, 3),
                  "recall": round(rec, 3), "f1": round(2 * prec * rec / (prec + rec), 3) if prec + rec else 0.0,
                  "edges_with_unmatched_events": unmapped}
    return out


def kendall_tau(a: list[str], b: list[str]) -> float | None:
    common = [x for x in a if x in set(b)]
    if len(common) < 2:
        return None
    pa, pb = {x: i for i, x in enumerate(a)}, {x: i for i, x in enumerate(b)}
    s = sum(1 if (pa[x] - pa[y]) * (pb[x] - pb[y]) > 0 else -1 for x, y in combinations(common, 2))
    return round(s / (len(common) * (len(common) - 1) / 2), 3)


def truth_chain(truth: dict[str, Any]) -> list[str]:
    """The longest causal path in the truth graph (letter -> ... -> home)."""
    g = nx.DiGraph((r["src"], r["dst"]) for r in truth["relations"] if r["type"] == "causal")
    return nx.dag_longest_path(g)


def graph_of(film: Any) -> NarrativeGraph:
    """The film's graph without printing its warnings (measure reports them as graph_problems)."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", NarrativeGraphWarning)
        return film.graph()


def measure(film: Any, truth: dict[str, Any], threshold: float,
            candidates: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    g = graph_of(film)
    got = g.events()
    m = match_events(truth["events"], got, threshold)
    mapping = m.pop("map")
    best_for = m.pop("best_for_truth")
    key = {t["id"]: t["key"] for t in truth["events"]}
    rel = relation_f1(truth["relations"], g.edges(), mapping)
    # causal and precondition as one kind of link (issue 15's target): a pair is right with either label
    rel[CAUSE] = relation_f1(_causes(truth["relations"]), _causes(g.edges()), mapping)[CAUSE]

    flash_truth = [r for r in truth["relations"] if r["type"] == "flashback"]
    flash = []
    for r in flash_truth:
        cands = [e for e, t in mapping.items() if t == r["src"]]
        found = [e for e in cands if e in set(g.flashbacks())]
        anchored = [e for e in found if any(mapping.get(x["target"]) == r["dst"]
                                            for x in g.edges(types={"flashback"}) if x["source"] == e)]
        story = g.story_order()
        first = bool(found) and all(story.index(found[0]) <= story.index(e) for e in g if mapping.get(e) not in
                                    {x["src"] for x in flash_truth})
        flash.append({"truth": f"{key[r['src']]} -> {key[r['dst']]}", "extracted_events": cands, "found": bool(found),
                      "anchored_to_truth_anchor": bool(anchored), "before_all_present_events_in_story": first})
    pred_story = [mapping[e] for e in g.story_order() if e in mapping]
    pred_story = [x for i, x in enumerate(pred_story) if x not in pred_story[:i]]
    truth_story = [t["id"] for t in sorted(truth["events"], key=lambda t: t["story_order"])]

    chain_t = truth_chain(truth)
    a, b = best_for.get(chain_t[0]), best_for.get(chain_t[-1])
    chain = {"truth": [key[x] for x in chain_t], "start": a, "end": b}
    if a and b:
        path = g.chain(a, b)
        mapped = [mapping.get(e, "?") for e in path]
        covered, i = [], 0
        for x in mapped:  # truth chain events met in order along the path
            if i < len(chain_t) and x == chain_t[i]:
                covered.append(x)
                i += 1
            elif x in chain_t[i:]:
                i = chain_t.index(x, i)
                covered.append(x)
                i += 1
        chain.update(path=path, path_as_truth=[key.get(x, "?") for x in mapped],
                     coverage=round(len(covered) / len(chain_t), 3), recovered=covered == chain_t)
    else:
        chain.update(path=[], coverage=0.0, recovered=False,
                     why="the chain's first or last truth event has no matching extracted event")
    checks = {} if candidates is None else {"model_checks": model_checks(truth, candidates, g.edges(), mapping)}
    return {"events": {"truth": len(truth["events"]), "extracted": len(got), "threshold": threshold, **m,
                       "missed_count": len(m["missed"])},
            "relations": rel, **checks, "flashback": flash,
            "story_order_kendall_tau": kendall_tau(truth_story, pred_story), "chain": chain,
            "graph_problems": g.problems}


def oracle_story_time(film: Any, truth: dict[str, Any]) -> dict[str, Any]:
    """Flashback detection and story order on the truth events with the film's own captions,
    dialogue and on-screen text: the cue logic alone, without extraction errors."""
    from moviemem.graph.flashbacks import TimedEvent, story_time
    from moviemem.memory.lines import Span

    spans = ([Span(c.start, c.end, c.text, "caption") for c in film.captions()]
             + [Span(u.start, u.end, u.text, "dialogue") for u in film.utterances()]
             + [Span(o.start, o.end, o.text, "onscreen") for o in film.onscreen()])
    st = story_time([TimedEvent(t["key"], t["start"], t["end"], t["description"]) for t in truth["events"]], spans)
    want = {(truth_key(truth, r["src"]), truth_key(truth, r["dst"])) for r in truth["relations"] if r["type"] == "flashback"}
    got = [t for t in sorted(st.story_order, key=st.story_order.get)]
    return {"flashback_edges": [(e.src, e.dst) for e in st.edges], "flashback_found": want == {(e.src, e.dst) for e in st.edges},
            "story_order_exact": got == [t["key"] for t in sorted(truth["events"], key=lambda t: t["story_order"])]}


def model_checks(truth: dict[str, Any], candidates: list[dict[str, Any]], refined: list[dict[str, Any]],
                 mapping: dict[str, str]) -> dict[str, Any]:
    """What the model did with the rule candidates it was asked about, against the truth: whether it
    keeps truth-linked pairs more often than the others (a backbone that cannot tell them apart keeps
    both at the same rate, and then refining only relabels noise), and how often its label is the
    truth's. Candidates are the rules run's causal, precondition and coreference edges."""
    linked = {frozenset((r["src"], r["dst"])): _norm(r["src"], r["dst"], r["type"]) for r in truth["relations"]
              if r["type"] in ASKED}
    by_pair = {frozenset((e["source"], e["target"])): e for e in refined if (e["rule"] or "").startswith("model<-")}
    rows = {"truth_linked": [0, 0], "not_linked": [0, 0]}  # [kept, of]
    rules_right = model_right = asked = 0
    reachable = set()  # truth causal/precondition links some asked candidate joins
    unchanged = {(e["source"], e["target"], e["rule"]) for e in refined}
    for c in candidates:
        a, b = mapping.get(c["source"]), mapping.get(c["target"])
        want = linked.get(frozenset((a, b))) if a and b and a != b else None
        got = by_pair.get(frozenset((c["source"], c["target"])))
        if got is None and (c["source"], c["target"], c["rule"]) in unchanged:
            continue  # not asked (beyond max_pairs) or unusable reply: kept as a rule link
        asked += 1
        if want is not None and want[2] in CAUSES:
            reachable.add(want)
        row = rows["truth_linked" if want else "not_linked"]
        row[1] += 1
        row[0] += got is not None
        rules_right += want is not None and _norm(a, b, c["type"]) == want
        model_right += (want is not None and got is not None
                        and _norm(mapping.get(got["source"], ""), mapping.get(got["target"], ""), got["type"]) == want)
    causes = sum(r["type"] in CAUSES for r in truth["relations"])
    recall = len(reachable) / causes if causes else 0.0
    return {"asked": asked,
            **{f"kept_{k}": f"{v[0]}/{v[1]}" for k, v in rows.items()},
            "labelled_as_truth": {"rules": rules_right, "model": model_right, "of": rows["truth_linked"][1]},
            # a checker that keeps exactly the truth-linked candidates, labelled as the truth has them
            "perfect_checker_causal_or_precondition_f1": round(2 * recall / (1 + recall), 3) if recall else 0.0}


def truth_key(truth: dict[str, Any], event_id: str) -> str:
    return next(t["key"] for t in truth["events"] if t["id"] == event_id)


def real_film(path: Path, work: Path, sample: int) -> dict[str, Any]:
    """A real film imported from its subtitles (text only, no model): what the rule graph holds,
    what it cost, and a sample of each rule's edges to read."""
    lib = Library(work / "lib", get_settings(library=work / "lib"))
    started = time.perf_counter()
    film = lib.ingest_text(path, film_id=f"real-{path.stem}".lower()[:64])
    runs = {s.stage: s for s in film.stages()}
    took = {n: (dt.datetime.fromisoformat(runs[n].finished_at) - dt.datetime.fromisoformat(runs[n].started_at))
            .total_seconds() for n in ("scenes", "events")}
    g = graph_of(film)
    by_type: dict[str, int] = {}
    by_rule: dict[str, list[str]] = {}
    for e in g.edges():
        by_type[e["type"]] = by_type.get(e["type"], 0) + 1
        a, b = g.event(e["source"])["description"], g.event(e["target"])["description"]
        by_rule.setdefault(e["rule"] or e["made_by"], []).append(f"{a[:70]}  --{e['type']}-->  {b[:70]}")
    return {"film": str(path), "duration_s": film.info.duration_s, "ingest_s": round(time.perf_counter() - started, 1),
            "scenes_stage_s": round(took["scenes"], 2), "events_stage_s": round(took["events"], 2),
            "scenes_and_graph_x_real_time": round(sum(took.values()) / film.info.duration_s, 5),
            "scenes": len(film.scenes()), "events": len(g), "relations_by_type": dict(sorted(by_type.items())),
            "relations_by_rule": {k: len(v) for k, v in sorted(by_rule.items())}, "flashbacks": len(g.flashbacks()),
            "scene_sample": [s.summary for s in film.scenes()[:sample]],
            "edge_sample": {k: v[:sample] for k, v in sorted(by_rule.items())}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", type=Path, default=None,
                    help="a real film's subtitles (e.g. an MF² transcript): report its rule graph instead")
    ap.add_argument("--sample", type=int, default=5, help="with --text: scene summaries and edges per rule to show")
    ap.add_argument("--backbone", default="local")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--threshold", type=float, default=0.5, help="description cosine for an event match")
    ap.add_argument("--max-pairs", type=int, default=None,
                    help="classify (extract) or check (refine) at most this many candidate pairs (recorded in the stage params)")
    ap.add_argument("--mode", choices=("refine", "extract"), default="refine",
                    help="with a backbone: check the rule graph's candidate links (refine) or extract anew (extract)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="moviemem-events-"))
    if args.text is not None:
        json.dump(real_film(args.text, work, args.sample), sys.stdout, indent=1, ensure_ascii=False)
        return
    film_dir = work / f"synth-{args.minutes:g}m-s{args.seed}"
    if not (film_dir / "truth.json").exists():
        render(film_dir, minutes=args.minutes, seed=args.seed)
    truth = json.loads((film_dir / "truth.json").read_text())
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import truth_srt

    subs = truth_srt(truth, film_dir / "subtitles.srt")
    if args.max_pairs is not None:
        EventsStage.pairs = replace(EventsStage.pairs, max_pairs=args.max_pairs)
    rules = args.backbone in ("rules", "none")
    model: dict[str, Any] = {"backbone": args.backbone, "events_mode": args.mode}
    if args.max_pairs is not None:
        model["refine_max_pairs"] = args.max_pairs

    def ingest(lib: Path, **options: Any) -> Any:
        return Library(lib, get_settings(library=lib, **options)).ingest(
            film_dir / "film.mp4", film_id="synth", title=truth["title"], subtitles=subs,
            captions=film_dir / "captions.srt", stages=["events"])

    candidates = None
    if not rules and args.mode == "refine":  # the rule graph in a library of its own: the candidates the model is asked about
        candidates = [e for e in graph_of(ingest(work / "rules-lib")).edges() if e["type"] in ASKED]
    started = time.perf_counter()
    film = ingest(work / "lib") if rules else ingest(work / "lib", **model)
    runs = {s.stage: s for s in film.stages()}
    run = runs["events"]

    def took(r: Any) -> float:
        return (dt.datetime.fromisoformat(r.finished_at) - dt.datetime.fromisoformat(r.started_at)).total_seconds()

    stage_s, scenes_s = took(run), took(runs["scenes"])
    report = {"backbone": args.backbone, "mode": "rules" if rules else args.mode, "minutes": args.minutes, "seed": args.seed,
              "pairs": None if rules or args.mode == "refine" else vars(EventsStage.pairs),
              "ingest_s": round(time.perf_counter() - started, 1), "events_stage_s": round(stage_s, 1),
              "scenes_stage_s": round(scenes_s, 2),
              "scenes_and_graph_x_real_time": round((stage_s + scenes_s) / film.info.duration_s, 4),
              "scenes": len(film.scenes()),
              "stage": {"status": run.status, "note": run.reason, "model": run.model},
              **measure(film, truth, args.threshold, candidates), "oracle_events": oracle_story_time(film, truth)}
    (work / "report.json").write_text(json.dumps(report, indent=1))
    json.dump(report, sys.stdout, indent=1)
    print(f"\nreport: {work / 'report.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
