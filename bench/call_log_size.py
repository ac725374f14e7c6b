"""Size on disk of the calls a subtitles run keeps as sent (issue 61), without calling a model.

    python bench/call_log_size.py ../shared/datasets/mf2/transcripts [--pairs 16]

For each film's subtitles (parsed by the importer's own reader) it builds the `subtitles` policy's prompt as
the policy does (the compact transcript, then the statement) for `--pairs` claim pairs a film (two calls a pair;
the official MF² release averages 868 / 54 = 16 pairs a film) and writes them through the run folder's call
writer. The statements are placeholders of an official statement's typical length (no benchmark item is read).
Prints the films, calls, the transcripts' characters, the call log's bytes (texts and call lines) and the bytes
a call would take if each prompt were stored whole.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from moviemem.agents.calls import body, compact_text
from moviemem.agents.prompts import SUBTITLES
from moviemem.agents.types import Question, SentCall
from moviemem.backbones import Reply, Request, system, user
from moviemem.eval.log import CALL_LINES, CALL_TEXTS, CALLS, CallWriter
from moviemem.ingest.texttracks import load_track
from moviemem.retrievers.types import Evidence

STATEMENT = "The man who runs the cinema hides the parcel in the back room before the police arrive at the door."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transcripts", type=Path)
    ap.add_argument("--pairs", type=int, default=16)
    args = ap.parse_args()
    films = sorted(args.transcripts.glob("*.srt"))
    whole = chars = calls = 0
    with tempfile.TemporaryDirectory() as tmp:
        writer = CallWriter(Path(tmp))
        for n, path in enumerate(films):
            cues = load_track(path).cues
            lines = [Evidence("utterance", path.stem, c.start, c.end, c.text) for c in cues]
            context = compact_text(lines)
            chars += len(context)
            for k in range(args.pairs):
                for side in ("true", "false"):
                    q = Question(f"{STATEMENT} ({side} {k})", kind="claim")
                    messages = [system(SUBTITLES.system), user(body(SUBTITLES, q, context=context))]
                    request = Request.build(messages, max_tokens=1, logprobs=5)
                    reply = Reply(text="TRUE", logprobs=[{"TRUE": -0.1, "FALSE": -2.4, "True": -5.0}])
                    writer.write(f"subtitles\tlocal\tfilm{n}-p{k}", side, [SentCall("subtitles", "2", request, reply)])
                    whole += sum(len(m.text) for m in messages)
                    calls += 1
        writer.close()
        texts = (Path(tmp) / CALLS / CALL_TEXTS).stat().st_size
        lines_b = (Path(tmp) / CALLS / CALL_LINES).stat().st_size
    print(f"films {len(films)}, calls {calls} ({args.pairs} pairs a film), transcripts {chars / 1e6:.1f} M characters")
    print(f"call log: texts {texts / 1e6:.1f} MB + call lines {lines_b / 1e6:.1f} MB = {(texts + lines_b) / 1e6:.1f} MB; "
          f"each prompt whole: {whole / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
