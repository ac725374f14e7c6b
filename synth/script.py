"""The synthetic film's script: a seeded cast, a fixed core plot and filler scenes.

Everything here is pure and deterministic given the seed, so the ground truth and the benchmark
files can be built (and tested) without rendering; `timeline.py` lays the script out on the clock.
The core plot is one mystery with a causal chain, a clue, a confession and a flashback; long
films get filler scenes of everyday talk between core scenes (`filler_scene`, placed by the
timeline), never inside the confession-flashback-return block, so the core stays coherent at any length.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from ..foundation.errors import MovieMemError

RATE_WPM = 145  # espeak-ng speed: slow enough for whisper base, fast enough to fit the plot

# Voice specs ("VOICE+VARIANT pPITCH sSPEED", see voice_options), one per character of a sex. Chosen
# so that Resemblyzer (the speakers stage) keeps the allowed casts apart at its 0.8 cut (screened on
# the film's own lines: 93% of simulated casts cluster without one wrong line, the old voices none)
# while whisper base still transcribes them (4-13% word error, as the old voices). The accent barely
# moves a voice embedding (en-us+f2 and en-gb-x-gbclan+f2 were one voice to it); variant and pitch do.
# Variants are espeak-ng's files under voices/!v; one it does not apply is dropped without a word
# (en-gb+f3 spoke as the male en-gb), which tests/test_synth.py checks for.
FEMALE_VOICES = ("en-us+f2", "en-us+Annie s140", "en-us+anika p25 s150")
MALE_VOICES = ("en-us+m6 s140", "en-us+m7 s160", "en-us+edward p75 s150", "en-us+john p75 s140")
FEMALE_NAMES = ("Anna", "Mary", "Emma", "Lucy", "Kate", "Sarah", "Helen", "Grace", "Alice", "Jane", "Laura")
MALE_NAMES = ("Tom", "Peter", "John", "David", "Paul", "Mark", "James", "Sam", "Jack", "Daniel", "Robert")
ELDER_NAMES = {"f": ("Margaret", "Dorothy", "Martha", "Elizabeth"), "m": ("George", "Henry", "Frank", "Walter")}
COATS = {"red": (200, 45, 45), "blue": (45, 85, 205), "green": (40, 150, 70), "yellow": (230, 200, 40),
         "purple": (135, 60, 175), "orange": (240, 130, 30), "brown": (125, 80, 40), "grey": (135, 135, 135)}
HOMES = (("the bakery", "ROSE BAKERY", "loaves of bread"), ("the bookshop", "CORNER BOOKS", "books"),
         ("the flower shop", "GREEN FLOWERS", "flowers"), ("the cafe", "BLUE DOOR CAFE", "cups of coffee"))
TOWNS = (("the market", "MARKET SQUARE"), ("the train station", "CENTRAL STATION"), ("the harbor", "HARBOR ROAD"))
INNS = (("the hotel", "GRAND HOTEL"), ("the inn", "RIVER INN"), ("the guest house", "HILL GUEST HOUSE"))
HIDEOUTS = ("the old mill", "the lighthouse", "the old school", "the water tower")
ROADS = ("the forest road", "the river path", "the hill road")
TREASURES = ("silver watch", "gold ring", "pearl necklace", "brass compass")
CLUES = ("blue scarf", "red glove", "green hat", "yellow scarf")
SPOTS = ("in the wall", "under the floor", "under the stairs")
PAPERS = ("THE DAILY NEWS", "THE TOWN HERALD", "THE MORNING POST", "THE EVENING STAR")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
STREETS = ("HIGH STREET", "PARK LANE", "STATION ROAD", "CHURCH STREET", "KING STREET", "BRIDGE STREET",
           "MILL LANE", "OAK AVENUE", "NORTH ROAD", "GARDEN ROW")

PITCH_RANGE, SPEED_RANGE = (0, 99), (80, 450)  # what espeak-ng's -p and -s accept


@dataclass(frozen=True)
class VoiceOptions:
    """One voice spec, "VOICE[+VARIANT] [pPITCH] [sSPEED]", as espeak-ng arguments."""

    voice: str  # espeak-ng voice name, with its +variant
    pitch: int | None = None  # -p, 0-99 (None: espeak-ng's 50)
    speed: int | None = None  # -s, words per minute (None: the renderer's RATE_WPM)

    def args(self, rate: int = RATE_WPM) -> list[str]:
        pitch = ["-p", str(self.pitch)] if self.pitch is not None else []
        return ["-v", self.voice, "-s", str(self.speed or rate), *pitch]


_VOICE = re.compile(r"[a-z]{2,3}(?:-[A-Za-z0-9]+)*(?:\+[A-Za-z0-9_-]+)?")


def voice_options(spec: str) -> VoiceOptions:
    """Parse a voice spec such as "en-us+f2 p70 s150"; a MovieMemError says what is wrong.

    Pitch and speed live in the spec so each character keeps one string (cast, truth.json and
    the speech cache key) that fully determines their sound."""
    words = spec.split()
    if not words or not _VOICE.fullmatch(words[0]):
        raise MovieMemError(f"bad voice spec {spec!r}: expected 'VOICE[+VARIANT] [pPITCH] [sSPEED]', "
                            "e.g. 'en-us+f2 p70 s150'")
    opts: dict[str, int] = {}
    for word in words[1:]:
        key, value = word[:1], word[1:]
        name, (lo, hi) = {"p": ("pitch", PITCH_RANGE), "s": ("speed", SPEED_RANGE)}.get(key, ("", (0, 0)))
        if not name or not value.isdigit():
            raise MovieMemError(f"bad voice spec {spec!r}: {word!r} is not pPITCH or sSPEED (e.g. p70, s150)")
        if name in opts:
            raise MovieMemError(f"bad voice spec {spec!r}: {name} is given twice")
        if not lo <= int(value) <= hi:
            raise MovieMemError(f"bad voice spec {spec!r}: {name} {value} is outside {lo}-{hi}")
        opts[name] = int(value)
    return VoiceOptions(words[0], opts.get("pitch"), opts.get("speed"))


@dataclass(frozen=True)
class Character:
    role: str  # hero, friend, rival, elder, clerk
    name: str
    gender: str  # "f" or "m"
    voice: str
    coat: str


@dataclass(frozen=True)
class Place:
    key: str  # home, town, inn, hideout, road
    name: str  # "the bakery"
    sign: str  # text on its sign ("" when it has none)


@dataclass(frozen=True)
class Line:
    speaker: str  # role
    text: str
    optional: bool = False  # colour, dropped when the film is too short for it


@dataclass(frozen=True)
class Shot:
    kind: str  # card, sign, letter, news, object, wide, two, close
    desc: str  # stage direction: becomes the shot's caption
    chars: tuple[str, ...] = ()  # roles in the picture
    lines: tuple[Line, ...] = ()
    text: tuple[str, ...] = ()  # on-screen text, one entry per drawn line
    hold: float = 2.0  # minimum seconds on screen
    music: str = ""  # "", "under" (soft bed under dialogue) or "solo" (music-only passage)
    effect: str = ""  # "", "knock", "steps", "wind"
    prop: str = ""  # object drawn in the shot: treasure, clue, box, empty-box
    events: tuple[str, ...] = ()  # event keys this shot shows


@dataclass(frozen=True)
class Scene:
    key: str
    place: str  # Place.key
    time: str  # morning, day, afternoon, evening, night
    shots: tuple[Shot, ...]
    flashback: bool = False
    core: bool = True
    kind: str = ""  # filler kind: home, inn, walk


@dataclass
class Script:
    """A cast, scenes in screen order, event descriptions and typed event relations."""

    seed: int
    title: str
    cast: dict[str, Character]
    places: dict[str, Place]
    facts: dict[str, str]  # names of the plot's things: treasure, clue, spot, day, paper, headline...
    scenes: list[Scene]
    events: dict[str, str]  # key -> description
    relations: list[tuple[str, str, str]]  # (src key, dst key, type)


def _vars(cast: dict[str, Character], places: dict[str, Place], facts: dict[str, str]) -> dict[str, str]:
    """Template slots: names, pronouns, places and plot facts."""
    v: dict[str, str] = {}
    for role, c in cast.items():
        key = role[0].upper()
        he, his, him = ("she", "her", "her") if c.gender == "f" else ("he", "his", "him")
        v |= {key: c.name, f"{key}_he": he, f"{key}_his": his, f"{key}_him": him, f"{key}_He": he.capitalize(),
              f"{key}_coat": c.coat}
    for p in places.values():
        v[p.key] = p.name
    return v | facts


ROLES = ("hero", "friend", "rival", "elder", "clerk")  # the cast's roles, in the order cast_for draws them


def cast_for(seed: int) -> tuple[dict[str, Character], dict[str, Place], dict[str, str]]:
    """Draw names, voices, places and plot objects from the seed."""
    rng = random.Random(seed)
    while True:  # at most three women and four men: one distinct voice each
        genders = [rng.choice("fm") for _ in ROLES]
        if genders.count("f") <= len(FEMALE_VOICES) and genders.count("m") <= len(MALE_VOICES):
            break
    names = {"f": rng.sample(FEMALE_NAMES, 4), "m": rng.sample(MALE_NAMES, 4)}
    voices = {"f": rng.sample(FEMALE_VOICES, len(FEMALE_VOICES)), "m": rng.sample(MALE_VOICES, len(MALE_VOICES))}
    coats = rng.sample(sorted(COATS), len(ROLES))
    cast = {}
    for role, g, coat in zip(ROLES, genders, coats, strict=True):
        name = rng.choice(ELDER_NAMES[g]) if role == "elder" else names[g].pop()
        cast[role] = Character(role, name, g, voices[g].pop(), coat)
    home, town, inn = rng.choice(HOMES), rng.choice(TOWNS), rng.choice(INNS)
    hideout = rng.choice(HIDEOUTS)
    places = {"home": Place("home", home[0], home[1]), "town": Place("town", town[0], town[1]),
              "inn": Place("inn", inn[0], inn[1]), "hideout": Place("hideout", hideout, ""),
              "road": Place("road", rng.choice(ROADS), "TO " + hideout.upper())}
    day = rng.choice(DAYS)
    treasure = rng.choice(TREASURES)
    facts = {"obj": treasure, "clue": rng.choice(CLUES), "spot": rng.choice(SPOTS), "day": day,
             "paper": rng.choice(PAPERS), "ware": home[2],
             "headline": f"{hideout.upper()} WILL BE TORN DOWN ON {day.upper()}",
             "E_rel": "grandmother" if cast["elder"].gender == "f" else "grandfather",
             "grandchild": "granddaughter" if cast["hero"].gender == "f" else "grandson"}
    return cast, places, facts


@dataclass(frozen=True)
class _Pen:
    """Writes one seed's script text: every line and stage direction is a template filled from the
    seed's names, pronouns, places and plot facts (_vars), so the acts below read like a screenplay."""

    v: dict[str, str]
    places: dict[str, Place]
    facts: dict[str, str]

    @property
    def title(self) -> str:
        return "THE " + self.facts["obj"].upper()

    def line(self, role: str, text: str, optional: bool = False) -> Line:
        return Line(role, text.format(**self.v), optional)

    def shot(self, kind: str, desc: str, **kw: Any) -> Shot:
        return Shot(kind, desc.format(**self.v), **kw)


def build_script(seed: int) -> Script:
    """The core plot for a seed: nine scenes, thirteen events, one flashback.

    The scenes come in three acts (_setup_scenes, _search_scenes, _resolution_scenes); the event
    texts and their relations are the same templates for every seed (EVENTS, RELATIONS)."""
    rng = random.Random(seed * 7919 + 1)
    cast, places, facts = cast_for(seed)
    pen = _Pen(_vars(cast, places, facts), places, facts)
    scenes = _setup_scenes(pen) + _search_scenes(pen) + _resolution_scenes(pen)
    if rng.random() < 0.5:  # the two same-morning scenes may come in either order
        scenes[1], scenes[2] = scenes[2], scenes[1]
    events = {k: d.format(**pen.v) for k, d in EVENTS.items()}
    return Script(seed, pen.title, cast, places, facts, scenes, events, list(RELATIONS))


# Each character is named in a required line the characters stage reads (characters/names.py):
# the line before one of theirs addresses them ("..., {H}.", "{R}, did you ...?") or they
# introduce themselves ("I am {C}"); a name in apposition or a letter's signature names nobody.
# No lone "I" on paper: in DejaVu Sans it is a bare stroke that OCR reads as "|".
def _setup_scenes(pen: _Pen) -> list[Scene]:
    """Act one: the letter sends the hero after the treasure, the newspaper sets the deadline, and
    (unseen by them) the rival reads the same news and plans to get there first."""
    title, places, facts = pen.title, pen.places, pen.facts
    L, S, v = pen.line, pen.shot, pen.v  # noqa: N806 - read like a script's lines and shots
    h, f, r, e, c = ROLES
    letter = ("Dear {H},".format(**v), "My {obj} is".format(**v), "{spot} of".format(**v),
              "{hideout}.".format(**v), "It is yours now.", "Love, {E}".format(**v))
    return [
        Scene("letter", "home", "morning", (
            S("card", "Title card: the words '" + title + "' in dark letters on cream paper.", text=(title,),
              hold=2.5, music="solo"),
            S("sign", "Morning. The front of {home}, with a large sign that reads '" + places["home"].sign + "'.",
              text=(places["home"].sign,), hold=2.5, music="solo"),
            S("two", "Inside {home}. {H}, in a {H_coat} coat, stands at the counter. {F}, in a {F_coat} coat, "
              "holds out a white envelope.", chars=(h, f), events=("letter",), lines=(
                L(f, "Good morning. A letter came for you today, {H}."),
                L(h, "A letter for me? Who is it from, {F}?"),
                L(f, "I do not know. Open it and see.", True))),
            S("letter", "Close-up of a handwritten letter on cream paper.", text=letter, hold=4.0,
              events=("read",), lines=(
                L(h, "It says, my {obj} is {spot} of {hideout}."),
                L(h, "It is yours now. Love, {E}."))),
            S("close", "Close-up of {H} holding the letter, looking surprised.", chars=(h,), events=("read",),
              lines=(L(h, "This letter is from my {E_rel}, {E}."),
                     L(h, "{E_He} died last winter. I miss {E_him} very much.", True))),
        )),
        Scene("news", "town", "day", (
            S("sign", "Day. A street sign at {town} reads '" + places["town"].sign + "'.",
              text=(places["town"].sign,), hold=2.5),
            S("two", "{H} and {F} stand at a newspaper stand at {town}.", chars=(h, f), events=("news",), lines=(
                L(f, "Look at the newspaper today.", True),
                L(h, "What does it say?", True))),
            S("news", "Close-up of the front page of '{paper}'. The headline reads '{headline}'.",
              text=(facts["paper"], facts["headline"]), hold=4.0, events=("news",), lines=(
                L(f, "It says they will tear down {hideout} on {day}."),)),
            S("close", "Close-up of {F} folding the newspaper.", chars=(f,), events=("news",), lines=(
                L(h, "Then we must find the {obj} before {day}, {F}."),
                L(f, "We can go there this evening."))),
        )),
        Scene("plan", "inn", "day", (
            S("sign", "Day. The entrance of {inn}, with a sign that reads '" + places["inn"].sign + "'.",
              text=(places["inn"].sign,), hold=2.5),
            S("two", "At the front desk of {inn}, {C}, in a {C_coat} coat, hands a newspaper to {R}, "
              "in a {R_coat} coat.", chars=(c, r), events=("plan",), lines=(
                L(c, "Good morning. I am {C}, from the front desk. Here is your newspaper, {R}."),
                L(r, "Thank you. Let me see.", True))),
            S("close", "Close-up of {R} reading the newspaper with a worried face.", chars=(r,), events=("plan",),
              music="under", lines=(
                L(r, "They will tear down {hideout} on {day}.", True),
                L(r, "I must go there this afternoon, before anyone else."),
                L(c, "Why? It is only an old building.", True),
                L(r, "There is something inside that I want.", True))),
        )),
    ]


def _search_scenes(pen: _Pen) -> list[Scene]:
    """Act two: the walk to the hideout, the empty box and the clue that points at the rival, and
    the confrontation where the rival confesses and starts to remember."""
    places = pen.places
    L, S = pen.line, pen.shot  # noqa: N806 - read like a script's lines and shots
    h, f, r, e, c = ROLES
    return [
        Scene("walk", "road", "evening", (
            S("sign", "Evening on {road}. A wooden sign reads '" + places["road"].sign + "'.",
              text=(places["road"].sign,), hold=2.5, music="solo", effect="steps", events=("walk",)),
            S("wide", "{H} and {F} walk along {road} as the sun goes down.", chars=(h, f), hold=3.0,
              music="solo", effect="steps", events=("walk",)),
            S("two", "{H} and {F} stop on the path and look ahead.", chars=(h, f), music="under",
              events=("walk",), lines=(
                L(h, "It is getting dark. Stay close to me.", True),
                L(f, "I can see {hideout} from here.", True))),
        )),
        Scene("search", "hideout", "night", (
            S("wide", "Night. The dark outside of {hideout} under the moon.", hold=2.5, effect="wind",
              events=("search",)),
            S("two", "Inside {hideout}, {H} and {F} search with a lamp.", chars=(h, f), events=("search",), lines=(
                L(h, "The letter said it is {spot}.", True),
                L(f, "Here it is. I found a small tin box."))),
            S("object", "Close-up of an open tin box. It is empty.", prop="empty-box", hold=2.5,
              events=("search", "empty"), lines=(
                L(h, "The box is empty. Someone was here before us."),)),
            S("close", "Close-up of {F} holding up a {clue}.", chars=(f,), prop="clue", events=("search", "clue"),
              lines=(
                L(f, "Look at this {clue} on the floor."),
                L(h, "That is the {clue} of {R}. {R_He} worked with my {E_rel} years ago."),
                L(h, "{R_He} is staying at {inn}. We will go there tomorrow.", True))),
        )),
        Scene("confront", "inn", "morning", (
            S("wide", "Morning at {inn}. {H} knocks on the door of a guest room.", chars=(h,), hold=2.5,
              effect="knock", events=("confront",)),
            S("two", "{H} and {R} face each other in the doorway.", chars=(h, r), events=("confront",), lines=(
                L(h, "We found your {clue} in {hideout}."),
                L(r, "Yes. I was there yesterday afternoon.", True),
                L(h, "{R}, did you take the {obj} of my {E_rel}?"),
                L(r, "Yes, I took it. I am sorry."))),
            S("close", "Close-up of {R} looking down, remembering.", chars=(r,), music="under",
              events=("recall",), lines=(
                L(r, "Years ago, I worked with your {E_rel} at {hideout}."),
                L(r, "{E_He} showed me where {E_he} put the {obj}."))),
        )),
    ]


def _resolution_scenes(pen: _Pen) -> list[Scene]:
    """Act three: the flashback to the hiding (shown after the confession that recalls it), the
    treasure handed back, and the hero bringing it home."""
    L, S = pen.line, pen.shot  # noqa: N806 - read like a script's lines and shots
    h, f, r, e, c = ROLES
    return [
        Scene("hide", "hideout", "day", (
            S("card", "A card reads 'YEARS EARLIER'.", text=("YEARS EARLIER",), hold=2.0, music="solo",
              events=("hide",)),
            S("two", "Flashback in sepia. Inside {hideout}, a younger {E} holds a tin box while a younger {R} "
              "watches.", chars=(e, r), prop="box", events=("hide",), lines=(
                L(e, "I will put my {obj} in this tin box."),
                L(e, "One day it will belong to {H}, my {grandchild}.", True),
                L(r, "Your secret is safe with me, {E}."))),
            S("close", "Flashback in sepia. Close-up of {E} speaking.", chars=(e,), music="under",
              events=("hide",), lines=(
                L(e, "Promise me that you will never take it."),
                L(r, "I promise, {E}."))),
        ), flashback=True),
        Scene("return", "inn", "morning", (
            S("close", "Close-up of {R} holding out the {obj}.", chars=(r,), prop="treasure",
              events=("return",), lines=(
                L(r, "I broke my promise. Here is the {obj}."),
                L(h, "Thank you for telling me the truth."))),
            S("object", "Close-up of the {obj} in the palm of a hand.", prop="treasure", hold=2.5,
              events=("return",)),
        )),
        Scene("home", "home", "evening", (
            S("two", "Evening in {home}. {H} puts the {obj} on a shelf while {F} watches.", chars=(h, f),
              music="under", events=("home",), lines=(
                L(f, "So the {obj} is home at last.", True),
                L(h, "Yes. My {E_rel} would be happy today."))),
            S("sign", "Evening. A small sign on the door of {home} reads 'CLOSED'.", text=("CLOSED",), hold=2.5,
              music="solo", events=("home",)),
            S("card", "End card: the words 'THE END' in dark letters on cream paper.", text=("THE END",),
              hold=2.5, music="solo"),
        )),
    ]


# the core plot's events (key -> description template): the scenes' shots tag them by key
EVENTS = {
    "letter": "{F} brings {H} a letter",
    "read": "{H} reads the letter from {E}: the {obj} is {spot} of {hideout}",
    "news": "{H} and {F} read in the newspaper at {town} that {hideout} will be torn down on {day}",
    "plan": "{R} reads the news at {inn} and tells {C} that {R_he} will go to {hideout} first",
    "walk": "{H} and {F} walk to {hideout} in the evening",
    "search": "{H} and {F} search {hideout} at night",
    "empty": "{H} and {F} find the tin box empty",
    "clue": "{F} finds the {clue} of {R} at {hideout}",
    "confront": "{H} confronts {R} at {inn} and {R} admits taking the {obj}",
    "recall": "{R} says that years ago {E} showed {R_him} where the {obj} was",
    "hide": "Years earlier, {E} puts the {obj} {spot} of {hideout} while {R} watches",
    "return": "{R} gives the {obj} back to {H}",
    "home": "{H} brings the {obj} home to {home}",
}
# (src event, dst event, type): the plot's NEST-style relations
RELATIONS = (
    ("letter", "read", "causal"), ("read", "walk", "causal"), ("walk", "search", "causal"),
    ("search", "clue", "causal"), ("clue", "confront", "causal"), ("confront", "recall", "causal"),
    ("confront", "return", "causal"), ("return", "home", "causal"), ("plan", "empty", "causal"),
    ("news", "walk", "precondition"), ("hide", "plan", "precondition"),
    ("search", "empty", "hierarchical"), ("search", "clue", "hierarchical"),
    ("news", "plan", "overlap"), ("recall", "hide", "coreference"), ("read", "hide", "coreference"),
    ("hide", "recall", "flashback"), ("hide", "letter", "before"), ("empty", "clue", "before"),
    ("return", "confront", "after"), ("home", "hide", "after"),
)


# --- filler scenes for long films -----------------------------------------------------------------

HOME_TALK = (
    ("Is it cold outside today?", "Yes. Take your coat with you."),
    ("Did you sleep well last night?", "Not really. The wind was very loud."),
    ("Would you like a cup of tea?", "Yes, please. With a little milk."),
    ("What time is it now?", "It is almost {hour} o'clock."),
    ("How many {ware} did we sell today?", "We sold {num} this morning."),
    ("Can you help me with these boxes?", "Of course. Where do they go?"),
    ("The shop is very quiet today.", "People stay at home when it rains."),
    ("Did you see the new shop on the corner?", "Yes. They sell shoes and hats."),
    ("I need to buy some apples at {town}.", "I will come with you later."),
    ("Your {E_rel} loved this time of year.", "Yes. {E_He} liked the long evenings."),
    ("Do you remember the summer by the sea?", "I do. We played on the beach all day."),
    ("The clock on the wall is slow again.", "I will fix it tomorrow morning."),
    ("Shall we close early tonight?", "Yes. I am very tired."),
    ("My sister is coming to visit on {day2}.", "That is good news. Say hello from me."),
    ("The radio said it will snow next week.", "Then we need more wood for the fire."),
    ("Where did you put the keys?", "They are on the table by the door."),
    ("This soup is very good.", "Thank you. It was my mother's recipe."),
    ("The bus was late again this morning.", "It is always late on {day2}."),
    ("We need to paint the front door.", "Let us do it in the spring."),
    ("A lady asked about you today.", "Did she leave her name?"),
)
INN_TALK = (
    ("Would you like some breakfast?", "Just coffee, thank you."),
    ("How long will you stay with us?", "Only a few more days."),
    ("Is your room warm enough?", "Yes. It is very comfortable."),
    ("Many guests came in today.", "The town is busy this week."),
    ("Can I have an extra pillow?", "Of course. I will bring one up."),
    ("Do you know a good place to eat?", "Try the small restaurant by the river."),
    ("The train to the city leaves at {hour}.", "Thank you. I will remember that."),
    ("Did anyone call for me?", "No. Nobody called today."),
    ("Your room is number {num}.", "Thank you. I will go up now."),
    ("It is raining again.", "You can borrow an umbrella from the desk."),
    ("The dinner starts at {hour} tonight.", "Good. I am very hungry."),
    ("Is the shop across the street open?", "It opens at {hour} in the morning."),
)
WORDS = {"hour": ("six", "seven", "eight", "nine", "ten"), "num": ("ten", "twelve", "twenty", "thirty", "forty"),
         "day2": DAYS}


def filler_scene(script: Script, rng: random.Random, n: int, time: str, after: str = "") -> tuple[Scene, str]:
    """One everyday scene that does not touch the plot; returns it and its event description.

    `after` is the kind of the scene before it (home, inn, walk), which is not repeated."""
    v = _vars(script.cast, script.places, script.facts)
    kind = rng.choice([k for k in ("home", "home", "inn", "walk") if k != after])
    key = f"filler{n:03d}"
    if kind == "walk":
        street = rng.choice(STREETS)
        who = rng.choice(("hero", "friend"))
        name = script.cast[who].name
        desc = f"{name} walks along {street.title()}"
        walk: tuple[Shot, ...] = (Shot("sign", f"A street sign reads '{street}'.", text=(street,), hold=3.5, music="solo",
                      events=(key,)),
                 Shot("wide", f"{name} walks alone along {street.title()} past small houses.", chars=(who,),
                      hold=5.0 + rng.random() * 4, music="solo", effect="steps", events=(key,)))
        return Scene(key, "town", time, walk, core=False, kind="walk"), desc
    a, b = ("hero", "friend") if kind == "home" else ("clerk", "rival")
    talk = HOME_TALK if kind == "home" else INN_TALK
    place = script.places[kind]
    pairs = rng.sample(talk, rng.randint(2, 4))
    lines: list[Line] = []
    named = False
    for i, (q, ans) in enumerate(pairs):
        ask, reply = (a, b) if rng.random() < 0.5 else (b, a)
        slots = v | {k: rng.choice(w) for k, w in WORDS.items()}
        question = q.format(**slots)
        # People call each other by name, so who speaks is knowable; not in a scene's first line,
        # whose line before is the last one of another scene (someone else, a moment earlier).
        if i > 0 and not named and question.endswith("?"):
            question, named = f"{question[:-1]}, {script.cast[reply].name}?", True
        lines += [Line(ask, question), Line(reply, ans.format(**slots))]
    na, nb = script.cast[a].name, script.cast[b].name
    shots = [Shot("two", f"{na} and {nb} talk inside {place.name}.", chars=(a, b), lines=tuple(lines[:2]),
                  music="under" if rng.random() < 0.3 else "", events=(key,))]
    for i in range(2, len(lines), 2):
        who = lines[i].speaker
        shots.append(Shot("close", f"Close-up of {script.cast[who].name} talking.", chars=(who,),
                          lines=tuple(lines[i:i + 2]), events=(key,)))
    return Scene(key, kind, time, tuple(shots), core=False, kind=kind), f"{na} and {nb} chat at {place.name}"
