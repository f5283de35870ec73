"""Tiny PettingZoo ParallelEnvs with known optima, for tests of the learner and the loop."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv


class MoverPicker(ParallelEnv):
    """Two agents, 'mover' and 'picker', with the given spaces; subclasses observe, step and pay."""

    def __init__(self, obs: dict[str, spaces.Space], act: dict[str, spaces.Space]):
        self.possible_agents = ["mover", "picker"]
        self._obs, self._act = obs, act
        self.rng = np.random.default_rng()
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act[agent]

    def _observe(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._observe(), {a: {} for a in self.agents}


class TargetGame(MoverPicker):
    """Heterogeneous agents, one-step episodes that *terminate*.

    'mover' (continuous, Box[0,1]^2) is paid -sum((a - 0.7)^2); 'picker' (Discrete(4)) is paid 1
    for action 2, else 0. The optimum is known: mover -> (0.7, 0.7), picker -> 2.
    With ``horizon`` > 1 the episode instead *truncates* after that many steps.
    """

    metadata = {"name": "target_game", "is_parallelizable": True}

    def __init__(self, horizon: int = 1, continuous_picker: bool = False):
        super().__init__(
            {"mover": spaces.Box(-1, 1, (3,), np.float32),
             "picker": spaces.Box(-1, 1, (2,), np.float32)},
            {"mover": spaces.Box(0, 1, (2,), np.float32),
             "picker": (spaces.Box(0, 1, (4,), np.float32) if continuous_picker
                        else spaces.Discrete(4))})
        self.horizon = horizon

    def _observe(self) -> dict[str, np.ndarray]:
        noise = self.rng.uniform(-0.1, 0.1, 2).astype(np.float32)  # seeded: runs are reproducible
        return {"mover": np.array([self.t / 10, *noise], np.float32),
                "picker": np.full(2, self.t / 10, np.float32)}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        m = np.asarray(actions["mover"], np.float32)
        p = actions["picker"]
        rew = {"mover": float(-np.sum((m - 0.7) ** 2)),
               "picker": float(int(np.argmax(p)) == 2 if np.ndim(p) else int(p) == 2)}
        end_by_time = self.horizon > 1 and self.t >= self.horizon
        term = {a: self.horizon == 1 for a in self.agents}
        trunc = {a: end_by_time for a in self.agents}
        obs = self._observe()
        if self.horizon == 1 or end_by_time:
            self.agents = []
        return obs, rew, term, trunc, {a: {} for a in self.possible_agents}


def target_game(**kwargs: Any) -> TargetGame:
    return TargetGame(**kwargs)


def not_parallel(**kwargs: Any) -> object:
    return object()


PLAYED: list[int | None] = []  # the seed of every episode a SeedRecorder played in this process


class SeedRecorder(TargetGame):
    """TargetGame noting in PLAYED the reset seed of each episode it plays (at its first step):
    the env seeds an evaluation really played, not those of episodes only begun by auto-reset."""

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        self.seed = seed
        return super().reset(seed, options)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if self.t == 0:
            PLAYED.append(self.seed)
        return super().step(actions)


def seed_recorder(**kwargs: Any) -> SeedRecorder:
    return SeedRecorder(**kwargs)


class SlowGame(TargetGame):
    """TargetGame whose every step sleeps ``sleep_s`` seconds: a slow env, whose time a run's
    phases must show where envs step (collecting, scoring), and nowhere else."""

    def __init__(self, horizon: int = 5, sleep_s: float = 0.0):
        super().__init__(horizon)
        self.sleep_s = sleep_s

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        time.sleep(self.sleep_s)
        return super().step(actions)


def slow_game(**kwargs: Any) -> SlowGame:
    return SlowGame(**kwargs)
