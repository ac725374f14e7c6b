"""The values retrievers and agents trade: the question asked and the evidence found for it.

At the bottom of the retrievers folder, importing no machinery: question-level retrievers gather
for a `Question`, primitive retrievers return `Evidence`, and the agents' readers and policies read
both, so neither side imports the other's machinery. `Trace` is where a retriever records its steps
(a policy's Run satisfies it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, cast, get_args

from ..foundation.errors import MovieMemError

Kind = Literal["mcq", "claim", "open"]
LETTERS = "ABCDEFGHIJ"
MAX_TEXT_CHARS = 10_000  # a question or an option: longer is no question about a film, and floods the prompt


@dataclass(frozen=True)
class Question:
    """mcq: text + options (2-10); claim: a statement judged TRUE/FALSE; open: free answer."""

    text: str
    options: tuple[str, ...] = ()
    kind: Kind = "mcq"

    def __post_init__(self) -> None:
        if not self.text or not self.text.strip():
            raise MovieMemError("the question is empty")
        long = [len(t) for t in (self.text, *self.options) if len(t) > MAX_TEXT_CHARS]
        if long:
            raise MovieMemError(f"a question or option of {long[0]:,} characters; at most {MAX_TEXT_CHARS:,}")
        if self.kind not in ("mcq", "claim", "open"):
            raise MovieMemError(f"unknown question kind {self.kind!r}; use mcq, claim or open")
        if self.kind == "mcq" and not 2 <= len(self.options) <= len(LETTERS):
            raise MovieMemError(f"a multiple-choice question needs 2 to {len(LETTERS)} options, not {len(self.options)}")
        if self.kind != "mcq" and self.options:
            raise MovieMemError(f"a {self.kind} question takes no options")

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    @classmethod
    def make(cls, text: str, options: list[str] | tuple[str, ...] | None = None, kind: str | None = None) -> Question:
        """Kind defaults to mcq with options and open without."""
        if isinstance(options, str):  # a string would become one option per character
            raise MovieMemError(f"options are a list of strings, not one string ({options[:40]!r})")
        opts = tuple(str(o) for o in options or ())
        chosen = kind or ("mcq" if opts else "open")
        if chosen not in get_args(Kind):
            raise MovieMemError(f"unknown question kind {chosen!r}; use mcq, claim or open")
        return cls(text, opts, cast(Kind, chosen))

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "options": list(self.options), "kind": self.kind}



@dataclass
class Evidence:
    """One piece of film memory offered to (or cited by) a policy.

    kind: utterance | caption | onscreen | event | passage | frame | relation | character; start/end: seconds on the
    film's clock; text: what the model reads; frame: image path for frames; score: the
    retriever's score (higher is better, comparable only within one retriever); retriever:
    which retriever produced it; id: stable within the film (`kind:row`), used for citations.
    """

    kind: str
    film_id: str
    start: float
    end: float
    text: str = ""
    frame: str | None = None
    score: float = 0.0
    retriever: str = ""
    id: str = ""
    rows: tuple[str, int, int] | None = None  # passages: (source kind, first row idx, last row idx)
    cited: bool = False  # the model named it as support for its answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        """Identity for de-duplication across retrievers."""
        return self.id or f"{self.kind}:{self.start:.3f}:{self.text[:80]}"


class Trace(Protocol):
    """Where a retriever records what it did (a policy's Run): notes, each search, and named steps."""

    def note(self, text: str, **data: Any) -> None: ...

    def retrieved(self, retriever: str, query: str, found: list[Evidence], **data: Any) -> list[Evidence]: ...

    def step(self, kind: str, data: dict[str, Any]) -> None: ...
