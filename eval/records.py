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

Evidence spans and trace steps stay JSON objects: each retriever and policy adds its own keys, and
evidence.py and timeline.py read them with their own checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

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
    images: int = Field(default=0, ge=0)
    video_s: float = Field(default=0.0, ge=0)  # an answer's only
    audio_s: float = Field(default=0.0, ge=0)  # an answer's only
    latency_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)  # None: no call was priced


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
    evidence: list[dict[str, Any]] = []  # every field of each piece shown (retrievers.base.Evidence)
    trace: list[dict[str, Any]] = []  # the steps: {"kind": ..., and the kind's own keys}
    usage: RecordUsage = RecordUsage()
    calls: int = Field(default=0, ge=0)  # model calls made for this answer
    replayed_calls: int = Field(default=0, ge=0)  # of which answered from the replay cache (their latency is the original's)


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
    detail: dict[str, Any] = {}  # the task's scoring detail (tasks.Scored.detail)
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
    provenance: dict[str, Any] | None = None  # provenance.collect, with the prompts the answers sent
    protocols: dict[str, Any] | None = None  # issue 56: per policy spec, the released protocol it follows (mf2_protocol)


Grid = dict[Config, list[ResultRecord]]  # the records of each configuration, in item order (runner.log_grid)

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
