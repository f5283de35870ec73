"""Errors a user can cause or meet. The CLI turns each into one clear line and an exit code."""

from __future__ import annotations


class EvohpoError(Exception):
    """Base class: a message meant for the user, shown without a traceback."""

    exit_code = 1


class ConfigError(EvohpoError):
    """Bad input: unknown key, wrong type, out-of-range value, unknown env or algo."""

    exit_code = 2


class EnvError(EvohpoError):
    """An environment failed: a worker died, raised, or hung."""

    exit_code = 1


def closest(name: str, known: list[str] | tuple[str, ...], n: int = 3) -> str:
    """' (did you mean: a, b?)' for the closest known names, or '' if nothing is close."""
    import difflib

    hits = difflib.get_close_matches(name, list(known), n=n, cutoff=0.5)
    return f" (did you mean: {', '.join(hits)}?)" if hits else ""


class Interrupted(EvohpoError):
    """Ctrl-C: a checkpoint was written; the message says how to resume."""

    exit_code = 130


class Diverged(EvohpoError):
    """Every member of the population diverged (NaN or inf losses or weights)."""

    exit_code = 1
