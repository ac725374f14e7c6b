"""HTML for a notebook (issue 57): an answer, the evidence it was shown, a film's overview.

Jupyter calls `_repr_html_` on the last value of a cell; Answer, EvidenceList and Film define it with these
functions. Every text is data (a subtitle, a model's reply, a title) and is escaped; a still is embedded as a
small JPEG (data URI), so the notebook keeps it without the library beside it.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..foundation.thumbs import jpeg_thumbnail
from ..foundation.timefmt import hms
from ..retrievers.types import Evidence

STILL_WIDTH = 160
MAX_ROWS = 40  # evidence rows shown; the rest are counted
MAX_TEXT = 400  # characters of one piece of evidence shown


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def still(path: str | Path | None, root: str | Path | None = None) -> str:
    """An <img> of the picture at `path` (relative to `root`, a library, where it is not absolute), or ''."""
    if not path:
        return ""
    p = Path(path) if root is None else Path(root) / path  # an absolute path stays itself
    if not p.is_file():
        return ""
    thumb = jpeg_thumbnail(p, STILL_WIDTH, quality=75)
    if thumb is None:
        return ""
    jpeg, width = thumb
    data = base64.b64encode(jpeg).decode()
    return f'<img src="data:image/jpeg;base64,{data}" width="{width}" alt="still at {esc(p.name)}">'


def evidence_html(evidence: Sequence[Evidence], root: str | Path | None = None) -> str:
    """A table of evidence: time, kind, text, the still where there is one, cited or not."""
    if not evidence:
        return '<p style="color:#777">No evidence from the film was shown.</p>'
    rows = []
    for e in list(evidence)[:MAX_ROWS]:
        text = e.text if len(e.text) <= MAX_TEXT else e.text[:MAX_TEXT] + "…"
        rows.append(f"<tr><td style='white-space:nowrap'>{esc(hms(e.start, tenths=True))}–{esc(hms(e.end, tenths=True))}"
                    f"</td><td>{esc(e.kind)}</td><td>{esc(text)}</td><td>{still(e.frame, root)}</td>"
                    f"<td>{'cited' if e.cited else ''}</td></tr>")
    more = len(evidence) - MAX_ROWS
    return ("<table><tr><th>time</th><th>kind</th><th>text</th><th>still</th><th></th></tr>" + "".join(rows)
            + "</table>" + (f"<p style='color:#777'>and {more} more</p>" if more > 0 else ""))


class EvidenceList(list[Evidence]):
    """A list of evidence that shows itself as a table in a notebook."""

    def _repr_html_(self) -> str:
        return evidence_html(self)


def answer_html(answer: Any) -> str:
    """An Answer: its choice and text, whether it was grounded, its evidence and what it took."""
    u = answer.usage
    if answer.invalid:
        verdict = f"<b style='color:#b00'>invalid</b>: {esc(answer.error or answer.reason or 'no reason given')}"
    else:
        verdict = (f"<b>{esc(answer.choice) if answer.choice is not None else '—'}</b> {esc(answer.text)}"
                   + (f" <span style='color:#777'>(confidence {esc(answer.confidence)})</span>"
                      if answer.confidence is not None else ""))
    grounded = ("<span style='color:#070'>grounded</span>: answered from the film's evidence" if answer.grounded else
                "<span style='color:#b70'>not grounded</span>: shown no evidence from the film, a guess")
    cost = "" if u.cost_usd is None else f", ${u.cost_usd:.4f}"
    replayed = f" ({answer.replayed_calls} replayed from the cache)" if answer.replayed_calls else ""
    return (f"<div class='moviemem-answer'><p>{verdict}</p><p>{grounded}</p>"
            f"<p style='color:#555'>{esc(answer.policy)} / {esc(answer.backbone)}: {answer.calls} model "
            f"call{'' if answer.calls == 1 else 's'}{replayed}, {u.input_tokens:,} input / {u.output_tokens:,} output tokens, "
            f"{u.latency_s:.2f} s{cost}</p>"
            f"<details open><summary>Evidence ({len(answer.evidence)})</summary>{evidence_html(answer.evidence)}</details>"
            "</div>")


def film_html(summary: dict[str, Any], stills: Iterable[str], root: str | Path | None) -> str:
    """A film's overview (FilmMemory.summary): title, length, what its memory holds, its stages, a strip of stills."""
    title = esc(summary.get("title") or summary["film_id"]) + (f" ({esc(summary['year'])})" if summary.get("year") else "")
    counts = ", ".join(f"{n:,} {esc(k)}" for k, n in summary["counts"].items() if n)
    stages = "".join(f"<tr><td>{esc(s['stage'])}</td><td>{esc(s['status'])}</td><td>{esc(s['reason'] or '')}</td></tr>"
                     for s in summary["stages"])
    strip = "".join(still(p, root) for p in stills)
    kind = "video" if summary["has_video"] else "text only (no video)"
    return (f"<div class='moviemem-film'><h3>{title} <code>{esc(summary['film_id'])}</code></h3>"
            f"<p>{esc(hms(summary['duration_s']))}, {kind}; memory: {counts or 'empty'}</p>"
            + (f"<div>{strip}</div>" if strip else "")
            + f"<details><summary>Stages ({len(summary['stages'])})</summary><table>"
              f"<tr><th>stage</th><th>status</th><th>reason</th></tr>{stages}</table></details></div>")
