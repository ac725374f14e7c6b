"""Benchmark files for the synthetic film: CHNB-style MCQ, MF²-style claim pairs, NEST-style relations.

Questions come from the core plot's facts and the timeline, so answers and evidence spans are
known exactly. Distractors are drawn from the same film (its other characters, places, objects
and events), so no option is wrong on its face.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .script import DAYS, _vars
from .timeline import Timeline

Span = list[float]
CORE_POOL = ("letter", "news", "plan", "walk", "empty", "confront", "return", "home")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Facts:
    """Lookups shared by the question builders: names, places, event texts and spans."""

    def __init__(self, tl: Timeline):
        s = tl.script
        self.tl = tl
        self.v = _vars(s.cast, s.places, s.facts)

    def span(self, *keys: str) -> list[Span]:
        return [[round(a, 3), round(b, 3)] for a, b in (self.tl.event_spans[k] for k in keys)]

    def scene(self, key: str) -> list[Span]:
        a, b = self.tl.scene_span(self.tl.scene_index(key))
        return [[round(a, 3), round(b, 3)]]

    def event(self, key: str) -> str:
        return _cap(self.tl.events[key])

    def f(self, text: str) -> str:
        return text.format(**self.v)


_Item = tuple[str, str, str, list[str], list[Span]]  # (category, question, answer, distractors, evidence)
_Add = Callable[[str, str, str, list[str], list[Span]], None]  # files one question; its texts are templates


def _mcq_items(fx: _Facts, rng: random.Random) -> list[_Item]:
    """(category, question, answer, distractors, evidence) for every question the plot supports.

    One writer per category; they run in this order because the ones that draw from `rng`
    (temporality, object identification) must draw in it for a seed's questions to stay the same."""
    items: list[_Item] = []

    def add(cat: str, q: str, ans: str, wrong: list[str], ev: list[Span]) -> None:
        items.append((cat, fx.f(q), _cap(fx.f(ans)), [_cap(fx.f(w)) for w in wrong], ev))

    _temporality(fx, add, rng)
    _plot(fx, add)
    _character(fx, add)
    _setting(fx, add)
    _objects(fx, add, rng)
    _perspective(fx, add)
    return items


def _temporality(fx: _Facts, add: _Add, rng: random.Random) -> None:
    """What happens before what, on screen and in the story (the flashback tells them apart)."""
    v, tl = fx.v, fx.tl
    day = v["day"]
    order = {k: tl.event_spans[k][0] for k in CORE_POOL}
    four = rng.sample(CORE_POOL, 4)
    first = min(four, key=order.__getitem__)
    add("temporality", "Which of these happens first in the film?", fx.event(first),
        [fx.event(k) for k in four if k != first], fx.span(*four))
    three = rng.sample([k for k in CORE_POOL if order[k] < tl.event_spans["hide"][0]], 3)
    add("temporality", "Which of these events happens earliest in the story?", fx.event("hide"),
        [fx.event(k) for k in three], fx.span("hide", *three))
    clue_t = tl.event_spans["clue"][0]
    nxt = min((k for k in CORE_POOL if order[k] > clue_t), key=order.__getitem__)
    others = rng.sample([k for k in CORE_POOL if k != nxt], 3)
    add("temporality", "Which of these plot events comes right after {F} finds the {clue}?",
        fx.event(nxt), [fx.event(k) for k in others], fx.span("clue", nxt))
    add("temporality", "When does {R} take the {obj} from {hideout}?",
        "On the afternoon before {H} and {F} get there",
        ["On the night after {H} and {F} leave", "On {day}, when {hideout} is torn down",
         "Years earlier, right after {E} hid it"], fx.span("plan", "confront"))
    add("temporality", "Where in the film is the flashback shown?", "Right after {R} admits taking the {obj}",
        ["At the very start, before the letter arrives", "Right after {H} reads the newspaper",
         "At the very end, after {H} brings the {obj} home"], fx.span("confront", "hide"))
    add("temporality", "On which day will {hideout} be torn down?", day,
        rng.sample([d for d in DAYS if d != day], 3), fx.span("news"))
    add("temporality", "When did {E} put the {obj} in {hideout}?", "Years before the story begins",
        ["The night before the letter came", "On the afternoon {R} went to {hideout}",
         "The day after {H} read the newspaper"], fx.span("hide", "recall"))
    three = rng.sample([k for k in CORE_POOL if k != "home"], 3)
    add("temporality", "Which of these events happens last in the story?", fx.event("home"),
        [fx.event(k) for k in three], fx.span("home", *three))


def _plot(fx: _Facts, add: _Add) -> None:
    """Why things happen: the causal chain from the letter to the treasure's return."""
    add("plot", "Why do {H} and {F} go to {hideout}?", "A letter from {E} said the {obj} was there",
        ["{R} asked them to meet {R_him} there", "{C} told them about a hidden treasure",
         "They wanted to see it before {day}"], fx.span("read", "walk"))
    add("plot", "Why do {H} and {F} go to {hideout} so soon?",
        "The newspaper said {hideout} would be torn down on {day}",
        ["{R} was leaving town the next day", "The letter told them to come that evening",
         "{C} said the {obj} would be sold"], fx.span("news"))
    add("plot", "Why is the tin box empty?", "{R} had taken the {obj} earlier that day",
        ["{E} had moved the {obj} to {home}", "{C} had sold the {obj} at {town}", "{F} had hidden the {obj}"],
        fx.span("empty", "plan", "confront"))
    add("plot", "Why does {H} suspect {R}?", "{F} finds the {clue} of {R} at {hideout}",
        ["{C} tells {H} that {R} went out", "The name of {R} is written on the box",
         "The newspaper names {R}"], fx.span("clue"))
    add("plot", "How did {R} know where the {obj} was?", "{E} showed {R_him} the hiding place years earlier",
        ["{R_He} read the letter from {E}", "{F} told {R_him} about it", "{R_He} saw it in the newspaper"],
        fx.span("recall", "hide"))
    add("plot", "How does the story end?", "{R} gives the {obj} back and {H} brings it home",
        ["{R} sells the {obj} at {town}", "{hideout} is torn down with the {obj} inside",
         "{H} gives the {obj} to {C}"], fx.span("return", "home"))
    add("plot", "What does {R} tell {C} after reading the newspaper?",
        "That {R_he} must go to {hideout} before anyone else",
        ["That {R_he} is leaving on the next train", "That {R_he} wants to buy {home}",
         "That {R_he} has lost {R_his} {clue}"], fx.span("plan"))


def _character(fx: _Facts, add: _Add) -> None:
    """Who does what, and who the elder is to the hero; the other characters are the distractors."""
    v = fx.v
    H, F, R, E, C = (v[k] for k in "HFREC")  # noqa: N806 - the script's own one-letter character keys
    add("character", "Who brings {H} the letter?", F, [R, C, E], fx.span("letter"))
    add("character", "Who wrote the letter to {H}?", E, [F, R, C], fx.span("read"))
    add("character", "Who goes with {H} to {hideout}?", F, [R, C, E], fx.span("walk", "search"))
    add("character", "Who took the {obj} from {hideout}?", R, [F, C, E], fx.span("confront"))
    add("character", "Who hands {R} a newspaper at {inn}?", C, [H, F, E], fx.span("plan"))
    add("character", "Who finds the {clue}?", F, [H, R, C], fx.span("clue"))
    add("character", "In the flashback, who is with {E} at {hideout}?", R, [H, F, C], fx.span("hide"))
    add("character", "Who is {E} to {H}?", "{H_his} {E_rel}",
        ["{H_his} " + w for w in ("father", "uncle", "teacher")] if v["E_rel"] == "grandfather"
        else ["{H_his} " + w for w in ("mother", "aunt", "teacher")], fx.span("read"))


def _setting(fx: _Facts, add: _Add) -> None:
    """Where things happen; the film's other places are the distractors."""
    v = fx.v
    home, town, inn, hideout = v["home"], v["town"], v["inn"], v["hideout"]
    add("setting", "Where does the film begin?", _cap(home), [_cap(town), _cap(inn), _cap(hideout)],
        fx.scene("letter"))
    add("setting", "Where do {H} and {F} read that {hideout} will be torn down?", _cap(town),
        [_cap(home), _cap(inn), _cap(hideout)], fx.span("news"))
    add("setting", "Where is {R} staying?", _cap(inn), [_cap(home), _cap(town), _cap(hideout)], fx.span("plan"))
    other_spots = [s for s in ("in the wall", "under the floor", "under the stairs") if s != v["spot"]]
    add("setting", "Where did {E} put the {obj}?", _cap(f"{v['spot']} of {hideout}"),
        [_cap(f"{other_spots[0]} of {inn}"), _cap(f"{other_spots[1]} of {home}"), _cap(f"in a drawer at {town}")],
        fx.span("read", "hide"))
    add("setting", "At what time of day do {H} and {F} search {hideout}?", "At night",
        ["In the morning", "At noon", "In the afternoon"], fx.span("search"))
    add("setting", "Where does {H} confront {R}?", _cap(inn), [_cap(home), _cap(town), _cap(hideout)],
        fx.span("confront"))
    add("setting", "Which place does the flashback show?", _cap(hideout), [_cap(home), _cap(town), _cap(inn)],
        fx.span("hide"))


def _objects(fx: _Facts, add: _Add, rng: random.Random) -> None:
    """The things on screen: the treasure, the clue, the box, signs, the headline, coats."""
    v, tl = fx.v, fx.tl
    hideout, obj, clue, day = v["hideout"], v["obj"], v["clue"], v["day"]
    add("object identification", "What did {E} leave for {H}?", "The " + obj,
        ["The " + clue, "A tin box of letters", "An old newspaper"], fx.span("read", "return"))
    add("object identification", "What do {H} and {F} find on the floor near the empty box?", "A " + clue,
        ["The " + obj, "A letter", "A newspaper"], fx.span("clue"))
    add("object identification", "What was the {obj} kept in?", "A tin box",
        ["A {clue}", "An envelope", "A wooden drawer"], fx.span("hide", "empty"))
    signs = [tl.script.places[k].sign for k in ("home", "town", "inn", "road")]
    add("object identification", "What does the sign in front of {home} say?", signs[0], signs[1:],
        fx.span("letter"))
    add("object identification", "What does the newspaper headline say?", v["headline"],
        [v["headline"].replace(day.upper(), d.upper()) for d in rng.sample([d for d in DAYS if d != day], 2)]
        + [f"{obj.upper()} FOUND AT {hideout.upper()}"], fx.span("news"))
    coats = {r: tl.script.cast[r].coat for r in ("hero", "friend", "rival", "clerk")}
    add("object identification", "What color is the coat {H} wears?", coats["hero"],
        [coats[r] for r in ("friend", "rival", "clerk")], fx.span("letter"))
    add("object identification", "What does the sign on the door of {home} say in the last scene?", "CLOSED",
        ["OPEN", signs[0], "BACK SOON"], fx.span("home"))


def _perspective(fx: _Facts, add: _Add) -> None:
    """Who knows what when: the viewer (and the rival) learn things before the hero does."""
    H, F, R, C = (fx.v[k] for k in "HFRC")  # noqa: N806 - the script's own one-letter character keys
    add("perspective", "What does the viewer learn before {H} does?", "{R} plans to go to {hideout} first",
        ["{F} wrote the letter", "{C} has the {obj}", "The {obj} is kept at {town}"], fx.span("plan"))
    add("perspective", "Whose memory does the flashback show?", R, [H, F, C], fx.span("recall", "hide"))
    add("perspective", "Who knows that the tin box is empty before {H} and {F} open it?", R, [H, F, C],
        fx.span("plan", "empty", "confront"))
    add("perspective", "When {H} reads the letter, who else in the film already knows where the {obj} is?", R,
        [F, C, "Nobody else"], fx.span("read", "hide"))


def mcq(tl: Timeline, film_id: str, seed: int) -> list[dict[str, Any]]:
    """Four-option questions; the correct letters are spread evenly over A-D by seed."""
    rng = random.Random(seed * 31 + 5)
    items = _mcq_items(_Facts(tl), rng)
    slots = [i % 4 for i in range(len(items))]
    rng.shuffle(slots)
    rows = []
    for n, ((cat, q, ans, wrong, ev), pos) in enumerate(zip(items, slots, strict=True), 1):
        assert len(wrong) == 3 and len({ans, *wrong}) == 4, q
        options = rng.sample(wrong, 3)
        options.insert(pos, ans)
        rows.append({"id": f"{film_id}-mcq-{n:03d}", "film_id": film_id, "question": q, "options": options,
                     "answer": "ABCD"[pos], "category": cat, "evidence": ev})
    return rows


def claims(tl: Timeline, film_id: str, seed: int) -> list[dict[str, Any]]:
    """True/false pairs that differ in one fact, judged pairwise as in MF²."""
    fx = _Facts(tl)
    rng = random.Random(seed * 37 + 11)
    other_day = rng.choice([d for d in DAYS if d != fx.v["day"]])
    pairs = [
        ("{F} brings {H} the letter.", "{C} brings {H} the letter.", ("letter",)),
        ("The letter is from {E}, the {E_rel} of {H}.", "The letter is from {R}, an old friend of {H}.", ("read",)),
        ("{E} put the {obj} {spot} of {hideout}.", "{E} put the {obj} under the counter of {home}.", ("read",)),
        ("The newspaper says {hideout} will be torn down on {day}.",
         "The newspaper says {hideout} will be torn down on " + other_day + ".", ("news",)),
        ("{R} reads the news at {inn}.", "{R} first hears the news from {H}.", ("plan",)),
        ("{H} and {F} find the tin box empty.", "{H} and {F} find the {obj} in the tin box.", ("empty",)),
        ("{F} finds the {clue} of {R} at {hideout}.", "{F} finds the {clue} of {C} at {hideout}.", ("clue",)),
        ("{R} admits that {R_he} took the {obj}.", "{R} denies that {R_he} took the {obj}.", ("confront",)),
        ("The flashback shows {E} hiding the {obj} while {R} watches.",
         "The flashback shows {E} hiding the {obj} while {F} watches.", ("hide",)),
        ("{R} promised {E} never to take the {obj}.", "{R} refused to make any promise to {E}.", ("hide",)),
        ("{R} gives the {obj} back to {H}.", "{R} keeps the {obj} and leaves town.", ("return",)),
        ("The film ends at {home}.", "The film ends at {hideout}.", ("home",)),
        ("{H} and {F} walk to {hideout} in the evening.", "{H} and {F} walk to {hideout} in the morning.",
         ("walk",)),
        ("{H} and {F} read about {hideout} at {town}.", "{H} and {F} read about {hideout} at {inn}.", ("news",)),
    ]
    return [{"id": f"{film_id}-claim-{n:03d}", "film_id": film_id, "true_claim": fx.f(t), "false_claim": fx.f(x),
             "evidence": fx.span(*keys)} for n, (t, x, keys) in enumerate(pairs, 1)]


def relations(tl: Timeline, film_id: str) -> list[dict[str, Any]]:
    """Event pairs with NEST labels; `flashback` means event_a happens earlier in the story than
    event_b but is shown after it."""
    rows = []
    for n, (a, b, label) in enumerate(tl.script.relations, 1):
        rows.append({"id": f"{film_id}-rel-{n:03d}", "film_id": film_id, "event_a": _cap(tl.events[a]),
                     "event_b": _cap(tl.events[b]), "event_a_id": tl.event_ids[a], "event_b_id": tl.event_ids[b],
                     "label": label})
    return rows
