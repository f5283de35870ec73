"""Where a generation's wall time goes: seconds per phase of the loop, each second counted once.

The loop and the runtime mark their phases (``with phases("learn"): ...``). Phases nest, and
time inside a nested phase is the inner one's alone: a ``best.pt`` written while the kept member
is confirmed is ``checkpoint`` time, not ``confirm`` time, and the other teams' next actions
computed while a step is stored are ``act`` time. So the phases of a window add up to at most
its wall time; what no phase claims is ``other``.

A phase named ``learn/<team>`` is a part of ``learn``: a team's members learning, on a game of
several teams (what the learners share, such as drawing the round's batches, is in ``learn``
alone). Each generation's row (:meth:`Phases.cut`) holds ``time/window_s``, the window's wall
seconds, and ``time/phase/<name>_s`` for every phase the runtime marks (``learn`` with its
parts), zero where a phase took no time.

Timing is a ``perf_counter`` call on entering and leaving a phase: it never touches a random
stream or anything a run computes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType

# the local runtime's phases, in the order a window goes through them
PHASES = ("collect", "act", "scripted", "store", "learn", "score", "confirm", "evolve",
          "checkpoint", "log")
# the Ray driver's: the actors' windows are its collect phase (acting, learning and storing
# happen in the actors), the experience it has them share is its store phase
DRIVER_PHASES = ("collect", "store", "learn", "score", "confirm", "evolve", "checkpoint", "log")


class Phase:
    """``with phases(name):`` -- one reusable object per name, so that entering costs little."""

    __slots__ = ("name", "phases")

    def __init__(self, phases: Phases, name: str):
        self.phases, self.name = phases, name

    def __enter__(self) -> None:
        p = self.phases
        now = p.clock()
        if p.open:  # the enclosing phase stops counting while this one runs
            top = p.open[-1]
            p.seconds[top] = p.seconds.get(top, 0.0) + now - p.mark
        p.open.append(self.name)
        p.mark = now

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        p = self.phases
        now = p.clock()
        name = p.open.pop()
        p.seconds[name] = p.seconds.get(name, 0.0) + now - p.mark
        p.mark = now


class Phases:
    """The current window's seconds per phase (``names``: the ones its rows hold; ``teams``: the
    teams whose learning is timed apart, as ``learn/<team>``)."""

    def __init__(self, names: Sequence[str] = PHASES, teams: Sequence[str] = (),
                 clock: Callable[[], float] = time.perf_counter):
        self.names, self.clock = tuple(names), clock
        self.parts = tuple(f"learn/{t}" for t in teams)
        self.seconds: dict[str, float] = {}
        self.open: list[str] = []  # the phases entered and not yet left, innermost last
        self.mark = clock()  # since when the innermost open phase has been counting
        self.made: dict[str, Phase] = {}

    def __call__(self, name: str) -> Phase:
        p = self.made.get(name)
        if p is None:
            p = self.made[name] = Phase(self, name)
        return p

    def so_far(self, now: float) -> dict[str, float]:
        """The window's seconds per phase up to ``now`` (a reading of the clock), the open ones
        included."""
        out = dict(self.seconds)
        if self.open:
            top = self.open[-1]
            out[top] = out.get(top, 0.0) + now - self.mark
        return out

    def start(self, before: dict[str, float] | None = None) -> None:
        """A window's count starts now (outside any phase), from ``before``: the seconds a
        resumed window spent before its checkpoint."""
        self.seconds, self.open = dict(before or {}), []
        self.mark = self.clock()

    def cut(self, now: float, window_s: float) -> dict[str, float]:
        """The row of the window that ends at ``now`` and lasted ``window_s`` wall seconds; the
        next window's count starts at ``now`` (the phases still open count on in it)."""
        got = self.so_far(now)
        self.seconds = {}
        if self.open:
            self.mark = now
        return row(got, window_s, self.names, self.parts)


def row(seconds: dict[str, float], window_s: float, names: Sequence[str],
        parts: Sequence[str] = ()) -> dict[str, float]:
    """``time/window_s``, ``time/phase/<name>_s`` for each of ``names`` (``learn`` with its
    ``parts``, each also on its own) and ``time/phase/other_s``, what none of them claims."""
    total = {n: seconds.get(n, 0.0) for n in names}
    if "learn" in total:
        total["learn"] += sum(seconds.get(p, 0.0) for p in parts)
    out = {"time/window_s": window_s}
    out.update({f"time/phase/{n}_s": s for n, s in total.items()})
    out.update({f"time/phase/{p}_s": seconds.get(p, 0.0) for p in parts})
    out["time/phase/other_s"] = max(window_s - sum(total.values()), 0.0)
    return {k: round(v, 6) for k, v in out.items()}  # to the microsecond: finer is noise
