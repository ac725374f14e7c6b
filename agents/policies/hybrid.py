"""Hybrid: route a question by its type to the memory channels it needs, under a token budget.

The question is classified by its wording (no model call): who -> dialogue, captions and the
character registry (the entries and lines of the characters the question or an option names),
where -> captions and on-screen text, what-does-it-say -> on-screen text, when/which-first ->
events and timed captions, why/how -> the event graph, dialogue and captions. Each channel is
searched (hybrid vector + full-text) with the question and, for multiple choice, with each
option, so the evidence covers every alternative. Results are de-duplicated, cut to the token
budget in rank order, shown in time order with ids, and the backbone cites the ids it used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ...errors import MovieMemError
from ...memory.view import FilmMemory
from ...retrievers.base import Evidence, Retriever
from ...retrievers.characters import CharacterRetriever
from ...retrievers.text import TextRetriever
from ...timefmt import hms
from ..base import BasePolicy, Run
from ..browse import overview_block
from ..calls import answer_once, body
from ..claims import check_reading, lowercase_words, read_claim
from ..order import claim_order, parse_order, read_order
from ..packing import Lines, fit_budget, fuse, informative_first, interleave, passage_sources
from ..parsing import Parsed
from ..prompts import HYBRID
from ..reader import can_read, check_rotations, read_letter
from ..rerank import rerank
from ..types import Question, Step

# question type -> pattern over the question's words (first match wins, in this order)
QUESTION_TYPES: dict[str, str] = {
    "onscreen": r"\b(sign|headline|written|writes|printed|newspaper say|label|title card|colou?r|wear|wears)\b",
    "temporal": r"\b(when|first|last|earliest|latest|before|after|order|right after|next|flashback|which day|on which)\b",
    "causal": r"\b(why|how|reason|because|cause|lead to|end)\b",
    "character": r"\b(who|whom|whose)\b",
    "setting": r"\b(where|place|location|time of day|at night|room)\b",
    "perspective": r"\b(know|knows|learn|viewer|aware|memory|suspect|believe)\b",
}

# question type -> channels (kind, k per query); "event" draws on the event graph when the film has one
CHANNELS: dict[str, tuple[tuple[str, int], ...]] = {
    "onscreen": (("onscreen", 4), ("caption", 3)),
    "temporal": (("event", 4), ("caption", 3), ("utterance", 2)),
    "causal": (("event", 4), ("utterance", 3), ("caption", 3)),
    "character": (("utterance", 4), ("caption", 3), ("characters", 3)),
    "setting": (("caption", 4), ("onscreen", 2), ("utterance", 2)),
    "perspective": (("utterance", 3), ("caption", 3), ("event", 3)),
    "other": (("utterance", 3), ("caption", 3), ("onscreen", 2)),
}

LABELS = {"utterance": "said", "caption": "seen", "onscreen": "on screen", "event": "event", "relation": "link",
          "frame": "frame", "passage": "passage", "character": "character"}


def classify(question: Question) -> str:
    text = question.text.lower()
    for name, pattern in QUESTION_TYPES.items():
        if re.search(pattern, text):
            return name
    return "other"


@dataclass
class GatherSettings:
    """How evidence is gathered for a question: which channels, which unit, how rankings combine.

    The defaults were chosen by measurement on the MF² dev set (`moviemem retrieval-eval`, then
    answers with `local`): passages and single lines (each shown with two neighbours) searched by
    vector + BM25 and fused had the same recall at 1,000 tokens as BM25 over passages alone
    (0.88 vs 0.89 on MCQ, 0.93 vs 0.92 on claims) and answered more MCQs right (25 vs 23 of 30)."""

    search: str = "hybrid"  # vector | fts | hybrid (vector + BM25)
    channels: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=lambda: dict(CHANNELS))
    units: str = "mixed"  # passages (grouped lines, when the film has them) | lines | mixed (both, fused)
    per_option: int = 1  # also search with each multiple-choice option (0: the question alone)
    # ... and with each option's own words: joined to the question, an option's few words are outweighed by
    # the question's, so every option query finds the same question-matching lines. On the MF² dev MCQs the
    # MRR of the first gold hit rose from 0.49 to 0.76 and recall from 0.59 to 0.77 at 450 tokens
    # (0.87 -> 0.85 at 1,000, 0.92 -> 0.95 at 2,000)
    option_alone: bool = True
    # ... and each option's best N lines of its own (the option-alone query's first single-line hits, per line
    # channel) go before the fused ranking, where they sink under lines that match the question's words. With 1,
    # MF2 dev MCQ recall at 1,000 tokens rose 0.82 -> 0.90 (coverage 0.80 -> 0.86), but `local` answered 24 of 30
    # instead of 25 and 24 of the synthetic film's 41 instead of 29: shown a line for every option, the small
    # reader picks a wrong option's line. Off by default; for readers that weigh evidence better
    option_lines: int = 0
    fusion: str = "rrf"  # rrf | interleave
    candidates: int = 20  # hits per query and channel before fusion
    informative: bool = True  # lines with no content of their own go after informative hits
    # a transcript/caption line hit is shown with up to this many neighbours on each side. With 1, more hits fit
    # 1,000 tokens (MF² dev MCQ recall 0.82 -> 0.87, coverage 0.80 -> 0.83; with option_lines=1, 0.92 / 0.87), but
    # `local` answered 24 of 30 (23 with option_lines=1) instead of 25: shorter blocks, more misread ones
    context_lines: int = 2
    # fixed: every line hit comes with all its neighbours, so a few hits fill the budget; budget: small to big,
    # the hits alone first (core_share of the budget), then their neighbours, nearest and best-ranked first.
    # budget shows more of the gold evidence (MF² dev MCQ recall 0.82 -> 0.87 at 1,000 tokens) but answered
    # no MCQ differently there (25/30 both) and lost 3 net of the synthetic film's 41 (25 -> 22): not the default
    context: str = "fixed"
    core_share: float = 0.6
    graph_hops: int = 1
    # read a graph made by rules alone? Its events repeat dialogue the text channels already search:
    # with it, recall at 1,000 tokens on the MF² dev set fell from 0.88 to 0.85 (MCQ), 0.93 to 0.91 (claims)
    rule_events: bool = False
    characters: bool = True  # read the "characters" channel (registry entries and named characters' lines) where routed
    # the first N distinct candidates reordered by the model's yes/no judgement of their relevance, fused with the
    # search ranking (agents/rerank.py; 0: off). Each candidate is a model call, counted in the answer's input tokens.
    # With `local` and 30: MF2 dev MCQ recall at 1,000 tokens 0.82 -> 0.90 at a median 5,450 tokens of judgements,
    # but 25-26 of 30 answered against 27 (more of what is shown misread). Off by default: for better readers
    rerank: int = 0


def channels_for(film: FilmMemory, question: Question, s: GatherSettings, run: Run | None = None) -> tuple[str, list[tuple[str, int]]]:
    """The question type and its channels; with passages, transcript (and caption) rows are read as passages."""
    qtype = classify(question)
    channels = list(s.channels.get(qtype) or s.channels.get("other") or CHANNELS["other"])
    if s.units in ("passages", "mixed"):
        sources = passage_sources(film)
        if not sources:
            if run is not None:
                run.note("no passages in this film's memory (passages stage not run): searching single lines")
        else:
            out: list[tuple[str, int]] = []
            for kind, k in channels:
                kinds = ["passage"] + ([kind] if s.units == "mixed" else []) if kind in sources else [kind]
                out += [(kk, k) for kk in kinds if kk not in (c for c, _ in out)]
            channels = out
    return qtype, channels


def queries_for(question: Question, per_option: int, option_alone: bool = False) -> list[str]:
    if not per_option:
        return [question.text]
    alone = [o for o in question.options if o.strip()] if option_alone else []
    return [question.text] + [f"{question.text} {o}" for o in question.options] + alone


def gather(film: FilmMemory, question: Question, s: GatherSettings, run: Run | None = None,
           lines: Lines | None = None) -> list[Evidence]:
    """Every channel searched with every query, fused into one ranking, informative hits first; `lines`: the
    film's rows as the caller already holds them (a rerank renders its candidates from them)."""
    if s.context not in ("budget", "fixed"):
        raise MovieMemError(f"unknown context {s.context!r}; use budget or fixed")
    if not 0 < s.core_share <= 1:
        raise MovieMemError(f"core_share must be in (0, 1], not {s.core_share}")
    qtype, channels = channels_for(film, question, s, run)
    if run is not None:
        run.trace.append(Step("route", {"type": qtype, "channels": [list(c) for c in channels]}))
    lists: list[list[Evidence]] = []
    firsts: list[Evidence] = []  # each option's own best line (option_lines), in option order
    alone_from = 1 + len(question.options) if s.per_option and s.option_alone else None
    for kind, k in channels:
        retriever: Retriever | None = None
        if kind == "characters":
            retriever = CharacterRetriever()
            skip = "it is turned off (characters=false)" if not s.characters else CharacterRetriever.missing(film)
            if skip:
                if run is not None:
                    run.note(f"the characters channel is skipped: {skip}")
                continue
        if kind == "event":
            made_by = sorted({e.source or "unknown" for e in film.events()})
            if not made_by:
                if run is not None:
                    run.note("no events in this film's memory: the event channel is skipped")
                continue
            links = sorted({r.source or "unknown" for r in film.relations()} - set(made_by))
            graph = "+".join(made_by) + (f" (links also by {'+'.join(links)})" if links else "")
            if made_by == ["rules"] and not s.rule_events:
                if run is not None:
                    run.note(f"the film's events were made by rules{'' if links else ' alone'}, graph {graph}: "
                             "the event channel is skipped (rule_events=false)")
                continue
            if run is not None:
                run.note(f"event channel reads the graph made by {graph}")
        for i, query in enumerate(queries_for(question, s.per_option, s.option_alone)):
            n = max(k, s.candidates) if s.fusion == "rrf" else (k if i == 0 else s.per_option)
            if kind == "event":
                found = graph_hits(film, run, query, n, s.graph_hops)
            elif retriever is not None:
                found = retriever.retrieve(film, query, k=n)
            else:
                found = TextRetriever(s.search, [kind]).retrieve(film, query, k=n)  # type: ignore[arg-type]  # a settings string; TextRetriever rejects a bad mode
            if run is not None:
                run.retrieved(kind if retriever is not None else f"{kind}:{s.search}", query, found)
            lists.append(found)
            if alone_from is not None and i >= alone_from and kind in ("utterance", "caption"):
                firsts += found[: s.option_lines]
    ranked = fuse(lists) if s.fusion == "rrf" else interleave(lists)
    if firsts:
        lead: dict[str, Evidence] = {}
        for e in firsts:
            lead.setdefault(e.key, e)
        ranked = list(lead.values()) + [e for e in ranked if e.key not in lead]
    ranked = informative_first(ranked) if s.informative else ranked
    n = s.context_lines if s.context == "fixed" else 0
    ranked = [widen(e, n) for e in ranked] if s.context_lines else ranked
    if s.rerank:
        if run is None:
            raise MovieMemError("rerank needs a backbone to judge the candidates")
        ranked = rerank(run, question, ranked, Lines(film) if lines is None else lines, s.rerank)
    return ranked


def pack(ranked: list[Evidence], budget: int, lines: Lines, s: GatherSettings) -> list[Evidence]:
    """The gathered hits cut to the budget the way the settings widen them."""
    if s.context == "budget":
        return fit_budget(ranked, budget, lines, core_share=s.core_share, rings=s.context_lines)
    return fit_budget(ranked, budget, lines)


def widen(e: Evidence, n: int) -> Evidence:
    """A line hit as the stretch of n rows either side of it (merged and charged like a passage)."""
    if e.kind not in ("utterance", "caption") or e.rows is not None:
        return e
    idx = int(e.id.split(":", 1)[1])
    return replace(e, rows=(e.kind, max(0, idx - n), idx + n))


class Hybrid(BasePolicy):
    """Routes by question type across transcript passages, captions, on-screen text and events, under a token budget."""

    @dataclass
    class Settings(GatherSettings):
        budget_tokens: int = 1000  # evidence text shown to the model (the prompt adds the question)
        budget_share: float = 0.5  # ... and at most this share of the film's transcript and captions (0: no cap)
        reader: str = "auto"  # json | logprobs | auto (logprobs where the backbone gives them, for mcq and claims)
        claims: str = "foils"  # how the logprobs reader judges a claim: foils | calibrated | qa (agents/claims.py)
        # claims: the orders in which the readers show the options they choose between (all: every rotation; two: as
        # given and reversed; one: as given), and whether foils shows a version that changes one stretch of the claim
        # as the words filling that blank (blanks) or as a whole statement (statements). MF² dev claims with `local`:
        # two + blanks 25 of 60 pairs at a median 5,000 input tokens a pair, all + statements 24 at 7,200, one 21 at
        # 2,500, one with budget_tokens=700 23 at 1,860, two with budget_tokens=700 18 at 3,730
        rotations: str = "two"
        foil_form: str = "blanks"
        option_words: bool = False  # short options scored as the answer's first word, not by letter (reader.word_probs)
        # multiple choice: the orders the options are read in, one | two | all (reader.orders), and the evidence
        # budget of each reading when there are several. Retrieval recall on the MF² dev MCQs is flat from 750 to
        # 1,000 tokens (0.82 both), so those tokens go to a second reading, which cancels the small model's favoured
        # letters: with `local`, two orders over 750 tokens answered 27 of the 30 dev MCQs (one order over 1,000: 25)
        # at a median 1,890 input tokens (1,217), and 29 of the synthetic film's 41 (27); two orders over 1,000
        # tokens 26 of 30 at 2,434
        letter_rotations: str = "two"
        letter_budget_tokens: int = 750
        overview_tokens: int = 0  # the film's scene list (its table of contents) put before the evidence (0: none)
        # order questions ("which happens first", "... right after X") and claims ("A before B"): locate | read.
        # locate places each option (each event) by its best line and answers from their order where it is
        # decisive (agents/order.py); read leaves them to the model
        order: str = "locate"
        max_tokens: int | None = None
        temperature: float = 0.0

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        s = self.settings
        if s.order not in ("locate", "read"):
            raise MovieMemError(f"unknown order reader {s.order!r}; use locate or read")
        check_reading(s.rotations, s.foil_form)
        check_rotations(s.letter_rotations)
        asked = parse_order(question) if s.order == "locate" else None
        located = read_order(run, film, question, asked) if asked else None
        if located is not None:
            return located
        lines = Lines(film)
        ranked = gather(film, question, s, run, lines)
        if s.reader not in ("auto", "json", "logprobs"):
            raise MovieMemError(f"unknown reader {s.reader!r}; use auto, json or logprobs")
        letters = s.reader == "logprobs" or (s.reader == "auto" and can_read(run, question))
        rereads = letters and question.kind == "mcq" and s.letter_rotations != "one"
        budget = effective_budget(s.letter_budget_tokens if rereads else s.budget_tokens, s.budget_share,
                                  lines.total_tokens())
        shown = pack(ranked, budget, lines, s)
        run.note(f"{len(shown)} blocks from {len(ranked)} hits fit the budget of {budget} tokens")
        shown.sort(key=lambda e: (e.start, e.end, e.id))
        ids = {f"E{n}": e for n, e in enumerate(shown, 1)}
        context = overview_block(film, s.overview_tokens, run) + "\n".join(render(eid, e) for eid, e in ids.items())
        if letters:
            run.note("reader: answer-token log-probabilities")
            run.show(shown)
            if question.kind == "claim":
                common = lowercase_words(lines.text()) if s.claims == "foils" else frozenset()  # only foils reads it
                in_film = (lambda: claim_order(run, film, question.text)) if s.order == "locate" else None
                return read_claim(run, question, context or "(nothing found)", s.claims, common=common, located=in_film,
                                  rotations=s.rotations, form=s.foil_form)
            return read_letter(run, question, context or "(nothing found)", words=s.option_words,
                               rotations=s.letter_rotations)
        parsed = answer_once(run, HYBRID, question, body(HYBRID, question, cite=True, context=context or "(nothing found)"),
                             cite=True, max_tokens=s.max_tokens, temperature=s.temperature)
        cited = [c for c in parsed.data.get("evidence", []) if isinstance(c, str)] if parsed.data else []
        cited_ev = [ids[c] for c in cited if c in ids]
        run.trace.append(Step("cite", {"cited": [c for c in cited if c in ids], "unknown": [c for c in cited if c not in ids],
                                       "ids": {k: e.id for k, e in ids.items()}}))
        for e in cited_ev:
            e.cited = True
        run.show(cited_ev + [e for e in shown if e not in cited_ev])
        return parsed


MIN_CAPPED_TOKENS = 100  # the share cap never goes below a few lines: half of a tiny film's text holds no block


def effective_budget(budget: int, share: float, memory_tokens: int) -> int:
    """The evidence budget, capped at a share of the film's own text: on a short film a fixed budget
    shows nearly all of it, and the small reader then does worse than with the best part (synthetic
    3-minute film: 56% with 1,000 tokens, 71% with 450). Feature films (10k+ tokens) are unaffected."""
    if share <= 0 or memory_tokens <= 0:
        return budget
    return min(budget, max(MIN_CAPPED_TOKENS, int(share * memory_tokens)))


def render(eid: str, e: Evidence) -> str:
    """One evidence block: id, times, what kind of memory, text (a passage's lines indented under it)."""
    head = f"[{eid}] {hms(e.start)}-{hms(e.end)} ({LABELS.get(e.rows[0] if e.rows else e.kind, e.kind)})"
    return f"{head}:\n    " + e.text.replace("\n", "\n    ") if "\n" in e.text else f"{head} {e.text}"


def graph_hits(film: FilmMemory, run: Run | None, query: str, k: int, hops: int) -> list[Evidence]:
    """Matched events plus their graph neighbours; matched events alone (said in the trace)
    where the graph layer is not installed."""
    try:
        from ...retrievers.graph import GraphRetriever

        return GraphRetriever(hops=hops).retrieve(film, query, k=k)
    except ImportError as exc:
        if run is not None:
            run.note(f"graph layer unavailable ({exc}); events matched by text only")
        return TextRetriever("hybrid", ["event"]).retrieve(film, query, k=k)
