"""The batched pool: the VectorPool interface over a batched scenario.

Same semantics as the PettingZoo pools: mpe2 truncates at ``max_cycles`` (and checks the
scenario's termination only before that), a finished env is reset at once, and the step that
finished it returns the real final observation as ``next_obs`` and the new episode's first one
as ``obs``. Every agent is alive in every step (mpe2 agents never leave).

Randomness is seeded exactly like the PettingZoo pools: env ``i`` of a pool reset with seed
``s`` starts episode ``e`` from the explicit generator ``default_rng(episode_seed(s + i, e))``
(``s[i]`` in place of ``s + i`` where one seed per env is given; what mpe2's
``reset(seed=...)`` builds), and each scenario draws from it with mpe2's calls in mpe2's
order. So with the same seed a batched pool and a SyncPool give the same results, and an
env's state is its (seed, episode, actions), as for the other pools: checkpoints rebuild it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evohpo.envs.batched import SCENARIOS
from evohpo.envs.pool import Seeds, StepResult, VectorPool, env_seeds, episode_seed
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.envs.teams import derive_teams
from evohpo.errors import ConfigError, EnvError


class BatchedPool(VectorPool):
    def __init__(self, name: str, kwargs: dict[str, Any], num_envs: int,
                 spec: EnvSpec | None = None):
        if name not in SCENARIOS:
            raise ConfigError(f"env {name!r} has no batched implementation; batched envs: "
                              f"{', '.join(SCENARIOS)}")
        self.name, self.kwargs = name, dict(kwargs)
        self.num_envs = n = num_envs
        self.scenario = SCENARIOS[name](n, **self.kwargs)
        # for the spec
        self.scenario.reset(np.arange(n), [np.random.default_rng(0) for _ in range(n)])
        own = self._spec()
        if spec is not None and spec != own:
            raise EnvError(f"env {name!r}: the batched backend's spaces ({own.describe()}) "
                           f"differ from mpe2's ({spec.describe()}); use env.backend=pettingzoo")
        self.spec = own if spec is None else spec  # the spec given carries the run's teams
        self.t = np.zeros(n, np.int64)         # steps into the current episode
        self.episodes = np.zeros(n, np.int64)  # episodes finished, per env
        self.seeds: list[int | None] = [None] * n
        self.gens = [np.random.default_rng() for _ in range(n)]  # continued when reset unseeded
        self.log = {a: np.zeros((min(self.scenario.max_cycles, 64), n, self._act_width(a)),
                                np.float32)
                    for a in self.spec.agents}  # this episode's actions, to rebuild an env
        self._actions: dict[str, np.ndarray] | None = None
        self._rows = np.arange(n)

    def _spec(self) -> EnvSpec:
        sc = self.scenario
        obs = sc.observe()
        per = {a: AgentSpec(obs_dim=int(obs[a].shape[1]), discrete=not sc.continuous,
                            act_dim=sc.action_size(j)) for j, a in enumerate(sc.agents)}
        agents = tuple(sc.agents)
        return EnvSpec(name=self.name, agents=agents, per_agent=per,
                       teams=derive_teams(self.name, agents))

    def _act_width(self, a: str) -> int:
        return 1 if self.spec[a].discrete else self.spec[a].act_dim

    def _episode_gens(self, idx: np.ndarray) -> list[np.random.Generator]:
        """The generators that start each env's current episode (unseeded envs continue theirs)."""
        gens = []
        for i in idx:
            s = self.seeds[i]
            if s is not None:
                self.gens[i] = np.random.default_rng(episode_seed(s, int(self.episodes[i])))
            gens.append(self.gens[i])
        return gens

    def reset(self, seed: Seeds = None) -> dict[str, np.ndarray]:
        n = self.num_envs
        self.seeds = env_seeds(seed, n)
        self.episodes[:] = 0
        self.t[:] = 0
        idx = np.arange(n)
        self.scenario.reset(idx, self._episode_gens(idx))
        self._actions = None
        return self.scenario.observe()

    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        if self._actions is not None:
            raise RuntimeError("step_async called twice without step_wait")
        n = self.num_envs
        self._actions = {a: np.array(actions[a], dtype=np.float32).reshape(n, -1)
                         for a in self.spec.agents}

    def _record(self, actions: dict[str, np.ndarray]) -> None:
        self._log_rows(int(self.t.max()) + 1)
        for a, x in actions.items():
            self.log[a][self.t, self._rows] = x

    def step_wait(self) -> StepResult:
        if self._actions is None:
            raise RuntimeError("step_wait called without step_async")
        actions, self._actions = self._actions, None
        sc, n = self.scenario, self.num_envs
        self._record(actions)
        sc.step(actions)
        rewards = sc.rewards()
        self.t += 1
        truncated = self.t >= sc.max_cycles
        term = sc.terminal()
        # mpe2: truncation first
        terminated = np.zeros(n, bool) if term is None else term & ~truncated
        next_obs = sc.observe()
        done = truncated | terminated
        if done.any():
            idx = np.flatnonzero(done)
            self.episodes[idx] += 1
            self.t[idx] = 0
            sc.reset(idx, self._episode_gens(idx))
            obs = sc.observe()
        else:
            obs = {a: x.copy() for a, x in next_obs.items()}
        agents = self.spec.agents
        return StepResult(obs=obs, next_obs=next_obs,
                          rewards={a: np.asarray(rewards[a], dtype=np.float32) for a in agents},
                          terminated={a: terminated.copy() for a in agents},
                          truncated={a: truncated.copy() for a in agents},
                          alive={a: np.ones(n, bool) for a in agents}, done=done)

    # ----------------------------------------------------------------------------- state as data
    def get_state(self) -> list[dict[str, Any]]:
        """Each env's seed, episode number and the actions of this episode (as EnvSlots logs
        them)."""
        out = []
        for i in range(self.num_envs):
            acts = [{a: (int(self.log[a][k, i, 0]) if self.spec[a].discrete
                         else self.log[a][k, i].copy())
                     for a in self.spec.agents} for k in range(int(self.t[i]))]
            out.append({"seed": self.seeds[i], "episode": int(self.episodes[i]), "actions": acts})
        return out

    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        """Rebuild every env from :meth:`get_state`'s data: reset with the episode's seed, replay.

        Envs are replayed in groups of equal episode length, each group in one batched run.
        """
        if len(states) != self.num_envs:
            raise ValueError(f"env state for {len(states)} envs, but this pool holds "
                             f"{self.num_envs}")
        if any(st["seed"] is None for st in states):
            raise ValueError("an env reset without a seed cannot be rebuilt")
        self.seeds = [int(st["seed"]) for st in states]
        self.episodes[:] = [int(st["episode"]) for st in states]
        lengths = np.array([len(st["actions"]) for st in states])
        self.t[:] = lengths
        sc = self.scenario
        for length in np.unique(lengths):
            idx = np.flatnonzero(lengths == length)
            sub = SCENARIOS[self.name](len(idx), **self.kwargs)
            sub.reset(np.arange(len(idx)), self._episode_gens(idx))
            for k in range(int(length)):
                acts = {a: np.array([np.asarray(states[int(i)]["actions"][k][a], np.float32)
                                     .reshape(-1) for i in idx]) for a in self.spec.agents}
                self._record_rows(idx, k, acts)
                sub.step(acts)
            for name in sc.state_names():
                sc.get_array(name)[idx] = sub.get_array(name)
            for name in sc.state_lists:  # per-env objects, e.g. collect_treasure's generators
                mine, theirs = getattr(sc, name), getattr(sub, name)
                for j, i in enumerate(idx):
                    mine[i] = theirs[j]
        self._actions = None
        return sc.observe()

    def _record_rows(self, idx: np.ndarray, k: int, acts: dict[str, np.ndarray]) -> None:
        self._log_rows(k + 1)
        for a, x in acts.items():
            self.log[a][k, idx] = x

    def _log_rows(self, rows: int) -> None:
        """Grow the action log (doubling) to hold ``rows`` steps."""
        for a, log in self.log.items():
            if rows > log.shape[0]:
                grown = np.zeros((max(rows, 2 * log.shape[0]), *log.shape[1:]), np.float32)
                grown[:log.shape[0]] = log
                self.log[a] = grown
