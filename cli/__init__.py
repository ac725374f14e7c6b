"""The `moviemem` command. Errors print one line on stderr and exit 2; `--json` prints one
JSON object on stdout (progress and warnings go to stderr)."""


from __future__ import annotations

import sys

import typer
import typer._click.exceptions as click_errors  # typer 0.29 vendors click: the `click` package's classes never match

from ..foundation.errors import MovieMemError
from . import (  # noqa: F401 - each registers its commands on the app
    answers,
    bench,
    cache,
    calls,
    characters,
    demo,
    doctor,
    films,
    models,
    scenes,
)
from .common import app, err

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    try:
        code = app(args=argv, standalone_mode=False, prog_name="moviemem")
        if isinstance(code, int) and code:  # typer.Exit(N) comes back as N when click does not exit itself
            sys.exit(code)
    except MovieMemError as exc:
        one_line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        err.print(f"error: {one_line}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()  # the help text
        sys.exit(2)
    except click_errors.ClickException as exc:  # a usage error: unknown option, missing argument, bad value
        command = exc.ctx.command_path if isinstance(exc, click_errors.UsageError) and exc.ctx else "moviemem"
        err.print(f"error: {exc.format_message()} (see `{command} --help`)", highlight=False, markup=False,
                  soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
