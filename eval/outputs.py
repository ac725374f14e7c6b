"""The JSON objects eval's commands print (`--json`) or write beside their results: bench, bench --plan,
compare, filter, judge, retrieval-eval and the position-bias table. Typed here, at the bottom of eval/ beside
records.py, so the module that builds one and the CLI that prints it read the same keys; they stay the plain
JSON objects they always were (TypedDicts), so scripts reading the output see no change.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from .records import EstimateLine

Bound = Literal["exact", "at least"]  # a plan's calls: exact, or a lower bound (calls that follow the replies)


class BenchJsonRow(TypedDict):
    policy: str
    backbone: str
    n: int
    accuracy: float | None  # None: no right/wrong (open answers), or nothing to estimate
    ci_low: float | None
    ci_high: float | None
    median_input_tokens: float | None


class BenchJson(TypedDict):
    """`moviemem bench --json` (runner.bench_json)."""

    run_dir: str
    items: int
    answered: int
    invalid: int
    backbone_calls: int
    cache_hits: int
    cost_usd: float
    stopped: str | None  # where a cap stopped the run
    warnings: list[str]
    wall_s: float
    results: list[BenchJsonRow]


class PlanRowLine(TypedDict):
    """One policy x backbone of `bench --plan --json` (plan.PlanRow.to_dict)."""

    policy: str
    backbone: str
    items: int
    already_answered: int
    calls: int
    calls_bound: Bound
    depends_on_replies: str | None  # why the calls follow the replies
    cached_calls: int
    calls_to_model: int
    input_tokens: int
    output_tokens_at_most: int
    cost_usd: float | None  # None: no price
    wall_s: float | None  # None: the backbone's speed was never measured here
    failures: int
    failure: str | None
    tokens_billed: int  # input tokens, as a provider bills them (the same as input_tokens)
    tokens_read: int  # of them, those the model reads: a local model skips the prefix it already holds
    tokens_reused: int
    first_reads: list[FirstReadLine]  # each film's first read (a full-context policy's whole transcript)
    later_reads: LaterReadsLine
    wall_from: str  # what wall_s rests on: measured speeds, recorded latencies, or never measured


class FirstReadLine(TypedDict):
    """A configuration's first call on a film (plan.FirstRead)."""

    film_id: str
    tokens_read: int
    shared_prefix_tokens: int  # shared with the film's later calls: what a saved prompt state would restore
    wall_s: float | None
    restored: bool  # priced as the restore of a saved prompt state


class LaterReadsLine(TypedDict):
    """The calls after each film's first, which reuse what it read."""

    calls: int
    tokens_read: int
    tokens_reused: int
    wall_s: float | None


class PlanTotal(TypedDict):
    items: int
    calls: int
    calls_bound: Bound
    cached_calls: int
    input_tokens: int
    output_tokens_at_most: int
    cost_usd: float | None
    wall_s: float | None
    tokens_billed: int
    tokens_read: int


class PlanJson(TypedDict):
    """`moviemem bench --plan --json` (plan.plan_json)."""

    rows: list[PlanRowLine]
    total: PlanTotal
    method: str


class GroupComparisonLine(TypedDict):
    """compare.GroupComparison as JSON: one group's paired figures."""

    group: str
    n: int
    a_correct: int
    b_correct: int
    a_only: int
    b_only: int
    p_value: float | None  # None: nothing was paired
    test: str
    difference: float | None  # A's accuracy minus B's on the paired items (a share); None: nothing was paired
    ci_low: float | None  # its 95% interval: Newcombe's score interval for paired proportions, within [-1, 1]
    ci_high: float | None
    a_median_input_tokens: float | None
    b_median_input_tokens: float | None
    unpaired: int
    unmatched: int


class CategoryExclusion(TypedDict):
    """The memorization filter's figures for one category."""

    n: int
    excluded: int
    exclusion_rate: float


class FilterLine(TypedDict):
    """filter.FilterResult as JSON (the .filter.json beside the filtered set)."""

    kept: list[str]
    excluded: list[str]
    ranking: list[tuple[str, int]]
    backbones: list[str]
    chance: float | None
    accuracy_before: float
    accuracy_after: float | None
    per_category: dict[str, CategoryExclusion]


class JudgeCounts(TypedDict):
    """What one `judge` invocation did (judge.judge_run)."""

    judged: int
    failed: int
    skipped_invalid: int


class Agreement(TypedDict):
    """How far repeated judgements of one answer agree, over every pair of repeats and criterion."""

    pairs: int
    exact: float
    within_1: float
    mean_abs_diff: float


class JudgeSummaryRow(TypedDict):
    """Per policy, backbone and judge: each criterion's mean score (judge.judge_summary)."""

    policy: str
    backbone: str
    judge: str
    items: int
    calls: int
    failed: int
    criteria: dict[str, EstimateLine]
    overall: EstimateLine
    agreement: NotRequired[Agreement]  # only where some answer was judged more than once


class ProbeScores(TypedDict):
    """One retrieval probe measured (retrieval_eval.score_probe)."""

    rr: float  # reciprocal rank of the first hit (0: none)
    input_tokens: int  # what reranking judgements cost
    recall_at_k: dict[str, float | None]  # k (a budget below: tokens), as a JSON key -> a share (None: no gold)
    recall_at_budget: dict[str, float | None]
    coverage_at_budget: dict[str, float | None]


class RetrievalMeans(TypedDict):
    """Means over a set of probes (None: no probe had gold to find)."""

    recall_at_budget: dict[str, float | None]
    coverage_at_budget: dict[str, float | None]
    recall_at_k: dict[str, float | None]
    mrr: float | None
    median_input_tokens: float


class RetrievalSummary(RetrievalMeans):
    """The means over a group of probes, and how many it holds."""

    n: int


class RetrieverResult(RetrievalMeans):
    """One retriever in `retrieval-eval --json`: its means over every probe, per category and per number of gold spans."""

    name: str
    default: bool
    description: str
    by_category: dict[str, RetrievalSummary]
    by_spans: dict[str, RetrievalSummary]  # "one", "several": gold in one span, or in two or more


class RetrievalEvalJson(TypedDict):
    """`moviemem retrieval-eval --json` (retrieval_eval.retrieval_eval)."""

    items: int  # probes: an MCQ item is one, a claim pair two
    budgets: list[int]
    retrievers: list[RetrieverResult]


class PositionBiasRow(TypedDict):
    """Per configuration of a `--permute` run: consistency across rotations and the letters chosen."""

    policy: str
    backbone: str
    items: int  # items with every rotation answered
    consistency: float | None
    letters: dict[str, float]  # letter -> share of valid answers
