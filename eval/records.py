"""One line of a run's results.jsonl, checked when a run is read back (report, inspect, resume).

The runner writes these lines, but a run directory is a user's file: an edited or damaged line must
fail in one line, not be counted ("correct": "yes" read as right, a NaN latency in the medians).
Only the fields the statistics read are typed; the rest (answers, detail, evidence) pass as they are.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from ..foundation.errors import MovieMemError


class _Usage(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    images: int = Field(default=0, ge=0)
    latency_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)


class ResultRecord(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    key: str
    policy: str
    backbone: str
    item_id: str
    status: Literal["answered", "invalid", "unfit", "transient"]  # unfit: the prompt did not fit the context
    correct: StrictBool | None = None
    usage: _Usage = _Usage()
    wall_s: float = Field(default=0.0, ge=0)


def check_record(rec: object, where: str) -> None:
    """Refuse a results line that is not a record the runner writes, naming the line and the field."""
    try:
        ResultRecord.model_validate(rec)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "the line"
        raise MovieMemError(f"{where}: {field}: {err['msg'].lower()}; the file was edited or is damaged") from None
