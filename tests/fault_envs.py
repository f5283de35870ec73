"""A fault-injection PettingZoo env: crashes, hangs, returns NaN observations or drops an agent on
command.

Faults are commanded by constructor keywords (so they pass through ``env.kwargs``). A fault with a
``marker`` file fires once across all envs and restarts: the first env to reach it creates the
file, so a restarted pool runs clean. Without a marker it fires every time. ``crash_one_in=n``
makes only the envs whose first reset seed is a multiple of ``n`` crash: a pool seeds its envs
with consecutive seeds, so one env in each ``n`` raises while the others step on.

``score_crash_at`` and ``score_crash_from`` fault only in the main process, where the trainer's
scoring envs run (an async pool's training envs step in worker processes): ``score_crash_at``
as ``crash_at`` does; ``score_crash_from=n`` makes every step raise once this process's FaultEnvs
have taken ``n`` steps in all, so that fresh scoring envs fail too (``FaultEnv.main_steps``
counts them: a test in the main process sets it to 0 first).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np
from gymnasium import spaces

from tests.toy_envs import MoverPicker


class FaultEnv(MoverPicker):
    metadata = {"name": "fault_env", "is_parallelizable": True}
    main_steps = 0  # steps taken in the main process, by every FaultEnv (score_crash_from)

    def __init__(self, horizon: int = 10, crash_at: int | None = None, hang_at: int | None = None,
                 nan_at: int | None = None, drop_at: int | None = None, marker: str | None = None,
                 exit_at: int | None = None, crash_one_in: int | None = None,
                 score_crash_at: int | None = None, score_crash_from: int | None = None):
        super().__init__(
            {"mover": spaces.Box(-10, 10, (3,), np.float32),
             "picker": spaces.Box(-10, 10, (2,), np.float32)},
            {"mover": spaces.Box(0, 1, (2,), np.float32), "picker": spaces.Discrete(3)})
        self.horizon = horizon
        self.crash_at, self.hang_at, self.nan_at, self.exit_at = crash_at, hang_at, nan_at, exit_at
        self.drop_at, self.marker = drop_at, marker
        self.crash_one_in = crash_one_in
        self.score_crash_at, self.score_crash_from = score_crash_at, score_crash_from
        self.first_seed: int | None = None
        self.total = 0  # steps over this env's whole life

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        if self.first_seed is None:
            self.first_seed = seed
        return super().reset(seed, options)

    def _crashes(self) -> bool:
        one_in, seed = self.crash_one_in, self.first_seed
        return (one_in is None or (seed is not None and seed % one_in == 0)) and self._fires(
            self.crash_at)

    def _scoring_crashes(self) -> bool:
        FaultEnv.main_steps += 1
        start = self.score_crash_from
        return (start is not None and FaultEnv.main_steps > start) or self._fires(
            self.score_crash_at)

    def _fires(self, at: int | None) -> bool:
        if at is None or self.total != at:
            return False
        if self.marker is None:
            return True
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            return True
        except FileExistsError:
            return False

    def _observe(self) -> dict[str, np.ndarray]:
        o = {"mover": self.rng.normal(size=3).astype(np.float32),
             "picker": self.rng.normal(size=2).astype(np.float32)}
        return {a: o[a] for a in self.agents} if self.agents else o

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.total += 1
        self.t += 1
        if self._crashes():
            raise RuntimeError(f"injected crash at step {self.total}")
        if mp.parent_process() is None and self._scoring_crashes():
            raise RuntimeError(f"injected scoring crash at step {self.total}")
        if self._fires(self.exit_at):
            os._exit(7)
        if self._fires(self.hang_at):
            time.sleep(3600)
        acting = list(self.agents)
        rew = {a: float(-np.sum(np.square(np.asarray(actions[a], np.float32) - 0.5)))
               if a == "mover" else float(actions[a] == 1) for a in acting}
        term = {a: False for a in acting}
        trunc = {a: self.t >= self.horizon for a in acting}
        if self.drop_at is not None and self.t == self.drop_at and "picker" in acting:
            term["picker"] = True  # the picker leaves the episode here; the mover plays on
        obs = self._observe()
        if self._fires(self.nan_at):
            obs["mover"] = np.full(3, np.nan, np.float32)
        self.agents = [a for a in acting if not (term[a] or trunc[a])]
        return {a: obs[a] for a in acting}, rew, term, trunc, {a: {} for a in acting}


def fault_env(**kwargs: Any) -> FaultEnv:
    return FaultEnv(**kwargs)
