"""Row models of the per-film memory tables and their Arrow schemas.

Every data row carries `film_id` and `run_id`: the id of the stage run that wrote it.
Readers only see rows whose run is recorded as finished in `stages`, which is what makes a
stage's output appear (or not) as one logical commit across tables.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..foundation.errors import MovieMemError

FILM_ID_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # fullmatch: `$` would let a trailing newline through


def check_film_id(film_id: str) -> str:
    if not isinstance(film_id, str) or not FILM_ID_RE.fullmatch(film_id):
        raise MovieMemError(
            f"invalid film id {film_id!r}: use 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"
        )
    return film_id


VECTOR_TYPES = {"float32": pa.float32(), "float16": pa.float16()}


def VectorField(dtype: str = "float32", **kw: Any) -> Any:  # noqa: N802 - reads like a type in the row models
    """A vector column whose width is fixed when the table is created. Text embeddings are stored as
    float16: search scores them as int8 codes (vector_pack.py), which float16 gives to within one code
    step where float32 would take twice the space. Tables made as float32 keep their type (store.py)."""
    return Field(default=None, json_schema_extra={"vector": True, "dtype": dtype}, **kw)


TEXT_VECTOR = "float16"


class Row(BaseModel):
    model_config = ConfigDict(extra="ignore")
    table: ClassVar[str] = ""
    film_id: str
    run_id: str = ""

    @model_validator(mode="before")
    @classmethod
    def _defaults_for_nulls(cls, data: Any) -> Any:
        """Columns added to a table after some rows were written hold nulls in those rows: they
        read as the field's default."""
        if isinstance(data, dict) and any(v is None for v in data.values()):
            fields = cls.model_fields
            return {k: v for k, v in data.items()
                    if v is not None or k not in fields or fields[k].default is None and fields[k].default_factory is None}
        return data


class FilmRow(Row):
    table: ClassVar[str] = "films"
    title: str = ""
    year: int | None = None
    source_path: str = ""
    sha256: str = ""
    duration_s: float = 0.0
    fps: float = 0.0
    n_frames: int = 0
    width: int = 0
    height: int = 0
    has_audio: bool = False
    has_video: bool = True
    meta: str = "{}"  # json: synopsis, cast, collection ids; never shown to policies unless asked
    created_at: str = ""


class StageRow(Row):
    table: ClassVar[str] = "stages"
    stage: str
    params: str = "{}"
    params_hash: str = ""
    model: str = ""
    code_version: str = ""
    status: str = "running"  # running | done | skipped | failed
    reason: str = ""
    started_at: str = ""
    finished_at: str = ""
    rows: int = 0
    error: str = ""


class FrameRow(Row):
    table: ClassVar[str] = "frames"
    frame_idx: int
    t: float
    pools: list[int] = Field(default_factory=list)
    strip: bool = False
    image: str = ""  # path relative to the library root


class ClipRow(Row):
    """CLIP vectors live in their own table so the clip stage owns its rows (atomic commit)
    and the vector width can follow the configured model."""

    table: ClassVar[str] = "clip"
    frame_idx: int
    t: float
    model: str = ""
    vector: list[float] | None = VectorField()


class ShotRow(Row):
    table: ClassVar[str] = "shots"
    shot_idx: int
    start: float
    end: float


class SegmentRow(Row):
    table: ClassVar[str] = "segments"
    seg_idx: int
    start: float
    end: float
    first_shot: int = -1
    last_shot: int = -1


class UtteranceRow(Row):
    table: ClassVar[str] = "utterances"
    idx: int
    start: float
    end: float
    text: str
    source: str = "asr"  # asr | subtitles | text
    speaker: str = ""  # a character id ("c3") once the characters stage ran; before it, a subtitle's own tag
    speaker_name: str = ""  # the character's name when the film's text names them, else ""
    words: str = "[]"  # json list of {start, end, word, probability}
    turns: str = ""  # once the characters stage split the line by voice: json [{start, end, speaker, speaker_name, text}]
    vector: list[float] | None = VectorField(TEXT_VECTOR)


class CaptionRow(Row):
    table: ClassVar[str] = "captions"
    idx: int
    kind: str = "imported"  # frame | clip | imported
    start: float
    end: float
    text: str
    characters: list[str] = Field(default_factory=list)
    model: str = ""
    prompt_id: str = ""
    vector: list[float] | None = VectorField(TEXT_VECTOR)


class OnscreenRow(Row):
    table: ClassVar[str] = "onscreen"
    idx: int
    start: float
    end: float
    text: str
    confidence: float = 0.0
    vector: list[float] | None = VectorField(TEXT_VECTOR)


class EventRow(Row):
    table: ClassVar[str] = "events"
    event_id: str
    trigger: str = ""
    args: str = "{}"
    description: str = ""
    start: float = 0.0
    end: float = 0.0
    seg_idx: int = -1
    story_order: int = -1
    source: str = ""  # rules | model: what made the event
    lines: list[str] = Field(default_factory=list)  # the memory rows it was read from ("utterances:12")
    vector: list[float] | None = VectorField(TEXT_VECTOR)


class PassageRow(Row):
    """Consecutive transcript lines (or captions) read as one unit: a single cue rarely carries
    enough meaning to be found or understood alone. Passages overlap; `first_row`/`last_row` are
    the `idx` range of the source rows, so a hit can be cited precisely or merged with its neighbours."""

    table: ClassVar[str] = "passages"
    idx: int
    source: str = "utterance"  # utterance | caption
    start: float
    end: float
    text: str
    first_row: int = 0
    last_row: int = 0
    vector: list[float] | None = VectorField(TEXT_VECTOR)


class RelationRow(Row):
    table: ClassVar[str] = "relations"
    src: str
    dst: str
    type: str
    confidence: float = 0.0
    rationale: str = ""
    source: str = ""  # rules | model
    rule: str = ""  # the rule that proposed it (rules only)
    lines: list[str] = Field(default_factory=list)  # the memory rows it was read from ("utterances:12")


class SceneRow(Row):
    """A stretch of the film read as one unit of story: its span, the names in it and a summary,
    extractive (its most central lines, names and on-screen text) or by a model (`how`)."""

    table: ClassVar[str] = "scenes"
    scene_idx: int
    start: float
    end: float
    summary: str = ""
    characters: list[str] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list)  # the central lines' rows ("utterances:12")
    n_lines: int = 0
    how: str = "extractive"  # "pictures" (no words: its shots and faces), or the model id that wrote the summary


class VoiceRow(Row):
    """One voice part of a transcript line (speakers stage): the whole line (part 0), or each of
    the speaker turns it was split into (parts 0, 1, ...), with the part's own span and words
    (`first_word`..`last_word` index the line's words; -1 when it has none). `cluster` is -1
    when the line is too short or too quiet to embed."""

    table: ClassVar[str] = "voices"
    utt_idx: int
    start: float
    end: float
    cluster: int = -1
    confidence: float = 0.0  # cosine similarity of the part's voice to its cluster's centroid
    part: int = 0
    first_word: int = -1
    last_word: int = -1


class FaceRow(Row):
    """One face seen on a strip frame, or on the key frame of a shot the strip misses (faces stage),
    with its identity cluster (-1: unclustered)."""

    table: ClassVar[str] = "faces"
    frame_idx: int  # the strip frame's; -1 on a key frame, which the frames table does not hold
    t: float
    cluster: int = -1
    strip: bool = True  # on a strip frame: it stands for one strip step of screen time
    box: list[int] = Field(default_factory=list)  # top, right, bottom, left in the stored frame
    thumbnail: str = ""  # the identity's representative crop, relative to the library root (on one row per cluster)
    vector: list[float] | None = VectorField()


class SpeakerRow(Row):
    """Who speaks one transcript line, or one speaker turn of it (characters stage): a line split
    into turns has a row per turn (`part` 0, 1, ...) with the turn's span and text."""

    table: ClassVar[str] = "speaker_lines"
    utt_idx: int
    speaker: str = ""
    speaker_name: str = ""
    confidence: float = 0.0
    part: int = 0
    start: float = 0.0
    end: float = 0.0
    text: str = ""  # the turn's words; "" when the line is one turn


class CharacterRow(Row):
    """One character of the registry: a voice cluster, a face cluster and/or a name, linked.
    `links` is a json list of {kind, value, confidence, evidence: [line strings]}."""

    table: ClassVar[str] = "characters"
    char_id: str
    name: str = ""
    names: list[str] = Field(default_factory=list)
    lines: int = 0
    screen_time_s: float = 0.0
    first_s: float = 0.0
    last_s: float = 0.0
    voice: int = -1
    face: int = -1
    confidence: float = 0.0
    links: str = "[]"


ROW_MODELS: dict[str, type[Row]] = {
    m.table: m
    for m in typing.cast("list[type[Row]]", [FilmRow, StageRow, FrameRow, ClipRow, ShotRow, SegmentRow, UtteranceRow,
                                             CaptionRow, OnscreenRow, EventRow, RelationRow, PassageRow, SceneRow,
                                             VoiceRow, FaceRow, SpeakerRow, CharacterRow])
}
TIMED_TABLES = {"shots", "segments", "scenes", "utterances", "captions", "onscreen", "events", "passages", "voices"}  # have start/end
POINT_TABLES = {"frames", "clip", "faces"}  # have t

# Which ingest stage writes each table: the one place this is written. A film's view reads a
# table from its owner's finished run; the pipeline drops and commits a stage's tables together.
TABLE_OWNER: dict[str, str] = {
    "films": "probe", "frames": "frames", "clip": "clip", "shots": "shots", "segments": "segments",
    "utterances": "transcript", "captions": "captions", "onscreen": "ocr", "events": "events", "relations": "events",
    "passages": "passages", "scenes": "scenes", "voices": "speakers", "faces": "faces", "speaker_lines": "characters",
    "characters": "characters",
}


def owned_tables(stage: str) -> list[str]:
    return [t for t, s in TABLE_OWNER.items() if s == stage]


def register_table(model: type[Row], owner: str, *, timed: bool = True) -> None:
    """A plug-in stage's own table: its row model (a `Row` subclass naming `table`), the stage that writes it
    (`owner`, its registry name) and whether its rows have start/end (`timed`) or a single time `t`.

    Call it when the plug-in is imported, before its stage runs: the store creates the table from the model
    on the first write, the stage owns it (its rows carry its run's id and show once the run is done), and
    the film's view hides rows outside a window or after `until`, as for the built-in tables."""
    ROW_MODELS[model.table] = model
    TABLE_OWNER[model.table] = owner
    (TIMED_TABLES if timed else POINT_TABLES).add(model.table)

_SCALARS: dict[Any, pa.DataType] = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    nullable = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        annotation = args[0]
        origin = typing.get_origin(annotation)
    if origin is list:
        (inner,) = typing.get_args(annotation)
        return pa.list_(_SCALARS[inner]), nullable
    return _SCALARS[annotation], nullable


def _is_vector(extra: object) -> bool:
    """Whether a field's json_schema_extra marks it as the row's vector (pydantic also allows a callable there)."""
    return isinstance(extra, dict) and bool(extra.get("vector"))


def vector_columns(model: type[Row]) -> list[str]:
    return [n for n, f in model.model_fields.items() if _is_vector(f.json_schema_extra)]


def arrow_schema(model: type[Row], dim: int | None = None, value_type: pa.DataType | None = None) -> pa.Schema:
    """The table's Arrow schema; vectors of `dim` values of `value_type` (default: the field's dtype)."""
    fields = []
    for name, f in model.model_fields.items():
        if _is_vector(f.json_schema_extra):
            if not dim:
                raise ValueError(f"{model.table}.{name} needs a vector width")
            declared = VECTOR_TYPES[cast(dict[str, Any], f.json_schema_extra).get("dtype", "float32")]
            fields.append(pa.field(name, pa.list_(value_type or declared, dim), nullable=True))
            continue
        typ, nullable = _arrow_type(f.annotation)
        fields.append(pa.field(name, typ, nullable=nullable))
    return pa.schema(fields)


def to_arrow(rows: Sequence[Row], model: type[Row], dim: int | None = None,
             value_type: pa.DataType | None = None, vectors: np.ndarray | None = None) -> pa.Table:
    """The rows as a table of their Arrow schema, read field by field (model_dump would copy every
    vector once more). `vectors`: the rows' vectors as one (rows, dim) matrix, in place of theirs."""
    schema = arrow_schema(model, dim, value_type)
    cols: dict[str, Any] = {n: [getattr(r, n) for r in rows] for n in schema.names if vectors is None or n != "vector"}
    if vectors is not None:
        if vectors.shape != (len(rows), dim):
            raise ValueError(f"{len(rows)} {model.table} rows need a ({len(rows)}, {dim}) vector matrix, not {vectors.shape}")
        typ = cast(pa.FixedSizeListType, schema.field("vector").type)
        flat = pa.array(vectors.reshape(-1).astype(typ.value_type.to_pandas_dtype(), copy=False))
        cols["vector"] = pa.FixedSizeListArray.from_arrays(flat, type=typ)
    return pa.Table.from_pydict({n: cols[n] for n in schema.names}, schema=schema)
