"""Names for the voices the rules left unnamed, read by a text backbone (only with --backbone).

The rules (names.py) name a voice from address terms and introductions when one name clearly
wins; a voice they leave as "speaker N" is often named in its exchanges in ways they do not parse
("Go and tell Sara she's wanted." answered by that voice). A backbone reads the exchanges where a
name is said around the voice's lines and picks one of the names said there, quoting the line that
shows it. The pick is kept only when the name is one no other character holds and the quoted line
is one it was shown and says that name: the model can only point at the film's own evidence,
never bring in a name. One request per voice under a JSON schema whose names are an enum, through
the replay cache, so a stopped run asks again only what it had not finished.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backbones import Backbone, system, user
from ..backbones.prompt import Prompt
from ..backbones.structured import Ask, ask_json
from ..foundation.timefmt import hms
from .names import Character, Line

MODEL_CONFIDENCE = 0.5  # a model's reading of the exchanges: weaker than a rule's clear margin
TIMEOUT_S = 600.0  # per request: a local model on a CPU reads a voice's exchanges in tens of seconds
EXCHANGES = 8  # exchanges shown per voice
AROUND = 2  # lines shown before and after the voice's line in an exchange ...
EXCHANGE_S = 10.0  # ... when they are said within this many seconds of it
UNKNOWN = "unknown"
QUOTE_CHARS = 120  # a quote this long (or half its line) is enough to find the line it comes from

NAME = Prompt(
    "characters.name", 1,
    "You work out who a speaker in a film is from the film's own dialogue. Reply with JSON only.",
    "Film: {title}\n"
    "Exchanges from the film's transcript. The lines of THIS VOICE have no name yet; the other speakers are "
    "labelled as far as they are known.\n\n{exchanges}\n\n"
    "Which of these names belongs to THIS VOICE: {candidates}? People are called by name by whoever talks to "
    "them and introduce themselves (\"I'm ...\"); a name a speaker says is usually someone else's. "
    "In \"line\", quote the one line above that shows it, as written, without its time and speaker; "
    "then give the name, or \"unknown\" when the lines do not show it.",
)


def name_schema(candidates: Sequence[str]) -> dict[str, Any]:
    """Keys in the order the model should write them (llama.cpp's grammar sorts them): the line first."""
    return {"type": "object", "additionalProperties": False, "required": ["line", "name"],
            "properties": {"line": {"type": "string", "maxLength": 2 * QUOTE_CHARS + 60},
                           "name": {"type": "string", "enum": [*candidates, UNKNOWN]}}}


@dataclass
class NameTally:
    asked: int = 0
    named: list[str] = field(default_factory=list)  # "speaker 3 -> Sara"
    rejected: list[str] = field(default_factory=list)  # why each answer was not kept
    failed: int = 0

    def note(self, model: str) -> str:
        text = f"model {model} read {self.asked} unnamed voice(s): {len(self.named)} named"
        if self.named:
            text += f" ({', '.join(self.named)})"
        if self.rejected:
            text += f", {len(self.rejected)} not kept ({'; '.join(self.rejected[:5])})"
        if self.failed:
            text += f", {self.failed} unusable replies"
        return text


def _says(text: str, name: str) -> bool:
    return re.search(r"(?<![A-Za-z])" + re.escape(name) + r"(?![A-Za-z])", text) is not None


def _norm(text: str) -> str:
    return " ".join(text.split()).strip(" \"'.,!?").lower()


def _quoted(quote: str, line: str) -> bool:
    """Whether a quote is the line, or holds it, or is a good part of it (a model may drop a clause;
    a long merged cue cannot be quoted whole in the reply's 300 characters)."""
    q, ln = _norm(quote), _norm(line)
    return bool(q) and ((q in ln and len(q) >= min(len(ln) / 2, QUOTE_CHARS)) or ln in q)


@dataclass(frozen=True)
class _Request:
    char: Character
    candidates: list[str]
    shown: list[Line]
    ask: Ask


def name_requests(chars: Sequence[Character], lines: Sequence[Line], lexicon: set[str], title: str) -> list[_Request]:
    """One request per unnamed voice whose exchanges say a name no character holds yet."""
    order = sorted(lines, key=lambda ln: (ln.start, ln.idx))
    label = {c.voice: c.name for c in chars if c.voice >= 0}
    free = lexicon - {n for c in chars for n in c.names}
    out = []
    for ch in sorted((c for c in chars if c.voice >= 0 and not c.names), key=lambda c: (-len(c.lines), c.char_id)):
        picked: set[int] = set()
        exchanges = 0
        for k, ln in enumerate(order):
            window = [j for j in range(max(k - AROUND, 0), min(k + AROUND + 1, len(order)))
                      if order[j].start - ln.end <= EXCHANGE_S and ln.start - order[j].end <= EXCHANGE_S]
            if ln.voice == ch.voice and any(_says(order[j].text, n) for j in window for n in free):
                picked.update(window)
                exchanges += 1
                if exchanges >= EXCHANGES:
                    break
        shown = [order[j] for j in sorted(picked)]
        candidates = sorted({n for ln in shown for n in free if _says(ln.text, n)})
        if not candidates:
            continue
        blocks: list[str] = []
        last = -2
        for j in sorted(picked):
            if j != last + 1 and blocks:
                blocks.append("")
            ln = order[j]
            who = "THIS VOICE" if ln.voice == ch.voice else label.get(ln.voice, "") or ln.tag or "unknown speaker"
            blocks.append(f"[{hms(ln.start)}] {who}: {' '.join(ln.text.split())}")
            last = j
        text = NAME.render(title=title or "(untitled)", exchanges="\n".join(blocks), candidates=", ".join(candidates))
        out.append(_Request(ch, candidates, shown, Ask(f"name {ch.char_id}", [system(NAME.system), user(text)])))
    return out


def name_voices(backbone: Backbone, chars: Sequence[Character], lines: Sequence[Line], lexicon: set[str], *,
                title: str, attempts: int = 2, progress: Callable[[int, int], None] | None = None) -> NameTally:
    """Names the unnamed voice characters in place where the backbone points at a line that shows it."""
    requests = name_requests(chars, lines, lexicon, title)
    tally = NameTally(asked=len(requests))
    held = {n for c in chars for n in c.names}
    for i, req in enumerate(requests):
        ans = ask_json(backbone, [req.ask], name_schema(req.candidates), max_tokens=160, attempts=attempts,
                       timeout=TIMEOUT_S)[0]
        if progress:
            progress(i + 1, len(requests))
        if not ans.ok:
            tally.failed += 1
            continue
        name, quote = str(ans.data["name"]), str(ans.data["line"])
        why = None
        source = next((ln for ln in req.shown if _quoted(quote, ln.text)), None)
        if name == UNKNOWN:
            why = f"{req.char.name}: unknown"
        elif name not in req.candidates or name in held:
            why = f"{req.char.name}: {name} is not a free name of these lines"
        elif source is None:
            why = f"{req.char.name}: the quoted line is not among those shown"
        elif not _says(source.text, name):
            why = f"{req.char.name}: the quoted line does not say {name}"
        if why:
            tally.rejected.append(why)
            continue
        assert source is not None
        tally.named.append(f"{req.char.name} -> {name}")
        held.add(name)
        req.char.name, req.char.names, req.char.confidence = name, [name], MODEL_CONFIDENCE
        req.char.links.append({"kind": "name", "value": name, "confidence": MODEL_CONFIDENCE, "rule": "model",
                               "evidence": [f"line {source.line} (model {backbone.model_id}): {source.text}"]})
    return tally
