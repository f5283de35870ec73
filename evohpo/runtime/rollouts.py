"""On-policy collection: every on-policy member's rollout on its own slice of the pool.

The pool's steps are kept once, whole, from the oldest rollout still being collected; a member's
rollout is its rows (and, on a game of several teams, its team's agents to learn from: the
learner picks them) of the steps since it last learned. A member learns as soon as its rollout
holds ``hp.rollout`` steps, before the next action is picked, so every step is acted by the
policy that learns from it. At a window's end (:meth:`Rollouts.finish`) every member learns on
what it has collected, so no rollout spans two windows: a member copied or mutated at selection
starts its next rollout with its new policy.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from evohpo.algos.onpolicy import OnPolicy, Rollout
from evohpo.evolve.member import Member

FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "alive")

# what the runtime says of a member's finished learn: its position and the metrics
Learned = Callable[[int, Member, dict[str, float]], None]


def member_rows(n: int, k: int, slots: list[list[int]] | None) -> list[slice]:
    """Each of ``n`` placed members' rows of the pool: its slot's (``k`` envs each); on a game of
    several teams, the slot it plays in."""
    if slots is None:
        return [slice(j * k, (j + 1) * k) for j in range(n)]
    rows = [slice(0, 0)] * n
    for j, slot in enumerate(slots):
        for i in slot:
            rows[i] = slice(j * k, (j + 1) * k)
    return rows


class Rollouts:
    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []  # the pool's steps from index ``first`` on
        self.first = 0
        self.now = 0          # index of the next step
        self.start: list[int] = []  # per placed member: the index its rollout began at

    def place(self, n: int) -> None:
        """``n`` members placed at a window's start. Their rollouts are empty there (see
        :meth:`learn` with ``finish``), except in a run resumed part-way through a window, whose
        rollouts came back with its checkpoint: those are kept."""
        if len(self.start) != n:
            self.start = [self.now] * n

    def add(self, obs: dict[str, np.ndarray], actions: dict[str, np.ndarray],
            rewards: dict[str, np.ndarray], next_obs: dict[str, np.ndarray],
            terminated: dict[str, np.ndarray], alive: dict[str, np.ndarray],
            done: np.ndarray) -> None:
        """One vector step of the whole pool (copied: the pool may reuse its arrays)."""
        step: dict[str, Any] = {f: {a: np.array(x[a]) for a in x}
                for f, x in zip(FIELDS, (obs, actions, rewards, next_obs, terminated, alive),
                                strict=True)}
        step["done"] = np.array(done, bool)
        self.steps.append(step)
        self.now += 1

    def rollout(self, j: int, rows: slice) -> Rollout:
        """Member ``j``'s rollout so far: its rows of the steps since it began."""
        steps = self.steps[self.start[j] - self.first:]

        def stack(f: str) -> dict[str, np.ndarray]:
            return {a: np.stack([s[f][a][rows] for s in steps]) for a in steps[0][f]}

        return Rollout(obs=stack("obs"), actions=stack("actions"), rewards=stack("rewards"),
                       next_obs=stack("next_obs"), terminated=stack("terminated"),
                       alive=stack("alive"), done=np.stack([s["done"][rows] for s in steps]))

    def learn(self, members: list[Member], rows: list[slice], ready: bool, learned: Learned,
              finish: bool = False,
              timed: Callable[[Member], AbstractContextManager[None]] = lambda m: nullcontext(),
              ) -> None:
        """Members whose rollout is full (or, with ``finish``, holds any step) learn from it and
        start the next; before ``ready`` (the learning delay) their rollouts are dropped. A
        member learns inside ``timed(member)`` (a runtime's clock)."""
        for j, m in enumerate(members):
            held = self.now - self.start[j]
            if held == 0 or (held < m.hp.rollout and not finish):
                continue
            if ready and not m.diverged:
                algo: OnPolicy = m.algo  # type: ignore[assignment]
                with timed(m):
                    metrics = algo.learn_rollout(self.rollout(j, rows[j]))
                # summed over agents here, so the window's sums do not depend on whether they
                # were added up in one process or in a Ray actor and then its driver
                totals: dict[str, float] = {}
                for key, v in metrics.items():
                    name = key.split("/")[0]
                    totals[name] = totals.get(name, 0.0) + v
                learned(j, m, totals)
            self.start[j] = self.now
        self.trim()

    def trim(self) -> None:
        """Forget the steps no rollout still holds."""
        oldest = min(self.start, default=self.now)
        if oldest > self.first:
            del self.steps[:oldest - self.first]
            self.first = oldest

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The steps still held (a window stopped part-way) and where each rollout began, as
        arrays."""
        state: dict[str, Any] = {"first": np.array(self.first), "now": np.array(self.now),
                                 "start": np.array(self.start, np.int64)}
        if self.steps:
            for f in FIELDS:
                state[f] = {a: np.stack([s[f][a] for s in self.steps]) for a in self.steps[0][f]}
            state["done"] = np.stack([s["done"] for s in self.steps])
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.first, self.now = (int(np.asarray(state[k]).reshape(-1)[0]) for k in ("first", "now"))
        self.start = [int(s) for s in np.asarray(state["start"]).reshape(-1)]
        self.steps = []
        for i in range(self.now - self.first):
            step: dict[str, Any] = {f: {a: np.asarray(state[f][a][i]) for a in state[f]}
                                    for f in FIELDS}
            step["done"] = np.asarray(state["done"][i], bool)
            self.steps.append(step)
