"""The run log's values: one line of results.jsonl (`ResultRecord`, its answers `AnswerRecord`) and
run.json (`RunHeader`). The runner writes them; the report, the inspector and a resumed run read them.

A run directory is a user's file: an edited or damaged line must fail in one line, not be counted
("correct": "yes" read as right, a NaN latency in the medians), so numbers are finite and `correct` is
a real boolean. Keys this version does not know are kept (a later moviemem may add some).

Versions: what is written since the log was versioned carries `log_version` (LOG_VERSION). A line or
header without it is version 1, the format written before: the same fields with the same meanings, so
it reads as it always did. A value dumps with the keys it was read or made with (`line`), so today's
readers read new files, and a version-1 line rewritten by a resumed run stays version 1. A version newer
than LOG_VERSION is refused in one line, never read as if it were this one.

Items: a record names its item by id and, since records carry `item_digest`, by content too, so a rerun or
a comparison never takes an answer to one question for an answer to another that reuses its id. A record
without the digest (written before it) is matched by id alone, and the runner says so.

Evidence spans and trace steps are typed (`EvidenceRecord`, `StepRecord`) on the keys moviemem reads; each
retriever and policy may add its own keys, kept as they were written. Numbers keep the type they were written
with (an int start stays an int), so a line rewritten by a resumed run keeps its bytes.

A task scores an item's answers into a `Score` and summarises a configuration's records into `Metrics`; the
summary adds what every run measures (`SummaryRow`). Both stay the JSON objects they always were (TypedDicts),
so bench --json, bench scripts and a plug-in task read them as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, with_config
from typing_extensions import TypedDict  # before Python 3.12 pydantic reads a TypedDict field (Provenance) from here only

from ..foundation.errors import MovieMemError

LOG_VERSION = 2  # 1: lines and run.json written before the version field

Status = Literal["answered", "invalid", "unfit", "transient"]  # unfit: the prompt did not fit the context
Outcome = Literal["found", "lucky", "misread", "not found"]  # evidence.outcome says which is which
Config = tuple[str, str]  # (policy, backbone): one configuration of a run's grid


@dataclass
class Spend:
    """What model calls cost: a run's invocation (the runner's budget), or one item (its record's `spend`)."""

    calls: int = 0  # calls that reached a model
    cache_hits: int = 0
    tokens: int = 0  # input + output tokens of calls that reached a model
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    transient: int = 0  # calls that failed in transport: no reply from the model, asked again by a rerun

    def add(self, other: Spend) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class _Value(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    def line(self) -> dict[str, Any]:
        """The JSON object: the keys this value was read or made with (unset defaults left out), in field order."""
        return self.model_dump(mode="json", exclude_unset=True)


class RecordUsage(_Value):
    """Tokens, images, latency and cost: one answer's (its calls summed), or a record's (its answers summed)."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    restored_input_tokens: int = Field(default=0, ge=0)  # of the cached: restored from a saved prefix state (issue 65)
    images: int = Field(default=0, ge=0)
    video_s: float = Field(default=0.0, ge=0)  # an answer's only
    audio_s: float = Field(default=0.0, ge=0)  # an answer's only
    latency_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)  # None: no call was priced


Number = int | float  # as written: JSON 60 stays 60, 60.0 stays 60.0


class EvidenceRecord(_Value):
    """One piece of evidence an answer was shown (retrievers.base.Evidence as JSON, its fields in that order)."""

    kind: str | None = None
    film_id: str | None = None
    start: Number | None = None  # seconds on the film's clock
    end: Number | None = None
    text: str | None = None
    frame: str | None = None  # an image path, for frames
    score: Number | None = None
    retriever: str | None = None
    id: str | None = None
    rows: list[Any] | None = None  # passages: (source kind, first row, last row)
    cited: bool | int | None = None  # the model named it as support

    @property
    def span(self) -> tuple[float, float] | None:
        return None if self.start is None or self.end is None else (float(self.start), float(self.end))


class StepRecord(_Value):
    """One step of an answer's trace (agents.types.Step as JSON): its kind, and the kind's own keys (`data`)."""

    kind: str | None = None

    @property
    def data(self) -> dict[str, Any]:
        return self.model_extra or {}


class AnswerRecord(_Value):
    """One answer in full, as the policy gave it (agents.types.Answer as JSON)."""

    choice: str | None = None
    text: str = ""
    confidence: float | None = None
    invalid: bool = False
    error: str | None = None
    reason: str | None = None  # why an invalid answer is not scored at all: "context" (the prompt did not fit)
    grounded: bool = True  # False: the model was shown no evidence from the film
    policy: str | None = None
    backbone: str | None = None
    evidence: list[EvidenceRecord] = []  # every field of each piece shown
    trace: list[StepRecord] = []
    usage: RecordUsage = RecordUsage()
    calls: int = Field(default=0, ge=0)  # model calls made for this answer
    replayed_calls: int = Field(default=0, ge=0)  # of which answered from the replay cache (their latency is the original's)
    call_ids: list[str] = []  # its calls as sent, in calls/calls.jsonl (CallLine.id); empty in runs written before them


class PartLine(_Value):
    """One part of a message as sent: its text (ids of the text store's pieces, joined in order) or a medium's
    reference (a file path, a URL, or `<mime N bytes sha256:...>` for inline data)."""

    text: list[str] | None = None
    image: str | None = None
    video: str | None = None
    audio: str | None = None


class ToolCallLine(_Value):
    name: str = ""
    arguments: Any = None


class MessageLine(_Value):
    role: str
    parts: list[PartLine] = []
    tool_calls: list[ToolCallLine] = []
    tool_call_id: str | None = None
    name: str | None = None


class CallOptions(_Value):
    """The request's settings; the JSON schema and the tools offered are stored as text (ids, once each)."""

    max_tokens: int = 0
    temperature: float = 0.0
    json_schema: list[str] | None = None
    tools: list[str] | None = None
    tool_choice: str | None = None
    logprobs: int = 0
    seed: int | None = None
    shared_prefix: int = 0  # characters of the last message a local model read as a shared prefix of their own


class ReplyLine(_Value):
    text: str = ""
    tool_calls: list[ToolCallLine] = []
    finish_reason: str | None = None
    invalid: bool = False
    error: str | None = None
    model: str = ""
    cached: bool = False  # answered from the replay cache
    logprobs: list[dict[str, float]] | None = None  # per output token: top alternatives -> log-probability


class CallLine(_Value):
    """One line of calls/calls.jsonl: one model call of one answer, as sent and as answered."""

    id: str  # a digest of the rest: the same call written twice (a rerun after a kill) is one line
    key: str  # the record's key (policy, backbone, item)
    query: str  # the answer's query key ("answer"; a claim pair's "true" and "false")
    n: int = Field(ge=0)  # its place among the answer's calls
    prompt: str = ""
    version: str = ""
    messages: list[MessageLine] = []
    options: CallOptions = CallOptions()
    reply: ReplyLine = ReplyLine()
    usage: RecordUsage = RecordUsage()


class EvidenceScores(_Value):
    """An item's answers measured against its gold evidence spans (evidence.record_evidence)."""

    recall: float | None = None
    coverage: float | None = None
    cited_precision: float | None = None
    outcome: Outcome | None = None


class ResultRecord(_Value):
    """One line of results.jsonl: one item answered by one policy and backbone, scored."""

    log_version: int = Field(default=1, ge=1)
    key: str  # runner.record_key: policy, backbone and item id, tab-separated
    policy: str
    backbone: str
    item_id: str
    item_digest: str | None = None  # runner.item_digest of the item answered; None: written before items were digested
    film_id: str = ""
    format: str = ""
    category: str | None = None
    status: Status
    reason: str | None = None
    correct: StrictBool | None = None  # None: not scored (invalid, unfit, or an open answer waiting for a judge)
    detail: dict[str, Any] = {}  # the task's scoring detail (Score.detail): each task's own keys
    answers: dict[str, AnswerRecord] = {}  # by query key ("answer"; a claim pair's "true" and "false")
    usage: RecordUsage = RecordUsage()
    grounded: bool = True
    spend: Spend = Spend()
    wall_s: float = Field(default=0.0, ge=0)
    finished_at: str | None = None
    evidence: EvidenceScores | None = None  # only for items with gold evidence whose prompt was sent
    searches: int | None = Field(default=None, ge=0)  # only where the answers' traces count searches

    @property
    def config(self) -> Config:
        return self.policy, self.backbone


class Measures(TypedDict, total=False):
    """A record's fields that a line carries only where they were measured (a line without them reads as before)."""

    evidence: EvidenceScores | None  # runner: items with gold evidence whose prompt was sent
    searches: int  # evidence.searches: where the answers' traces count searches


@with_config(ConfigDict(extra="allow"))  # keys a later moviemem adds are kept
class Provenance(TypedDict, total=False):
    """run.json's `provenance` (provenance.collect): what produced a run's numbers, and what changed between
    the invocations that wrote into its directory."""

    moviemem: str
    commit: str | None  # None: not a git checkout
    engines: dict[str, str | None]  # distribution -> version (None: not installed)
    backbones: dict[str, str]  # spec -> identity (model id, a GGUF file's sha256)
    policies: dict[str, dict[str, Any]]  # spec -> the policy's resolved settings: each policy's own keys
    films: dict[str, dict[str, str]]  # film -> stage -> "status:params hash"
    changes: list[str]  # provenance.differences of each later invocation
    prompts: dict[str, list[str]]  # policy -> "prompt id@vN" its answers sent


class RunHeader(_Value):
    """run.json: what was asked of a run directory, and what produced its numbers."""

    log_version: int = Field(default=1, ge=1)
    benchmark: str | None = None
    format: str
    source: str | None = None
    policies: list[str] = []
    backbones: list[str] = []
    library: str | None = None
    created: str | None = None
    updated: str | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    items_digest: str | None = None
    retired_spend: Spend = Spend()  # spend of records dropped by --retry-invalid
    task_description: str | None = None
    provenance: Provenance | None = None  # provenance.collect, with the prompts the answers sent
    protocols: dict[str, Any] | None = None  # issue 56: per policy spec, the released protocol it follows (mf2_protocol)


class Detail(_Value):
    """How one item was scored (Score.detail, written as ResultRecord.detail): each task types its own (Task.detail:
    tasks.ChoiceDetail, mf2_scores.PairDetail, ...) and reads it back typed (Task.detail_of). Keys a type does not
    name are kept, so a plug-in task may score with this base and a mapping of its own keys."""


@dataclass(frozen=True)
class Score:
    """The score of one item (Task.score): `correct` None when the task has no right/wrong (open answers)
    or the answer was invalid; `invalid_reason` set when any answer could not be used. `detail` a mapping is
    taken as a `Detail` of those keys."""

    correct: bool | None
    detail: Detail
    invalid_reason: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.detail, Detail):
            object.__setattr__(self, "detail", Detail.model_validate(dict(self.detail)))


class EstimateLine(TypedDict):
    """metrics.Estimate as JSON: a proportion or mean with its interval (NaN where there is nothing to estimate)."""

    n: int
    value: float
    ci_low: float
    ci_high: float
    se: float
    k: float | None
    reason: NotRequired[str]  # why there is no interval: "too few films (N)" (metrics.MIN_FILMS)


class PairedLine(TypedDict):
    """metrics.Paired as JSON: A minus B on the same items."""

    n: int
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    statistic: float
    n10: int | None
    n01: int | None
    interval: NotRequired[str]  # how the interval was made: "newcombe" | "bootstrap-percentile"


class Metrics(TypedDict, total=False):
    """What every task measures over one configuration's records (Task.summarise). A task adds its own keys in
    its own row type (tasks.ClaimRow: MF²'s scores; tasks.RelationRow: NEST's), typed where it computes them."""

    n: int
    accuracy: EstimateLine | None  # None: the task has no right/wrong (open answers, before a judge)
    accuracy_clustered: EstimateLine
    invalid: EstimateLine
    per_category: dict[str, EstimateLine]
    note: str


class EvidenceSummary(TypedDict, total=False):
    """A configuration's evidence measures (evidence.summary); the fields after evidence_n only where measured."""

    evidence_n: int
    evidence_recall: float | None
    evidence_coverage: float | None
    cited_precision: float | None
    outcomes: dict[str, int]
    evidence_recall_by_category: dict[str, float | None]
    searched_share: float
    mean_searches: float


class SummaryRow(Metrics, EvidenceSummary, total=False):
    """One row of a run's summary (summary.summarise): the task's metrics and what every run measures."""

    policy: str
    backbone: str
    answered: int
    invalid_n: int
    unfit_n: int
    guesses: EstimateLine  # answers given while shown no evidence from the film
    fallback_parsed: EstimateLine
    median_input_tokens: float | None
    total_input_tokens: int
    total_processed_tokens: int
    total_restored_tokens: NotRequired[int]
    total_output_tokens: int
    cost_usd: float | None
    compute_s: float
    latency_s: float


class JudgementLine(TypedDict):
    """One line of judge.jsonl (judge.py): one record judged once by one judge backbone."""

    key: str  # the record's key
    policy: str
    backbone: str
    item_id: str
    repeat: int
    judge: str  # the judge backbone's spec
    failed: bool
    error: NotRequired[str]  # failed calls
    raw: NotRequired[str]  # a reply that was not the scores, cut to 500 characters
    scores: NotRequired[dict[str, int]]  # criterion -> 0-5, judged calls
    usage: NotRequired[dict[str, Any]]  # backbones.Usage.to_dict of the call; absent when it raised


class SampleMeta(TypedDict):
    n: int
    stratify: str | None
    seed: int
    of: int  # items before sampling


class BenchmarkMeta(TypedDict, total=False):
    """What was done to a benchmark after loading (formats.Benchmark.meta)."""

    permuted: bool  # permute.rotated: every item once per rotation of its options
    sample: SampleMeta  # sample.sample


# the records of each configuration, in item order (log.log_grid); read-only: a report's may be packed (lean_log.py)
Grid = Mapping[Config, list[ResultRecord]]

V = TypeVar("V", bound=_Value)


def parse(kind: type[V], text: str | bytes, where: str) -> V:
    """A JSON text (a line, a file) as a `kind`, or a one-line error naming the place (`where`) and the field."""
    try:
        value = kind.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "json_invalid":
            raise MovieMemError(f"{where} is not JSON; the file was edited or is damaged") from None
        field = ".".join(str(p) for p in err["loc"]) or "the line"
        raise MovieMemError(f"{where}: {field}: {err['msg'].lower()}; the file was edited or is damaged") from None
    version = getattr(value, "log_version", 1)
    if version > LOG_VERSION:  # its fields may mean what this version cannot tell: never read as if they did not
        raise MovieMemError(f"{where}: log_version {version} is newer than this moviemem supports ({LOG_VERSION}); "
                            "read it with a newer moviemem")
    return value
