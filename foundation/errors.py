"""Errors a user can act on: the CLI prints their message on one line and exits 2."""


class MovieMemError(Exception):
    """Bad input or an unmet precondition; the message is the whole explanation."""


class FilmBusyError(MovieMemError):
    """Another process holds the film's ingest lock."""


class UnwritableError(MovieMemError, OSError):
    """A file could not be written where it was asked for. An OSError too, so code that tolerates
    an unwritable folder (a read-only library's caches) still catches it as one."""


class UnreachableError(MovieMemError):
    """A server moviemem talks to (a Letta server) did not answer: not the input's fault, so a
    benchmark records the item as a transport fault, which a rerun asks again."""


class SettingsInvalidError(MovieMemError):
    """A MOVIEMEM_* variable or a moviemem.toml value that no setting takes."""


class BackboneCrashed(MovieMemError):
    """A local model's process died (a native crash) or hung: every later call would too, so a bench
    stops here, keeping what it finished, and the message points at `moviemem doctor`."""
