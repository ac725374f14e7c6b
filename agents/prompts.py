"""Every prompt the policies send, in one place, each with an id and a version.

The trace records `id` and `version` of each prompt used, so an answer can always be traced
back to the exact wording; change the wording, bump the version. Long film context is placed
before the question so that many questions about one film share a prompt prefix (a local
model then reuses its KV cache instead of re-reading the film).

The Letta policy shares ARCHIVAL_SYSTEM (see LETTA_SYSTEM), the user turns and the answer formats.
"""

from __future__ import annotations

from typing import Any

from ..backbones.prompt import Prompt
from .types import Question

SYSTEM = ("You answer questions about a film. Use only the film material you are given (and, when no material "
          "is given, what you know). Reply with one JSON object and nothing else.")

# ----------------------------------------------------------------------------- answer formats

FORMATS = {
    "mcq": ('Reply with JSON: {"answer": "<one letter of {letters}>", "confidence": <1, 2 or 3>} '
            "where confidence 3 means sure, 2 likely, 1 a guess."),
    "claim": ('Reply with JSON: {"answer": "TRUE" or "FALSE", "confidence": <1, 2 or 3>} '
              "where confidence 3 means sure, 2 likely, 1 a guess."),
    "open": ('Reply with JSON: {"answer": "<your answer in one or two sentences>", "confidence": <1, 2 or 3>} '
             "where confidence 3 means sure, 2 likely, 1 a guess."),
}


def question_head(q: Question) -> str:
    """The question with its lettered options, or the claim wording, without a reply format."""
    if q.kind == "mcq":
        return f"Question: {q.text}\n" + "\n".join(f"{letter}. {opt}" for letter, opt in zip(q.letters, q.options))
    if q.kind == "claim":
        return f"Claim about the film: {q.text}\nIs this claim TRUE or FALSE?"
    return f"Question: {q.text}"


def question_block(q: Question, *, cite: bool = False, missing: bool = False) -> str:
    """The question, its options or claim wording, and the reply format."""
    head = question_head(q)
    fmt = FORMATS[q.kind].replace("{letters}", ", ".join(q.letters))
    extra = []
    if cite:
        extra.append('Add "evidence": a list of the ids (like "E3") of the evidence lines you used.')
    if missing:
        extra.append('If your confidence is below 3, add "missing": a short description of what you would need to '
                     "see in the film to be sure.")
    return head + "\n\n" + fmt + ("\n" + "\n".join(extra) if extra else "")


def answer_schema(q: Question, *, cite: bool = False, missing: bool = False) -> dict[str, Any]:
    """JSON schema of the reply (constrained decoding where the backbone supports it)."""
    if q.kind == "mcq":
        answer: dict[str, Any] = {"type": "string", "enum": list(q.letters)}
    elif q.kind == "claim":
        answer = {"type": "string", "enum": ["TRUE", "FALSE"]}
    else:
        answer = {"type": "string"}
    props: dict[str, Any] = {"answer": answer, "confidence": {"type": "integer", "enum": [1, 2, 3]}}
    if cite:
        props["evidence"] = {"type": "array", "items": {"type": "string"}}
    if missing:
        props["missing"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": ["answer", "confidence"]}


# ----------------------------------------------------------------------------- policies

CLOSED_BOOK = Prompt("closed-book", 1, SYSTEM, "{film}{question}")

# Full-context prompts: the film's whole text first, the question last (as MF²'s transcripts_only prompt is laid
# out), so every question on one film shares the prefix and a local model reads the film once (agents/calls.py,
# compact_text: a line a row, a [M:SS] or [H:MM:SS] time mark about once a minute)
SUBTITLES = Prompt("subtitles", 2, SYSTEM,
                   "Here is the film's full transcript: every line of dialogue in order, a line each; [H:MM:SS] "
                   "gives the time about once a minute.\n\n{context}\n\n{question}")

SOCRATIC = Prompt("socratic", 2, SYSTEM,
                  "Here is the film's world-state history: descriptions of what is seen{audio} through the whole "
                  "film in order, a line each; [H:MM:SS] gives the time about once a minute.\n\n{context}\n\n{question}")

END_TO_END_FRAMES = Prompt("end-to-end-frames", 1, SYSTEM,
                           "The images are {n} frames sampled uniformly from the whole film, in order, at these "
                           "times: {times}.\n\n{question}")

END_TO_END_VIDEO = Prompt("end-to-end-video", 1, SYSTEM, "The video is the whole film with its sound.\n\n{question}")

VIDEOAGENT = Prompt("videoagent", 1, SYSTEM,
                    "You are looking at {n} frames of a film (of {duration}), in time order:\n{frames}\n\n"
                    "Answer if you can; rate how sure you are.\n\n{question}")

VIDEOAGENT_TEXT_FRAME = "[{label} at {time}] {text}"

ARCHIVAL_SYSTEM = (
    "You answer questions about a film. You cannot see the film; its captions (what is seen) and its transcript "
    "(what is said) are stored in an archival memory. Call archival_memory_search to look things up: give a "
    "short query, top_k, and optionally start/end in seconds to search a stretch of the film. Search as often "
    "as you need, then reply with one JSON object and nothing else.")

def _window(what: str) -> dict[str, dict[str, str]]:
    """A tool's optional time window, as JSON-schema properties."""
    return {"start": {"type": "number", "description": f"only {what} ending after this time (seconds)"},
            "end": {"type": "number", "description": f"only {what} starting before this time (seconds)"}}


ARCHIVAL_SEARCH_TOOL = {
    "name": "archival_memory_search",
    "description": "Search the film's archival memory (captions and transcript lines) by meaning and keywords. "
                   "Returns matching passages with their times in seconds.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "top_k": {"type": "integer", "description": "how many passages (1-20)"},
            **_window("passages"),
        },
        "required": ["query"],
    },
}

BROWSE_TOOL = {
    "name": "browse_scenes",
    "description": "List the film's scenes between two times, a table of contents to browse before searching: "
                   "each scene's time span, the characters in it and a short summary.",
    "parameters": {
        "type": "object",
        "properties": _window("scenes"),
    },
}

# The film overview put before the question (archival, letta, hybrid: `overview_tokens`)
OVERVIEW_BLOCK = "The film's scenes, a table of contents (HH:MM:SS):\n{overview}\n\n"

# For backbones without tool calling: the same store, searched through a plain-text line
ARCHIVAL_TEXT_SYSTEM = (
    "You answer questions about a film. You cannot see the film; its captions (what is seen) and its transcript "
    "(what is said) are stored in an archival memory. To search it, reply with exactly one line "
    "`SEARCH: <a short query>` and nothing else; you will be shown the matching passages with their times. "
    "Search as often as you need; when you can answer, reply with one JSON object and nothing else.")

ARCHIVAL_TEXT = Prompt("archival-text", 1, ARCHIVAL_TEXT_SYSTEM,
                       "The film is {duration} long. Search its archival memory, then answer.\n\n{question}")

ARCHIVAL_TEXT_FINAL = Prompt("archival-text-final", 1, ARCHIVAL_TEXT_SYSTEM,
                             "Stop searching now and answer from what you found.\n\n{question}")

ARCHIVAL = Prompt("archival", 1, ARCHIVAL_SYSTEM,
                  "The film is {duration} long. Search its archival memory, then answer.\n\n{question}")

ARCHIVAL_FINAL = Prompt("archival-final", 1, ARCHIVAL_SYSTEM,
                        "Stop searching now and answer from what you found.\n\n{question}")

# The Letta policy sends the same system prompt (per request, in place of the one Letta compiles)
# and the same user turns; only the sentence about the search tool's arguments differs, because
# Letta's archival_memory_search filters by timestamps (film time written on 1970-01-01) and
# takes tags (left empty: passages are not tagged by topic).
ARCHIVAL_TOOL_SENTENCE = ("give a short query, top_k, and optionally start/end in seconds to search a stretch of "
                          "the film.")
LETTA_TOOL_SENTENCE = ("give a short query, top_k, no tags, and optionally start_datetime/end_datetime to search a "
                       "stretch of the film, as film time on 1970-01-01 (00:12:30 into the film is "
                       "1970-01-01T00:12:30).")
assert ARCHIVAL_TOOL_SENTENCE in ARCHIVAL_SYSTEM
LETTA_SYSTEM = ARCHIVAL_SYSTEM.replace(ARCHIVAL_TOOL_SENTENCE, LETTA_TOOL_SENTENCE)

LETTA = Prompt("letta", 2, LETTA_SYSTEM, ARCHIVAL.template)

LETTA_FINAL = Prompt("letta-final", 2, LETTA_SYSTEM, ARCHIVAL_FINAL.template)

GRAPH = Prompt("graph", 1, SYSTEM,
               "Here are story events of the film that match the question, with how they are linked "
               "(causes, what happens before/after, flashbacks). Times are screen times (HH:MM:SS); "
               "story order can differ from screen order in flashbacks.\n\nEvents:\n{events}\n\nLinks:\n{links}\n\n{question}")

HYBRID = Prompt("hybrid", 1, SYSTEM,
                "Evidence retrieved from the film's memory, in time order (HH:MM:SS), each with an id:\n\n{context}\n\n{question}")

# Readers that score the answer's first token instead of generating JSON (backbones with log-probabilities):
# the evidence comes first, the question and its options last, and the reply is one token.
READER_SYSTEM = "You answer questions about a film from excerpts of its memory. Use only the excerpts."
# Every reader prompt opens with the evidence, so the calls about one question share a prefix that
# llama.cpp reads once (the statement or question comes after it).
EVIDENCE_FIRST = "Evidence from the film's memory, in time order (HH:MM:SS):\n\n{context}\n\n"

READ_LETTER = Prompt("read-letter", 1, READER_SYSTEM,
                     EVIDENCE_FIRST + "{question}\n\n"
                     "Using the evidence, answer with the letter of the correct option only.")

# The option written out, not its letter (agents/readers/letters.py word_probs).
READ_WORD = Prompt("read-word", 1, READER_SYSTEM,
                   EVIDENCE_FIRST + "{question}\n\n"
                   "Using the evidence, answer with the words of the correct option only.")

READ_CLAIM = Prompt("read-claim", 1, READER_SYSTEM,
                    EVIDENCE_FIRST
                    + "Statement: {claim}\n\nDoes the evidence show that this statement is true, with every detail "
                    "(who, what, where, when, why) as stated? Answer yes or no only.")

# The evidence an answer read from one token rests on (agents/readers/cite.py): the conversation that read the answer
# goes on with the answer as the model's turn and this question, so a local model reads only these few new tokens.
# v1 gave an example id ("for [E3], answer 3"): on 4 of 4 dev MCQs `local` answered 3, the example's number.
CITE_BLOCK = Prompt("cite-block", 2, READER_SYSTEM,
                    "Which evidence block supports that answer best? Answer only with the number in its id, without the E.")

# Reranking (hybrid[rerank=N], agents/rerank.py): the question comes first, so the calls about one question share a
# prefix that llama.cpp reads once, and each candidate passage after it is the only new text of its call.
RERANK_SYSTEM = "You judge whether a passage from a film helps answer a question about the film."
RERANK = Prompt("rerank", 1, RERANK_SYSTEM,
                "{question}\n\nPassage from the film:\n{passage}\n\n"
                "Does this passage help answer the question? Answer yes or no only.")

# Claims as questions (hybrid[claims=qa]): a model that says "yes" to a statement and to its minimal edit
# alike may still answer a question from evidence and pick the better-supported of two answers. So the claim
# becomes questions about its details, each with the claim's own answer (no evidence shown, so the claim
# cannot steer the reading); the questions are answered from the evidence alone; the claim is TRUE when the
# evidence's answers agree with the claim's on every detail.
CLAIM_QUESTIONS = Prompt("claim-questions", 1, READER_SYSTEM,
                         "Statement about a film: {claim}\n\nWrite one short question for each detail the statement "
                         "gives: who, what (an action or object), where, when or in what order, how many, why. Give "
                         "each question the statement's own answer, in a few words. At most four questions. Reply "
                         'with JSON: {{"checks": [{{"question": "...", "answer": "..."}}]}}',
                         {"type": "object", "required": ["checks"],
                          "properties": {"checks": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
                              "type": "object", "required": ["question", "answer"],
                              "properties": {"question": {"type": "string"}, "answer": {"type": "string"}}}}}})

# A claim's cause, written from the evidence with the claim's own hidden (agents/readers/claims.py cause_foil).
CLAIM_CLOZE = Prompt("claim-cloze", 1, READER_SYSTEM,
                     EVIDENCE_FIRST
                     + "Complete this sentence about the film from the evidence, in a few words. Reply with the "
                     "missing words only.\n\n{sentence} ...")

CLAIM_ANSWERS = Prompt("claim-answers", 1, READER_SYSTEM,
                       EVIDENCE_FIRST
                       + "Questions:\n{questions}\n\nAnswer each question from the evidence, in a few words, in "
                       'order. Reply with JSON: {{"answers": ["...", ...]}}',
                       {"type": "object", "required": ["answers"],
                        "properties": {"answers": {"type": "array", "items": {"type": "string"},
                                                   "minItems": 1, "maxItems": 4}}})

ACE_SELECT = Prompt("ace-select", 1,
                    "You compare candidate answers to a question about a film and pick the best-supported one. "
                    "Reply with one JSON object and nothing else.",
                    "Question: {question}\n\nCandidate answers, each written by a model that studied the film:\n"
                    "{candidates}\n\nWhich candidate answers the question best? Prefer answers that are specific, "
                    "consistent and plausible for the film. Reply with JSON: {\"best\": <candidate number>}")

# ----------------------------------------------------------------------------- narration (audio description, Movie101)

_SYSTEM_NARRATE = ("You write audio description for blind and partially sighted film audiences: present tense, "
                   "concrete, characters named, nothing invented beyond what you are told or shown. "
                   "Answer with JSON only.")

_NARRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"narration": {"type": "string"}},
    "required": ["narration"],
}
_CLIP_NARRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"narration": {"type": "string"}, "characters": {"type": "array", "items": {"type": "string"}}},
    "required": ["narration", "characters"],
}

DESCRIBE_GAP = Prompt(
    "narration.gap", 1, _SYSTEM_NARRATE,
    "Write one audio-description line to be spoken from {t0} to {t1}, while nobody talks. "
    "Use at most {words} words.{names} Describe only what the film shows in that stretch; do not repeat dialogue."
    "{frames}\nWhat the film shows then:\n{context}{before}\n"
    'Reply as JSON: {{"narration": "..."}}',
    _NARRATION_SCHEMA,
)
SHORTEN = Prompt(
    "narration.shorten", 1, _SYSTEM_NARRATE,
    "This audio-description line has {have} words but must be spoken in at most {words} words:\n{line}\n"
    "Rewrite it as one complete sentence of at most {words} words. Keep the names and the main action; "
    'drop the rest. Reply as JSON: {{"narration": "..."}}',
    _NARRATION_SCHEMA,
)
NARRATE_CLIP = Prompt(
    "narration.clip", 1, _SYSTEM_NARRATE,
    "Narrate {t0}-{t1} of a film the way a film narrator tells it to a blind audience (Movie101 style): one "
    "paragraph of 2-6 sentences that sets the scene (place, time of day, who is there) and then tells what the "
    "characters do, in order, by name. Do not quote dialogue.{names}{frames}\n"
    "What the memory of the film holds for this stretch:\n{context}\n"
    'Reply as JSON: {{"narration": "...", "characters": ["names of characters in the narration"]}}',
    _CLIP_NARRATION_SCHEMA,
)


PROMPTS = {p.id: p for p in [CLOSED_BOOK, SUBTITLES, SOCRATIC, END_TO_END_FRAMES, END_TO_END_VIDEO, VIDEOAGENT, ARCHIVAL,
                             ARCHIVAL_FINAL, GRAPH, HYBRID, ACE_SELECT, READ_LETTER, READ_WORD, READ_CLAIM, CITE_BLOCK, CLAIM_QUESTIONS, CLAIM_ANSWERS, CLAIM_CLOZE, RERANK,
                             ARCHIVAL_TEXT,
                             ARCHIVAL_TEXT_FINAL]}
PROMPTS.update({p.id: p for p in [LETTA, LETTA_FINAL, DESCRIBE_GAP, SHORTEN, NARRATE_CLIP]})
