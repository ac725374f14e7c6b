"""What the HTML pages render: the inspector's index, item and film pages, and compare's side-by-side page.

The modules that build a page (inspector.py, timeline.py, compare_page.py) fill these and the Jinja templates
in templates/ read them by key, so a key the builder forgets or misspells is a type error here rather than an
undefined variable at render time. Plain dicts at run time (TypedDicts): the templates see what they always saw.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class SpanMark(TypedDict):
    """A span on a bar, in per mille of the bar's length: a gold span, or a row of a film page's lane."""

    x: float
    w: float
    label: str


class EvidenceMark(SpanMark):
    """A piece of evidence on an answer's bar."""

    cited: bool
    kind: str


class TimelineBar(TypedDict):
    """One answer's bar (timeline.timeline)."""

    known: bool  # `duration` is the film's length (else the bar ends at the last span)
    duration: float
    marks: list[EvidenceMark]  # cited ones last, drawn on top
    gold: list[SpanMark]


class Lane(TypedDict):
    """One table of a film's memory on the film page (segments, shots, transcript, ...)."""

    label: str
    n: int  # rows in the table
    marks: list[SpanMark]
    cut: bool  # more rows than drawn


class EventView(TypedDict):
    id: str
    start: float
    end: float
    description: str
    links: list[tuple[str, list[str]]]  # relation type -> the events it links to


class CharacterCard(TypedDict):
    """One character of the registry as the film page shows it (timeline.character_cards)."""

    id: str
    name: str
    names: list[str]  # other names the film gives them
    lines: int
    screen_time_s: float
    first_s: float
    last_s: float
    voice: int | None
    face: int | None
    thumbnail: str  # the face crop's path in the library ("" without one)
    said: list[tuple[float, str]]  # the first lines they speak: (start, text)
    thumb: NotRequired[str | None]  # the crop copied beside the page (inspector._film_pages)


class FilmPageView(TypedDict):
    """A film's memory on one page (timeline.film_page)."""

    film_id: str
    title: str  # "" where the title only repeats the id or the file's name
    year: int | None
    has_video: bool
    duration: float
    lanes: list[Lane]
    events: list[EventView]
    characters: list[CharacterCard]


class CategoryRow(TypedDict):
    """A row of the index's accuracy table: one category, a cell per configuration ("" where it has no records)."""

    category: str
    cells: list[str]


class IndexCell(TypedDict):
    """An item's verdict for one configuration in the index (inspector._cell)."""

    mark: str
    css: str
    note: str
    title: str


class IndexRow(TypedDict):
    id: str
    film: str
    category: str | None
    page: str
    question: str
    gist: str
    marks: list[tuple[str, str]]
    cells: list[IndexCell]
    outcomes: list[str]


class OptionView(TypedDict):
    text: str
    gold: bool  # the right option


class Still(TypedDict):
    """The frame shown beside a piece of evidence (inspector._still)."""

    thumb: str | None  # its file under inspector/thumbs, None: none
    thumb_t: str | None  # its time, when it is the film's frame nearest the evidence rather than its own


class EvidenceView(Still):
    """One piece of evidence on an item page."""

    kind: str | None
    time: str
    text: str
    frame: str | None
    score: str
    retriever: str
    cited: bool
    gold: bool  # overlaps a gold span


class StepView(TypedDict):
    kind: str | None
    body: str  # the step's own keys as indented JSON


class PromptLine(TypedDict):
    text: str
    css: str  # "" | "shown" | "cited", with " gold" where the line repeats evidence inside a gold span


class MessageView(TypedDict):
    role: str
    lines: list[PromptLine]


class CallView(TypedDict):
    """One model call on an item page, as sent (collapsed there): its messages with evidence lines marked."""

    head: str
    messages: list[MessageView]
    reply: str


class QueryView(TypedDict):
    """One answer on an item page (inspector._query)."""

    timeline: TimelineBar
    key: str
    choice: str | None
    confidence: float | None
    text: str
    error: str | None
    evidence: list[EvidenceView]
    trace: list[StepView]
    calls: list[CallView]
    usage: str


class AnswerView(TypedDict):
    """One configuration's answers to an item."""

    policy: str
    backbone: str
    css: str
    verdict: str
    reason: str | None
    queries: list[QueryView]


class AnswerLane(TypedDict):
    """One answer's bar in the item page's stack of timelines."""

    label: str
    css: str
    verdict: str
    timeline: TimelineBar
    usage: str


class ShownEvidence(TypedDict):
    """A piece of evidence on compare's page."""

    kind: str
    time: str
    text: str
    cited: bool


class SideView(TypedDict):
    """One side's answer to an item on compare's page."""

    verdict: str
    css: str
    choice: str
    tokens: int
    output_tokens: int
    calls: int
    evidence: list[ShownEvidence]
    timeline: TimelineBar


class ComparisonRow(TypedDict):
    """One paired item on compare's page (compare_page.comparison_rows)."""

    id: str
    film: str
    group: str
    category: str
    kind: str  # A only, B only, both wrong, both right
    question: str
    options: list[str]
    answer: str | None  # an MCQ's right letter; None for the other formats
    gold: list[str]
    a: SideView
    b: SideView
    length: str
