"""The population's learn clock: when off-policy members take their gradient steps.

Each member owes gradient steps at its own rate: once per ``learn_step`` of its own env steps it
learns, taking :func:`updates_per_learn` steps (``gradient_steps``, or more to keep
``min_updates_per_step`` per env step). PBT moves every member's ``learn_step`` apart, so members
rarely owe a step on the same vector step; taking each member's steps when they fall due would
make a fused update of one or two members at a time. So the population learns on a shared
**tick**, every :func:`tick` vector steps (the fastest member's ``learn_step``): at a tick every
member takes every step that fell due since the last one. A member's ``learn_acc`` holds what it
owes between ticks (nothing else is kept, so a checkpoint taken between ticks resumes on the
same ticks), its steps are exactly its own in number, and none is taken later than one tick
after it fell due.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evohpo.evolve.member import Member


def updates_per_learn(done: int, learn_step: int, gradient_steps: int,
                      min_per_step: float) -> int:
    """Gradient steps a member takes when it learns (once per ``learn_step`` of its env steps).

    ``gradient_steps``, or more where that falls below ``min_per_step`` per env step: the
    gradient steps owed for the ``learn_step`` env steps up to ``done`` (the member's env steps
    that its learns have taken in, this one's included), so over its life a member takes at
    least ``min_per_step`` per env step, for any learn_step. With too few updates for its data
    (say learn_step 400, one step each), a critic never fits the data: its action-gradient stays
    the same in every state, and the actor following it becomes one constant push (on
    speaker-listener the listener drifts off, far below random).
    """
    def owed(n: int) -> int:
        return math.floor(n * min_per_step + 1e-9)

    return max(gradient_steps, owed(done) - owed(done - learn_step))


def tick(members: Sequence[Member], k: int) -> int:
    """Vector steps between ticks: the smallest ``learn_step`` of the members that learn, in
    vector steps (each member's envs advance ``k`` env steps per vector step), at least 1. So the
    fastest member falls due at most once per tick, and a round of a tick holds every member
    that owes a step."""
    steps = [m.hp.learn_step for m in members if not m.diverged]
    return max(1, min(steps, default=1) // k)


def on_tick(vector_step: int, members: Sequence[Member], k: int) -> bool:
    """Whether the population's ``vector_step`` (counted from the run's start) is a tick."""
    return vector_step % tick(members, k) == 0


def steps_owed(members: Sequence[Member], gradient_steps: int,
               can_learn: Sequence[bool]) -> list[int]:
    """Each member's gradient steps due by now (its learns since the last tick), taken out of its
    ``learn_acc``; a learn that falls due where it cannot learn (``can_learn``: the learning delay
    and a batch's worth of memory) is passed over, as it always was."""
    owed = [0] * len(members)
    for j, m in enumerate(members):
        while m.learn_acc >= m.hp.learn_step:
            m.learn_acc -= m.hp.learn_step
            if can_learn[j]:
                owed[j] += updates_per_learn(m.steps - m.learn_acc, m.hp.learn_step,
                                             gradient_steps, m.hp.min_updates_per_step)
    return owed
