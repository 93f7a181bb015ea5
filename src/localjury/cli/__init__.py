"""The ``localjury`` command. Thin: parse options, call the library, print.

One module per group of commands (:mod:`.run`, :mod:`.show`, :mod:`.verify`, :mod:`.bench`, :mod:`.align`,
:mod:`.models`, :mod:`.doctor`, :mod:`.review`, :mod:`.traces`);
:mod:`._common` holds the app and what they share."""

from __future__ import annotations

import errno
import sys

from localjury._files import is_symlink_loop
from localjury.cli import align, bench, doctor, models, review, run, show, traces, verify  # noqa: F401  (each registers its commands on the app)
from localjury.cli._common import FLAGS, _report, _state, app, cli_words
from localjury.errors import ConfigError, LocaljuryError

__all__ = ["FLAGS", "app", "cli_words", "main"]


def main() -> None:
    """Entry point: run the app; print any error as one line (a traceback only with --debug).

    Exit codes: 2 for usage and configuration errors, 1 for other errors, 130 when
    interrupted. An error or Ctrl-C in the middle of a run also says what the judgment
    store kept and how to resume.
    """
    try:
        app()
    except LocaljuryError as exc:
        if _state["debug"]:
            raise
        _report(exc, "error: ", str(exc))
        sys.exit(2 if isinstance(exc, ConfigError) else 1)
    except Exception as exc:
        if _state["debug"]:
            raise
        _unexpected(exc)


#: What to do about an error of the operating system, by its errno.
_OS_FIXES = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space (a disk quota)",
    errno.EACCES: "fix the permissions",
    errno.EPERM: "fix the permissions",
    errno.EROFS: "write to a file system that is not read-only",
}


def _unexpected(exc: Exception) -> None:
    """Print an error localjury did not raise as one line and exit: 2 for a path that leads
    into a loop of symbolic links (one the options' checks could not see, such as the summary
    beside ``--out``), 1 for any other."""
    if is_symlink_loop(exc):
        where = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) else str(exc)
        _report(
            exc,
            "error: ",
            f"a path leads into a loop of symbolic links ({where}){_origin(exc)}; fix or remove the link",
        )
        sys.exit(2)
    if isinstance(exc, OSError):
        # The operating system refused a read or a write (a full disk, permissions, a file
        # that vanished): name the file, what it said, and the fix its errno points to.
        where = f" ({exc.filename})" if exc.filename else ""
        fix = _OS_FIXES.get(exc.errno or 0, "fix that")
        _report(exc, "error: ", f"{exc.strerror or exc}{where}{_origin(exc)}; {fix} and run the same command again")
        sys.exit(1)
    # Not an error localjury raises on purpose: one line saying what failed and where.
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    _report(exc, "error: ", f"unexpected {what}{_origin(exc)}; run again with --debug for the traceback")
    sys.exit(1)


def _origin(exc: BaseException) -> str:
    """`` (in module.function)``: the innermost frame of localjury's own code."""
    tb = exc.__traceback__
    found = ""
    while tb is not None:
        frame = tb.tb_frame
        module = frame.f_globals.get("__name__", "")
        if module.startswith("localjury"):
            found = f" (in {module}.{frame.f_code.co_name})"
        tb = tb.tb_next
    return found
