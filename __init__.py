"""moviemem: a queryable memory of a full-length film, and agent policies that answer from it."""

__version__ = "0.1.0"

from .errors import MovieMemError  # noqa: E402
from .library import Film, Library  # noqa: E402

__all__ = ["Film", "Library", "MovieMemError", "__version__"]
