"""Prompts and JSON schemas of the events stage, each with an id and a version.

The stage stores `Prompt.ref` ("events.extract@v1") in its params, so editing a prompt means
bumping its version, which changes the params hash and recomputes the stage (and the replay
cache misses on the new text instead of serving answers to the old one).
"""

from __future__ import annotations

from typing import Any

from ..backbones.prompt import Prompt

ROLES = ("ARG0", "ARG1", "ARG2", "ARGM-LOC", "ARGM-TMP")
MAX_EVENTS = 6  # per segment part: keeps a local model's reply short enough to finish

EXTRACT = Prompt(
    id="events.extract",
    version=2,
    system=(
        "You read what happens in one part of a film and list its narrative events. "
        "An event is something a character does or that happens to them which matters to the story "
        "(not camera moves, not title cards). Reply with JSON only."
    ),
    template=(
        "Film: {title}\nPart {seg} of the film, from {start:.1f} s to {end:.1f} s.\n"
        "Lines (time in seconds, then what the line is):\n{lines}\n\n"
        "List at most {max_events} events in the order they happen on screen. An event usually spans several "
        "lines (what is seen and what is said about it); do not copy single lines of dialogue as events. "
        "For each event give:\n"
        "- description: one short sentence naming the characters\n"
        "- predicate: the main verb, in its base form (e.g. give, find, read)\n"
        "- roles: only the PropBank roles the lines state: ARG0 (who acts), ARG1 (what is acted on), ARG2 "
        "(to whom or with what), ARGM-LOC (where), ARGM-TMP (when)\n"
        "- seconds: [first, last]: when the event is on screen, from the times of its lines\n"
    ),
)

# what each relation type means, as both relation prompts put it to the model
RELATION_DEFS = (
        "- causal: A causes B\n"
        "- precondition: A makes B possible but does not cause it\n"
        "- hierarchical: B is a part or step of the larger event A\n"
        "- coreference: A and B are the same event told twice\n"
        "- before: A happens before B, with no stronger link\n"
        "- after: A happens after B in the story\n"
        "- overlap: A and B happen at the same time\n"
)

RELATE = Prompt(
    id="relations.classify",
    version=1,
    system=(
        "You relate pairs of events from a film's story. Reply with JSON only: a one-line rationale, "
        "the relation type and your confidence from 0 to 1."
    ),
    template=(
        "Events of the film (id, time on screen in seconds, description):\n{events}\n\n"
        "Event A: {a_id} ({a_time}) {a_desc}\nEvent B: {b_id} ({b_time}) {b_desc}\n\n"
        "How is A related to B? Give a one-line rationale, then the relation, then a score: your confidence "
        "from 0 to 1. Relations:\n" + RELATION_DEFS + "- none: no clear relation\n"
    ),
)

RELATION_TYPES = ("causal", "precondition", "hierarchical", "coreference", "before", "after", "overlap", "none")

# The fixed instructions come first and the pair last, so a local model reuses them as a cached prefix.
REFINE = Prompt(
    id="relations.refine",
    version=1,
    system=(
        "You check links between two events of a film's story that simple rules proposed from its subtitles "
        "and captions. Read the lines each event comes from and say how the events are really related. "
        "Reply with JSON only: a one-line rationale, the relation and your confidence from 0 to 1."
    ),
    template=(
        "Relations:\n" + RELATION_DEFS + "- none: the lines show no such link\n\n"
        "Film: {title}\n"
        "Event A ({a_time}): {a_desc}\nLines of A:\n{a_lines}\n\n"
        "Event B ({b_time}): {b_desc}\nLines of B:\n{b_lines}\n\n"
        "The rules proposed: A {proposed} B ({why}). Give a one-line rationale, then the relation of A to B, "
        "then a score: your confidence from 0 to 1."
    ),
)


def extract_schema(max_events: int = MAX_EVENTS) -> dict[str, Any]:
    """Events of one segment; small enough for llama.cpp's schema grammar. Keys are named so that
    their alphabetical order is a sensible order to write them in (description, predicate, roles,
    seconds): the llama.cpp backbone hands the schema to its grammar with sorted keys. Events are
    placed by seconds, not line numbers: models read the timestamps as the numbers to cite."""
    args = {"type": "object", "properties": {r: {"type": "string", "maxLength": 80} for r in ROLES},
            "additionalProperties": False}
    event = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "maxLength": 200},
            "predicate": {"type": "string", "maxLength": 30},
            "roles": args,
            "seconds": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
        },
        "required": ["description", "predicate", "roles", "seconds"],
        "additionalProperties": False,
    }
    return {"type": "object", "properties": {"events": {"type": "array", "items": event, "maxItems": max_events}},
            "required": ["events"], "additionalProperties": False}


# rationale, relation, score: alphabetical, and reasoning before the answer
RELATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string", "maxLength": 120},
        "relation": {"type": "string", "enum": list(RELATION_TYPES)},
        "score": {"type": "number"},
    },
    "required": ["rationale", "relation", "score"],
    "additionalProperties": False,
}

