"""MF²'s own protocol as a policy: the release's template, filled as its inference script fills it, and
its parser reading the reply (agents/mf2_release.py reads both from the user's copy of the release).

`context` picks what fills the template: `statement` (the statement_only template: the statement and
the film's title as the release names it), `transcript` (transcripts_only: the film's SRT as the
release turns it into text), `synopsis` (synopsis_only: the release's synopsis file) or `evidence`
(the transcripts_only template with the hybrid retriever's evidence in place of the whole transcript,
said in the trace and in the run header). Only claims are asked this way: MF²'s protocol has no other kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...backbones import system, user
from ...backbones.prompt import Prompt
from ...foundation.errors import MovieMemError
from ...foundation.limits import MAX_SYNOPSIS_BYTES
from ...memory.view import FilmMemory
from ...retrievers.gather import QuestionRetriever, Routed
from ...retrievers.packing import Lines
from ...retrievers.registry import RETRIEVERS, get_retriever
from ...retrievers.settings import GatherSettings
from ...retrievers.window import rows_as_evidence
from ..base import BasePolicy, Run
from ..calls import parse_step
from ..mf2_release import Release, Template, load_release, p_true, read_verdict, release_text, srt_text
from ..parsing import Parsed
from ..readers.letters import CONTENT_FREE, TOP, can_read
from ..rerank import relevance_judge
from ..types import Question
from .hybrid import effective_budget

CONTEXTS = {"statement": "statement_only", "transcript": "transcripts_only", "synopsis": "synopsis_only",
            "evidence": "transcripts_only"}
EVIDENCE_NOTE = ("the transcripts_only template with retrieved evidence in place of the whole transcript "
                 "(each block's text, in time order, a block a line)")


class MF2Release(BasePolicy):
    """A claim judged with the MF² release's own template and parser (statement, transcript, synopsis or evidence)."""

    @dataclass
    class Settings:
        release: str = ""  # the folder of the user's copy of the MF² release (deep-spin/MF2)
        context: str = "statement"  # statement | transcript | synopsis | evidence
        style: str = "direct_free"  # the release's template style: explanation, explanation_free, direct, direct_free
        parser: str = "first-occurrence"  # the release's parsing strategy: strict, first-occurrence, last-occurrence, ...
        budget_tokens: int = 1000  # evidence: tokens of evidence shown in place of the transcript (hybrid's default)
        retriever: str = ""  # evidence: a registered retriever ("": hybrid's routed one)
        max_tokens: int = 512  # room for the explanation styles' paragraph; a direct answer stops long before
        temperature: float = 0.0
        # also record P(TRUE) of the reply's first token, and of a content-free statement ("N/A") in the same
        # prompt, where the backbone gives log-probabilities: two forward passes that share the prompt's prefix.
        # The verdict stays the parser's; bench/mf2_calibration.py recomputes calibrated verdicts from them
        p_true: bool = False

    def __init__(self, **settings: Any):
        super().__init__(**settings)
        s = self.settings
        if not s.release:
            raise MovieMemError("policy mf2-release needs release=DIR, the folder of a copy of the MF² release")
        if s.context not in CONTEXTS:
            raise MovieMemError(f"unknown context {s.context!r} for mf2-release; use one of {', '.join(CONTEXTS)}")
        if s.retriever:
            RETRIEVERS.entry(s.retriever)
        self.release: Release = load_release(s.release)
        self.template: Template = self.release.template(CONTEXTS[s.context], s.style)
        self.rules = self.release.parser(s.parser)

    def protocol(self) -> dict[str, Any]:
        """What the run header records: the release's template, style, parser and files, and the context."""
        s = self.settings
        out = {**self.release.describe(CONTEXTS[s.context], s.style, s.parser), "context": s.context}
        if s.context == "evidence":
            out["evidence"] = f"{EVIDENCE_NOTE}; {s.retriever or 'hybrid'} retrieval, budget {s.budget_tokens} tokens"
        return out

    def _answer(self, film: FilmMemory, question: Question, run: Run) -> Parsed:
        if question.kind != "claim":
            raise MovieMemError(f"mf2-release judges statements (claims) only, not {question.kind} questions")
        s = self.settings
        values = self._values(film, question, run)
        text = self.template.fill(claim=question.text, **values)
        prompt = Prompt(f"mf2-release.{self.template.modality}.{s.style}", 1, self.template.system, self.template.text)
        run.note(f"MF² release protocol: templates/{self.template.modality}.py {self.template.name}, parser {s.parser}")
        # what comes before the statement (the transcript, when the template puts it first) opens every call on the film
        shared = self.template.fill(claim="\x00", **values).find("\x00")
        reply = run.chat(prompt, [system(self.template.system), user(text)], max_tokens=s.max_tokens,
                         temperature=s.temperature, shared_prefix=max(0, shared))
        if reply.invalid:
            parsed = Parsed.fail(reply.error or "the backbone failed")
        else:
            verdict = read_verdict(self.rules, reply.text)
            parsed = (Parsed(verdict, verdict, None, False, how=f"mf2 {s.parser}") if verdict else
                      Parsed.fail(f"unparseable: the release's {s.parser} parser finds no TRUE or FALSE in the reply"))
        run.trace.append(parse_step(parsed))
        if s.p_true and not reply.invalid:
            self._record_p_true(run, question, prompt, text, self.template.fill(claim=CONTENT_FREE, **values), max(0, shared))
        return parsed

    def _record_p_true(self, run: Run, question: Question, prompt: Prompt, text: str, content_free: str,
                       shared: int) -> None:
        """P(TRUE) of the statement and of the content-free one, as the first token of the reply (a trace step)."""
        if not can_read(run, question):
            run.note("P(TRUE) not recorded: the backbone gives no log-probabilities")
            return
        got: dict[str, float | None] = {}
        for key, body in (("p_true", text), ("p_true_content_free", content_free)):
            reply = run.chat(prompt, [system(self.template.system), user(body)], max_tokens=1, temperature=0.0,
                             logprobs=TOP, shared_prefix=shared)
            got[key] = None if reply.invalid else p_true((reply.logprobs or [{}])[0])
        run.step("scores", {"how": "P(TRUE) of the reply's first token, against P(FALSE); content-free: the statement "
                                   f"{CONTENT_FREE!r} in the same prompt", **{k: v if v is None else round(v, 6)
                                                                              for k, v in got.items()}})

    def _values(self, film: FilmMemory, question: Question, run: Run) -> dict[str, str]:
        """The template's values other than the claim, as the release's inference script makes them."""
        context = self.settings.context
        if context == "statement":
            number = _number(film)
            if number not in self.release.titles:
                raise MovieMemError(f"{film.film_id!r} is not in the MF² release's film list (templates/prompt_utils.py): "
                                    "import the release's films with `moviemem import-collection mf2`")
            return {"movie_title": self.release.titles[number]}
        if context == "evidence":
            return {"transcripts": self._evidence(film, question, run)}
        srt = Path(film.info.source_path) if film.info.source_path else None
        if srt is None or not srt.is_file():
            raise MovieMemError(f"{film.film_id!r}: the release's {context} is read from the film's SRT and its "
                                f"folder, and {srt or 'no source file'} is not here (import the film from the release)")
        if context == "transcript":
            lines = rows_as_evidence(film, ["utterance"])
            for e in lines:
                e.retriever = "transcript"
            run.show(lines)
            return {"transcripts": srt_text(srt)}
        synopsis = srt.parent.parent / "synopsis" / f"{srt.stem}.synopsis"
        return {"synopsis": release_text(synopsis, MAX_SYNOPSIS_BYTES, "synopsis")}

    def _evidence(self, film: FilmMemory, question: Question, run: Run) -> str:
        s = self.settings
        lines = Lines(film)
        retriever: QuestionRetriever = get_retriever(s.retriever) if s.retriever else Routed(GatherSettings())
        judge = relevance_judge(run, question) if retriever.needs_judge else None
        ranked = retriever.retrieve(film, question, trace=run, lines=lines, judge=judge)
        budget = effective_budget(s.budget_tokens, 0.5, lines.total_tokens())  # hybrid's default share of the film
        shown = sorted(retriever.pack(ranked, budget, lines), key=lambda e: (e.start, e.end, e.id))
        run.show(shown)
        run.note(f"{EVIDENCE_NOTE}: {len(shown)} blocks from {len(ranked)} hits within {budget} tokens")
        return "\n".join(" ".join(e.text.split()) for e in shown)


def _number(film: FilmMemory) -> int:
    """The film's number in the release (the importer's collection id: mf2-6 is film 6)."""
    meta = film.meta()
    try:
        return int(meta.get("collection_id", ""))
    except (TypeError, ValueError):
        return -1

