"""The MF² release's own protocol, read from the user's copy of the release (deep-spin/MF2) as data.

MF²'s published numbers come from its own prompt templates and its own reply parser. To run the
official pairs as released, moviemem reads both from the release folder at run time and never
ships their text: the template modules (`templates/<modality>.py`) and `templates/prompt_utils.py`
(the films' titles) are parsed with `ast` as literal data, never imported or executed, and the
parser's rules (each strategy's regular expressions, in the order its branch of
`parse_model_output` tries them) are read from `parse_model_outputs.py` the same way. A template is
filled as the release's inference script fills it (`str.format` with the values its modality takes;
the system prompt its open-model script names, `default`), and each file read is recorded by its
SHA-256 (and the release's git commit where the folder is a checkout), so a run says what it ran.
"""

from __future__ import annotations

import ast
import math
import re
import string
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..foundation.digests import file_sha256
from ..foundation.errors import MovieMemError
from ..foundation.limits import MAX_TRACK_BYTES, read_capped
from ..foundation.pysource import PROMPT_UTILS, movies_dict
from ..foundation.pysource import assignments as _assignments
from ..foundation.pysource import read_module as _module

# the fields each modality's template is filled with (the release's prompt builder passes exactly these)
MODALITIES: dict[str, frozenset[str]] = {
    "statement_only": frozenset({"claim", "movie_title"}),
    "transcripts_only": frozenset({"claim", "transcripts"}),
    "synopsis_only": frozenset({"claim", "synopsis"}),
}
USER_TEMPLATES = "USER_PROMPTS_TEMPLATE_DICT"
SYSTEM_TEMPLATES = "SYSTEM_PROMPTS_TEMPLATE_DICT"
SYSTEM_NAME = "default"  # the system prompt the release's open-model inference script asks for
PARSER_FILE = "parse_model_outputs.py"
PARSER_FUNCTION = "parse_model_output"
TRANSCRIPT_FILE = "utils.py"  # holds the transcript rule `srt_text` follows; recorded by digest
TRANSCRIPT_FUNCTION = "extract_srt_text"
VERDICTS = ("TRUE", "FALSE")


@dataclass(frozen=True)
class Rule:
    """One step of a parsing strategy: a regular expression searched in the reply (lower-cased first
    where the release lower-cases it), its first match or its last; group 1, stripped and upper-cased,
    is the verdict when it is TRUE or FALSE."""

    pattern: str
    flags: int = 0
    lowered: bool = False
    last: bool = False

    def read(self, text: str) -> str | None:
        target = text.lower() if self.lowered else text
        if self.last:
            matches = list(re.finditer(self.pattern, target, self.flags))
            m = matches[-1] if matches else None
        else:
            m = re.search(self.pattern, target, self.flags)
        if m is None:
            return None
        verdict = m.group(1).strip().upper()
        return verdict if verdict in VERDICTS else None


@dataclass(frozen=True)
class Template:
    """A modality's user template in one style, and the system prompt, as the release writes them."""

    modality: str
    style: str
    name: str  # the template's variable name in the module
    text: str
    system: str

    def fill(self, **values: str) -> str:
        """The user prompt, filled as the release fills it (`str.format`, only this modality's fields)."""
        return self.text.format(**{k: values[k] for k in MODALITIES[self.modality]})


@dataclass(frozen=True)
class Release:
    """What moviemem reads from a copy of the MF² release: titles, templates by modality and style,
    parsing strategies, and the digests of the files read."""

    root: Path
    commit: str | None
    titles: Mapping[int, str]  # film number -> "Title (Year)", as the statement-only prompt names a film
    templates: Mapping[str, Mapping[str, Template]]  # modality -> style -> template
    parsers: Mapping[str, tuple[Rule, ...]]
    digests: Mapping[str, str] = field(default_factory=dict)  # file (relative) -> sha256

    def template(self, modality: str, style: str) -> Template:
        if modality not in self.templates:
            raise MovieMemError(f"{self.root} has no templates/{modality}.py: the release's {modality} modality "
                                f"cannot be run (modalities here: {', '.join(sorted(self.templates)) or 'none'})")
        styles = self.templates[modality]
        if style not in styles:
            raise MovieMemError(f"templates/{modality}.py of {self.root} has no style {style!r} in {USER_TEMPLATES} "
                                f"(styles: {', '.join(styles)})")
        return styles[style]

    def parser(self, name: str) -> tuple[Rule, ...]:
        if name not in self.parsers:
            raise MovieMemError(f"{PARSER_FILE} of {self.root} has no parsing strategy {name!r} "
                                f"(strategies: {', '.join(self.parsers)})")
        return self.parsers[name]

    def describe(self, modality: str, style: str, parser: str) -> dict[str, Any]:
        """What a run header records of a protocol: the template, style, parser and the release's identity."""
        t = self.template(modality, style)
        self.parser(parser)
        return {"release": str(self.root), "commit": self.commit, "modality": modality, "style": style,
                "template": f"templates/{modality}.py:{t.name}", "system": f"{SYSTEM_TEMPLATES}[{SYSTEM_NAME!r}]",
                "parser": parser, "files": dict(self.digests)}


def read_verdict(rules: tuple[Rule, ...], reply: str) -> str | None:
    """TRUE, FALSE or None (unparseable): each rule in turn, as the release's strategy tries them."""
    if not reply:
        return None
    for rule in rules:
        verdict = rule.read(reply)
        if verdict is not None:
            return verdict
    return None


def p_true(alternatives: Mapping[str, float]) -> float | None:
    """P(TRUE) against P(FALSE) from a reply's first-token alternatives (log-probabilities): each
    token that opens "true" or "false" (any case, spaces aside) counts for that verdict; None when
    neither is among them (a reply that opens with a tag or a sentence)."""
    mass = {"true": 0.0, "false": 0.0}
    for token, logprob in alternatives.items():
        word = token.strip().lower()
        for verdict in mass:
            if word and verdict.startswith(word):
                mass[verdict] += math.exp(logprob)
    total = mass["true"] + mass["false"]
    return mass["true"] / total if total > 0 else None


def release_text(path: Path, cap: int, what: str) -> str:
    """A text file of the release as the release's scripts read it (UTF-8, universal newlines), read
    under its cap (foundation/limits.py); a missing, oversized or undecodable one is one line."""
    if not path.is_file():
        raise MovieMemError(f"cannot read the {what} {path}: no such file")
    try:
        text = read_capped(path, cap, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MovieMemError(f"cannot read the {what} {path}: {exc}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode reads it


def srt_text(path: Path) -> str:
    """A transcript as the release's `transcripts_only` prompt holds it: every line of the SRT file
    stripped, without blank lines, cue numbers and timing lines, joined by single spaces."""
    raw = release_text(path, MAX_TRACK_BYTES, "transcript")
    lines = (line.strip() for line in raw.split("\n"))  # newlines are \n here, as a file's lines are
    return " ".join(line for line in lines if line and not line.isdigit() and "-->" not in line)


# ----------------------------------------------------------------------------- reading the release as data


def _text(value: ast.expr | None, names: dict[str, ast.expr], where: str) -> str:
    """A string constant, or a name bound to one at the module's top level."""
    if isinstance(value, ast.Name):
        value = names.get(value.id)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    raise MovieMemError(f"{where} is not a string constant; moviemem reads the release's templates as data only")


def _table(names: dict[str, ast.expr], key: str, where: str) -> dict[str, tuple[str, str]]:
    """A dict of templates: key -> (the variable name it refers to, the text)."""
    node = names.get(key)
    if not isinstance(node, ast.Dict):
        raise MovieMemError(f"{where} has no {key} dictionary; it is not a template module of the MF² release")
    out: dict[str, tuple[str, str]] = {}
    for k, v in zip(node.keys, node.values):
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            name = v.id if isinstance(v, ast.Name) else k.value
            out[k.value] = (name, _text(v, names, f"{where}: {key}[{k.value!r}]"))
    return out


def _fields(text: str, where: str) -> set[str]:
    try:
        return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise MovieMemError(f"{where} is not a format string ({exc})") from None


def _templates(root: Path, modality: str, digests: dict[str, str]) -> dict[str, Template] | None:
    path = root / "templates" / f"{modality}.py"
    if not path.is_file():
        return None
    where = f"{path}"
    names = _assignments(_module(path, root))
    users = _table(names, USER_TEMPLATES, where)
    systems = _table(names, SYSTEM_TEMPLATES, where)
    if SYSTEM_NAME not in systems:
        raise MovieMemError(f"{where}: {SYSTEM_TEMPLATES} has no {SYSTEM_NAME!r} system prompt")
    expected = MODALITIES[modality]
    out: dict[str, Template] = {}
    for style, (name, text) in users.items():
        got = _fields(text, f"{where}: {name}")
        if got != expected:
            raise MovieMemError(f"{where}: template {name} has the fields {{{', '.join(sorted(got))}}}, not the "
                                f"{{{', '.join(sorted(expected))}}} the release fills a {modality} prompt with")
        out[style] = Template(modality, style, name, text, systems[SYSTEM_NAME][1])
    digests[f"templates/{modality}.py"] = file_sha256(path)
    return out


def _titles(root: Path, digests: dict[str, str]) -> dict[int, str]:
    out = {number: f"{film['title']} ({film['year']})"  # as the release names a film in its prompt
           for number, film in movies_dict(root).items()}
    digests[str(PROMPT_UTILS)] = file_sha256(root / PROMPT_UTILS)
    return out


def _flags(node: ast.expr) -> int:
    """`re.IGNORECASE | re.DOTALL` and the like, as the re module's flag value (0 for anything else)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        flag = getattr(re, node.attr, 0)
        return int(flag) if isinstance(flag, re.RegexFlag) else 0
    return 0


def _rules(branch: list[ast.stmt]) -> tuple[Rule, ...]:
    """The regex calls of one strategy's branch, in order: `re.search` (first match) or `re.finditer`
    (last match), the pattern a string literal or a name bound to one in the branch, the reply as
    given or `.lower()`-ed, and the flags passed."""
    local: dict[str, ast.expr] = {}
    rules: list[Rule] = []
    for node in (n for stmt in branch for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local[node.targets[0].id] = node.value
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.func.attr in ("search", "finditer") and len(node.args) >= 2):
            continue
        pattern = _text(node.args[0], local, f"a pattern of {PARSER_FUNCTION}")
        target = node.args[1]
        lowered = (isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute)
                   and target.func.attr == "lower")
        flag_nodes = node.args[2:] + [k.value for k in node.keywords if k.arg == "flags"]
        flags = 0
        for f in flag_nodes:
            flags |= _flags(f)
        rules.append(Rule(pattern, flags, lowered, last=node.func.attr == "finditer"))
    return tuple(rules)


def _strategy(test: ast.expr) -> str | None:
    """'X' for a branch guarded by `strategy == "X"`."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant) and isinstance(test.comparators[0].value, str)):
        return test.comparators[0].value
    return None


def _parsers(root: Path, digests: dict[str, str]) -> dict[str, tuple[Rule, ...]]:
    path = root / PARSER_FILE
    tree = _module(path, root)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == PARSER_FUNCTION), None)
    if fn is None:
        raise MovieMemError(f"{path} has no {PARSER_FUNCTION} function; it is not the MF² release's parser")
    out: dict[str, tuple[Rule, ...]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.If):
            name = _strategy(node.test)
            if name is not None and name not in out:
                rules = _rules(node.body)
                if rules:
                    out[name] = rules
    if not out:
        raise MovieMemError(f"{path}: {PARSER_FUNCTION} names no parsing strategy with a regular expression")
    digests[PARSER_FILE] = file_sha256(path)
    return out


def _commit(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        got = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return got.stdout.strip() or None if got.returncode == 0 else None


def _stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """The files a release is read from, with their sizes and times: a changed file is read again."""
    files = [root / PARSER_FILE, root / TRANSCRIPT_FILE, *sorted((root / "templates").glob("*.py"))]
    out = []
    for p in files:
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((str(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


def load_release(root: str | Path) -> Release:
    """The MF² release in `root`, read as data; a folder that is not the release is a one-line error."""
    path = Path(root).expanduser()
    if not path.is_dir():
        raise MovieMemError(f"{root} is not a folder (the MF² release: templates/, {PARSER_FILE}, {TRANSCRIPT_FILE})")
    path = path.resolve()
    if not (path / "templates").is_dir():
        raise MovieMemError(f"{path} is not the MF² release: no templates/ folder")
    return _load(path, _stamp(path))


@lru_cache(maxsize=8)
def _load(root: Path, stamp: tuple[tuple[str, int, int], ...]) -> Release:
    digests: dict[str, str] = {}
    titles = _titles(root, digests)
    parsers = _parsers(root, digests)
    tree = _module(root / TRANSCRIPT_FILE, root)
    if not any(isinstance(n, ast.FunctionDef) and n.name == TRANSCRIPT_FUNCTION for n in tree.body):
        raise MovieMemError(f"{root / TRANSCRIPT_FILE} has no {TRANSCRIPT_FUNCTION}: it is not the MF² release's")
    digests[TRANSCRIPT_FILE] = file_sha256(root / TRANSCRIPT_FILE)
    templates = {m: t for m in MODALITIES if (t := _templates(root, m, digests)) is not None}
    if not templates:
        raise MovieMemError(f"{root} is not the MF² release: no templates/statement_only.py, transcripts_only.py "
                            "or synopsis_only.py")
    return Release(root, _commit(root), titles, templates, parsers, dict(sorted(digests.items())))
