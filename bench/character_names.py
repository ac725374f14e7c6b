"""Characters of text films against the people their synopses name (issue 48).

    python bench/character_names.py [--mf2 ../shared/datasets/mf2] [--library DIR] [--json]

Imports the ten MF² dev films (mf2-5, 6, 8, 11, 22, 29, 35, 48, 51, 54) from their subtitles as
text films (no voices, no faces: names come from the dialogue alone), then compares the character
registry (`moviemem characters`) with the people each film's synopsis names:
- precision: share of the characters listed whose name (any of its words) matches a person of the
  synopsis; a minor character the synopsis leaves out counts as wrong;
- recall: share of the synopsis's people matched by a character listed.
Two words match when equal, within edit ratio 80 (Vicki ~ Vickie) or sharing a 5-letter prefix
(Charlie ~ Charles); titles (Mr., Mrs., Miss) are left out. It also checks that MCP film_overview
lists the same characters as the CLI.

The people of each synopsis were listed by hand from ../shared/datasets/mf2/synopsis/N.synopsis
(actors' names in parentheses and animals left out), with the subtitles' own spelling of a name
where the two differ (the synopsis's "Zosh" is "Sash" in film 22's subtitles). The list is for
measuring only: the naming rules (characters/names.py) are general and never read it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from mf2_films import import_mf2_films  # beside this script
from rapidfuzz import fuzz

ROOT = Path(__file__).resolve().parent.parent
PEOPLE: dict[str, list[list[str]]] = {
    "5": [["Ellen", "Benson"], ["Pidge"], ["Pop", "Benson"], ["John", "Baron"], ["Tod", "Shaw"], ["Dan", "Carney"],
          ["Jud"]],
    "6": [["Karl", "Verloc"], ["Verloc"], ["Ted", "Spencer"], ["Stevie"]],
    "8": [["Harry", "Wheeler"], ["Lona", "McLane"], ["Paul", "Sheridan"], ["Karl", "Eckstrom"], ["Rick", "McAllister"],
          ["Paddy", "Dolan"], ["Ann", "Stewart"]],
    "11": [["Chris", "Christopher", "Cross"], ["Hogarth"], ["Kitty", "Katherine", "March"], ["Johnny"], ["Adele"],
           ["Damon", "Janeway"], ["Higgins"]],
    "22": [["Frankie", "Machine"], ["Sparrow"], ["Schwiefka", "Shrika"], ["Louie", "Louis"], ["Zosh", "Sash"],
           ["Molly"], ["Bednar", "Bedner"]],
    "29": [["Big", "Tim", "Foster"], ["Joe", "Rolfe"], ["Peter", "Harris"], ["Boyd", "Kane"], ["Tony", "Romano"],
           ["Andrews"], ["Helen"]],
    "35": [["Pete", "Morgan"], ["Ellen"], ["Meg"], ["Nath", "Storm"], ["Tibby"], ["Teller"], ["Jeannie"]],
    "48": [["Ellen", "Creed"], ["Leonora", "Fiske"], ["Albert", "Feather"], ["Lucy"]],
    "51": [["Maxwell", "Brock"], ["Walter", "Paisley"], ["Carla", "Clara"], ["Surchart"], ["Leonard"], ["Will"],
           ["Naolia"], ["Lou", "Raby"], ["Alice"]],
    "54": [["Charles", "Wills"], ["Marion", "Ellswirth"], ["Claude", "Matine"], ["Helen"], ["James", "Ellswirth"],
           ["Vickie"], ["Paul", "Lane"]],
}
TITLES = {"mr", "mrs", "miss", "ms", "dr"}


def same_word(a: str, b: str) -> bool:
    a, b = a.lower().strip("."), b.lower().strip(".")
    return a == b or fuzz.ratio(a, b) >= 80 or len(os.path.commonprefix([a, b])) >= 5


def words(names: list[str]) -> list[str]:
    return [w for n in names for w in n.split() if w.lower().strip(".") not in TITLES]


@dataclass
class Score:
    listed: int
    right: int
    people: int
    found: int
    wrong: list[str]
    missed: list[str]

    @property
    def precision(self) -> float:
        return self.right / max(1, self.listed)

    @property
    def recall(self) -> float:
        return self.found / max(1, self.people)


def score(listed: list[list[str]], people: list[list[str]]) -> Score:
    """Precision and recall of the characters `listed` (each its names) against the synopsis's people."""
    def matches(names: list[str], person: list[str]) -> bool:
        return any(same_word(w, p) for w in words(names) for p in person)

    right = [names for names in listed if any(matches(names, p) for p in people)]
    found = [p for p in people if any(matches(names, p) for names in listed)]
    return Score(len(listed), len(right), len(people), len(found), [names[0] for names in listed if names not in right],
                 [p[0] for p in people if p not in found])


def import_films(lib, mf2: Path) -> None:
    """The ten films, imported once."""
    secs = import_mf2_films(lib, mf2, [f"mf2-{n}" for n in PEOPLE])
    if secs is not None:
        print(f"imported the films in {secs:.0f} s")

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mf2", type=Path, default=ROOT.parent / "shared" / "datasets" / "mf2")
    ap.add_argument("--library", type=Path, default=None, help="library to import into (default: a temporary one)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not (args.mf2 / "transcripts").is_dir():
        raise SystemExit(f"error: {args.mf2} is not an MF² release (no transcripts/)")

    from moviemem import Library
    from moviemem.foundation.config import get_settings
    from moviemem.serve.film_tools import film_overview

    lib_dir = args.library or Path(tempfile.mkdtemp(prefix="moviemem-characters-"))
    lib = Library(lib_dir, get_settings(library=lib_dir))
    import_films(lib, args.mf2)
    rows = {}
    for n, people in PEOPLE.items():
        film = lib.film(f"mf2-{n}")
        chars = sorted(film.characters(), key=lambda c: (c.first_s, c.char_id))
        overview = [c["name"] for c in film_overview(lib, film.film_id)["characters"]]
        if overview != [c.name for c in chars]:
            raise SystemExit(f"error: film_overview lists {overview} for {film.film_id}, the CLI {[c.name for c in chars]}")
        rows[n] = score([list(c.names) or [c.name] for c in chars], people)
    scores = list(rows.values())
    summary = {"micro_precision": round(sum(r.right for r in scores) / max(1, sum(r.listed for r in scores)), 3),
               "micro_recall": round(sum(r.found for r in scores) / sum(r.people for r in scores), 3),
               "macro_precision": round(sum(r.precision for r in scores) / len(scores), 3),
               "macro_recall": round(sum(r.recall for r in scores) / len(scores), 3)}
    if args.json:
        print(json.dumps({"films": {n: asdict(r) for n, r in rows.items()}, **summary}))
        return
    print(f"{'film':8s} {'listed':>6s} {'right':>5s} {'prec':>5s} {'people':>6s} {'found':>5s} {'recall':>6s}  wrong / missed")
    for n, r in rows.items():
        print(f"mf2-{n:4s} {r.listed:>6} {r.right:>5} {r.precision:5.2f} {r.people:>6} {r.found:>5} {r.recall:6.2f}  "
              f"{', '.join(r.wrong) or '-'} / {', '.join(r.missed) or '-'}")
    print(f"precision {summary['micro_precision']:.2f} (mean over films {summary['macro_precision']:.2f}), "
          f"recall {summary['micro_recall']:.2f} (mean over films {summary['macro_recall']:.2f}); "
          "film_overview agrees with the CLI on every film")


if __name__ == "__main__":
    main()
