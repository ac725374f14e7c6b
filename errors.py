"""Errors a user can act on: the CLI prints their message on one line and exits 2."""


class MovieMemError(Exception):
    """Bad input or an unmet precondition; the message is the whole explanation."""


class FilmBusyError(MovieMemError):
    """Another process holds the film's ingest lock."""
