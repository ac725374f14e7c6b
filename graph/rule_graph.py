"""A first narrative graph without a model: events and their relations from general English and
film grammar, cheap enough to build on every ingest.

Events. A shot in which someone acts is an event (its caption, all its sentences, with the dialogue
said over it); the shots that only go on with it join it, as film grammar cuts them: an insert
(a close view of a thing the event shows or speaks of, written text), a close-up of someone in it
speaking or listening, the same action shown again. A shot showing no one and nothing happening
that belongs to no event (a sign, a building: an establishing shot) and title or end cards are no
events; cards marking story time are cues (flashbacks.py). A dialogue line is an event when it
reports or announces an action: a discourse marker (because, so, if, then...), a past tense or a
stated intention ("going to", "will"). Each scene has at least one event: where no line
qualifies, the scene's most central line stands for it.

Relations, each with its confidence, the rule that proposed it and the rows it was read from:
- before (screen order): consecutive events outside flashbacks; raised where a time word opens
  the later line ("later", "then", "the next morning"); overlap where it says "meanwhile";
- causal: a weak candidate between nearby events sharing people and things (narrative chains);
  a result marker opening a line ("so", "that's why", "as a result") ties it to the
  earlier event it shares most participants and words with; "because / since X" ties the
  earlier event that matches X to this one; "X, so Y" ties this one to the later event matching Y;
  "it's because ..." opening a line makes it the cause of the event just before;
- precondition: "in order to / so that Y" makes this event a precondition of the later event
  matching Y; "if X, (then) Y" links the events matching X and Y;
- coreference: events in different scenes sharing participants and their action or most words,
  one of them told in dialogue or recalled in a flashback (two alike shots are an action done twice);
- flashback: the cue logic of flashbacks.py (marked stretches tied to the event recalling them).
Marker rules only ever link events whose text overlaps (shared names or content words), so a
marker alone never invents a link to an unrelated event. Pure functions over TextLine/Scene.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..memory.lines import Span
from .flashbacks import MARK, TimedEvent, story_time
from .scenes import STOP, FilmNames, Scene, TextLine, content_words, known_names, names_in

RULES_VERSION = 14  # bump when a rule changes: the events stage's params hash then changes and it reruns
SCENE_RULE = "scene"  # the rule of an event that is a whole scene of dialogue (extract_events)
SCREEN_ORDER = "screen-order"  # the rule of a "before" that says only that one event is shown after the other
EVENTS_PER_MINUTE = 8.0  # at most, per scene (at least 3 a scene)
REPEAT_S = 15.0  # a line repeated within this many seconds is the same event
NEAR_S = 120.0  # how far apart two events sharing participants may be to be linked as cause and effect
LOOKBACK_S = 900.0  # how far back a "because" or a result marker looks for its cause
REPEAT_JACCARD = 0.5  # two events sharing at least this share of their content words are one event told twice
LOOKAHEAD_S = 1800.0  # how far ahead a purpose or a consequence is looked for

SENTENCE = re.compile(r"(?<=[.!?…])\s+(?=[A-Z\"'])")
# a line opening with a time word follows the event shown before it
THEN = re.compile(r"^(?:and\s+)?(?:later(?: on)?|then|after that|afterwards|afterward|soon after|shortly after|"
                  r"the next (?:day|morning|night|evening|week)|the following (?:day|morning|night|week)|"
                  r"next|finally|at last|eventually|by (?:morning|nightfall|evening)|(?:a|one|two|three|some|several|"
                  r"few) (?:\w+ )?(?:minutes|hours|days|weeks|months|years) later)\b", re.I)
# in dialogue a bare "then", "next" or "finally" opening a line is mostly inference or turn-taking
# ("Then you must be his brother"), so only the explicit expressions count there
BARE_THEN = re.compile(r"^(?:and\s+)?(?:then|next|finally|at last|eventually)\b", re.I)
MEANWHILE = re.compile(r"^(?:and\s+)?(?:meanwhile|in the meantime|at the same time|at that moment)\b", re.I)
# "so" marks a result only when a clause follows it ("So I tried", "so the boy could watch"); before
# an adjective or adverb it is an intensifier or a phrase ("so long", "so much", "so sorry")
_SO = (r"so(?! that\b| as to\b)(?=,?\s+(?:i|you|he|she|we|they|it|there|nobody|no one|nothing|everyone|everybody|someone|somebody|"
       r"the|a|an|this|that|these|those|my|your|his|her|our|their|(?-i:[A-Z]\w*))\b)")
# a line opening with a result marker is the effect of something said or shown before
RESULT = re.compile(r"^(?:and\s+)?(?:" + _SO + r"|that's why|that is why|which is why|therefore|thus|hence|"
                    r"as a result|because of (?:that|this|it)|consequently|for that reason|now that)\b[,]?", re.I)
# a line opening with "it's because ..." explains the event before it: this one is the cause
EXPLAIN = re.compile(r"^(?:and\s+)?(?:it's|that's|it is|that is|this is|only) because\b", re.I)
# "... because X" / "since X" inside a line: X is the cause
BECAUSE = re.compile(r"\b(?:because(?: of)?|since|due to|thanks to|as a result of|on account of|'cause|cos)\s+(.+)",
                     re.I)
# "X, so Y" / "X, and that's why Y": Y is the consequence of this line
SO_MID = re.compile(r"[,;]\s*(?:and\s+)?(?:" + _SO + r"|that's why|which is why|therefore)\s+(.+)", re.I)
PURPOSE = re.compile(r"\b(?:in order to|in order that|so that|so as to)\s+(.+)", re.I)
CONDITION = re.compile(r"\b(?:if|unless|only if|as long as|once)\s+([^,;]+?)(?:,\s*|\s+then\s+)(?:then\s+)?(.+)", re.I)
# reported or announced action: the past tense, an intention, a decision
ACTION = re.compile(r"\b\w{3,}ed\b|\b(?:going to|gonna|will|won't|'ll|must|have to|had to|decided|found|took|"
                    r"left|came|went|gave|told|saw|made|killed|stole|lost|met|ran|wrote|brought|bought|sent|kept|"
                    r"got|fell|broke|knew|said|did|began|paid|won|hid|shot|drove|flew|caught)\b", re.I)


@dataclass
class RuleEvent:
    event_id: str
    trigger: str
    description: str
    start: float
    end: float
    scene_idx: int
    lines: list[TextLine]
    names: list[str]
    words: set[str]
    args: dict[str, str] = field(default_factory=dict)
    rule: str = ""
    story_order: int = -1

    @property
    def refs(self) -> list[str]:
        return [ln.ref for ln in self.lines]

    @property
    def text(self) -> str:
        return " ".join(ln.text for ln in self.lines)


@dataclass
class RuleRelation:
    src: str
    dst: str
    type: str  # before | overlap | causal | precondition | coreference | flashback (| hierarchical from a model)
    confidence: float
    rule: str
    lines: list[str]
    rationale: str
    source: str = "rules"  # "model" once a backbone has confirmed or relabelled it (refine.py)


@dataclass
class RuleGraph:
    events: list[RuleEvent]
    relations: list[RuleRelation]
    flashbacks: int = 0

    def by_type(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.relations:
            out[r.type] = out.get(r.type, 0) + 1
        return dict(sorted(out.items()))


# how captions speak of the film itself rather than of the story
FILM_WORDS = frozenset("""close-up closeup close shot shots camera view frame screen card cards title reads read wide medium
scene cut cuts pans pan zoom zooms background foreground sepia flashback fade fades black white end credits""".split())


def is_card(text: str) -> bool:
    """A caption that only marks time ("A card reads 'YEARS EARLIER'", "Flashback in sepia"): a cue
    for story time (flashbacks.py), not an event of the story."""
    return bool(MARK.search(text)) and len(content_words(MARK.sub(" ", text)) - FILM_WORDS) < 2


def stem(word: str) -> str:
    """A crude English stem, enough for 'opens' ~ 'opened' ~ 'opening' to meet."""
    w = word.lower().split("'")[0]
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


FILM_STEMS = frozenset(stem(w) for w in FILM_WORDS)


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def trigger_of(text: str, names: list[str]) -> str:
    """The first content word that is not a name: in 'Anna opens the gate' the action 'open'."""
    lowered = {n.lower() for n in names}
    for w in re.findall(r"[A-Za-z][A-Za-z'’-]*", text):
        lw = w.lower().replace("’", "'")
        # a contraction's stem is no action: "couldn't", "won't", "they'll" are auxiliaries and pronouns
        if lw.endswith("n't") or lw.split("'")[0] in STOP or lw in lowered or w[0].isupper() or len(lw) < 3:
            continue
        return stem(lw)
    return ""


def eventful(line: TextLine) -> bool:
    """Does a dialogue line report or announce an action (not only greet, answer or exclaim)?"""
    n, t = len(content_words(line.text)), line.text
    if n < 2:
        return False
    marked = (RESULT.search(t) or BECAUSE.search(t) or SO_MID.search(t) or PURPOSE.search(t) or CONDITION.search(t)
              or THEN.search(t) or MEANWHILE.search(t))
    return bool(marked or n >= 3 and ACTION.search(t))  # a bare action needs some content to be worth an event


# a title or end card, or credits: the film's own text, never a story event
CARD = re.compile(r"\b(?:title|end|opening|closing|inter-?title)\s+card\b|\bintertitle\b|\b(?:opening|end|closing)"
                  r" credits\b|^\W*(?:title|credits)\b", re.I)
# quoted on-screen text ('CLOSED', "THE END"); an apostrophe inside a word (Anna's, DON'T) opens or closes no quote
QUOTED = re.compile(r"(?<![A-Za-z])'(?:[^']|'(?=[A-Za-z]))*'(?![A-Za-z])|\"[^\"]*\"|‘[^’]*’|“[^”]*”")
# who may be on screen in a caption: people named by a noun or pronoun (a captioner writes "a man in a hat")
PERSON = frozenset("""man men woman women boy boys girl girls child children kid kids baby people person crowd couple
family someone somebody he she they him her them his their guy lady gentleman figure soldier soldiers officer
policeman police guard guards nurse doctor driver waiter stranger priest king queen crew""".split())
CLOSE_VIEW = re.compile(r"\b(?:close[- ]?ups?|closeup|close view|detail|insert|extreme close)\b", re.I)
# a verb in the simple present, past or progressive after a noun ("the guard finds", "a dog sleeps", "rain
# falling"): something happens; a caption with none ("The dark outside of the lighthouse.") shows a place
DOING = re.compile(r"(?<!\bthe )(?<!\ba )(?<!\ban )(?<!\bof )(?<!\bhis )(?<!\bher )(?<!\btheir )(?<!\bits )"
                   r"\b(?!(?:is|was|has|does|this|its|his|hers|us|always|perhaps)\b)[a-z]{2,}(?:s|ed|ing)\b")
# what a close-up of someone in a conversation shows, besides the film's words: the talk goes on
COVERAGE = frozenset(stem(w) for w in """speak speaks speaking talk talks talking listen listens listening look looks
looking watch watches watching nod nods nodding smile smiles smiling reply replies replying answer answers answering
reacts reacting react""".split())


def _shown(line: TextLine) -> TextLine | None:
    """What a caption shows, without the sentences that only mark story time or name the film's own
    parts ("Flashback in sepia.", "Close-up."); None for a card, or a caption that says too little."""
    if CARD.search(line.text):
        return None
    kept = [p.strip() for p in SENTENCE.split(line.text) if p.strip() and not is_card(p)
            and content_words(p) - FILM_WORDS]
    text = " ".join(kept)
    if len(content_words(text) - FILM_WORDS) < 2:
        return None
    return TextLine(line.start, line.end, line.kind, text, line.ref, line.speaker, line.characters)


def shot_kind(text: str, known: frozenset[str] = frozenset()) -> str:
    """Film grammar for a caption: "insert" when it shows no one and nothing happening (a close view
    of a thing, written text, a place: a detail of the event around it), "coverage" when it shows
    someone only speaking, listening or looking (a close-up inside a conversation), else "action"."""
    plain = QUOTED.sub(" ", text)
    names = {n.lower() for n in names_in(plain, known)}
    said = {w.lower() for w in re.findall(r"[A-Za-z]+", plain)}
    if not names and not said & PERSON and (CLOSE_VIEW.search(plain) or plain != text or not DOING.search(plain)):
        return "insert"
    rest = {stem(w) for w in content_words(plain) - FILM_WORDS - names} - COVERAGE - {"each", "other"}
    return "action" if rest else "coverage"


DESCRIPTION_CHARS = 220  # an event's description: a caption and a few lines, short enough to list many


def _describe(lines: list[TextLine]) -> str:
    """What is shown, then what is said: 'Anna opens the gate. Anna: "Wait here."'."""
    shown = " ".join(" ".join(ln.text.split()) for ln in lines if ln.kind != "dialogue")
    said = [ln for ln in lines if ln.kind == "dialogue"]
    if not shown:
        quote = f'"{" ".join(" ".join(ln.text.split()) for ln in said)}"'
        return _short(f"{said[0].speaker} says: {quote}" if said[0].speaker else quote, DESCRIPTION_CHARS)
    if said:
        return _short(f"{shown} {_quotes(said, DESCRIPTION_CHARS - len(shown) - 1)}", DESCRIPTION_CHARS)
    return _short(shown, DESCRIPTION_CHARS)


def _quote(line: TextLine) -> str:
    text = " ".join(line.text.split())
    return f'{line.speaker}: "{text}"' if line.speaker else f'"{text}"'


def _quotes(said: list[TextLine], room: int) -> str:
    """The most telling lines that fit in `room` characters, in screen order: one line rarely
    tells a shot's event ('Years ago, I worked with your grandmother.' needs the next line,
    'She showed me where she put the gold ring.'). The most telling line is always kept."""
    ranked = sorted(range(len(said)), key=lambda i: (eventful(said[i]), len(content_words(said[i].text))), reverse=True)
    kept: list[int] = []
    used = 0
    for i in ranked:
        size = len(_quote(said[i])) + (1 if kept else 0)
        if kept and used + size > room:
            continue
        kept.append(i)
        used += size
    return " ".join(_quote(said[i]) for i in sorted(kept))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _goes_on(event: list[TextLine], shot: TextLine, kind: str, said: list[TextLine], known: frozenset[str]) -> bool:
    """Does this shot continue the event before it? The same action shown again does; an insert does
    when it shows a thing the event shows or speaks of (the letter just handed over); a close-up of
    someone speaking does when that someone is in the event."""
    if _jaccard(stems(event[-1].text), stems(shot.text)) >= 0.5:
        return True
    if kind == "insert":
        start = min(x.start for x in event)
        talk = " ".join(x.text for x in said if x.end > start and x.start < shot.end)
        return bool((stems(QUOTED.sub(" ", shot.text)) & stems(" ".join(x.text for x in event) + " " + talk)) - FILM_STEMS)
    if kind == "coverage":
        return bool(set(names_in(shot.text, known)) & {n for x in event for n in names_in(x.text, known)})
    return False


def scene_events(scene: Scene, per_minute: float = EVENTS_PER_MINUTE,
                 known: frozenset[str] = frozenset()) -> list[tuple[list[TextLine], str]]:
    """The scene's events as (lines, rule): shots in which someone acts (with the inserts, close-ups
    of a speaker and repeats that follow them) with the dialogue said while they are on screen
    (what is shown and what is said there are one event), and eventful dialogue said elsewhere; the
    most central line when nothing qualifies. `known`: the film's names (known_names)."""
    units: list[tuple[list[TextLine], str]] = []
    said = [ln for ln in scene.lines if ln.kind == "dialogue"]
    for ln in scene.lines:
        if ln.kind != "caption" or (shot := _shown(ln)) is None:
            continue
        prev = units[-1][0] if units else []
        kind = shot_kind(shot.text, known)
        if prev and _goes_on(prev, shot, kind, said, known):
            prev.append(shot)
        elif kind != "insert":  # an insert that belongs to no event (a sign, a building) sets a place: no event
            units.append(([shot], "caption"))
    spans = [(min(x.start for x in u[0]), max(x.end for x in u[0])) for u in units]
    for ln in scene.lines:
        if ln.kind != "dialogue":
            continue
        mid = (ln.start + ln.end) / 2
        host = next((k for k, (a, b) in enumerate(spans) if a <= mid <= b), None)
        if host is not None:
            units[host][0].append(ln)
        elif eventful(ln):
            last = units[-1] if units and units[-1][1] == "dialogue-action" else None
            if last and ln.start - last[0][-1].end <= REPEAT_S and _jaccard(stems(last[0][-1].text), stems(ln.text)) >= 0.8:
                last[0].append(ln)  # a repeated cue (subtitle files often carry a line twice) is one event
            else:
                units.append(([ln], "dialogue-action"))
    units.sort(key=lambda u: (u[0][0].start, u[0][0].end))
    cap = max(3, math.ceil((scene.end - scene.start) / 60.0 * per_minute))
    if len(units) > cap:  # keep what the screen shows, then the longest reported actions
        rank = sorted(range(len(units)), key=lambda i: (units[i][1] != "caption", -len(stems(units[i][0][0].text)), i))
        keep = set(rank[:cap])
        units = [u for i, u in enumerate(units) if i in keep]
    if not units and scene.central:
        units = [([scene.central[0]], "scene-central")]
    return units


def extract_events(scenes: list[Scene], scene_units: bool = False) -> list[RuleEvent]:
    """The scenes' events (scene_events); with `scene_units` a scene of dialogue alone is one event,
    told by its summary, with its characters (a text film: its quoted lines are no story events)."""
    found: list[RuleEvent] = []
    whole = [scene_units and bool(sc.lines) and all(ln.kind == "dialogue" for ln in sc.lines) for sc in scenes]
    everything = [ln for sc, one in zip(scenes, whole) for ln in sc.lines] if not all(whole) else []
    known, film = known_names(everything), FilmNames.of(everything)  # the film's names, where a scene needs them
    for sc, one in zip(scenes, whole):
        if one:
            found.append(RuleEvent("", "scene", sc.summary, sc.start, sc.end, sc.idx, sc.lines, list(sc.names),
                                   stems(" ".join(ln.text for ln in sc.lines)),
                                   {"with": ", ".join(sc.names[:6])} if sc.names else {}, SCENE_RULE))
            continue
        for lines, rule in scene_events(sc, known=known):
            names = list(dict.fromkeys(n for ln in lines for n in film.of_line(ln)))
            text = " ".join(ln.text for ln in lines)
            shown = " ".join(ln.text for ln in lines if ln.kind != "dialogue") or text
            args = {}
            if lines[0].kind == "dialogue" and lines[0].speaker:
                args["ARG0"] = lines[0].speaker
            elif names and shown.lstrip().startswith(names[0]):
                args["ARG0"] = names[0]
            if names:
                args["with"] = ", ".join(names[:6])
            found.append(RuleEvent("", trigger_of(shown, names), _describe(lines), min(ln.start for ln in lines),
                                   max(ln.end for ln in lines), sc.idx, lines, names, stems(text), args, rule))
    found.sort(key=lambda e: (e.start, e.end, e.scene_idx))
    for i, e in enumerate(found):
        e.event_id = f"e{i + 1:03d}"
    return found


def _overlap_score(words: set[str], names: set[str], e: RuleEvent, min_shared: int = 1) -> float:
    """Shared content words, names counted double; 0 unless the two share something besides a
    name (a name alone ties every line of a character together) and score at least 2."""
    shared_names = {n.lower() for n in e.names} & names
    shared = (words & e.words) - {stem(n) for n in shared_names} - FILM_STEMS
    score = len(shared) + 2 * len(shared_names)
    return score if len(shared) >= min_shared and score >= 2 else 0.0


def best_match(clause: str, pool: list[RuleEvent], exclude: str = "", min_shared: int = 1) -> tuple[RuleEvent | None, float]:
    words = stems(clause)
    names = {n.lower() for n in re.findall(r"\b[A-Z][a-z]+\b", clause)} - STOP
    best, score = None, 0.0
    for e in pool:
        if e.event_id == exclude:
            continue
        s = _overlap_score(words, names, e, min_shared)
        if s > score:
            best, score = e, s
    return best, score


def _conf(base: float, score: float) -> float:
    return round(min(0.9, base + 0.05 * max(0.0, score - 2)), 3)


def _rel(src: RuleEvent, dst: RuleEvent, typ: str, conf: float, rule: str, why: str) -> RuleRelation:
    refs = list(dict.fromkeys(src.refs + dst.refs))
    return RuleRelation(src.event_id, dst.event_id, typ, conf, rule, refs, why)


def temporal_relations(events: list[RuleEvent], flashback_ids: set[str]) -> list[RuleRelation]:
    out = []
    present = [e for e in events if e.event_id not in flashback_ids]
    for a, b in zip(present, present[1:]):
        first = b.lines[0].text.strip()
        if m := MEANWHILE.search(first):
            out.append(_rel(a, b, "overlap", 0.6, "time-word", f"'{m.group(0)}' opens the later line"))
        elif (m := THEN.search(first)) and not (b.lines[0].kind == "dialogue" and BARE_THEN.search(first)):
            out.append(_rel(a, b, "before", 0.85, "time-word", f"'{m.group(0)}' opens the later line"))
        else:
            conf = 0.7 if a.scene_idx == b.scene_idx else 0.6
            out.append(_rel(a, b, "before", conf, SCREEN_ORDER, "only screen order: shown one after the other"))
    return out


def causal_relations(events: list[RuleEvent]) -> list[RuleRelation]:
    out: list[RuleRelation] = []
    for i, e in enumerate(events):
        earlier = [x for x in events[:i] if e.start - x.start <= LOOKBACK_S]
        later = [x for x in events[i + 1:] if x.start - e.start <= LOOKAHEAD_S]
        text = " ".join(ln.text for ln in e.lines)
        opener = next((m for ln in e.lines if (m := RESULT.search(ln.text.strip()))), None)
        if (m := opener) and earlier:
            # the cause: the recent event sharing most with this one, else the one just before
            cause, score = best_match(text, earlier[-12:])
            cause = cause or earlier[-1]
            out.append(_rel(cause, e, "causal", _conf(0.55 if score else 0.45, score), "result-marker",
                            f"'{m.group(0).strip(', ')}' opens '{_short(text, 50)}'"))
        explains = next((m for ln in e.lines if (m := EXPLAIN.search(ln.text.strip(" -")))), None)
        if explains and earlier:
            out.append(_rel(e, earlier[-1], "causal", 0.6, "explanation",
                            f"'{explains.group(0)}' opens '{_short(text, 50)}', explaining the line before"))
        elif (m := BECAUSE.search(text)) and earlier:
            out.extend(_clause_link(e, m.group(1), earlier, ("causal", 0.55, "because"), m.group(0), cause=True))
        if (m := SO_MID.search(text)) and later:
            out.extend(_clause_link(e, m.group(1), later, ("causal", 0.5, "so-consequence"), m.group(0).strip(",; ")))
        if (m := PURPOSE.search(text)) and later:
            out.extend(_clause_link(e, m.group(1), later, ("precondition", 0.5, "purpose"), m.group(0)))
        if m := CONDITION.search(text):
            pool = [x for x in events if x.event_id != e.event_id]
            # both halves of a conditional are short clauses: each must share two words with its event
            cond, s1 = best_match(m.group(1), pool, min_shared=2)
            after = [x for x in events if cond is None or x.start >= cond.start and x.event_id != cond.event_id]
            result, s2 = best_match(m.group(2), after, min_shared=2)
            if cond is not None and result is not None and cond.event_id != result.event_id:
                out.append(_rel(cond, result, "precondition", _conf(0.45, min(s1, s2)), "condition",
                                f"'{_short(m.group(0), 60)}' in {e.event_id}"))
    return out


def _clause_link(e: RuleEvent, clause: str, pool: list[RuleEvent], link: tuple[str, float, str], quoted: str,
                 cause: bool = False) -> list[RuleRelation]:
    """The link (type, base confidence, rule) between `e` and the event of `pool` that best matches a clause
    of its text ("because ...", "so ...", "to ..."): from that event to `e` when the clause names its
    `cause`, else from `e` to it; none when no event matches."""
    other, score = best_match(clause, pool)
    if other is None:
        return []
    typ, base, rule = link
    src, dst = (other, e) if cause else (e, other)
    return [_rel(src, dst, typ, _conf(base, score), rule,
                 f"'{_short(quoted, 50)}' matches '{_short(other.description, 50)}'")]


def _coref_confidence(overlap: float) -> float:
    """Two events' coreference confidence from the share of content words they have in common."""
    return round(min(0.9, 0.4 + overlap / 2), 3)


def participant_relations(events: list[RuleEvent], flashback_ids: set[str]) -> list[RuleRelation]:
    """A weak cause-and-effect candidate between an event and the next one (within NEAR_S) that
    involves the same people and the same thing: stories chain actions through their characters
    (narrative chains). Low confidence: a candidate for a model to confirm, not a finding."""
    out = []
    present = [e for e in events if e.event_id not in flashback_ids]
    for i, a in enumerate(present):
        for b in present[i + 1:]:
            if b.start - a.end > NEAR_S:
                break
            people = set(a.names) & set(b.names)
            things = (a.words & b.words) - {stem(n.lower()) for n in a.names + b.names} - FILM_STEMS
            if people and things:
                j = _jaccard(a.words - FILM_STEMS, b.words - FILM_STEMS)
                if j >= REPEAT_JACCARD and len(things) >= 2:  # one event said twice ("They'll check..." / "they'll check..."), not a chain
                    if told(a) or told(b):  # two shots alike in two scenes are the action done again
                        out.append(_rel(a, b, "coreference", _coref_confidence(j), "repeated",
                                        f"the same people and words again (overlap {j:.2f})"))
                else:
                    out.append(_rel(a, b, "causal", 0.3, "shared-participants",
                                    f"both involve {', '.join(sorted(people))} and '{sorted(things)[0]}'"))
                break
    return out


def told(e: RuleEvent) -> bool:
    """Is the event (also) told in words? An event is shown once in the story's present; it is the
    same event again only where it is recounted or shown again in a flashback."""
    return any(ln.kind == "dialogue" for ln in e.lines)


def coreference_relations(events: list[RuleEvent], flashback_ids: set[str],
                          min_jaccard: float = REPEAT_JACCARD) -> list[RuleRelation]:
    """Events of different scenes that share their participants and action, or most of their words,
    where one of them is told or recalled: two shots alike in two present-time scenes show an action
    done twice (a walk down the same street), not one event."""
    out = []
    for i, a in enumerate(events):
        best, best_j = None, 0.0
        for b in events[i + 1:]:
            if b.scene_idx == a.scene_idx or not (told(a) or told(b) or {a.event_id, b.event_id} & flashback_ids):
                continue
            j = _jaccard(a.words - FILM_STEMS, b.words - FILM_STEMS)
            shared = (a.words & b.words) - FILM_STEMS - {stem(n.lower()) for n in a.names + b.names}
            same_action = a.trigger and a.trigger == b.trigger and set(a.names) & set(b.names)
            # a name and a word in common is chance between two short lines: at least two things shared
            if len(shared) >= 2 and (j >= min_jaccard or same_action and j >= 0.25) and j > best_j:
                best, best_j = b, j
        if best is not None:
            out.append(_rel(a, best, "coreference", _coref_confidence(best_j), "shared-arguments",
                            f"same participants and words (overlap {best_j:.2f})"))
    return out


def build_graph(scenes: list[Scene], spans: list[TextLine] | None = None, scene_units: bool = False) -> RuleGraph:
    """The rule graph of a film's scenes; `spans` are the lines that may mark a flashback (all of
    the scenes' lines when not given); `scene_units`: see extract_events. A scene event is linked
    by time only (its many lines share words and names with any other scene: word rules would
    link everything)."""
    events = extract_events(scenes, scene_units)
    lined = [e for e in events if e.rule != SCENE_RULE]
    spans = spans if spans is not None else [ln for sc in scenes for ln in sc.lines]
    st = story_time([TimedEvent(e.event_id, e.start, e.end, e.description) for e in events],
                    [Span(ln.start, ln.end, ln.text, ln.kind) for ln in spans])
    flashback_ids = {x for b in st.blocks for x in b.events}
    for e in events:
        e.story_order = st.story_order[e.event_id]
    rels = (temporal_relations(events, flashback_ids) + causal_relations(lined)
            + participant_relations(lined, flashback_ids) + coreference_relations(lined, flashback_ids))
    by_id = {e.event_id: e for e in events}
    cue_refs = {id(b): [m for m in b.marks] + ([b.cue] if b.cue else []) for b in st.blocks}
    for f in st.edges:
        block = next(b for b in st.blocks if f.src in b.events)
        refs = [ln.ref for ln in spans for s in cue_refs[id(block)]
                if ln.start == s.start and ln.end == s.end and ln.text == s.text]
        rels.append(RuleRelation(f.src, f.dst, "flashback", f.confidence, "flashback-cue",
                                 list(dict.fromkeys(refs + by_id[f.src].refs + by_id[f.dst].refs)), f.rationale))
    return RuleGraph(events, dedupe(rels), len(st.blocks))


def dedupe(rels: list[RuleRelation]) -> list[RuleRelation]:
    """One edge per (src, dst, type): the most confident."""
    best: dict[tuple[str, str, str], RuleRelation] = {}
    for r in rels:
        key = (r.src, r.dst, r.type)
        if r.src != r.dst and (key not in best or r.confidence > best[key].confidence):
            best[key] = r
    return list(best.values())
