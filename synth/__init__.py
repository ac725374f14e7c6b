"""The synthetic film: a seeded script rendered to video, sound and subtitles, with its truth
and benchmark files. It serves the tests, the demo and the benchmarks, and imports nothing
from moviemem but errors and the film-id check, so any layer's tests can use it."""

from .film import MAX_MINUTES, MIN_MINUTES, documents, plan, render

__all__ = ["MAX_MINUTES", "MIN_MINUTES", "documents", "plan", "render"]
