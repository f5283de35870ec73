"""The learn clock: every member takes exactly its own gradient steps, on shared ticks, so the
fused rounds hold every member that owes a step."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evohpo.algos.fused import PopulationLearner
from evohpo.evolve.member import Member
from evohpo.loop.trainer import Trainer
from evohpo.runtime.clock import on_tick, steps_owed, tick, updates_per_learn
from tests.test_trainer import NO_MUTATION, tiny

LEARN_STEPS = [16, 19, 24, 30]  # as PBT leaves them apart


def stand_ins(learn_steps: list[int], floor: float = 0.04) -> list[Member]:
    return [Member(j, None, SimpleNamespace(hp=SimpleNamespace(  # type: ignore[arg-type]
        learn_step=s, min_updates_per_step=floor)), np.random.default_rng(j))
        for j, s in enumerate(learn_steps)]


def own_schedule(learn_step: int, env_steps: int, floor: float = 0.04) -> int:
    """A member's gradient steps after ``env_steps`` of its own, each learn taken when it falls
    due."""
    return sum(updates_per_learn(n, learn_step, 1, floor)
               for n in range(learn_step, env_steps + 1, learn_step))


def test_each_member_takes_its_own_steps_at_most_one_tick_late() -> None:
    k = 2  # env steps per member per vector step
    members = stand_ins(LEARN_STEPS)
    assert tick(members, k) == 8  # the fastest member's 16 env steps
    taken = [0] * 4
    calls = 0
    for v in range(1201):
        if on_tick(v, members, k):
            owed = steps_owed(members, 1, [True] * 4)
            calls += max(owed)
            for j, n in enumerate(owed):
                taken[j] += n
            # at a tick, each member has taken every step fallen due: its own schedule, exactly
            assert taken == [own_schedule(s, v * k) for s in LEARN_STEPS]
        else:  # between ticks, what fell due by the last tick: never more than a tick behind
            assert taken == [own_schedule(s, (v - v % 8) * k) for s in LEARN_STEPS]
        if v < 1200:
            for m in members:
                m.steps += k
                m.learn_acc += k
    # 2400 env steps each: 150, 126, 100 learns of one step; 80 learns of learn_step 30 take
    # 0.04 per env step, 96 steps (every fifth learn takes two)
    assert taken == [150, 126, 100, 96]
    # one round per tick of the fastest member, plus the second steps of learn_step 30: on
    # average 472 / 166 = 2.8 members per fused round
    assert calls == 150 + 16


def test_a_diverged_member_does_not_set_the_tick() -> None:
    members = stand_ins([4, 40])
    assert tick(members, 1) == 4
    members[0].diverged = True
    assert tick(members, 1) == 40 and tick(members, 64) == 1


def test_learns_passed_over_before_the_memory_is_ready_are_not_owed_later() -> None:
    m = stand_ins([10])[0]
    m.steps = m.learn_acc = 25
    assert steps_owed([m], 1, [False]) == [0] and m.learn_acc == 5
    m.steps, m.learn_acc = 35, 15
    assert steps_owed([m], 3, [True]) == [3] and m.learn_acc == 5


def test_members_out_of_step_learn_together_in_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 members on 8 envs (2 each), 150 vector steps: ticks every 8 of them
    calls: list[int] = []
    learn = PopulationLearner.learn

    def counting(self: PopulationLearner, algos: Any, *args: Any) -> Any:
        calls.append(len(algos))
        return learn(self, algos, *args)

    monkeypatch.setattr(PopulationLearner, "learn", counting)
    cfg = tiny(steps=1200, env={"num_envs": 8}, population={"size": 4},
               evolution={"evo_steps": 10_000, "tournament_size": 1}, mutation=NO_MUTATION)
    t = Trainer(cfg)
    try:
        for m, s in zip(t.members, LEARN_STEPS, strict=True):
            m.algo.set_hyperparams(learn_step=s)
        t.train()
    finally:
        t.close()
    # 300 env steps each, learns up to the last tick's 288: one update per learn, but learn_step
    # 30's fifth learn (150 env steps: 6 updates at 0.04) takes two; one update is one critic step
    assert [m.algo.updates for m in t.members] == [18, 15, 12, 10]
    # every tick's first round holds every member that owes
    assert len(calls) == 18 + 1 and sum(calls) == 18 + 15 + 12 + 10
    # one group, its stacks formed once and kept through every round, however many learn
    assert t.runtime.learner.formed == 1  # type: ignore[attr-defined]
