"""How the routed retriever gathers evidence: its channels, queries, unit and the steps over its hits.

Below the machinery that reads it (gather.py, postprocess.py), so a postprocessor step, built in or a
plug-in's, is made from these settings without importing the retriever."""

from __future__ import annotations

from dataclasses import dataclass, field

from .routing import CHANNELS


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
    # the first N distinct candidates reordered by a judge's relevance (the backbone's yes/no, agents/rerank.py),
    # fused with the search ranking (retrievers/rerank.py; 0: off). Each candidate is a model call, counted in the
    # answer's input tokens. With `local` and 30: MF2 dev MCQ recall at 1,000 tokens 0.82 -> 0.90 at a median
    # 5,450 tokens of judgements, but 25-26 of 30 answered against 27 (more of what is shown misread). Off by
    # default: for better readers
    rerank: int = 0
    # what is done to the searches' hits, in order (retrievers/postprocess.py; a plug-in's step by its registered
    # name): fused into one ranking, informative hits first, line hits widened, reranked; fit-budget cuts the
    # ranking to the reader's budget when it is packed
    steps: tuple[str, ...] = ("fuse", "informative-first", "widen", "rerank", "fit-budget")
